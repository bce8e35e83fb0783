package paypal_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// verifyServer is a fake PayPal verify-webhook-signature API that records the request
// body and answers status.
type verifyServer struct {
	status string
	calls  atomic.Int32
	body   []byte
	auth   string
}

func (s *verifyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/notifications/verify-webhook-signature" {
		http.NotFound(w, r)
		return
	}
	s.calls.Add(1)
	s.body, _ = io.ReadAll(r.Body)
	s.auth = r.Header.Get("Authorization")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"verification_status":"` + s.status + `"}`))
}

// TestVerifyRequestBodyIsExact compares what the adapter sends to PayPal with a JSON
// document written out by hand: the five transmission headers, the configured webhook
// id, and the event spliced in byte for byte (its spaces, "€", "<", ">" and "&" must
// not be re-encoded, or PayPal checks the signature against a different document).
func TestVerifyRequestBodyIsExact(t *testing.T) {
	srv := &verifyServer{status: "SUCCESS"}
	a := fakeAdapter(t, &fakePayPal{token: issueToken, api: srv.ServeHTTP})
	h, body := transmission("2026-09-21T12:00:00Z")
	scheme, err := a.VerifyWebhook(context.Background(), h, body, nil, 5*time.Minute, parseTime(t, "2026-09-21T12:00:00Z"))
	if err != nil || scheme != provider.SchemePayPal {
		t.Fatalf("%q %v", scheme, err)
	}
	const want = `{"auth_algo":"SHA256withRSA",` +
		`"cert_url":"https://api.paypal.com/v1/notifications/certs/CERT-0a1b2c3d-4e5f6a7b-8c9d0e1f",` +
		`"transmission_id":"5f0c2a8e-3b1d-4e6f-9a7b-1c2d3e4f5a6b",` +
		`"transmission_sig":"cGF5d2FyZGVuIGZpeGVkIHRlc3Qgc2lnbmF0dXJlLCBub3QgUlNB+/8=",` +
		`"transmission_time":"2026-09-21T12:00:00Z",` +
		`"webhook_id":"WH-ID",` +
		`"webhook_event":{"id":"WH-0PW4RD3N7EST0001-5A6B7C8D9E0F1A2B3","event_version":"1.0","create_time":"2026-09-21T12:00:00.000Z","resource_type":"capture","event_type":"PAYMENT.CAPTURE.COMPLETED","summary":"Payment completed for € 19.99 <EUR> & more","resource":{"id":"9K123456AB7890123","status":"COMPLETED","amount":{"currency_code":"EUR","value":"19.99"},"supplementary_data":{"related_ids":{"order_id":"7P901234CD5678901"}}}}}`
	if string(srv.body) != want {
		t.Fatalf("verify request body\n got: %s\nwant: %s", srv.body, want)
	}
	if srv.auth != "Bearer tok" {
		t.Errorf("Authorization = %q", srv.auth)
	}
}

// TestTransmissionTimeToleranceBothDirections checks the local replay pre-check
// (PayPal's API answers SUCCESS for a replayed delivery). A transmission time ahead of
// our clock is as acceptable as one behind it, up to the tolerance inclusive; outside
// it PayPal is not even asked.
func TestTransmissionTimeToleranceBothDirections(t *testing.T) {
	const sent = "2026-09-21T12:00:00Z"
	ts := parseTime(t, sent)
	providertest.EachTolerance(t, "transmission", ts, func(t *testing.T, tol time.Duration, tt providertest.ClockCase) {
		srv := &verifyServer{status: "SUCCESS"}
		a := fakeAdapter(t, &fakePayPal{token: issueToken, api: srv.ServeHTTP})
		h, body := transmission(sent)
		_, err := a.VerifyWebhook(context.Background(), h, body, nil, tol, tt.Now)
		if tt.OK {
			if err != nil || srv.calls.Load() != 1 {
				t.Fatalf("err = %v after %d verify calls", err, srv.calls.Load())
			}
			return
		}
		providertest.AssertTolerance(t, err, false)
		if srv.calls.Load() != 0 {
			t.Fatal("PayPal was asked about a delivery outside the tolerance")
		}
	})
}

func TestVerificationFailureIsRejected(t *testing.T) {
	srv := &verifyServer{status: "FAILURE"}
	a := fakeAdapter(t, &fakePayPal{token: issueToken, api: srv.ServeHTTP})
	h, body := transmission("2026-09-21T12:00:00Z")
	_, err := a.VerifyWebhook(context.Background(), h, body, nil, 5*time.Minute, parseTime(t, "2026-09-21T12:00:00Z"))
	if !errors.Is(err, provider.ErrInvalidSignature) || !errors.Is(err, provider.ErrNoMatchingSignature) {
		t.Fatalf("err = %v", err)
	}
}
