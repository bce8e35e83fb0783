package inbox

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// An event is dropped on the API server's copy of its payment, never on a
// cache that lags behind it. Seen after an API-server outage: the receiver's
// cache still showed a payment Processing when the provider's refund event
// arrived; "refunds apply only after success" wrote nothing, so no write
// conflict ever ran the event again on the Succeeded payment, and its
// refunded total was lost for good.
func TestAnEventIsDroppedOnlyOnTheAPIServersCopy(t *testing.T) {
	// The cache's copy is one the manager stores for a payment in
	// Processing (made by the state machine, conditions and all), so the
	// refund event changes nothing on it: only the rule, not a write
	// conflict, can take the event to the API server's copy.
	stale := paidOrder()
	stale.ResourceVersion = "7"
	stale.Status = v1alpha1.PaymentStatus{}
	stale.Status = payment.ApplyEvent(stale, payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedProcessing,
		EventID: "evt-processing", ProviderPaymentID: "pay_1"}, t0).Status
	if stale.Status.Phase != v1alpha1.PhaseProcessing {
		t.Fatalf("fixture: the cache's copy is %s, want Processing", stale.Status.Phase)
	}
	if ignored := payment.ApplyEvent(stale.DeepCopy(), payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedRefund,
		EventID: "evt-refund", ProviderPaymentID: "pay_1", RefundedTotal: &v1alpha1.Money{Value: 500, Currency: "USD"}}, t0); !equality.Semantic.DeepEqual(ignored.Status, stale.Status) {
		t.Fatalf("fixture: the refund event changes the cache's copy (%+v), so a write conflict would retry it anyway", ignored.Results)
	}
	fresh := paidOrder()
	fresh.ResourceVersion = "8"

	api := fakeAPI(t, fresh)
	cache := fakeAPI(t, stale)
	in := &Inbox{Client: api, Reader: cache, APIReader: api, Clock: clocktesting.NewFakePassiveClock(t0)}

	// A refund made in the dashboard: it settles no Refund, only the
	// payment's refunded total moves.
	out, _ := deliver(t, in, api, refundSucceeded("evt-refund", "re_1", "", 500, 500))
	if out.Result != v1alpha1.ResultApplied {
		t.Errorf("result %s (%s), want Applied on the Succeeded payment the API server holds", out.Result, out.Message)
	}
	p := &v1alpha1.Payment{}
	if err := api.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "order"}, p); err != nil {
		t.Fatal(err)
	}
	if a := p.Status.AmountRefunded; a == nil || a.Value != 500 || p.Status.Phase != v1alpha1.PhasePartiallyRefunded {
		t.Errorf("payment %s refunded %+v, want PartiallyRefunded 500", p.Status.Phase, p.Status.AmountRefunded)
	}
}

// When the cache is current, confirming costs one read and changes nothing:
// the event is still dropped as its payment's phase says.
func TestAnEventDroppedOnACurrentCacheStaysDropped(t *testing.T) {
	p := paidOrder()
	p.Status.Phase = v1alpha1.PhaseProcessing
	in, c := newFakeInbox(t, p)
	out, _ := deliver(t, in, c, refundSucceeded("evt-refund", "re_1", "", 500, 500))
	if out.Result == v1alpha1.ResultApplied {
		t.Errorf("result %s (%s): a refund of a payment still Processing must not be applied", out.Result, out.Message)
	}
	got := &v1alpha1.Payment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "order"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.AmountRefunded != nil {
		t.Errorf("refunded %+v on a Processing payment", got.Status.AmountRefunded)
	}
}

// A refund event of a Refund paywarden made can arrive while its payment
// still reads Processing (the manager has not stored the success yet, say
// after an API-server outage). The Refund settles at once; the payment's
// share of the event waits, Orphaned, until the payment succeeded. Recording
// the event Applied because its Refund part was would drop the payment's
// refunded total for good: nothing applies a finished event again.
func TestARefundEventWaitsForItsPaymentEvenWhenItsRefundSettled(t *testing.T) {
	p := paidOrder()
	p.Status.Phase = v1alpha1.PhaseProcessing
	in, c := newFakeInbox(t, p, r1(newUID, 500))
	ev := refundSucceeded("evt-refund", "re_1", ns+"/r1/"+newUID, 500, 500)
	out, evt := deliver(t, in, c, ev)
	if rf := getRefund(t, c); rf.Status.Phase != v1alpha1.RefundSucceeded {
		t.Errorf("refund %s, want Succeeded: the provider said so", rf.Status.Phase)
	}
	if out.Result != v1alpha1.ResultOrphaned {
		t.Fatalf("result %s (%s), want Orphaned until the payment succeeded", out.Result, out.Message)
	}

	got := &v1alpha1.Payment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "order"}, got); err != nil {
		t.Fatal(err)
	}
	got.Status.Phase = v1alpha1.PhaseSucceeded
	if err := c.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(evt), evt); err != nil {
		t.Fatal(err)
	}
	out, _ = apply(t, in, evt, ev)
	if out.Result != v1alpha1.ResultApplied {
		t.Errorf("re-applied: result %s (%s), want Applied", out.Result, out.Message)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "order"}, got); err != nil {
		t.Fatal(err)
	}
	if a := got.Status.AmountRefunded; a == nil || a.Value != 500 || got.Status.Phase != v1alpha1.PhaseRefunded && got.Status.Phase != v1alpha1.PhasePartiallyRefunded {
		t.Errorf("payment %s refunded %+v, want 500 refunded", got.Status.Phase, got.Status.AmountRefunded)
	}
}
