package payment_test

import (
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// docs/state-machine.md, Rules: "Authorized, another amount | not final |
// Unknown + NeedsReview=AmountMismatch", for an Authorized payment (a
// capture of "all" would take another amount than the one authorized) and
// an Unknown one (the review becomes the human reason AmountMismatch, which
// a requery does not clear).
func TestAuthorizedAnotherAmountIsAMismatchWhileNotFinal(t *testing.T) {
	auth := []payment.Observation{obsCreated(payment.ObservedAuthorized, withProviderID("pay_1"), withAmount(orderValue, orderCurrency))}
	for _, tc := range []struct {
		name  string
		given []payment.Observation
	}{
		{"Authorized", auth},
		{"Unknown (RetriesExhausted)", givenUnknown(v1alpha1.ReasonRetriesExhausted)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := buildPayment(t, tc.given)
			res := payment.Apply(p, obsQuery(payment.ObservedAuthorized, withAmount(orderValue+500, orderCurrency), withProviderID("pay_1")), seqStart.Add(time.Hour))
			if res.Status.Phase != v1alpha1.PhaseUnknown || !strings.Contains(strings.Join(condSummary(res.Status.Conditions), " "), "NeedsReview=True/AmountMismatch") {
				t.Errorf("authorization of %d on a %s payment asking %d: %s -> %s %s (%s) %v; want Unknown + AmountMismatch",
					orderValue+500, p.Status.Phase, orderValue, p.Status.Phase, res.Status.Phase, res.Decision, res.Reason, condSummary(res.Status.Conditions))
			}
		})
	}
}

// A payment Failed (declined) that the provider then reports
// succeeded is kept Failed under NeedsReview=ConflictingStatus: "the payer
// may have paid" (docs, Rules; it even holds its merchant reference again).
// A Refund created to pay that customer back waits (PaymentNotSucceeded),
// as beside an Unknown payment: refused PaymentNotPaid, it would be refused
// for good on the guess the review exists to settle.
func TestRefundOfAFailedPaymentUnderConflictWaits(t *testing.T) {
	p := buildPayment(t, andThen(givenFailed, obsWebhook(payment.ObservedSucceeded, "evt-late-paid", withPaid())))
	if p.Status.Phase != v1alpha1.PhaseFailed || !strings.Contains(strings.Join(condSummary(p.Status.Conditions), " "), "NeedsReview=True/ConflictingStatus") {
		t.Fatalf("precondition: %s %v", p.Status.Phase, condSummary(p.Status.Conditions))
	}
	_, wait, refusal := payment.RefundAllowance(fullRefund(), p, nil)
	if refusal != "" || wait != v1alpha1.ReasonPaymentNotSucceeded {
		t.Errorf("refusal %q, wait %q while the provider says the payment succeeded and a human has not decided; want a wait (PaymentNotSucceeded)", refusal, wait)
	}
}

// docs/state-machine.md (Refunds): "A refund event that
// arrives while its payment has not succeeded yet ... stays Orphaned for the
// payment's share, and is applied again when the payment succeeds." A
// payment Failed under ConflictingStatus (the provider said it succeeded;
// a human may resolve it Succeeded) has not succeeded yet: its refund event
// stays Orphaned. Recorded Ignored, it would never be applied again: once
// resolved Succeeded the payment would show nothing refunded while the
// provider refunded 5.00.
func TestRefundEventOnAFailedPaymentUnderConflictWaits(t *testing.T) {
	p := buildPayment(t, andThen(givenFailed, obsWebhook(payment.ObservedSucceeded, "evt-late-paid", withPaid())))
	obs := obsWebhook(payment.ObservedRefund, "evt-dash-refund", withRefunded(500, orderCurrency))
	out := payment.ApplyEvent(p, obs, seqStart.Add(time.Hour))
	got, msg := payment.EventResult(p, out, obs)
	if got != v1alpha1.ResultOrphaned {
		t.Errorf("refund event on a Failed payment under ConflictingStatus recorded %s (%s); want Orphaned (applied again once resolved Succeeded)", got, msg)
	}
}
