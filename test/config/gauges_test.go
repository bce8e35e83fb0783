package config_test

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/scheme"
)

// cacheGauges are the series the manager computes from its cache at scrape
// time; only the elected leader reports them.
var cacheGauges = []string{"paywarden_payments", "paywarden_payments_needs_review", "paywarden_webhook_events",
	"paywarden_webhook_events_oldest_age_seconds", "paywarden_provider_ready", "paywarden_refunds"}

// TestCacheGaugesOnlyOnTheLeaderAndTheAlertsFire: every manager replica has
// a cache, so a standby reporting the gauges too would double a dashboard's
// sum(). And the alerts for inbox events left Pending or Orphaned and for a
// PaymentProvider that is not Ready fire on what the gauges report for such
// a cluster (each alert's threshold, as shipped, evaluated on the scrape).
func TestCacheGaugesOnlyOnTheLeaderAndTheAlertsFire(t *testing.T) {
	now := time.Now()
	event := func(name string, result v1alpha1.EventResult, age time.Duration) *v1alpha1.WebhookEvent {
		return &v1alpha1.WebhookEvent{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec:       v1alpha1.WebhookEventSpec{Provider: "kukopay", ReceivedAt: metav1.NewTime(now.Add(-age))},
			Status:     v1alpha1.WebhookEventStatus{Result: result},
		}
	}
	cache := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		&v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "order-1"},
			Spec:   v1alpha1.PaymentSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "kukopay"}},
			Status: v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseProcessing}},
		event("kukopay-pending", v1alpha1.ResultPending, 20*time.Minute),
		event("kukopay-orphaned", v1alpha1.ResultOrphaned, 7*time.Hour),
		event("kukopay-applied", v1alpha1.ResultApplied, 30*time.Hour),
		&v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kukopay"},
			Status: v1alpha1.PaymentProviderStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
				Reason: "SecretMissing", LastTransitionTime: metav1.NewTime(now)}}}},
	).Build()

	leading := false
	reg := prometheus.NewRegistry()
	if err := controllers.RegisterMetrics(reg, cache, func() bool { return leading }, nil); err != nil {
		t.Fatal(err)
	}
	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*dto.MetricFamily{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf
		}
		return out
	}

	standby := scrape()
	for _, name := range cacheGauges {
		if mf, ok := standby[name]; ok {
			t.Errorf("a standby replica reports %s (%d series): sums over replicas would double", name, len(mf.GetMetric()))
		}
	}

	leading = true
	leader := scrape()
	for _, name := range []string{"paywarden_payments", "paywarden_webhook_events", "paywarden_webhook_events_oldest_age_seconds", "paywarden_provider_ready"} {
		if _, ok := leader[name]; !ok {
			t.Errorf("the leader does not report %s", name)
		}
	}

	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, r := range alertRules(t, root) {
		exprs[r.Alert] = r.Expr
	}
	// The shipped alerts take the form
	//   max by (namespace, provider) (<metric>{<label>="<value>"}) <op> <threshold>
	form := regexp.MustCompile(`^max by \(namespace, provider\) \((paywarden_[a-z_]+)(?:\{(\w+)="(\w+)"\})?\) (>|==) ([0-9.]+)$`)
	for _, alert := range []string{"PaywardenWebhookEventsPending", "PaywardenWebhookEventsOrphaned", "PaywardenProviderNotReady"} {
		expr, ok := exprs[alert]
		if !ok {
			t.Errorf("no alert %s in config/prometheus/rules.yaml", alert)
			continue
		}
		m := form.FindStringSubmatch(expr)
		if m == nil {
			t.Errorf("alert %s: expression %q is not of the form this test evaluates", alert, expr)
			continue
		}
		metric, label, value, op := m[1], m[2], m[3], m[4]
		threshold, _ := strconv.ParseFloat(m[5], 64)
		fires := false
		for _, s := range leader[metric].GetMetric() {
			if label != "" && labelValue(s, label) != value {
				continue
			}
			v := s.GetGauge().GetValue()
			if (op == ">" && v > threshold) || (op == "==" && v == threshold) {
				fires = true
			}
		}
		if !fires {
			t.Errorf("alert %s (%s) does not fire on the scrape of a cluster it is for", alert, expr)
		}
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
