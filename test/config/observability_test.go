package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/paywarden/paywarden/internal/testenv"
)

var metricName = regexp.MustCompile(`paywarden_[a-z_]+`)

// definedMetrics collects the metric names declared in Go sources (Name:
// fields and NewDesc calls), so the shipped alerts and dashboard can be
// checked against what the processes actually export.
func definedMetrics(t *testing.T, root string) map[string]bool {
	t.Helper()
	declared := regexp.MustCompile(`(?:Name:\s*|NewDesc\()"(paywarden_[a-z_]+)"`)
	out := map[string]bool{}
	for _, dir := range []string{"internal/metrics", "controllers"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range declared.FindAllStringSubmatch(string(b), -1) {
				out[m[1]] = true
			}
		}
	}
	return out
}

// A dashboard or alert on a metric nobody exports is silently empty: the
// worst kind of monitoring.
func TestAlertsAndDashboardUseExportedMetrics(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	defined := definedMetrics(t, root)
	for _, want := range []string{"paywarden_payments", "paywarden_payment_transitions_total", "paywarden_status_queries_total",
		"paywarden_provider_request_duration_seconds", "paywarden_webhooks_total", "paywarden_webhook_ack_duration_seconds",
		"paywarden_payments_needs_review", "paywarden_payments_overdue", "paywarden_circuit_open"} {
		if !defined[want] {
			t.Errorf("SPEC §8 metric %s is not defined in the code", want)
		}
	}

	dash, err := os.ReadFile(filepath.Join(root, "config", "grafana", "paywarden-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var parsed map[string]any
	if err := json.Unmarshal(dash, &parsed); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	rules, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"dashboard": string(dash), "alerts": string(rules)} {
		used := map[string]bool{}
		for _, m := range metricName.FindAllString(text, -1) {
			// Histograms are queried through their _bucket series.
			used[strings.TrimSuffix(m, "_bucket")] = true
		}
		if len(used) == 0 {
			t.Errorf("%s uses no paywarden metric", name)
		}
		var unknown []string
		for m := range used {
			if !defined[m] {
				unknown = append(unknown, m)
			}
		}
		sort.Strings(unknown)
		if len(unknown) > 0 {
			t.Errorf("%s queries metrics nobody exports: %v", name, unknown)
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
