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
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// atRest is a fake API server with a KukoPay provider, a Payment "order"
// that succeeded and its Refund "rf", owned and Succeeded ("re_1"): at rest.
// edit changes the objects before they are stored.
type atRest struct {
	scheme *runtime.Scheme
	prov   *v1alpha1.PaymentProvider
	p      *v1alpha1.Payment
	rf     *v1alpha1.Refund
	api    client.WithWatch
}

func newAtRest(t *testing.T, edit func(*atRest)) *atRest {
	t.Helper()
	w := &atRest{scheme: runtime.NewScheme()}
	if err := corev1.AddToScheme(w.scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(w.scheme); err != nil {
		t.Fatal(err)
	}
	w.prov = &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kukopay"},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: v1alpha1.ProviderKukoPay, APIURL: "http://127.0.0.1:1",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"},
		},
	}
	w.p = &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "order", UID: "uid-order"}}
	w.p.Spec.ProviderRef.Name = "kukopay"
	w.p.Status.Phase, w.p.Status.ProviderPaymentID = v1alpha1.PhaseSucceeded, "pay_1"
	w.rf = &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rf", UID: "uid-rf",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Payment", Name: "order", UID: "uid-order"}}}}
	w.rf.Spec.PaymentRef.Name = "order"
	w.rf.Status.Phase, w.rf.Status.ProviderRefundID, w.rf.Status.ProviderPaymentID = v1alpha1.RefundSucceeded, "re_1", "pay_1"
	if edit != nil {
		edit(w)
	}
	w.api = fake.NewClientBuilder().WithScheme(w.scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"apiKey": []byte("k")}},
		w.prov, w.p, w.rf,
	).WithStatusSubresource(&v1alpha1.Refund{}).
		WithIndex(&v1alpha1.Refund{}, inbox.IndexRefundPayment, func(o client.Object) []string { return []string{o.(*v1alpha1.Refund).Spec.PaymentRef.Name} }).
		Build()
	return w
}

// reconciler is a RefundReconciler reading the fake API server through
// cache (nil: the API server itself).
func (w *atRest) reconciler(cache client.Client) *RefundReconciler {
	if cache == nil {
		cache = w.api
	}
	return &RefundReconciler{Client: cache, APIReader: w.api, Scheme: w.scheme, Clock: clock.RealClock{}, Gateway: &gateway.Gateway{Reader: w.api}}
}

// TestARefundSettledWhileHoldingATokenReleasesIt: a Refund whose status
// query was held back by its provider's rate limit (a token reserved for
// its UID) settles by a webhook (the inbox stores a final phase and clears
// the schedule). Its next reconcile, at rest (payment.RefundAtRest), reads
// neither its payment nor its provider, and still gives the token back:
// kept for a Refund that never calls, it would make every later caller
// wait one token more.
func TestARefundSettledWhileHoldingATokenReleasesIt(t *testing.T) {
	w := newAtRest(t, func(w *atRest) {
		w.prov.Spec.StatusQuery.QPS, w.prov.Spec.StatusQuery.Burst = ptr.To[int32](1), ptr.To[int32](1)
	})
	r := w.reconciler(nil)
	e, err := r.Gateway.For(context.Background(), w.prov)
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
	w := newAtRest(t, nil)
	if !payment.RefundAtRest(w.rf, time.Now()) {
		t.Fatal("the Refund is not at rest: the test proves nothing")
	}
	r := w.reconciler(nil)
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

// TestARefundReconcileDoesNotStartFromACopyOlderThanItsWrite: the refund
// controller settled a Refund (its last write), and its cache still holds
// the copy from before, with a status query due. The next reconcile starts
// from the API server's copy: at rest, it calls nobody and writes nothing.
// So does one whose cache read returns the older copy while the write's
// watch event arrives (the reconcile asked what it waits for before).
func TestARefundReconcileDoesNotStartFromACopyOlderThanItsWrite(t *testing.T) {
	t.Parallel()
	w := newAtRest(t, func(w *atRest) {
		// Before the write that settled it: Pending, a status query due.
		w.rf.Status.Phase = v1alpha1.RefundPending
		due := metav1.NewMicroTime(time.Now().Add(-time.Minute))
		w.rf.Status.Query.NextTime = &due
	})
	api, rf := w.api, w.rf
	ctx := context.Background()
	older := &v1alpha1.Refund{}
	if err := api.Get(ctx, client.ObjectKeyFromObject(rf), older); err != nil {
		t.Fatal(err)
	}
	// The controller's write that settled it.
	settled := older.DeepCopy()
	settled.Status.Phase, settled.Status.Query.NextTime = v1alpha1.RefundSucceeded, nil
	if err := api.Status().Update(ctx, settled); err != nil {
		t.Fatal(err)
	}
	if !payment.RefundAtRest(settled, time.Now()) || payment.RefundAtRest(older, time.Now()) {
		t.Fatal("want the settled copy at rest and the older one not: the test proves nothing")
	}
	var (
		writes  int
		r       *RefundReconciler
		arrives bool // the write's event arrives during the cache read
	)
	cache := interceptor.NewClient(api, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if rc, ok := obj.(*v1alpha1.Refund); ok && key.Name == "rf" {
				older.DeepCopyInto(rc) // the watch has not delivered the write
				if arrives {
					(refundNews{own: &r.own}).Update(event.UpdateEvent{ObjectOld: older, ObjectNew: settled})
				}
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			writes++
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes++
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	r = w.reconciler(cache)
	for _, arrives = range []bool{false, true} {
		r.own.add(settled, time.Now())
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rf)}); err != nil {
			t.Fatal(err)
		}
		if writes != 0 {
			t.Fatalf("%d writes by a reconcile of a Refund settled by the controller's last write (its event arriving during the cache read: %v), want none: planned on the cache's older copy", writes, arrives)
		}
	}
}

// TestTheRefundControllerRemembersItsWrites: each write of a Refund by its
// controller (its status, its hold, its owner) is remembered until the cache shows
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
	key := client.ObjectKeyFromObject(rf)
	if w := r.own.pending(key); rf.ResourceVersion == before || w == nil || !w.behind(rf.UID, before) || w.behind(rf.UID, rf.ResourceVersion) {
		t.Errorf("after a status write (%s → %s): a copy at %s is not taken for behind it", before, rf.ResourceVersion, before)
	}
	before = rf.ResourceVersion
	if err := r.holdMoney(ctx, rf, p); err != nil {
		t.Fatal(err)
	}
	if w := r.own.pending(key); rf.ResourceVersion == before || w == nil || !w.behind(rf.UID, before) {
		t.Errorf("after the hold's write (%s → %s): a copy at %s is not taken for behind it", before, rf.ResourceVersion, before)
	}
	before = rf.ResourceVersion
	if err := r.ownBy(ctx, rf, p); err != nil {
		t.Fatal(err)
	}
	if w := r.own.pending(key); rf.ResourceVersion == before || w == nil || !w.behind(rf.UID, before) {
		t.Errorf("after the owner's write (%s → %s): a copy at %s is not taken for behind it", before, rf.ResourceVersion, before)
	}
}
