package kukopay_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// parseEvent parses the succeeded webhook event for the amount wire (as it was
// sent) of code.
func parseEvent(wire, code string) (provider.Event, error) {
	return kukopay.ParseEvent([]byte(fmt.Sprintf(`{"id":"evt_1","type":"payment.succeeded","created":1758456000,"data":{"object":{"id":"pay_1","out_trade_no":"ORD-1","amount":%[1]s,"amount_received":%[1]s,"currency":%[2]q,"status":"succeeded"}}}`, wire, code)))
}

// echoServer is a fake KukoPay that answers a create with a succeeded payment for the
// amount it was sent, and records the amount exactly as it appeared on the wire.
type echoServer struct {
	requests atomic.Int32
	wire     json.Number
}

// Sent is the last amount as it was on the wire and how many requests came.
func (s *echoServer) Sent() (string, int32) { return s.wire.String(), s.requests.Load() }

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
	providertest.EveryISOCurrencyRoundTrips(t, echo)
}

func TestCreateRefusesUnknownCurrenciesBeforeAnyRequest(t *testing.T) {
	providertest.CreateRefusesUnknownCurrencies(t, echo)
}

// echo creates through a new echoServer.
var echo = providertest.NewISOEcho(serve, func() providertest.EchoServer { return &echoServer{} }, "ORD-1", parseEvent)
