package stripe_test

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// recordedSim runs paysim's Stripe mode on clk, recording what the adapter sends.
func recordedSim(t *testing.T, clk *clocktesting.FakeClock, faults paysim.Faults) (*paysimtest.Server, *stripe.Adapter) {
	t.Helper()
	srv := paysimtest.Start(t, paysim.Options{
		StripeSecretKey: simKey, Now: clk.Now, Faults: faults,
		DefaultScript: &paysim.Script{Outcome: paysim.OutcomePending},
	})
	a, err := stripe.New(provider.Config{
		Name: "ns/stripe", APIURL: srv.URL + "/stripe", Timeout: 5 * time.Second, Now: clk.Now,
		Credentials: map[string][]byte{stripe.CredentialSecretKey: []byte(simKey)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, a
}

// A Checkout Session create retried later must carry the parameters of the first
// attempt: Stripe compares them under the idempotency key (idempotency_error). The
// expiry is clamped from the create marker's time, so neither the 30-minute step nor
// the 24-hour bound moves with the clock of the attempt. The marker is taken so that
// twenty minutes later "now + 31 minutes" crosses a step boundary.
func TestSessionCreateRetriedLaterSendsTheSameParameters(t *testing.T) {
	marked := time.Date(2026, 3, 1, 12, 10, 7, 0, time.UTC)
	created := marked.Add(-3 * time.Second)
	for _, tt := range []struct {
		name         string
		expiresAfter time.Duration
	}{
		{"an expiry under 30 minutes raised to the minimum", 10 * time.Minute},
		{"an expiry just over 24 hours left to Stripe's default", 24*time.Hour + 10*time.Minute},
		{"an expiry over 24 hours left to Stripe's default", 48 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(marked)
			srv, a := recordedSim(t, clk, paysim.Faults{})
			req := checkoutReq("key-retry-"+tt.expiresAfter.String(), "ORD-RETRY", 1000)
			req.ExpiresAt, req.RequestedAt = created.Add(tt.expiresAfter), marked
			paysimtest.RetriedLaterSendsTheSameBody(t, srv, a, clk, req, "/stripe/v1/checkout/sessions")
		})
	}
}

// TestLostSessionCreateRetriedLaterIsReplayed: the session was created but the answer
// lost; the retry twenty minutes later is replayed, not refused, and one session exists.
func TestLostSessionCreateRetriedLaterIsReplayed(t *testing.T) {
	marked := time.Date(2026, 3, 1, 12, 10, 7, 0, time.UTC)
	clk := clocktesting.NewFakeClock(marked)
	srv, a := recordedSim(t, clk, paysim.Faults{LostResponseRate: 1, Operations: []string{paysim.OpCreate}})
	req := checkoutReq("key-lost-later", "ORD-LOST-LATER", 1000)
	req.ExpiresAt, req.RequestedAt = marked.Add(10*time.Minute), marked
	_, err := a.Create(ctx, req)
	providertest.AssertClass(t, err, provider.ErrRetryable)
	srv.Sim.SetFaults(paysim.Faults{})
	clk.Step(20 * time.Minute)
	p, err := a.Create(ctx, req)
	if err != nil {
		t.Fatalf("retry refused: %v", err)
	}
	if c := srv.Sim.Counters(); c.PaymentsCreated != 1 || c.CreatesByKey["stripe/"+req.IdempotencyKey] != 2 {
		t.Fatalf("counters %+v (answered %s)", c, p.ID)
	}
	if sc := srv.Sim.StripeCounters(); sc.Replays != 1 || sc.IdempotencyErrors != 0 {
		t.Fatalf("stripe counters %+v", sc)
	}
}
