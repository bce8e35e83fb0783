package generic_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// parseEvent parses the succeeded webhook event for the amount wire (as it was
// sent) of code.
func parseEvent(wire, code string) (provider.Event, error) {
	return generic.ParseEvent([]byte(fmt.Sprintf(`{"id":"msg_1","type":"job.succeeded","timestamp":"2026-09-21T12:00:00Z","data":{"jobId":"job_1","correlationId":"ref-1","jobStatus":"succeeded","amount":{"value":%[1]s,"currency":%[2]q},"amountReceived":{"value":%[1]s,"currency":%[2]q}}}`, wire, code)))
}

// echoCreate is the job API's answer in the fake: a create is answered with a succeeded
// job for the amount it was sent.
func echoCreate(body []byte) (int, any, error) {
	var req generic.CreateJobRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, generic.Job{
		JobID: "job_1", CorrelationID: req.CorrelationID, JobStatus: "succeeded", Amount: req.Amount, AmountReceived: &req.Amount,
	}, nil
}

// TestEveryISOCurrencyRoundTrips: the job API takes ISO minor units as integers, so
// every ISO currency must go out and come back (create answer and webhook event)
// unchanged, including amounts past 2^53 that a float64 on the way would corrupt.
func TestEveryISOCurrencyRoundTrips(t *testing.T) {
	providertest.EveryISOCurrencyRoundTrips(t, echo)
}

func TestCreateRefusesUnknownCurrenciesBeforeAnyRequest(t *testing.T) {
	providertest.CreateRefusesUnknownCurrencies(t, echo)
}

// echo creates through a new fake answering echoCreate.
var echo = providertest.NewISOEcho(serve, providertest.EchoFake{Amount: []string{"amount", "value"}, Answer: echoCreate}, "ref-1", parseEvent)
