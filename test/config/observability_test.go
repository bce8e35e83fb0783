package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/scheme"
)

// describing records the name and labels of every metric registered
// through it, from the collectors' own descriptions: what a process really
// exports, not names found in its source.
type describing struct {
	reg    *prometheus.Registry
	labels map[string][]string // metric name -> variable labels
}

var descFields = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

func (d *describing) Register(c prometheus.Collector) error {
	if err := d.reg.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		m := descFields.FindStringSubmatch(desc.String())
		if m == nil {
			panic("unparseable metric description " + desc.String())
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		d.labels[m[1]] = labels
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

func (d *describing) Unregister(c prometheus.Collector) bool { return d.reg.Unregister(c) }

// exported builds the manager's and the receiver's registries as cmd/
// does and returns every metric they export with its labels.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	d := &describing{reg: prometheus.NewRegistry(), labels: map[string][]string{}}
	// cmd/manager: controllers.RegisterMetrics on the manager's cache.
	if err := controllers.RegisterMetrics(d, fake.NewClientBuilder().WithScheme(scheme.New()).Build(), nil, nil); err != nil {
		t.Fatal(err)
	}
	r := &describing{reg: prometheus.NewRegistry(), labels: d.labels}
	// cmd/receiver: metrics.RegisterWebhook.
	if err := metrics.RegisterWebhook(r); err != nil {
		t.Fatal(err)
	}
	if _, err := d.reg.Gather(); err != nil {
		t.Fatalf("the manager's registry does not gather: %v", err)
	}
	return d.labels
}

var (
	metricName = regexp.MustCompile(`paywarden_[a-z_]+`)
	// metric{label="..", ...} and by/without (label, ...) in PromQL.
	selector = regexp.MustCompile(`(paywarden_[a-z_]+)\{([^}]*)\}`)
	grouping = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcher  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
)

// series strips the suffixes Prometheus adds to a histogram's series.
func series(name string) string {
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

// A dashboard or alert on a metric nobody exports, or grouping by a label
// the metric does not have, is silently empty: the worst kind of monitoring.
func TestAlertsAndDashboardUseExportedMetrics(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	exp := exported(t)
	for _, want := range []string{"paywarden_payments", "paywarden_payment_transitions_total", "paywarden_status_queries_total",
		"paywarden_provider_request_duration_seconds", "paywarden_webhooks_total", "paywarden_webhook_ack_duration_seconds",
		"paywarden_payments_needs_review", "paywarden_payments_overdue", "paywarden_circuit_open",
		"paywarden_webhook_events", "paywarden_webhook_events_oldest_age_seconds", "paywarden_provider_ready"} {
		if _, ok := exp[want]; !ok {
			t.Errorf("metric %s is not registered by the manager or the receiver", want)
		}
	}
	// Per-provider metrics carry the namespace: providers are namespaced.
	for name, labels := range exp {
		if slices.Contains(labels, "provider") && !slices.Contains(labels, "namespace") {
			t.Errorf("%s is labelled by provider without namespace: two tenants' providers of one name would add up", name)
		}
	}

	exprs := map[string][]string{}
	dash, err := os.ReadFile(filepath.Join(root, "config", "grafana", "paywarden-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &board); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	for _, p := range board.Panels {
		for _, tg := range p.Targets {
			exprs["dashboard"] = append(exprs["dashboard"], tg.Expr)
		}
	}
	for _, r := range alertRules(t, root) {
		exprs["alerts"] = append(exprs["alerts"], r.Expr)
	}

	for what, list := range exprs {
		if len(list) == 0 {
			t.Errorf("%s has no queries", what)
		}
		for _, expr := range list {
			var used []string
			for _, m := range metricName.FindAllString(expr, -1) {
				name := series(m)
				if _, ok := exp[name]; !ok {
					t.Errorf("%s queries %s, which nothing registers: %s", what, m, expr)
					continue
				}
				used = append(used, name)
			}
			if len(used) == 0 {
				t.Errorf("%s query uses no paywarden metric: %s", what, expr)
			}
			for _, sel := range selector.FindAllStringSubmatch(expr, -1) {
				for _, l := range matcher.FindAllStringSubmatch(sel[2], -1) {
					if labels, ok := exp[series(sel[1])]; ok && !slices.Contains(labels, l[1]) {
						t.Errorf("%s selects %s on %s, which has labels %v: %s", what, l[1], sel[1], labels, expr)
					}
				}
			}
			for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
				for _, l := range strings.Split(g[1], ",") {
					l = strings.TrimSpace(l)
					for _, name := range used {
						if l != "le" && !slices.Contains(exp[name], l) {
							t.Errorf("%s groups %s by %s, which it does not have (labels %v): %s", what, name, l, exp[name], expr)
						}
					}
				}
			}
		}
	}
}

func TestGrafanaOverlayRenders(t *testing.T) {
	m := render(t, "config/grafana")
	if len(m.Resources()) != 1 || m.Resources()[0].GetKind() != "ConfigMap" {
		t.Fatalf("want one ConfigMap, got %d resources", len(m.Resources()))
	}
	if m.Resources()[0].GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap lacks the grafana_dashboard label")
	}
}

// alertRule is one alerting rule of config/prometheus/rules.yaml.
type alertRule struct {
	Alert string `json:"alert"`
	Expr  string `json:"expr"`
}

// alertRules reads the shipped alerting rules.
func alertRules(t *testing.T, root string) []alertRule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Spec struct {
			Groups []struct {
				Rules []alertRule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &rules); err != nil {
		t.Fatal(err)
	}
	var out []alertRule
	for _, g := range rules.Spec.Groups {
		out = append(out, g.Rules...)
	}
	return out
}
