package controllers_test

// What closed payments cost the API server: the reads of payments the
// manager's cache no longer holds, counted on the manager's own transport.

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paymentcache"
	"github.com/paywarden/paywarden/internal/paysim"
)

// apiCount counts the manager's API requests (not watches) by verb and
// resource while on.
type apiCount struct {
	rt     http.RoundTripper
	on     *atomic.Bool
	mu     *sync.Mutex
	counts map[string]int
	log    *[]string
}

func (c apiCount) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.on.Load() && r.URL.Query().Get("watch") != "true" {
		verb := r.Method
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		// /apis/g/v/namespaces/ns/res[/name[/sub]] or /api/v1/...
		res := "?"
		for i, p := range parts {
			if p == "namespaces" && i+2 < len(parts) {
				res = parts[i+2]
				if i+4 < len(parts) {
					res += "/" + parts[i+4]
				}
				if verb == http.MethodGet && i+3 >= len(parts) {
					verb = "LIST"
				}
				break
			}
		}
		if res == "?" && len(parts) > 0 {
			res = parts[len(parts)-1]
			if verb == http.MethodGet {
				verb = "LIST"
			}
		}
		c.mu.Lock()
		c.counts[verb+" "+res]++
		*c.log = append(*c.log, verb+" "+r.URL.Path)
		c.mu.Unlock()
	}
	return c.rt.RoundTrip(r)
}

func countingConfig() (*rest.Config, *atomic.Bool, func() (map[string]int, []string)) {
	var on atomic.Bool
	var mu sync.Mutex
	counts := map[string]int{}
	var log []string
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return apiCount{rt: rt, on: &on, mu: &mu, counts: counts, log: &log}
	}
	return cfg, &on, func() (map[string]int, []string) {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range counts {
			out[k] = v
		}
		return out, append([]string(nil), log...)
	}
}

func dumpCounts(t *testing.T, what string, m map[string]int) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-40s %d\n", k, m[k])
	}
	t.Logf("%s:\n%s", what, b.String())
}

// One payment's happy path, create → Succeeded, with the manager's
// controllers (no backfill, no bundles): the API requests it costs.
func TestAPICostOfClosingPayments(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "cost")
	_, _ = kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	cfg, on, read := countingConfig()
	o := fixture.Run(controllers.ControllerSweep, controllers.ControllerPayment, controllers.ControllerInbox,
		controllers.ControllerProvider, controllers.ControllerRetention, controllers.ControllerRefund)
	o.Config = cfg
	_ = fixture.StartManager(t, env, ns, o)
	time.Sleep(3 * time.Second) // every cache synced, the provider reconciled
	on.Store(true)
	n := 10
	if s := os.Getenv("COST_N"); s != "" {
		fmt.Sscan(s, &n)
	}
	var ps []*v1alpha1.Payment
	for i := 0; i < n; i++ {
		ps = append(ps, fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: fmt.Sprintf("order-%d", i), Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "1s"}))
	}
	for _, p := range ps {
		fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 30*time.Second)
	}
	time.Sleep(3 * time.Second)
	on.Store(false)
	counts, log := read()
	dumpCounts(t, fmt.Sprintf("API requests for %d payment(s) create → Succeeded", n), counts)
	// One read per closing (the manager's cache reports it as the
	// deletion of the open copy), and the re-reads of write conflicts.
	if g := counts["GET payments"]; g > 2*n {
		t.Errorf("%d payments closed, %d GETs of payments: more than one per closing and the re-reads of conflicts", n, g)
	}
	if os.Getenv("COST_LOG") != "" {
		t.Logf("%s", strings.Join(log, "\n"))
	}
}

// K settled payments, each refunded twice (Refunds settled and counted). A
// manager restart with nothing to do: the API requests it costs beyond its
// caches' lists.
func TestAPICostOfARestartWithSettledRefunds(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "costrf")
	s := fixture.StartSim(t, paysim.Options{})
	prov := fixture.CreateProvider(t, env.Client, refundProvider(ns, v1alpha1.ProviderKukoPay, s))
	cfg, on, read := countingConfig()
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund, controllers.ControllerRetention, controllers.ControllerInbox)
	o.Config = cfg
	m := fixture.StartManager(t, env, ns, o)
	const k = 5
	var ps []*v1alpha1.Payment
	for i := 0; i < k; i++ {
		p := paidPayment(t, ns, prov.Name, fmt.Sprintf("order-%d", i), 1999)
		ps = append(ps, p)
		for j := range 2 {
			fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: fmt.Sprintf("rf-%d-%d", i, j), Payment: p.Name, Amount: 500})
		}
	}
	for _, p := range ps {
		got := waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 1000)
		if len(got.Status.Refunds) != 2 {
			t.Errorf("%s lists %d refunds, want 2", p.Name, len(got.Status.Refunds))
		}
	}
	time.Sleep(3 * time.Second)
	for _, p := range ps {
		if _, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID); total != 1000 {
			t.Errorf("%s: provider refunded %d, want 1000", p.Name, total)
		}
	}
	on.Store(true)
	m = m.Restart(t)
	time.Sleep(5 * time.Second)
	on.Store(false)
	counts, log := read()
	dumpCounts(t, fmt.Sprintf("API requests of a restart with %d settled refunds of %d settled payments", 2*k, k), counts)
	if os.Getenv("COST_LOG") != "" {
		t.Logf("%s", strings.Join(log, "\n"))
	}
	// The payment controller recounts the settled Refunds of each closed
	// payment at start, reading it once (docs/operations.md); the refund
	// controller reads none for a Refund at rest (payment.RefundAtRest),
	// nor does retention (its scan at start judges the thin copies).
	if n := counts["GET payments"]; n > k {
		t.Errorf("a restart with nothing to do read %d payments one by one from the API server (%d closed payments, %d settled Refunds): more than one per payment", n, k, 2*k)
	}
}

// A settled payment's event delivered (or listed by the backfill) again
// and again: each copy is a duplicate, answered by the inbox's create.
func TestAPICostOfDuplicateEventsOfAClosedPayment(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "costdup")
	s, prov := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	cfg, on, read := countingConfig()
	o := fixture.Run(controllers.ControllerPayment)
	o.Config = cfg
	m := fixture.StartManager(t, env, ns, o)
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order", Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "1s"})
	p = fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 30*time.Second)
	rec := fixture.SimEvent(t, s, v1alpha1.ProviderKukoPay, p.Status.ProviderPaymentID)
	fixture.ApplyWebhook(t, m, prov, rec) // the first copy
	time.Sleep(3 * time.Second)
	on.Store(true)
	const dups = 5
	for i := 0; i < dups; i++ {
		if out := fixture.ApplyWebhook(t, m, prov, rec); out.Result != v1alpha1.ResultDuplicate {
			t.Fatalf("copy %d: %s", i, out.Result)
		}
	}
	on.Store(false)
	counts, _ := read()
	dumpCounts(t, fmt.Sprintf("API requests of %d duplicate copies of a settled payment's event", dups), counts)
	// The inbox names the payment before its create finds the duplicate:
	// a closed payment is read for it (docs/operations.md).
	if n := counts["GET payments"]; n > dups {
		t.Errorf("%d duplicates of an event already in the inbox read its payment %d times from the API server: more than once each", dups, n)
	}
}

// thinWithSync is paymentcache.New's cache with SyncPeriod sync instead of
// controller-runtime's default (10 h): the informer's periodic resync, which
// re-delivers every Payment as an Update with the same object.
func thinWithSync(t *testing.T, mgr ctrl.Manager, ns string, sync time.Duration) *paymentcache.Cache {
	c, err := paymentcache.New(mgr, paymentcache.Options{Namespaces: []string{ns}, Indexes: controllers.PaymentLookups(), SyncPeriod: &sync})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Closed payments that nothing touches: the thin informer's resync (every
// ~10 h by default) hands every one of them again, the same version; that
// is no change (closedChange), and nothing reads them from the API server.
func TestAThinCacheResyncReadsNoPayment(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "resync")
	_, _ = kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	cfg, on, read := countingConfig()
	o := fixture.Run(controllers.ControllerPayment)
	o.Config = cfg
	o.Before = func(mgr ctrl.Manager, w *controllers.Wiring) error {
		thin := thinWithSync(t, mgr, ns, 2*time.Second)
		if err := mgr.Add(thin); err != nil {
			return err
		}
		r := &controllers.Retention{Client: w.Reader, Thin: thin, APIReader: mgr.GetAPIReader(), Clock: clock.RealClock{}}
		return r.SetupWithManager(mgr)
	}
	_ = fixture.StartManager(t, env, ns, o)
	const k = 5
	for i := 0; i < k; i++ {
		p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: fmt.Sprintf("order-%d", i), Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "1s"})
		fixture.WaitPayment(t, env.Client, p, "closed", func(p *v1alpha1.Payment) bool { return p.Status.Closed })
	}
	time.Sleep(3 * time.Second)
	on.Store(true)
	time.Sleep(7 * time.Second) // ~3 resyncs; nothing changes
	on.Store(false)
	counts, _ := read()
	dumpCounts(t, "API requests while nothing changed", counts)
	if n := counts["GET payments"]; n > 0 {
		t.Errorf("%d closed payments, none changed: retention read %d payments from the API server on the thin cache's resyncs", k, n)
	}
}
