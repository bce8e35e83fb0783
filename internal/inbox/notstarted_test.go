package inbox

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// An event about an order whose new object has not started (deleted and
// applied again, no status yet) is about the earlier object: it waits
// Orphaned until the new object has adopted the order's outcome, instead of
// settling it in the adoption's place. Once the object has a status, the
// same event applies.
func TestAnEventWaitsUntilANewObjectOfItsOrderHasStarted(t *testing.T) {
	fresh := paidOrder()
	fresh.Status = v1alpha1.PaymentStatus{}
	in, c := newFakeInbox(t, fresh)
	ev := provider.Event{ID: "evt-old", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true, OccurredAt: t0,
		PaymentID: "pay_1", MerchantReference: fresh.MerchantRef(), Amount: 1999, Currency: "USD", Raw: []byte(`{"id":"evt-old"}`)}
	out, evt := deliver(t, in, c, ev)
	if out.Result != v1alpha1.ResultOrphaned {
		t.Fatalf("result %s (%s), want Orphaned until the payment has started", out.Result, out.Message)
	}
	p := &v1alpha1.Payment{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(fresh), p); err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase != "" || p.Status.ProviderPaymentID != "" {
		t.Fatalf("the event moved a payment that has not started: %+v", p.Status)
	}

	// The payment adopts its order's outcome (or is created): the event applies.
	p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseSucceeded, ProviderPaymentID: "pay_1"}
	if err := c.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if out, _ = apply(t, in, evt, ev); out.Result == v1alpha1.ResultOrphaned {
		t.Errorf("result %s (%s) after the payment started", out.Result, out.Message)
	}
}
