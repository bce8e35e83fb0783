package inbox

import (
	"context"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"
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

// Whether the payment has started is asked of the API server, not a cache
// that may not hold its first status yet: an event about a payment the
// cache still shows unstarted applies when the API server's copy (the same
// object) has started, and waits when the API server holds another object
// of that name.
func TestNotStartedIsDecidedOnTheAPIServersCopy(t *testing.T) {
	unstarted := paidOrder()
	unstarted.Status = v1alpha1.PaymentStatus{}
	ev := provider.Event{ID: "evt-1", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true, OccurredAt: t0,
		PaymentID: "pay_1", MerchantReference: unstarted.MerchantRef(), Amount: 1999, Currency: "USD", Raw: []byte(`{"id":"evt-1"}`)}
	for _, c := range []struct {
		name string
		api  func(p *v1alpha1.Payment)
		want v1alpha1.EventResult
	}{
		{"the same object has started", func(p *v1alpha1.Payment) {
			p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseProcessing, ProviderPaymentID: "pay_1"}
		}, v1alpha1.ResultApplied},
		{"another object of that name has started", func(p *v1alpha1.Payment) {
			p.UID = "another-uid"
			p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseProcessing, ProviderPaymentID: "pay_1"}
		}, v1alpha1.ResultOrphaned},
	} {
		t.Run(c.name, func(t *testing.T) {
			started := paidOrder()
			c.api(started)
			api := fakeAPI(t, started)
			in := &Inbox{Client: api, Reader: fakeAPI(t, unstarted.DeepCopy()), APIReader: api, Clock: clocktesting.NewFakePassiveClock(t0)}
			out, _ := deliver(t, in, api, ev)
			if out.Result != c.want {
				t.Errorf("result %s (%s), want %s", out.Result, out.Message, c.want)
			}
		})
	}
}
