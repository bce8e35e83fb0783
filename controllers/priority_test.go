package controllers_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"

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
	// Serial: its bound races a backlog drained at a fixed rate, so it
	// runs alone, before the package's parallel tests load the machine.
	ns := fixture.Namespace(t, env.Client, "prio")
	s, prov := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h"}, QPS: 1, Burst: 1})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	queryBacklog(t, m, s, prov, 30)

	start := time.Now()
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order", Provider: "kukopay", Outcome: paysim.OutcomePending, ExpiresAfter: "8s"})
	var got *v1alpha1.Payment
	fixture.Eventually(t, 5*time.Second, "the create behind 30 status queries", func() (bool, string) {
		got = fixture.GetPayment(t, env.Client, p)
		return got.Status.ProviderPaymentID != "", fixture.Dump(got.Status)
	})
	t.Logf("created %s after the payment was applied, with 30 status queries held at qps 1", time.Since(start).Round(time.Millisecond))
	if got.Status.Phase == v1alpha1.PhaseUnknown {
		t.Fatalf("phase %s: %s", got.Status.Phase, fixture.Dump(got.Status))
	}
}

// queryBacklog drains prov's bucket with n status queries due at once (n
// tracked payments, never paid) and waits until each has asked for its token
// once: each then holds its place in the line.
func queryBacklog(t *testing.T, m *fixture.Manager, s *fixture.Sim, prov *v1alpha1.PaymentProvider, n int) {
	t.Helper()
	mark := m.Reconciles.Mark()
	var queued []*v1alpha1.Payment
	for i := 0; i < n; i++ {
		queued = append(queued, fixture.TrackedPayment(t, env.Client, s, prov, fmt.Sprintf("tracked-%d", i), paysim.OutcomePending))
	}
	fixture.Eventually(t, 20*time.Second, "every tracked payment to ask for its query", func() bool {
		for _, p := range queued {
			if len(m.Reconciles.Since(mark, controllers.ControllerPayment, p)) == 0 {
				return false
			}
		}
		return true
	})
}

// TestRateLimitedCreateIsNeverCreateOutcomeUnknown: creates that cannot get
// a token before their spec.expiresAfter passes were never marked, so they
// end Expired ("nothing was sent"), never Unknown with CreateOutcomeUnknown
// (a human asked to check a create that never left the process).
func TestRateLimitedCreateIsNeverCreateOutcomeUnknown(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "prio")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h"}, QPS: 1, Burst: 1})
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

// TestNoQueryForAPaymentSeenSettled: a payment settles (a webhook, stored by
// another writer) after its reconcile read it and before its status query
// goes out. The manager's cache has the settled copy by then: the query is
// not sent.
func TestNoQueryForAPaymentSeenSettled(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "prio")
	s, prov := kukopayAt(t, ns, fixture.Provider{Quiet: true})
	const name = "settles"
	var settled atomic.Pointer[v1alpha1.Payment]
	o := fixture.Run(controllers.ControllerPayment)
	o.WrapClient = func(c client.Client) client.Client {
		return fixture.Intercept(c, interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if err := c.Get(ctx, key, obj, opts...); err != nil {
					return err
				}
				if _, ok := obj.(*v1alpha1.Payment); !ok || key.Name != name || controller.ReconcileIDFromContext(ctx) == "" || settled.Load() != nil {
					return nil
				}
				// The reconcile has read the payment pending; it settles now,
				// and the manager's cache sees it before the reconcile goes on.
				settled.Store(settle(t, c, key))
				return nil
			},
		})
	}
	m := fixture.StartManager(t, env, ns, o)
	p := fixture.TrackedPayment(t, env.Client, s, prov, name, paysim.OutcomePending)

	fixture.Eventually(t, 10*time.Second, "the payment to settle during its reconcile", func() bool { return settled.Load() != nil })
	m.Reconciles.WaitSeen(t, controllers.ControllerPayment, p, settled.Load())
	id := p.Spec.ProviderPaymentID
	if n := s.Counters().QueriesByPayment[id]; n != 0 {
		t.Fatalf("%d status queries for a payment the manager had seen settled, want 0", n)
	}
	if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Fatalf("phase %s, want the settled Succeeded kept", got.Status.Phase)
	}
}

// settle stores the payment as Succeeded, as the receiver would, and waits
// until cache (the manager's) has it. It runs inside a reconcile: it reports
// failures with t.Error only.
func settle(t *testing.T, cache client.Reader, key client.ObjectKey) *v1alpha1.Payment {
	ctx := context.Background()
	p := &v1alpha1.Payment{}
	for {
		if err := env.Client.Get(ctx, key, p); err != nil {
			t.Error(err)
			return p
		}
		p.Status.Phase = v1alpha1.PhaseSucceeded
		if err := env.Client.Status().Update(ctx, p); err == nil {
			break
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		seen := &v1alpha1.Payment{}
		if err := cache.Get(ctx, key, seen); err == nil && seen.Status.Phase == v1alpha1.PhaseSucceeded {
			return p
		}
		time.Sleep(10 * time.Millisecond) // polling the cache, not a schedule
	}
	t.Error("the manager's cache never saw the settled payment")
	return p
}

// TestBackfillGoesAheadOfScheduledQueries: an events page stands for
// webhooks (and may settle many payments at once): with the bucket drained by
// status queries it takes the next token, and a one-off replay completes at
// once instead of being deferred behind half a minute of queries.
func TestBackfillGoesAheadOfScheduledQueries(t *testing.T) {
	// Serial: its bound races a backlog drained at a fixed rate, so it
	// runs alone, before the package's parallel tests load the machine.
	ns := fixture.Namespace(t, env.Client, "prio")
	s, prov := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h"}, QPS: 1, Burst: 1})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment, controllers.ControllerBackfill))
	queryBacklog(t, m, s, prov, 30)
	from := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	fixture.Annotate(t, env.Client, prov, v1alpha1.AnnotationBackfillFrom, from)
	fixture.Eventually(t, 4*time.Second, "the one-off backfill behind 30 status queries", func() (bool, string) {
		got := fixture.GetProvider(t, env.Client, ns, prov.Name)
		return got.Annotations[v1alpha1.AnnotationBackfillFromDone] == from, fixture.Dump(got.Status.Conditions)
	})
}

// TestRefundReadsItsPaymentBackAheadOfScheduledQueries: once a refund has
// settled, its payment is read back from the provider (its cumulative
// refunded total) ahead of the status queries that drain the bucket.
func TestRefundReadsItsPaymentBackAheadOfScheduledQueries(t *testing.T) {
	// Serial: its bound races a backlog drained at a fixed rate, so it
	// runs alone, before the package's parallel tests load the machine.
	ns := fixture.Namespace(t, env.Client, "prio")
	s, prov := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h"}, QPS: 2, Burst: 1})
	m := refundManager(t, ns)
	paid := fixture.TrackedPayment(t, env.Client, s, prov, "paid", paysim.OutcomeSucceed)
	fixture.WaitPhase(t, env.Client, paid, v1alpha1.PhaseSucceeded, 10*time.Second)
	queryBacklog(t, m, s, prov, 30)
	fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "back", Payment: paid.Name, Amount: 500})
	fixture.Eventually(t, 5*time.Second, "the payment read back after its refund, behind 30 status queries", func() (bool, string) {
		got := fixture.GetPayment(t, env.Client, paid)
		a := got.Status.AmountRefunded
		return got.Status.Phase == v1alpha1.PhasePartiallyRefunded && a != nil && a.Value == 500, fixture.Dump(got.Status)
	})
}

// TestAProbeWhoseMarkerWriteFailedIsHandedBack: the create's token is taken
// before its marker is written; when that token was a half-open circuit's
// one probe and the marker write fails, the probe is handed back, so the
// next attempt probes instead of waiting behind a probe that never went out.
func TestAProbeWhoseMarkerWriteFailedIsHandedBack(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "prio")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h"}, Failures: 1, OpenFor: "300ms"})
	lost := fixture.FailWrites(fixture.Once(fixture.StatusOf(func(p *v1alpha1.Payment) bool {
		return p.Name == "second" && p.Status.CreateRequestedAt != nil
	})), nil)
	o := fixture.Run(controllers.ControllerPayment)
	o.WrapClient = lost.Wrap
	m := fixture.StartManager(t, env, ns, o)

	s.SetFaults(paysim.Faults{ServerErrorRate: 1})
	fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "first", Provider: "kukopay", Outcome: paysim.OutcomePending})
	fixture.Eventually(t, 10*time.Second, "a failed create to open the circuit", func() bool {
		return len(m.Requests.Calls(fixture.IsKind(fixture.CallCreate))) > 0
	})
	s.SetFaults(paysim.Faults{})

	second := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "second", Provider: "kukopay", Outcome: paysim.OutcomePending})
	fixture.Eventually(t, 5*time.Second, "the second payment created after its failed marker write", func() (bool, string) {
		got := fixture.GetPayment(t, env.Client, second)
		return got.Status.ProviderPaymentID != "", fixture.Dump(got.Status)
	})
	if lost.Failed() != 1 {
		t.Fatalf("%d marker writes failed, want 1: the case was not exercised", lost.Failed())
	}
}

// TestExpiryBetweenTheCreateMarkerAndTheCallSendsNothing: the create's marker
// is stored just before spec.expiresAfter passes, and the expiry passes before
// the call: the reconcile that stored the marker knows nothing was sent, so
// the payment ends Expired with nothing sent, not CreateOutcomeUnknown.
func TestExpiryBetweenTheCreateMarkerAndTheCallSendsNothing(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "prio")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h"}})
	var expiry atomic.Pointer[time.Time]
	o := fixture.Run(controllers.ControllerPayment)
	o.WrapClient = fixture.AroundWrites(func(w fixture.Write, do func() error) error {
		err := do()
		if p, ok := w.Object.(*v1alpha1.Payment); ok && w.Status() && p.Status.CreateRequestedAt != nil && p.Status.ProviderPaymentID == "" {
			at := p.CreationTimestamp.Add(p.Spec.ExpiresAfter.Duration)
			expiry.Store(&at)
			time.Sleep(time.Until(at) + 100*time.Millisecond) // the expiry passes between the marker and the call
		}
		return err
	})
	fixture.StartManager(t, env, ns, o)
	// 10s: on a loaded machine the first reconcile can come seconds after
	// the payment is applied, and the expiry must not pass before the case
	// is set up (with 3s, a clean-clone run expired it before its create).
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "late", Provider: "kukopay", Outcome: paysim.OutcomePending, ExpiresAfter: "10s"})
	got := fixture.WaitPayment(t, env.Client, p, "settled", func(p *v1alpha1.Payment) bool {
		return p.Status.Phase.IsFinal() || p.Status.Phase == v1alpha1.PhaseUnknown || p.Status.ProviderPaymentID != ""
	})
	if expiry.Load() == nil {
		t.Fatal("no create marker was stored before the expiry: the case was not exercised")
	}
	if got.Status.Phase != v1alpha1.PhaseExpired || got.Status.CreateRequestedAt != nil {
		t.Fatalf("phase %s (%s), marker %v: want Expired with nothing sent and no marker", got.Status.Phase, reviewOf(got), got.Status.CreateRequestedAt)
	}
	if c := s.Counters(); c.CreateRequests != 0 || c.Searches != 0 {
		t.Fatalf("provider saw %d creates and %d searches, want none", c.CreateRequests, c.Searches)
	}
}

// TestACreateThatWentOutIsNeverDeclaredUnsent: the create went out and its
// answer was lost (the provider made the payment); the expiry passes before
// the reconcile plans again. The create left the process: it is looked up
// and found, never declared "nothing was sent".
func TestACreateThatWentOutIsNeverDeclaredUnsent(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "prio")
	s := fixture.StartSim(t, paysim.Options{})
	s.SetFaults(paysim.Faults{LostResponseRate: 1, Operations: []string{paysim.OpCreate}})
	fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Schedule: []string{"200ms"}})
	var slept atomic.Bool
	o := fixture.Run(controllers.ControllerPayment)
	o.WrapClient = fixture.AroundWrites(func(w fixture.Write, do func() error) error {
		err := do()
		if p, ok := w.Object.(*v1alpha1.Payment); ok && w.Status() && p.Status.CreateRequestedAt != nil && p.Status.ProviderPaymentID == "" &&
			p.Status.Query.LastError != "" && slept.CompareAndSwap(false, true) {
			s.SetFaults(paysim.Faults{})
			time.Sleep(time.Until(p.CreationTimestamp.Add(p.Spec.ExpiresAfter.Duration)) + 100*time.Millisecond)
		}
		return err
	})
	fixture.StartManager(t, env, ns, o)
	// 10s: on a loaded machine the first reconcile can come seconds after
	// the payment is applied, and the expiry must not pass before the case
	// is set up (with 3s, a clean-clone run expired it before its create).
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "lost", Provider: "kukopay", Outcome: paysim.OutcomePending, ExpiresAfter: "10s"})
	got := fixture.WaitPayment(t, env.Client, p, "found or settled", func(p *v1alpha1.Payment) bool {
		return p.Status.Phase.IsFinal() || p.Status.Phase == v1alpha1.PhaseUnknown || p.Status.ProviderPaymentID != ""
	})
	if !slept.Load() {
		t.Fatal("no lost create answer was stored: the case was not exercised")
	}
	if got.Status.ProviderPaymentID == "" || s.Counters().PaymentsCreated != 1 {
		t.Fatalf("phase %s (%s), provider id %q, %d payments at the provider: the create that went out was not looked up",
			got.Status.Phase, reviewOf(got), got.Status.ProviderPaymentID, s.Counters().PaymentsCreated)
	}
}
