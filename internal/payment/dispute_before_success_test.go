package payment_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestADisputeLostBeforeTheSuccessWaits: a payment whose webhooks were lost
// (Processing, or Unknown after its retries: a slow debit) is backfilled
// newest first (Stripe, PayPal): the dispute's closing (lost), then the
// success, then the dispute's opening. The closing comes before the money:
// it waits (Orphaned, applied again when the payment changes) instead of
// being finished as Ignored; applied after the success, the payer's won
// dispute raises NeedsReview=DisputeLost, and the older opening is stale.
// Dropped, the payment would stay Disputed=True for ever, unreviewed.
func TestADisputeLostBeforeTheSuccessWaits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		given  []payment.Observation
		review string // the review the payment is under before
	}{
		{"processing", givenProcessing, ""},
		{"unknown (RetriesExhausted)", givenUnknown(v1alpha1.ReasonRetriesExhausted), v1alpha1.ReasonRetriesExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := buildPayment(t, tc.given)
			now := seqStart.Add(time.Hour)
			closed := obsBackfill(payment.ObservedDispute, "evt-dispute-closed", func(o *payment.Observation) { o.Dispute = provider.DisputeLost })
			out := payment.ApplyEvent(p, closed, now)
			if res, msg := payment.EventResult(p, out, closed); res != v1alpha1.ResultOrphaned {
				t.Fatalf("the closing before the success: %s (%s); want Orphaned", res, msg)
			}
			p.Status = out.Status
			p.Status = payment.ApplyEvent(p, obsBackfill(payment.ObservedSucceeded, "evt-paid", withPaid()), now.Add(time.Second)).Status
			// The payment's change applies the orphan again.
			out = payment.ApplyEvent(p, closed, now.Add(2*time.Second))
			if res, msg := payment.EventResult(p, out, closed); res != v1alpha1.ResultApplied {
				t.Fatalf("the closing after the success: %s (%s); want Applied", res, msg)
			}
			p.Status = out.Status
			opened := obsBackfill(payment.ObservedDispute, "evt-dispute-created")
			out = payment.ApplyEvent(p, opened, now.Add(3*time.Second))
			if res, msg := payment.EventResult(p, out, opened); res != v1alpha1.ResultStale {
				t.Errorf("the opening after the closing: %s (%s); want Stale", res, msg)
			}
			p.Status = out.Status
			d := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionDisputed)
			// Under review already (RetriesExhausted, which only a human
			// clears), the review stays and the loss is an Event.
			want := v1alpha1.ReasonDisputeLost
			if tc.review != "" {
				want = tc.review
			}
			if review(p) != want || d == nil || d.Reason != v1alpha1.ReasonDisputeLost {
				t.Errorf("the payment ends %s, Disputed %+v, review %q; want Disputed=False/DisputeLost, review %s", p.Status.Phase, d, review(p), want)
			}
		})
	}
	// Of a payment that ended without the money, and no doubt about it, a
	// dispute's closing is dropped: there is nothing to wait for.
	p := buildPayment(t, givenProcessing)
	p.Status = payment.ApplyEvent(p, obsBackfill(payment.ObservedFailed, "evt-failed"), seqStart.Add(time.Minute)).Status
	closed := obsBackfill(payment.ObservedDispute, "evt-dispute-closed", func(o *payment.Observation) { o.Dispute = provider.DisputeLost })
	if res, msg := payment.EventResult(p, payment.ApplyEvent(p, closed, seqStart.Add(time.Hour)), closed); res != v1alpha1.ResultIgnored {
		t.Errorf("a dispute's closing of a Failed payment: %s (%s); want Ignored", res, msg)
	}
}
