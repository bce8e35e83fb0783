package statuswriter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/statuswriter"
	"github.com/paywarden/paywarden/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// counting wraps the test client with controller-runtime's interceptor and
// counts status writes and the 409s they get.
type counting struct {
	writes, conflicts atomic.Int32
}

func (c *counting) client() client.Client {
	return interceptor.NewClient(env.Client.(client.WithWatch), interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			c.writes.Add(1)
			err := cl.SubResource(sub).Update(ctx, obj, opts...)
			if apierrors.IsConflict(err) {
				c.conflicts.Add(1)
			}
			return err
		},
	})
}

var (
	now        = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	processing = payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedProcessing, EventID: "evt-processing", Raw: "payment.processing"}
	dispute    = payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedDispute, EventID: "evt-dispute", Raw: "dispute.created"}
)

func apply(ctx context.Context, w statuswriter.Writer, p *v1alpha1.Payment, obs payment.Observation) (payment.Outcome, bool, error) {
	return payment.Store(ctx, w, p, func(p *v1alpha1.Payment) payment.Outcome { return payment.ApplyEvent(p, obs, now) })
}

// TestPaymentWritersResolveConflictsWithoutLosingChanges runs two writers
// that read the same version of a payment and then store different
// observations: the loser gets a real 409 from the API server, re-reads,
// re-runs the state machine, and both changes end up stored.
func TestPaymentWritersResolveConflictsWithoutLosingChanges(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	c := &counting{}
	w := statuswriter.Writer{Client: c.client(), APIReader: env.Client}

	t.Run("sequential stale copies", func(t *testing.T) {
		p := newPayment(t, ns, "stale-copies")
		a, b := p.DeepCopy(), p.DeepCopy() // both writers read the same resourceVersion
		before := c.conflicts.Load()
		if _, wrote, err := apply(ctx, w, a, processing); err != nil || !wrote {
			t.Fatalf("writer A: wrote=%v err=%v", wrote, err)
		}
		if _, wrote, err := apply(ctx, w, b, dispute); err != nil || !wrote {
			t.Fatalf("writer B: wrote=%v err=%v", wrote, err)
		}
		if got := c.conflicts.Load() - before; got != 1 {
			t.Fatalf("want exactly one 409 for writer B, got %d", got)
		}
		assertBothChanges(t, p)
	})

	t.Run("concurrent writers", func(t *testing.T) {
		before := c.conflicts.Load()
		for i := 0; i < 10; i++ {
			p := newPayment(t, ns, fmt.Sprintf("concurrent-%d", i))
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for _, obs := range []payment.Observation{processing, dispute} {
				wg.Add(1)
				go func(copy *v1alpha1.Payment, obs payment.Observation) {
					defer wg.Done()
					if _, _, err := apply(ctx, w, copy, obs); err != nil {
						errs <- err
					}
				}(p.DeepCopy(), obs)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("writer failed: %v", err)
			}
			assertBothChanges(t, p)
		}
		if c.conflicts.Load() == before {
			t.Errorf("ten races from the same resourceVersion produced no 409: the test did not exercise conflicts")
		}
	})

	t.Run("unchanged status is not written", func(t *testing.T) {
		p := newPayment(t, ns, "unchanged")
		if _, _, err := apply(ctx, w, p, processing); err != nil {
			t.Fatal(err)
		}
		writes := c.writes.Load()
		out, wrote, err := apply(ctx, w, p, processing)
		if err != nil {
			t.Fatal(err)
		}
		if wrote || c.writes.Load() != writes {
			t.Errorf("a duplicate observation caused a write")
		}
		if out.Results[0].Decision != payment.Duplicate {
			t.Errorf("decision %s, want Duplicate", out.Results[0].Decision)
		}
	})

	t.Run("a payment deleted and created again under its name is not written", func(t *testing.T) {
		old := newPayment(t, ns, "recreated")
		if err := env.Client.Delete(ctx, old.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		fresh := newPayment(t, ns, "recreated")
		_, wrote, err := apply(ctx, w, old, processing) // a writer still holding the old object
		if !errors.Is(err, statuswriter.ErrReplaced) || wrote {
			t.Fatalf("wrote=%v err=%v, want ErrReplaced", wrote, err)
		}
		got := &v1alpha1.Payment{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(fresh), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase != "" || len(got.Status.RecentEventIDs) != 0 {
			t.Errorf("the old payment's decision was written onto the new one: %+v", got.Status)
		}
	})
}

// TestAnUnchangedDecisionIsConfirmedOnTheAPIServer: a mutation that changes
// nothing on a copy that lags behind the API server writes nothing, so no
// conflict would ever run it again; with ConfirmUnchanged it is run again
// on the API server's copy, and only a current copy costs a read alone.
func TestAnUnchangedDecisionIsConfirmedOnTheAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	// needsProcessing marks the payment only once it has been seen
	// Processing: on the lagging copy it has nothing to do.
	needsProcessing := func(p *v1alpha1.Payment) error {
		if p.Status.Phase == v1alpha1.PhaseProcessing {
			p.Status.ProviderStatus = "seen-processing"
		}
		return nil
	}
	for _, confirm := range []bool{false, true} {
		t.Run(fmt.Sprintf("confirm=%v", confirm), func(t *testing.T) {
			c := &counting{}
			w := statuswriter.Writer{Client: c.client(), APIReader: env.Client, ConfirmUnchanged: confirm}
			p := newPayment(t, ns, fmt.Sprintf("lagging-%v", confirm))
			lagging := p.DeepCopy()
			if _, _, err := apply(ctx, statuswriter.Writer{Client: env.Client, APIReader: env.Client}, p, processing); err != nil {
				t.Fatal(err)
			}
			wrote, err := statuswriter.Update(ctx, w, lagging, needsProcessing)
			if err != nil {
				t.Fatal(err)
			}
			got := &v1alpha1.Payment{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				t.Fatal(err)
			}
			if confirm != wrote || confirm != (got.Status.ProviderStatus == "seen-processing") {
				t.Errorf("wrote=%v, stored provider status %q: want the decision taken on the API server's copy exactly when confirming", wrote, got.Status.ProviderStatus)
			}
			// On a current copy, nothing to do stays nothing: no write.
			writes := c.writes.Load()
			if wrote, err := statuswriter.Update(ctx, w, got, func(*v1alpha1.Payment) error { return nil }); err != nil || wrote || c.writes.Load() != writes {
				t.Errorf("a current copy with nothing to do: wrote=%v err=%v", wrote, err)
			}
		})
	}
}

// TestEveryKindUsesTheOneWriter: the same conflict loop serves
// PaymentProviders and WebhookEvents, keeping the other writer's fields.
func TestEveryKindUsesTheOneWriter(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	c := &counting{}
	w := statuswriter.Writer{Client: c.client(), APIReader: env.Client}
	prov := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay"},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: v1alpha1.ProviderKukoPay, APIURL: "https://api.example.com",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"},
		},
	}
	if err := env.Client.Create(ctx, prov); err != nil {
		t.Fatal(err)
	}
	a, b := prov.DeepCopy(), prov.DeepCopy()
	if wrote, err := statuswriter.Update(ctx, w, a, func(p *v1alpha1.PaymentProvider) error {
		p.Status.WebhookPath = "/webhooks/x/kukopay"
		return nil
	}); err != nil || !wrote {
		t.Fatalf("first writer: %v %v", wrote, err)
	}
	before := c.conflicts.Load()
	if wrote, err := statuswriter.Update(ctx, w, b, func(p *v1alpha1.PaymentProvider) error {
		p.Status.Circuit.State = v1alpha1.CircuitOpen
		return nil
	}); err != nil || !wrote {
		t.Fatalf("second writer: %v %v", wrote, err)
	}
	if c.conflicts.Load() != before+1 {
		t.Errorf("the stale second writer got no 409")
	}
	if b.Status.WebhookPath != "/webhooks/x/kukopay" || b.Status.Circuit.State != v1alpha1.CircuitOpen {
		t.Errorf("a change was lost: %+v", b.Status)
	}
	writes := c.writes.Load()
	if wrote, err := statuswriter.Update(ctx, w, b, func(p *v1alpha1.PaymentProvider) error {
		p.Status.Circuit.State = v1alpha1.CircuitOpen
		return nil
	}); err != nil || wrote || c.writes.Load() != writes {
		t.Errorf("an unchanged provider status was written (wrote=%v err=%v)", wrote, err)
	}

	evt := &v1alpha1.WebhookEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay-0123456789abcdef0123"},
		Spec:       v1alpha1.WebhookEventSpec{Provider: "kukopay", EventID: "evt_1", Type: "payment.succeeded", Via: v1alpha1.ViaWebhook, ReceivedAt: metav1.NewTime(now)},
	}
	if err := env.Client.Create(ctx, evt); err != nil {
		t.Fatal(err)
	}
	stale := evt.DeepCopy()
	if _, err := statuswriter.Update(ctx, w, evt, func(e *v1alpha1.WebhookEvent) error { e.Status.Result = v1alpha1.ResultApplied; return nil }); err != nil {
		t.Fatal(err)
	}
	// The loser re-reads, sees the event finished and keeps that result.
	if _, err := statuswriter.Update(ctx, w, stale, func(e *v1alpha1.WebhookEvent) error {
		if !e.Status.Result.IsDone() {
			e.Status.Result = v1alpha1.ResultOrphaned
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if stale.Status.Result != v1alpha1.ResultApplied {
		t.Errorf("result %s, want the winner's Applied", stale.Status.Result)
	}
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "write-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func newPayment(t *testing.T, ns, name string) *v1alpha1.Payment {
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

func assertBothChanges(t *testing.T, p *v1alpha1.Payment) {
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
