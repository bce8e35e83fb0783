package inbox

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestAWholeEventDeliveredAgainWhileItsRecordWaitsIsADuplicate: only a cut
// event (over MaxStoredPayload) is held back until its record has a result,
// since its record may still be given back. A whole event delivered again
// while its first record is still Pending (stored by the backfill, or left
// to the inbox processor) is acknowledged as a duplicate: the record is
// durable, and refusing it would only make the provider retry.
func TestAWholeEventDeliveredAgainWhileItsRecordWaitsIsADuplicate(t *testing.T) {
	ctx := context.Background()
	in, _ := newFakeInbox(t)
	ev := provider.Event{ID: "evt-1", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true, OccurredAt: t0,
		PaymentID: "pay_1", MerchantReference: "order-1", Raw: []byte(`{"id":"evt-1"}`)}
	if _, stored, err := in.Store(ctx, testProvider, ev, v1alpha1.ViaBackfill, "kukopay"); err != nil || !stored {
		t.Fatalf("store: %v %v", stored, err)
	}
	out, err := in.Receive(ctx, testProvider, ev, v1alpha1.ViaWebhook, "kukopay", 0)
	if err != nil || out.Result != v1alpha1.ResultDuplicate {
		t.Fatalf("the delivery of an event whose record waits: %+v, %v; want a duplicate, acknowledged", out, err)
	}
}

// TestAnEventAboutAnotherPaymentIdIsAppliedForReview: an event that names
// a Payment's merchant reference but another provider payment id than the
// one the Payment recorded (a second payment made for the order elsewhere)
// is applied to that Payment, where the state machine puts it under review
// as DuplicatePayment (SPEC §11.4). The provider id tells candidates apart
// only when several Payments share the reference: with one, it must not
// drop the match and leave the event Orphaned, unseen.
func TestAnEventAboutAnotherPaymentIdIsAppliedForReview(t *testing.T) {
	ctx := context.Background()
	p := paidOrder()
	p.Namespace, p.Spec.MerchantReference = testProvider.Namespace, "order-1"
	in, api := newFakeInbox(t, p)
	ev := provider.Event{ID: "evt-other", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true, OccurredAt: t0,
		PaymentID: "pay_other", MerchantReference: "order-1", Amount: 1999, Currency: "USD", Raw: []byte(`{"id":"evt-other"}`)}
	out, err := in.Receive(ctx, testProvider, ev, v1alpha1.ViaWebhook, "kukopay", 0)
	if err != nil || out.Payment != p.Name {
		t.Fatalf("receive: %+v, %v; want it applied to Payment %s", out, err, p.Name)
	}
	got := &v1alpha1.Payment{}
	if err := api.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Reason != v1alpha1.ReasonDuplicatePayment {
		t.Errorf("the payment after an event about another payment of its order: conditions %+v; want NeedsReview DuplicatePayment", got.Status.Conditions)
	}
}
