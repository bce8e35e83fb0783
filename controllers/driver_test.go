package controllers

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/payment"
)

// scripted is a kind whose plan follows a script (the last step repeats)
// and whose hooks count what the driver asked of them.
type scripted struct {
	pass
	p        *v1alpha1.Payment
	script   []payment.Step
	storeErr error // of storeAnswer
	planned  int
	calls    int
	replaced int
	answers  []paymentAnswer // stored
}

func (k *scripted) object() *v1alpha1.Payment                          { return k.p }
func (k *scripted) replace(p *v1alpha1.Payment)                        { k.p = p; k.replaced++ }
func (k *scripted) finalize(context.Context) (bool, error)             { return true, nil }
func (k *scripted) moot(context.Context, payment.Step) bool            { return false }
func (k *scripted) storePlan(context.Context, time.Time) (bool, error) { return true, nil }

func (k *scripted) plan(context.Context, time.Time) (payment.Step, error) {
	if k.planned > 10 {
		return payment.Step{}, errors.New("the loop does not stop")
	}
	s := k.script[min(k.planned, len(k.script)-1)]
	k.planned++
	return s, nil
}

func (k *scripted) hold(context.Context, payment.Step) (ctrl.Result, bool, error) {
	return ctrl.Result{}, false, nil
}

func (k *scripted) admit(context.Context, payment.Step) (ctrl.Result, bool) {
	return ctrl.Result{}, true
}

func (k *scripted) call(_ context.Context, s payment.Step) paymentAnswer {
	k.calls++
	return paymentAnswer{step: s, at: k.clock.Now()}
}

func (k *scripted) storeAnswer(_ context.Context, u paymentAnswer) error {
	if k.storeErr != nil {
		return k.storeErr
	}
	k.answers = append(k.answers, u)
	return nil
}

// driverWorld is an API server (fake) holding one payment, its provider's
// gateway entry and a clock that does not move.
type driverWorld struct {
	reader client.Client
	entry  *gateway.Entry
	clock  *clocktesting.FakePassiveClock
	key    types.NamespacedName
}

func newDriverWorld(t *testing.T) driverWorld {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: "ns", Name: "order"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: map[string][]byte{"apiKey": []byte("k")}},
		&v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, UID: "uid-1"}},
	).Build()
	prov := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kukopay"},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: v1alpha1.ProviderKukoPay, APIURL: "http://127.0.0.1:1",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"},
		},
	}
	entry, err := (&gateway.Gateway{Reader: c}).For(context.Background(), prov)
	if err != nil {
		t.Fatal(err)
	}
	return driverWorld{reader: c, entry: entry, clock: clocktesting.NewFakePassiveClock(time.Unix(1_000_000, 0)), key: key}
}

// kind is a reconcile of the payment as the cache had it (an older copy).
func (w driverWorld) kind(script ...payment.Step) *scripted {
	p := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: w.key.Namespace, Name: w.key.Name, UID: "uid-1"}}
	return &scripted{
		pass:   pass{key: w.key, uid: "uid-1", reader: w.reader, clock: w.clock, entry: w.entry},
		p:      p,
		script: script,
	}
}

func TestTheDriversRules(t *testing.T) {
	t.Parallel()
	w := newDriverWorld(t)
	now := w.clock.Now()
	wait := payment.Step{Action: payment.Wait, At: now.Add(50 * time.Millisecond)}
	write := payment.Step{Action: payment.Write}
	query := payment.Step{Action: payment.Query}
	create := payment.Step{Action: payment.Create}
	for _, tc := range []struct {
		name          string
		script        []payment.Step
		wantCalls     int
		wantReplaced  int
		wantRequeue   time.Duration
		wantWroteOnce bool
	}{
		{"at most one provider call per reconcile: a second is due at once in the next", []payment.Step{query}, 1, 0, 10 * time.Millisecond, true},
		{"a reconcile that stored nothing comes back in no less than a second", []payment.Step{wait}, 0, 0, time.Second, false},
		{"a reconcile that stored something comes back when the plan says", []payment.Step{write, wait}, 0, 0, 50 * time.Millisecond, false},
		{"a create is decided on the object as the API server has it", []payment.Step{create}, 1, 1, 10 * time.Millisecond, true},
		{"a query goes without a fresh read", []payment.Step{query}, 1, 0, 10 * time.Millisecond, true},
		{"after a write the cache is not behind: no fresh read", []payment.Step{write, create}, 1, 0, 10 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := w.kind(tc.script...)
			var kept unstoredAnswers[payment.Step, payment.Call]
			res, err := drive[*v1alpha1.Payment](context.Background(), k, &kept)
			if err != nil {
				t.Fatal(err)
			}
			if k.calls != tc.wantCalls || k.replaced != tc.wantReplaced || res.RequeueAfter != tc.wantRequeue {
				t.Errorf("calls %d, replaced %d, requeue %s; want %d, %d, %s", k.calls, k.replaced, res.RequeueAfter, tc.wantCalls, tc.wantReplaced, tc.wantRequeue)
			}
			if tc.wantWroteOnce && len(k.answers) != 1 {
				t.Errorf("%d answers stored, want 1", len(k.answers))
			}
		})
	}
}

// An answer whose write failed is kept; the next reconcile stores it before
// anything else and asks the provider nothing.
func TestTheDriverStoresAKeptAnswerFirst(t *testing.T) {
	t.Parallel()
	w := newDriverWorld(t)
	var kept unstoredAnswers[payment.Step, payment.Call]
	first := w.kind(payment.Step{Action: payment.Query})
	first.storeErr = errors.New("the API server is away")
	if _, err := drive[*v1alpha1.Payment](context.Background(), first, &kept); err == nil {
		t.Fatal("the failed write of the answer was not returned")
	}
	if _, ok := kept.get("uid-1", w.clock.Now()); !ok || first.calls != 1 {
		t.Fatalf("after %d calls the answer is not kept", first.calls)
	}

	next := w.kind(payment.Step{Action: payment.Nothing})
	if _, err := drive[*v1alpha1.Payment](context.Background(), next, &kept); err != nil {
		t.Fatal(err)
	}
	if len(next.answers) != 1 || next.answers[0].step.Action != payment.Query || next.calls != 0 {
		t.Errorf("stored %d answers with %d calls; want the kept answer and no call", len(next.answers), next.calls)
	}
	if _, ok := kept.get("uid-1", w.clock.Now()); ok {
		t.Error("the stored answer is still kept")
	}
}
