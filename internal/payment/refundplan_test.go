package payment_test

import (
	"math"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// capturedPayment is a payment of 1000 minor units of which the merchant
// captured 600: it succeeded with 600 received.
func capturedPayment(received int64, reported bool) *v1alpha1.Payment {
	p := paidPayment(0)
	p.Spec.Amount.Value = 1000
	p.Spec.CaptureMethod = v1alpha1.CaptureManual
	p.Status.AmountToCapture = &v1alpha1.Money{Value: received, Currency: orderCurrency}
	p.Status.AmountReceived = nil
	if reported {
		p.Status.AmountReceived = &v1alpha1.Money{Value: received, Currency: orderCurrency}
	}
	return p
}

// undecidedRefund is an older Refund of amount, not sent yet.
func undecidedRefund(name string, amount int64) v1alpha1.Refund {
	return *newRefund(name, amount, t0)
}

// TestRefundAllowanceBounds: the refunds of a payment never add up to more
// than it received (SPEC §11.7), whatever its siblings' state or size.
func TestRefundAllowanceBounds(t *testing.T) {
	huge := int64(math.MaxInt64)
	checkAllowance(t, []allowanceCase{
		// A sibling in Unknown may have refunded: it counts as in flight.
		{"10.00 beside an unknown 15.00 on a 19.99 payment is refused", partRefund(1000), paidPayment(0), []v1alpha1.Refund{sentRefund("a", 1500, v1alpha1.RefundUnknown)}, 0, "", v1alpha1.ReasonOverRefund, "15.00 USD is refunded or being refunded"},
		{"everything beside an unknown 15.00 is the rest", fullRefund(), paidPayment(0), []v1alpha1.Refund{sentRefund("a", 1500, v1alpha1.RefundUnknown)}, orderValue - 1500, "", "", ""},
		{"a pending sibling counts as in flight", partRefund(1000), paidPayment(0), []v1alpha1.Refund{sentRefund("a", 1500, v1alpha1.RefundPending)}, 0, "", v1alpha1.ReasonOverRefund, ""},

		// Bounded by what was received, not what was ordered.
		{"600 of 1000 captured: everything is 600", fullRefund(), capturedPayment(600, true), nil, 600, "", "", ""},
		{"600 of 1000 captured: 600 fits", partRefund(600), capturedPayment(600, true), nil, 600, "", "", ""},
		{"600 of 1000 captured: 601 is refused", partRefund(601), capturedPayment(600, true), nil, 0, "", v1alpha1.ReasonOverRefund, "of the 6.00 USD received"},
		{"600 of 1000 captured: 1000 is refused", partRefund(1000), capturedPayment(600, true), nil, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"600 captured, success without an amount: the capture is what was received", fullRefund(), capturedPayment(600, false), nil, 600, "", "", ""},
		{"600 of 1000 captured, 400 refunded: 200 is the rest", fullRefund(), capturedPayment(600, true), []v1alpha1.Refund{sentRefund("a", 400, v1alpha1.RefundSucceeded)}, 200, "", "", ""},

		// A refund that failed after it succeeded (Stripe): while the
		// payment's figure still counts it, a Refund of that money waits for
		// the payment's read instead of being refused; once read, it fits.
		{"the money of a reversed refund not read yet: waits", partRefund(1000), paidPayment(1500), []v1alpha1.Refund{reversedRefund("a", 1500)}, 0, v1alpha1.ReasonEarlierRefundInFlight, "", ""},
		{"the money of a reversed refund, read: fits", partRefund(1000), reversedPayment(0, "a"), []v1alpha1.Refund{reversedRefund("a", 1500)}, 1000, "", "", ""},
		// Stripe counts a refund from its creation, pending included: one
		// that failed after reaching the provider may lower the total too.
		{"a refund that failed at the provider: waits for the payment's read", partRefund(1000), paidPayment(1500), []v1alpha1.Refund{sentRefund("a", 1500, v1alpha1.RefundFailed)}, 0, v1alpha1.ReasonEarlierRefundInFlight, "", ""},
		{"a refund refused before reaching the provider frees nothing to wait for", partRefund(1000), paidPayment(1500), []v1alpha1.Refund{unsentFailedRefund("a", 1500)}, 0, "", v1alpha1.ReasonOverRefund, ""},

		// Sums that would overflow int64 are refused, never wrapped.
		{"two undecided refunds near int64 max: a refund above what was received is refused", partRefund(orderValue + 2), paidPayment(0), []v1alpha1.Refund{undecidedRefund("a", huge), undecidedRefund("b", huge)}, 0, "", v1alpha1.ReasonOverRefund, "int64"},
		{"two undecided refunds near int64 max: even 0.01 is refused", partRefund(1), paidPayment(0), []v1alpha1.Refund{undecidedRefund("a", huge), undecidedRefund("b", huge)}, 0, "", v1alpha1.ReasonOverRefund, "int64"},
		{"two refunds in flight near int64 max: everything is refused", fullRefund(), paidPayment(0), []v1alpha1.Refund{sentRefund("a", huge-5, v1alpha1.RefundProcessing), sentRefund("b", huge-5, v1alpha1.RefundProcessing)}, 0, "", v1alpha1.ReasonOverRefund, "int64"},
		{"two succeeded refunds near int64 max are refused too", partRefund(1), paidPayment(0), []v1alpha1.Refund{sentRefund("a", huge/2+1, v1alpha1.RefundSucceeded), sentRefund("b", huge/2+1, v1alpha1.RefundSucceeded)}, 0, "", v1alpha1.ReasonOverRefund, "int64"},
		{"a provider total near int64 max beside a refund in flight", partRefund(1), paidPayment(huge - 1), []v1alpha1.Refund{sentRefund("a", 10, v1alpha1.RefundProcessing)}, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"a refund of int64 max on its own is refused", partRefund(huge), paidPayment(0), nil, 0, "", v1alpha1.ReasonOverRefund, ""},
		// int64 max itself is a sum like any other: refused for what it is,
		// an over-refund, not as uncountable.
		{"refunds adding up to exactly int64 max are counted", partRefund(1), paidPayment(0), []v1alpha1.Refund{sentRefund("a", huge-10, v1alpha1.RefundSucceeded), sentRefund("b", 10, v1alpha1.RefundSucceeded)}, 0, "", v1alpha1.ReasonOverRefund, "is refunded or being refunded"},
	})
}

// reversedPayment is paidPayment(refunded) whose figure was read after
// Refund name (see sentRefund) was reversed.
func reversedPayment(refunded int64, name string) *v1alpha1.Payment {
	p := paidPayment(refunded)
	p.Status.RefundsReversed = []types.UID{sentRefund(name, 1, v1alpha1.RefundFailed).UID}
	return p
}

// reversedRefund is a Refund of amount that failed after it succeeded.
func reversedRefund(name string, amount int64) v1alpha1.Refund {
	r := sentRefund(name, amount, v1alpha1.RefundFailed)
	r.Status.Failure = &v1alpha1.Failure{Code: "expired_or_canceled_card"}
	r.Status.History = []v1alpha1.HistoryEntry{{From: v1alpha1.PaymentPhase(v1alpha1.RefundSucceeded), To: v1alpha1.PaymentPhase(v1alpha1.RefundFailed), Reason: v1alpha1.ReasonRefundReversed}}
	return r
}

// unsentFailedRefund is a Refund of amount refused before any provider
// refund existed.
func unsentFailedRefund(name string, amount int64) v1alpha1.Refund {
	r := sentRefund(name, amount, v1alpha1.RefundFailed)
	r.Status.ProviderRefundID = ""
	return r
}
