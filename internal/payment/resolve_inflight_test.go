package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// TestResolveFailedWaitsForACreatesAnswer: a create whose outcome is unknown
// (its marker stored, the call timed out, no provider id, no review) may
// have charged the payer. Resolved Failed, the payment would never look the
// create up, and its order would be free for a new Payment under another
// key: charged twice. The resolve is refused, as for a capture with no
// answer; Succeeded is taken, and so is Failed once the look-up has put
// the payment under review (CreateOutcomeUnknown: a human decides).
func TestResolveFailedWaitsForACreatesAnswer(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Minute)
	p := newPay("resolve-lost-create")
	s := payment.Plan(p, pol, payment.Facts{}, now)
	if s.Action != payment.Write || s.Announces != payment.Create {
		t.Fatalf("step %s, want the create marker", s.Action)
	}
	p = store(p, s.Outcome)
	p = store(p, payment.AfterCreate(p, pol, fails(errTimeout), now))
	if p.Status.CreateRequestedAt == nil || payment.ProviderID(p) != "" || p.Status.Phase.IsFinal() {
		t.Fatalf("after the lost create: %+v", p.Status)
	}
	resolve := func(p *v1alpha1.Payment, to string) *v1alpha1.Payment {
		r := annotate(p, v1alpha1.AnnotationResolve, to)
		r.Annotations[v1alpha1.AnnotationResolveReason] = "stuck"
		return store(r, payment.Plan(r, pol, payment.Facts{}, now.Add(time.Second)).Outcome)
	}
	for _, to := range []string{"Failed", "Expired", "Canceled"} {
		r := resolve(p, to)
		if r.Status.Phase.IsFinal() {
			t.Errorf("resolved %s while its create had no answer: %s", to, r.Status.Phase)
		}
		if next := payment.Plan(r, pol, payment.Facts{}, now.Add(time.Hour)); next.Action == payment.Nothing {
			t.Errorf("after the refused resolve %s the create is not looked up: %s (%s)", to, next.Action, next.Why)
		}
	}
	if r := resolve(p, "Succeeded"); r.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("resolve Succeeded while the create had no answer: %s, want Succeeded", r.Status.Phase)
	}
	parked := p.DeepCopy()
	parked.Status = payment.ApplyEvent(parked, payment.Observation{Source: v1alpha1.SourceCreate, Observed: payment.ObservedUnknown,
		Review: v1alpha1.ReasonCreateOutcomeUnknown, Reason: "the look-up found nothing"}, now).Status
	if r := resolve(parked, "Failed"); r.Status.Phase != v1alpha1.PhaseFailed {
		t.Errorf("resolve Failed under CreateOutcomeUnknown review: %s, want Failed", r.Status.Phase)
	}
}

// TestResolveFailedWaitsForARefundCallsAnswer: a Refund whose call got no
// answer (its marker, no refund id, no review) may stand at the provider.
// Resolved Failed, it would never be looked up, and RefundAllowance would
// free its amount for a second Refund beside it: refunded twice. The
// resolve is refused; once its look-up puts it under review, it is taken.
func TestResolveFailedWaitsForARefundCallsAnswer(t *testing.T) {
	pol := testPolicy()
	p := paidPayment(0)
	a := newRefund("a", 500, t0)
	s := payment.PlanRefund(a, pol, payment.RefundFacts{Payment: p}, t0)
	if s.Action != payment.Write || s.Outcome.Status.CreateRequestedAt == nil {
		t.Fatalf("step %s, want the refund marker", s.Action)
	}
	a.Status = s.Outcome.Status
	a.Status = payment.AfterRefundCreate(a, pol, payment.RefundCall{Err: errTimeout}, t0.Add(time.Second)).Status
	if a.Status.CreateRequestedAt == nil || a.Status.ProviderRefundID != "" || a.Status.Phase.IsFinal() {
		t.Fatalf("after the lost refund call: %+v", a.Status)
	}
	resolve := func(a *v1alpha1.Refund) *v1alpha1.Refund {
		r := annotated(a, v1alpha1.AnnotationResolve, "Failed", v1alpha1.AnnotationResolveReason, "timed out, retrying with a new Refund")
		if out, _, ok := payment.RefundOperatorAction(r, t0.Add(2*time.Second)); ok {
			if _, refused := out.Refusal(); !refused {
				r.Status = out.Status
			}
		}
		return r
	}
	r := resolve(a)
	if r.Status.Phase == v1alpha1.RefundFailed {
		t.Fatal("resolved Failed while its refund call had no answer")
	}
	// Still in flight, it counts: a Refund of everything is granted the
	// rest beside it, not the whole.
	b := newRefund("b", 0, t0.Add(time.Minute))
	if amount, _, _ := payment.RefundAllowance(b, p, []v1alpha1.Refund{*r}); amount.Value > orderValue-500 {
		t.Errorf("a Refund of everything is granted %d beside one of 500 whose call had no answer", amount.Value)
	}
	parked := a.DeepCopy()
	parked.Status = payment.ApplyRefund(parked, payment.Observation{Source: v1alpha1.SourceCreate, Observed: payment.ObservedUnknown,
		Review: v1alpha1.ReasonCreateOutcomeUnknown, Reason: "the look-up found nothing"}, t0.Add(time.Hour)).Status
	if r := resolve(parked); r.Status.Phase != v1alpha1.RefundFailed {
		t.Errorf("resolve Failed under CreateOutcomeUnknown review: %s, want Failed", r.Status.Phase)
	}
}
