package controllers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
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
	for _, typ := range []v1alpha1.ProviderType{v1alpha1.ProviderKukoPay, v1alpha1.ProviderGeneric} {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			// Scaled so KukoPay's 2h42m of retries take 0.5s and the Standard
			// Webhooks' 27h take 5s.
			s := startSim(t, paysim.Options{TimeFactor: 0.00005})
			down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "no healthy upstream", http.StatusServiceUnavailable)
			}))
			t.Cleanup(down.Close)
			if err := s.SetWebhookTarget(string(typ), down.URL); err != nil {
				t.Fatal(err)
			}
			ns := newNamespace(t)
			prov := netsProvider(t, ns, "acct", s, typ, nil)
			n := startNets(t, ns, netsOptions{payments: true, processor: true, backfill: true})

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
				payments[name] = createPayment(t, ns, name, prov.Name, paymentOptions{outcome: outcome[phase], after: "1h"})
			}
			// The backfill is switched on once paywarden has created every
			// payment at the provider.
			eventually(t, 10*time.Second, "every payment to be created at the provider", func() bool {
				for _, p := range payments {
					if get(t, p).Status.ProviderPaymentID == "" {
						return false
					}
				}
				return true
			})
			enable := getProvider(t, ns, prov.Name)
			enable.Spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: dur("200ms")}
			if err := env.Client.Update(context.Background(), enable); err != nil {
				t.Fatal(err)
			}
			for name, phase := range want {
				payments[name] = waitPhase(t, payments[name], phase, 30*time.Second)
			}
			eventually(t, 30*time.Second, "every delivery to exhaust its retries", func() bool {
				w := s.Counters().WebhooksByProvider[string(typ)]
				return w.Events == len(want) && w.Exhausted == len(want)
			})
			// Let the backfill read the same events twice more (the overlap
			// covers them all).
			seen := getProvider(t, ns, prov.Name).Status.Backfill.EventsSeen
			eventually(t, 10*time.Second, "two more backfill runs", func() bool {
				return getProvider(t, ns, prov.Name).Status.Backfill.EventsSeen >= seen+int64(2*len(want))
			})
			n.stop()

			c := s.Counters()
			if w := c.WebhooksByProvider[string(typ)]; w.Delivered != 0 || w.Attempts < len(want)*len(paysim.RetrySchedule(string(typ))) {
				t.Errorf("deliveries: %+v; want every attempt of every event failed", w)
			}
			simEvents := s.Events(string(typ))
			if len(simEvents) != len(want) {
				t.Fatalf("simulator has %d events, want %d", len(simEvents), len(want))
			}
			stored := map[string]v1alpha1.WebhookEvent{}
			for _, e := range webhookEvents(t, ns) {
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
				p := get(t, payments[name])
				id := p.Status.ProviderPaymentID
				if q := c.QueriesByPayment[id]; q != 0 {
					t.Errorf("%s was queried %d times; the backfill alone must settle it", name, q)
				}
				var applied []v1alpha1.HistoryEntry
				for _, ev := range simEvents {
					if ev.PaymentID == id {
						applied = append(applied, eventTransitions(p, ev.ID)...)
					}
				}
				if len(applied) != 1 || applied[0].Source != v1alpha1.SourceBackfill {
					t.Errorf("%s: transitions by its event %s; want exactly one, from Backfill", name, dump(applied))
				}
			}
			st := getProvider(t, ns, prov.Name).Status
			if st.Backfill.Cursor == nil || st.Backfill.EventsSeen < int64(len(want)) {
				t.Errorf("backfill status not advanced: %s", dump(st.Backfill))
			}
			if cond := meta.FindStatusCondition(st.Conditions, controllers.ConditionBackfill); cond == nil || cond.Status != metav1.ConditionTrue {
				t.Errorf("Backfill condition: %s", dump(cond))
			}
		})
	}
}

// TestWebhookAndBackfillCopiesOfOneEventAreOne: whichever copy of an event
// arrives first, the inbox keeps one WebhookEvent and the payment makes one
// transition.
func TestWebhookAndBackfillCopiesOfOneEventAreOne(t *testing.T) {
	for _, tc := range []struct {
		name          string
		webhookFirst  bool
		wantStoredVia v1alpha1.EventVia
	}{
		{name: "webhook copy first, then backfill", webhookFirst: true, wantStoredVia: v1alpha1.ViaWebhook},
		{name: "backfill copy first, then webhook", webhookFirst: false, wantStoredVia: v1alpha1.ViaBackfill},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSim(t, paysim.Options{})
			ns := newNamespace(t)
			prov := netsProvider(t, ns, "acct", s, v1alpha1.ProviderKukoPay, func(spec *v1alpha1.PaymentProviderSpec) {
				spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: dur("1h")}
			})
			n := startNets(t, ns, netsOptions{})
			p := trackedPayment(t, s, prov, "order-1", paysim.OutcomeSucceed)
			n.waitCached(t, p)
			n.waitCached(t, prov)
			rec := simEventFor(t, s, v1alpha1.ProviderKukoPay, p.Spec.ProviderPaymentID)
			ev, err := kukopay.ParseEvent(rec.Raw)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()

			in := &inbox.Inbox{Client: n.mgr.GetClient(), Reader: n.mgr.GetClient(), APIReader: n.mgr.GetAPIReader(), Clock: clock.RealClock{}}
			webhook := func() inbox.Outcome {
				out, err := in.Receive(ctx, prov, ev, v1alpha1.ViaWebhook, provider.SchemeKukoPay, 0)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			backfill := func() {
				if _, err := n.backfill.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(prov)}); err != nil {
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

			events := webhookEvents(t, ns)
			if len(events) != 1 || events[0].Spec.Via != tc.wantStoredVia || events[0].Spec.EventID != ev.ID {
				t.Fatalf("inbox: %s; want one event, via %s", dump(events), tc.wantStoredVia)
			}
			got := waitPhase(t, p, v1alpha1.PhaseSucceeded, 10*time.Second)
			if tr := eventTransitions(got, ev.ID); len(tr) != 1 {
				t.Errorf("transitions by event %s: %s; want exactly one", ev.ID, dump(tr))
			}
			if len(got.Status.History) != 1 {
				t.Errorf("history: %s; want the one transition", dump(got.Status.History))
			}
			if st := getProvider(t, ns, prov.Name).Status.Backfill; st.EventsSeen != 1 || st.Cursor == nil || !st.Cursor.Time.Equal(ev.OccurredAt) {
				t.Errorf("backfill status %s; want the one event seen and the cursor at its time %s", dump(st), ev.OccurredAt)
			}
		})
	}
}

// failingInbox fails the create of one chosen WebhookEvent once, as an API
// server that goes away mid-page would.
type failingInbox struct {
	client.Client
	mu     sync.Mutex
	failOn string
	failed int
}

func (f *failingInbox) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*v1alpha1.WebhookEvent); ok {
		f.mu.Lock()
		fail := f.failOn != "" && obj.GetName() == f.failOn
		if fail {
			f.failOn = ""
			f.failed++
		}
		f.mu.Unlock()
		if fail {
			return apierrors.NewServiceUnavailable("injected: the API server went away mid-page")
		}
	}
	return f.Client.Create(ctx, obj, opts...)
}

func (f *failingInbox) failNext(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failOn = name
}

// simClock is the simulator's clock, moved by the test so every event gets a
// distinct, known time.
type simClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *simClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *simClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestBackfillCursorAdvancesOnlyAfterThePageIsStored: a store that fails in
// the middle of a page leaves the cursor where it was, so the next run reads
// the page again: nothing is missed and nothing is applied twice.
func TestBackfillCursorAdvancesOnlyAfterThePageIsStored(t *testing.T) {
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	sc := &simClock{now: base}
	s := startSim(t, paysim.Options{Now: sc.Now})
	ns := newNamespace(t)
	prov := netsProvider(t, ns, "acct", s, v1alpha1.ProviderKukoPay, func(spec *v1alpha1.PaymentProviderSpec) {
		// Every Reconcile below is a due run; nothing runs in the background.
		spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: dur("1ms")}
	})
	writer := &failingInbox{}
	n := startNets(t, ns, netsOptions{wrap: func(c client.Client) client.Client { writer.Client = c; return writer }})
	n.waitCached(t, prov)
	ctx := context.Background()
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(prov)}

	var payments []*v1alpha1.Payment
	var eventIDs []string
	pay := func(name string) {
		t.Helper()
		p := trackedPayment(t, s, prov, name, paysim.OutcomeSucceed)
		eventIDs = append(eventIDs, simEventFor(t, s, v1alpha1.ProviderKukoPay, p.Spec.ProviderPaymentID).ID)
		payments = append(payments, p)
		n.waitCached(t, p)
		sc.advance(10 * time.Second)
	}
	status := func() v1alpha1.BackfillStatus { return getProvider(t, ns, prov.Name).Status.Backfill }
	eventAt := func(i int) time.Time { return base.Add(time.Duration(i) * 10 * time.Second) }

	// Run 1: two events, stored; the cursor is at the second.
	pay("order-1")
	pay("order-2")
	if _, err := n.backfill.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if c := status().Cursor; c == nil || !c.Time.Equal(eventAt(1)) {
		t.Fatalf("cursor after the first run = %v, want %s", c, eventAt(1))
	}

	// Run 2: three more events on the same page; storing the fourth fails.
	pay("order-3")
	pay("order-4")
	pay("order-5")
	writer.failNext(v1alpha1.WebhookEventName(prov.Name, eventIDs[3]))
	before := status()
	if _, err := n.backfill.Reconcile(ctx, req); err == nil {
		t.Fatal("the run whose store failed reported success")
	}
	if writer.failed != 1 {
		t.Fatalf("the injected failure did not happen (%d)", writer.failed)
	}
	after := getProvider(t, ns, prov.Name)
	if !after.Status.Backfill.Cursor.Equal(before.Cursor) || after.Status.Backfill.EventsSeen != before.EventsSeen {
		t.Errorf("a page that was not fully stored moved the backfill status: %s -> %s", dump(before), dump(after.Status.Backfill))
	}
	if c := meta.FindStatusCondition(after.Status.Conditions, controllers.ConditionBackfill); c == nil || c.Reason != controllers.ReasonBackfillWriteFailed {
		t.Errorf("Backfill condition after the failed run: %s", dump(c))
	}
	if got := len(webhookEvents(t, ns)); got != 3 {
		t.Errorf("%d WebhookEvents after the failed run, want the 3 stored before the failure", got)
	}

	// Run 3 re-reads the page and stores the rest; run 4 finds nothing new.
	listsBefore := s.Counters().EventListCalls
	for run := 3; run <= 4; run++ {
		if _, err := n.backfill.Reconcile(ctx, req); err != nil {
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
	events := webhookEvents(t, ns)
	if len(events) != len(eventIDs) {
		t.Errorf("%d WebhookEvents for %d provider events", len(events), len(eventIDs))
	}
	for _, e := range events {
		if e.Status.Result != v1alpha1.ResultApplied {
			t.Errorf("event %s: %s (%s)", e.Spec.EventID, e.Status.Result, e.Status.Message)
		}
	}
	for i, p := range payments {
		got := waitPhase(t, p, v1alpha1.PhaseSucceeded, 10*time.Second)
		if tr := eventTransitions(got, eventIDs[i]); len(tr) != 1 {
			t.Errorf("%s: transitions by its event: %s; want exactly one", p.Name, dump(tr))
		}
	}
	if c := meta.FindStatusCondition(getProvider(t, ns, prov.Name).Status.Conditions, controllers.ConditionBackfill); c == nil ||
		c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "0 new") {
		t.Errorf("Backfill condition after the idle run: %s", dump(c))
	}
}

// TestBackfillFromAnnotationRunsOnce: backfill-from replays from the given
// time once (even with the periodic backfill off), is recorded as done, and a
// new value replays again; PayPal, without an events API, says so instead.
func TestBackfillFromAnnotationRunsOnce(t *testing.T) {
	base := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	sc := &simClock{now: base}
	s := startSim(t, paysim.Options{Now: sc.Now})
	ns := newNamespace(t)
	prov := netsProvider(t, ns, "acct", s, v1alpha1.ProviderKukoPay, nil)
	paypalProv := netsProvider(t, ns, "pp", s, v1alpha1.ProviderPayPal, func(spec *v1alpha1.PaymentProviderSpec) {
		spec.Webhook.PayPalWebhookID = paysim.DefaultPayPalWebhookID
	})
	n := startNets(t, ns, netsOptions{backfill: true})

	old := trackedPayment(t, s, prov, "before-outage", paysim.OutcomeSucceed)
	simEventFor(t, s, v1alpha1.ProviderKukoPay, old.Spec.ProviderPaymentID)
	sc.advance(time.Hour)
	outageStart := sc.Now()
	lost := trackedPayment(t, s, prov, "during-outage", paysim.OutcomeSucceed)
	simEventFor(t, s, v1alpha1.ProviderKukoPay, lost.Spec.ProviderPaymentID)
	n.waitCached(t, lost)

	annotate := func(name, value string) {
		t.Helper()
		p := getProvider(t, ns, name)
		patch := client.MergeFrom(p.DeepCopy())
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[controllers.AnnotationBackfillFrom] = value
		if err := env.Client.Patch(context.Background(), p, patch); err != nil {
			t.Fatal(err)
		}
	}
	done := func(name string) string {
		return getProvider(t, ns, name).Annotations[controllers.AnnotationBackfillFromDone]
	}

	annotate(prov.Name, outageStart.UTC().Format(time.RFC3339))
	eventually(t, 10*time.Second, "the one-off backfill to be marked done", func() bool {
		return done(prov.Name) == outageStart.UTC().Format(time.RFC3339)
	})
	waitPhase(t, lost, v1alpha1.PhaseSucceeded, 10*time.Second)
	if p := get(t, old); p.Status.Phase != "" {
		t.Errorf("the event from before backfill-from was replayed: %s", p.Status.Phase)
	}
	if st := getProvider(t, ns, prov.Name).Status.Backfill; st.Cursor != nil || st.LastRunTime != nil {
		t.Errorf("a one-off with the periodic backfill off moved its position: %s", dump(st))
	}
	if len(n.events.about(prov.Name, "BackfillCompleted")) != 1 {
		t.Errorf("want one BackfillCompleted event, got %+v", n.events.all())
	}
	lists := s.Counters().EventListCalls

	// A new value replays again, from further back.
	annotate(prov.Name, base.UTC().Format(time.RFC3339))
	eventually(t, 10*time.Second, "the second one-off backfill", func() bool { return done(prov.Name) == base.UTC().Format(time.RFC3339) })
	waitPhase(t, old, v1alpha1.PhaseSucceeded, 10*time.Second)
	if got := s.Counters().EventListCalls - lists; got != 1 {
		t.Errorf("%d event-list calls for one one-off run", got)
	}
	if len(n.events.about(prov.Name, "BackfillCompleted")) != 2 {
		t.Errorf("want two BackfillCompleted events, got %+v", n.events.all())
	}

	annotate(paypalProv.Name, base.UTC().Format(time.RFC3339))
	eventually(t, 10*time.Second, "the PayPal request to be answered", func() bool { return done(paypalProv.Name) != "" })
	c := meta.FindStatusCondition(getProvider(t, ns, paypalProv.Name).Status.Conditions, controllers.ConditionBackfill)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controllers.ReasonBackfillUnsupported {
		t.Errorf("PayPal Backfill condition: %s", dump(c))
	}
}
