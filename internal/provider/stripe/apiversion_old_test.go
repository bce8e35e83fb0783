package stripe_test

import (
	"strings"
	"testing"

	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// An event rendered in an API version before 2017-05-25 is recorded as not acted
// on (Ignored, 200), like any event in another API version; it is not malformed.
//
// Scenario:
//  1. A Stripe account created years ago still has its default API version at
//     2017-02-14, and its webhook endpoint was created without api_version (or
//     /v1/events renders the event in the account's version at its creation).
//  2. Stripe delivers a correctly signed charge.refunded. In that version the
//     event's `request` is a plain string ("req_..."): Stripe changelog
//     2017-05-25, "The request field of the Events object now specifies both the
//     request ID and idempotency key" (breaking: "Previously, request was just the
//     ID").
//
// Expected (docs/providers.md, Stripe: "An event in any other version is stored
// Ignored with the message stripe event rendered in API version <v>..."; SPEC §6
// step 3: an event paywarden does not act on is answered 200 so Stripe does not
// retry it for days): ParseEvent returns it unsupported with NotActedOn naming the
// version. Decoded whole into stripego.Event (whose Request is a struct)
// before its api_version is read, the event would be malformed: the receiver
// would answer 400 to every delivery, and Stripe retries each for three days
// and then disables the endpoint.
func TestEventInAPre2017APIVersionIsIgnoredNotMalformed(t *testing.T) {
	raw := []byte(`{"id":"evt_1AbCdE","object":"event","api_version":"2017-02-14","created":1767225600,"livemode":true,"pending_webhooks":1,"request":"req_AbCdEf123",` +
		`"type":"charge.refunded","data":{"object":{"id":"ch_1AbC","object":"charge","amount":1000,"amount_refunded":300,"currency":"eur","refunded":false}}}`)
	ev, err := stripe.ParseEvent(raw)
	if err != nil {
		t.Fatalf("an event in API version 2017-02-14 is refused as malformed (the receiver answers 400): %v", err)
	}
	if ev.Supported || !strings.Contains(ev.NotActedOn, "2017-02-14") {
		t.Fatalf("%+v: want it recorded as not acted on, naming its version", ev)
	}
}
