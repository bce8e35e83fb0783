package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// A copy of Refund r1 (which refunded 500) restored from a backup older
// than the ledger's retention is parked: nothing says whether its refund
// went. An operator checks the provider and resolves it Succeeded. Deleted,
// the copy is remembered with that verdict, so the manifest applied again
// adopts it instead of refunding 500 a second time.
func TestARestoredRefundsVerdictIsRemembered(t *testing.T) {
	pol := testPolicy()
	p := settled("order-1", v1alpha1.PhasePartiallyRefunded, orderValue, 500)
	cp := newRefund("r1", 500, t0)
	cp.UID = "copy"
	cp.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-r1"}
	s := payment.PlanRefund(cp, pol, payment.RefundFacts{Payment: p}, t0)
	if s.Outcome.Status.Phase != v1alpha1.RefundUnknown || s.Outcome.Status.CreateRequestedAt != nil {
		t.Fatalf("the restored copy: %s %+v, want parked, nothing sent", s.Why, s.Outcome.Status)
	}
	cp.Status = s.Outcome.Status
	if _, ok := payment.RefundRecord(cp, t0); ok {
		t.Error("a parked copy is remembered before a verdict")
	}
	cp.Annotations[v1alpha1.AnnotationResolve] = "Succeeded"
	cp.Annotations[v1alpha1.AnnotationResolveReason] = "found re_1 at the provider"
	cp.Status = payment.PlanRefund(cp, pol, payment.RefundFacts{Payment: p}, t0.Add(time.Hour)).Outcome.Status
	if cp.Status.Phase != v1alpha1.RefundSucceeded {
		t.Fatalf("resolved: %+v", cp.Status)
	}
	rec, ok := payment.RefundRecord(cp, t0.Add(2*time.Hour))
	if !ok || rec.Phase != string(v1alpha1.RefundSucceeded) || rec.Asked != 500 {
		t.Fatalf("the verdict is not remembered: %+v %v", rec, ok)
	}
	again := newRefund("r1", 500, t0.Add(3*time.Hour))
	again.UID = "again"
	s = payment.PlanRefund(again, pol, payment.RefundFacts{Payment: p, Ledger: []payment.LedgerRecord{rec}}, t0.Add(3*time.Hour))
	if s.Outcome.Status.CreateRequestedAt != nil || s.Outcome.Status.AdoptedAt == nil || s.Outcome.Status.Phase != v1alpha1.RefundSucceeded {
		t.Errorf("the manifest applied again: %s %+v, want the verdict adopted, nothing sent", s.Why, s.Outcome.Status)
	}
	// A Refund never sent and not a copy is not remembered.
	plain := newRefund("r2", 500, t0)
	plain.Status.Phase = v1alpha1.RefundFailed
	if _, ok := payment.RefundRecord(plain, t0); ok {
		t.Error("a Refund that never went out is remembered")
	}
	// Nor one held for its call (its own money-uid) and refused before it.
	plain.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: string(plain.UID)}
	if _, ok := payment.RefundRecord(plain, t0); ok {
		t.Error("a Refund held for its call and never sent is remembered")
	}
}

// A restored copy carries the resolve annotation its original was resolved
// with. It adopts the ledger's record of its refund first (acted on first,
// the annotation would settle it beside the record, never adopting nor
// renewing it); once adopted, the annotation acts, as on any Refund.
func TestARestoredRefundsCarriedResolveWaitsForTheLedger(t *testing.T) {
	pol := testPolicy()
	p := settled("order-1", v1alpha1.PhasePartiallyRefunded, orderValue, 500)
	orig := sentRefund("r1", 500, v1alpha1.RefundSucceeded)
	orig.Spec.Amount = &v1alpha1.Amount{Value: 500, Currency: orderCurrency}
	rec, ok := payment.RefundRecord(&orig, t0)
	if !ok {
		t.Fatal("no record")
	}
	for _, carried := range []string{"Succeeded", "Failed"} {
		t.Run(carried, func(t *testing.T) {
			cp := newRefund("r1", 500, t0.Add(time.Hour))
			cp.UID = "copy"
			cp.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-r1",
				v1alpha1.AnnotationResolve: carried, v1alpha1.AnnotationResolveReason: "checked the provider"}
			facts := payment.RefundFacts{Payment: p, Ledger: []payment.LedgerRecord{rec}}
			s := payment.PlanRefund(cp, pol, facts, t0.Add(time.Hour))
			if s.Outcome.Status.AdoptedAt == nil || s.Outcome.Status.Phase != v1alpha1.RefundSucceeded || s.Outcome.Status.ProviderRefundID != rec.ProviderID {
				t.Fatalf("the carried resolve acted before the ledger (%s): %+v", s.Why, s.Outcome.Status)
			}
			cp.Status = s.Outcome.Status
			if _, ok := payment.RefundRecord(cp, t0.Add(40*24*time.Hour)); !ok {
				t.Error("the adopted copy is not remembered again when it goes")
			}
		})
	}
	// Without a record, the copy is parked first (restored: never sent
	// again), and the carried resolve acts on it after that.
	bare := newRefund("r1", 500, t0.Add(time.Hour))
	bare.UID = "copy"
	bare.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-r1",
		v1alpha1.AnnotationResolve: "Succeeded", v1alpha1.AnnotationResolveReason: "checked the provider"}
	if s := payment.PlanRefund(bare, pol, payment.RefundFacts{Payment: p}, t0.Add(time.Hour)); s.Outcome.Status.Phase != v1alpha1.RefundUnknown {
		t.Errorf("a restored copy without a record, carrying a resolve: %s %+v, want parked first", s.Why, s.Outcome.Status)
	}

	// A copy parked for an unsettled record acts on a resolve made since.
	unsettled := rec
	unsettled.Phase = string(v1alpha1.RefundProcessing)
	cp := newRefund("r1", 500, t0.Add(time.Hour))
	cp.UID = "copy"
	cp.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-r1"}
	facts := payment.RefundFacts{Payment: p, Ledger: []payment.LedgerRecord{unsettled}}
	cp.Status = payment.PlanRefund(cp, pol, facts, t0.Add(time.Hour)).Outcome.Status
	if cp.Status.Phase != v1alpha1.RefundUnknown {
		t.Fatalf("a copy of an unsettled refund: %+v, want parked", cp.Status)
	}
	cp.Annotations[v1alpha1.AnnotationResolve] = "Failed"
	cp.Annotations[v1alpha1.AnnotationResolveReason] = "the provider has no such refund"
	if s := payment.PlanRefund(cp, pol, facts, t0.Add(2*time.Hour)); s.Outcome.Status.Phase != v1alpha1.RefundFailed {
		t.Errorf("resolved while parked: %s %+v, want Failed", s.Why, s.Outcome.Status)
	}
}
