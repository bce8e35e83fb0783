package controllers_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
)

// lossyHop sits between paysim and the receiver and fails a share of the
// deliveries with 502 before they reach it, like a flaky load balancer, so
// paysim's retry schedule has to redeliver them.
type lossyHop struct {
	next http.Handler
	rate float64
	mu   sync.Mutex
	rng  *rand.Rand
	lost int
}

func (h *lossyHop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	lose := h.rng.Float64() < h.rate
	if lose {
		h.lost++
	}
	h.mu.Unlock()
	if lose {
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return
	}
	h.next.ServeHTTP(w, r)
}

// Lost is how many attempts the hop has failed so far (paysim may still be
// retrying while the test reads it).
func (h *lossyHop) Lost() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// scripted is one payment and where paysim's script takes it.
type scripted struct {
	kind  string
	want  v1alpha1.PaymentPhase
	real  int // phase changes the script makes at the provider
	jobID string
	p     *v1alpha1.Payment
}

// Issue 5, test 12: paysim delivers the generic provider's webhooks with 30%
// of events dropped, 30% delivered twice and 30% held back behind the next
// one, through a hop that loses another 30% of the attempts. Deliveries that
// fail are redelivered on the provider's schedule; dropped events are never
// sent and come in through the events API, as the backfill does, into the
// same inbox. Every payment ends in its scripted phase, with one transition
// per applied event and one WebhookEvent per provider event.
func TestPaysimDeliveryWithFaults(t *testing.T) {
	t.Parallel()
	const secret = "whsec_cGF5c2ltLWZhdWx0cy1zZWNyZXQ=" // base64("paysim-faults-secret")
	o := fixture.Run(controllers.ControllerInbox)
	o.PendingGrace, o.InboxMaxConcurrentReconciles = 2*time.Second, 4
	// The processor holds this test's namespace only: over every namespace
	// it would apply and expire the events of the tests beside it.
	ns := fixture.Namespace(t, env.Client, "faults")
	proc := fixture.StartManager(t, env, ns, o)
	rcv := fixture.StartReceiver(t, env, fixture.ReceiverOptions{})

	sim := fixture.StartSim(t, paysim.Options{
		// Generic's schedule (0, 5s, 5m, 30m, ...) runs 2000 times faster.
		TimeFactor:     0.0005,
		Seed:           12,
		GenericToken:   "test-token",
		WebhookSecrets: map[string][][]byte{paysim.Generic: {[]byte(secret)}},
		Faults:         paysim.Faults{DropRate: 0.3, DuplicateRate: 0.3, ReorderRate: 0.3},
	})

	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: ns, Name: "jobs", Type: v1alpha1.ProviderGeneric, Sim: sim,
		Credentials: map[string]string{"token": "test-token"}, SigningSecrets: map[string]string{"current": secret},
	})
	fixture.WaitCached(t, rcv.Cache, prov)
	target, _ := url.Parse(rcv.URL)
	hop := &lossyHop{next: httputil.NewSingleHostReverseProxy(target), rate: 0.3, rng: rand.New(rand.NewPCG(12, 12))}
	hopSrv := httptest.NewServer(hop)
	t.Cleanup(hopSrv.Close)
	if err := sim.SetWebhookTarget(paysim.Generic, hopSrv.URL+"/webhooks/"+ns+"/jobs"); err != nil {
		t.Fatal(err)
	}
	adapter, err := providers.New(providers.TypeGeneric, provider.Config{
		Name: ns + "/jobs", APIURL: sim.APIURL(v1alpha1.ProviderGeneric), Credentials: map[string][]byte{"token": []byte("test-token")},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()

	kinds := []scripted{
		{kind: "succeed", want: v1alpha1.PhaseSucceeded, real: 1},
		{kind: "fail", want: v1alpha1.PhaseFailed, real: 1},
		{kind: "expire", want: v1alpha1.PhaseExpired, real: 1},
		{kind: "processing", want: v1alpha1.PhaseProcessing, real: 1},
		{kind: "processing-then-succeed", want: v1alpha1.PhaseSucceeded, real: 2},
		{kind: "partial-refund", want: v1alpha1.PhasePartiallyRefunded, real: 2},
		{kind: "full-refund-in-two", want: v1alpha1.PhaseRefunded, real: 3},
	}
	outcome := map[string]paysim.Outcome{
		"succeed": paysim.OutcomeSucceed, "fail": paysim.OutcomeFail, "expire": paysim.OutcomeExpire,
		"processing": paysim.OutcomeProcessing, "processing-then-succeed": paysim.OutcomeProcessing,
		"partial-refund": paysim.OutcomeSucceed, "full-refund-in-two": paysim.OutcomeSucceed,
	}
	var payments []*scripted
	for round := range 3 {
		for _, k := range kinds {
			s := k
			ref := fmt.Sprintf("%s-%d", k.kind, round)
			job, err := adapter.Create(ctx, provider.CreateRequest{
				IdempotencyKey: ref, MerchantReference: ref, Amount: 1000, Currency: "EUR",
				Metadata: map[string]string{paysim.MetaOutcome: string(outcome[k.kind]), paysim.MetaAfter: "2s"},
			})
			if err != nil {
				t.Fatal(err)
			}
			s.jobID = job.ID
			// Tracked payments: the webhook and inbox path alone settle them.
			s.p = fixture.CreatePayment(t, env.Client, fixture.Payment{
				Namespace: ns, Name: ref, Provider: prov.Name, MerchantReference: ref, ProviderPaymentID: job.ID, Amount: 1000, Currency: "EUR",
			})
			payments = append(payments, &s)
		}
	}

	// The second act of the multi-step scripts, once paysim is there.
	for _, s := range payments {
		switch s.kind {
		case "processing-then-succeed":
			fixture.WaitSimState(t, sim, v1alpha1.ProviderGeneric, s.jobID, "processing")
			if err := sim.SetOutcome(paysim.Generic, s.jobID, paysim.Script{Outcome: paysim.OutcomeSucceed}); err != nil {
				t.Fatal(err)
			}
		case "partial-refund":
			fixture.WaitSimState(t, sim, v1alpha1.ProviderGeneric, s.jobID, "succeeded")
			if err := sim.Refund(paysim.Generic, s.jobID, 300); err != nil {
				t.Fatal(err)
			}
		case "full-refund-in-two":
			fixture.WaitSimState(t, sim, v1alpha1.ProviderGeneric, s.jobID, "succeeded")
			if err := sim.Refund(paysim.Generic, s.jobID, 400); err != nil {
				t.Fatal(err)
			}
			if err := sim.Refund(paysim.Generic, s.jobID, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range payments {
		if s.kind == "processing-then-succeed" {
			fixture.WaitSimState(t, sim, v1alpha1.ProviderGeneric, s.jobID, "succeeded")
		}
	}

	// Let paysim finish: every event delivered, dropped or given up on.
	fixture.Eventually(t, 90*time.Second, "paysim's deliveries to settle", func() (bool, string) {
		c := sim.Counters().WebhooksByProvider[paysim.Generic]
		return c.Events == len(sim.Events(paysim.Generic)) && c.Events == c.Delivered+c.Dropped+c.Exhausted,
			fmt.Sprintf("%+v", c)
	})
	c := sim.Counters().WebhooksByProvider[paysim.Generic]
	if lost := hop.Lost(); c.Dropped == 0 || c.Duplicated == 0 || c.Reordered == 0 || lost == 0 {
		t.Fatalf("faults not exercised: %+v, lost by the hop %d", c, lost)
	}

	// The backfill's pass over the events API, through the same inbox: the
	// copies of delivered events dedup, the dropped ones are stored and applied.
	in := &inbox.Inbox{Client: proc.Client(), Reader: proc.Client(), APIReader: proc.Manager.GetAPIReader()}
	backfilled := 0
	for cursor := ""; ; {
		page, err := adapter.ListEvents(ctx, start.Add(-time.Minute), cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			out, err := in.Receive(ctx, prov, ev, v1alpha1.ViaBackfill, "", 0)
			if err != nil {
				t.Fatalf("backfill of %s: %v", ev.ID, err)
			}
			if out.Stored {
				backfilled++
			}
		}
		if !page.HasMore {
			break
		}
		cursor = page.NextCursor
	}
	if want := c.Dropped + c.Exhausted; backfilled != want {
		t.Errorf("backfill stored %d events, want the %d that were never delivered", backfilled, want)
	}

	for _, s := range payments {
		got := fixture.WaitPhase(t, env.Client, s.p, s.want, fixture.Timeout)
		s.p = got
	}
	fixture.Eventually(t, fixture.Timeout, "every event to be done", func() (bool, string) {
		for _, e := range fixture.WebhookEvents(t, env.Client, ns) {
			if !e.Status.Result.IsDone() {
				return false, fmt.Sprintf("event %s (%s) still %q", e.Spec.EventID, e.Spec.Type, e.Status.Result)
			}
		}
		return true, ""
	})

	evs := fixture.WebhookEvents(t, env.Client, ns)
	if len(evs) != len(sim.Events(paysim.Generic)) {
		t.Errorf("%d WebhookEvents for %d provider events, want exactly one each", len(evs), len(sim.Events(paysim.Generic)))
	}
	applied := map[string]int{} // provider payment id -> applied events
	for _, e := range evs {
		if e.Status.Result == v1alpha1.ResultApplied {
			applied[e.Spec.ProviderPaymentID]++
		}
	}
	for _, s := range payments {
		got := fixture.GetPayment(t, env.Client, s.p)
		n := fixture.Transitions(got)
		if n != applied[s.jobID] || n < 1 || n > s.real {
			t.Errorf("%s (%s): %d transitions for %d applied events and %d real changes; want one per applied event, at most one per real change",
				got.Name, s.kind, n, applied[s.jobID], s.real)
		}
		seen := map[string]bool{}
		for _, h := range got.Status.History {
			if h.EventID == "" || seen[h.EventID] {
				t.Errorf("%s: history %+v applies an event twice or without an id", got.Name, got.Status.History)
				break
			}
			seen[h.EventID] = true
		}
	}
	t.Logf("paysim %+v; lost by the hop %d; backfilled %d; %d events for %d payments", c, hop.Lost(), backfilled, len(evs), len(payments))
}
