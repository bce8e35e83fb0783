package paypal_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// The ids below are all different on purpose, so a PaymentID taken from the wrong
// field shows as the wrong value rather than by coincidence as the right one.
const (
	orderID   = "5RA20936NB1234567" // what Create/Get return and paywarden records
	captureID = "8CA51234DE5678901"
	refundID  = "1RE09876FG5432109"
	authID    = "0AU76543HI2109876"
)

// TestEventPaymentIDIsTheOrderID: for every event type paywarden acts on, PaymentID is
// the order id or empty, never a capture or refund id. The core raises a
// DuplicatePayment review when an event names another id than the recorded one, so a
// capture id here would be a false alarm on every paid order.
func TestEventPaymentIDIsTheOrderID(t *testing.T) {
	capture := func(status, extra string) string {
		return `{"id":"` + captureID + `","status":"` + status + `","amount":{"currency_code":"USD","value":"19.99"},"invoice_id":"ref-1"` + extra + `}`
	}
	relatedOrder := `,"supplementary_data":{"related_ids":{"order_id":"` + orderID + `"}}`
	upToOrder := `,"links":[{"href":"https://api.paypal.com/v2/payments/captures/` + captureID + `","rel":"self","method":"GET"},{"href":"https://api.paypal.com/v2/checkout/orders/` + orderID + `","rel":"up","method":"GET"}]`
	upToCapture := `,"links":[{"href":"https://api.paypal.com/v2/payments/refunds/` + refundID + `","rel":"self","method":"GET"},{"href":"https://api.paypal.com/v2/payments/captures/` + captureID + `","rel":"up","method":"GET"}]`
	upToOrderFromAuth := `,"links":[{"href":"https://api.paypal.com/v2/payments/authorizations/` + authID + `","rel":"self","method":"GET"},{"href":"https://api.paypal.com/v2/checkout/orders/` + orderID + `","rel":"up","method":"GET"}]`
	authorization := func(status, extra string) string {
		return `{"id":"` + authID + `","status":"` + status + `","amount":{"currency_code":"USD","value":"19.99"},"invoice_id":"ref-1","expiration_time":"2026-10-20T12:00:00Z"` + extra + `}`
	}
	refund := func(extra string) string {
		return `{"id":"` + refundID + `","status":"COMPLETED","amount":{"currency_code":"USD","value":"5.00"},"invoice_id":"ref-1"` + extra + `}`
	}
	tests := []struct {
		name, typ, resource, want string
	}{
		{"capture completed names its order", "PAYMENT.CAPTURE.COMPLETED", capture("COMPLETED", relatedOrder), orderID},
		{"capture completed with only an up link to its order", "PAYMENT.CAPTURE.COMPLETED", capture("COMPLETED", upToOrder), orderID},
		{"capture completed without the order id has none", "PAYMENT.CAPTURE.COMPLETED", capture("COMPLETED", ""), ""},
		{"capture denied names its order", "PAYMENT.CAPTURE.DENIED", capture("DECLINED", relatedOrder), orderID},
		{"capture denied without the order id has none", "PAYMENT.CAPTURE.DENIED", capture("DECLINED", ""), ""},
		{"capture declined names its order", "PAYMENT.CAPTURE.DECLINED", capture("DECLINED", relatedOrder+upToOrder), orderID},
		{"capture declined without the order id has none", "PAYMENT.CAPTURE.DECLINED", capture("DECLINED", ""), ""},
		{"capture pending names its order", "PAYMENT.CAPTURE.PENDING", capture("PENDING", relatedOrder), orderID},
		{"capture pending without the order id has none", "PAYMENT.CAPTURE.PENDING", capture("PENDING", ""), ""},
		{"refund names the order when PayPal includes it", "PAYMENT.CAPTURE.REFUNDED", refund(`,"supplementary_data":{"related_ids":{"order_id":"` + orderID + `","capture_id":"` + captureID + `"}}`), orderID},
		{"refund that names only its capture has none", "PAYMENT.CAPTURE.REFUNDED", refund(`,"supplementary_data":{"related_ids":{"capture_id":"` + captureID + `"}}` + upToCapture), ""},
		{"refund without related ids has none", "PAYMENT.CAPTURE.REFUNDED", refund(""), ""},
		{"reversal names the order when PayPal includes it", "PAYMENT.CAPTURE.REVERSED", refund(`,"supplementary_data":{"related_ids":{"order_id":"` + orderID + `","capture_id":"` + captureID + `"}}`), orderID},
		{"reversal that names only its capture has none", "PAYMENT.CAPTURE.REVERSED", refund(upToCapture), ""},
		{"authorization created names its order", "PAYMENT.AUTHORIZATION.CREATED", authorization("CREATED", `,"supplementary_data":{"related_ids":{"order_id":"`+orderID+`"}}`), orderID},
		{"authorization created with only an up link to its order", "PAYMENT.AUTHORIZATION.CREATED", authorization("CREATED", upToOrderFromAuth), orderID},
		{"authorization created without the order id has none", "PAYMENT.AUTHORIZATION.CREATED", authorization("CREATED", ""), ""},
		{"authorization voided names its order", "PAYMENT.AUTHORIZATION.VOIDED", authorization("VOIDED", `,"supplementary_data":{"related_ids":{"order_id":"`+orderID+`"}}`+upToOrderFromAuth), orderID},
		{"authorization voided without the order id has none", "PAYMENT.AUTHORIZATION.VOIDED", authorization("VOIDED", ""), ""},
		{"approval reversed names its order", "CHECKOUT.PAYMENT-APPROVAL.REVERSED", `{"order_id":"` + orderID + `","purchase_units":[{"reference_id":"default","invoice_id":"ref-1","amount":{"currency_code":"USD","value":"19.99"}}]}`, orderID},
		{"order approved is the order itself", "CHECKOUT.ORDER.APPROVED", `{"id":"` + orderID + `","status":"APPROVED","purchase_units":[{"invoice_id":"ref-1","amount":{"currency_code":"USD","value":"19.99"},"payments":{"captures":[{"id":"` + captureID + `","status":"PENDING","amount":{"currency_code":"USD","value":"19.99"}}]}}]}`, orderID},
		{"dispute names only the capture, so it has none", "CUSTOMER.DISPUTE.CREATED", `{"dispute_id":"PP-D-12345","reason":"MERCHANDISE_OR_SERVICE_NOT_RECEIVED","dispute_amount":{"currency_code":"USD","value":"19.99"},"disputed_transactions":[{"seller_transaction_id":"` + captureID + `","invoice_number":"ref-1"}]}`, ""},
		{"dispute resolved names only the capture too", "CUSTOMER.DISPUTE.RESOLVED", `{"dispute_id":"PP-D-12345","status":"RESOLVED","dispute_amount":{"currency_code":"USD","value":"19.99"},"disputed_transactions":[{"seller_transaction_id":"` + captureID + `","invoice_number":"ref-1"}],"dispute_outcome":{"outcome_code":"RESOLVED_SELLER_FAVOUR"}}`, ""},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.typ] = true
		t.Run(tt.name, func(t *testing.T) {
			raw := `{"id":"WH-1","create_time":"2026-09-21T12:00:00Z","event_type":"` + tt.typ + `","resource":` + tt.resource + `}`
			ev, err := paypal.ParseEvent([]byte(raw))
			if err != nil || !ev.Supported {
				t.Fatalf("%+v %v", ev, err)
			}
			if ev.PaymentID != tt.want {
				t.Fatalf("PaymentID = %q, want %q", ev.PaymentID, tt.want)
			}
			if ev.MerchantReference != "ref-1" {
				t.Errorf("MerchantReference = %q: without it an event lacking the order id finds nothing", ev.MerchantReference)
			}
		})
	}
	for typ := range paypal.EventStatuses() {
		if !covered[typ] {
			t.Errorf("supported event type %s has no payment id case", typ)
		}
	}
}

// TestEventTimesAPaymentCanHold: a create_time no status could hold (the
// year 10000 in UTC, which an offset can reach) is read as no time, as a
// malformed one is, never stored to be refused by the API server.
func TestEventTimesAPaymentCanHold(t *testing.T) {
	for raw, want := range map[string]time.Time{
		"2026-12-04T10:00:00+01:00": time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC),
		"9999-12-31T23:59:59-01:00": {},
		"not a time":                {},
	} {
		body := []byte(`{"id":"WH-1","event_type":"SOMETHING.ELSE","create_time":"` + raw + `","resource":{}}`)
		ev, err := paypal.ParseEvent(body)
		if err != nil || !ev.OccurredAt.Equal(want) || !ev.OccurredAt.IsZero() && ev.OccurredAt.Location() != time.UTC {
			t.Errorf("create_time %q: %v, %v; want %v", raw, ev.OccurredAt, err, want)
		}
	}
}
