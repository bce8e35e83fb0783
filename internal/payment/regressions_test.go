package payment_test

// Regressions found by an adversarial review of the refund reads, refund
// reversals, close-out and dispute rules. Each test's comment describes the
// defect it guards against (as it was before the fix); the test fails if it
// comes back.

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

func rvCanCancel() payment.Policy {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Cancel: true, ManualCapture: true}, true
	return pol
}

func rvExpiring(capture v1alpha1.CaptureMethod) *v1alpha1.Payment {
	p := expiresAfter(created("co"), 10*time.Minute)
	p.Spec.CaptureMethod = capture
	return p
}

// R1a: the close-out cancel is not re-validated after its lookup finds the
// payment Processing (money moving): the cancel goes, and when the provider
// refuses it (Stripe/KukoPay refuse cancelling a processing/paid payment) the
// payment is closed out locally as Expired - a final phase, no more queries.
func TestRegressionCloseOutCancelsAProcessingPayment(t *testing.T) {
	pol := rvCanCancel()
	past := t0.Add(11 * time.Minute)
	p := rvExpiring(v1alpha1.CaptureAutomatic)
	p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusPending), true, past))
	if p.Status.Operation == nil {
		t.Fatal("setup: no close-out cancel")
	}
	// The op was stored by AfterQuery, not by a Write: not fresh -> lookup first.
	now := past.Add(2 * time.Second)
	step := payment.Plan(p, pol, payment.Facts{}, now)
	if step.Action != payment.Query {
		t.Fatalf("setup: %v (%s), want the cancel's lookup", step.Action, step.Why)
	}
	// Payer paid by bank debit meanwhile: Processing.
	p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusProcessing), step.CloseOut, now))
	if p.Status.Phase != v1alpha1.PhaseProcessing {
		t.Fatalf("setup: %s", p.Status.Phase)
	}
	step = payment.Plan(p, pol, payment.Facts{}, now)
	if step.Action == payment.Write && step.Outcome.Status.Operation != nil {
		p = store(p, step.Outcome)
		step = payment.Plan(p, pol, payment.Facts{FreshOperation: true}, now)
	}
	if step.Action == payment.CallCancel {
		t.Errorf("close-out cancel (UnpaidTimeout) sent for a Processing payment")
	}
	// Provider refuses (payment is processing): closed out locally.
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, fails(errRefused), now))
	if p.Status.Phase == v1alpha1.PhaseExpired {
		t.Errorf("a Processing payment ended %s (locally=%v) after its close-out cancel was refused", p.Status.Phase, p.Status.ExpiredLocally)
	}
}

// R1b: a close-out cancel answered with anything not final (Processing,
// Authorized) is overwritten by a synthetic Pending+PastExpiry: Expired.
func TestRegressionCloseOutIgnoresTheCancelsAnswer(t *testing.T) {
	for _, st := range []provider.Status{provider.StatusProcessing, provider.StatusAuthorized} {
		pol := rvCanCancel()
		past := t0.Add(11 * time.Minute)
		p := rvExpiring(v1alpha1.CaptureManual)
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusPending), true, past))
		p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, answer(st), past))
		if p.Status.Phase == v1alpha1.PhaseExpired {
			t.Errorf("cancel answered %s -> payment %s (locally=%v)", st, p.Status.Phase, p.Status.ExpiredLocally)
		}
	}
}

// R2: a Lowers read answered before a newer refund total was stored (a
// webhook of another refund) is applied on the fresh copy (conflict retry
// or unstored answer) and takes the total below the newer figure.
func TestRegressionStaleLowerReadBeatsNewerWebhook(t *testing.T) {
	pol := testPolicy()
	p := succeededPayment()
	now := t0.Add(time.Hour)
	// A (300) and B (200) counted: 500.
	p = store(p, payment.AfterRefundRead(p, pol, refundedAnswer(500), payment.RefundRead{Counts: []types.UID{"A", "B"}}, now))
	// A reversed: Plan asks for a lowering read.
	facts := payment.Facts{SucceededRefunds: []types.UID{"B"}, ReversedRefunds: []types.UID{"A"}}
	step := payment.Plan(p, pol, facts, now)
	if step.Read == nil || !step.Read.Lowers {
		t.Fatalf("setup: %v %+v", step.Action, step.Read)
	}
	answered := refundedAnswer(200) // provider at t1: only B
	// t2: a dashboard refund of 400 succeeds; its charge.refunded webhook is stored.
	hook := payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedRefund, EventID: "evt-dash",
		RefundedTotal: &v1alpha1.Money{Value: 600, Currency: orderCurrency}}
	p = store(p, payment.ApplyEvent(p, hook, now.Add(time.Second)))
	if p.Status.AmountRefunded.Value != 600 {
		t.Fatalf("setup: %+v", p.Status.AmountRefunded)
	}
	// t3: the read's write, re-decided on the fresh copy.
	p = store(p, payment.AfterRefundRead(p, pol, answered, *step.Read, now.Add(2*time.Second)))
	if p.Status.AmountRefunded.Value < 600 {
		t.Errorf("refunded total went down to %d from a newer 600 (provider truth 600)", p.Status.AmountRefunded.Value)
	}
	if _, behind := payment.RefundsUncounted(p, facts); !behind {
		t.Logf("and nothing will read again: RefundsCounted=%v RefundsReversed=%v", p.Status.RefundsCounted, p.Status.RefundsReversed)
	}
}

// R3: a Refund that fails without having been Succeeded locally (pending ->
// failed; or pending -> succeeded -> failed seen only at its end) after the
// payment counted it (Stripe charge.refunded / amount_refunded counts
// pending refunds) is never un-counted: the payment stays Refunded and a new
// Refund of the money is refused.
func TestRegressionPendingRefundFailedStaysCounted(t *testing.T) {
	pol := testPolicy()
	p := paidPayment(0)
	// charge.refunded at refund creation: amount_refunded = full amount.
	p = store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedRefund, EventID: "evt-ch-refunded",
		RefundedTotal: &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}}, t0.Add(time.Hour)))
	if p.Status.Phase != v1alpha1.PhaseRefunded {
		t.Fatalf("setup: %s", p.Status.Phase)
	}
	a := sentRefund("a", orderValue, v1alpha1.RefundProcessing)
	a.Status = payment.ApplyRefund(&a, refundObs(payment.ObservedFailed, "evt-refund-failed", withFailure("insufficient_funds", "")), t0.Add(2*time.Hour)).Status
	if a.Status.Phase != v1alpha1.RefundFailed {
		t.Fatalf("setup: %s", a.Status.Phase)
	}
	facts := payment.Facts{}
	if payment.RefundMayLower(&a) {
		facts.ReversedRefunds = []types.UID{a.UID}
	}
	if step := payment.Plan(p, pol, facts, t0.Add(3*time.Hour)); step.Action != payment.Query {
		t.Errorf("payment %s refunded %d after its only refund failed: %v (%s), no read", p.Status.Phase, p.Status.AmountRefunded.Value, step.Action, step.Why)
	}
	b := newRefund("b", orderValue, t0.Add(4*time.Hour))
	if _, wait, refusal := payment.RefundAllowance(b, p, []v1alpha1.Refund{a}); refusal != "" {
		t.Errorf("re-refund refused (%s); wait %q", refusal, wait)
	}
}

// R4: a tracked payment (spec.providerPaymentID, captureMethod defaulting to
// Automatic) approved by the payer (PayPal intent CAPTURE: APPROVED) can
// never be captured: no automatic capture, and the capture annotation waits
// for Authorized, which never comes.
func TestRegressionTrackedApprovedPaymentCannotBeCaptured(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{ManualCapture: true, AuthorizeStep: true, Checkout: true}, true
	p := lifecyclePay("tracked", v1alpha1.CaptureAutomatic)
	p.Spec.ProviderPaymentID = "pay_1"
	p = store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedApproved, EventID: "evt-approved", ProviderPaymentID: "pay_1"}, t0.Add(time.Minute)))
	if p.Status.Phase != v1alpha1.PhaseProcessing || !p.Status.PayerApproved {
		t.Fatalf("setup: %s approved=%v", p.Status.Phase, p.Status.PayerApproved)
	}
	asked := annotate(p, v1alpha1.AnnotationCapture, payment.CaptureAll)
	step := payment.Plan(asked, pol, payment.Facts{}, t0.Add(2*time.Minute))
	if !(step.Action == payment.Write && step.Outcome.Status.Operation != nil) {
		t.Errorf("capture annotation on an approved tracked payment: %v (%s); waitingFor=%q", step.Action, step.Why, payment.WaitingFor(&p.Spec, &p.Status))
	}
}

// R5: the DisputeLost review of a PartiallyRefunded/Refunded payment cannot
// be cleared without moving the phase: resolve only takes Succeeded, Failed,
// Expired, Canceled.
func TestRegressionDisputeLostResolveMovesPhase(t *testing.T) {
	p := paidPayment(500)
	p.Status.Phase = v1alpha1.PhasePartiallyRefunded
	p = store(p, payment.ApplyEvent(p, withDispute(payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedDispute, EventID: "evt-dc"}, provider.DisputeLost), t0.Add(time.Hour)))
	if review(p) != v1alpha1.ReasonDisputeLost {
		t.Fatalf("setup: review %q", review(p))
	}
	for _, to := range []string{"PartiallyRefunded", "Succeeded"} {
		r := annotate(p, v1alpha1.AnnotationResolve, to)
		r = annotate(r, v1alpha1.AnnotationResolveReason, "chargeback accepted")
		out, _ := payment.Resolve(r, t0.Add(2*time.Hour))
		got := store(r, out)
		t.Logf("resolve %s: phase %s review %q refunded %+v", to, got.Status.Phase, review(got), got.Status.AmountRefunded)
		if review(got) == "" && got.Status.Phase != v1alpha1.PhasePartiallyRefunded {
			t.Errorf("clearing DisputeLost moved PartiallyRefunded (500 refunded) to %s", got.Status.Phase)
		}
	}
}

// R6: out-of-order dispute events (the backfill lists Stripe newest first):
// closed(won) then created leaves Disputed=True for good.
func TestRegressionDisputeEventsOutOfOrder(t *testing.T) {
	p := paidPayment(0)
	p = store(p, payment.ApplyEvent(p, withDispute(payment.Observation{Source: v1alpha1.SourceBackfill, Observed: payment.ObservedDispute, EventID: "evt-closed", OccurredAt: t0.Add(48 * time.Hour)}, provider.DisputeWon), t0.Add(50*time.Hour)))
	p = store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceBackfill, Observed: payment.ObservedDispute, EventID: "evt-created", OccurredAt: t0.Add(time.Hour)}, t0.Add(50*time.Hour)))
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ConditionDisputed && c.Status == metav1.ConditionTrue {
			t.Errorf("Disputed=True/%s after the dispute was closed (won); older 'created' applied last", c.Reason)
		}
	}
}

// R7: query errors left over from before the payment settled (a webhook
// settled it while its queries failed) delay the first refund read by a
// schedule step (up to the last one), though "the first read goes at once".
func TestRegressionLeftoverErrorsDelayFirstRefundRead(t *testing.T) {
	pol := testPolicy()
	p := created("leftover")
	now := t0.Add(30 * time.Second)
	for i := 0; i < 5; i++ {
		p = store(p, payment.AfterQuery(p, pol, fails(errNoAnswer), false, now))
	}
	p = store(p, payment.ApplyEvent(p, obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()), now.Add(time.Second)))
	step := payment.Plan(p, pol, payment.Facts{SucceededRefunds: []types.UID{"r"}}, now.Add(2*time.Second))
	if step.Action != payment.Query {
		t.Errorf("first refund read: %v until %s (+%s)", step.Action, step.At.Format(time.TimeOnly), step.At.Sub(now))
	}
}
