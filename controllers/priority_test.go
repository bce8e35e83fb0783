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
// new payment's create takes the next token, not the last one.
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
