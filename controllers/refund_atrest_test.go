package controllers

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestARefundSettledWhileHoldingATokenReleasesIt: a Refund whose status
// query was held back by its provider's rate limit (a token reserved for
// its UID) settles by a webhook (the inbox stores a final phase and clears
// the schedule). Its next reconcile, at rest (payment.RefundAtRest), reads
// neither its payment nor its provider, and still gives the token back:
// kept for a Refund that never calls, it would make every later caller
// wait one token more.
func TestARefundSettledWhileHoldingATokenReleasesIt(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	prov := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kukopay"},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: v1alpha1.ProviderKukoPay, APIURL: "http://127.0.0.1:1",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"},
		},
	}
	prov.Spec.StatusQuery.QPS, prov.Spec.StatusQuery.Burst = ptr.To[int32](1), ptr.To[int32](1)
	p := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "order", UID: "uid-order"}}
	p.Spec.ProviderRef.Name = "kukopay"
	rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rf", UID: "uid-rf",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Payment", Name: "order", UID: "uid-order"}}}}
	rf.Spec.PaymentRef.Name = "order"
	rf.Status.Phase = v1alpha1.RefundSucceeded
	rf.Status.ProviderRefundID = "re_1"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"apiKey": []byte("k")}},
		prov, p, rf,
	).WithStatusSubresource(&v1alpha1.Refund{}).
		WithIndex(&v1alpha1.Refund{}, inbox.IndexRefundPayment, func(o client.Object) []string { return []string{o.(*v1alpha1.Refund).Spec.PaymentRef.Name} }).
		Build()
	g := &gateway.Gateway{Reader: c}
	e, err := g.For(context.Background(), prov)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if adm := e.Admit("someone", gateway.Scheduled, now); !adm.OK {
		t.Fatalf("first token: %+v", adm)
	}
	// The Refund's query, while it was still Processing, was held back.
	if adm := e.Admit("uid-rf", gateway.Scheduled, now); adm.OK {
		t.Fatalf("the refund's query was not held back: %+v", adm)
	}
	r := &RefundReconciler{Client: c, APIReader: c, Scheme: scheme, Clock: clock.RealClock{}, Gateway: g}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "rf"}}); err != nil {
		t.Fatal(err)
	}
	if adm := e.Admit("next", gateway.Scheduled, now); adm.Wait > 1500*time.Millisecond {
		t.Errorf("the next caller waits %s behind a token still reserved for the settled Refund (want about 1s)", adm.Wait)
	}
}

// TestARefundAtRestStillStoresAKeptAnswer: a Refund settled meanwhile (by a
// webhook) whose own query's answer could not be stored (the API server was
// away) is not skipped as at rest: the kept answer is stored first, and not
// left behind to be stored by a later reconcile, over whatever came since.
func TestARefundAtRestStillStoresAKeptAnswer(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	prov := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kukopay"},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: v1alpha1.ProviderKukoPay, APIURL: "http://127.0.0.1:1",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"},
		},
	}
	p := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "order", UID: "uid-order"}}
	p.Spec.ProviderRef.Name = "kukopay"
	p.Status.Phase, p.Status.ProviderPaymentID = v1alpha1.PhaseSucceeded, "pay_1"
	rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rf", UID: "uid-rf",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Payment", Name: "order", UID: "uid-order"}}}}
	rf.Spec.PaymentRef.Name = "order"
	rf.Status.Phase, rf.Status.ProviderRefundID, rf.Status.ProviderPaymentID = v1alpha1.RefundSucceeded, "re_1", "pay_1"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"apiKey": []byte("k")}},
		prov, p, rf,
	).WithStatusSubresource(&v1alpha1.Refund{}).
		WithIndex(&v1alpha1.Refund{}, inbox.IndexRefundPayment, func(o client.Object) []string { return []string{o.(*v1alpha1.Refund).Spec.PaymentRef.Name} }).
		Build()
	if !payment.RefundAtRest(rf, time.Now()) {
		t.Fatal("the Refund is not at rest: the test proves nothing")
	}
	r := &RefundReconciler{Client: c, APIReader: c, Scheme: scheme, Clock: clock.RealClock{}, Gateway: &gateway.Gateway{Reader: c}}
	r.unstored.put("uid-rf", refundAnswer{
		step: payment.RefundStep{Action: payment.Query},
		call: payment.RefundCall{Refund: provider.Refund{ID: "re_1", PaymentID: "pay_1", Status: provider.RefundSucceeded, Amount: 500, Currency: "USD"}},
		at:   time.Now(),
	})
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "rf"}}); err != nil {
		t.Fatal(err)
	}
	if _, kept := r.unstored.get("uid-rf", time.Now()); kept {
		t.Error("the kept answer is still kept: the Refund at rest was skipped without storing it")
	}
}

// TestTheRefundControllerRemembersItsWrites: each write of a Refund by its
// controller (its status, its owner) is remembered until the cache shows
// it, so that a reconcile does not start from the copy before it (current).
func TestTheRefundControllerRemembersItsWrites(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	p := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "order", UID: "uid-order"}}
	rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rf", UID: "uid-rf"}}
	rf.Spec.PaymentRef.Name = "order"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(p, rf).WithStatusSubresource(&v1alpha1.Refund{}).Build()
	r := &RefundReconciler{Client: c, APIReader: c, Scheme: scheme, Clock: clock.RealClock{}}
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(rf), rf); err != nil {
		t.Fatal(err)
	}
	before := rf.ResourceVersion
	if _, err := r.store(ctx, rf, p, func(rf *v1alpha1.Refund) payment.RefundOutcome {
		st := rf.Status
		st.Phase = v1alpha1.RefundPending
		return payment.RefundOutcome{Status: st}
	}); err != nil {
		t.Fatal(err)
	}
	if rf.ResourceVersion == before || !r.own.behind(rf.UID, before) || r.own.behind(rf.UID, rf.ResourceVersion) {
		t.Errorf("after a status write (%s → %s): a copy at %s is not taken for behind it", before, rf.ResourceVersion, before)
	}
	before = rf.ResourceVersion
	if err := r.ownBy(ctx, rf, p); err != nil {
		t.Fatal(err)
	}
	if rf.ResourceVersion == before || !r.own.behind(rf.UID, before) {
		t.Errorf("after the owner's write (%s → %s): a copy at %s is not taken for behind it", before, rf.ResourceVersion, before)
	}
}
