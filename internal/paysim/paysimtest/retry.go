package paysimtest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
)

// LostRefundAnswerRefundsOnce is the double-refund trap: the refund req is
// made but its answer lost (Retryable); the retry with the same idempotency
// key gets the refund back, succeeded for the whole amount, and the payment
// was refunded once. It returns the retry's answer.
func LostRefundAnswerRefundsOnce(t testing.TB, srv *Server, a provider.Provider, req provider.RefundRequest) provider.Refund {
	t.Helper()
	srv.Sim.SetFaults(paysim.Faults{LostResponseRate: 1, Operations: []string{paysim.OpRefund}})
	if _, err := a.CreateRefund(context.Background(), req); !errors.Is(err, provider.ErrRetryable) {
		t.Fatalf("%v", err)
	}
	srv.Sim.SetFaults(paysim.Faults{})
	r, err := a.CreateRefund(context.Background(), req)
	if err != nil || r.Status != provider.RefundSucceeded || r.Amount != req.Amount {
		t.Fatalf("retry: %+v %v", r, err)
	}
	if n := srv.Sim.Counters().RefundsByPayment[req.PaymentID]; n != 1 {
		t.Fatalf("refunded %d times", n)
	}
	return r
}

// RetriedLaterSendsTheSameBody creates req through a, and again twenty
// minutes later on clk: the retry is answered with the first payment, and the
// two creates (POSTs to path) sent the same body byte for byte.
func RetriedLaterSendsTheSameBody(t testing.TB, srv *Server, a provider.Provider, clk *clocktesting.FakeClock, req provider.CreateRequest, path string) {
	t.Helper()
	first, err := a.Create(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(20 * time.Minute)
	again, err := a.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("retry 20 minutes later refused: %v", err)
	}
	if again.ID != first.ID {
		t.Fatalf("retry answered %s, first %s", again.ID, first.ID)
	}
	var bodies [][]byte
	for _, r := range srv.Sent(http.MethodPost, path) {
		bodies = append(bodies, r.Body)
	}
	if len(bodies) != 2 || !bytes.Equal(bodies[0], bodies[1]) {
		t.Fatalf("bodies differ:\n %s\n %s", bodies[0], bodies[len(bodies)-1])
	}
}

// Events parses the events paysim recorded for the provider mode with parse
// and returns those keep accepts, oldest first.
func Events(t testing.TB, sim *paysim.Sim, mode string, parse func([]byte) (provider.Event, error), keep func(provider.Event) bool) []provider.Event {
	t.Helper()
	var out []provider.Event
	for _, e := range sim.Events(mode) {
		ev, err := parse(e.Raw)
		if err != nil {
			t.Fatal(err)
		}
		if keep(ev) {
			out = append(out, ev)
		}
	}
	return out
}
