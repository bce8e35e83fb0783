package kukopay_test

import (
	"bytes"
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
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// echoServer is a fake KukoPay that answers a create with a succeeded payment for the
// amount it was sent, and records the amount exactly as it appeared on the wire.
type echoServer struct {
	requests atomic.Int32
	wire     json.Number
}

func (s *echoServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	b, _ := io.ReadAll(r.Body)
	var raw struct {
		Amount json.Number `json:"amount"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var req kukopay.CreatePaymentRequest
	if dec.Decode(&raw) != nil || json.Unmarshal(b, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.wire = raw.Amount
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(kukopay.PaymentObject{
		ID: "pay_1", Object: "payment", OutTradeNo: req.OutTradeNo, Amount: req.Amount, AmountReceived: req.Amount,
		Currency: req.Currency, Status: "succeeded",
	})
}

// TestEveryISOCurrencyRoundTrips: KukoPay takes ISO minor units as integers, so every
// ISO currency must go out and come back (create answer and webhook event) unchanged,
// including amounts past 2^53 that a float64 on the way would corrupt.
func TestEveryISOCurrencyRoundTrips(t *testing.T) {
	for _, code := range currency.Codes() {
		for _, minor := range []int64{1, 1999, 199900, 9007199254740993} {
			t.Run(fmt.Sprintf("%d %s", minor, code), func(t *testing.T) {
				srv := &echoServer{}
				a := serve(t, srv.ServeHTTP)
				p, err := a.Create(context.Background(), provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ORD-1", Amount: minor, Currency: code})
				if err != nil {
					t.Fatal(err)
				}
				if srv.wire.String() != fmt.Sprint(minor) {
					t.Errorf("sent amount %s", srv.wire)
				}
				if p.Amount != minor || p.Currency != code {
					t.Errorf("read back %d %s", p.Amount, p.Currency)
				}
				ev, err := kukopay.ParseEvent([]byte(fmt.Sprintf(`{"id":"evt_1","type":"payment.succeeded","created":1758456000,"data":{"object":{"id":"pay_1","out_trade_no":"ORD-1","amount":%[1]s,"amount_received":%[1]s,"currency":%[2]q,"status":"succeeded"}}}`, srv.wire, code)))
				if err != nil || ev.Amount != minor || ev.Currency != code {
					t.Errorf("event read back %d %s %v", ev.Amount, ev.Currency, err)
				}
			})
		}
	}
}

func TestCreateRefusesUnknownCurrenciesBeforeAnyRequest(t *testing.T) {
	for _, code := range []string{"XYZ", "usd", "", "US", "HRK", "XAU", "XDR"} {
		t.Run(fmt.Sprintf("%q", code), func(t *testing.T) {
			srv := &echoServer{}
			_, err := serve(t, srv.ServeHTTP).Create(context.Background(), provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ORD-1", Amount: 100, Currency: code})
			providertest.AssertClass(t, err, provider.ErrNonRetryable)
			if !errors.Is(err, provider.ErrAmountNotRepresentable) {
				t.Errorf("err %v does not wrap ErrAmountNotRepresentable", err)
			}
			if n := srv.requests.Load(); n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}
