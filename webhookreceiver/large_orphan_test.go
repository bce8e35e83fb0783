package webhookreceiver_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// An event the receiver acknowledges but does not apply can still be applied
// later by the inbox processor, whatever its size within maxBodyBytes.
//
// Scenario:
//  1. KukoPay delivers a correctly signed payment.succeeded of ~80 KiB (a long
//     description; the provider's maxBodyBytes is the default 1 MiB, so the
//     receiver reads and verifies it) before paywarden has recorded the payment
//     (the webhook raced the create's answer: SPEC §6 step 5 "No Payment yet →
//     Orphaned; it is applied when the Payment appears").
//  2. The receiver stores it (payload cut to 64 KiB, payloadTruncated) as
//     Orphaned and answers 200, so KukoPay never delivers it again.
//  3. When the Payment appears, the inbox processor re-parses the stored payload
//     (inbox.Reparse) to apply it.
//
// Expected (SPEC §6 steps 4-5, "nothing lost on acceptance"): an acknowledged,
// unapplied event is one the processor can apply — or the receiver does not
// acknowledge it (5xx, so the provider redelivers) and keeps no record that
// would make the next delivery a duplicate. A truncated payload cannot be
// parsed again (inbox.Reparse: ErrNotReparsable), so the processor could only
// record it Ignored. The same holds for a big event whose apply at receipt
// does not finish within the apply budget (Pending), e.g. a Stripe
// charge.dispute.closed carrying dispute evidence (up to 150,000 characters
// of text), news that no status query brings back.
func TestAnAcknowledgedUnappliedEventCanBeAppliedLater(t *testing.T) {
	k := newKukoPay(t)
	obj, err := json.Marshal(kukopay.PaymentObject{
		ID: "pay_big", Object: "payment", OutTradeNo: "order-big", Amount: 1999, AmountReceived: 1999,
		Currency: "USD", Status: "succeeded", Created: time.Now().Unix(),
		Description: strings.Repeat("Line item with a long description. ", 80<<10/35),
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(kukopay.EventObject{
		ID: "evt_big", Object: "event", Type: "payment.succeeded", Created: time.Now().Unix(),
		Data: kukopay.EventData{Object: obj},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(body) <= v1alpha1.MaxStoredPayload {
		t.Fatalf("body of %d bytes is not over the stored payload cap", len(body))
	}

	r := fixture.Send(t, "POST", k.url(), body, fixture.KukoPayHeader(body, time.Now(), k.secret))
	if r.Code == http.StatusOK {
		evt := fixture.WaitEventResult(t, env.Client, k.ns, k.name, "evt_big", "", fixture.Timeout)
		if _, err := inbox.Reparse(&kukopay.Adapter{}, evt); !evt.Status.Result.IsDone() && err != nil {
			t.Fatalf("acknowledged %s (200) and left it %s, but the inbox processor cannot apply it when the Payment appears: %v",
				evt.Spec.EventID, evt.Status.Result, err)
		}
		return
	}
	if r.Code != http.StatusServiceUnavailable {
		t.Fatalf("answer %d, want 503 (not acknowledged, delivered again) or 200 with the event applicable", r.Code)
	}
	// Not acknowledged, and not kept: the provider's next delivery is no
	// duplicate. Once the payment is known, it is applied.
	var kept v1alpha1.WebhookEvent
	if err := env.Client.Get(t.Context(), types.NamespacedName{Namespace: k.ns, Name: v1alpha1.WebhookEventName(k.name, "evt_big")}, &kept); !apierrors.IsNotFound(err) {
		t.Fatalf("the unacknowledged event's record is kept (%v, result %s): the provider's next delivery is a duplicate, and the event is lost", err, kept.Status.Result)
	}
	p := k.payment(t, "order-big", "order-big", "pay_big", 1999)
	if r := fixture.Send(t, "POST", k.url(), body, fixture.KukoPayHeader(body, time.Now(), k.secret)); r.Code != http.StatusOK {
		t.Fatalf("the next delivery, once the payment is known: %d, want 200", r.Code)
	}
	fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
}
