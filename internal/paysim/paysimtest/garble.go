package paysimtest

import (
	"errors"
	"testing"

	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
)

// GarbledBody is one kind of unreadable 2xx body (paysim.Faults.GarbledBody).
type GarbledBody struct{ Name, Body string }

// GarbledBodies are the unreadable bodies an adapter's writes are tested with: the
// real body cut in half (not JSON) and well-formed JSON without the object.
var GarbledBodies = []GarbledBody{{"cut in half", ""}, {"JSON without the object", "{}"}}

// Garbler answers the next calls of one operation 2xx with an unreadable body, the
// request carried out, and checks what the adapter makes of it.
type Garbler struct {
	Sim  *paysim.Sim
	Body string
}

// Next garbles the 2xx answers of op until Want.
func (g Garbler) Next(op string) {
	g.Sim.SetFaults(paysim.Faults{GarbledAnswerRate: 1, GarbledBody: g.Body, Operations: []string{op}})
}

// Want ends the fault and checks that err, the adapter's error for the write what,
// is "it happened, look it up": Retryable with provider.ErrUnreadableAnswer, which
// the core classifies NoAnswer (the outcome is unknown: the write is repeated with
// its idempotency key or looked up), never a refusal or an answer.
func (g Garbler) Want(t testing.TB, what string, err error) {
	t.Helper()
	g.Sim.SetFaults(paysim.Faults{})
	if c := payment.Classify(err); c != payment.NoAnswer || !errors.Is(err, provider.ErrUnreadableAnswer) {
		t.Errorf("%s answered 2xx unreadable: class %s (%v); want no answer, unreadable", what, c, err)
	}
}

// EachGarbledBody runs test once per GarbledBodies, in a subtest named after it;
// test starts its own paysim, garbles the answers of its writes with body, one
// each, and returns the Sim, which must then have garbled writes answers.
func EachGarbledBody(t *testing.T, writes int, test func(t *testing.T, body string) *paysim.Sim) {
	t.Helper()
	for _, body := range GarbledBodies {
		t.Run(body.Name, func(t *testing.T) {
			sim := test(t, body.Body)
			if n := sim.Counters().APIFaults.Garbled; n != writes {
				t.Errorf("%d garbled answers, want one per write", n)
			}
		})
	}
}
