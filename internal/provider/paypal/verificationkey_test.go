package paypal_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// The receiver remembers PayPal's verdict per VerificationKey, so the key must
// be the same exactly when VerifyWebhook would ask PayPal the same question:
// one key for a redelivery, another for anything PayPal's answer depends on.
func TestVerificationKeyIsOneExactTransmission(t *testing.T) {
	const ts = "2026-09-21T12:00:05Z"
	adapter := func(t *testing.T, webhookID string) *paypal.Adapter {
		t.Helper()
		a, err := paypal.New(provider.Config{
			Name: "ns/pp", APIURL: "http://paypal.invalid", WebhookID: webhookID,
			Credentials: map[string][]byte{paypal.CredentialClientID: []byte("id"), paypal.CredentialClientSecret: []byte("secret")},
		})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := adapter(t, "WH-ID-1")
	h, body := transmission(ts)
	key, sentAt, err := a.VerificationKey(h, body)
	if err != nil {
		t.Fatal(err)
	}
	if want := parseTime(t, ts); !sentAt.Equal(want) {
		t.Errorf("sentAt = %s, want the transmission time %s", sentAt, want)
	}

	t.Run("a redelivery has the same key", func(t *testing.T) {
		h2, body2 := transmission(ts)
		lower := http.Header{}
		for k, v := range h2 {
			lower[strings.ToLower(k)] = v
		}
		for name, h := range map[string]http.Header{"same headers": h2, "header names in lower case": lower} {
			if got, _, err := a.VerificationKey(h, body2); err != nil || got != key {
				t.Errorf("%s: key %x, %v; want %x", name, got, err, key)
			}
		}
	})

	wantAnotherKey := func(t *testing.T, a *paypal.Adapter, h http.Header, body []byte) {
		t.Helper()
		if got, _, err := a.VerificationKey(h, body); err != nil || got == key {
			t.Errorf("key %x, %v; want a key other than %x", got, err, key)
		}
	}
	for name, change := range map[string]struct{ header, value string }{
		"another transmission id":                                   {paypal.HeaderTransmissionID, "tx-other"},
		"another transmission time":                                 {paypal.HeaderTransmissionTime, "2026-09-21T12:00:06Z"},
		"another signature (a forgery reusing the transmission id)": {paypal.HeaderTransmissionSig, "Zm9yZ2Vk"},
		"another certificate URL":                                   {paypal.HeaderCertURL, "https://api.paypal.com/v1/notifications/certs/CERT-other"},
		"another auth algorithm":                                    {paypal.HeaderAuthAlgo, "SHA512withRSA"},
	} {
		t.Run(name+" has another key", func(t *testing.T) {
			h, body := transmission(ts)
			h.Set(change.header, change.value)
			wantAnotherKey(t, a, h, body)
		})
	}
	t.Run("another event (body) has another key", func(t *testing.T) {
		h, body := transmission(ts)
		wantAnotherKey(t, a, h, []byte(strings.Replace(string(body), "WH-0PW4RD3N7EST0001", "WH-0PW4RD3N7EST0002", 1)))
	})
	// Field boundaries count: moving bytes from one field to the next is
	// another request.
	t.Run("bytes moved from the auth algorithm into the body have another key", func(t *testing.T) {
		// A space ends the algorithm of one request and starts the body
		// (still JSON) of the other: the same bytes in a row.
		h, body := transmission(ts)
		algo := h.Get(paypal.HeaderAuthAlgo)
		h.Set(paypal.HeaderAuthAlgo, algo+" ")
		first, _, err := a.VerificationKey(h, body)
		h.Set(paypal.HeaderAuthAlgo, algo)
		second, _, err2 := a.VerificationKey(h, append([]byte(" "), body...))
		if err != nil || err2 != nil || first == second {
			t.Errorf("keys %x (%v) and %x (%v); want two keys", first, err, second, err2)
		}
	})
	t.Run("another webhook id (account) has another key", func(t *testing.T) {
		h, body := transmission(ts)
		wantAnotherKey(t, adapter(t, "WH-ID-2"), h, body)
	})

	t.Run("a request VerifyWebhook rejects without a call has no key", func(t *testing.T) {
		for name, edit := range map[string]func(http.Header){
			"missing signature":   func(h http.Header) { h.Del(paypal.HeaderTransmissionSig) },
			"unparseable time":    func(h http.Header) { h.Set(paypal.HeaderTransmissionTime, "yesterday") },
			"oversized cert URL":  func(h http.Header) { h.Set(paypal.HeaderCertURL, strings.Repeat("x", 4096)) },
			"missing auth header": func(h http.Header) { h.Del(paypal.HeaderAuthAlgo) },
		} {
			h, body := transmission(ts)
			edit(h)
			if _, _, err := a.VerificationKey(h, body); !errors.Is(err, provider.ErrInvalidSignature) {
				t.Errorf("%s: err %v, want ErrInvalidSignature", name, err)
			}
		}
		h, _ := transmission(ts)
		if _, _, err := a.VerificationKey(h, []byte("not json")); !errors.Is(err, provider.ErrInvalidSignature) {
			t.Errorf("a body that is not JSON: err %v, want ErrInvalidSignature", err)
		}
		h, body := transmission(ts)
		if _, _, err := adapter(t, "  ").VerificationKey(h, body); !errors.Is(err, provider.ErrInvalidSignature) {
			t.Errorf("a blank webhook id: err %v, want ErrInvalidSignature", err)
		}
	})
}
