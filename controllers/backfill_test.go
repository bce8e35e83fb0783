package controllers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// TestBackfillAloneSettlesPaymentsWhenEveryWebhookIsLost: the receiver is down
// for a whole retry cycle of the provider (every delivery fails) and status
// queries are out of the picture (one 1h step): the events-API backfill alone
// brings every payment to its final phase, and applies each event once.
func TestBackfillAloneSettlesPaymentsWhenEveryWebhookIsLost(t *testing.T) {
	t.Parallel()
	for _, typ := range []v1alpha1.ProviderType{v1alpha1.ProviderKukoPay, v1alpha1.ProviderGeneric} {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			// Scaled so KukoPay's 2h42m of retries take 0.5s and the Standard
			// Webhooks' 27h take 5s.
			s := fixture.StartSim(t, paysim.Options{TimeFactor: 0.00005})
			down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
			}))
			t.Cleanup(down.Close)
			if err := s.SetWebhookTarget(string(typ), down.URL); err != nil {
				t.Fatal(err)
			}
			ns := fixture.Namespace(t, env.Client, "pay")
			prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "acct", Sim: s, Type: typ, Quiet: true})
			o := fixture.Run(controllers.ControllerPayment, controllers.ControllerInbox, controllers.ControllerBackfill)
			o.PendingGrace = 200 * time.Millisecond
			m := fixture.StartManager(t, env, ns, o)

			// Outcomes land 1h (simulated) after the create, so the create's
			// answer is still "not paid" and only an event can settle them.
			want := map[string]v1alpha1.PaymentPhase{
				"order-1": v1alpha1.PhaseSucceeded, "order-2": v1alpha1.PhaseSucceeded,
				"order-3": v1alpha1.PhaseFailed, "order-4": v1alpha1.PhaseExpired,
			}
			outcome := map[v1alpha1.PaymentPhase]paysim.Outcome{
				v1alpha1.PhaseSucceeded: paysim.OutcomeSucceed, v1alpha1.PhaseFailed: paysim.OutcomeFail, v1alpha1.PhaseExpired: paysim.OutcomeExpire,
			}
			payments := map[string]*v1alpha1.Payment{}
			for name, phase := range want {
				payments[name] = fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: name, Provider: prov.Name, Outcome: outcome[phase], After: "1h"})
			}
			// The backfill is switched on once paywarden has created every
			// payment at the provider.
			fixture.Eventually(t, 10*time.Second, "every payment to be created at the provider", func() bool {
				for _, p := range payments {
					if fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID == "" {
						return false
					}
				}
				return true
			})
			enable := fixture.GetProvider(t, env.Client, ns, prov.Name)
			enable.Spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: fixture.Duration("200ms")}
			if err := env.Client.Update(context.Background(), enable); err != nil {
				t.Fatal(err)
			}
			for name, phase := range want {
				payments[name] = fixture.WaitPhase(t, env.Client, payments[name], phase, 30*time.Second)
			}
			fixture.Eventually(t, 30*time.Second, "every delivery to exhaust its retries", func() bool {
				w := s.Counters().WebhooksByProvider[string(typ)]
				return w.Events == len(want) && w.Exhausted == len(want)
			})
			// Let the backfill read the same events twice more (the overlap
			// covers them all).
			seen := fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Backfill.EventsSeen
			fixture.Eventually(t, 10*time.Second, "two more backfill runs", func() bool {
				return fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Backfill.EventsSeen >= seen+int64(2*len(want))
			})
			m.Stop()

			c := s.Counters()
			if w := c.WebhooksByProvider[string(typ)]; w.Delivered != 0 || w.Attempts < len(want)*len(paysim.RetrySchedule(string(typ))) {
				t.Errorf("deliveries: %+v; want every attempt of every event failed", w)
			}
			simEvents := s.Events(string(typ))
			if len(simEvents) != len(want) {
				t.Fatalf("simulator has %d events, want %d", len(simEvents), len(want))
			}
			stored := map[string]v1alpha1.WebhookEvent{}
			for _, e := range fixture.WebhookEvents(t, env.Client, ns) {
				stored[e.Name] = e
			}
			if len(stored) != len(simEvents) {
				t.Errorf("%d WebhookEvents for %d provider events", len(stored), len(simEvents))
			}
			for _, ev := range simEvents {
				e, ok := stored[v1alpha1.WebhookEventName(prov.Name, ev.ID)]
				switch {
				case !ok:
					t.Errorf("event %s not in the inbox", ev.ID)
				case e.Spec.Via != v1alpha1.ViaBackfill || e.Status.Result != v1alpha1.ResultApplied:
					t.Errorf("event %s: via %s, result %s (%s); want Backfill, Applied", ev.ID, e.Spec.Via, e.Status.Result, e.Status.Message)
				}
			}
			for name := range want {
				p := fixture.GetPayment(t, env.Client, payments[name])
				id := p.Status.ProviderPaymentID
				if q := c.QueriesByPayment[id]; q != 0 {
					t.Errorf("%s was queried %d times; the backfill alone must settle it", name, q)
				}
				var applied []v1alpha1.HistoryEntry
				for _, ev := range simEvents {
					if ev.PaymentID == id {
						applied = append(applied, fixture.HistoryOf(p, ev.ID)...)
					}
				}
				if len(applied) != 1 || applied[0].Source != v1alpha1.SourceBackfill {
					t.Errorf("%s: transitions by its event %s; want exactly one, from Backfill", name, fixture.Dump(applied))
				}
			}
			st := fixture.GetProvider(t, env.Client, ns, prov.Name).Status
			if st.Backfill.Cursor == nil || st.Backfill.EventsSeen < int64(len(want)) {
				t.Errorf("backfill status not advanced: %s", fixture.Dump(st.Backfill))
			}
			if cond := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionBackfill); cond == nil || cond.Status != metav1.ConditionTrue {
				t.Errorf("Backfill condition: %s", fixture.Dump(cond))
			}
		})
	}
}

// TestWebhookAndBackfillCopiesOfOneEventAreOne: whichever copy of an event
// arrives first, the inbox keeps one WebhookEvent and the payment makes one
// transition.
func TestWebhookAndBackfillCopiesOfOneEventAreOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		webhookFirst  bool
		wantStoredVia v1alpha1.EventVia
	}{
		{name: "webhook copy first, then backfill", webhookFirst: true, wantStoredVia: v1alpha1.ViaWebhook},
		{name: "backfill copy first, then webhook", webhookFirst: false, wantStoredVia: v1alpha1.ViaBackfill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := fixture.StartSim(t, paysim.Options{})
			ns := fixture.Namespace(t, env.Client, "pay")
			prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "acct", Sim: s, Quiet: true, Spec: func(spec *v1alpha1.PaymentProviderSpec) {
				spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: fixture.Duration("1h")}
			}})
			m := fixture.StartManager(t, env, ns, fixture.Run())
			p := fixture.TrackedPayment(t, env.Client, s, prov, "order-1", paysim.OutcomeSucceed)
			fixture.WaitCached(t, m.Client(), p)
			fixture.WaitCached(t, m.Client(), prov)
			rec := fixture.SimEvent(t, s, v1alpha1.ProviderKukoPay, p.Spec.ProviderPaymentID)
			ev, err := kukopay.ParseEvent(rec.Raw)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()

			in := &inbox.Inbox{Client: m.Client(), Reader: m.Client(), APIReader: m.Manager.GetAPIReader(), Clock: clock.RealClock{}}
			webhook := func() inbox.Outcome {
				out, err := in.Receive(ctx, prov, ev, v1alpha1.ViaWebhook, provider.SchemeKukoPay, 0)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			backfill := func() {
				if _, err := m.Backfill.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(prov)}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.webhookFirst {
				if out := webhook(); !out.Stored || out.Result != v1alpha1.ResultApplied {
					t.Fatalf("webhook copy: %+v", out)
				}
				backfill()
			} else {
				backfill()
				if out := webhook(); out.Stored || out.Result != v1alpha1.ResultDuplicate {
					t.Errorf("webhook copy after the backfill copy: stored=%v result=%s, want a duplicate", out.Stored, out.Result)
				}
			}

			events := fixture.WebhookEvents(t, env.Client, ns)
			if len(events) != 1 || events[0].Spec.Via != tc.wantStoredVia || events[0].Spec.EventID != ev.ID {
				t.Fatalf("inbox: %s; want one event, via %s", fixture.Dump(events), tc.wantStoredVia)
			}
			got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 10*time.Second)
			if tr := fixture.HistoryOf(got, ev.ID); len(tr) != 1 {
				t.Errorf("transitions by event %s: %s; want exactly one", ev.ID, fixture.Dump(tr))
			}
			if len(got.Status.History) != 1 {
				t.Errorf("history: %s; want the one transition", fixture.Dump(got.Status.History))
			}
			if st := fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Backfill; st.EventsSeen != 1 || st.Cursor == nil || !st.Cursor.Time.Equal(ev.OccurredAt) {
				t.Errorf("backfill status %s; want the one event seen and the cursor at its time %s", fixture.Dump(st), ev.OccurredAt)
			}
		})
	}
}

// TestBackfillCursorAdvancesOnlyAfterThePageIsStored: a store that fails in
// the middle of a page leaves the cursor where it was, so the next run reads
// the page again: nothing is missed and nothing is applied twice.
func TestBackfillCursorAdvancesOnlyAfterThePageIsStored(t *testing.T) {
	t.Parallel()
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	// The simulator's clock, moved by the test so every event gets a
	// distinct, known time.
	clk := clocktesting.NewFakeClock(base)
	s := fixture.StartSim(t, paysim.Options{Now: clk.Now})
	ns := fixture.Namespace(t, env.Client, "pay")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "acct", Sim: s, Quiet: true, Spec: func(spec *v1alpha1.PaymentProviderSpec) {
		// Every Reconcile below is a due run; nothing runs in the background.
		spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: fixture.Duration("1ms")}
	}})
	// The store of one chosen WebhookEvent fails once, as with an API server
	// that goes away mid-page.
	var failOn atomic.Pointer[string]
	faults := fixture.FailWrites(fixture.Once(func(w fixture.Write) bool {
		name := failOn.Load()
		_, ok := w.Object.(*v1alpha1.WebhookEvent)
		return ok && w.Verb == "create" && name != nil && w.Object.GetName() == *name
	}), apierrors.NewServiceUnavailable("injected: the API server went away mid-page"))
	o := fixture.Run()
	o.WrapClient = faults.Wrap
	m := fixture.StartManager(t, env, ns, o)
	fixture.WaitCached(t, m.Client(), prov)
	ctx := context.Background()
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(prov)}

	var payments []*v1alpha1.Payment
	var eventIDs []string
	pay := func(name string) {
		t.Helper()
		p := fixture.TrackedPayment(t, env.Client, s, prov, name, paysim.OutcomeSucceed)
		eventIDs = append(eventIDs, fixture.SimEvent(t, s, v1alpha1.ProviderKukoPay, p.Spec.ProviderPaymentID).ID)
		payments = append(payments, p)
		fixture.WaitCached(t, m.Client(), p)
		clk.Step(10 * time.Second)
	}
	status := func() v1alpha1.BackfillStatus {
		return fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Backfill
	}
	eventAt := func(i int) time.Time { return base.Add(time.Duration(i) * 10 * time.Second) }

	// Run 1: two events, stored; the cursor is at the second.
	pay("order-1")
	pay("order-2")
	if _, err := m.Backfill.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if c := status().Cursor; c == nil || !c.Time.Equal(eventAt(1)) {
		t.Fatalf("cursor after the first run = %v, want %s", c, eventAt(1))
	}

	// Run 2: three more events on the same page; storing the fourth fails.
	pay("order-3")
	pay("order-4")
	pay("order-5")
	failOn.Store(ptr.To(v1alpha1.WebhookEventName(prov.Name, eventIDs[3])))
	before := status()
	if _, err := m.Backfill.Reconcile(ctx, req); err == nil {
		t.Fatal("the run whose store failed reported success")
	}
	if faults.Failed() != 1 {
		t.Fatalf("the injected failure did not happen (%d)", faults.Failed())
	}
	after := fixture.GetProvider(t, env.Client, ns, prov.Name)
	if !after.Status.Backfill.Cursor.Equal(before.Cursor) || after.Status.Backfill.EventsSeen != before.EventsSeen {
		t.Errorf("a page that was not fully stored moved the backfill status: %s -> %s", fixture.Dump(before), fixture.Dump(after.Status.Backfill))
	}
	if c := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.ConditionBackfill); c == nil || c.Reason != v1alpha1.ReasonBackfillWriteFailed {
		t.Errorf("Backfill condition after the failed run: %s", fixture.Dump(c))
	}
	if got := len(fixture.WebhookEvents(t, env.Client, ns)); got != 3 {
		t.Errorf("%d WebhookEvents after the failed run, want the 3 stored before the failure", got)
	}

	// Run 3 re-reads the page and stores the rest; run 4 finds nothing new.
	listsBefore := s.Counters().EventListCalls
	for run := 3; run <= 4; run++ {
		if _, err := m.Backfill.Reconcile(ctx, req); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	if calls := s.Counters().EventListCalls - listsBefore; calls != 2 {
		t.Errorf("%d event-list calls for two runs of one page each", calls)
	}
	st := status()
	if st.Cursor == nil || !st.Cursor.Time.Equal(eventAt(4)) {
		t.Errorf("cursor = %v, want the last event's time %s", st.Cursor, eventAt(4))
	}
	// run 1 read 2 events, run 3 and 4 read all 5 (the overlap covers them).
	if st.EventsSeen != 12 {
		t.Errorf("eventsSeen = %d, want 2+5+5", st.EventsSeen)
	}
	events := fixture.WebhookEvents(t, env.Client, ns)
	if len(events) != len(eventIDs) {
		t.Errorf("%d WebhookEvents for %d provider events", len(events), len(eventIDs))
	}
	for _, e := range events {
		if e.Status.Result != v1alpha1.ResultApplied {
			t.Errorf("event %s: %s (%s)", e.Spec.EventID, e.Status.Result, e.Status.Message)
		}
	}
	for i, p := range payments {
		got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 10*time.Second)
		if tr := fixture.HistoryOf(got, eventIDs[i]); len(tr) != 1 {
			t.Errorf("%s: transitions by its event: %s; want exactly one", p.Name, fixture.Dump(tr))
		}
	}
	if c := meta.FindStatusCondition(fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Conditions, v1alpha1.ConditionBackfill); c == nil ||
		c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "0 new") {
		t.Errorf("Backfill condition after the idle run: %s", fixture.Dump(c))
	}
}

// TestBackfillFromAnnotationRunsOnce: backfill-from replays from the given
// time once (even with the periodic backfill off), is recorded as done, and a
// new value replays again. PayPal's events list (issue 22 point 8) is read
// the same way.
func TestBackfillFromAnnotationRunsOnce(t *testing.T) {
	t.Parallel()
	base := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	clk := clocktesting.NewFakeClock(base)
	s := fixture.StartSim(t, paysim.Options{Now: clk.Now})
	ns := fixture.Namespace(t, env.Client, "pay")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "acct", Sim: s, Quiet: true})
	paypalProv := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "pp", Sim: s, Type: v1alpha1.ProviderPayPal, Quiet: true, Spec: func(spec *v1alpha1.PaymentProviderSpec) {
		spec.Webhook.PayPalWebhookID = paysim.DefaultPayPalWebhookID
	}})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerBackfill))

	old := fixture.TrackedPayment(t, env.Client, s, prov, "before-outage", paysim.OutcomeSucceed)
	fixture.SimEvent(t, s, v1alpha1.ProviderKukoPay, old.Spec.ProviderPaymentID)
	clk.Step(time.Hour)
	outageStart := clk.Now()
	lost := fixture.TrackedPayment(t, env.Client, s, prov, "during-outage", paysim.OutcomeSucceed)
	fixture.SimEvent(t, s, v1alpha1.ProviderKukoPay, lost.Spec.ProviderPaymentID)
	fixture.WaitCached(t, m.Client(), lost)

	done := func(name string) string {
		return fixture.GetProvider(t, env.Client, ns, name).Annotations[v1alpha1.AnnotationBackfillFromDone]
	}

	fixture.Annotate(t, env.Client, prov, v1alpha1.AnnotationBackfillFrom, outageStart.UTC().Format(time.RFC3339))
	fixture.Eventually(t, 10*time.Second, "the one-off backfill to be marked done", func() bool {
		return done(prov.Name) == outageStart.UTC().Format(time.RFC3339)
	})
	fixture.WaitPhase(t, env.Client, lost, v1alpha1.PhaseSucceeded, 10*time.Second)
	if p := fixture.GetPayment(t, env.Client, old); p.Status.Phase != "" {
		t.Errorf("the event from before backfill-from was replayed: %s", p.Status.Phase)
	}
	if st := fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Backfill; st.Cursor != nil || st.LastRunTime != nil {
		t.Errorf("a one-off with the periodic backfill off moved its position: %s", fixture.Dump(st))
	}
	if len(m.Events.About(prov.Name, "BackfillCompleted")) != 1 {
		t.Errorf("want one BackfillCompleted event, got %+v", m.Events.All())
	}
	lists := s.Counters().EventListCalls

	// A new value replays again, from further back.
	fixture.Annotate(t, env.Client, prov, v1alpha1.AnnotationBackfillFrom, base.UTC().Format(time.RFC3339))
	fixture.Eventually(t, 10*time.Second, "the second one-off backfill", func() bool { return done(prov.Name) == base.UTC().Format(time.RFC3339) })
	fixture.WaitPhase(t, env.Client, old, v1alpha1.PhaseSucceeded, 10*time.Second)
	if got := s.Counters().EventListCalls - lists; got != 1 {
		t.Errorf("%d event-list calls for one one-off run", got)
	}
	if len(m.Events.About(prov.Name, "BackfillCompleted")) != 2 {
		t.Errorf("want two BackfillCompleted events, got %+v", m.Events.All())
	}

	fixture.Annotate(t, env.Client, paypalProv, v1alpha1.AnnotationBackfillFrom, base.UTC().Format(time.RFC3339))
	fixture.Eventually(t, 10*time.Second, "the PayPal request to be answered", func() bool { return done(paypalProv.Name) != "" })
	c := meta.FindStatusCondition(fixture.GetProvider(t, env.Client, ns, paypalProv.Name).Status.Conditions, v1alpha1.ConditionBackfill)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonBackfillSynced || len(m.Events.About(paypalProv.Name, "BackfillCompleted")) != 1 {
		t.Errorf("PayPal Backfill condition: %s; Events %+v", fixture.Dump(c), m.Events.All())
	}
}
