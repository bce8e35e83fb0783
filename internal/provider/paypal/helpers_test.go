package paypal_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// webhookEvent is a PayPal webhook body as PayPal sends it: spaces after colons, a
// non-ASCII character and characters encoding/json would escape (<, >, &), so a
// re-encoded copy would not match byte for byte.
const webhookEvent = `{"id":"WH-0PW4RD3N7EST0001-5A6B7C8D9E0F1A2B3","event_version":"1.0","create_time":"2026-09-21T12:00:00.000Z","resource_type":"capture","event_type":"PAYMENT.CAPTURE.COMPLETED","summary":"Payment completed for € 19.99 <EUR> & more","resource":{"id":"9K123456AB7890123","status":"COMPLETED","amount":{"currency_code":"EUR","value":"19.99"},"supplementary_data":{"related_ids":{"order_id":"7P901234CD5678901"}}}}`

// transmission returns the five PAYPAL-* headers of a delivery sent at ts (RFC 3339)
// and the event body they accompany.
func transmission(ts string) (http.Header, []byte) {
	h := http.Header{}
	h.Set(paypal.HeaderTransmissionID, "5f0c2a8e-3b1d-4e6f-9a7b-1c2d3e4f5a6b")
	h.Set(paypal.HeaderTransmissionTime, ts)
	h.Set(paypal.HeaderTransmissionSig, "cGF5d2FyZGVuIGZpeGVkIHRlc3Qgc2lnbmF0dXJlLCBub3QgUlNB+/8=")
	h.Set(paypal.HeaderCertURL, "https://api.paypal.com/v1/notifications/certs/CERT-0a1b2c3d-4e5f6a7b-8c9d0e1f")
	h.Set(paypal.HeaderAuthAlgo, "SHA256withRSA")
	return h, []byte(webhookEvent)
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}
