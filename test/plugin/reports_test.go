package plugin_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/fixture"
)

// now pins the clock of the reports to the console fixture's; -l keeps out
// what the action tests create meanwhile.
var (
	now     = "--now=" + fixture.ConsoleNow.Format(time.RFC3339)
	console = "--selector=" + fixture.ConsoleLabel
)

// TestStuck: kubectl paywarden stuck over every phase and review reason,
// all namespaces and one; exit status 1 while any payment needs a human.
func TestStuck(t *testing.T) {
	consoleFixture(t)
	for _, tt := range []struct {
		name string
		args []string
		code int
	}{
		{"stuck-A", []string{"paywarden", "stuck", "-A", console, now}, 1},
		{"stuck-shop-wide", []string{"paywarden", "stuck", "-n", "shop", "-o", "wide", console, now}, 1},
		// The kubeconfig's namespace is shop.
		{"stuck-shop-older-than-40m", []string{"paywarden", "stuck", "--older-than", "40m", console, now}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := kubectl(tt.args...)
			if r.code != tt.code || r.stderr != "" {
				t.Fatalf("want exit %d and nothing on stderr; got %s", tt.code, r)
			}
			golden(t, tt.name, r.stdout)
		})
	}
	t.Run("json", func(t *testing.T) {
		r := kubectl("paywarden", "stuck", "-A", "-o", "json", console, now)
		var report struct {
			NeedsHuman, Total int
			Groups            []struct{ Wait, Reason string }
		}
		if err := json.Unmarshal([]byte(r.stdout), &report); err != nil || r.code != 1 {
			t.Fatalf("%v; %s", err, r)
		}
		if report.NeedsHuman != 11 || report.Total != 17 || report.Groups[0].Reason != "AmountMismatch" {
			t.Errorf("report %+v", report)
		}
	})
}

// TestWhy: one payment's timeline from the API (history, Events, the
// WebhookEvents that are about it, its Refunds, what is scheduled) and the
// closing line.
func TestWhy(t *testing.T) {
	consoleFixture(t)
	for _, tt := range []struct{ namespace, name string }{
		{"billing", "amount-mismatch"}, {"shop", "partly-refunded"}, {"shop", "awaiting-payer"}, {"shop", "capture-in-flight"}, {"billing", "retries-exhausted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := kubectl("paywarden", "why", tt.name, "-n", tt.namespace, now)
			if r.code != 0 || r.stderr != "" {
				t.Fatal(r)
			}
			golden(t, "why-"+tt.name, r.stdout)
		})
	}
	t.Run("not found", func(t *testing.T) {
		r := kubectl("paywarden", "why", "nope", "-n", "billing")
		if r.code != 1 || r.stderr != "error: payment nope not found in namespace billing\n" {
			t.Error(r)
		}
	})
	t.Run("--kubeconfig and --context", func(t *testing.T) {
		r := kubectl("paywarden", "why", "declined", "--kubeconfig", kubeconfig, "--context", "envtest", now)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Payment shop/declined: Failed, 9.99 USD at kukopay") {
			t.Error(r)
		}
		if r := kubectl("paywarden", "why", "declined", "--context", "nowhere"); r.code != 1 || !strings.Contains(r.stderr, `context "nowhere" does not exist`) {
			t.Error(r)
		}
	})
}

// TestSummary: counts and amounts per phase, provider and currency,
// Unknown first, with a total per currency.
func TestSummary(t *testing.T) {
	consoleFixture(t)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"summary-A", []string{"paywarden", "summary", "-A", console}},
		{"summary-A-wide", []string{"paywarden", "summary", "-A", "-o", "wide", console}},
		{"summary-billing-yaml", []string{"paywarden", "summary", "-n", "billing", "-o", "yaml", console}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := kubectl(tt.args...)
			if r.code != 0 || r.stderr != "" {
				t.Fatal(r)
			}
			golden(t, tt.name, r.stdout)
		})
	}
	if r := kubectl("paywarden", "summary", "-o", "name"); r.code != 1 || r.stderr != "error: unsupported output \"name\": use wide, json, yaml\n" {
		t.Error(r)
	}
}

// TestCompletion: kubectl's shell completion of a plugin asks
// kubectl_complete-paywarden, which completes payment names of the
// namespace, only those each command can act on.
func TestCompletion(t *testing.T) {
	consoleFixture(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "paywarden", "capture", ""}, "capture-in-flight\nmanual-capture\n:4\n"},
		{[]string{"__complete", "paywarden", "refund", "-n", "shop", "p"}, "paid\npartly-refunded\n:4\n"},
		{[]string{"__complete", "paywarden", "why", "-n", "billing", "d"}, "dispute-lost\nduplicate\n:4\n"},
		{[]string{"__complete", "paywarden", "resolve", "-n", "billing", "amount-mismatch", "--phase", ""}, "Succeeded\nFailed\nExpired\nCanceled\n:4\n"},
	} {
		r := kubectl(tt.args...)
		// The last line is cobra's note on stderr; stdout is the names and
		// the directive.
		if r.code != 0 || r.stdout != tt.want {
			t.Errorf("kubectl %s: %s\nwant stdout %q", strings.Join(tt.args, " "), r, tt.want)
		}
	}
}
