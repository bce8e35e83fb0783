package controllers_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// TestBackfillReadsEveryPageAfterALaterPageFails: 250 events span three
// pages and far more than the overlap; a run's second page is answered 429.
// The next run must read every event of the window. Stripe lists events newest
// first (Stripe API reference, Events, "List all events"), so its first page
// holds the newest events: a cursor moved after page 1 lost the 150 older ones
// (issue 22 point 2). There the next run resumes where the failed one stopped
// instead of reading page 1 again. PayPal's list is taken as newest first too
// (issue 22 point 8: its order is not documented; see paypal.ListEvents).
// KukoPay and the generic API list oldest first: their cursor may follow each
// stored page.
func TestBackfillReadsEveryPageAfterALaterPageFails(t *testing.T) {
	t.Parallel()
	const total = 250
	for _, typ := range []v1alpha1.ProviderType{v1alpha1.ProviderStripe, v1alpha1.ProviderPayPal, v1alpha1.ProviderKukoPay, v1alpha1.ProviderGeneric} {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			caps, _ := providers.Lookup(string(typ))
			newestFirst := caps.EventsNewestFirst
			// The run's second page (the one asked for with a page cursor) is
			// answered 429, once.
			s, m, prov := backfillOf(t, typ, total, func(s *fixture.Sim) *fixture.Sim {
				return s.FaultOnce(t, paysim.Faults{TooManyRequestsRate: 1, Operations: []string{paysim.OpEvents}}, func(r *http.Request) bool {
					q := r.URL.Query()
					return strings.HasSuffix(r.URL.Path, "events") && (q.Get("starting_after") != "" || q.Get("cursor") != "" || q.Get("move_to") != "")
				})
			})
			ns, simEvents := prov.Namespace, s.Events(string(typ))
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(prov)}
			condition := func() *metav1.Condition {
				return meta.FindStatusCondition(fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Conditions, v1alpha1.ConditionBackfill)
			}

			// Run 1: page 1 is stored, page 2 is refused.
			if _, err := m.Backfill.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if c := condition(); c == nil || c.Reason != v1alpha1.ReasonBackfillListFailed {
				t.Fatalf("Backfill condition after the failed page: %s", fixture.Dump(c))
			}
			if got := len(fixture.WebhookEvents(t, env.Client, ns)); got != 100 {
				t.Fatalf("%d WebhookEvents after the first run, want the first page's 100", got)
			}
			if st := fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Backfill; newestFirst && st.Cursor != nil {
				t.Errorf("the cursor moved although the run did not read every page: %s", fixture.Dump(st))
			}

			// Run 2 reads the rest.
			lists := s.Counters().EventListCalls
			if _, err := m.Backfill.Reconcile(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if c := condition(); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("Backfill condition after the second run: %s", fixture.Dump(c))
			}
			stored := map[string]v1alpha1.WebhookEvent{}
			for _, e := range fixture.WebhookEvents(t, env.Client, ns) {
				stored[e.Spec.EventID] = e
			}
			missing := 0
			for _, ev := range simEvents {
				e, ok := stored[ev.ID]
				switch {
				case !ok:
					missing++
				case e.Spec.Via != v1alpha1.ViaBackfill:
					t.Errorf("event %s stored via %s, want Backfill", ev.ID, e.Spec.Via)
				}
			}
			if missing > 0 {
				t.Fatalf("%d of %d events never read by the backfill", missing, total)
			}
			st := fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Backfill
			if newest := simEvents[total-1].Created; st.Cursor == nil || !st.Cursor.Time.Equal(newest) || st.Progress != nil {
				t.Errorf("after the complete run: %s; want the cursor at the newest event's time %s and no progress", fixture.Dump(st), newest)
			}
			if !newestFirst {
				return
			}
			if calls := s.Counters().EventListCalls - lists; calls != 2 {
				t.Errorf("the second run made %d event-list calls; want 2 (pages 2 and 3: page 1 is not read again)", calls)
			}
			if st.EventsSeen != total {
				t.Errorf("eventsSeen = %d, want %d (each event read once)", st.EventsSeen, total)
			}
		})
	}
}

// backfillOf starts a provider of type typ at paysim with total payments
// made and settled there, one event each, 10s apart (250 of them span
// 2490s, eight times the 5-minute overlap), reached through front(sim), and
// a manager whose backfill runs only when a test calls its Reconcile.
func backfillOf(t *testing.T, typ v1alpha1.ProviderType, total int, front func(*fixture.Sim) *fixture.Sim) (*fixture.Sim, *fixture.Manager, *v1alpha1.PaymentProvider) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now().Add(-time.Hour).Truncate(time.Second))
	s := fixture.StartSim(t, paysim.Options{Now: clk.Now})
	creds := fixture.TestCredentials()
	creds[stripe.CredentialSecretKey] = "sk_test_paysim"
	create := paymentEvents(t, s, typ, creds)
	for i := range total {
		create("order-" + strconv.Itoa(i))
		clk.Step(10 * time.Second)
	}
	if got := len(s.Events(string(typ))); got != total {
		t.Fatalf("%d events at the provider, want %d", got, total)
	}
	ns := fixture.Namespace(t, env.Client, "backfill")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "acct", Type: typ, Sim: front(s), Credentials: creds, Quiet: true,
		Spec: func(spec *v1alpha1.PaymentProviderSpec) {
			// Every Reconcile is a due run; nothing runs in the background.
			spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: fixture.Duration("1ms")}
			spec.Webhook.PayPalWebhookID = paysim.DefaultPayPalWebhookID
		}})
	m := fixture.StartManager(t, env, ns, fixture.Run())
	fixture.WaitCached(t, m.Client(), prov)
	return s, m, prov
}

// paymentEvents returns a function that makes one payment at the provider
// through its adapter, settled at once, and waits for its one event.
func paymentEvents(t *testing.T, s *fixture.Sim, typ v1alpha1.ProviderType, creds map[string]string) func(ref string) {
	t.Helper()
	raw := map[string][]byte{}
	for k, v := range creds {
		raw[k] = []byte(v)
	}
	a, err := providers.New(string(typ), provider.Config{Name: "test/" + string(typ), APIURL: s.APIURL(typ), Timeout: 5 * time.Second, Credentials: raw})
	if err != nil {
		t.Fatal(err)
	}
	return func(ref string) {
		t.Helper()
		req := provider.CreateRequest{
			IdempotencyKey: "key-" + ref, MerchantReference: ref, Amount: 1000, Currency: "EUR",
			Metadata: map[string]string{paysim.MetaOutcome: string(paysim.OutcomeSucceed), paysim.MetaAfter: "0s"},
		}
		if typ == v1alpha1.ProviderStripe {
			req.StoredMethod = &provider.StoredMethod{Customer: "cus_1", PaymentMethod: "pm_card_visa"}
		}
		p, err := a.Create(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		fixture.SimEvent(t, s, typ, p.ID)
	}
}
