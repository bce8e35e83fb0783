package inbox

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestATruncatedEventGivenBackIsNotAcknowledgedAsADuplicate: a truncated
// event that is given back (record deleted, 503) is not, and is not later,
// acknowledged as "already in the inbox".
//
//  1. The provider delivers evt-big (over 64 KiB: payload cut) about order-big,
//     whose Payment the cache does not show yet. Receive stores the record and
//     applies it.
//  2. While that apply runs, the same event is delivered again (the
//     provider's own timeout and retry, another receiver replica). Its store
//     meets AlreadyExists.
//  3. The first apply finds no Payment (Orphaned); giveBack deletes the record
//     and answers 503.
//  4. Had step 2 been answered Duplicate (200) and remembered in the Recent
//     cache, the provider would have its 200, and a later delivery would be
//     answered from Recent without being stored: no record, never applied,
//     acknowledged, lost (SPEC §6: an acknowledged event is durable in the
//     inbox).
func TestATruncatedEventGivenBackIsNotAcknowledgedAsADuplicate(t *testing.T) {
	ctx := context.Background()
	in, api := newFakeInbox(t)
	in.Recent = NewRecentEvents(8)
	raw := []byte(`{"id":"evt-big","description":"` + strings.Repeat("x", v1alpha1.MaxStoredPayload+100) + `"}`)
	ev := provider.Event{ID: "evt-big", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true, OccurredAt: t0,
		PaymentID: "pay_big", MerchantReference: "order-big", Raw: raw}

	var second Outcome
	var secondErr error
	redelivered := false
	in.Reader = interceptor.NewClient(api.(client.WithWatch), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			var stored v1alpha1.WebhookEvent
			key := types.NamespacedName{Namespace: testProvider.Namespace, Name: v1alpha1.WebhookEventName(testProvider.Name, "evt-big")}
			if !redelivered && c.Get(ctx, key, &stored) == nil { // the first delivery's record is stored: its apply runs
				redelivered = true // step 2: the second delivery while the first applies
				second, secondErr = in.Receive(ctx, testProvider, ev, v1alpha1.ViaWebhook, "kukopay", 0)
			}
			return c.List(ctx, list, opts...)
		},
	})

	_, firstErr := in.Receive(ctx, testProvider, ev, v1alpha1.ViaWebhook, "kukopay", 0)
	if !redelivered {
		t.Fatal("the test did not interleave the second delivery with the first apply")
	}
	if firstErr == nil {
		t.Fatal("the first delivery was acknowledged; this test is about the truncated event given back (503)")
	}
	t.Logf("first: %v; second: %+v %v", firstErr, second, secondErr)
	var kept v1alpha1.WebhookEvent
	getErr := api.Get(ctx, types.NamespacedName{Namespace: testProvider.Namespace, Name: v1alpha1.WebhookEventName(testProvider.Name, "evt-big")}, &kept)
	if secondErr == nil && apierrors.IsNotFound(getErr) {
		t.Errorf("the second delivery was acknowledged (%s: %s) on a record the first then deleted (503 %v): no record, never applied, the provider has its 200: the event is lost",
			second.Result, second.Message, firstErr)
	}
	// Step 4: the provider's next delivery must be stored, not answered from Recent.
	third, err := in.Receive(ctx, testProvider, ev, v1alpha1.ViaWebhook, "kukopay", 0)
	if err == nil && !third.Stored && apierrors.IsNotFound(getErr) {
		t.Errorf("the next delivery, after the record was deleted, is answered %s (%s) without being stored: the Recent cache keeps a record that is gone",
			third.Result, third.Message)
	}
}

// TestAnOldCutEventNoPaymentMatchesIsKept: a cut (over 64 KiB) event that
// occurred more than GiveBackWindow ago and matches no Payment (a dispute of
// a payment another integration made on the same account) is acknowledged
// and kept, it and its later deliveries: refused on every delivery, it would
// keep the endpoint failing until the provider disables it, and every
// webhook with it.
func TestAnOldCutEventNoPaymentMatchesIsKept(t *testing.T) {
	ctx := context.Background()
	in, _ := newFakeInbox(t)
	in.Recent = NewRecentEvents(8)
	raw := []byte(`{"id":"evt-foreign","description":"` + strings.Repeat("x", v1alpha1.MaxStoredPayload+100) + `"}`)
	ev := provider.Event{ID: "evt-foreign", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true,
		OccurredAt: t0.Add(-GiveBackWindow - time.Minute), PaymentID: "pay_foreign", MerchantReference: "not-ours", Raw: raw}
	first, err := in.Receive(ctx, testProvider, ev, v1alpha1.ViaWebhook, "kukopay", 0)
	if err != nil || !first.Stored || first.Result != v1alpha1.ResultOrphaned {
		t.Fatalf("first delivery: %+v, %v; want it stored Orphaned and acknowledged", first, err)
	}
	again, err := in.Receive(ctx, testProvider, ev, v1alpha1.ViaWebhook, "kukopay", 0)
	if err != nil || again.Result != v1alpha1.ResultDuplicate {
		t.Fatalf("next delivery: %+v, %v; want a duplicate, acknowledged", again, err)
	}
	// Within the window the same event is given back.
	young := ev
	young.ID, young.OccurredAt = "evt-young", t0.Add(-time.Minute)
	if _, err := in.Receive(ctx, testProvider, young, v1alpha1.ViaWebhook, "kukopay", 0); err == nil {
		t.Error("a cut event a minute old that no Payment matches was acknowledged: it could not be applied later")
	}
}
