package controllers

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// PaymentCollector exports the payment gauges of SPEC §8 at scrape time from
// the manager's informer cache: counting what is stored cannot drift the way
// incremented gauges do across restarts and leader changes.
type PaymentCollector struct {
	Reader client.Reader
}

var (
	paymentsDesc = prometheus.NewDesc("paywarden_payments",
		"Payments by namespace, provider and phase.", []string{"namespace", "provider", "phase"}, nil)
	needsReviewDesc = prometheus.NewDesc("paywarden_payments_needs_review",
		"Payments with NeedsReview=True, by namespace and reason.", []string{"namespace", "reason"}, nil)
)

// Describe implements prometheus.Collector.
func (c PaymentCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- paymentsDesc
	ch <- needsReviewDesc
}

// Collect implements prometheus.Collector.
func (c PaymentCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list v1alpha1.PaymentList
	if err := c.Reader.List(ctx, &list); err != nil {
		return
	}
	type key struct{ ns, provider, phase string }
	type review struct{ ns, reason string }
	counts, reviews := map[key]int{}, map[review]int{}
	for i := range list.Items {
		p := &list.Items[i]
		phase := string(p.Status.Phase)
		if phase == "" {
			phase = string(v1alpha1.PhasePending)
		}
		counts[key{p.Namespace, p.Spec.ProviderRef.Name, phase}]++
		if cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionNeedsReview); cond != nil && cond.Status == "True" {
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
