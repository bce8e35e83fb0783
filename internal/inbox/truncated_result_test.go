package inbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// A cut event (body over 64 KiB: its payload is truncated and
// can never be parsed again) is acknowledged only once applied (Receive,
// giveBack): only the delivery that holds the whole body can say what it did.
// Its result is written before the answer, not through the asynchronous
// ResultQueue: were that write lost (the receiver killed after its 200), the
// processor could not finish it (Reparse fails, ErrNotReparsable) and would
// record Ignored an event that moved the payment (SPEC §5's audit trail).
func TestACutEventsResultIsOnTheRecordWhenAcknowledged(t *testing.T) {
	ctx := context.Background()
	p := paidOrder()
	p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseProcessing, ProviderPaymentID: "pay_1"}
	in, c := queueWorld(t, nil, p)
	in.Results = heldQueue(4) // the queued write never happens (the receiver died after its 200)

	raw := []byte(`{"id":"evt-cut","description":"` + strings.Repeat("x", v1alpha1.MaxStoredPayload+100) + `"}`)
	ev := provider.Event{ID: "evt-cut", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true, OccurredAt: t0,
		PaymentID: "pay_1", Amount: 1999, Currency: "USD", Raw: raw}
	prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay"}}
	out, err := in.Receive(ctx, prov, ev, v1alpha1.ViaWebhook, "kukopay", 0)
	if err != nil || out.Result != v1alpha1.ResultApplied || !out.Event.Spec.PayloadTruncated {
		t.Fatalf("precondition: a cut event applied and acknowledged; got %+v, %v", out, err)
	}

	recorded := results(t, c, []resultJob{{evt: out.Event}})[0]
	if recorded.IsDone() {
		return
	}
	// What the inbox processor does with it after its grace period
	// (controllers/webhookevent_controller.go: Reparse, then Ignore).
	_, rerr := Reparse(fakeParser{}, out.Event)
	if !errors.Is(rerr, ErrNotReparsable) {
		t.Fatalf("precondition: Reparse of a cut payload: %v", rerr)
	}
	ign, ierr := in.Ignore(ctx, out.Event, rerr.Error())
	got := &v1alpha1.Payment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	t.Errorf("a cut event was acknowledged with its result %q only queued (record says %q): when that write is lost the processor cannot re-derive it and records %s (%v) %q, while the payment it moved is %s",
		out.Result, recorded, ign.Result, ierr, ign.Message, got.Status.Phase)
}
