package controllers_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// fast is a compressed schedule: the real one's shape in milliseconds.
var fast = []string{"150ms", "150ms", "150ms", "300ms", "300ms", "300ms"}

func TestHappyPath(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: fast})
	m := startManager(t, ns, managerOptions{})
	// Succeeds 40 simulated seconds after creation (0.4 s here): the first
	// query finds it Processing, a later one Succeeded.
	p := createPayment(t, ns, "order-1", "kukopay", paymentOptions{outcome: paysim.OutcomeSucceed, after: "40s"})

	got := waitPhase(t, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
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
	m.waitEvent(t, "Normal Succeeded")
	c := s.Counters()
	if c.PaymentsCreated != 1 || c.CreateRequests != 1 {
		t.Errorf("provider saw %d creates and made %d payments, want 1 and 1", c.CreateRequests, c.PaymentsCreated)
	}
	queries := c.QueriesByPayment[got.Status.ProviderPaymentID]
	t.Logf("happy path: %d status writes, %d provider calls (1 create + %d status queries), history %v",
		m.writes.count(p.Name), c.CreateRequests+queries, queries, path)
}

// TestCrashBetweenCreateAndStatusWriteDoesNotChargeTwice: the manager dies
// after the provider created the payment and before the answer was stored.
// The next manager finds the create marker without an id and repeats the
// create with the same idempotency key: the provider replays its first
// answer, so there is one payment.
func TestCrashBetweenCreateAndStatusWriteDoesNotChargeTwice(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: fast})
	var lost atomic.Int32
	first := startManager(t, ns, managerOptions{wrap: func(c client.Client) client.Client {
		return intercept(c, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if p, ok := obj.(*v1alpha1.Payment); ok && p.Status.ProviderPaymentID != "" {
					lost.Add(1)
					return errInjected // the manager died before this write
				}
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		})
	}})
	p := createPayment(t, ns, "crash", "kukopay", paymentOptions{outcome: paysim.OutcomeSucceed, after: "10s"})
	eventually(t, 10*time.Second, "the create's answer to be lost", func() bool { return lost.Load() >= 1 })
	first.stop() // the crash: whatever the first manager kept in memory is gone

	startManager(t, ns, managerOptions{})
	got := waitPhase(t, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	c := s.Counters()
	key := "kukopay/" + string(got.UID)
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
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: fast})
	writes := &writeCounter{failNext: func(p *v1alpha1.Payment) bool { return p.Status.ProviderPaymentID != "" }}
	startManager(t, ns, managerOptions{writes: writes})
	p := createPayment(t, ns, "write-lost", "kukopay", paymentOptions{outcome: paysim.OutcomeSucceed, after: "10s"})
	got := waitPhase(t, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	if writes.failed.Load() != 1 {
		t.Fatalf("the write after the create was not failed (failed=%d)", writes.failed.Load())
	}
	if n := s.Counters().CreatesByKey["kukopay/"+string(got.UID)]; n != 1 {
		t.Errorf("%d creates, want 1: the kept answer must be stored, not asked for again", n)
	}
}

func TestKeyWindowPassedWithoutRecordNeedsReview(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: fast, keyWindow: "1h"})
	p := createPayment(t, ns, "lost-create", "kukopay", paymentOptions{})
	// A create was requested two hours ago and its outcome never recorded.
	long := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhasePending, CreateRequestedAt: &long}
	if err := env.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	startManager(t, ns, managerOptions{})

	got := waitPhase(t, p, v1alpha1.PhaseUnknown, 20*time.Second)
	c := condition(got, v1alpha1.ConditionNeedsReview)
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
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: fast, keyWindow: "1h"})
	p := createPayment(t, ns, "found-later", "kukopay", paymentOptions{})
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
	startManager(t, ns, managerOptions{})

	eventually(t, 20*time.Second, "the found payment to be adopted", func() bool {
		return get(t, p).Status.ProviderPaymentID == made.ID
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
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	schedule := []string{"100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms", "100ms"}
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: schedule, timeout: "300ms", failures: 100})
	m := startManager(t, ns, managerOptions{})
	p := createPayment(t, ns, "flaky", "kukopay", paymentOptions{outcome: paysim.OutcomeProcessing, after: "1s"})
	eventually(t, 10*time.Second, "the payment to exist at the provider", func() bool { return get(t, p).Status.ProviderPaymentID != "" })
	s.SetFaults(paysim.Faults{ServerErrorRate: 0.4, TooManyRequestsRate: 0.3, RetryAfter: time.Second, SlowRate: 0.3, SlowDelay: time.Second})

	sawErrors := false
	eventually(t, 90*time.Second, "the schedule to run out", func() bool {
		got := get(t, p)
		if got.Status.Query.ConsecutiveErrors > 0 && got.Status.Query.LastError != "" && got.Status.Query.UnansweredSince != nil {
			sawErrors = true
		}
		return got.Status.Phase == v1alpha1.PhaseUnknown
	})
	got := get(t, p)
	for _, h := range got.Status.History {
		if h.To == v1alpha1.PhaseFailed {
			t.Errorf("a failing query failed the payment: %+v", h)
		}
	}
	if c := condition(got, v1alpha1.ConditionNeedsReview); c == nil || c.Reason != v1alpha1.ReasonRetriesExhausted {
		t.Errorf("NeedsReview = %+v, want RetriesExhausted", c)
	}
	if !sawErrors {
		t.Errorf("query errors were never recorded in status.query")
	}
	f := s.Counters().APIFaults
	if f.ServerErrors == 0 || f.TooManyRequests == 0 || f.Slow == 0 {
		t.Fatalf("not every fault kind was exercised: %+v", f)
	}
	gets := m.requests.snapshot(isGet)
	answered := 0
	for i, g := range gets {
		if g.status == http.StatusOK {
			answered++
		}
		if i == 0 {
			continue
		}
		gap := g.at.Sub(gets[i-1].at)
		if gap < 90*time.Millisecond {
			t.Errorf("queries %d and %d only %s apart", i-1, i, gap)
		}
		if gets[i-1].status == http.StatusTooManyRequests && gap < time.Second {
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
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: []string{"50ms", "50ms", "50ms"}, failures: 100})
	m := startManager(t, ns, managerOptions{})
	p := createPayment(t, ns, "throttled", "kukopay", paymentOptions{outcome: paysim.OutcomeProcessing, after: "1s"})
	eventually(t, 10*time.Second, "the payment to exist at the provider", func() bool { return get(t, p).Status.ProviderPaymentID != "" })
	s.SetFaults(paysim.Faults{TooManyRequestsRate: 1, RetryAfter: time.Second})
	before := get(t, p).Status.Query.Attempts
	eventually(t, 20*time.Second, "four throttled queries", func() bool {
		n := 0
		for _, g := range m.requests.snapshot(isGet) {
			if g.status == http.StatusTooManyRequests {
				n++
			}
		}
		return n >= 4
	})
	gets := m.requests.snapshot(isGet)
	for i := 1; i < len(gets); i++ {
		if gets[i-1].status != http.StatusTooManyRequests {
			continue
		}
		if gap := gets[i].at.Sub(gets[i-1].at); gap < time.Second {
			t.Errorf("query %d came %s after a 429 with Retry-After: 1", i, gap)
		}
	}
	got := get(t, p)
	if got.Status.Phase != v1alpha1.PhasePending || got.Status.Query.Attempts > before+1 {
		t.Errorf("phase %s attempts %d (were %d before the 429s): throttling consumed the schedule", got.Status.Phase, got.Status.Query.Attempts, before)
	}
	if !strings.Contains(got.Status.Query.LastError, "429") {
		t.Errorf("lastError %q, want the 429", got.Status.Query.LastError)
	}
}

func TestExhaustedScheduleStopsQuerying(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: []string{"100ms", "100ms", "100ms"}})
	m := startManager(t, ns, managerOptions{})
	p := createPayment(t, ns, "stuck", "kukopay", paymentOptions{outcome: paysim.OutcomeProcessing, after: "1s"})

	got := waitPhase(t, p, v1alpha1.PhaseUnknown, 20*time.Second)
	if c := condition(got, v1alpha1.ConditionNeedsReview); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonRetriesExhausted {
		t.Fatalf("NeedsReview = %+v, want True/RetriesExhausted", c)
	}
	if got.Status.Query.Attempts != 3 || got.Status.Query.NextTime != nil {
		t.Errorf("query status %+v, want 3 attempts and no next time", got.Status.Query)
	}
	m.waitEvent(t, "Warning "+v1alpha1.ReasonRetriesExhausted)
	before := s.Counters().QueriesByPayment[got.Status.ProviderPaymentID]
	// Resyncs (any update) must not query again.
	touch(t, p, "resync", "1")
	time.Sleep(time.Second)
	if after := s.Counters().QueriesByPayment[got.Status.ProviderPaymentID]; after != before {
		t.Errorf("%d more queries after the schedule was exhausted", after-before)
	}
}

func touch(t *testing.T, p *v1alpha1.Payment, key, value string) {
	t.Helper()
	fresh := get(t, p)
	patch := client.MergeFrom(fresh.DeepCopy())
	if fresh.Annotations == nil {
		fresh.Annotations = map[string]string{}
	}
	fresh.Annotations[key] = value
	if err := env.Client.Patch(context.Background(), fresh, patch); err != nil {
		t.Fatal(err)
	}
}

func TestRestartContinuesTheSchedule(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: []string{"100ms", "3s", "3s", "3s"}})
	first := startManager(t, ns, managerOptions{})
	var payments []*v1alpha1.Payment
	for i := 0; i < 5; i++ {
		payments = append(payments, createPayment(t, ns, fmt.Sprintf("restart-%d", i), "kukopay", paymentOptions{outcome: paysim.OutcomeProcessing, after: "1s"}))
	}
	for _, p := range payments {
		eventually(t, 10*time.Second, p.Name+" to be queried once", func() bool { return get(t, p).Status.Query.Attempts >= 1 })
	}
	first.stop()
	due := map[string]time.Time{}
	for _, p := range payments {
		got := get(t, p)
		due[got.Status.ProviderPaymentID] = got.Status.Query.NextTime.Time
	}

	second := startManager(t, ns, managerOptions{})
	for _, p := range payments {
		eventually(t, 15*time.Second, p.Name+" to be queried again", func() bool { return get(t, p).Status.Query.Attempts >= 2 })
	}
	gets := second.requests.snapshot(isGet)
	if len(gets) != len(payments) {
		t.Errorf("%d queries after the restart, want %d (one per payment, no burst)", len(gets), len(payments))
	}
	for _, g := range gets {
		id := g.path[strings.LastIndex(g.path, "/")+1:]
		// nextTime is stored with second precision; allow for its truncation.
		if g.at.Before(due[id].Add(-time.Second)) {
			t.Errorf("payment %s queried at %s, before its stored nextTime %s", id, g.at.Format(time.StampMilli), due[id].Format(time.StampMilli))
		}
	}
}

func TestRateLimitBoundsProviderCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("200 payments at 10 qps take about 20 s")
	}
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeProcessing, After: time.Second}})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: []string{"1h"}, qps: 10, burst: 20})
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
		createPayment(t, ns, fmt.Sprintf("due-%03d", i), "kukopay", paymentOptions{amount: 100, tracked: made.ID})
	}
	// All 200 tracked payments are due at once when the manager starts.
	m := startManager(t, ns, managerOptions{})
	eventually(t, 60*time.Second, "every payment to be queried", func() bool { return len(m.requests.snapshot(isGet)) >= n })
	gets := m.requests.snapshot(isGet)
	// Token bucket: in any interval [t_i, t_j], at most burst + qps·(t_j − t_i)
	// calls. Times are taken when a request leaves, a little after the
	// limiter admitted it, so two calls of slack absorb scheduling delay on
	// a busy machine; without the limiter the excess would be in the hundreds.
	worst := 0.0
	for i := range gets {
		for j := i; j < len(gets); j++ {
			allowed := 20 + 10*gets[j].at.Sub(gets[i].at).Seconds() + 2
			if excess := float64(j-i+1) - allowed; excess > worst {
				worst = excess
			}
		}
	}
	if worst > 0 {
		t.Errorf("provider saw %.1f calls more than the bucket allows in some window", worst)
	}
	span := gets[len(gets)-1].at.Sub(gets[0].at)
	t.Logf("%d queries in %s (%.1f/s)", len(gets), span, float64(len(gets))/span.Seconds())
	if span < 15*time.Second {
		t.Errorf("200 queries in %s: the limiter did not hold them to 10/s", span)
	}
}

func TestCircuitBreakerDefersWithoutConsumingAttempts(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	schedule := make([]string, 10)
	for i := range schedule {
		schedule[i] = "100ms"
	}
	prov := createProvider(t, ns, "kukopay", s, providerOptions{schedule: schedule, failures: 3, openFor: "1s"})
	m := startManager(t, ns, managerOptions{})
	// Succeeds 1 s after creation (100 simulated seconds): after the outage
	// has begun, so the answer can only arrive through the recovered circuit.
	p := createPayment(t, ns, "outage", "kukopay", paymentOptions{outcome: paysim.OutcomeSucceed, after: "100s"})
	eventually(t, 10*time.Second, "the payment to exist at the provider", func() bool { return get(t, p).Status.ProviderPaymentID != "" })

	s.SetFaults(paysim.Faults{ServerErrorRate: 1})
	before := get(t, p).Status.Query.Attempts
	eventually(t, 10*time.Second, "the provider to be Degraded", func() bool {
		got := &v1alpha1.PaymentProvider{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(prov), got); err != nil {
			t.Fatal(err)
		}
		c := findCondition(got.Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionTrue && got.Status.Circuit.State != v1alpha1.CircuitClosed
	})
	// Three seconds of outage: without deferral the 100 ms schedule would be
	// exhausted ten times over.
	time.Sleep(3 * time.Second)
	during := get(t, p)
	if during.Status.Phase == v1alpha1.PhaseUnknown {
		t.Fatalf("the outage pushed the payment into Unknown: %+v", during.Status.Query)
	}
	// Failed calls and failed probes consume nothing; one answered query
	// may have been in flight when the outage began.
	if during.Status.Query.Attempts > before+1 {
		t.Errorf("%d attempts consumed during a 3 s outage (%d before it)", during.Status.Query.Attempts, before)
	}

	s.SetFaults(paysim.Faults{})
	waitPhase(t, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	eventually(t, 10*time.Second, "the provider to recover", func() bool {
		got := &v1alpha1.PaymentProvider{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(prov), got); err != nil {
			t.Fatal(err)
		}
		c := findCondition(got.Status.Conditions, v1alpha1.ConditionDegraded)
		return c != nil && c.Status == metav1.ConditionFalse && got.Status.Circuit.State == v1alpha1.CircuitClosed
	})
	m.waitEvent(t, "Warning CircuitOpen")
	m.waitEvent(t, "Normal CircuitClosed")
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

func TestUnpaidCloseOut(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: []string{"1h", "1h"}})
	startManager(t, ns, managerOptions{})
	unpaid := createPayment(t, ns, "unpaid", "kukopay", paymentOptions{outcome: paysim.OutcomePending, expires: "2s"})
	inFlight := createPayment(t, ns, "in-flight", "kukopay", paymentOptions{outcome: paysim.OutcomeProcessing, after: "1s", expires: "2s"})

	got := waitPhase(t, unpaid, v1alpha1.PhaseExpired, 20*time.Second)
	if !got.Status.ExpiredLocally {
		t.Errorf("close-out not marked local")
	}
	last := got.Status.History[len(got.Status.History)-1]
	if !strings.HasPrefix(last.Reason, v1alpha1.ReasonUnpaidTimeout) {
		t.Errorf("history reason %q, want UnpaidTimeout", last.Reason)
	}
	// The provider says the other payment is being processed: money may be
	// moving, so it is not closed out.
	eventually(t, 10*time.Second, "the in-flight payment's fresh query", func() bool {
		return get(t, inFlight).Status.Query.Attempts >= 1
	})
	if ph := get(t, inFlight).Status.Phase; ph != v1alpha1.PhaseProcessing {
		t.Errorf("a payment the provider reports as processing was closed out: %s", ph)
	}
}

func TestTrackedPaymentNeverCreates(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: fast})
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
	startManager(t, ns, managerOptions{})
	p := createPayment(t, ns, "tracked", "kukopay", paymentOptions{tracked: made.ID, reference: "checkout-1"})
	got := waitPhase(t, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	if c := s.Counters(); c.CreateRequests != 0 || c.PaymentsCreated != 0 {
		t.Errorf("a tracked payment made %d create calls", c.CreateRequests)
	}
	if got.Status.ProviderPaymentID != made.ID || got.Status.CreateRequestedAt != nil {
		t.Errorf("tracked status: id %q createRequestedAt %v", got.Status.ProviderPaymentID, got.Status.CreateRequestedAt)
	}
}

func TestAmountMismatchThenOperatorActions(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: fast})
	m := startManager(t, ns, managerOptions{})
	p := createPayment(t, ns, "short-paid", "kukopay", paymentOptions{outcome: paysim.OutcomeMismatch, after: "10s"})

	got := waitPhase(t, p, v1alpha1.PhaseUnknown, 20*time.Second)
	if c := condition(got, v1alpha1.ConditionNeedsReview); c == nil || c.Reason != v1alpha1.ReasonAmountMismatch {
		t.Fatalf("NeedsReview = %+v, want AmountMismatch", c)
	}
	m.waitEvent(t, "Warning "+v1alpha1.ReasonAmountMismatch)
	id := got.Status.ProviderPaymentID

	// requery: one fresh query, remembered so it is acted on once.
	before := s.Counters().QueriesByPayment[id]
	touch(t, p, v1alpha1.AnnotationRequery, "1")
	eventually(t, 10*time.Second, "the requery", func() bool { return get(t, p).Status.Actions.Requery == "1" })
	eventually(t, 10*time.Second, "the requery's query", func() bool { return s.Counters().QueriesByPayment[id] > before })
	// The mismatch is still there: the schedule runs out again, in Unknown.
	eventually(t, 20*time.Second, "the restarted schedule to end", func() bool { return get(t, p).Status.Query.NextTime == nil })
	afterRequery := s.Counters().QueriesByPayment[id]
	touch(t, p, "unrelated", "x")
	time.Sleep(500 * time.Millisecond)
	if n := s.Counters().QueriesByPayment[id]; n != afterRequery {
		t.Errorf("the same requery value was acted on again (%d more queries)", n-afterRequery)
	}
	if got := get(t, p); got.Status.Phase != v1alpha1.PhaseUnknown {
		t.Errorf("phase %s after requery, want Unknown (only a final answer or an operator leaves it)", got.Status.Phase)
	}

	// resolve: a Manual observation, once.
	fresh := get(t, p)
	patch := client.MergeFrom(fresh.DeepCopy())
	fresh.Annotations[v1alpha1.AnnotationResolve] = "Succeeded"
	fresh.Annotations[v1alpha1.AnnotationResolveReason] = "customer paid the difference by bank transfer"
	if err := env.Client.Patch(context.Background(), fresh, patch); err != nil {
		t.Fatal(err)
	}
	got = waitPhase(t, p, v1alpha1.PhaseSucceeded, 10*time.Second)
	if c := condition(got, v1alpha1.ConditionNeedsReview); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("NeedsReview = %+v, want cleared", c)
	}
	if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", c)
	}
	last := got.Status.History[len(got.Status.History)-1]
	if last.Source != v1alpha1.SourceManual || !strings.Contains(last.Reason, "bank transfer") {
		t.Errorf("last history entry %+v, want the manual resolve with its reason", last)
	}
	manual := 0
	touch(t, p, "unrelated", "y")
	time.Sleep(500 * time.Millisecond)
	for _, h := range get(t, p).Status.History {
		if h.Source == v1alpha1.SourceManual && strings.Contains(h.Reason, "bank transfer") {
			manual++
		}
	}
	if manual != 1 {
		t.Errorf("resolve applied %d times, want once", manual)
	}
}

func TestSettledPaymentIsNeverRewritten(t *testing.T) {
	ns := newNamespace(t)
	s := startSim(t, paysim.Options{})
	createProvider(t, ns, "kukopay", s, providerOptions{schedule: fast})
	m := startManager(t, ns, managerOptions{})
	p := createPayment(t, ns, "settled", "kukopay", paymentOptions{outcome: paysim.OutcomeSucceed, after: "1s"})
	got := waitPhase(t, p, v1alpha1.PhaseSucceeded, 20*time.Second)
	writes := m.writes.count(p.Name)
	queries := s.Counters().QueriesByPayment[got.Status.ProviderPaymentID]
	// Each touch is an update event: a reconcile of a settled payment.
	for i := 0; i < 10; i++ {
		touch(t, p, "resync", fmt.Sprint(i))
	}
	time.Sleep(time.Second)
	if n := m.writes.count(p.Name); n != writes {
		t.Errorf("%d status writes during 10 resyncs of a settled payment, want 0", n-writes)
	}
	if n := s.Counters().QueriesByPayment[got.Status.ProviderPaymentID]; n != queries {
		t.Errorf("%d provider queries for a settled payment", n-queries)
	}
	if rv := get(t, p).Status; rv.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("phase changed to %s", rv.Phase)
	}
}
