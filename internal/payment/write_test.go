package payment_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/testenv"
)

// conflictCounter wraps a client and counts the 409s its status writes get.
type conflictCounter struct {
	client.Client
	conflicts, writes atomic.Int32
}

func (c *conflictCounter) Status() client.SubResourceWriter {
	return &countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type countingStatus struct {
	client.SubResourceWriter
	c *conflictCounter
}

func (s *countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	s.c.writes.Add(1)
	err := s.SubResourceWriter.Update(ctx, obj, opts...)
	if apierrors.IsConflict(err) {
		s.c.conflicts.Add(1)
	}
	return err
}

// TestWriterResolvesConflictsWithoutLosingChanges runs two writers that read
// the same version of a payment and then write different observations: the
// loser gets a real 409 from the API server, re-reads, re-runs the state
// machine, and both changes end up stored.
func TestWriterResolvesConflictsWithoutLosingChanges(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "write-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	counter := &conflictCounter{Client: env.Client}
	w := payment.Writer{Client: counter, Reader: env.Client}
	now := func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }

	processing := payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedProcessing, EventID: "evt-processing", Raw: "payment.processing"}
	dispute := payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedDispute, EventID: "evt-dispute", Raw: "dispute.created"}

	t.Run("sequential stale copies", func(t *testing.T) {
		p := newPayment(t, env, ns.Name, "stale-copies")
		a, b := p.DeepCopy(), p.DeepCopy() // both writers read the same resourceVersion
		before := counter.conflicts.Load()
		if _, wrote, err := w.ApplyObservation(ctx, a, processing, now); err != nil || !wrote {
			t.Fatalf("writer A: wrote=%v err=%v", wrote, err)
		}
		if _, wrote, err := w.ApplyObservation(ctx, b, dispute, now); err != nil || !wrote {
			t.Fatalf("writer B: wrote=%v err=%v", wrote, err)
		}
		if counter.conflicts.Load()-before != 1 {
			t.Fatalf("want exactly one 409 for writer B, got %d", counter.conflicts.Load()-before)
		}
		assertBothChanges(t, env, p)
	})

	t.Run("concurrent writers", func(t *testing.T) {
		before := counter.conflicts.Load()
		for i := 0; i < 10; i++ {
			p := newPayment(t, env, ns.Name, fmt.Sprintf("concurrent-%d", i))
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for _, obs := range []payment.Observation{processing, dispute} {
				wg.Add(1)
				go func(copy *v1alpha1.Payment, obs payment.Observation) {
					defer wg.Done()
					if _, _, err := w.ApplyObservation(ctx, copy, obs, now); err != nil {
						errs <- err
					}
				}(p.DeepCopy(), obs)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("writer failed: %v", err)
			}
			assertBothChanges(t, env, p)
		}
		if counter.conflicts.Load() == before {
			t.Errorf("ten races from the same resourceVersion produced no 409: the test did not exercise conflicts")
		}
	})

	t.Run("unchanged status is not written", func(t *testing.T) {
		p := newPayment(t, env, ns.Name, "unchanged")
		if _, _, err := w.ApplyObservation(ctx, p, processing, now); err != nil {
			t.Fatal(err)
		}
		writes := counter.writes.Load()
		res, wrote, err := w.ApplyObservation(ctx, p, processing, now)
		if err != nil {
			t.Fatal(err)
		}
		if wrote || counter.writes.Load() != writes {
			t.Errorf("a duplicate observation caused a write")
		}
		if res.Decision != payment.Duplicate {
			t.Errorf("decision %s, want Duplicate", res.Decision)
		}
	})
}

func newPayment(t *testing.T, env *testenv.Env, ns, name string) *v1alpha1.Payment {
	t.Helper()
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "kukopay"},
			Amount:      v1alpha1.Amount{Value: 500, Currency: "EUR"},
		},
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func assertBothChanges(t *testing.T, env *testenv.Env, p *v1alpha1.Payment) {
	t.Helper()
	got := &v1alpha1.Payment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1alpha1.PhaseProcessing {
		t.Errorf("%s: phase %q, want Processing (writer A's change lost)", p.Name, got.Status.Phase)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ConditionDisputed) {
		t.Errorf("%s: Disputed not set (writer B's change lost)", p.Name)
	}
	ids := map[string]bool{}
	for _, id := range got.Status.RecentEventIDs {
		ids[id] = true
	}
	if !ids["evt-processing"] || !ids["evt-dispute"] {
		t.Errorf("%s: recentEventIDs %v, want both events", p.Name, got.Status.RecentEventIDs)
	}
}
