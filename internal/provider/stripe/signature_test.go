package stripe_test

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// opensslVectors were computed with openssl, independently of this package and of
// stripe-go, and are hard-coded: a Verify that signed something else than
// "<t>.<raw body>" would fail them, whereas signatures made with
// SignatureHeaderValue (which paysim uses) would agree with any such change. Each
// comment is the exact command.
var opensslVectors = []struct {
	name, secret, body, sig string
	t                       int64
}{
	{
		name:   "ASCII event",
		secret: "whsec_test_paywarden_2026",
		t:      1767225600,
		body:   `{"id":"evt_1QaZ","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3Qa","object":"payment_intent","amount":1999,"currency":"eur","status":"succeeded"}}}`,
		// printf '%s' '1767225600.{"id":"evt_1QaZ","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3Qa","object":"payment_intent","amount":1999,"currency":"eur","status":"succeeded"}}}' | openssl dgst -sha256 -hmac 'whsec_test_paywarden_2026'
		sig: "01a0f29fa96763ec1871e22da3dcf66515134cdcefac3ba86b727154cf73ae89",
	},
	{
		name:   "the same event signed with the rolled secret",
		secret: "whsec_rotated_new_secret",
		t:      1767225600,
		body:   `{"id":"evt_1QaZ","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3Qa","object":"payment_intent","amount":1999,"currency":"eur","status":"succeeded"}}}`,
		// printf '%s' '1767225600.{"id":"evt_1QaZ","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_3Qa","object":"payment_intent","amount":1999,"currency":"eur","status":"succeeded"}}}' | openssl dgst -sha256 -hmac 'whsec_rotated_new_secret'
		sig: "1d6fec9077d0d9c1893fb9efbc25f65c17264e3c96dd6b1f98691ad2cf773443",
	},
	{
		name:   "non-ASCII body with a trailing newline",
		secret: "whsec_unicode",
		t:      1790000000,
		body:   "{\"id\":\"evt_2\",\"object\":\"event\",\"type\":\"charge.refunded\",\"data\":{\"object\":{\"id\":\"ch_1\",\"description\":\"Café – 東京 💳\"}}}\n",
		// printf '%s\n' '1790000000.{"id":"evt_2","object":"event","type":"charge.refunded","data":{"object":{"id":"ch_1","description":"Café – 東京 💳"}}}' | openssl dgst -sha256 -hmac 'whsec_unicode'
		sig: "9cea0f341b0ab89d5de07cde71e3463759a2f8a001e30212c1fa79d8d62f8582",
	},
}

func header(t int64, sigs ...string) string {
	h := "t=" + strconv.FormatInt(t, 10)
	for _, s := range sigs {
		h += ",v1=" + s
	}
	return h
}

func secrets(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func TestOpenSSLVectors(t *testing.T) {
	for _, v := range opensslVectors {
		at := time.Unix(v.t, 0)
		t.Run(v.name+" verifies", func(t *testing.T) {
			if err := stripe.Verify(header(v.t, v.sig), []byte(v.body), secrets(v.secret), 5*time.Minute, at); err != nil {
				t.Fatal(err)
			}
			// paysim signs with SignatureHeaderValue: it must produce what openssl did.
			if got, want := stripe.SignatureHeaderValue(at, []byte(v.body), []byte(v.secret)), header(v.t, v.sig); got != want {
				t.Fatalf("SignatureHeaderValue = %s, openssl says %s", got, want)
			}
		})
		for _, m := range []struct{ name, header, body, secret string }{
			{"one byte of the body changed", header(v.t, v.sig), providertest.Flip(v.body), v.secret},
			{"a trailing newline added", header(v.t, v.sig), v.body + "\n", v.secret},
			{"one hex digit of the signature changed", header(v.t, providertest.Flip(v.sig)), v.body, v.secret},
			{"the timestamp one second off", header(v.t+1, v.sig), v.body, v.secret},
			{"one byte of the secret changed", header(v.t, v.sig), v.body, providertest.Flip(v.secret)},
			{"the signature under v0 only", "t=" + strconv.FormatInt(v.t, 10) + ",v0=" + v.sig, v.body, v.secret},
		} {
			providertest.ChangeRejected(t, v.name, m.name, stripe.Verify(m.header, []byte(m.body), secrets(m.secret), 5*time.Minute, at))
		}
	}
}

// TestRotation: during a secret roll Stripe signs with both secrets; any configured
// secret may match any v1.
func TestRotation(t *testing.T) {
	old, rolled := opensslVectors[0], opensslVectors[1]
	at := time.Unix(old.t, 0)
	both := header(old.t, old.sig, rolled.sig)
	tests := []struct {
		name    string
		header  string
		secrets [][]byte
		ok      bool
	}{
		{"both signatures, old secret configured", both, secrets(old.secret), true},
		{"both signatures, new secret configured", both, secrets(rolled.secret), true},
		{"both signatures, both configured", both, secrets(old.secret, rolled.secret), true},
		{"new signature only, both configured (old first)", header(old.t, rolled.sig), secrets(old.secret, rolled.secret), true},
		{"old signature only, new secret configured", header(old.t, old.sig), secrets(rolled.secret), false},
		{"both signatures, neither secret configured", both, secrets("whsec_other"), false},
		{"an empty secret does not block the other", both, secrets("", " ", rolled.secret), true},
		{"a secret with a trailing newline (from a Secret file)", header(old.t, old.sig), secrets(old.secret + "\n"), true},
		{"blank secrets never verify a header signed with the empty key", stripe.SignatureHeaderValue(at, []byte(old.body), []byte("")), secrets("", " \n"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := stripe.Verify(tt.header, []byte(old.body), tt.secrets, 5*time.Minute, at)
			if tt.ok != (err == nil) {
				t.Fatalf("err = %v", err)
			}
			if !tt.ok && !errors.Is(err, provider.ErrNoMatchingSignature) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestBlankSecretsAreNeverKeys: Verify trims a secret, so a blank one would be
// the empty key, which anyone can sign with.
func TestBlankSecretsAreNeverKeys(t *testing.T) {
	v := opensslVectors[0]
	at := time.Unix(v.t, 0)
	a := providertest.At(t, providertest.Unreachable, newAdapter)
	providertest.BlankSecretsRefused(t, stripe.SchemeStripeSignature, []byte(v.secret),
		func(_ *testing.T, secret []byte) http.Header {
			return http.Header{stripe.HeaderSignature: {stripe.SignatureHeaderValue(at, []byte(v.body), bytes.TrimSpace(secret))}}
		},
		func(h http.Header, secrets [][]byte) (string, error) {
			return a.VerifyWebhook(t.Context(), h, []byte(v.body), secrets, 5*time.Minute, at)
		})
}

// TestToleranceBothDirections moves our clock around a fixed, independently signed
// vector: stripe-go only rejects old timestamps; ahead of our clock is checked here.
func TestToleranceBothDirections(t *testing.T) {
	v := opensslVectors[0]
	ts := time.Unix(v.t, 0)
	const tol = 5 * time.Minute
	tests := []struct {
		name string
		now  time.Time
		ok   bool
	}{
		{"same second", ts, true},
		{"4 minutes ahead of our clock", ts.Add(-4 * time.Minute), true},
		{"4 minutes behind our clock", ts.Add(4 * time.Minute), true},
		{"exactly +tolerance (ahead)", ts.Add(-tol), true},
		{"exactly -tolerance (behind)", ts.Add(tol), true},
		{"tolerance+1s ahead", ts.Add(-tol - time.Second), false},
		{"tolerance+1s behind", ts.Add(tol + time.Second), false},
		{"an hour ahead", ts.Add(-time.Hour), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := stripe.Verify(header(v.t, v.sig), []byte(v.body), secrets(v.secret), tol, tt.now)
			providertest.AssertTolerance(t, err, tt.ok)
		})
	}
	t.Run("zero tolerance is the 5 minute default", func(t *testing.T) {
		if err := stripe.Verify(header(v.t, v.sig), []byte(v.body), secrets(v.secret), 0, ts.Add(-5*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := stripe.Verify(header(v.t, v.sig), []byte(v.body), secrets(v.secret), 0, ts.Add(-5*time.Minute-time.Second)); !errors.Is(err, provider.ErrTimestampTolerance) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestMalformedHeaders(t *testing.T) {
	v := opensslVectors[0]
	at := time.Unix(v.t, 0)
	tests := []struct {
		name   string
		header string
		reason error
	}{
		{"no header", "", provider.ErrMissingHeader},
		{"blank header", "  ", provider.ErrMissingHeader},
		{"no t", "v1=" + v.sig, provider.ErrMalformedHeader},
		{"two t", header(v.t, v.sig) + ",t=" + strconv.FormatInt(v.t, 10), provider.ErrMalformedHeader},
		{"t not a number", "t=soon,v1=" + v.sig, provider.ErrMalformedHeader},
		{"negative t", "t=-5,v1=" + v.sig, provider.ErrMalformedHeader},
		{"a field without =", header(v.t, v.sig) + ",garbage", provider.ErrMalformedHeader},
		{"no v1", "t=" + strconv.FormatInt(v.t, 10), provider.ErrNoMatchingSignature},
		{"v1 not hex", header(v.t, "zz"), provider.ErrNoMatchingSignature},
		{"header too long", header(v.t, v.sig) + strings.Repeat(",v0=ab", 1000), provider.ErrMalformedHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := stripe.Verify(tt.header, []byte(v.body), secrets(v.secret), 5*time.Minute, at)
			if !errors.Is(err, provider.ErrInvalidSignature) || !errors.Is(err, tt.reason) {
				t.Fatalf("err = %v, want %v", err, tt.reason)
			}
		})
	}
	t.Run("the 4096-byte bound is exact", func(t *testing.T) {
		// padded is the valid header grown to n bytes by an ignored v0 field.
		padded := func(n int) string {
			h := header(v.t, v.sig) + ",v0="
			return h + strings.Repeat("a", n-len(h))
		}
		if err := stripe.Verify(padded(4096), []byte(v.body), secrets(v.secret), 5*time.Minute, at); err != nil {
			t.Fatalf("4096 bytes: %v", err)
		}
		if err := stripe.Verify(padded(4097), []byte(v.body), secrets(v.secret), 5*time.Minute, at); !errors.Is(err, provider.ErrMalformedHeader) {
			t.Fatalf("4097 bytes: %v", err)
		}
	})
	t.Run("no secrets configured", func(t *testing.T) {
		err := stripe.Verify(header(v.t, v.sig), []byte(v.body), nil, 5*time.Minute, at)
		if !errors.Is(err, provider.ErrNoMatchingSignature) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("VerifyWebhook reads Stripe-Signature in any spelling and names the scheme", func(t *testing.T) {
		a := providertest.At(t, providertest.Unreachable, newAdapter)
		h := http.Header{"stripe-signature": {header(v.t, v.sig)}}
		scheme, err := a.VerifyWebhook(t.Context(), h, []byte(v.body), secrets(v.secret), 5*time.Minute, at)
		if err != nil || scheme != "stripe-signature" {
			t.Fatalf("%q %v", scheme, err)
		}
	})
}
