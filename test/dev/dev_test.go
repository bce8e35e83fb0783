// Package dev_test is the headless smoke test of `make dev`: it starts the
// same local environment (control plane, paysim, manager and receiver as real
// processes) and checks that every demo Payment reaches its expected phase.
package dev_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/devenv"
	"github.com/paywarden/paywarden/internal/testenv"
)

func TestDevEnvironmentSettlesEveryStory(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx := context.Background()
	env, err := devenv.Start(ctx, devenv.Options{Root: root, Dir: t.TempDir(), Log: testWriter{t}})
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
					t.Errorf("%s (%s) did not reach %s; status:\n%s", s.Name, s.Title, s.Expect, b)
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
			if s.NeedsReview != "" {
				c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionNeedsReview)
				if c == nil || c.Status != "True" || c.Reason != s.NeedsReview {
					continue
				}
			}
			settled[s.Name] = time.Since(start)
		}
		time.Sleep(250 * time.Millisecond)
	}
	first := time.Duration(0)
	for name, d := range settled {
		t.Logf("%-22s settled %s after start", name, d.Round(100*time.Millisecond))
		if first == 0 || d < first {
			first = d
		}
	}
	t.Logf("environment up in %s; first payment settled %s after start", up.Round(100*time.Millisecond), first.Round(100*time.Millisecond))
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
