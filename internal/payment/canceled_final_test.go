package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestASuccessAfterCanceledIsAConflictNotAFlip: Canceled is a final phase
// (SPEC §11.5), and final phases do not flip (SPEC §2.1: a final phase
// contradicted → Conflict: phase kept, NeedsReview=ConflictingStatus,
// Warning Event).
//
// Scenario (PayPal, the operator's cancel):
//  1. A PayPal order waits for its payer; the operator annotates
//     payments.paywarden.dev/cancel.
//  2. PayPal has no API to cancel an order: the adapter answers Canceled
//     without a request, the Payment is Canceled and its merchant
//     reference is released (SPEC §12.1), so a new Payment of the order may
//     be created and paid.
//  3. The order is still open at PayPal; the checkout page captures it
//     client-side, and PAYMENT.CAPTURE.COMPLETED arrives.
//  4. Taken as a success, the Payment would silently become Succeeded while
//     the order may have been charged again under the released reference.
//
// The same holds for a payment an operator resolved Canceled while its
// capture's outcome was unknown.
func TestASuccessAfterCanceledIsAConflictNotAFlip(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle = provider.Lifecycle{Checkout: true, ManualCapture: true, PartialCapture: true, AuthorizeStep: true, Cancel: true}
	pol.LifecycleKnown = true
	now := t0.Add(time.Minute)

	canceledByOperator := func() *v1alpha1.Payment {
		p := annotate(lifecyclePay("canceled-order", v1alpha1.CaptureAutomatic), v1alpha1.AnnotationCancel, "order withdrawn")
		p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
		if s := payment.Plan(p, pol, payment.Facts{FreshOperation: true}, now); s.Action != payment.CallCancel {
			t.Fatalf("step %s (%s), want the cancel", s.Action, s.Why)
		}
		return store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, answer(provider.StatusCanceled), now))
	}
	for name, build := range map[string]func() *v1alpha1.Payment{
		"canceled by the operator's cancel": canceledByOperator,
	} {
		t.Run(name, func(t *testing.T) {
			p := build()
			if p.Status.Phase != v1alpha1.PhaseCanceled {
				t.Fatalf("setup: phase %s, want Canceled; history %s", p.Status.Phase, dumpHistory(p.Status.History))
			}
			out := payment.ApplyEvent(p, payment.Observation{
				Source: v1alpha1.SourceWebhook, Observed: payment.ObservedSucceeded, EventID: "evt-captured", ProviderPaymentID: "pay_1",
				Raw: "PAYMENT.CAPTURE.COMPLETED", Amount: &v1alpha1.Money{Value: orderValue, Currency: orderCurrency},
			}, now.Add(time.Hour))
			got := store(p, out)
			if got.Status.Phase != v1alpha1.PhaseCanceled || review(got) != v1alpha1.ReasonConflictingStatus {
				t.Fatalf("a success reported for a Canceled payment: phase %s, review %q; want Canceled kept with NeedsReview=ConflictingStatus (history %s)",
					got.Status.Phase, review(got), dumpHistory(got.Status.History))
			}
		})
	}
}
