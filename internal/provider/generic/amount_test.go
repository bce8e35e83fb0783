package generic_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
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

// echoServer is a fake job API that answers a create with a succeeded job for the
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
		Amount struct {
			Value json.Number `json:"value"`
		} `json:"amount"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var req generic.CreateJobRequest
	if dec.Decode(&raw) != nil || json.Unmarshal(b, &req) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.wire = raw.Amount.Value
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(generic.Job{
		JobID: "job_1", CorrelationID: req.CorrelationID, JobStatus: "succeeded", Amount: req.Amount, AmountReceived: &req.Amount,
	})
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

// echo creates through a new echoServer.
var echo = providertest.NewISOEcho(serve, func() providertest.EchoServer { return &echoServer{} }, "ref-1", parseEvent)
