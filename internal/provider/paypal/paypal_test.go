package paypal_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

func TestOrderStatusTable(t *testing.T) {
	want := map[string]provider.Status{
		"CREATED": provider.StatusPending, "SAVED": provider.StatusPending, "APPROVED": provider.StatusApproved,
		"PAYER_ACTION_REQUIRED": provider.StatusPending, "VOIDED": provider.StatusCanceled, "EXPIRED": provider.StatusExpired,
	}
	providertest.StatusTable(t, "order status", want, paypal.OrderStatuses(), func(t *testing.T, raw string) provider.Status {
		got, rawOut := paypal.MapOrderStatus(paypal.Order{Status: raw})
		if rawOut != raw {
			t.Errorf("raw status %q", rawOut)
		}
		return got
	}, "NEW_THING")
}

func completed(captures ...string) paypal.Order {
	var cs []paypal.Capture
	for _, c := range captures {
		cs = append(cs, paypal.Capture{Status: c, Amount: paypal.Money{CurrencyCode: "USD", Value: "10.00"}})
	}
	return paypal.Order{Status: "COMPLETED", PurchaseUnits: []paypal.PurchaseUnit{{Amount: paypal.Money{CurrencyCode: "USD", Value: "10.00"}, Payments: &paypal.Payments{Captures: cs}}}}
}

func TestCaptureStatusTable(t *testing.T) {
	want := map[string]provider.Status{
		"COMPLETED": provider.StatusSucceeded, "DECLINED": provider.StatusFailed, "FAILED": provider.StatusFailed,
		"PENDING": provider.StatusProcessing, "REFUNDED": provider.StatusRefund, "PARTIALLY_REFUNDED": provider.StatusRefund,
	}
	providertest.StatusTable(t, "capture status of a COMPLETED order", want, paypal.CaptureStatuses(), func(t *testing.T, raw string) provider.Status {
		got, rawOut := paypal.MapOrderStatus(completed(raw))
		if rawOut != "COMPLETED/"+raw {
			t.Errorf("raw status %q", rawOut)
		}
		return got
	}, "ON_HOLD")
	t.Run("COMPLETED order without a capture is Unknown, not paid", func(t *testing.T) {
		if got, raw := paypal.MapOrderStatus(completed()); got != provider.StatusUnknown || raw != "COMPLETED/" {
			t.Fatal(got, raw)
		}
	})
	t.Run("the last capture decides", func(t *testing.T) {
		if got, _ := paypal.MapOrderStatus(completed("DECLINED", "COMPLETED")); got != provider.StatusSucceeded {
			t.Fatal(got)
		}
	})
}

func TestEventTypeTable(t *testing.T) {
	want := map[string]provider.Status{
		"PAYMENT.CAPTURE.COMPLETED": provider.StatusSucceeded, "PAYMENT.CAPTURE.DENIED": provider.StatusFailed,
		"PAYMENT.CAPTURE.DECLINED": provider.StatusFailed, "PAYMENT.CAPTURE.PENDING": provider.StatusProcessing,
		"PAYMENT.CAPTURE.REFUNDED": provider.StatusRefund, "PAYMENT.CAPTURE.REVERSED": provider.StatusRefund,
		"CHECKOUT.ORDER.APPROVED": provider.StatusApproved, "CHECKOUT.PAYMENT-APPROVAL.REVERSED": provider.StatusExpired,
		"PAYMENT.AUTHORIZATION.CREATED": provider.StatusAuthorized, "PAYMENT.AUTHORIZATION.VOIDED": provider.StatusCanceled,
		"CUSTOMER.DISPUTE.CREATED": provider.StatusDispute, "CUSTOMER.DISPUTE.RESOLVED": provider.StatusDispute,
	}
	providertest.EventTypeTable(t, want, paypal.EventStatuses(), paypal.MapEventType, "BILLING.SUBSCRIPTION.CREATED")
}

func TestNormalizeOrderUsesCapturedAmountAndRefunds(t *testing.T) {
	o := paypal.Order{ID: "O1", Status: "COMPLETED", PurchaseUnits: []paypal.PurchaseUnit{{
		InvoiceID: "ref-1", Amount: paypal.Money{CurrencyCode: "USD", Value: "20.00"},
		Payments: &paypal.Payments{
			Captures: []paypal.Capture{{ID: "C1", Status: "PARTIALLY_REFUNDED", Amount: paypal.Money{CurrencyCode: "USD", Value: "19.00"}}},
			Refunds:  []paypal.Refund{{Status: "COMPLETED", Amount: paypal.Money{CurrencyCode: "USD", Value: "5.00"}}, {Status: "FAILED", Amount: paypal.Money{CurrencyCode: "USD", Value: "1.00"}}},
		},
	}}}
	p := paypal.NormalizeOrder(o)
	if p.ID != "O1" || p.MerchantReference != "ref-1" || p.Status != provider.StatusRefund || p.Amount != 1900 || p.RefundedTotal != 500 || p.RawStatus != "COMPLETED/PARTIALLY_REFUNDED" {
		t.Fatalf("%+v", p)
	}
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name, raw string
		want      provider.Event
	}{
		{"capture completed names the order", `{"id":"WH-1","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C1","status":"COMPLETED","amount":{"currency_code":"USD","value":"19.99"},"invoice_id":"ref-1","supplementary_data":{"related_ids":{"order_id":"O1"}}}}`,
			provider.Event{ID: "WH-1", Type: "PAYMENT.CAPTURE.COMPLETED", Status: provider.StatusSucceeded, Supported: true, PaymentID: "O1", MerchantReference: "ref-1", Amount: 1999, Currency: "USD"}},
		{"capture denied carries the reason", `{"id":"WH-2","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.DENIED","resource":{"id":"C1","status":"DECLINED","status_details":{"reason":"DECLINED_BY_RISK_FRAUD_FILTERS"},"amount":{"currency_code":"USD","value":"1.00"},"custom_id":"ref-2"}}`,
			provider.Event{ID: "WH-2", Type: "PAYMENT.CAPTURE.DENIED", Status: provider.StatusFailed, Supported: true, MerchantReference: "ref-2", Amount: 100, Currency: "USD", FailureCode: "DECLINED_BY_RISK_FRAUD_FILTERS"}},
		{"refund carries the cumulative total", `{"id":"WH-3","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.REFUNDED","resource":{"id":"R1","status":"COMPLETED","amount":{"currency_code":"JPY","value":"300"},"invoice_id":"ref-3","seller_payable_breakdown":{"total_refunded_amount":{"currency_code":"JPY","value":"500"}},"supplementary_data":{"related_ids":{"order_id":"O3"}}}}`,
			provider.Event{ID: "WH-3", Type: "PAYMENT.CAPTURE.REFUNDED", Status: provider.StatusRefund, Supported: true, PaymentID: "O3", MerchantReference: "ref-3", Amount: 300, Currency: "JPY", RefundedTotal: 500,
				Refund: &provider.Refund{ID: "R1", PaymentID: "O3", Reference: "ref-3", Status: provider.RefundSucceeded, RawStatus: "COMPLETED", Amount: 300, Currency: "JPY"}}},
		{"order approved is approved", `{"id":"WH-4","create_time":"2026-09-21T12:00:00Z","event_type":"CHECKOUT.ORDER.APPROVED","resource":{"id":"O4","status":"APPROVED","purchase_units":[{"invoice_id":"ref-4","amount":{"currency_code":"EUR","value":"2.50"}}]}}`,
			provider.Event{ID: "WH-4", Type: "CHECKOUT.ORDER.APPROVED", Status: provider.StatusApproved, Supported: true, PaymentID: "O4", MerchantReference: "ref-4", Amount: 250, Currency: "EUR"}},
		{"dispute is found by invoice number", `{"id":"WH-5","create_time":"2026-09-21T12:00:00Z","event_type":"CUSTOMER.DISPUTE.CREATED","resource":{"dispute_id":"PP-D-1","reason":"MERCHANDISE_OR_SERVICE_NOT_RECEIVED","dispute_amount":{"currency_code":"USD","value":"19.99"},"disputed_transactions":[{"seller_transaction_id":"C1","invoice_number":"ref-1"}]}}`,
			provider.Event{ID: "WH-5", Type: "CUSTOMER.DISPUTE.CREATED", Status: provider.StatusDispute, Supported: true, MerchantReference: "ref-1", Amount: 1999, Currency: "USD", FailureCode: "MERCHANDISE_OR_SERVICE_NOT_RECEIVED"}},
		{"an empty related order id leaves the up link's order", `{"id":"WH-7","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C7","status":"COMPLETED","amount":{"currency_code":"USD","value":"1.00"},"links":[{"href":"https://api.paypal.com/v2/checkout/orders/O7","rel":"up","method":"GET"}],"supplementary_data":{"related_ids":{"order_id":""}}}}`,
			provider.Event{ID: "WH-7", Type: "PAYMENT.CAPTURE.COMPLETED", Status: provider.StatusSucceeded, Supported: true, PaymentID: "O7", Amount: 100, Currency: "USD"}},
		{"only an up link names the order", `{"id":"WH-8","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C8","status":"COMPLETED","amount":{"currency_code":"USD","value":"1.00"},"links":[{"href":"https://api.paypal.com/v2/checkout/orders/O8","rel":"self","method":"GET"}]}}`,
			provider.Event{ID: "WH-8", Type: "PAYMENT.CAPTURE.COMPLETED", Status: provider.StatusSucceeded, Supported: true, Amount: 100, Currency: "USD"}},
		{"an up link below an order is not an order id", `{"id":"WH-9","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C9","status":"COMPLETED","amount":{"currency_code":"USD","value":"1.00"},"links":[{"href":"https://api.paypal.com/v2/checkout/orders/O9/capture","rel":"up","method":"POST"}]}}`,
			provider.Event{ID: "WH-9", Type: "PAYMENT.CAPTURE.COMPLETED", Status: provider.StatusSucceeded, Supported: true, Amount: 100, Currency: "USD"}},
		{"a refund without the cumulative total counts itself", `{"id":"WH-10","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.REFUNDED","resource":{"id":"R10","status":"COMPLETED","amount":{"currency_code":"USD","value":"3.00"},"custom_id":"ref-10"}}`,
			provider.Event{ID: "WH-10", Type: "PAYMENT.CAPTURE.REFUNDED", Status: provider.StatusRefund, Supported: true, MerchantReference: "ref-10", Amount: 300, Currency: "USD", RefundedTotal: 300,
				Refund: &provider.Refund{ID: "R10", Status: provider.RefundSucceeded, RawStatus: "COMPLETED", Amount: 300, Currency: "USD"}}},
		{"a reversal settles no Refund resource", `{"id":"WH-11","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.REVERSED","resource":{"id":"R11","status":"COMPLETED","amount":{"currency_code":"USD","value":"3.00"},"custom_id":"ref-11"}}`,
			provider.Event{ID: "WH-11", Type: "PAYMENT.CAPTURE.REVERSED", Status: provider.StatusRefund, Supported: true, MerchantReference: "ref-11", Amount: 300, Currency: "USD", RefundedTotal: 300}},
		{"an approval reversal without an amount", `{"id":"WH-12","create_time":"2026-09-21T12:00:00Z","event_type":"CHECKOUT.PAYMENT-APPROVAL.REVERSED","resource":{"order_id":"O12","purchase_units":[{"invoice_id":"ref-12"}]}}`,
			provider.Event{ID: "WH-12", Type: "CHECKOUT.PAYMENT-APPROVAL.REVERSED", Status: provider.StatusExpired, Supported: true, PaymentID: "O12", MerchantReference: "ref-12",
				FailureCode: paypal.FailureApprovalReversed, FailureMessage: "PayPal reversed the payer's approval: the order was not captured in time, PayPal canceled it and refunded the payer"}},
		{"an authorization created is authorized whatever its status", `{"id":"WH-13","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.AUTHORIZATION.CREATED","resource":{"id":"A13","status":"EXPIRED","amount":{"currency_code":"USD","value":"1.00"},"invoice_id":"ref-13"}}`,
			provider.Event{ID: "WH-13", Type: "PAYMENT.AUTHORIZATION.CREATED", Status: provider.StatusAuthorized, Supported: true, MerchantReference: "ref-13", Amount: 100, Currency: "USD"}},
		{"a dispute takes the first transaction's reference and may have no amount", `{"id":"WH-14","create_time":"2026-09-21T12:00:00Z","event_type":"CUSTOMER.DISPUTE.CREATED","resource":{"dispute_id":"PP-D-14","reason":"UNAUTHORISED","disputed_transactions":[{"seller_transaction_id":"C1"},{"seller_transaction_id":"C2","custom":"ref-14a"},{"seller_transaction_id":"C3","invoice_number":"ref-14b"}]}}`,
			provider.Event{ID: "WH-14", Type: "CUSTOMER.DISPUTE.CREATED", Status: provider.StatusDispute, Supported: true, MerchantReference: "ref-14a", FailureCode: "UNAUTHORISED"}},
		{"unknown type parses unsupported", `{"id":"WH-6","create_time":"2026-09-21T12:00:00Z","event_type":"BILLING.PLAN.CREATED","resource":{"id":"P"}}`,
			provider.Event{ID: "WH-6", Type: "BILLING.PLAN.CREATED"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			providertest.ParsedEvent(t, paypal.ParseEvent, tt.raw, time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC), tt.want)
		})
	}
	providertest.MalformedEvents(t, paypal.ParseEvent, ``, `{}`, `{"id":"x"}`, `{"id":"x","event_type":"PAYMENT.CAPTURE.COMPLETED"}`, `{"id":"x","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"amount":{"currency_code":"USD","value":"1.234"}}}`,
		`{"event_type":"BILLING.PLAN.CREATED","resource":{"id":"P"}}`,
		`{"id":"x","event_type":"CHECKOUT.ORDER.APPROVED","resource":null}`,
		`{"id":"x","event_type":"CUSTOMER.DISPUTE.CREATED","resource":null}`)
}

// TestEventsThatIdentifyNothingAreMalformed: every resource paywarden acts on
// has an id of its own in PayPal's API reference (a dispute its dispute_id, an
// approval reversal its order_id), while its link to the order may be missing.
// A resource with neither id nor order nor merchant reference could only wait
// Orphaned: it is malformed (400). One that carries a usable id is kept.
func TestEventsThatIdentifyNothingAreMalformed(t *testing.T) {
	const usd = `"amount":{"currency_code":"USD","value":"1.00"}`
	nothing := map[string]string{
		"PAYMENT.CAPTURE.COMPLETED":          `{"status":"COMPLETED",` + usd + `}`,
		"PAYMENT.CAPTURE.DENIED":             `{"status":"DECLINED",` + usd + `}`,
		"PAYMENT.CAPTURE.DECLINED":           `{"status":"DECLINED",` + usd + `}`,
		"PAYMENT.CAPTURE.PENDING":            `{"status":"PENDING",` + usd + `}`,
		"PAYMENT.CAPTURE.REFUNDED":           `{"status":"COMPLETED",` + usd + `}`,
		"PAYMENT.CAPTURE.REVERSED":           `{"status":"COMPLETED",` + usd + `}`,
		"PAYMENT.AUTHORIZATION.CREATED":      `{"status":"CREATED",` + usd + `}`,
		"PAYMENT.AUTHORIZATION.VOIDED":       `{"status":"VOIDED",` + usd + `}`,
		"CHECKOUT.ORDER.APPROVED":            `{}`,
		"CHECKOUT.PAYMENT-APPROVAL.REVERSED": `{}`,
		"CUSTOMER.DISPUTE.CREATED":           `{}`,
		"CUSTOMER.DISPUTE.RESOLVED":          `{"status":"RESOLVED","disputed_transactions":[{"seller_transaction_id":"C1"}]}`,
	}
	for typ := range paypal.EventStatuses() {
		object, ok := nothing[typ]
		if !ok {
			t.Errorf("supported event type %s has no case", typ)
			continue
		}
		t.Run(typ+" with "+object+" is malformed", func(t *testing.T) {
			ev, err := paypal.ParseEvent([]byte(`{"id":"WH-1","event_type":"` + typ + `","resource":` + object + `}`))
			if !errors.Is(err, provider.ErrMalformedEvent) || !strings.Contains(err.Error(), "no id") {
				t.Fatalf("%+v, err = %v: want malformed for want of any id", ev, err)
			}
		})
	}
	kept := []struct {
		name, typ, object string
		paymentID, ref    string
	}{
		// PayPal-initiated refunds and reversals name neither the order nor
		// paywarden's reference: documented resources, kept.
		{"a reversal with its id only", "PAYMENT.CAPTURE.REVERSED", `{"id":"R1","status":"COMPLETED",` + usd + `}`, "", ""},
		{"a dispute with its id only", "CUSTOMER.DISPUTE.CREATED", `{"dispute_id":"PP-D-1"}`, "", ""},
		{"an authorization with its id only", "PAYMENT.AUTHORIZATION.VOIDED", `{"id":"A1","status":"VOIDED",` + usd + `}`, "", ""},
		{"a capture without its id that names its order", "PAYMENT.CAPTURE.COMPLETED", `{"status":"COMPLETED",` + usd + `,"supplementary_data":{"related_ids":{"order_id":"O1"}}}`, "O1", ""},
		{"a capture without its id that carries the merchant reference", "PAYMENT.CAPTURE.COMPLETED", `{"status":"COMPLETED",` + usd + `,"invoice_id":"ref-1"}`, "", "ref-1"},
		{"an approved order with its id only", "CHECKOUT.ORDER.APPROVED", `{"id":"O2"}`, "O2", ""},
		{"an approval reversal with its order id only", "CHECKOUT.PAYMENT-APPROVAL.REVERSED", `{"order_id":"O3"}`, "O3", ""},
		{"a dispute without its id that carries the merchant reference", "CUSTOMER.DISPUTE.CREATED", `{"disputed_transactions":[{"invoice_number":"ref-4"}]}`, "", "ref-4"},
	}
	for _, tt := range kept {
		t.Run(tt.name+" is kept", func(t *testing.T) {
			ev, err := paypal.ParseEvent([]byte(`{"id":"WH-1","event_type":"` + tt.typ + `","resource":` + tt.object + `}`))
			if err != nil || !ev.Supported || ev.PaymentID != tt.paymentID || ev.MerchantReference != tt.ref {
				t.Fatalf("%+v, err = %v: want it parsed with order id %q and reference %q", ev, err, tt.paymentID, tt.ref)
			}
		})
	}
}

func FuzzParseTransmissionHeaders(f *testing.F) {
	f.Add("8b6c3f4e-1a2b", "2026-09-21T12:00:00Z", "c2ln", "https://api.paypal.com/v1/notifications/certs/CERT", "SHA256withRSA")
	f.Add("", "", "", "", "")
	f.Add("id", "not a time", "sig", "u", "a")
	f.Add("id", "2026-09-21T12:00:00+99:00", "sig", "u", "a")
	f.Fuzz(func(t *testing.T, id, ts, sig, cert, algo string) {
		h := http.Header{}
		h.Set(paypal.HeaderTransmissionID, id)
		h.Set(paypal.HeaderTransmissionTime, ts)
		h.Set(paypal.HeaderTransmissionSig, sig)
		h.Set(paypal.HeaderCertURL, cert)
		h.Set(paypal.HeaderAuthAlgo, algo)
		tr, err := paypal.ParseTransmissionHeaders(h)
		if err != nil {
			if !errors.Is(err, provider.ErrInvalidSignature) {
				t.Fatalf("error not classified: %v", err)
			}
			return
		}
		if tr.ID == "" || tr.Sig == "" || tr.CertURL == "" || tr.AuthAlgo == "" || tr.Time != ts {
			t.Fatalf("accepted incomplete headers: %+v", tr)
		}
		if _, err := paypal.VerifyRequestBody(tr, "WH1", []byte(`{"id":"e"}`)); err != nil {
			t.Fatal(err)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"id":"WH-1","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"amount":{"currency_code":"USD","value":"19.99"}}}`))
	f.Add([]byte(`{"id":"WH-3","event_type":"PAYMENT.CAPTURE.REFUNDED","resource":{"amount":{"currency_code":"USD","value":"1"},"seller_payable_breakdown":{"total_refunded_amount":null}}}`))
	f.Add([]byte(`{"id":"WH-5","event_type":"CUSTOMER.DISPUTE.CREATED","resource":{"disputed_transactions":[{}]}}`))
	f.Add([]byte(`{"id":"WH-4","event_type":"CHECKOUT.ORDER.APPROVED","resource":{"purchase_units":[]}}`))
	f.Add([]byte(`{"id":"WH-6","event_type":"PAYMENT.CAPTURE.REVERSED","resource":{"id":"R6","amount":{"currency_code":"USD","value":"1"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) { providertest.FuzzedEvent(t, b, paypal.ParseEvent) })
}
