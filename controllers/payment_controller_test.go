package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// fast is a compressed schedule: the real one's shape in milliseconds.
var fast = []string{"150ms", "150ms", "150ms", "300ms", "300ms", "300ms"}

// kukopayAt starts paysim and creates in ns the PaymentProvider "kukopay" at
// it, of p's settings.
func kukopayAt(t *testing.T, ns string, p fixture.Provider) (*fixture.Sim, *v1alpha1.PaymentProvider) {
	t.Helper()
	s := fixture.StartSim(t, paysim.Options{})
	p.Namespace, p.Name, p.Sim = ns, "kukopay", s
	return s, fixture.CreateProvider(t, env.Client, p)
}

func TestHappyPath(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	// Succeeds 40 simulated seconds after creation (0.4 s here): the first
	// query finds it Processing, a later one Succeeded.
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-1", Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "40s"})

	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", c)
	}
	if got.Status.ProviderPaymentID == "" || got.Status.CreateRequestedAt == nil {
		t.Errorf("provider id %q / createRequestedAt %v not recorded", got.Status.ProviderPaymentID, got.Status.CreateRequestedAt)
	}
	if got.Status.AmountDisplay != "19.99 USD" || got.Status.AmountReceived == nil || got.Status.AmountReceived.Value != 1999 {
		t.Errorf("amount display %q received %+v", got.Status.AmountDisplay, got.Status.AmountReceived)
	}
	if got.Status.Query.NextTime != nil {
		t.Errorf("a settled payment keeps a next query time %v", got.Status.Query.NextTime)
	}
	var path []string
	for _, h := range got.Status.History {
		path = append(path, string(h.To))
	}
	if len(path) == 0 || path[0] != "Pending" || path[len(path)-1] != "Succeeded" {
		t.Errorf("history %v, want Pending ... Succeeded", path)
	}
	m.Events.Wait(t, corev1.EventTypeNormal, "Succeeded")
	c := s.Counters()
	if c.PaymentsCreated != 1 || c.CreateRequests != 1 {
		t.Errorf("provider saw %d creates and made %d payments, want 1 and 1", c.CreateRequests, c.PaymentsCreated)
	}
	queries := c.QueriesByPayment[got.Status.ProviderPaymentID]
	t.Logf("happy path: %d status writes, %d provider calls (1 create + %d status queries), history %v",
		m.Writes.Status(p), c.CreateRequests+queries, queries, path)
}

// TestHappyPathWebhookFirst: the provider's webhook settles the payment
// before any status query is due. What one payment costs: one provider call
// (the create), three Payment status writes (the marker, the create's
// answer, the webhook's Succeeded), no status query, nothing after.
func TestHappyPathWebhookFirst(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	const secret = "happy-path-signing-secret"
	s := fixture.StartSim(t, paysim.Options{WebhookSecrets: map[string][][]byte{paysim.KukoPay: {[]byte(secret)}}})
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Schedule: []string{"1h"},
		SigningSecrets: map[string]string{"current": secret}})
	receiverWrites := &fixture.Writes{}
	rcv := fixture.StartReceiver(t, env, fixture.ReceiverOptions{WrapClient: receiverWrites.Wrap})
	fixture.DeliverWebhooks(t, s, rcv, prov)
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment, controllers.ControllerInbox))
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-1", Provider: "kukopay", Outcome: paysim.OutcomePending})
	// The payer pays once the receiver's cache has the payment's provider
	// id: sooner, its webhook is stored Orphaned and applied by the
	// manager's inbox processor instead (a clean-clone run under load
	// settled it that way, and the count below came out 3 and 0).
	created := fixture.WaitPayment(t, env.Client, p, "created", func(p *v1alpha1.Payment) bool { return p.Status.ProviderPaymentID != "" })
	fixture.WaitCached(t, rcv.Cache, created)
	if err := s.SetOutcome(paysim.KukoPay, created.Status.ProviderPaymentID, paysim.Script{Outcome: paysim.OutcomeSucceed}); err != nil {
		t.Fatal(err)
	}

	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	receiverWrites.WaitRecorded(t, got)
	if h := got.Status.History[len(got.Status.History)-1]; h.Source != v1alpha1.SourceWebhook {
		t.Fatalf("settled via %s, want the webhook", h.Source)
	}
	c := s.Counters()
	queries := c.QueriesByPayment[got.Status.ProviderPaymentID]
	manager, receiver := m.Writes.Status(p), receiverWrites.Status(p)
	t.Logf("happy path, webhook first: %d provider calls (%d create, %d status queries); Payment status writes: %d by the manager, %d by the receiver",
		c.CreateRequests+queries, c.CreateRequests, queries, manager, receiver)
	if c.CreateRequests != 1 || queries != 0 {
		t.Errorf("%d creates and %d status queries, want 1 and 0", c.CreateRequests, queries)
	}
	if manager != 2 || receiver != 1 {
		t.Errorf("status writes: %d by the manager, %d by the receiver; want 2 (marker, create answer) and 1 (Succeeded)", manager, receiver)
	}
}

// TestCrashBetweenCreateAndStatusWriteDoesNotChargeTwice: the manager dies
// after the provider created the payment and before the answer was stored.
// The next manager finds the create marker without an id and repeats the
// create with the same idempotency key: the provider replays its first
// answer, so there is one payment.
func TestCrashBetweenCreateAndStatusWriteDoesNotChargeTwice(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	// The manager dies before any write of the create's answer.
	lost := fixture.FailWrites(func(w fixture.Write) bool {
		p, ok := w.Object.(*v1alpha1.Payment)
		return ok && w.Status() && p.Status.ProviderPaymentID != ""
	}, nil)
	o := fixture.Run(controllers.ControllerPayment)
	o.WrapClient = lost.Wrap
	first := fixture.StartManager(t, env, ns, o)
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "crash", Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "10s"})
	fixture.Eventually(t, 10*time.Second, "the create's answer to be lost", func() bool { return lost.Failed() >= 1 })
	first.Stop() // the crash: whatever the first manager kept in memory is gone

	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	c := s.Counters()
	key := "kukopay/" + got.IdempotencyKey()
	if c.CreatesByKey[key] != 2 {
		t.Errorf("creates with key %s = %d, want 2 (the retry must reuse the key); all: %v", key, c.CreatesByKey[key], c.CreatesByKey)
	}
	if c.PaymentsCreated != 1 {
		t.Errorf("paysim created %d payments, want exactly 1", c.PaymentsCreated)
	}
}

// TestFailedWriteOfACreateAnswerStoresItWithoutCallingAgain: when only the
// status write failed (the manager lives on), the kept answer is stored on
// the retry; the provider is not called a second time.
func TestFailedWriteOfACreateAnswerStoresItWithoutCallingAgain(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	failed := fixture.FailWrites(fixture.Once(func(w fixture.Write) bool {
		p, ok := w.Object.(*v1alpha1.Payment)
		return ok && w.Status() && p.Status.ProviderPaymentID != ""
	}), errors.New("injected: the manager died before this status write"))
	o := fixture.Run(controllers.ControllerPayment)
	o.WrapClient = failed.Wrap
	fixture.StartManager(t, env, ns, o)
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "write-lost", Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "10s"})
	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	if failed.Failed() != 1 {
		t.Fatalf("the write after the create was not failed (failed=%d)", failed.Failed())
	}
	if n := s.Counters().CreatesByKey["kukopay/"+got.IdempotencyKey()]; n != 1 {
		t.Errorf("%d creates, want 1: the kept answer must be stored, not asked for again", n)
	}
}

func TestKeyWindowPassedWithoutRecordNeedsReview(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: fast, KeyWindow: "1h"})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "lost-create", Provider: "kukopay"})
	// A create was requested two hours ago and its outcome never recorded.
	long := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhasePending, CreateRequestedAt: &long}
	if err := env.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))

	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseUnknown, 20*time.Second)
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonCreateOutcomeUnknown {
		t.Errorf("NeedsReview = %+v, want True/CreateOutcomeUnknown", c)
	}
	counters := s.Counters()
	if counters.CreateRequests != 0 || counters.PaymentsCreated != 0 {
		t.Errorf("a create went out past the key window: %d requests, %d payments", counters.CreateRequests, counters.PaymentsCreated)
	}
	if counters.Searches == 0 {
		t.Errorf("the payment was not looked up by merchant reference")
	}
}

func TestKeyWindowPassedAdoptsThePaymentFoundByReference(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: fast, KeyWindow: "1h"})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "found-later", Provider: "kukopay"})
	// The first create reached the provider; its answer was lost.
	adapter, err := kukopay.New(provider.Config{Name: "test", APIURL: s.URL + "/kukopay", Credentials: map[string][]byte{"apiKey": []byte("k")}})
	if err != nil {
		t.Fatal(err)
	}
	made, err := adapter.Create(context.Background(), provider.CreateRequest{
		IdempotencyKey: string(p.UID), MerchantReference: p.MerchantRef(), Amount: 1999, Currency: "USD",
	})
	if err != nil {
		t.Fatal(err)
	}
	long := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhasePending, CreateRequestedAt: &long}
	if err := env.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	s.ResetCounters()
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))

	fixture.Eventually(t, 20*time.Second, "the found payment to be adopted", func() bool {
		return fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID == made.ID
	})
	if c := s.Counters(); c.CreateRequests != 0 {
		t.Errorf("%d creates went out past the key window", c.CreateRequests)
	}
}

// TestFailingQueriesNeverFailThePayment: 5xx, 429 and timeouts say nothing
// about the payment. They never fail it and consume no schedule attempt; only
// answers do, so the payment runs out of its schedule after exactly one
// answer per step however many calls failed in between.
func TestFailingQueriesNeverFailThePayment(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	schedule := []string{"100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms"}
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: schedule, Timeout: "300ms", Failures: 100})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "flaky", Provider: "kukopay", Outcome: paysim.OutcomeProcessing, After: "1s"})
	fixture.Eventually(t, 10*time.Second, "the payment to exist at the provider", func() bool { return fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID != "" })
	s.SetFaults(paysim.Faults{ServerErrorRate: 0.4, TooManyRequestsRate: 0.3, RetryAfter: time.Second, SlowRate: 0.3, SlowDelay: time.Second})

	sawErrors := false
	fixture.Eventually(t, 90*time.Second, "the schedule to run out", func() bool {
		got := fixture.GetPayment(t, env.Client, p)
		if got.Status.Query.ConsecutiveErrors > 0 && got.Status.Query.LastError != "" && got.Status.Query.UnansweredSince != nil {
			sawErrors = true
		}
		return got.Status.Phase == v1alpha1.PhaseUnknown
	})
	got := fixture.GetPayment(t, env.Client, p)
	for _, h := range got.Status.History {
		if h.To == v1alpha1.PhaseFailed {
			t.Errorf("a failing query failed the payment: %+v", h)
		}
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Reason != v1alpha1.ReasonRetriesExhausted {
		t.Errorf("NeedsReview = %+v, want RetriesExhausted", c)
	}
	if !sawErrors {
		t.Errorf("query errors were never recorded in status.query")
	}
	f := s.Counters().APIFaults
	if f.ServerErrors == 0 || f.TooManyRequests == 0 || f.Slow == 0 {
		t.Fatalf("not every fault kind was exercised: %+v", f)
	}
	gets := m.Requests.Calls(fixture.IsGet)
	answered := 0
	for i, g := range gets {
		if g.Status == http.StatusOK {
			answered++
		}
		if i == 0 {
			continue
		}
		gap := g.At.Sub(gets[i-1].At)
		if gap < 90*time.Millisecond {
			t.Errorf("queries %d and %d only %s apart", i-1, i, gap)
		}
		if gets[i-1].Status == http.StatusTooManyRequests && gap < time.Second {
			t.Errorf("query %d came %s after a 429 with Retry-After: 1", i, gap)
		}
	}
	if answered != len(schedule) || got.Status.Query.Attempts != int32(len(schedule)) {
		t.Errorf("%d answered queries and %d attempts, want %d: only answers consume attempts", answered, got.Status.Query.Attempts, len(schedule))
	}
	if len(gets) <= answered {
		t.Errorf("%d queries, all answered: the faults were not exercised", len(gets))
	}
}

// TestRetryAfterIsHonoured: a provider that keeps answering 429 is asked
// again no sooner than its Retry-After, and the payment keeps its place in
// the schedule.
func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"50ms", "50ms", "50ms"}, Failures: 100})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	// Every status query is throttled from the start (the create goes
	// through), so no answer can land between the create and the 429s
	// however slowly the test runs; the provider moves the payment to
	// processing after 1 s, which paywarden must not learn.
	s.SetFaults(paysim.Faults{TooManyRequestsRate: 1, RetryAfter: time.Second, Operations: []string{paysim.OpGet}})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "throttled", Provider: "kukopay", Outcome: paysim.OutcomeProcessing, After: "1s"})
	fixture.Eventually(t, 10*time.Second, "the payment to exist at the provider", func() bool { return fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID != "" })
	before := fixture.GetPayment(t, env.Client, p).Status.Query.Attempts
	fixture.Eventually(t, 20*time.Second, "four throttled queries", func() bool {
		n := 0
		for _, g := range m.Requests.Calls(fixture.IsGet) {
			if g.Status == http.StatusTooManyRequests {
				n++
			}
		}
		return n >= 4
	})
	gets := m.Requests.Calls(fixture.IsGet)
	for i := 1; i < len(gets); i++ {
		if gets[i-1].Status != http.StatusTooManyRequests {
			continue
		}
		if gap := gets[i].At.Sub(gets[i-1].At); gap < time.Second {
			t.Errorf("query %d came %s after a 429 with Retry-After: 1", i, gap)
		}
	}
	got := fixture.GetPayment(t, env.Client, p)
	if got.Status.Phase != v1alpha1.PhasePending || got.Status.Query.Attempts > before+1 {
		t.Errorf("phase %s attempts %d (were %d before the 429s): throttling consumed the schedule", got.Status.Phase, got.Status.Query.Attempts, before)
	}
	if !strings.Contains(got.Status.Query.LastError, "429") {
		t.Errorf("lastError %q, want the 429", got.Status.Query.LastError)
	}
}

func TestExhaustedScheduleStopsQuerying(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"100ms", "100ms", "100ms"}})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "stuck", Provider: "kukopay", Outcome: paysim.OutcomeProcessing, After: "1s"})

	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseUnknown, 20*time.Second)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonRetriesExhausted {
		t.Fatalf("NeedsReview = %+v, want True/RetriesExhausted", c)
	}
	if got.Status.Query.Attempts != 3 || got.Status.Query.NextTime != nil {
		t.Errorf("query status %+v, want 3 attempts and no next time", got.Status.Query)
	}
	m.Events.Wait(t, corev1.EventTypeWarning, v1alpha1.ReasonRetriesExhausted)
	before := s.Counters().QueriesByPayment[got.Status.ProviderPaymentID]
	// Resyncs (any update) must not query again: the reconcile of the update
	// makes no query and arranges none.
	touched := fixture.Annotate(t, env.Client, p, "resync", "1")
	r := m.Reconciles.WaitSeen(t, controllers.ControllerPayment, p, touched)
	if after := s.Counters().QueriesByPayment[got.Status.ProviderPaymentID]; after != before {
		t.Errorf("%d more queries after the schedule was exhausted", after-before)
	}
	if r.Scheduled() {
		t.Errorf("the resync of an exhausted payment scheduled another reconcile: %+v", r)
	}
}

func TestRestartContinuesTheSchedule(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	kukopayAt(t, ns, fixture.Provider{Schedule: []string{"100ms", "3s", "3s", "3s"}})
	first := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	var payments []*v1alpha1.Payment
	for i := 0; i < 5; i++ {
		payments = append(payments, fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: fmt.Sprintf("restart-%d", i), Provider: "kukopay", Outcome: paysim.OutcomeProcessing, After: "1s"}))
	}
	for _, p := range payments {
		fixture.Eventually(t, 10*time.Second, p.Name+" to be queried once", func() bool { return fixture.GetPayment(t, env.Client, p).Status.Query.Attempts >= 1 })
	}
	first.Stop()
	due := map[string]time.Time{}
	for _, p := range payments {
		got := fixture.GetPayment(t, env.Client, p)
		due[got.Status.ProviderPaymentID] = got.Status.Query.NextTime.Time
	}

	second := first.Restart(t)
	for _, p := range payments {
		fixture.Eventually(t, 15*time.Second, p.Name+" to be queried again", func() bool { return fixture.GetPayment(t, env.Client, p).Status.Query.Attempts >= 2 })
	}
	gets := second.Requests.Calls(fixture.IsGet)
	if len(gets) != len(payments) {
		t.Errorf("%d queries after the restart, want %d (one per payment, no burst)", len(gets), len(payments))
	}
	for _, g := range gets {
		id := g.Path[strings.LastIndex(g.Path, "/")+1:]
		// nextTime is stored with second precision; allow for its truncation.
		if g.At.Before(due[id].Add(-time.Second)) {
			t.Errorf("payment %s queried at %s, before its stored nextTime %s", id, g.At.Format(time.StampMilli), due[id].Format(time.StampMilli))
		}
	}
}

func TestRateLimitBoundsProviderCalls(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("200 payments at 10 qps take about 20 s")
	}
	ns := fixture.Namespace(t, env.Client, "pay")
	s := fixture.StartSim(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeProcessing, After: time.Second}})
	fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Schedule: []string{"1h"}, QPS: 10, Burst: 20})
	adapter, err := kukopay.New(provider.Config{Name: "seed", APIURL: s.URL + "/kukopay", Credentials: map[string][]byte{"apiKey": []byte("k")}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := 0; i < n; i++ {
		made, err := adapter.Create(context.Background(), provider.CreateRequest{IdempotencyKey: fmt.Sprint("seed-", i), MerchantReference: fmt.Sprint("seed-", i), Amount: 100, Currency: "USD"})
		if err != nil {
			t.Fatal(err)
		}
		fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: fmt.Sprintf("due-%03d", i), Provider: "kukopay", Amount: 100, ProviderPaymentID: made.ID})
	}
	// All 200 tracked payments are due at once when the manager starts.
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	// 20 s at 10 qps; a loaded CI machine has taken 110 s to start and
	// reconcile 200 payments.
	fixture.Eventually(t, 3*time.Minute, "every payment to be queried", func() bool { return len(m.Requests.Calls(fixture.IsGet)) >= n })
	gets := m.Requests.Calls(fixture.IsGet)
	// Token bucket: in any interval [t_i, t_j], at most burst + qps·(t_j − t_i)
	// calls. Times are taken when a request leaves, a little after the
	// limiter admitted it, so two calls of slack absorb scheduling delay on
	// a busy machine; without the limiter the excess would be in the hundreds.
	worst := 0.0
	for i := range gets {
		for j := i; j < len(gets); j++ {
			allowed := 20 + 10*gets[j].At.Sub(gets[i].At).Seconds() + 2
			if excess := float64(j-i+1) - allowed; excess > worst {
				worst = excess
			}
		}
	}
	if worst > 0 {
		t.Errorf("provider saw %.1f calls more than the bucket allows in some window", worst)
	}
	span := gets[len(gets)-1].At.Sub(gets[0].At)
	t.Logf("%d queries in %s (%.1f/s)", len(gets), span, float64(len(gets))/span.Seconds())
	if span < 15*time.Second {
		t.Errorf("200 queries in %s: the limiter did not hold them to 10/s", span)
	}
}

func TestCircuitBreakerDefersWithoutConsumingAttempts(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	schedule := make([]string, 10)
	for i := range schedule {
		schedule[i] = "100ms"
	}
	s, prov := kukopayAt(t, ns, fixture.Provider{Schedule: schedule, Failures: 3, OpenFor: "1s"})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	// Succeeds 1 s after creation (100 simulated seconds): after the outage
	// has begun, so the answer can only arrive through the recovered circuit.
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "outage", Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "100s"})
	fixture.Eventually(t, 10*time.Second, "the payment to exist at the provider", func() bool { return fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID != "" })

	s.SetFaults(paysim.Faults{ServerErrorRate: 1})
	before := fixture.GetPayment(t, env.Client, p).Status.Query.Attempts
	fixture.Eventually(t, 10*time.Second, "the provider to be Degraded", func() bool {
		got := fixture.GetProvider(t, env.Client, ns, prov.Name)
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && got.Status.Circuit.State != v1alpha1.CircuitClosed
	})
	// Three seconds of outage: without deferral the 100 ms schedule would be
	// exhausted ten times over. The outage is the behaviour under test, so
	// real time passes; the payment must have been reconciled meanwhile, or
	// the assertions below would prove nothing.
	outage := m.Reconciles.Mark()
	time.Sleep(3 * time.Second)
	if n := len(m.Reconciles.Since(outage, controllers.ControllerPayment, p)); n == 0 {
		t.Fatal("the payment was not reconciled during the outage")
	}
	during := fixture.GetPayment(t, env.Client, p)
	if during.Status.Phase == v1alpha1.PhaseUnknown {
		t.Fatalf("the outage pushed the payment into Unknown: %+v", during.Status.Query)
	}
	// Failed calls and failed probes consume nothing; one answered query
	// may have been in flight when the outage began.
	if during.Status.Query.Attempts > before+1 {
		t.Errorf("%d attempts consumed during a 3 s outage (%d before it)", during.Status.Query.Attempts, before)
	}

	s.SetFaults(paysim.Faults{})
	fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	fixture.Eventually(t, 10*time.Second, "the provider to recover", func() bool {
		got := fixture.GetProvider(t, env.Client, ns, prov.Name)
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionFalse && got.Status.Circuit.State == v1alpha1.CircuitClosed
	})
	m.Events.Wait(t, corev1.EventTypeWarning, "CircuitOpen")
	m.Events.Wait(t, corev1.EventTypeNormal, "CircuitClosed")
}

func TestUnpaidCloseOut(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h", "1h"}})
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	// expiresAfter leaves room for the creates on a loaded machine: one
	// not sent by then is expired locally, never created (another rule).
	unpaid := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "unpaid", Provider: "kukopay", Outcome: paysim.OutcomePending, ExpiresAfter: "6s"})
	inFlight := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "in-flight", Provider: "kukopay", Outcome: paysim.OutcomeProcessing, After: "1s", ExpiresAfter: "6s"})

	got := fixture.WaitPhase(t, env.Client, unpaid, v1alpha1.PhaseExpired, 30*time.Second)
	// Closed at the provider first: the payer cannot pay it any more.
	if got.Status.ExpiredLocally {
		t.Errorf("closed out locally; want it closed at the provider first (KukoPay can cancel)")
	}
	if v, ok := s.Payment("kukopay", got.Status.ProviderPaymentID); !ok || v.State != "canceled" {
		t.Errorf("paysim holds the payment as %q, want canceled", v.State)
	}
	last := got.Status.History[len(got.Status.History)-1]
	if !strings.HasPrefix(last.Reason, v1alpha1.ReasonUnpaidTimeout) {
		t.Errorf("history reason %q, want UnpaidTimeout", last.Reason)
	}
	// The provider says the other payment is being processed: money may be
	// moving, so it is not closed out.
	fixture.Eventually(t, 10*time.Second, "the in-flight payment's fresh query", func() bool {
		return fixture.GetPayment(t, env.Client, inFlight).Status.Query.Attempts >= 1
	})
	if ph := fixture.GetPayment(t, env.Client, inFlight).Status.Phase; ph != v1alpha1.PhaseProcessing {
		t.Errorf("a payment the provider reports as processing was closed out: %s", ph)
	}
}

func TestTrackedPaymentNeverCreates(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	adapter, err := kukopay.New(provider.Config{Name: "checkout", APIURL: s.URL + "/kukopay", Credentials: map[string][]byte{"apiKey": []byte("k")}})
	if err != nil {
		t.Fatal(err)
	}
	made, err := adapter.Create(context.Background(), provider.CreateRequest{
		IdempotencyKey: "checkout-1", MerchantReference: "checkout-1", Amount: 1999, Currency: "USD",
		Metadata: map[string]string{paysim.MetaOutcome: string(paysim.OutcomeSucceed), paysim.MetaAfter: "10s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.ResetCounters()
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "tracked", Provider: "kukopay", ProviderPaymentID: made.ID, MerchantReference: "checkout-1"})
	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	if c := s.Counters(); c.CreateRequests != 0 || c.PaymentsCreated != 0 {
		t.Errorf("a tracked payment made %d create calls", c.CreateRequests)
	}
	if got.Status.ProviderPaymentID != made.ID || got.Status.CreateRequestedAt != nil {
		t.Errorf("tracked status: id %q createRequestedAt %v", got.Status.ProviderPaymentID, got.Status.CreateRequestedAt)
	}
}

func TestAmountMismatchThenOperatorActions(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "short-paid", Provider: "kukopay", Outcome: paysim.OutcomeMismatch, After: "10s"})

	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseUnknown, 20*time.Second)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Reason != v1alpha1.ReasonAmountMismatch {
		t.Fatalf("NeedsReview = %+v, want AmountMismatch", c)
	}
	m.Events.Wait(t, corev1.EventTypeWarning, v1alpha1.ReasonAmountMismatch)
	id := got.Status.ProviderPaymentID

	// requery: one fresh query, remembered so it is acted on once.
	before := s.Counters().QueriesByPayment[id]
	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationRequery, "1")
	fixture.Eventually(t, 10*time.Second, "the requery", func() bool { return fixture.GetPayment(t, env.Client, p).Status.Actions.Requery == "1" })
	fixture.Eventually(t, 10*time.Second, "the requery's query", func() bool { return s.Counters().QueriesByPayment[id] > before })
	// The mismatch is still there: the schedule runs out again, in Unknown.
	fixture.Eventually(t, 20*time.Second, "the restarted schedule to end", func() bool { return fixture.GetPayment(t, env.Client, p).Status.Query.NextTime == nil })
	afterRequery := s.Counters().QueriesByPayment[id]
	touched := fixture.Annotate(t, env.Client, p, "unrelated", "x")
	r := m.Reconciles.WaitSeen(t, controllers.ControllerPayment, p, touched)
	if n := s.Counters().QueriesByPayment[id]; n != afterRequery {
		t.Errorf("the same requery value was acted on again (%d more queries)", n-afterRequery)
	}
	if r.Scheduled() {
		t.Errorf("the same requery value scheduled another reconcile: %+v", r)
	}
	if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != v1alpha1.PhaseUnknown {
		t.Errorf("phase %s after requery, want Unknown (only a final answer or an operator leaves it)", got.Status.Phase)
	}

	// resolve: a Manual observation, once.
	fresh := fixture.GetPayment(t, env.Client, p)
	patch := client.MergeFrom(fresh.DeepCopy())
	fresh.Annotations[v1alpha1.AnnotationResolve] = "Succeeded"
	fresh.Annotations[v1alpha1.AnnotationResolveReason] = "customer paid the difference by bank transfer"
	if err := env.Client.Patch(context.Background(), fresh, patch); err != nil {
		t.Fatal(err)
	}
	got = fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 10*time.Second)
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("NeedsReview = %+v, want cleared", c)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", c)
	}
	last := got.Status.History[len(got.Status.History)-1]
	if last.Source != v1alpha1.SourceManual || !strings.Contains(last.Reason, "bank transfer") {
		t.Errorf("last history entry %+v, want the manual resolve with its reason", last)
	}
	manual := 0
	touched = fixture.Annotate(t, env.Client, p, "unrelated", "y")
	if r := m.Reconciles.WaitSeen(t, controllers.ControllerPayment, p, touched); r.Scheduled() {
		t.Errorf("the same resolve value scheduled another reconcile: %+v", r)
	}
	for _, h := range fixture.GetPayment(t, env.Client, p).Status.History {
		if h.Source == v1alpha1.SourceManual && strings.Contains(h.Reason, "bank transfer") {
			manual++
		}
	}
	if manual != 1 {
		t.Errorf("resolve applied %d times, want once", manual)
	}
}

func TestSettledPaymentIsNeverRewritten(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "settled", Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "1s"})
	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	m.Writes.WaitRecorded(t, got)
	stored := m.Writes.Status(p)
	queries := s.Counters().QueriesByPayment[got.Status.ProviderPaymentID]
	// Each touch is an update event: a reconcile of a settled payment. Once
	// the last one is reconciled, so are the others (reconciles of one
	// payment never overlap), and a reconcile that arranged no other can
	// have no later effect.
	var touched *v1alpha1.Payment
	for i := 0; i < 10; i++ {
		touched = fixture.Annotate(t, env.Client, p, "resync", fmt.Sprint(i))
	}
	if r := m.Reconciles.WaitSeen(t, controllers.ControllerPayment, p, touched); r.Scheduled() {
		t.Errorf("a resync of a settled payment scheduled another reconcile: %+v", r)
	}
	if n := m.Writes.Status(p); n != stored {
		t.Errorf("%d status writes during 10 resyncs of a settled payment, want 0", n-stored)
	}
	if n := s.Counters().QueriesByPayment[got.Status.ProviderPaymentID]; n != queries {
		t.Errorf("%d provider queries for a settled payment", n-queries)
	}
	if rv := fixture.GetPayment(t, env.Client, p).Status; rv.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("phase changed to %s", rv.Phase)
	}
}
