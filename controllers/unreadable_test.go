package controllers_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// garbledStripe runs a Stripe provider in a new namespace, with the payment
// and refund controllers, whose first POST to path is carried out by Stripe
// and answered 2xx with well-formed JSON without the object ("{}"): the
// write happened, its answer cannot be read.
func garbledStripe(t *testing.T, op, path string) (*fixture.Sim, string) {
	t.Helper()
	ns := fixture.Namespace(t, env.Client, "unreadable")
	s := fixture.StartSim(t, paysim.Options{})
	front := s.FaultOnce(t, paysim.Faults{GarbledAnswerRate: 1, GarbledBody: "{}", Operations: []string{op}}, func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, path)
	})
	fixture.CreateProvider(t, env.Client, refundProvider(ns, v1alpha1.ProviderStripe, front))
	refundManager(t, ns)
	return s, ns
}

// neverFailed reports whether p's history never recorded phase Failed.
func neverFailed(p *v1alpha1.Payment) bool {
	_, err := fixture.HistoryTo(p, v1alpha1.PhaseFailed)
	return err != nil
}

// TestUnreadableAnswerToACreateIsLookedUpNotFailed: Stripe takes the
// payment and answers the create 2xx, but the answer cannot be read. That is
// "it happened, look it up" (issue 22 point 10): the payment is not Failed;
// the create repeated with its key gets the answer Stripe stored (Stripe API
// reference, "Idempotent requests") and the payment ends Succeeded, with one
// PaymentIntent at Stripe.
func TestUnreadableAnswerToACreateIsLookedUpNotFailed(t *testing.T) {
	t.Parallel()
	s, ns := garbledStripe(t, paysim.OpCreate, "/v1/payment_intents")
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order", Provider: string(v1alpha1.ProviderStripe), Amount: 1999})
	got := fixture.WaitPayment(t, env.Client, p, "final", func(p *v1alpha1.Payment) bool { return p.Status.Phase.IsFinal() })
	if got.Status.Phase != v1alpha1.PhaseSucceeded || got.Status.ProviderPaymentID == "" || !neverFailed(got) {
		t.Fatalf("after an unreadable create answer the payment is %s (%s); want Succeeded, never Failed\n%s",
			got.Status.Phase, got.Status.ProviderPaymentID, fixture.Dump(got.Status))
	}
	if c := s.Counters(); c.APIFaults.Garbled != 1 {
		t.Errorf("%d garbled answers; the fault did not happen once", c.APIFaults.Garbled)
	}
	if n := s.StripeCounters().IntentsCreated; n != 1 {
		t.Errorf("%d PaymentIntents at Stripe; want the one the unreadable answer was about", n)
	}
}

// TestUnreadableAnswerToARefundDoesNotFailIt: Stripe makes the refund and
// answers 2xx, but the answer cannot be read. The Refund is not Failed (its
// money would look refundable again): it is repeated with its key, gets the
// refund Stripe made and ends Succeeded; Stripe made one refund.
func TestUnreadableAnswerToARefundDoesNotFailIt(t *testing.T) {
	t.Parallel()
	s, ns := garbledStripe(t, paysim.OpRefund, "/v1/refunds")
	p := paidPayment(t, ns, string(v1alpha1.ProviderStripe), "order", 1999)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "rf", Payment: p.Name, Amount: 500})
	got := fixture.WaitRefund(t, env.Client, rf, "final", func(r *v1alpha1.Refund) bool { return r.Status.Phase.IsFinal() })
	if got.Status.Phase != v1alpha1.RefundSucceeded {
		t.Fatalf("after an unreadable refund answer the Refund is %s (%s); want Succeeded\n%s",
			got.Status.Phase, fixture.RefundFailure(got), fixture.Dump(got.Status))
	}
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 500)
	if c := s.Counters(); c.APIFaults.Garbled != 1 {
		t.Errorf("%d garbled answers; the fault did not happen once", c.APIFaults.Garbled)
	}
	if created, refunded := fixture.SimRefunds(t, s, v1alpha1.ProviderStripe, p.Status.ProviderPaymentID); created != 1 || refunded != 500 {
		t.Errorf("Stripe made %d refunds, %d refunded; want the one refund of 500", created, refunded)
	}
}
