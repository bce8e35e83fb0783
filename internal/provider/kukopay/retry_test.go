package kukopay_test

import (
	"errors"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
)

// A create retried later (after a lost answer, a crash) must send the request of the
// first attempt byte for byte: KukoPay compares the body under the Idempotency-Key and
// refuses another one (422 idempotency_error) although the first may have charged. An
// expiry outside KukoPay's bounds is clamped from the create marker's time, never from
// the clock of the attempt.
func TestCreateRetriedLaterSendsTheSameBody(t *testing.T) {
	for _, tt := range []struct {
		name         string
		expiresAfter time.Duration
	}{
		{"an expiry under 30 minutes raised to the minimum", 10 * time.Minute},
		{"an expiry over 24 hours lowered to the maximum", 48 * time.Hour},
		{"an expiry within the bounds", 2 * time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, a, clk := simAdapter(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomePending}})
			marked := clk.Now().Truncate(time.Second)
			req := provider.CreateRequest{
				IdempotencyKey: key("retry"), MerchantReference: key("ORD"), Amount: 1000, Currency: "EUR",
				Checkout: shop, ExpiresAt: now.Add(tt.expiresAfter), RequestedAt: marked,
			}
			paysimtest.RetriedLaterSendsTheSameBody(t, srv, a, clk, req, "/kukopay/v1/payments")
		})
	}
}

// TestLostCreateAnswerRetriedLaterIsReplayed: the first create charged but its answer
// was lost; the retry twenty minutes later gets the first answer (the same payment),
// not 422 idempotency_error, and nothing is created twice.
func TestLostCreateAnswerRetriedLaterIsReplayed(t *testing.T) {
	for _, expiresAfter := range []time.Duration{10 * time.Minute, 48 * time.Hour} {
		t.Run(expiresAfter.String(), func(t *testing.T) {
			srv, a, clk := simAdapter(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomePending}})
			req := provider.CreateRequest{
				IdempotencyKey: key("lost"), MerchantReference: key("ORD"), Amount: 1000, Currency: "EUR",
				Checkout: shop, ExpiresAt: now.Add(expiresAfter), RequestedAt: clk.Now(),
			}
			srv.Sim.SetFaults(paysim.Faults{LostResponseRate: 1, Operations: []string{paysim.OpCreate}})
			if _, err := a.Create(ctx, req); !errors.Is(err, provider.ErrRetryable) {
				t.Fatalf("lost answer: %v", err)
			}
			srv.Sim.SetFaults(paysim.Faults{})
			clk.Step(20 * time.Minute)
			p, err := a.Create(ctx, req)
			if err != nil {
				t.Fatalf("retry refused: %v", err)
			}
			found, err := a.FindByMerchantReference(ctx, req.MerchantReference)
			if err != nil || found.ID != p.ID {
				t.Fatalf("found %+v %v, retry answered %s", found, err, p.ID)
			}
			if c := srv.Sim.Counters(); c.PaymentsCreated != 1 {
				t.Fatalf("%d payments created", c.PaymentsCreated)
			}
		})
	}
}
