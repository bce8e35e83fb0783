package paypal_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// The PayPal scheme is verified by PayPal's API, so these vectors run against paysim's
// verify-webhook-signature endpoint over real HTTP.
func TestSignatureVectors(t *testing.T) {
	sim := paysim.New(paysim.Options{})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { sim.Close(); srv.Close() })
	oldSecret, newSecret := []byte("pp-old"), []byte("pp-new")
	if err := sim.SetWebhookTarget(paysim.PayPal, "", newSecret); err != nil {
		t.Fatal(err)
	}
	a, err := paypal.New(provider.Config{
		Name: "ns/pp", APIURL: srv.URL + "/paypal", WebhookID: sim.PayPalWebhookID(),
		Credentials: map[string][]byte{"clientID": []byte("id"), "clientSecret": []byte("secret")},
	})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	// Whitespace and an HTML character must survive the round trip: PayPal signs the
	// event as sent, so it must be passed on byte for byte.
	body := []byte(`{"id":"WH-1", "event_type":"PAYMENT.CAPTURE.COMPLETED","summary":"a < b & c","resource":{}}`)
	signed := func(secret []byte, at time.Time, b []byte) http.Header {
		ts := at.Format(time.RFC3339)
		h := http.Header{}
		h.Set(paypal.HeaderTransmissionID, "tx-1")
		h.Set(paypal.HeaderTransmissionTime, ts)
		h.Set(paypal.HeaderTransmissionSig, paypal.SignTransmission(secret, "tx-1", ts, sim.PayPalWebhookID(), b))
		h.Set(paypal.HeaderCertURL, "https://paysim.invalid/cert")
		h.Set(paypal.HeaderAuthAlgo, paypal.SimAuthAlgo)
		return h
	}
	edit := func(h http.Header, f func(http.Header)) http.Header { h = h.Clone(); f(h); return h }
	lower := http.Header{}
	for k, v := range signed(newSecret, now, body) {
		lower[strings.ToLower(k)] = v
	}

	tests := []struct {
		name       string
		h          http.Header
		body       []byte
		simSecrets [][]byte
		reason     error // nil = valid
		callsAPI   bool
	}{
		{"valid", signed(newSecret, now, body), body, nil, nil, true},
		{"tampered body", signed(newSecret, now, body), []byte(strings.Replace(string(body), "WH-1", "WH-2", 1)), nil, provider.ErrNoMatchingSignature, true},
		{"wrong secret", signed([]byte("attacker"), now, body), body, nil, provider.ErrNoMatchingSignature, true},
		{"second of two configured secrets is the valid one", signed(newSecret, now, body), body, [][]byte{[]byte("unrelated"), newSecret}, nil, true},
		{"only the old secret valid during rotation", signed(oldSecret, now, body), body, [][]byte{oldSecret, newSecret}, nil, true},
		{"timestamp six minutes old is rejected without calling PayPal", signed(newSecret, now.Add(-6*time.Minute), body), body, nil, provider.ErrTimestampTolerance, false},
		{"timestamp six minutes in the future is rejected without calling PayPal", signed(newSecret, now.Add(6*time.Minute), body), body, nil, provider.ErrTimestampTolerance, false},
		{"missing header is rejected without calling PayPal", edit(signed(newSecret, now, body), func(h http.Header) { h.Del(paypal.HeaderTransmissionSig) }), body, nil, provider.ErrMissingHeader, false},
		{"malformed transmission time is rejected without calling PayPal", edit(signed(newSecret, now, body), func(h http.Header) { h.Set(paypal.HeaderTransmissionTime, "yesterday") }), body, nil, provider.ErrMalformedHeader, false},
		{"header names in another case and order", lower, body, nil, nil, true},
		{"unknown auth algorithm fails verification", edit(signed(newSecret, now, body), func(h http.Header) { h.Set(paypal.HeaderAuthAlgo, "MD5withRSA") }), body, nil, provider.ErrNoMatchingSignature, true},
		{"body that is not JSON is rejected without calling PayPal", signed(newSecret, now, []byte("nope")), []byte("nope"), nil, provider.ErrNoMatchingSignature, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secrets := tt.simSecrets
			if secrets == nil {
				secrets = [][]byte{newSecret}
			}
			_ = sim.SetWebhookTarget(paysim.PayPal, "", secrets...)
			before := sim.Counters().VerifyCalls
			scheme, err := a.VerifyWebhook(context.Background(), tt.h, tt.body, nil, 5*time.Minute, now)
			if scheme != provider.SchemePayPal {
				t.Errorf("scheme %q", scheme)
			}
			if called := sim.Counters().VerifyCalls > before; called != tt.callsAPI {
				t.Errorf("verify API called: %v", called)
			}
			if tt.reason == nil {
				if err != nil {
					t.Fatalf("want valid: %v", err)
				}
				return
			}
			if !errors.Is(err, provider.ErrInvalidSignature) || !errors.Is(err, tt.reason) {
				t.Fatalf("err = %v, want %v", err, tt.reason)
			}
		})
	}

	t.Run("verification API outage is retryable, not an invalid signature", func(t *testing.T) {
		_ = sim.SetWebhookTarget(paysim.PayPal, "", newSecret)
		sim.SetFaults(paysim.Faults{ServerErrorRate: 1})
		defer sim.SetFaults(paysim.Faults{})
		_, err := a.VerifyWebhook(context.Background(), signed(newSecret, now, body), body, nil, 5*time.Minute, now)
		if errors.Is(err, provider.ErrInvalidSignature) || !errors.Is(err, provider.ErrRetryable) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("no webhook id configured cannot verify", func(t *testing.T) {
		b, _ := paypal.New(provider.Config{Name: "ns/pp", APIURL: srv.URL + "/paypal", Credentials: map[string][]byte{"clientID": []byte("id"), "clientSecret": []byte("s")}})
		if _, err := b.VerifyWebhook(context.Background(), signed(newSecret, now, body), body, nil, 5*time.Minute, now); !errors.Is(err, provider.ErrInvalidSignature) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestNewRequiresCredentials(t *testing.T) {
	if _, err := paypal.New(provider.Config{Name: "ns/pp", APIURL: "http://x", Credentials: map[string][]byte{"clientID": []byte("id")}}); err == nil {
		t.Fatal("missing clientSecret accepted")
	}
}

// TestVerifyWebhookRefusesLocallyWhatNeedsNoCall: against a PayPal that answers
// SUCCESS to every verification, whatever is refused must be refused before the
// call (a missing or oversized transmission header, a body PayPal cannot have
// signed, no configured webhook id), and a header at the bound still goes through.
func TestVerifyWebhookRefusesLocallyWhatNeedsNoCall(t *testing.T) {
	const ts = "2026-09-21T12:00:00Z"
	now := parseTime(t, ts)
	without := func(name string) http.Header { h, _ := transmission(ts); h.Del(name); return h }
	sigOf := func(n int) http.Header {
		h, _ := transmission(ts)
		h.Set(paypal.HeaderTransmissionSig, strings.Repeat("A", n))
		return h
	}
	valid, event := transmission(ts)
	tests := []struct {
		name   string
		h      http.Header
		body   []byte
		reason error // nil = valid
		calls  int32
	}{
		{"a complete transmission is asked about", valid, event, nil, 1},
		{"no transmission id", without(paypal.HeaderTransmissionID), event, provider.ErrMissingHeader, 0},
		{"no transmission time", without(paypal.HeaderTransmissionTime), event, provider.ErrMissingHeader, 0},
		{"no transmission sig", without(paypal.HeaderTransmissionSig), event, provider.ErrMissingHeader, 0},
		{"no cert url", without(paypal.HeaderCertURL), event, provider.ErrMissingHeader, 0},
		{"no auth algo", without(paypal.HeaderAuthAlgo), event, provider.ErrMissingHeader, 0},
		{"a header value of 2048 bytes is passed on", sigOf(2048), event, nil, 1},
		{"a header value of 2049 bytes is refused", sigOf(2049), event, provider.ErrMalformedHeader, 0},
		{"a body that is not JSON", valid, []byte(`{"id":"WH-1"`), provider.ErrNoMatchingSignature, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakePayPal{token: issueToken, api: answer(200, `{"verification_status":"SUCCESS"}`)}
			a := fakeAdapter(t, f)
			scheme, err := a.VerifyWebhook(context.Background(), tt.h, tt.body, nil, 5*time.Minute, now)
			providertest.AssertVerdict(t, scheme, provider.SchemePayPal, err, tt.reason)
			if got := f.apiCalls.Load(); got != tt.calls {
				t.Errorf("verify API called %d times, want %d", got, tt.calls)
			}
		})
	}
	// A webhook id of only whitespace is none PayPal assigns: asking PayPal
	// about it would spend a call (and a token) to hear FAILURE.
	for _, id := range []string{"", " ", "\n", " \t\r\n"} {
		t.Run("webhook id "+strconv.Quote(id)+" is refused without a call", func(t *testing.T) {
			f := &fakePayPal{token: issueToken, api: answer(200, `{"verification_status":"SUCCESS"}`)}
			a := providertest.Serve(t, f, func(apiURL string) (*paypal.Adapter, error) {
				return paypal.New(provider.Config{Name: "ns/pp", APIURL: apiURL, WebhookID: id,
					Credentials: map[string][]byte{"clientID": []byte("id"), "clientSecret": []byte("secret")}})
			})
			_, err := a.VerifyWebhook(context.Background(), valid, event, nil, 5*time.Minute, now)
			providertest.AssertRejected(t, err, provider.ErrNoMatchingSignature)
			if !strings.Contains(err.Error(), "blank") {
				t.Errorf("err = %v, want it to say the webhook id is blank", err)
			}
			if f.apiCalls.Load()+f.tokens.Load() != 0 {
				t.Errorf("PayPal called")
			}
		})
	}
}

// TestVerifyWebhookReadsPayPalsAnswer: only verification_status SUCCESS makes a
// webhook authentic; a 400 or 422 from the verification call is a forged or
// mangled request (401), anything else an outage (retried, never a verdict).
func TestVerifyWebhookReadsPayPalsAnswer(t *testing.T) {
	const ts = "2026-09-21T12:00:00Z"
	h, event := transmission(ts)
	tests := []struct {
		name   string
		api    http.HandlerFunc
		reason error // nil = valid; ErrRetryable = an outage
	}{
		{"SUCCESS", answer(200, `{"verification_status":"SUCCESS"}`), nil},
		{"FAILURE", answer(200, `{"verification_status":"FAILURE"}`), provider.ErrNoMatchingSignature},
		{"no verification_status", answer(200, `{}`), provider.ErrNoMatchingSignature},
		{"another status", answer(200, `{"verification_status":"PENDING"}`), provider.ErrNoMatchingSignature},
		{"400 from the verification call", answer(400, `{"name":"VALIDATION_ERROR"}`), provider.ErrNoMatchingSignature},
		{"422 from the verification call", answer(422, `{"name":"UNPROCESSABLE_ENTITY"}`), provider.ErrNoMatchingSignature},
		{"500 from the verification call", answer(500, `{"name":"INTERNAL_SERVER_ERROR"}`), provider.ErrRetryable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := fakeAdapter(t, &fakePayPal{token: issueToken, api: tt.api})
			_, err := a.VerifyWebhook(context.Background(), h, event, nil, 5*time.Minute, parseTime(t, ts))
			switch tt.reason {
			case nil:
				if err != nil {
					t.Fatalf("want valid: %v", err)
				}
			case provider.ErrRetryable:
				if errors.Is(err, provider.ErrInvalidSignature) || !errors.Is(err, provider.ErrRetryable) {
					t.Fatalf("err = %v", err)
				}
			default:
				providertest.AssertRejected(t, err, tt.reason)
			}
		})
	}
}

// TestCheckTransmission: paysim's verify-webhook-signature answers SUCCESS
// only for a signature one of the secrets made over the transmission; one
// that is not base64, made with another secret, or over another body fails.
func TestCheckTransmission(t *testing.T) {
	secret, other := []byte("whsec-paypal"), []byte("whsec-other")
	body := []byte(`{"id":"WH-1","event_type":"PAYMENT.CAPTURE.COMPLETED"}`)
	req := paypal.VerifyRequest{TransmissionID: "tx-1", TransmissionTime: "2026-12-03T10:00:00Z", WebhookID: "WH-ID", WebhookEvent: body}
	signed := func(s []byte, b []byte) paypal.VerifyRequest {
		r := req
		r.TransmissionSig = paypal.SignTransmission(s, r.TransmissionID, r.TransmissionTime, r.WebhookID, b)
		return r
	}
	bad := req
	bad.TransmissionSig = "not base64!"
	for _, tc := range []struct {
		name    string
		req     paypal.VerifyRequest
		secrets [][]byte
		want    bool
	}{
		{"signed with the secret", signed(secret, body), [][]byte{secret}, true},
		{"signed with one of two secrets", signed(secret, body), [][]byte{other, secret}, true},
		{"signed with another secret", signed(other, body), [][]byte{secret}, false},
		{"signed over another body", signed(secret, []byte(`{}`)), [][]byte{secret}, false},
		{"a signature that is not base64", bad, [][]byte{secret}, false},
		{"no secrets", signed(secret, body), nil, false},
	} {
		if got := paypal.CheckTransmission(tc.req, tc.secrets); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
