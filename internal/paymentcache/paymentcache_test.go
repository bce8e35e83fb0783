package paymentcache_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/paymentcache"
	"github.com/paywarden/paywarden/internal/scheme"
)

func pay(name, ref string, closed bool) *v1alpha1.Payment {
	return &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "kuko"}, MerchantReference: ref,
			Description: "the whole object", Amount: v1alpha1.Amount{Value: 500, Currency: "USD"},
		},
		Status: v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseSucceeded, ProviderPaymentID: "pay_" + name, Closed: closed},
	}
}

func thin(t *testing.T, ps ...*v1alpha1.Payment) client.Client {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(scheme.New())
	for name, keys := range inbox.PaymentIndexes() {
		b = b.WithIndex(&v1alpha1.Payment{}, name, keys)
	}
	for _, p := range ps {
		// What the thin cache reads back: identity, provider, phase.
		b = b.WithObjects(&v1alpha1.Payment{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
			Spec:       v1alpha1.PaymentSpec{ProviderRef: p.Spec.ProviderRef, MerchantReference: p.Spec.MerchantReference},
			Status:     v1alpha1.PaymentStatus{Phase: p.Status.Phase, ProviderPaymentID: p.Status.ProviderPaymentID, Closed: p.Status.Closed},
		})
	}
	return b.Build()
}

func typed(ps ...*v1alpha1.Payment) client.Client {
	b := fake.NewClientBuilder().WithScheme(scheme.New())
	for name, keys := range inbox.PaymentIndexes() {
		b = b.WithIndex(&v1alpha1.Payment{}, name, keys)
	}
	for _, p := range ps {
		b = b.WithObjects(p.DeepCopy())
	}
	return b.Build()
}

// A closed payment, which the cache of open work does not hold, is read
// whole from the API server, by name and by look-up; a listing that is no
// look-up sees open work only.
func TestReaderFindsClosedPaymentsWhole(t *testing.T) {
	ctx := context.Background()
	open, closed, gone := pay("open", "order-1", false), pay("closed", "order-2", true), pay("gone", "order-2", true)
	// "new" is in the typed cache and not yet in the thin one (another
	// informer, behind); "gone" was deleted after the thin cache saw it.
	fresh := pay("new", "order-2", false)
	api := typed(open, closed, fresh)
	r := paymentcache.Reader{
		Reader: typed(open, fresh), Thin: thin(t, open, closed, gone), API: api,
		Lookups: []string{inbox.IndexPaymentMerchantRef, inbox.IndexPaymentProviderID},
	}

	var p v1alpha1.Payment
	if err := r.Get(ctx, types.NamespacedName{Namespace: "shop", Name: "closed"}, &p); err != nil || p.Spec.Description != "the whole object" {
		t.Fatalf("Get of a closed payment = %v, %+v; want it whole from the API server", err, p.Spec)
	}
	if err := r.Get(ctx, types.NamespacedName{Namespace: "shop", Name: "gone"}, &p); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a deleted payment = %v, want NotFound", err)
	}
	// The typed cache has not heard "closing" close yet; the thin cache has.
	closing := pay("closing", "order-3", true)
	stale := pay("closing", "order-3", false)
	stale.Spec.Description = "the copy before it closed"
	r2 := paymentcache.Reader{Reader: typed(stale), Thin: thin(t, closing), API: typed(closing)}
	if err := r2.Get(ctx, types.NamespacedName{Namespace: "shop", Name: "closing"}, &p); err != nil || !p.Status.Closed || p.Spec.Description != "the whole object" {
		t.Fatalf("Get of a payment the thin cache holds closed = %v, %+v; want it from the API server, closed", err, p)
	}
	r2.Thin = thin(t, pay("closing", "order-3", false))
	if err := r2.Get(ctx, types.NamespacedName{Namespace: "shop", Name: "closing"}, &p); err != nil || p.Spec.Description != "the copy before it closed" {
		t.Fatalf("Get of a payment both caches hold open = %v, %+v; want the typed cache's copy", err, p.Spec)
	}

	var l v1alpha1.PaymentList
	if err := r.List(ctx, &l, client.InNamespace("shop"), client.MatchingFields{inbox.IndexPaymentMerchantRef: inbox.Key("kuko", "order-2")}); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, p := range l.Items {
		names[p.Name] = p.Spec.Description
	}
	if len(l.Items) != 2 || names["closed"] != "the whole object" || names["new"] != "the whole object" {
		t.Fatalf("look-up by order = %+v, want the closed payment whole and the one the thin cache has not seen (the deleted one left out)", l.Items)
	}
	if err := r.List(ctx, &l, client.InNamespace("shop"), client.MatchingFields{inbox.IndexPaymentProviderID: inbox.Key("kuko", "pay_open")}); err != nil || len(l.Items) != 1 || l.Items[0].Name != "open" {
		t.Fatalf("look-up of an open payment = %v, %+v", err, l.Items)
	}
	if err := r.List(ctx, &l, client.InNamespace("shop")); err != nil || len(l.Items) != 2 {
		t.Fatalf("a listing that is no look-up = %v, %+v; want open work only", err, l.Items)
	}
	// Other kinds pass through.
	var rl v1alpha1.RefundList
	if err := r.List(ctx, &rl); err != nil {
		t.Fatal(err)
	}
}
