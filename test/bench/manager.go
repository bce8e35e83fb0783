package bench

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/test/harness"
)

const (
	smallNS   = "bench-inflight"
	backlogNS = "bench-backlog"
	storageNS = "bench-storage"
	mib       = 1 << 20
)

// manager measures the manager alone (no receiver, no other payments): its
// RSS with a small and a large number of payments in flight, and what a
// large backlog costs while it drains through the provider's token bucket.
func (b *bench) manager(ctx context.Context) error {
	cp := b.st.CP
	m := &b.res.Manager
	apiURL := b.st.Sim.URL + "/kukopay"
	// In flight: created at the provider, never settled, next query in an hour.
	hour := []time.Duration{time.Hour}

	// Small: created quickly (a large bucket), then measured at rest.
	if err := createNamespace(ctx, cp.Client, smallNS); err != nil {
		return err
	}
	if _, err := createProvider(ctx, cp.Client, providerSpec{ns: smallNS, name: "kukopay", apiURL: apiURL, qps: 1000, burst: 1000, schedule: hour}); err != nil {
		return err
	}
	if err := b.createInFlight(ctx, smallNS, b.opts.InFlightSmall); err != nil {
		return err
	}
	if err := b.st.StartManager(ctx); err != nil {
		return err
	}
	if err := b.waitCreated(ctx, smallNS, b.opts.InFlightSmall, 0, 10*time.Minute); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	rss, peak, err := b.st.Manager.Memory()
	if err != nil {
		return err
	}
	m.InFlightSmall, m.RSSSmallMiB, m.PeakSmallMiB = b.opts.InFlightSmall, float64(rss)/mib, float64(peak)/mib
	b.logf("manager RSS with %d in flight: %.0f MiB", m.InFlightSmall, m.RSSSmallMiB)
	b.st.Manager.Stop(20 * time.Second)
	if err := cleanNamespace(ctx, cp.Client, smallNS); err != nil {
		return err
	}

	// Large: every payment due at once when the manager starts, against a
	// provider with qps 50 / burst 100.
	if err := createNamespace(ctx, cp.Client, backlogNS); err != nil {
		return err
	}
	if _, err := createProvider(ctx, cp.Client, providerSpec{ns: backlogNS, name: "kukopay", apiURL: apiURL,
		qps: b.opts.BacklogQPS, burst: b.opts.BacklogBurst, schedule: hour}); err != nil {
		return err
	}
	_, etcdBefore, err := cp.EtcdDBSize(ctx)
	if err != nil {
		return err
	}
	n := b.opts.InFlightLarge
	if err := b.createInFlight(ctx, backlogNS, n); err != nil {
		return err
	}
	_, etcdAfter, err := cp.EtcdDBSize(ctx)
	if err != nil {
		return err
	}
	m.EtcdGrowthMiB = (etcdAfter - etcdBefore) / mib
	b.res.Storage.EtcdPerPayment = (etcdAfter - etcdBefore) / float64(n)
	if err := b.st.Sim.ResetCounters(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := b.st.StartManager(ctx); err != nil {
		return err
	}
	if err := b.waitCreated(ctx, backlogNS, n, 0, 30*time.Minute); err != nil {
		return err
	}
	m.DrainSeconds = time.Since(start).Seconds()
	b.waitQuiet(ctx, b.st.ManagerMetrics, "controller_runtime_reconcile_total")
	metrics, err := harness.Scrape(ctx, b.st.ManagerMetrics, "controller_runtime_reconcile_total")
	if err != nil {
		return err
	}
	counters, err := b.st.Sim.Counters(ctx)
	if err != nil {
		return err
	}
	cpu, err := b.st.Manager.CPUSeconds()
	if err != nil {
		return err
	}
	rss, peak, err = b.st.Manager.Memory()
	if err != nil {
		return err
	}
	m.InFlightLarge, m.RSSLargeMiB, m.PeakLargeMiB = n, float64(rss)/mib, float64(peak)/mib
	m.BacklogQPS, m.BacklogBurst = b.opts.BacklogQPS, b.opts.BacklogBurst
	m.Reconciles = metrics.Sum("controller_runtime_reconcile_total", map[string]string{"controller": "payment"})
	m.ProviderCalls = harness.ProviderCalls(counters)
	m.IdealSeconds = float64(max(0, n-int(b.opts.BacklogBurst))) / float64(b.opts.BacklogQPS)
	if m.ProviderCalls > 0 {
		m.PerCall = m.Reconciles / float64(m.ProviderCalls)
		m.PerCallNoInit = (m.Reconciles - float64(n)) / float64(m.ProviderCalls)
		m.CPUSeconds = cpu
		m.CPUPerCallMs = cpu * 1000 / float64(m.ProviderCalls)
	}
	b.logf("backlog of %d: %.0f reconciles for %d calls (%.2f, %.2f after the initial list), %.1f CPU ms per call, RSS %.0f MiB, drained in %.0fs",
		n, m.Reconciles, m.ProviderCalls, m.PerCall, m.PerCallNoInit, m.CPUPerCallMs, m.RSSLargeMiB, m.DrainSeconds)

	// What one full list of the in-flight payments costs the API server.
	t0 := time.Now()
	var l v1alpha1.PaymentList
	if err := cp.Client.List(ctx, &l, client.InNamespace(backlogNS)); err != nil {
		return err
	}
	m.ListSeconds = time.Since(t0).Seconds()
	raw, err := cp.GetRaw(ctx, "/apis/"+v1alpha1.GroupVersion.String()+"/namespaces/"+backlogNS+"/payments")
	if err != nil {
		return err
	}
	m.ListMiB = float64(len(raw)) / mib
	if len(l.Items) > 0 {
		if raw, err := cp.GetRaw(ctx, objectPath("payments", &l.Items[0])); err == nil {
			b.res.Storage.PaymentInFlight = len(raw)
		}
	}
	b.st.Manager.Stop(20 * time.Second)
	return cleanNamespace(ctx, cp.Client, backlogNS)
}

func (b *bench) createInFlight(ctx context.Context, ns string, n int) error {
	ps := make([]*v1alpha1.Payment, n)
	for i := range ps {
		ps[i] = newPayment(ns, fmt.Sprintf("p-%05d", i), "kukopay", "", "", pendingMeta)
	}
	b.logf("creating %d payments in %s", n, ns)
	return createAll(ctx, b.st.CP.Client, ps)
}

// waitCreated waits until n payments in ns carry a provider payment id,
// checking paysim's create counter first so the API server is not listed
// over and over while a backlog drains.
func (b *bench) waitCreated(ctx context.Context, ns string, n, createsBefore int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		c, err := b.st.Sim.Counters(ctx)
		if err != nil {
			return err
		}
		if c.PaymentsCreated-createsBefore >= n {
			var l v1alpha1.PaymentList
			if err := b.st.CP.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
				return err
			}
			done := 0
			for _, p := range l.Items {
				if p.Status.ProviderPaymentID != "" {
					done++
				}
			}
			if done >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
	return fmt.Errorf("%d payments in %s not all created at the provider after %s (log %s)", n, ns, timeout, b.st.Manager.Log)
}

// storage measures settled objects of the happy path as etcd holds them, and
// a payment whose history and recent event ids are at their bounds.
func (b *bench) storage(ctx context.Context) error {
	cp := b.st.CP
	s := &b.res.Storage
	var ps v1alpha1.PaymentList
	if err := cp.Client.List(ctx, &ps, client.InNamespace(happyNS)); err != nil {
		return err
	}
	var settled *v1alpha1.Payment
	for i := range ps.Items {
		if p := &ps.Items[i]; p.Spec.ProviderRef.Name == "webhook-first" && p.Status.Phase == v1alpha1.PhaseSucceeded {
			settled = p
			break
		}
	}
	if settled == nil {
		return fmt.Errorf("no settled payment to measure")
	}
	raw, err := cp.GetRaw(ctx, objectPath("payments", settled))
	if err != nil {
		return err
	}
	s.PaymentSettled = len(raw)
	var evs v1alpha1.WebhookEventList
	if err := cp.Client.List(ctx, &evs, client.InNamespace(happyNS)); err != nil {
		return err
	}
	if len(evs.Items) > 0 {
		if raw, err := cp.GetRaw(ctx, objectPath("webhookevents", &evs.Items[0])); err == nil {
			s.WebhookEvent = len(raw)
		}
	}
	// The same payment with a full history: 20 entries, 16 recent event ids.
	full := settled.DeepCopy()
	last := full.Status.History[len(full.Status.History)-1]
	for len(full.Status.History) < payment.MaxHistory {
		h := last
		h.Time = metav1.NewTime(last.Time.Add(time.Duration(len(full.Status.History)) * time.Minute))
		h.EventID = fmt.Sprintf("evt_%020d", len(full.Status.History))
		full.Status.History = append(full.Status.History, h)
	}
	for len(full.Status.RecentEventIDs) < payment.MaxRecentEventIDs {
		full.Status.RecentEventIDs = append(full.Status.RecentEventIDs, fmt.Sprintf("evt_%020d", len(full.Status.RecentEventIDs)))
	}
	// In a namespace without providers, so no controller touches it.
	if err := createNamespace(ctx, cp.Client, storageNS); err != nil {
		return err
	}
	full.Namespace, full.Name = storageNS, "full-history"
	full.ResourceVersion, full.UID, full.CreationTimestamp, full.ManagedFields = "", "", metav1.Time{}, nil
	status := full.Status
	if err := cp.Client.Create(ctx, full); err != nil {
		return err
	}
	// The manager may write a status first (its provider is missing).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(full), full); err != nil {
			return err
		}
		full.Status = status
		return cp.Client.Status().Update(ctx, full)
	}); err != nil {
		return err
	}
	raw, err = cp.GetRaw(ctx, objectPath("payments", full))
	if err != nil {
		return err
	}
	s.PaymentFullHistory = len(raw)
	return nil
}

func objectPath(resource string, o client.Object) string {
	return "/apis/" + v1alpha1.GroupVersion.String() + "/namespaces/" + o.GetNamespace() + "/" + resource + "/" + o.GetName()
}

const (
	retainedNS     = "bench-retained"
	retainedOpenNS = "bench-retained-open"
)

// filled is the manager's RSS once its cache holds what it lists: the
// reconciles go quiet before an informer has listed 100 000 objects (none
// starts before the caches sync), so the RSS is read every 10 s until it
// grows by less than 2 % (at most five minutes).
func (b *bench) filled() (int64, error) {
	rss, _, err := b.st.Manager.Memory()
	for deadline := time.Now().Add(5 * time.Minute); err == nil && time.Now().Before(deadline); {
		time.Sleep(10 * time.Second)
		var now int64
		if now, _, err = b.st.Manager.Memory(); err != nil || float64(now) < 1.02*float64(rss) {
			return max(now, rss), err
		}
		rss = now
	}
	return rss, err
}

// retained measures what settled objects cost the manager's memory: its RSS
// on an empty cluster, with n settled Payments, then with n WebhookEvents
// more (finished, KukoPay payloads), and with the payments and InFlightSmall
// in flight (the capacity target: 100 000 settled and 1 000 in flight).
// Retention decides how many of both the manager holds (docs/capacity.md).
func (b *bench) retained(ctx context.Context) error {
	cp := b.st.CP
	m := &b.res.Manager
	n := b.opts.Retained
	base, _, err := b.rest(ctx, nil)
	if err != nil {
		return err
	}
	if err := b.createRetained(ctx, n); err != nil {
		return err
	}
	withBoth, _, err := b.rest(ctx, nil)
	if err != nil {
		return err
	}
	// Kept at once: a failure after it still reports it.
	m.Retained, m.RSSEmptyMiB, m.RSSRetainedBothMiB = n, base, withBoth
	b.logf("manager RSS: empty %.0f MiB, with %d settled payments and as many finished events %.0f MiB", base, n, withBoth)
	var evs v1alpha1.WebhookEventList
	if err := cp.Client.List(ctx, &evs, client.InNamespace(retainedNS)); err != nil {
		return err
	}
	if err := deleteAll(ctx, cp.Client, ptrs(evs.Items)); err != nil {
		return err
	}
	withPayments, heap, err := b.rest(ctx, nil)
	if err != nil {
		return err
	}
	m.RSSRetainedPaymentsMiB, m.HeapRetainedPaymentsMiB = withPayments, heap
	m.KiBPerRetainedPayment = (withPayments - base) * 1024 / float64(n)
	m.KiBPerRetainedEvent = (withBoth - withPayments) * 1024 / float64(n)
	b.logf("manager RSS: empty %.0f MiB, %d settled payments %.0f MiB (heap %.0f MiB), and as many events %.0f MiB", base, n, withPayments, heap, withBoth)

	// The target: the settled payments and InFlightSmall in flight.
	open := b.opts.InFlightSmall
	if err := createNamespace(ctx, cp.Client, retainedOpenNS); err != nil {
		return err
	}
	if _, err := createProvider(ctx, cp.Client, providerSpec{ns: retainedOpenNS, name: "kukopay", apiURL: b.st.Sim.URL + "/kukopay", qps: 1000, burst: 1000, schedule: []time.Duration{time.Hour}}); err != nil {
		return err
	}
	if err := b.createInFlight(ctx, retainedOpenNS, open); err != nil {
		return err
	}
	counters, err := b.st.Sim.Counters(ctx)
	if err != nil {
		return err
	}
	withOpen, heap, err := b.rest(ctx, func() error {
		return b.waitCreated(ctx, retainedOpenNS, open, counters.PaymentsCreated, 10*time.Minute)
	})
	if err != nil {
		return err
	}
	m.RetainedInFlight, m.RSSRetainedInFlightMiB, m.HeapRetainedInFlightMiB = open, withOpen, heap
	b.logf("manager RSS with %d settled payments and %d in flight: %.0f MiB (heap %.0f MiB)", n, open, withOpen, heap)
	// Left as they are: held, each waits for a manager to let its deletion
	// go (minutes for 100 000), and no later phase reads the control plane's
	// payments; it goes with the run.
	return nil
}

// rest starts the manager, waits for ready (when given) and for its
// reconciles to go quiet, and reads its RSS and the Go heap in use once
// its caches hold what it lists (filled).
func (b *bench) rest(ctx context.Context, ready func() error) (rssMiB, heapMiB float64, err error) {
	if err := b.st.StartManager(ctx); err != nil {
		return 0, 0, err
	}
	defer b.st.Manager.Stop(20 * time.Second)
	if ready != nil {
		if err := ready(); err != nil {
			return 0, 0, err
		}
	}
	b.waitQuiet(ctx, b.st.ManagerMetrics, "controller_runtime_reconcile_total")
	time.Sleep(10 * time.Second)
	rss, err := b.filled()
	if err != nil {
		return 0, 0, err
	}
	s, err := harness.Scrape(ctx, b.st.ManagerMetrics, "go_memstats_heap_inuse_bytes")
	if err != nil {
		return 0, 0, err
	}
	return float64(rss) / mib, s.Sum("go_memstats_heap_inuse_bytes", nil) / mib, nil
}

// createRetained creates n payments settled as the receiver settles them,
// each with its finished WebhookEvent, and held as the manager holds a
// tracked payment that took money (payment.HoldTracked): a manager that
// drove them left them so, and a start does not hold them again.
func (b *bench) createRetained(ctx context.Context, n int) error {
	cp := b.st.CP
	if err := createNamespace(ctx, cp.Client, retainedNS); err != nil {
		return err
	}
	prov, err := createProvider(ctx, cp.Client, providerSpec{ns: retainedNS, name: "kukopay", apiURL: b.st.Sim.URL + "/kukopay", schedule: []time.Duration{time.Hour}})
	if err != nil {
		return err
	}
	b.logf("creating %d settled payments and %d finished webhook events", n, n)
	ps := make([]*v1alpha1.Payment, n)
	bodies := make([][]byte, n)
	for i := range ps {
		ref := fmt.Sprintf("kept-%05d", i)
		ps[i] = newPayment(retainedNS, ref, "kukopay", ref, "pay_"+ref, nil)
		bodies[i] = kukoPayEvent("evt_"+ref, "pay_"+ref, ref, 1999, "USD", time.Now())
	}
	if err := createAll(ctx, cp.Client, ps); err != nil {
		return err
	}
	// Settle each one as the receiver would (status written by the same
	// state machine), with the bare client's writes.
	bare := bareSender{c: cp.Client, prov: prov, bodies: bodies, payments: ps}
	if r := closedLoop(ctx, bare, n, 16); r.Errors > 0 {
		return fmt.Errorf("settle retained payments: %d errors, e.g. %s", r.Errors, r.FirstErr)
	}
	if err := forAll(ps, "holds", func(p *v1alpha1.Payment) error {
		controllerutil.AddFinalizer(p, v1alpha1.FinalizerMoneyInFlight)
		metav1.SetMetaDataAnnotation(&p.ObjectMeta, v1alpha1.AnnotationMoneyUID, string(p.UID))
		return cp.Client.Update(ctx, p)
	}); err != nil {
		return err
	}
	// The bare client stored the events too; finish them, as the receiver would.
	var evs v1alpha1.WebhookEventList
	if err := cp.Client.List(ctx, &evs, client.InNamespace(retainedNS)); err != nil {
		return err
	}
	for i := range evs.Items {
		e := &evs.Items[i]
		e.Status.Result, e.Status.Message, e.Status.Attempts = v1alpha1.ResultApplied, "payment "+e.Spec.Payment, 1
		t := metav1.Now()
		e.Status.AppliedAt = &t
	}
	return updateStatusAll(ctx, cp.Client, ptrs(evs.Items))
}

// ptrs are pointers to the items of a list.
func ptrs[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
