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
		o, err := paymentcache.Thin(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		b = b.WithObjects(o)
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

// The thin copy keeps what finds, judges and wakes a payment, and nothing
// that moves money.
func TestThinKeepsWhatFindsAndWakesAPayment(t *testing.T) {
	p := pay("p", "order-1", true)
	p.Annotations = map[string]string{v1alpha1.AnnotationResolve: "Failed", "team": "x", "kubectl.kubernetes.io/last-applied-configuration": "{big}"}
	p.Finalizers = []string{v1alpha1.FinalizerMoneyInFlight}
	p.Status.History = []v1alpha1.HistoryEntry{{To: v1alpha1.PhasePending}, {To: v1alpha1.PhaseSucceeded}}
	p.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "long text"}}
	p.Status.AmountReceived = &v1alpha1.Money{Value: 500, Currency: "USD"}
	th, err := paymentcache.Thin(p)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case th.Spec.Description != "" || th.Spec.Amount.Value != 0 || th.Status.AmountReceived != nil:
		t.Errorf("thin copy kept money fields: %+v %+v", th.Spec, th.Status)
	case th.Annotations[v1alpha1.AnnotationResolve] != "Failed" || th.Annotations["team"] != "x" || len(th.Annotations) != 2:
		t.Errorf("annotations = %v, want all but kubectl's copy of the manifest", th.Annotations)
	case len(th.Status.History) != 1 || th.Status.History[0].To != v1alpha1.PhaseSucceeded:
		t.Errorf("history = %+v, want the last entry", th.Status.History)
	case len(th.Status.Conditions) != 1 || th.Status.Conditions[0].Message != "" || th.Status.Conditions[0].Reason != "Succeeded":
		t.Errorf("conditions = %+v, want them without messages", th.Status.Conditions)
	case !th.Status.Closed || th.Status.ProviderPaymentID != "pay_p" || th.Spec.MerchantReference != "order-1" || len(th.Finalizers) != 1:
		t.Errorf("thin copy lost what finds or wakes it: %+v", th)
	}
	if p.Spec.Description == "" {
		t.Error("Thin changed the object it was given")
	}
}
