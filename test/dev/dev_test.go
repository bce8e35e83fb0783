// Package dev_test is the headless smoke test of `make dev`: it starts the
// same local environment (control plane, paysim, manager and receiver as real
// processes, the director playing payer and operator with kubectl) and checks
// that every demo Payment reaches its expected phase and every demo Refund
// succeeds.
package dev_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/devenv"
)

func TestDevEnvironmentSettlesEveryStory(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx := context.Background()
	// The unpaid stories expire after 15 s instead of the demo's 40 s, and
	// the PayPal order nobody approves is deleted after 15 s instead of 50 s:
	// the close-out is the same, and they no longer outlast every other story.
	env, err := devenv.Start(ctx, devenv.Options{Root: root, Dir: t.TempDir(), Log: testWriter{t}, ExpiresAfter: 15 * time.Second, OrderLifetime: 15 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	up := time.Since(start)

	deadline := time.Now().Add(4 * time.Minute)
	settled := map[string]time.Duration{}
	for len(settled) < len(devenv.Stories) {
		if time.Now().After(deadline) {
			for _, s := range devenv.Stories {
				if _, ok := settled[s.Name]; !ok {
					p := &v1alpha1.Payment{}
					_ = env.Client.Get(ctx, client.ObjectKey{Namespace: devenv.Namespace, Name: s.Name}, p)
					b, _ := json.MarshalIndent(p.Status, "", "  ")
					t.Errorf("%s (%s) did not reach %s (failure %q) with every Refund final as told; status:\n%s", s.Name, s.Title, s.Expect, s.Failure, b)
					for _, ra := range s.Refunds() {
						r := &v1alpha1.Refund{}
						_ = env.Client.Get(ctx, client.ObjectKey{Namespace: devenv.Namespace, Name: ra.Name}, r)
						b, _ := json.MarshalIndent(r.Status, "", "  ")
						t.Errorf("Refund %s status:\n%s", ra.Name, b)
					}
				}
			}
			dumpLogs(t, env)
			t.FailNow()
		}
		for _, s := range devenv.Stories {
			if _, ok := settled[s.Name]; ok {
				continue
			}
			p := &v1alpha1.Payment{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: devenv.Namespace, Name: s.Name}, p); err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase != s.Expect {
				continue
			}
			if s.Failure != "" && (p.Status.Failure == nil || p.Status.Failure.Code != s.Failure) {
				continue
			}
			if s.NeedsReview != "" {
				c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionNeedsReview)
				if c == nil || c.Status != "True" || c.Reason != s.NeedsReview {
					continue
				}
			}
			if !refundsFinal(ctx, t, env, s) {
				continue
			}
			settled[s.Name] = time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
	// The Stripe story is told with every Stripe webhook lost: what settled it
	// was paywarden asking, not a delivery.
	events := &v1alpha1.WebhookEventList{}
	if err := env.Client.List(ctx, events, client.InNamespace(devenv.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events.Items {
		if ev.Spec.Provider == "stripe" && ev.Spec.Via == v1alpha1.ViaWebhook {
			t.Errorf("a Stripe webhook was delivered (%s); the stripe story needs them lost", ev.Spec.EventID)
		}
	}
	if pending := env.PendingActs(); len(pending) > 0 {
		dumpLogs(t, env)
		t.Fatalf("every story settled, but these acts were never done (the story did not happen as told): %q", pending)
	}
	first := time.Duration(0)
	for _, s := range devenv.Stories {
		d := settled[s.Name]
		t.Logf("%-22s settled %s after start", s.Name, d.Round(100*time.Millisecond))
		if first == 0 || d < first {
			first = d
		}
	}
	t.Logf("environment up in %s; first payment settled %s after start", up.Round(100*time.Millisecond), first.Round(100*time.Millisecond))
}

// refundsFinal: every Refund the story applies exists and is final as told
// (Succeeded, or Failed when the provider reverses it).
func refundsFinal(ctx context.Context, t *testing.T, env *devenv.Env, s devenv.Story) bool {
	for _, ra := range s.Refunds() {
		r := &v1alpha1.Refund{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: devenv.Namespace, Name: ra.Name}, r); err != nil {
			if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			return false
		}
		if r.Status.Phase != ra.Final() {
			return false
		}
	}
	return true
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

func dumpLogs(t *testing.T, env *devenv.Env) {
	for name, path := range env.Logs {
		b, _ := os.ReadFile(path)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("--- %s (%s), last lines:\n%s", name, path, b)
	}
}
