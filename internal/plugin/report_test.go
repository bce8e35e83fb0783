package plugin_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/plugin"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ with the current output")

// golden compares got with testdata/<name>.golden (or writes it with -update).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/plugin -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (go test ./internal/plugin -update rewrites it):\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

func in(f fixture.Console, namespace string) []v1alpha1.Payment {
	var out []v1alpha1.Payment
	for _, p := range f.Payments {
		if namespace == "" || p.Namespace == namespace {
			out = append(out, p)
		}
	}
	return out
}

// TestStuckReport: every payment that waits, grouped by why, oldest first,
// with the one command that acts on it; settled ones without a review are
// left out.
func TestStuckReport(t *testing.T) {
	f := fixture.ConsoleFixture()
	now := fixture.ConsoleNow
	for _, tt := range []struct {
		name      string
		namespace string
		olderThan time.Duration
		output    string
	}{
		{"stuck-all", "", 0, plugin.OutputText},
		{"stuck-all-wide", "", 0, plugin.OutputWide},
		{"stuck-all-json", "", 0, plugin.OutputJSON},
		{"stuck-shop-older-than-45m", "shop", 45 * time.Minute, plugin.OutputText},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := plugin.Stuck(in(f, tt.namespace), now, tt.olderThan)
			var b bytes.Buffer
			var err error
			if tt.output == plugin.OutputJSON {
				err = plugin.WriteData(&b, tt.output, r)
			} else {
				err = plugin.WriteStuck(&b, r, now, tt.namespace == "", tt.output == plugin.OutputWide)
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, b.Bytes())
		})
	}
}

func TestStuckCountsWhatNeedsAHuman(t *testing.T) {
	f := fixture.ConsoleFixture()
	r := plugin.Stuck(f.Payments, fixture.ConsoleNow, 0)
	// Ten review reasons (one payment each) and one provider refusing its
	// configuration.
	if r.NeedsHuman != 11 {
		t.Errorf("needsHuman = %d, want 11", r.NeedsHuman)
	}
	settled := plugin.Stuck(in(f, "shop")[6:10], fixture.ConsoleNow, 0)
	if settled.Total != 0 || settled.NeedsHuman != 0 {
		t.Errorf("settled payments without a review are not stuck: %+v", settled)
	}
	var b bytes.Buffer
	if err := plugin.WriteStuck(&b, settled, fixture.ConsoleNow, false, false); err != nil || b.String() != "No payment waits.\n" {
		t.Errorf("empty report %q, %v", b.String(), err)
	}
}

// whyInput is what kubectl paywarden why reads about a payment of the
// console fixture.
func whyInput(f fixture.Console, namespace, name string) plugin.WhyInput {
	in := plugin.WhyInput{}
	for i := range f.Payments {
		if f.Payments[i].Namespace == namespace && f.Payments[i].Name == name {
			in.Payment = &f.Payments[i]
		}
	}
	about := map[string]bool{"Payment/" + name: true}
	for _, rf := range f.Refunds {
		if rf.Namespace == namespace && rf.Spec.PaymentRef.Name == name {
			in.Refunds = append(in.Refunds, rf)
			about["Refund/"+rf.Name] = true
		}
	}
	for _, we := range f.WebhookEvents {
		if we.Namespace == namespace {
			in.WebhookEvents = append(in.WebhookEvents, we)
		}
	}
	for _, e := range f.Events {
		if e.Namespace == namespace && about[e.Regarding.Kind+"/"+e.Regarding.Name] {
			in.Events = append(in.Events, e)
		}
	}
	return in
}

// TestWhyReport: one timeline of history, Events (those repeating a
// history entry left out), WebhookEvents, Refunds and what is scheduled,
// closing with what happens next.
func TestWhyReport(t *testing.T) {
	f := fixture.ConsoleFixture()
	for _, p := range []struct{ namespace, name string }{
		{"billing", "amount-mismatch"}, {"billing", "retries-exhausted"}, {"shop", "partly-refunded"}, {"shop", "awaiting-payer"},
		{"shop", "manual-capture"}, {"shop", "capture-in-flight"}, {"shop", "provider-down"}, {"shop", "bad-credentials"}, {"shop", "declined"},
	} {
		t.Run(p.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := plugin.WriteWhy(&b, plugin.Why(whyInput(f, p.namespace, p.name), fixture.ConsoleNow), fixture.ConsoleNow); err != nil {
				t.Fatal(err)
			}
			golden(t, "why-"+p.name, b.Bytes())
		})
	}
	t.Run("yaml", func(t *testing.T) {
		var b bytes.Buffer
		if err := plugin.WriteData(&b, plugin.OutputYAML, plugin.Why(whyInput(f, "billing", "amount-mismatch"), fixture.ConsoleNow)); err != nil {
			t.Fatal(err)
		}
		golden(t, "why-amount-mismatch-yaml", b.Bytes())
	})
}

// TestWhyLeavesOutOtherPaymentsWebhooks: of the namespace's inbox, only
// the events about the payment or its Refunds are in its timeline.
func TestWhyLeavesOutOtherPaymentsWebhooks(t *testing.T) {
	f := fixture.ConsoleFixture()
	r := plugin.Why(whyInput(f, "shop", "partly-refunded"), fixture.ConsoleNow)
	webhooks := 0
	for _, e := range r.Timeline {
		if e.Kind == plugin.EntryWebhook {
			webhooks++
		}
		if strings.Contains(e.Text, "kp_evt_44") {
			t.Errorf("manual-capture's webhook in partly-refunded's timeline: %+v", e)
		}
	}
	if webhooks != 3 {
		t.Errorf("%d webhooks in partly-refunded's timeline, want its 3", webhooks)
	}
}

// TestSummaryReport: counts and amounts per phase, provider and currency,
// Unknown first, a total per currency.
func TestSummaryReport(t *testing.T) {
	f := fixture.ConsoleFixture()
	for _, tt := range []struct {
		name   string
		output string
	}{{"summary-all", plugin.OutputText}, {"summary-all-wide", plugin.OutputWide}, {"summary-all-yaml", plugin.OutputYAML}} {
		t.Run(tt.name, func(t *testing.T) {
			r := plugin.Summarize(f.Payments, tt.output == plugin.OutputWide)
			var b bytes.Buffer
			var err error
			if tt.output == plugin.OutputYAML {
				err = plugin.WriteData(&b, tt.output, r)
			} else {
				err = plugin.WriteSummary(&b, r, tt.output == plugin.OutputWide)
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name, b.Bytes())
		})
	}
}
