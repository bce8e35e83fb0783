package controllers_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// Priorities in the gateway (SPEC §12.3, issue 23).

// TestCreateGoesAheadOfScheduledQueries: with the provider's bucket drained
// by status queries (30 due at once at qps 1: half a minute of backlog), a
// new payment's create takes the next token, not the last one, and its
// create marker is never left standing for a call that waited.
func TestCreateGoesAheadOfScheduledQueries(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "prio")
	s := fixture.StartSim(t, paysim.Options{})
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Schedule: []string{"1h"}, QPS: 1, Burst: 1})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	mark := m.Reconciles.Mark()
	var queued []*v1alpha1.Payment
	for i := 0; i < 30; i++ {
		queued = append(queued, fixture.TrackedPayment(t, env.Client, s, prov, fmt.Sprintf("tracked-%d", i), paysim.OutcomePending))
	}
	// Every tracked payment has asked for its query once: each holds its
	// token in the line.
	fixture.Eventually(t, 20*time.Second, "every tracked payment to ask for its query", func() bool {
		for _, p := range queued {
			if len(m.Reconciles.Since(mark, controllers.ControllerPayment, p)) == 0 {
				return false
			}
		}
		return true
	})

	start := time.Now()
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order", Provider: "kukopay", Outcome: paysim.OutcomePending, ExpiresAfter: "8s"})
	var got *v1alpha1.Payment
	fixture.Eventually(t, 5*time.Second, "the create behind 30 status queries", func() (bool, string) {
		got = fixture.GetPayment(t, env.Client, p)
		return got.Status.ProviderPaymentID != "", fixture.Dump(got.Status)
	})
	t.Logf("created %s after the payment was applied, with %d status queries held at qps 1", time.Since(start).Round(time.Millisecond), len(queued))
	if got.Status.Phase == v1alpha1.PhaseUnknown {
		t.Fatalf("phase %s: %s", got.Status.Phase, fixture.Dump(got.Status))
	}
}

// TestRateLimitedCreateIsNeverCreateOutcomeUnknown: creates that cannot get
// a token before their spec.expiresAfter passes were never marked, so they
// end Expired ("nothing was sent"), never Unknown with CreateOutcomeUnknown
// (a human asked to check a create that never left the process).
func TestRateLimitedCreateIsNeverCreateOutcomeUnknown(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "prio")
	s := fixture.StartSim(t, paysim.Options{})
	fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Schedule: []string{"1h"}, QPS: 1, Burst: 1})
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	var pays []*v1alpha1.Payment
	for i := 0; i < 6; i++ {
		pays = append(pays, fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: fmt.Sprintf("order-%d", i), Provider: "kukopay",
			Outcome: paysim.OutcomePending, ExpiresAfter: "2s"}))
	}
	created, expired := 0, 0
	for _, p := range pays {
		got := fixture.WaitPayment(t, env.Client, p, "created, or settled without a create", func(p *v1alpha1.Payment) bool {
			return p.Status.ProviderPaymentID != "" || p.Status.Phase.IsFinal() || p.Status.Phase == v1alpha1.PhaseUnknown
		})
		switch {
		case got.Status.Phase == v1alpha1.PhaseUnknown:
			t.Errorf("%s: Unknown (%s), a create held back by the rate limit is known not to have left: %s", p.Name, reviewOf(got), fixture.Dump(got.Status))
		case got.Status.ProviderPaymentID != "":
			created++
		case got.Status.Phase == v1alpha1.PhaseExpired:
			expired++
			if got.Status.CreateRequestedAt != nil {
				t.Errorf("%s: expired with a create marker %s", p.Name, got.Status.CreateRequestedAt)
			}
		}
	}
	if c := s.Counters(); c.CreateRequests != created || c.Searches != 0 {
		t.Errorf("provider saw %d creates and %d searches; %d payments were created, none looked up", c.CreateRequests, c.Searches, created)
	}
	if expired == 0 {
		t.Errorf("all %d creates got a token before their expiry; the test proves nothing", created)
	}
	t.Logf("%d created, %d expired before their token came, nothing sent for them", created, expired)
}

func reviewOf(p *v1alpha1.Payment) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.ConditionNeedsReview {
			return c.Reason
		}
	}
	return "no review"
}
