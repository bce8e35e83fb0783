package kukopay_test

import (
	"encoding/json"
	"fmt"
	"net/http"
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

// echoCreate is KukoPay's answer in the fake: a create is answered with a succeeded
// payment for the amount it was sent.
func echoCreate(body []byte) (int, any, error) {
	var req kukopay.CreatePaymentRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, kukopay.PaymentObject{
		ID: "pay_1", Object: "payment", OutTradeNo: req.OutTradeNo, Amount: req.Amount, AmountReceived: req.Amount,
		Currency: req.Currency, Status: "succeeded",
	}, nil
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

// echo creates through a new fake answering echoCreate.
var echo = providertest.NewISOEcho(serve, providertest.EchoFake{Amount: []string{"amount"}, Answer: echoCreate}, "ORD-1", parseEvent)
