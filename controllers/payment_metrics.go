package controllers

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/paymentcache"
)

// The gauges below are computed at scrape time from the manager's informer
// cache: counting what is stored cannot drift the way incremented gauges do
// across restarts and leader changes. Every manager replica has a cache, but
// only the leader reports: with two replicas a dashboard's sum() would
// otherwise count every payment twice. A standby's scrape has none of these
// series.

// RegisterMetrics registers everything the manager exports on reg: the
// shared and manager metrics of internal/metrics and the cache-derived
// gauges, read from reader (the manager's cache) while leader reports true
// (nil: always), with the finished WebhookEvents finished counted (nil:
// none; the cache does not hold them).
func RegisterMetrics(reg prometheus.Registerer, reader client.Reader, leader func() bool, finished *FinishedEvents) error {
	if err := metrics.RegisterShared(reg); err != nil {
		return err
	}
	if err := metrics.RegisterManager(reg); err != nil {
		return err
	}
	for _, c := range []prometheus.Collector{
		PaymentCollector{Reader: reader, Leader: leader},
		InboxCollector{Reader: reader, Leader: leader, Finished: finished},
		ProviderCollector{Reader: reader, Leader: leader},
		RefundCollector{Reader: reader, Leader: leader},
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// LeaderFlag is true while this replica is the elected leader: add it to the
// manager (mgr.Add) and pass IsLeader to RegisterMetrics. It is a runnable
// that needs leader election, so the manager starts it when this replica is
// elected (at once without leader election) and stops it on shutdown.
type LeaderFlag struct{ leading atomic.Bool }

// Start implements manager.Runnable.
func (f *LeaderFlag) Start(ctx context.Context) error {
	f.leading.Store(true)
	<-ctx.Done()
	f.leading.Store(false)
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (f *LeaderFlag) NeedLeaderElection() bool { return true }

// IsLeader reports whether this replica leads.
func (f *LeaderFlag) IsLeader() bool { return f.leading.Load() }

func leads(leader func() bool) bool { return leader == nil || leader() }

// collectTimeout bounds one cache read at scrape time.
const collectTimeout = 5 * time.Second

// listToCollect reads list through r for a collector: false, and nothing to
// report, when this replica does not lead or the read failed.
func listToCollect(r client.Reader, leader func() bool, list client.ObjectList) bool {
	if !leads(leader) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	// Read only, never kept or modified: no copies of the cache's objects.
	return r.List(ctx, list, client.UnsafeDisableDeepCopy) == nil
}

// PaymentCollector exports paywarden_payments and
// paywarden_payments_needs_review (SPEC §8).
type PaymentCollector struct {
	Reader client.Reader
	// Leader gates the collector (nil: always reports).
	Leader func() bool
}

var (
	paymentsDesc = prometheus.NewDesc("paywarden_payments",
		"Payments by namespace, provider and phase (reported by the leader only).", []string{"namespace", "provider", "phase"}, nil)
	needsReviewDesc = prometheus.NewDesc("paywarden_payments_needs_review",
		"Payments with NeedsReview=True, by namespace and reason (reported by the leader only).", []string{"namespace", "reason"}, nil)
)

// closedCounter counts closed payments (paymentcache.Counting).
type closedCounter interface {
	ClosedCounts() map[paymentcache.Group]int
}

// Describe implements prometheus.Collector.
func (c PaymentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- paymentsDesc
	ch <- needsReviewDesc
}

// Collect implements prometheus.Collector.
func (c PaymentCollector) Collect(ch chan<- prometheus.Metric) {
	var list v1alpha1.PaymentList
	if !listToCollect(c.Reader, c.Leader, &list) {
		return
	}
	type key struct{ ns, provider, phase string }
	type review struct{ ns, reason string }
	counts, reviews := map[key]int{}, map[review]int{}
	// The closed ones as counts, when the reader keeps them so
	// (paymentcache.Counting): a closed payment has nothing to review.
	cc, countsClosed := c.Reader.(closedCounter)
	if countsClosed {
		for g, n := range cc.ClosedCounts() {
			counts[key{g.Namespace, g.Provider, string(g.Phase)}] += n
		}
	}
	for i := range list.Items {
		p := &list.Items[i]
		phase := string(p.Status.Phase)
		if phase == "" {
			phase = string(v1alpha1.PhasePending)
		}
		if countsClosed && p.Status.Closed {
			continue // counted above
		}
		counts[key{p.Namespace, p.Spec.ProviderRef.Name, phase}]++
		if cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionNeedsReview); cond != nil && cond.Status == metav1.ConditionTrue {
			reviews[review{p.Namespace, cond.Reason}]++
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(paymentsDesc, prometheus.GaugeValue, float64(n), k.ns, k.provider, k.phase)
	}
	for k, n := range reviews {
		ch <- prometheus.MustNewConstMetric(needsReviewDesc, prometheus.GaugeValue, float64(n), k.ns, k.reason)
	}
}

// InboxCollector exports the inbox: WebhookEvents by result, and how long the
// oldest event still waiting (Pending or Orphaned) has waited. A Pending
// event older than a few minutes means the inbox processor is not keeping
// up; an Orphaned one that stays means a provider reports payments no
// Payment here matches. Open events are counted from the cache; finished
// ones, which the cache does not hold, as the last FinishedEvents pass
// found them.
type InboxCollector struct {
	Reader client.Reader
	// Finished counts the finished events (nil: they are not reported).
	Finished *FinishedEvents
	// Leader gates the collector (nil: always reports).
	Leader func() bool
	// Clock defaults to real time.
	Clock clock.PassiveClock
}

var (
	webhookEventsDesc = prometheus.NewDesc("paywarden_webhook_events",
		"WebhookEvents stored, by namespace, provider and result (Pending for events not yet applied; finished results as of the last retention pass; reported by the leader only).",
		[]string{"namespace", "provider", "result"}, nil)
	webhookEventsOldestDesc = prometheus.NewDesc("paywarden_webhook_events_oldest_age_seconds",
		"Age of the oldest WebhookEvent still waiting to be applied, by namespace, provider and result (Pending or Orphaned; reported by the leader only).",
		[]string{"namespace", "provider", "result"}, nil)
)

// Describe implements prometheus.Collector.
func (c InboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- webhookEventsDesc
	ch <- webhookEventsOldestDesc
}

// Collect implements prometheus.Collector.
func (c InboxCollector) Collect(ch chan<- prometheus.Metric) {
	var list v1alpha1.WebhookEventList
	if !listToCollect(c.Reader, c.Leader, &list) {
		return
	}
	now := time.Now()
	if c.Clock != nil {
		now = c.Clock.Now()
	}
	counts, oldest := c.Finished.finishedCounts(), map[inboxKey]time.Time{}
	if counts == nil {
		counts = map[inboxKey]int{}
	}
	for i := range list.Items {
		e := &list.Items[i]
		result := e.Status.Result
		if result == "" {
			result = v1alpha1.ResultPending
		}
		if result.IsDone() {
			// Finished a moment ago, still in the cache: the next pass
			// counts it.
			continue
		}
		k := inboxKey{e.Namespace, e.Spec.Provider, string(result)}
		counts[k]++
		at := e.Spec.ReceivedAt.Time
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		if o, seen := oldest[k]; !seen || at.Before(o) {
			oldest[k] = at
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(webhookEventsDesc, prometheus.GaugeValue, float64(n), k.ns, k.provider, k.result)
	}
	for k, at := range oldest {
		ch <- prometheus.MustNewConstMetric(webhookEventsOldestDesc, prometheus.GaugeValue, max(0, now.Sub(at).Seconds()), k.ns, k.provider, k.result)
	}
}

// ProviderCollector exports paywarden_provider_ready: 1 while a
// PaymentProvider's Ready condition is True, else 0 (missing Secrets or
// keys, an invalid config, or credentials the provider refused).
type ProviderCollector struct {
	Reader client.Reader
	// Leader gates the collector (nil: always reports).
	Leader func() bool
}

var providerReadyDesc = prometheus.NewDesc("paywarden_provider_ready",
	"1 while the PaymentProvider's Ready condition is True, else 0, by namespace and provider (reported by the leader only).",
	[]string{"namespace", "provider"}, nil)

// Describe implements prometheus.Collector.
func (c ProviderCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- providerReadyDesc
}

// Collect implements prometheus.Collector.
func (c ProviderCollector) Collect(ch chan<- prometheus.Metric) {
	var list v1alpha1.PaymentProviderList
	if !listToCollect(c.Reader, c.Leader, &list) {
		return
	}
	for i := range list.Items {
		p := &list.Items[i]
		ready := 0.0
		if meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionReady) {
			ready = 1
		}
		ch <- prometheus.MustNewConstMetric(providerReadyDesc, prometheus.GaugeValue, ready, p.Namespace, p.Name)
	}
}

// RefundCollector exports paywarden_refunds: Refunds by namespace and phase
// (a Refund in Unknown needs a human: see docs/runbook-refund-unknown.md).
type RefundCollector struct {
	Reader client.Reader
	// Leader gates the collector (nil: always reports).
	Leader func() bool
}

var refundsDesc = prometheus.NewDesc("paywarden_refunds",
	"Refunds by namespace and phase (reported by the leader only).", []string{"namespace", "phase"}, nil)

// Describe implements prometheus.Collector.
func (c RefundCollector) Describe(ch chan<- *prometheus.Desc) { ch <- refundsDesc }

// Collect implements prometheus.Collector.
func (c RefundCollector) Collect(ch chan<- prometheus.Metric) {
	var list v1alpha1.RefundList
	if !listToCollect(c.Reader, c.Leader, &list) {
		return
	}
	type key struct{ ns, phase string }
	counts := map[key]int{}
	for i := range list.Items {
		phase := string(list.Items[i].Status.Phase)
		if phase == "" {
			phase = string(v1alpha1.RefundPending)
		}
		counts[key{list.Items[i].Namespace, phase}]++
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(refundsDesc, prometheus.GaugeValue, float64(n), k.ns, k.phase)
	}
}
