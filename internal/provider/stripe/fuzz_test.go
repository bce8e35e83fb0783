package stripe_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

func FuzzVerify(f *testing.F) {
	v := opensslVectors[0]
	for _, s := range []string{
		header(v.t, v.sig), header(v.t, v.sig, opensslVectors[1].sig), "v1=ab,t=1767225600", "t=1,v0=x,v1=", "", ",,,",
		"t=,v1=", "t=-1", "t=+5,v1=a", "t=99999999999999999999,v1=a", "=,=", "t=1=2,v1=3=4", "t=1,t=1,v1=00",
	} {
		f.Add(s)
	}
	at := time.Unix(v.t, 0)
	f.Fuzz(func(t *testing.T, h string) {
		err := stripe.Verify(h, []byte(v.body), secrets("whsec_fuzz_unknown"), time.Minute, at)
		if err == nil {
			t.Fatalf("header %q verified against a secret it could not know", h)
		}
		if !errors.Is(err, provider.ErrInvalidSignature) {
			t.Fatalf("error not classified: %v", err)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(opensslVectors[0].body))
	f.Add(event("charge.refunded", `{"id":"ch_1","amount":1,"amount_refunded":2,"currency":"usd","payment_intent":"pi_1"}`))
	f.Add(event("checkout.session.completed", `{"id":"cs_1","status":"complete","payment_status":"paid","currency":"jpy","amount_total":5,"payment_intent":{"id":"pi_1","status":"succeeded","currency":"jpy"}}`))
	f.Add(event("refund.failed", `{"id":"re_1","amount":1,"currency":"isk","status":"failed"}`))
	f.Add([]byte(`{"id":"e","type":"charge.dispute.created","data":{"object":null}}`))
	f.Add(event("payment_intent.succeeded", `{"currency":"eur"}`))
	f.Add(event("charge.refunded", `{"id":"ch_1","currency":"eur","payment_intent":null}`))
	f.Add([]byte(`{"id":"e","type":"refund.updated","api_version":"2020-08-27","data":{"object":{}}}`))
	f.Add([]byte(`{"id":"e","type":"x.y","created":-9223372036854775808,"data":{"object":"s"}}`))
	f.Add([]byte(`{"id":"e","type":"payment_intent.succeeded","created":253402300800,"data":{"object":{"id":"pi_1","currency":"usd"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		providertest.FuzzedEvent(t, b, stripe.ParseEvent)
		// What an accepted event carries into a status, the status can hold.
		if ev, err := stripe.ParseEvent(b); err == nil {
			if y := ev.OccurredAt.Year(); y < 0 || y > 9999 || (ev.Currency != "" && (len(ev.Currency) != 3 || strings.Trim(ev.Currency, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "")) {
				t.Fatalf("accepted event with a time or currency no status holds: %v %q", ev.OccurredAt, ev.Currency)
			}
		}
	})
}
