package stripe_test

import (
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// An event rendered in a later monthly release of the API version's own release
// train (2026-03-25.clover beside paywarden's 2026-02-25.clover) is acted on.
//
// Scenario:
//  1. The Stripe account's default API version is moved to the next monthly
//     clover release (Workbench "upgrade"), or the webhook endpoint is created with
//     it. Stripe renders events in that version (and /v1/events renders them in
//     the account's version at creation, which the operator cannot choose per
//     request).
//  2. Stripe delivers a correctly signed payment_intent.succeeded for a payment
//     paywarden tracks.
//
// Expected: the event is Supported and settles the payment. Stripe's versioning
// policy (docs.stripe.com/upgrades, "API versioning": since 2024-09-30.acacia,
// monthly releases within a named release carry only backward-compatible
// changes; breaking changes come only with a new name) makes a same-train event's
// fields mean what paywarden's version says, and stripe-go v84 — the library the
// adapter is built on — accepts exactly that: webhook.ConstructEvent compares only
// the release train (webhook/client.go isCompatibleAPIVersion). Recorded
// Ignored instead, it would never be applied ("an Ignored event is not
// applied again later", docs/providers.md): what only events tell (a refund
// failing after success, a dispute's outcome on a settled payment) would be
// lost.
func TestEventInALaterReleaseOfTheSameTrainIsActedOn(t *testing.T) {
	const sameTrain = "2026-03-25.clover"
	raw := []byte(`{"id":"evt_train","object":"event","api_version":"` + sameTrain + `","type":"payment_intent.succeeded","created":1767225600,"data":{"object":` +
		`{"id":"pi_3QaZ","object":"payment_intent","amount":1000,"amount_capturable":0,"amount_received":1000,"currency":"eur","status":"succeeded","metadata":{"merchant_reference":"ORD-1"}}}}`)

	// The reference: stripe-go's own webhook package accepts this event.
	const secret = "whsec_train"
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: raw, Secret: secret, Timestamp: time.Now()})
	if _, err := webhook.ConstructEvent(raw, signed.Header, secret); err != nil {
		t.Fatalf("stripe-go refuses the same-train event itself: %v", err)
	}

	ev, err := stripe.ParseEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Supported || ev.Status != provider.StatusSucceeded || ev.PaymentID != "pi_3QaZ" {
		t.Fatalf("same-train event: Supported=%v Status=%q PaymentID=%q NotActedOn=%q; want it acted on as Succeeded for pi_3QaZ",
			ev.Supported, ev.Status, ev.PaymentID, ev.NotActedOn)
	}
}
