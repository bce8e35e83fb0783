package controllers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paymentcache"
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
	own.add(payment("2", "", ""), now)
	own.add(payment("3", "", ""), now)
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
	obj := func(name, rv string) *v1alpha1.Payment {
		return &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: rv}}
	}
	own := &ownWrites{}
	own.add(obj("a", "1"), now) // its event never comes (the payment was deleted)
	own.add(obj("b", "2"), now.Add(ownWriteMaxAge+2*time.Minute))
	if own.pending(types.NamespacedName{Namespace: "ns", Name: "a"}) != nil {
		t.Error("a last write older than ownWriteMaxAge is still waited for")
	}
	if own.pending(types.NamespacedName{Namespace: "ns", Name: "b"}) == nil {
		t.Error("a fresh last write was forgotten")
	}
	if own.take(obj("a", "1")) {
		t.Error("an entry older than ownWriteMaxAge was kept")
	}
	if !own.take(obj("b", "2")) {
		t.Error("a fresh entry was lost")
	}
}

// TestAReconcileStartsFromACopyNoOlderThanItsLastWrite: current reads the
// API server only while the cached copy may be older than the reconciler's
// last write of the object, and stops once the cache is known to hold it
// (its watch event came, or the API server has nothing newer than the
// cache); it ends the reconcile of an object that is gone.
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
	// start is a reconcile's start: the pending write asked for, then the
	// cache read (cached), then current.
	start := func(cached *v1alpha1.Refund) (*v1alpha1.Refund, bool) {
		t.Helper()
		got, fresh, done, err := current(context.Background(), reader, &own, own.pending(key), key, cached)
		if err != nil || done {
			t.Fatalf("current: done %v, %v", done, err)
		}
		return got, fresh
	}

	// No write of this reconciler: the cache's copy, no read.
	if got, fresh := start(older); got != older || fresh || reads != 0 {
		t.Errorf("without an own write: copy %s (fresh %v), %d reads; want the cached one and none", got.ResourceVersion, fresh, reads)
	}
	// Written, and the cache still has the older copy: the API server's.
	own.add(stored, now)
	if got, fresh := start(older); got.ResourceVersion != stored.ResourceVersion || got.Status.Phase != v1alpha1.RefundPending || !fresh || reads != 1 {
		t.Errorf("while the cache lags the write: copy %s (%s, fresh %v), %d reads; want %s (Pending) from 1 read", got.ResourceVersion, got.Status.Phase, fresh, reads, stored.ResourceVersion)
	}
	// ... and again on the next reconcile, as long as it lags.
	if got, _ := start(older); got.ResourceVersion != stored.ResourceVersion || reads != 2 {
		t.Errorf("the cache still lags: copy %s, %d reads; want %s, 2 reads", got.ResourceVersion, reads, stored.ResourceVersion)
	}
	// The write's event arrives after the reconcile asked what it waits
	// for and before it read the cache's (older) copy: still read again.
	w := own.pending(key)
	f := refundNews{own: &own}
	f.Update(event.UpdateEvent{ObjectOld: older, ObjectNew: stored.DeepCopy()})
	if got, _, _, _ := current(context.Background(), reader, &own, w, key, older); got.ResourceVersion != stored.ResourceVersion || reads != 3 {
		t.Errorf("an event between the ask and the cache read: copy %s, %d reads; want %s, 3 reads", got.ResourceVersion, reads, stored.ResourceVersion)
	}
	// Once the event came (the refund controller's filter saw it): the
	// cache's copy, no read.
	if own.pending(key) != nil {
		t.Error("the write's event did not end the wait for it")
	}
	if got, fresh := start(stored.DeepCopy()); got.ResourceVersion != stored.ResourceVersion || fresh || reads != 3 {
		t.Errorf("after the write's event: copy %s (fresh %v), %d reads; want the cached one, 3 reads", got.ResourceVersion, fresh, reads)
	}

	// A cached copy of the write's own version needs no read, and ends the
	// wait (a closing write's event may never come).
	own.add(stored, now)
	if got, _ := start(stored.DeepCopy()); got.ResourceVersion != stored.ResourceVersion || reads != 3 || own.pending(key) != nil {
		t.Errorf("a cache holding the write: %d reads (want 3), still waited for: %v", reads, own.pending(key) != nil)
	}
	// Someone else wrote after this reconciler, and the cache has that:
	// one read finds the API server has nothing newer; then no more.
	own.add(refund("uid-1", "0", ""), now)
	if got, _ := start(stored.DeepCopy()); got.ResourceVersion != stored.ResourceVersion || reads != 4 {
		t.Errorf("a cache newer than the write: copy %s, %d reads; want the cached one, 4 reads", got.ResourceVersion, reads)
	}
	if got, _ := start(stored.DeepCopy()); got.ResourceVersion != stored.ResourceVersion || reads != 4 {
		t.Errorf("a cache known to be current was read past: %d reads, want 4", reads)
	}
	// Another object of the name at the API server: this one is gone.
	renamed := fake.NewClientBuilder().WithScheme(scheme).WithObjects(refund("uid-2", "", v1alpha1.RefundPending)).Build()
	own.add(refund("uid-1", "99", ""), now)
	if _, _, done, err := current(context.Background(), renamed, &own, own.pending(key), key, older); !done || err != nil {
		t.Errorf("another object of the name: done %v, %v; want the reconcile ended", done, err)
	}
	if own.pending(key) != nil {
		t.Error("a replaced object's write is still waited for")
	}
	// Deleted meanwhile: the reconcile ends, and nothing is remembered of it.
	own.add(refund("uid-1", "99", ""), now)
	if err := api.Delete(context.Background(), stored); err != nil {
		t.Fatal(err)
	}
	if _, _, done, err := current(context.Background(), reader, &own, own.pending(key), key, older); !done || err != nil {
		t.Errorf("a deleted object: done %v, %v; want the reconcile ended", done, err)
	}
	if own.pending(key) != nil {
		t.Error("a deleted object's write is still waited for")
	}
}

// TestTheNewsFiltersEndTheWaitForAnOwnWrite: the payment controller's
// filters tell the memory that the cache a reconcile reads holds the
// version they deliver: the typed cache's of an open payment, the thin
// cache's of a closed one.
func TestTheNewsFiltersEndTheWaitForAnOwnWrite(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	p := func(rv string, closed bool) *v1alpha1.Payment {
		return &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1", ResourceVersion: rv},
			Status: v1alpha1.PaymentStatus{Closed: closed}}
	}
	var own ownWrites
	own.add(p("7", false), now)
	if w := own.pending(key); w == nil || !w.behind("uid-1", "6") || w.behind("uid-1", "7") || w.behind("uid-2", "6") {
		t.Fatalf("behind: want a copy at 6 behind the write at 7, and neither one at 7 nor another object's")
	}
	paymentNews{own: &own}.Update(event.UpdateEvent{ObjectOld: p("6", false), ObjectNew: p("7", false)})
	if own.pending(key) != nil {
		t.Error("after the typed cache's event of the write at 7, it is still waited for")
	}

	// The thin cache's events: a closing write is not taken there (the
	// typed cache, which the payment is read from while it is open, may not
	// hold it yet), a write of a closed payment is (the typed cache holds
	// no closed payment).
	entry := paymentcache.EntryOf
	thin := closedNews{own: &own}
	own.add(p("9", true), now)
	thin.Update(event.TypedUpdateEvent[*paymentcache.Entry]{ObjectOld: entry(p("8", false)), ObjectNew: entry(p("9", true))})
	if w := own.pending(key); w == nil || w.rv != "9" {
		t.Error("the thin cache's event of the closing write ended the wait for it")
	}
	own.add(p("10", true), now)
	if thin.Update(event.TypedUpdateEvent[*paymentcache.Entry]{ObjectOld: entry(p("9", true)), ObjectNew: entry(p("10", true))}) {
		t.Error("an own write of a closed payment was news")
	}
	if own.pending(key) != nil {
		t.Error("after the thin cache's event of a closed payment's write, it is still waited for")
	}
}

// TestASettledCopyOlderThanAnOwnWriteDoesNotMakeAQueryMoot: a status query
// is moot when the cache shows the payment settled meanwhile; a cached copy
// that may be older than the reconciler's last write of the payment is no
// such news (that write came after it: a refund's failure read, say, took
// the payment out of a final phase).
func TestASettledCopyOlderThanAnOwnWriteDoesNotMakeAQueryMoot(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cached := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "uid-1"},
		Status: v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseSucceeded}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cached).Build()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(cached), cached); err != nil {
		t.Fatal(err)
	}
	r := &PaymentReconciler{Client: c}
	query := payment.Step{Action: payment.Query}
	if _, moot := r.settledMeanwhile(context.Background(), cached, query); !moot {
		t.Fatal("a settled cached copy does not make a query moot: the test proves nothing")
	}
	newer := cached.DeepCopy()
	newer.ResourceVersion = "100000"
	r.own.add(newer, time.Now())
	if seen, moot := r.settledMeanwhile(context.Background(), newer, query); moot || seen != nil {
		t.Errorf("a settled copy older than the reconciler's own last write made the query moot (seen %v)", seen != nil)
	}
}
