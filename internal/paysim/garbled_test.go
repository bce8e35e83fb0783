package paysim_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
)

// TestGarbledAnswerTakesEffectAndReplaysTheRealAnswer: a garbled answer is a
// request that took effect whose 2xx body the client cannot read; the
// idempotent replay under the same key is the real answer (the provider stored
// it), and no second payment is made.
func TestGarbledAnswerTakesEffectAndReplaysTheRealAnswer(t *testing.T) {
	for _, body := range paysimtest.GarbledBodies {
		t.Run(body.Name, func(t *testing.T) {
			e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeSucceed}})
			for _, name := range allProviders {
				e.sim.SetFaults(paysim.Faults{GarbledAnswerRate: 1, GarbledBody: body.Body, Operations: []string{paysim.OpCreate}})
				req := createReq("key-"+name, "ref-"+name, 1000, nil)
				got, err := e.p[name].Create(context.Background(), req)
				if err == nil && got.ID != "" {
					t.Fatalf("%s: a garbled answer was read: %+v", name, got)
				}
				e.sim.SetFaults(paysim.Faults{})
				p := e.create(t, name, "key-"+name, "ref-"+name, 1000, nil)
				if p.ID == "" {
					t.Fatalf("%s: the replay carries no payment", name)
				}
			}
			c := e.sim.Counters()
			if c.APIFaults.Garbled != len(allProviders) || c.PaymentsCreated != len(allProviders) {
				t.Errorf("garbled %d, payments created %d; want one each per provider", c.APIFaults.Garbled, c.PaymentsCreated)
			}
		})
	}
	t.Run("stripe", func(t *testing.T) {
		e := startStripe(t, paysim.Options{})
		// Operations limit Stripe's faults too: the list below is not garbled.
		e.sim.SetFaults(paysim.Faults{GarbledAnswerRate: 1, GarbledBody: "{}", Operations: []string{paysim.OpCreate}})
		code, _, garbled := e.do(t, "POST", "/v1/payment_intents", "k1", intentForm("1000", "ORD-1"))
		if code != 200 || string(garbled) != "{}" {
			t.Fatalf("garbled answer: %d %s", code, garbled)
		}
		if code, _, body := e.do(t, "GET", "/v1/events", "", nil); code != 200 || !json.Valid(body) {
			t.Fatalf("an operation outside Operations was faulted: %d %s", code, body)
		}
		e.sim.SetFaults(paysim.Faults{})
		code, h, replay := e.do(t, "POST", "/v1/payment_intents", "k1", intentForm("1000", "ORD-1"))
		var pi struct {
			ID, Status string
		}
		if code != 200 || h.Get("Idempotent-Replayed") != "true" || json.Unmarshal(replay, &pi) != nil || pi.Status != "succeeded" {
			t.Fatalf("replay: %d %v %s", code, h, replay)
		}
		if c := e.sim.StripeCounters(); c.IntentsCreated != 1 {
			t.Errorf("%d PaymentIntents; want the one the garbled answer was about", c.IntentsCreated)
		}
	})
}
