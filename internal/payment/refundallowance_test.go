package payment_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// RefundAllowance against facts the controllers can really hold (SPEC
// §11.7: "over-refund refused before any call. The Payment's refunded total
// still comes from the provider's cumulative figure"): the payment's refunds
// never add up to more than it received. Each case was an over-refund
// before the rule it pins.

// A refund of 6.00 made in the provider's dashboard was read into the
// payment's refunded total (amountRefunded 600, status.refundsCounted empty:
// the read came before any Refund succeeded). Then Refund "a" of 5.00
// succeeded; the payment's read of the provider's figure has not answered
// yet (RefundsUncounted asks for it; a provider that cannot be read keeps
// the payment there for a while). At the provider 6.00 + 5.00 = 11.00 of the
// 19.99 received is refunded: 8.99 is left.
//
// Taking the refunded total as max(succeeded Refunds, provider figure) =
// max(500, 600) = 600, as if the provider's figure always counted every
// succeeded Refund, counted the dashboard refund and Refund "a" as one and
// granted a second Refund 5.00 too much: the figure counts a Refund only
// once the payment's read has (status.refundsCounted).
func TestRefundAllowanceCountsADashboardRefundBesideAnUncountedOne(t *testing.T) {
	dashboard := int64(600)
	a := sentRefund("a", 500, v1alpha1.RefundSucceeded)
	p := paidPayment(dashboard) // refundsCounted is empty: "a" is not in the figure
	if len(p.Status.RefundsCounted) != 0 {
		t.Fatal("the payment's figure must not count Refund a")
	}
	if _, need := payment.RefundsUncounted(p, payment.Facts{SucceededRefunds: []types.UID{a.UID}}); !need {
		t.Fatal("precondition: the payment has not counted Refund a yet")
	}
	worstLeft := orderValue - dashboard - 500 // 899: the figure may leave "a" out

	t.Run("everything refundable", func(t *testing.T) {
		amount, wait, refusal := payment.RefundAllowance(fullRefund(), p, []v1alpha1.Refund{a})
		if wait == "" && refusal == "" && amount.Value > worstLeft {
			t.Fatalf("granted %d minor units beside a 600 dashboard refund and a succeeded 500 Refund the figure does not count yet: %d of %d received would be refunded (at most %d was left)",
				amount.Value, dashboard+500+amount.Value, orderValue, worstLeft)
		}
	})
	t.Run("10.00 that fits only if the figure already counts the Refund", func(t *testing.T) {
		// If an event had brought the figure to count "a" (600 = 500 + 100
		// dashboard), 13.99 would be left and 10.00 fits; if not, 8.99 is
		// left and it does not. Undecidable now: it must wait for the
		// payment's read (EarlierRefundInFlight), never be sent on a guess.
		amount, wait, refusal := payment.RefundAllowance(partRefund(1000), p, []v1alpha1.Refund{a})
		if wait == "" && refusal == "" {
			t.Fatalf("granted %d minor units: with the dashboard's 600 and Refund a's 500 the payment's refunds reach %d of the %d received",
				amount.Value, dashboard+500+amount.Value, orderValue)
		}
		if refusal != "" {
			t.Errorf("refused on a guess (it fits if the figure counts Refund a): %s", refusal)
		}
	})
}

// The provider answered Refund "a" (5.00 asked) with a success of 8.00: the
// refund machine parks it in Unknown with NeedsReview=AmountMismatch and
// keeps status.amount at the 5.00 asked. The money that left is 8.00. A
// Refund in Unknown is not "succeeded", so the payment never reads the
// provider's figure for it (RefundsUncounted) and its refunded total stays
// 0. Counted at the 5.00 asked, a second Refund of "everything refundable"
// was granted 19.99 - 5.00 = 14.99, and the payment's refunds added up to
// 8.00 + 14.99 = 22.99 of the 19.99 received: a sibling under review is
// undecided, and later Refunds wait for a human.
func TestRefundAllowanceWaitsForASiblingWhoseAmountIsUnderReview(t *testing.T) {
	a := sentRefund("a", 500, v1alpha1.RefundProcessing)
	a.Status = payment.ApplyRefund(&a, refundObs(payment.ObservedSucceeded, "evt-a", withAmount(800, orderCurrency)), t0).Status
	if a.Status.Phase != v1alpha1.RefundUnknown || refundReview(&a.Status) != v1alpha1.ReasonAmountMismatch {
		t.Fatalf("precondition: Refund a is %s review %q, want Unknown AmountMismatch", a.Status.Phase, refundReview(&a.Status))
	}
	p := paidPayment(0)
	succeeded, reversed := payment.SettledRefunds([]v1alpha1.Refund{a})
	if _, need := payment.RefundsUncounted(p, payment.Facts{SucceededRefunds: succeeded, ReversedRefunds: reversed}); need {
		t.Log("the payment would read the provider's figure")
	}
	amount, wait, refusal := payment.RefundAllowance(fullRefund(), p, []v1alpha1.Refund{a})
	if wait == "" && refusal == "" && 800+amount.Value > orderValue {
		t.Fatalf("granted %d minor units beside a Refund the provider reported as 800 refunded: %d of %d received would be refunded",
			amount.Value, 800+amount.Value, orderValue)
	}
}

// Refund "a" (5.00) was reported failed, and the payment read the
// provider's figure after that (status.refundsReversed names it: 0
// refunded). Then the provider reports the same refund succeeded, later
// than the failure: the refund machine keeps it Failed with
// NeedsReview=ConflictingStatus, money possibly gone. Skipping every Failed
// sibling, reviewed or not (the payment reads nothing more for it: it is
// neither succeeded nor a new reversal), granted a Refund of everything the
// whole 19.99 beside 5.00 the provider now says
// it refunded. A refund whose outcome a human must decide counts at its
// amount, whatever its phase.
func TestRefundAllowanceCountsAFailedSiblingUnderReview(t *testing.T) {
	a := sentRefund("a", 500, v1alpha1.RefundProcessing)
	failedObs := refundObs(payment.ObservedFailed, "evt-f", withFailure("declined", ""))
	failedObs.OccurredAt = t0.Add(time.Minute)
	a.Status = payment.ApplyRefund(&a, failedObs, t0.Add(time.Minute)).Status
	okObs := refundObs(payment.ObservedSucceeded, "evt-s", withAmount(500, orderCurrency))
	okObs.OccurredAt = t0.Add(2 * time.Minute)
	res := payment.ApplyRefund(&a, okObs, t0.Add(2*time.Minute))
	a.Status = res.Status
	if res.Decision != payment.Conflict || a.Status.Phase != v1alpha1.RefundFailed || refundReview(&a.Status) != v1alpha1.ReasonConflictingStatus {
		t.Fatalf("precondition: %s, Refund a is %s review %q, want a Failed Refund in ConflictingStatus", res.Decision, a.Status.Phase, refundReview(&a.Status))
	}
	p := paidPayment(0)
	p.Status.RefundsReversed = []types.UID{a.UID}
	succeeded, reversed := payment.SettledRefunds([]v1alpha1.Refund{a})
	if _, need := payment.RefundsUncounted(p, payment.Facts{SucceededRefunds: succeeded, ReversedRefunds: reversed}); need {
		t.Log("the payment would read the provider's figure")
	}
	amount, wait, refusal := payment.RefundAllowance(fullRefund(), p, []v1alpha1.Refund{a})
	if wait != "" || refusal != "" || amount.Value != orderValue-500 {
		t.Fatalf("granted %d minor units (wait %q, refusal %q) beside a Refund of 500 the provider last reported succeeded (under ConflictingStatus review); want the rest beside it, %d",
			amount.Value, wait, refusal, orderValue-500)
	}
}
