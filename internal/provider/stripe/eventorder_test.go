package stripe_test

// A Stripe event that is older than what paywarden already knows is not
// read as the present.

import (
	"strconv"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v84"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

func orderedEvent(id, typ string, created int64, object string) []byte {
	return []byte(`{"id":"` + id + `","object":"event","api_version":"` + stripego.APIVersion + `","type":"` + typ +
		`","created":` + strconv.FormatInt(created, 10) + `,"data":{"object":` + object + `}}`)
}

// TestALateDeliveredPaymentFailedOfAnEarlierAttemptDoesNotFailAProcessingPayment:
//
//  1. The payer's first attempt (a card) is declined at t1: Stripe emits
//     payment_intent.payment_failed (PI requires_payment_method +
//     last_payment_error). Its first delivery fails (receiver 503, network).
//  2. At t2 > t1 the payer pays by SEPA debit: payment_intent.processing is
//     delivered and applied: the Payment is Processing.
//  3. Stripe retries the t1 event (Stripe, "Webhooks": undelivered events are
//     retried for up to three days, and "Stripe doesn't guarantee delivery of
//     events in the order in which they're generated"). The adapter reads it
//     as Pending + failure, and that reading after Processing settles the
//     payment Failed (reason insufficient_funds),
//     releasing its merchant reference (SPEC §12.1).
//  4. The SEPA debit succeeds (payment_intent.succeeded): Failed then
//     Succeeded is a ConflictingStatus review; the payer was charged for an
//     order paywarden had marked unpaid and released for a second charge.
//
// The event's own created time (t1) is older than the Processing already
// applied: it is news of an earlier attempt, not of the attempt under way
// (SPEC §2.1: "A non-final observation (Pending, Processing) never moves a
// payment backwards"; §0: only an authoritative provider answer sets a final
// phase).
func TestALateDeliveredPaymentFailedOfAnEarlierAttemptDoesNotFailAProcessingPayment(t *testing.T) {
	t1 := int64(1767225600)
	t2 := t1 + 120
	failed, err := stripe.ParseEvent(orderedEvent("evt_failed_attempt1", "payment_intent.payment_failed", t1,
		intent("requires_payment_method", `,"last_payment_error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds."}`)))
	if err != nil {
		t.Fatal(err)
	}
	processing, err := stripe.ParseEvent(orderedEvent("evt_processing_attempt2", "payment_intent.processing", t2, intent("processing", "")))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(t2, 0).Add(time.Minute)
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Name: "order-1", Namespace: "ns", UID: "uid-1"},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "stripe"}, MerchantReference: "ORD-1",
			Amount: v1alpha1.Amount{Value: 1000, Currency: "EUR"},
		},
	}
	p.Status.Phase = v1alpha1.PhasePending
	p.Status.ProviderPaymentID = pi
	p.Status.CreateRequestedAt = &metav1.Time{Time: time.Unix(t1, 0).Add(-time.Hour)}

	r := payment.Apply(p, payment.FromEvent(processing, v1alpha1.ViaWebhook), now)
	p.Status = r.Status
	if p.Status.Phase != v1alpha1.PhaseProcessing {
		t.Fatalf("payment_intent.processing: phase %s, want Processing", p.Status.Phase)
	}
	r = payment.Apply(p, payment.FromEvent(failed, v1alpha1.ViaWebhook), now.Add(time.Hour))
	if r.Status.Phase == v1alpha1.PhaseFailed {
		t.Fatalf("a payment_intent.payment_failed created at %s (the earlier attempt), delivered after the Processing of %s, "+
			"settled the payment Failed (%s, failure %+v): an event older than the attempt under way is not news of it",
			time.Unix(t1, 0).UTC().Format(time.RFC3339), time.Unix(t2, 0).UTC().Format(time.RFC3339), r.Reason, r.Status.Failure)
	}
}
