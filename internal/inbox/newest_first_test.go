package inbox

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

func storedOrder(t *testing.T, c client.Client) *v1alpha1.Payment {
	t.Helper()
	p := &v1alpha1.Payment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "order"}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNewestFirstRefundFailureThenRefund: a refund made in the dashboard
// (no Refund object) succeeds, then fails (Stripe: charge.refunded with
// amount_refunded 500, then refund.failed; the charge's total back to 0).
// Applied newest first (a Stripe/PayPal backfill page, or unordered
// delivery), refund.failed still asks for a read of the provider's figure
// (it was finished as Ignored, and charge.refunded then left the payment
// PartiallyRefunded 500 for good).
func TestNewestFirstRefundFailureThenRefund(t *testing.T) {
	in, c := newFakeInbox(t, paidOrder())
	failed := provider.Event{
		ID: "evt_refund_failed", Type: "refund.failed", Status: provider.StatusUnknown, Supported: true, OccurredAt: t0.Add(2 * time.Hour),
		PaymentID: "pay_1",
		Refund:    &provider.Refund{ID: "re_dash", PaymentID: "pay_1", Status: provider.RefundFailed, RawStatus: "failed", Amount: 500, Currency: "USD"},
		Raw:       []byte(`{"id":"evt_refund_failed"}`),
	}
	refunded := provider.Event{
		ID: "evt_charge_refunded", Type: "charge.refunded", Status: provider.StatusRefund, Supported: true, OccurredAt: t0,
		PaymentID: "pay_1", Currency: "USD", RefundedTotal: 500,
		Raw: []byte(`{"id":"evt_charge_refunded"}`),
	}
	out1, _ := deliver(t, in, c, failed)
	out2, _ := deliver(t, in, c, refunded)
	p := storedOrder(t, c)
	if out1.Result != v1alpha1.ResultApplied || p.Status.RefundFailureSeenAt == nil {
		t.Errorf("refund.failed: %s (%s); charge.refunded: %s (%s); payment %s refunded %+v, no read of the provider's total due (the provider's total is 0)",
			out1.Result, out1.Message, out2.Result, out2.Message, p.Status.Phase, p.Status.AmountRefunded)
	}
}

// TestNewestFirstDisputeClosedBeforeSuccess: a Processing payment whose
// webhooks were lost; a backfill reads newest first:
// charge.dispute.closed (lost), payment_intent.succeeded,
// charge.dispute.created. The closing waits (Orphaned) and is applied
// again once the payment changed: NeedsReview=DisputeLost. (Finished as
// Ignored, it left the payment Succeeded, Disputed=True for ever.)
func TestNewestFirstDisputeClosedBeforeSuccess(t *testing.T) {
	p0 := paidOrder()
	p0.Status.Phase = v1alpha1.PhaseProcessing
	in, c := newFakeInbox(t, p0)
	closed := provider.Event{ID: "evt_dispute_closed", Type: "charge.dispute.closed", Status: provider.StatusDispute, Supported: true,
		OccurredAt: t0.Add(3 * time.Hour), PaymentID: "pay_1", DisputeOutcome: provider.DisputeLost, Raw: []byte(`{"id":"evt_dispute_closed"}`)}
	paid := provider.Event{ID: "evt_paid", Type: "payment_intent.succeeded", Status: provider.StatusSucceeded, Supported: true,
		OccurredAt: t0, PaymentID: "pay_1", Amount: 1999, Currency: "USD", Raw: []byte(`{"id":"evt_paid"}`)}
	opened := provider.Event{ID: "evt_dispute_created", Type: "charge.dispute.created", Status: provider.StatusDispute, Supported: true,
		OccurredAt: t0.Add(time.Hour), PaymentID: "pay_1", Raw: []byte(`{"id":"evt_dispute_created"}`)}
	out1, evt1 := deliver(t, in, c, closed)
	if out1.Result != v1alpha1.ResultOrphaned {
		t.Fatalf("dispute.closed before the success: %s (%s); want Orphaned", out1.Result, out1.Message)
	}
	deliver(t, in, c, paid)
	deliver(t, in, c, opened)
	// The processor applies an orphan again when its payment changes.
	apply(t, in, evt1, closed)
	p := storedOrder(t, c)
	d := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionDisputed)
	nr := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionNeedsReview)
	if nr == nil || nr.Status != "True" || nr.Reason != v1alpha1.ReasonDisputeLost {
		t.Errorf("dispute.closed (lost) recorded %s (%s); payment ends %s, Disputed=%s/%s, NeedsReview=%v; want NeedsReview=DisputeLost",
			out1.Result, out1.Message, p.Status.Phase, d.Status, d.Reason, nr)
	}
}
