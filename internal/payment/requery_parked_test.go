package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// A payment parked Unknown before any create (no marker, no provider id:
// the ledger says another attempt of the order took money, DuplicatePayment;
// or an unsettled earlier attempt, CreateOutcomeUnknown; or a restored copy
// that could not be proven new) is judged as a copy again after an
// operator's requery, never created on the requery's strength: the order
// may already be charged (docs/state-machine.md, the requery row and the
// Identity table: "not created ... 0 provider calls").

func requeried(t *testing.T, p *v1alpha1.Payment, pol payment.Policy, facts payment.Facts, now time.Time) *v1alpha1.Payment {
	t.Helper()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[v1alpha1.AnnotationRequery] = "please-look-again"
	s := payment.Plan(p, pol, facts, now)
	if s.Action != payment.Write || s.Outcome.Status.Actions.Requery == "" {
		t.Fatalf("requery not acted on: %s %s", s.Action, s.Why)
	}
	return store(p, s.Outcome)
}

func assertNoCreate(t *testing.T, p *v1alpha1.Payment, pol payment.Policy, facts payment.Facts, now time.Time) {
	t.Helper()
	for i := 0; i < 4; i++ {
		s := payment.Plan(p, pol, facts, now)
		switch {
		case s.Action == payment.Create || s.Announces == payment.Create || (s.Action == payment.Write && s.Outcome.Status.CreateRequestedAt != nil && p.Status.CreateRequestedAt == nil):
			t.Fatalf("step %d after the requery: %s (%s): a create marker / create for an order the ledger says may already be charged (phase %s, review %q)",
				i, s.Action, s.Why, p.Status.Phase, review(p))
		case s.Action == payment.Write:
			p = store(p, s.Outcome)
		default:
			return
		}
	}
}

func TestRequeryOfALedgerParkedPaymentNeverCreates(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(100 * time.Hour)
	paidOther, ok := payment.PaymentRecord(settled("order-1-first-try", v1alpha1.PhaseSucceeded, orderValue, 0), now)
	if !ok {
		t.Fatal("no record")
	}
	unsettled := payment.UnsettledRecord(settled("order-1", v1alpha1.PhaseProcessing, 0, 0), now)
	for _, tc := range []struct {
		name string
		rec  payment.LedgerRecord
		want string
	}{
		{"another attempt of the order took the money (DuplicatePayment)", paidOther, v1alpha1.ReasonDuplicatePayment},
		{"the same attempt went unsettled (CreateOutcomeUnknown)", unsettled, v1alpha1.ReasonCreateOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPay("order-1")
			facts := payment.Facts{Ledger: []payment.LedgerRecord{tc.rec}}
			s := payment.Plan(p, pol, facts, now)
			p = store(p, s.Outcome)
			if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != tc.want || p.Status.CreateRequestedAt != nil {
				t.Fatalf("precondition: %s %s %q", s.Why, p.Status.Phase, review(p))
			}
			p = requeried(t, p, pol, facts, now.Add(time.Minute))
			assertNoCreate(t, p, pol, facts, now.Add(2*time.Minute))
		})
	}
}

// A restored copy of a charge (stored payment method, automatic capture) at
// a provider that cannot be searched is parked CreateOutcomeUnknown ("not
// created again", docs Identity, "Observe before create"). Requery: created.
func TestRequeryOfARestoredChargeNeverCreates(t *testing.T) {
	pol := testPolicy()
	pol.LifecycleKnown = true
	pol.LookupByReference = false
	pol.Lifecycle.StoredMethod = true
	now := t0.Add(100 * time.Hour)
	p := newPay("order-1")
	p.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-of-the-original"}
	p.Spec.PaymentMethod = &v1alpha1.PaymentMethodRef{PaymentMethod: "pm_saved"}
	facts := payment.Facts{}
	s := payment.Plan(p, pol, facts, now)
	if s.Action != payment.Lookup {
		t.Fatalf("precondition: a restored copy is looked up first: %s %s", s.Action, s.Why)
	}
	p = store(p, payment.AfterLookup(p, pol, fails(errUnsupported), now))
	if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != v1alpha1.ReasonCreateOutcomeUnknown {
		t.Fatalf("precondition: %s %q", p.Status.Phase, review(p))
	}
	p = requeried(t, p, pol, facts, now.Add(time.Minute))
	assertNoCreate(t, p, pol, facts, now.Add(2*time.Minute))
}

// The Refund twin: a restored copy of a Refund that sent its refund is parked
// ("never sent again"). A requery of it makes PlanRefund run the allowance
// and write a refund marker with a key derived from the copy's new UID: the
// provider cannot replay the original's refund, so the refund is made twice.
func TestRequeryOfARestoredRefundNeverSends(t *testing.T) {
	pol := testPolicy()
	p := paidPayment(0)
	cp := newRefund("r1", 500, t0)
	cp.UID = "copy"
	cp.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-r1"}
	cp.Status = payment.PlanRefund(cp, pol, payment.RefundFacts{Payment: p}, t0).Outcome.Status
	if cp.Status.Phase != v1alpha1.RefundUnknown || cp.Status.CreateRequestedAt != nil {
		t.Fatalf("precondition: %+v", cp.Status)
	}
	cp.Annotations[v1alpha1.AnnotationRequery] = "1"
	s := payment.PlanRefund(cp, pol, payment.RefundFacts{Payment: p}, t0.Add(time.Minute))
	cp.Status = s.Outcome.Status
	for i := 0; i < 3; i++ {
		s = payment.PlanRefund(cp, pol, payment.RefundFacts{Payment: p}, t0.Add(2*time.Minute))
		if s.Action == payment.Create || s.Outcome.Status.CreateRequestedAt != nil {
			t.Fatalf("step %d after the requery: %s (%s): a refund marker/call for a restored copy whose original sent its refund (key %q)",
				i, s.Action, s.Why, s.Outcome.Status.IdempotencyKey)
		}
		if s.Action != payment.Write {
			return
		}
		cp.Status = s.Outcome.Status
	}
}
