package paypal_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

func TestPayPalCurrencyTable(t *testing.T) {
	want := map[string]int{
		"AUD": 2, "BRL": 2, "CAD": 2, "CNY": 2, "CZK": 2, "DKK": 2, "EUR": 2, "HKD": 2, "HUF": 0, "ILS": 2, "JPY": 0, "MYR": 2,
		"MXN": 2, "TWD": 0, "NZD": 2, "NOK": 2, "PHP": 2, "PLN": 2, "GBP": 2, "SGD": 2, "SEK": 2, "CHF": 2, "THB": 2, "USD": 2,
	}
	if got := paypal.Currencies(); len(got) != len(want) {
		t.Errorf("PayPal table has %d currencies (%v), test covers %d", len(got), got, len(want))
	}
	for code, d := range want {
		got, ok := paypal.Decimals(code)
		if !ok || got != d {
			t.Errorf("Decimals(%s) = %d, %v; want %d", code, got, ok, d)
		}
		iso, ok := currency.Exponent(code)
		if !ok || iso < d {
			t.Errorf("%s: ISO exponent %d %v cannot carry PayPal's %d decimals", code, iso, ok, d)
		}
	}
	for _, code := range []string{"KWD", "RUB", "INR", "KRW", "XYZ", "usd", ""} {
		if _, ok := paypal.Decimals(code); ok {
			t.Errorf("%q is not a PayPal currency", code)
		}
	}
}

func TestAmounts(t *testing.T) {
	tests := []struct {
		minor    int64 // ISO 4217 minor units
		currency string
		decimal  string // PayPal's value
	}{
		{1999, "USD", "19.99"}, {5, "USD", "0.05"}, {100, "EUR", "1.00"}, {0, "USD", "0.00"}, {-150, "USD", "-1.50"},
		{1999, "JPY", "1999"},
		// The defect this table is here for: HUF has two ISO decimals and none at PayPal.
		{199900, "HUF", "1999"}, {100, "HUF", "1"}, {123400, "TWD", "1234"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s is %s", tt.minor, tt.currency, tt.decimal), func(t *testing.T) {
			m, err := paypal.ToMoney(tt.minor, tt.currency)
			if err != nil || m.Value != tt.decimal || m.CurrencyCode != tt.currency {
				t.Fatalf("ToMoney: %+v %v", m, err)
			}
			if got := paypal.FormatAmount(tt.minor, tt.currency); got != tt.decimal {
				t.Fatalf("FormatAmount: %s", got)
			}
			if got, err := paypal.ParseAmount(tt.decimal, tt.currency); err != nil || got != tt.minor {
				t.Fatalf("ParseAmount: %d %v", got, err)
			}
		})
	}
	for _, ok := range []struct {
		v, c  string
		minor int64
	}{
		{"10.5", "USD", 1050}, {"19.990", "USD", 1999}, {"1999.00", "HUF", 199900}, {" 1.00 ", "EUR", 100}, {"92233720368547758", "HUF", 9223372036854775800},
	} {
		t.Run("reads "+ok.v+" "+ok.c, func(t *testing.T) {
			if got, err := paypal.ParseAmount(ok.v, ok.c); err != nil || got != ok.minor {
				t.Fatalf("%d %v", got, err)
			}
		})
	}
	for _, bad := range []struct{ v, c string }{
		{"1.999", "USD"}, {"1.5", "JPY"}, {"1999.50", "HUF"}, {"1.01", "TWD"}, {"abc", "USD"}, {"", "USD"}, {".5", "USD"},
		{"99999999999999999999", "USD"}, {"92233720368547759", "HUF"}, {"7.", "JPY"}, {"1.234", "KWD"}, {"1", "XYZ"}, {"1.00", "usd"}, {"+1.00", "USD"},
	} {
		t.Run("rejects reading "+bad.v+" "+bad.c, func(t *testing.T) {
			if got, err := paypal.ParseAmount(bad.v, bad.c); err == nil {
				t.Fatalf("accepted as %d", got)
			}
		})
	}
	for _, bad := range []struct {
		minor int64
		c     string
	}{{199950, "HUF"}, {1, "HUF"}, {99, "TWD"}, {1234, "KWD"}, {100, "RUB"}, {100, "XYZ"}, {100, "usd"}} {
		t.Run(fmt.Sprintf("refuses sending %d %s", bad.minor, bad.c), func(t *testing.T) {
			m, err := paypal.ToMoney(bad.minor, bad.c)
			if !errors.Is(err, provider.ErrAmountNotRepresentable) {
				t.Fatalf("ToMoney = %+v, %v", m, err)
			}
			// FormatAmount never rounds: what it renders is refused on the way back.
			if v, err := paypal.ParseAmount(paypal.FormatAmount(bad.minor, bad.c), bad.c); err == nil {
				t.Fatalf("FormatAmount produced %d, which reads back", v)
			}
		})
	}
}

// orderServer is a fake PayPal that answers a create with a COMPLETED order whose
// order, capture and refund amounts are the Money it was sent, and records that Money.
type orderServer struct {
	requests atomic.Int32 // every request, the token included
	sent     paypal.Money
}

func (s *orderServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.URL.Path == "/v1/oauth2/token" {
		issueToken(w, r)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var req paypal.CreateOrderRequest
	if err := json.Unmarshal(b, &req); err != nil || len(req.PurchaseUnits) != 1 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	m := req.PurchaseUnits[0].Amount
	s.sent = m
	o := paypal.Order{ID: "O1", Status: "COMPLETED", PurchaseUnits: []paypal.PurchaseUnit{{
		InvoiceID: req.PurchaseUnits[0].InvoiceID, Amount: m,
		Payments: &paypal.Payments{
			Captures: []paypal.Capture{{ID: "C1", Status: "REFUNDED", Amount: m}},
			Refunds:  []paypal.Refund{{ID: "R1", Status: "COMPLETED", Amount: m}},
		},
	}}}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(o)
}

// TestEveryPayPalCurrencyRoundTrips sends every accepted currency at a few amounts and
// reads the amount back from the order, its capture, its refund and the capture and
// refund events: minor units -> PayPal decimals -> the same minor units.
func TestEveryPayPalCurrencyRoundTrips(t *testing.T) {
	for _, code := range paypal.Currencies() {
		iso, _ := currency.Exponent(code)
		d, _ := paypal.Decimals(code)
		unit := currency.Pow10(iso - d) // smallest amount PayPal can carry, in minor units
		for _, n := range []int64{1, 1999, 100000, 123456789012} {
			minor := n * unit
			t.Run(fmt.Sprintf("%d %s", minor, code), func(t *testing.T) {
				srv := &orderServer{}
				a := fakeAdapter(t, &fakePayPal{token: issueToken, api: srv.ServeHTTP})
				p, err := a.Create(context.Background(), provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ref", Amount: minor, Currency: code})
				if err != nil {
					t.Fatal(err)
				}
				if want := currency.FormatMinor(n, d); srv.sent.Value != want || srv.sent.CurrencyCode != code {
					t.Errorf("sent %+v, want value %q", srv.sent, want)
				}
				if p.Amount != minor || p.Currency != code || p.RefundedTotal != minor {
					t.Errorf("order read back as %d %s refunded %d", p.Amount, p.Currency, p.RefundedTotal)
				}
				capture := fmt.Sprintf(`{"id":"WH-1","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.COMPLETED","resource":{"id":"C1","status":"COMPLETED","amount":{"currency_code":%q,"value":%q},"supplementary_data":{"related_ids":{"order_id":"O1"}}}}`, code, srv.sent.Value)
				if ev, err := paypal.ParseEvent([]byte(capture)); err != nil || ev.Amount != minor || ev.Currency != code {
					t.Errorf("capture event: %d %s %v", ev.Amount, ev.Currency, err)
				}
				refund := fmt.Sprintf(`{"id":"WH-2","create_time":"2026-09-21T12:00:00Z","event_type":"PAYMENT.CAPTURE.REFUNDED","resource":{"id":"R1","status":"COMPLETED","amount":{"currency_code":%[1]q,"value":%[2]q},"seller_payable_breakdown":{"total_refunded_amount":{"currency_code":%[1]q,"value":%[2]q}}}}`, code, srv.sent.Value)
				if ev, err := paypal.ParseEvent([]byte(refund)); err != nil || ev.Amount != minor || ev.RefundedTotal != minor {
					t.Errorf("refund event: %d / %d %v", ev.Amount, ev.RefundedTotal, err)
				}
			})
		}
	}
}

func TestCreateRefusesUnrepresentableAmountsBeforeAnyRequest(t *testing.T) {
	for _, tt := range []struct {
		name     string
		minor    int64
		currency string
	}{
		{"HUF with fillér", 199950, "HUF"},
		{"HUF below one forint", 1, "HUF"},
		{"TWD with cents", 123456, "TWD"},
		{"ISO currency PayPal does not take", 1234, "KWD"},
		{"another ISO currency PayPal does not take", 10000, "INR"},
		{"not a currency", 100, "XYZ"},
		{"lower-case code", 100, "usd"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := &orderServer{}
			a := fakeAdapter(t, &fakePayPal{token: func(w http.ResponseWriter, r *http.Request) { srv.requests.Add(1); issueToken(w, r) }, api: srv.ServeHTTP})
			_, err := a.Create(context.Background(), provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ref", Amount: tt.minor, Currency: tt.currency})
			providertest.AssertClass(t, err, provider.ErrNonRetryable)
			if !errors.Is(err, provider.ErrAmountNotRepresentable) {
				t.Errorf("err %v does not wrap ErrAmountNotRepresentable", err)
			}
			if n := srv.requests.Load(); n != 0 {
				t.Errorf("%d requests sent (token or order) for an amount PayPal cannot take", n)
			}
		})
	}
}
