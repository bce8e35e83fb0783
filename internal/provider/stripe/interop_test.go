package stripe_test

import (
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/paywarden/paywarden/internal/provider/providertest"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// stripe-go's webhook package is Stripe's own verifier: a hostile variant of a
// request it signed (GenerateTestSignedPayload) is judged by Verify as by its
// ValidatePayload, with every configured secret active, except where a row
// names why paywarden rejects by design what stripe-go accepts.

const (
	interopSecret = "whsec_interop_current"
	interopOld    = "whsec_interop_before_the_roll"
	interopBody   = `{"id":"evt_3Qb","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3Qb","object":"payment_intent","amount":1999,"currency":"eur","description":"Café – 東京 💳"}}}`
)

// stripeGoVerify is stripe-go's verdict with its default tolerance (300 s, old
// timestamps only) when any of secrets may match.
func stripeGoVerify(header, body string, secrets []string) error {
	err := webhook.ErrNoValidSignature
	for _, s := range secrets {
		if err = webhook.ValidatePayload([]byte(body), header, s); err == nil {
			return nil
		}
	}
	return err
}

func TestStripeGoDifferential(t *testing.T) {
	n := time.Now().Unix()
	ts := strconv.FormatInt(n, 10)
	// signed is stripe-go's header for body at t under scheme ("" is v1).
	signed := func(secret string, t int64, body, scheme string) *webhook.SignedPayload {
		return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(body), Secret: secret, Timestamp: time.Unix(t, 0), Scheme: scheme})
	}
	good := hex.EncodeToString(signed(interopSecret, n, interopBody, "").Signature)
	old := hex.EncodeToString(signed(interopOld, n, interopBody, "").Signature)
	wrong := hex.EncodeToString(signed("whsec_nobody_configured_this", n, interopBody, "").Signature)
	at := func(t int64) string { return signed(interopSecret, t, interopBody, "").Header }
	pad := strings.Repeat(",v0="+strings.Repeat("0", 64), 58) // 68 bytes a field
	tests := []struct {
		name    string
		header  string
		body    string
		secrets []string
		want    bool   // stripe-go's verdict
		rejects string // why paywarden rejects by design what stripe-go accepts
	}{
		{name: "one v1 (GenerateTestSignedPayload)", header: at(n), want: true},
		{name: "several v1, the valid one last", header: header(n, wrong, old, good), want: true},
		{name: "several v1, the valid one first", header: header(n, good, wrong, old), want: true},
		{name: "the valid signature under v0 only", header: signed(interopSecret, n, interopBody, "v0").Header},
		{name: "a v0 beside the valid v1", header: "t=" + ts + ",v0=" + wrong + ",v1=" + good, want: true},
		{name: "the valid signature under a scheme named v2", header: signed(interopSecret, n, interopBody, "v2").Header},
		{name: "the valid signature under a scheme named V1", header: signed(interopSecret, n, interopBody, "V1").Header},
		{name: "the valid v1 in upper-case hex", header: header(n, strings.ToUpper(good)), want: true},
		{name: "a v1 that is not hex beside the valid one", header: header(n, "zz", good), want: true},
		{name: "the valid v1 truncated by one byte", header: header(n, good[:62])},
		{name: "a space after a comma", header: "t=" + ts + ", v1=" + good},
		{name: "t after the signatures", header: "v1=" + good + ",t=" + ts, want: true},
		{name: "a field without =", header: at(n) + ",garbage"},
		{name: "a v1 with two =", header: "t=" + ts + ",v1=" + good + "=" + good},

		{name: "one byte of the body flipped", header: at(n), body: providertest.Flip(interopBody)},
		{name: "a newline appended to the body", header: at(n), body: interopBody + "\n"},
		{name: "t one second later than signed", header: header(n+1, good)},
		{name: "no t", header: "v1=" + good},
		{name: "t with leading zeros", header: "t=00" + ts + ",v1=" + good, want: true},
		{name: "two t, the signed one first", header: header(n, good) + ",t=" + strconv.FormatInt(n+1, 10)},
		{name: "two t, the signed one last", header: "t=" + strconv.FormatInt(n+1, 10) + "," + header(n, good), want: true,
			rejects: "which t was signed is ambiguous; stripe-go silently takes the last, Stripe sends one"},
		{name: "t with a plus sign", header: "t=+" + ts + ",v1=" + good, want: true,
			rejects: "Stripe sends t as unsigned digits and the signed string has no sign"},

		{name: "t tolerance+1s in the past", header: at(n - 301)},
		{name: "t the tolerance in the past, plus the part of the second gone by", header: at(n - 300)},
		// The cases inside the window keep 10 s from its edge, those past it
		// 10 s beyond: stripe-go reads the clock itself, and a loaded machine
		// may spend seconds between n and its check.
		{name: "t tolerance-10s in the past", header: at(n - 290), want: true},
		{name: "t tolerance-10s in the future", header: at(n + 290), want: true},
		{name: "t exactly the tolerance in the future", header: at(n + 300), want: true},
		{name: "t tolerance+10s in the future", header: at(n + 310), want: true,
			rejects: "a timestamp from the future is as suspicious as an old one; stripe-go checks only the age"},
		{name: "t an hour in the future", header: at(n + 3600), want: true,
			rejects: "a timestamp from the future is as suspicious as an old one; stripe-go checks only the age"},

		{name: "rolled secret: both signatures, the new secret configured", header: header(n, old, good), want: true},
		{name: "rolled secret: the old signature, both secrets configured", header: header(n, old), secrets: []string{interopSecret, interopOld}, want: true},
		{name: "rolled secret: the old signature, the new secret configured", header: header(n, old)},
		{name: "the secret without its whsec_ prefix", header: header(n, good), secrets: []string{strings.TrimPrefix(interopSecret, "whsec_")}},

		{name: "an empty header", header: ""},
		{name: "a 4.0 KB header, the valid signature last", header: "t=" + ts + pad + ",v1=" + good, want: true},
		{name: "a 4.2 KB header, the valid signature last", header: "t=" + ts + pad + pad[:204] + ",v1=" + good, want: true,
			rejects: "the header is bounded (4096 bytes) before any HMAC; Stripe sends one v1 per active secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, ss := interopBody, []string{interopSecret}
			if tt.body != "" {
				body = tt.body
			}
			if tt.secrets != nil {
				ss = tt.secrets
			}
			library := func() error { return stripeGoVerify(tt.header, body, ss) }
			verify := func(now time.Time) error {
				return stripe.Verify(tt.header, []byte(body), secrets(ss...), webhook.DefaultTolerance, now)
			}
			providertest.SameVerdict(t, library, verify, tt.want, tt.rejects)
		})
	}
}

// TestStripeGoAcceptsSignatureHeaderValue: the header paysim sends while a secret
// is being rolled (one v1 per secret) is valid for stripe-go under each secret.
func TestStripeGoAcceptsSignatureHeaderValue(t *testing.T) {
	h := stripe.SignatureHeaderValue(time.Now(), []byte(interopBody), []byte(interopOld), []byte(interopSecret))
	for _, s := range []string{interopOld, interopSecret} {
		if err := webhook.ValidatePayload([]byte(interopBody), h, s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}
