package controllers

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

func TestPaymentNewsIgnoresTheReconcilersOwnWrites(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	payment := func(rv string, phase v1alpha1.PaymentPhase, id string) *v1alpha1.Payment {
		return &v1alpha1.Payment{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-1", ResourceVersion: rv},
			Status:     v1alpha1.PaymentStatus{Phase: phase, ProviderPaymentID: id},
		}
	}
	update := func(f paymentNews, old, new *v1alpha1.Payment) bool {
		return f.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: new})
	}
	own := &ownWrites{}
	f := paymentNews{own: own}

	// The create marker moves the phase; the answer stores the provider id.
	own.add("uid-1", "2", now)
	own.add("uid-1", "3", now)
	if update(f, payment("1", "", ""), payment("2", v1alpha1.PhasePending, "")) {
		t.Error("the reconciler's own marker write woke the payment")
	}
	if update(f, payment("2", v1alpha1.PhasePending, ""), payment("3", v1alpha1.PhasePending, "pay_1")) {
		t.Error("the reconciler's own write of the provider id woke the payment")
	}
	// Another writer (the receiver) settling it is news.
	if !update(f, payment("3", v1alpha1.PhasePending, "pay_1"), payment("4", v1alpha1.PhaseSucceeded, "pay_1")) {
		t.Error("the receiver's write of a new phase was not news")
	}
	// A resourceVersion is delivered once: a relist replaying it is news again.
	if !update(f, payment("1", "", ""), payment("2", v1alpha1.PhasePending, "")) {
		t.Error("a forgotten own write was still filtered")
	}
	// Without the memory, the filter is what it was: phase changes are news.
	if !update(paymentNews{}, payment("1", "", ""), payment("2", v1alpha1.PhasePending, "")) {
		t.Error("a phase change was not news")
	}
}

func TestOwnWritesForgetsOldEntries(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	own := &ownWrites{}
	own.add("a", "1", now)
	own.add("b", "2", now.Add(ownWriteMaxAge+2*time.Minute))
	if own.take("a", "1") {
		t.Error("an entry older than ownWriteMaxAge was kept")
	}
	if !own.take("b", "2") {
		t.Error("a fresh entry was lost")
	}
}

// TestAReconcileStartsFromACopyNoOlderThanItsLastWrite: current reads the
// API server only while the cache may lag the reconciler's last write of
// the object, and stops once the cache is known to hold it (its watch event
// came, or the API server has nothing newer than the cache).
func TestAReconcileStartsFromACopyNoOlderThanItsLastWrite(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "order"}
	refund := func(uid types.UID, rv string, phase v1alpha1.RefundPhase) *v1alpha1.Refund {
		return &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: uid, ResourceVersion: rv},
			Status: v1alpha1.RefundStatus{Phase: phase}}
	}
	// The API server's copy (the fake client numbers its versions itself).
	api := fake.NewClientBuilder().WithScheme(scheme).WithObjects(refund("uid-1", "", v1alpha1.RefundPending)).Build()
	stored := &v1alpha1.Refund{}
	if err := api.Get(context.Background(), key, stored); err != nil {
		t.Fatal(err)
	}
	var reads int
	reader := interceptor.NewClient(api, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		reads++
		return c.Get(ctx, k, obj, opts...)
	}})
	older := refund("uid-1", "1", "") // the cache's copy from before the write
	var own ownWrites
	start := func(cached *v1alpha1.Refund) *v1alpha1.Refund {
		t.Helper()
		got, err := current(context.Background(), reader, &own, key, cached)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	// No write of this reconciler: the cache's copy, no read.
	if got := start(older); got != older || reads != 0 {
		t.Errorf("without an own write: copy %s, %d reads; want the cached one and none", got.ResourceVersion, reads)
	}
	// Written, and the cache still has the older copy: the API server's.
	own.add("uid-1", stored.ResourceVersion, now)
	if got := start(older); got.ResourceVersion != stored.ResourceVersion || got.Status.Phase != v1alpha1.RefundPending || reads != 1 {
		t.Errorf("while the cache lags the write: copy %s (%s), %d reads; want %s (Pending) from 1 read", got.ResourceVersion, got.Status.Phase, reads, stored.ResourceVersion)
	}
	// ... and again on the next reconcile, as long as it lags.
	if got := start(older); got.ResourceVersion != stored.ResourceVersion || reads != 2 {
		t.Errorf("the cache still lags: copy %s, %d reads; want %s, 2 reads", got.ResourceVersion, reads, stored.ResourceVersion)
	}
	// The write's watch event came (the refund controller's filter saw
	// it): the cache's copy, no read.
	f := refundNews{own: &own}
	f.Update(event.UpdateEvent{ObjectOld: older, ObjectNew: stored.DeepCopy()})
	if got := start(stored.DeepCopy()); got.ResourceVersion != stored.ResourceVersion || reads != 2 {
		t.Errorf("after the write's event: copy %s, %d reads; want the cached one, 2 reads", got.ResourceVersion, reads)
	}
	if own.behind("uid-1", older.ResourceVersion) {
		t.Error("the write's event did not end the wait for it")
	}

	// A cached copy of the write's own version needs no read either.
	own.add("uid-1", stored.ResourceVersion, now)
	if got := start(stored.DeepCopy()); got.ResourceVersion != stored.ResourceVersion || reads != 2 {
		t.Errorf("a cache holding the write: %d reads, want 2", reads)
	}
	// Someone else wrote after this reconciler, and the cache has that:
	// one read finds the API server has nothing newer; then no more.
	own.add("uid-1", "0", now)
	if got := start(stored.DeepCopy()); got.ResourceVersion != stored.ResourceVersion || reads != 3 {
		t.Errorf("a cache newer than the write: copy %s, %d reads; want the cached one, 3 reads", got.ResourceVersion, reads)
	}
	if got := start(stored.DeepCopy()); got.ResourceVersion != stored.ResourceVersion || reads != 3 {
		t.Errorf("a cache known to be current was read past: %d reads, want 3", reads)
	}
	// Deleted meanwhile: NotFound, and nothing is remembered of it.
	own.add("uid-1", "99", now)
	if err := api.Delete(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	if _, err := current(context.Background(), reader, &own, key, older); !apierrors.IsNotFound(err) {
		t.Errorf("a deleted object: %v, want NotFound", err)
	}
	if own.behind("uid-1", older.ResourceVersion) {
		t.Error("a deleted object's write is still waited for")
	}
}

// TestPaymentNewsEndsTheWaitForAnOwnWrite: the payment controller's filter
// also tells the memory that the cache holds the version it delivers.
func TestPaymentNewsEndsTheWaitForAnOwnWrite(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var own ownWrites
	own.add("uid-1", "7", now)
	if !own.behind("uid-1", "6") || own.behind("uid-1", "7") {
		t.Fatal("behind: want a copy at 6 behind the write at 7, and one at 7 not")
	}
	p := func(rv string) *v1alpha1.Payment {
		return &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "uid-1", ResourceVersion: rv}}
	}
	paymentNews{own: &own}.Update(event.UpdateEvent{ObjectOld: p("6"), ObjectNew: p("7")})
	if own.behind("uid-1", "6") {
		t.Error("after the event of the write at 7, a copy at 6 is still taken for behind it")
	}
}
