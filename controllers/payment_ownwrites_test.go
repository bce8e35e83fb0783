package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
