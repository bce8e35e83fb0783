package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

var (
	t0        = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	outage    = &provider.Error{Class: provider.ErrRetryable, StatusCode: 503}
	transport = &provider.Error{Class: provider.ErrRetryable, Err: errors.New("connection refused")}
	throttled = &provider.Error{Class: provider.ErrRetryable, StatusCode: 429, RetryAfter: time.Second}
	rejected  = &provider.Error{Class: provider.ErrNonRetryable, StatusCode: 400}
)

func TestBreakerOpensAfterConsecutiveOutages(t *testing.T) {
	b := NewBreaker(3, time.Minute)
	for i := 0; i < 2; i++ {
		if b.Record(outage, t0) {
			t.Fatalf("opened after %d failures, threshold 3", i+1)
		}
	}
	if !b.Record(transport, t0) || b.Status().State != v1alpha1.CircuitOpen {
		t.Fatalf("not open after 3 consecutive outages: %+v", b.Status())
	}
	if ok, retryAt := b.Allow(t0.Add(30 * time.Second)); ok || !retryAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("open circuit allowed a call (ok=%v) or deferred to %s, want the reopen time", ok, retryAt)
	}
}

func TestBreakerIgnoresThrottlingAndRejections(t *testing.T) {
	b := NewBreaker(2, time.Minute)
	for _, err := range []error{outage, throttled, throttled, rejected} {
		b.Record(err, t0)
	}
	// A rejection is an answer: the provider is up, and the count starts over.
	if st := b.Status(); st.State != v1alpha1.CircuitClosed || st.ConsecutiveFailures != 0 {
		t.Errorf("status %+v, want closed with no failures counted", st)
	}
	b.Record(outage, t0)
	b.Record(throttled, t0)
	if b.Status().State != v1alpha1.CircuitClosed {
		t.Errorf("a 429 between outages counted as an outage")
	}
}

func TestBreakerHalfOpensForOneProbe(t *testing.T) {
	b := NewBreaker(1, time.Minute)
	b.Record(outage, t0)
	later := t0.Add(time.Minute)
	if ok, _ := b.Allow(later); !ok {
		t.Fatal("no probe after openFor")
	}
	if ok, _ := b.Allow(later); ok {
		t.Fatal("a second call went out while the probe is in flight")
	}
	b.Release() // the probe was deferred by the rate limiter and never sent
	if ok, _ := b.Allow(later); !ok {
		t.Fatal("a released probe slot was not handed out again")
	}
	if ok, _ := b.Allow(later); ok {
		t.Fatal("a second call went out while the re-issued probe is in flight")
	}
	if !b.Record(outage, later) || b.Status().State != v1alpha1.CircuitOpen {
		t.Fatalf("a failed probe did not re-open the circuit: %+v", b.Status())
	}
	again := later.Add(time.Minute)
	if ok, _ := b.Allow(again); !ok {
		t.Fatal("no second probe")
	}
	if !b.Record(nil, again) || b.Status().State != v1alpha1.CircuitClosed {
		t.Fatalf("a successful probe did not close the circuit: %+v", b.Status())
	}
	for i := 0; i < 5; i++ {
		if ok, _ := b.Allow(again); !ok {
			t.Fatalf("closed circuit refused call %d", i)
		}
	}
}

// TestBreakerHalfOpenProbeOutcomes: while the probe is out the others wait a
// quarter of openFor; a probe answered 429 re-opens the circuit for a full
// openFor from then (the provider is not known to be back); a failed probe
// re-opens it even when the threshold was raised meanwhile (a config change
// keeps the breaker); a closed circuit reports no openedAt.
func TestBreakerHalfOpenProbeOutcomes(t *testing.T) {
	halfOpen := func(t *testing.T) (*Breaker, time.Time) {
		t.Helper()
		b := NewBreaker(1, time.Minute)
		b.Record(outage, t0)
		probe := t0.Add(time.Minute)
		if ok, _ := b.Allow(probe); !ok {
			t.Fatal("no probe after openFor")
		}
		return b, probe
	}
	t.Run("the others wait a quarter of openFor", func(t *testing.T) {
		b, probe := halfOpen(t)
		if ok, retryAt := b.Allow(probe); ok || !retryAt.Equal(probe.Add(15*time.Second)) {
			t.Fatalf("ok=%v retry at %s, want deferred to %s", ok, retryAt, probe.Add(15*time.Second))
		}
	})
	t.Run("a throttled probe re-opens it for openFor", func(t *testing.T) {
		b, probe := halfOpen(t)
		at := probe.Add(time.Second)
		if !b.Record(throttled, at) || b.Status().State != v1alpha1.CircuitOpen {
			t.Fatalf("a 429 probe: %+v, want open again", b.Status())
		}
		if ok, retryAt := b.Allow(at.Add(30 * time.Second)); ok || !retryAt.Equal(at.Add(time.Minute)) {
			t.Fatalf("ok=%v retry at %s, want deferred to %s", ok, retryAt, at.Add(time.Minute))
		}
	})
	t.Run("a failed probe re-opens it whatever the threshold", func(t *testing.T) {
		b, probe := halfOpen(t)
		b.Configure(5, time.Minute)
		if !b.Record(outage, probe) || b.Status().State != v1alpha1.CircuitOpen {
			t.Fatalf("a failed probe: %+v, want open again", b.Status())
		}
	})
	t.Run("closed, no openedAt", func(t *testing.T) {
		b, probe := halfOpen(t)
		b.Record(nil, probe)
		if st := b.Status(); st.State != v1alpha1.CircuitClosed || st.OpenedAt != nil {
			t.Fatalf("status %+v, want closed without openedAt", st)
		}
	})
}

func TestIsOutage(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{outage, true},
		{&provider.Error{Class: provider.ErrRetryable, StatusCode: 500}, true},
		{transport, true},
		{fmt.Errorf("no answer: %w", provider.ErrRetryable), true},
		{fmt.Errorf("wrapped: %w", outage), true},
		{throttled, false},
		{rejected, false},
		{&provider.Error{Class: provider.ErrNotFound, StatusCode: 404}, false},
		// A request paywarden could not even encode never reached the
		// provider: no answer, but no outage either.
		{&provider.Error{Class: provider.ErrNonRetryable, StatusCode: 0}, false},
		{errors.New("an error no adapter classified"), false},
	}
	for _, c := range cases {
		if got := IsOutage(c.err); got != c.want {
			t.Errorf("IsOutage(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func newEntry(qps float64, burst int) *Entry {
	return &Entry{Limiter: rate.NewLimiter(rate.Limit(qps), burst), Breaker: NewBreaker(1, time.Minute), held: newReservations(), gw: &Gateway{}}
}

func TestAdmitWithoutKeyDefersWithoutSpendingTokens(t *testing.T) {
	e := newEntry(1, 2)
	for i := 0; i < 2; i++ {
		if adm := e.Admit("", Scheduled, t0); !adm.OK {
			t.Fatalf("call %d within the burst was deferred: %+v", i, adm)
		}
	}
	adm := e.Admit("", Scheduled, t0)
	if adm.OK || adm.Reason != DeferRateLimited || adm.Wait <= 0 || adm.Wait > time.Second {
		t.Fatalf("third call: %+v, want deferred up to 1s by the rate limiter", adm)
	}
	// Deferred calls without a key give their reservation back: after one
	// second exactly one token is there, however many were deferred meanwhile.
	for i := 0; i < 10; i++ {
		e.Admit("", Scheduled, t0.Add(500*time.Millisecond))
	}
	if adm := e.Admit("", Scheduled, t0.Add(time.Second)); !adm.OK {
		t.Fatal("deferred calls drained the bucket")
	}
	e.Breaker.Record(outage, t0)
	if adm := e.Admit("", Scheduled, t0.Add(2*time.Second)); adm.OK || adm.Reason != DeferCircuitOpen || adm.Wait != time.Minute-2*time.Second {
		t.Errorf("open circuit: %+v", adm)
	}
}

// TestAdmitHoldsTheTokenOfADeferredPayment is the no-spin rule: a payment
// held back by the bucket is told when its own token is due and gets it then,
// in the order payments first asked, whatever others ask meanwhile.
func TestAdmitHoldsTheTokenOfADeferredPayment(t *testing.T) {
	e := newEntry(10, 1) // a token every 100ms
	if adm := e.Admit("a", Scheduled, t0); !adm.OK {
		t.Fatalf("first call deferred: %+v", adm)
	}
	b := e.Admit("b", Scheduled, t0)
	c := e.Admit("c", Scheduled, t0)
	if b.OK || c.OK || b.Wait != 100*time.Millisecond || c.Wait != 200*time.Millisecond {
		t.Fatalf("b=%+v c=%+v, want b at +100ms and c at +200ms", b, c)
	}
	// b asking again early is told the same time, and takes nobody's token.
	if again := e.Admit("b", Scheduled, t0.Add(50*time.Millisecond)); again.OK || again.Wait != 50*time.Millisecond {
		t.Fatalf("b early: %+v, want its own slot in 50ms", again)
	}
	// A newcomer queues behind c.
	if d := e.Admit("d", Scheduled, t0.Add(50*time.Millisecond)); d.OK || d.Wait != 250*time.Millisecond {
		t.Fatalf("d: %+v, want behind c at +300ms", d)
	}
	if adm := e.Admit("b", Scheduled, t0.Add(100*time.Millisecond)); !adm.OK {
		t.Fatalf("b at its time: %+v", adm)
	}
	if adm := e.Admit("c", Scheduled, t0.Add(200*time.Millisecond)); !adm.OK {
		t.Fatalf("c at its time: %+v", adm)
	}
	// Released reservations give the token back.
	e.gw.Clock = clocktesting.NewFakePassiveClock(t0.Add(250 * time.Millisecond))
	e.Release("d")
	if adm := e.Admit("e", Scheduled, t0.Add(300*time.Millisecond)); !adm.OK {
		t.Fatalf("e after d released: %+v", adm)
	}
}

func TestAdmitDefersWhileTheProviderRefusesTheConfiguration(t *testing.T) {
	e := newEntry(100, 100)
	e.gw.ConfigProbe = time.Minute
	refused := &provider.Error{Class: provider.ErrProviderConfig, StatusCode: 401}
	e.config.record(refused, t0, time.Minute)
	adm := e.Admit("p", Scheduled, t0.Add(10*time.Second))
	if adm.OK || adm.Reason != DeferConfig || adm.Wait != 50*time.Second {
		t.Fatalf("admitted while the configuration is refused: %+v", adm)
	}
	if adm := e.Admit("p", Scheduled, t0.Add(time.Minute)); !adm.OK {
		t.Fatalf("no probe after the probe interval: %+v", adm)
	}
	if adm := e.Admit("q", Scheduled, t0.Add(time.Minute)); adm.OK || adm.Reason != DeferConfig {
		t.Fatalf("a second call during the probe: %+v", adm)
	}
	if !e.config.record(nil, t0.Add(time.Minute), time.Minute) {
		t.Fatal("an answer did not clear the problem")
	}
	if adm := e.Admit("q", Scheduled, t0.Add(time.Minute)); !adm.OK {
		t.Fatalf("calls still held after the probe succeeded: %+v", adm)
	}
}

// TestConfigProbeTiming: while a provider refuses paywarden's configuration,
// one probe goes out per probe interval (DefaultConfigProbe unless set),
// counted from when it went out; the others wait the interval while it is
// out, however long it takes; a call forgone while no probe is out frees
// nothing; the problem is announced once when it appears, not per refusal.
func TestConfigProbeTiming(t *testing.T) {
	refused := &provider.Error{Class: provider.ErrProviderConfig, StatusCode: 401}
	refusedEntry := func(t *testing.T) (*Entry, *int) {
		t.Helper()
		e := newEntry(100, 100)
		e.gw.Clock = clocktesting.NewFakeClock(t0)
		notified := 0
		e.gw.Notify = func(types.NamespacedName) { notified++ }
		if adm := e.Admit("p", Scheduled, t0); !adm.OK {
			t.Fatalf("first call: %+v", adm)
		}
		e.Done(context.Background(), refused)
		return e, &notified
	}
	t.Run("the default interval", func(t *testing.T) {
		e, _ := refusedEntry(t)
		if adm := e.Admit("q", Scheduled, t0.Add(time.Second)); adm.OK || adm.Reason != DeferConfig || adm.Wait != DefaultConfigProbe-time.Second {
			t.Fatalf("%+v, want deferred until the probe, %s after the refusal", adm, DefaultConfigProbe)
		}
	})
	t.Run("a slow probe: the others wait the interval, no second probe", func(t *testing.T) {
		e, _ := refusedEntry(t)
		probe := t0.Add(DefaultConfigProbe)
		if adm := e.Admit("q", Scheduled, probe); !adm.OK {
			t.Fatalf("probe: %+v", adm)
		}
		for _, at := range []time.Time{probe.Add(time.Second), probe.Add(2 * DefaultConfigProbe)} {
			if adm := e.Admit("r", Scheduled, at); adm.OK || adm.Reason != DeferConfig || adm.Wait != DefaultConfigProbe {
				t.Fatalf("at %s with the probe out: %+v, want deferred %s", at.Sub(probe), adm, DefaultConfigProbe)
			}
		}
	})
	t.Run("a refused probe: the next one an interval after it went out", func(t *testing.T) {
		e, notified := refusedEntry(t)
		probe := t0.Add(DefaultConfigProbe)
		if adm := e.Admit("q", Scheduled, probe); !adm.OK {
			t.Fatalf("probe: %+v", adm)
		}
		e.gw.Clock.(*clocktesting.FakeClock).SetTime(probe.Add(10 * time.Second))
		e.Done(context.Background(), refused)
		if adm := e.Admit("r", Scheduled, probe.Add(10*time.Second)); adm.OK || adm.Wait != DefaultConfigProbe-10*time.Second {
			t.Fatalf("after the refused probe: %+v, want deferred until %s after the probe went out", adm, DefaultConfigProbe)
		}
		if *notified != 1 {
			t.Errorf("notified %d times, want once: the problem appeared once", *notified)
		}
	})
	t.Run("a call forgone with no probe out frees nothing", func(t *testing.T) {
		e, _ := refusedEntry(t)
		e.Forgo() // a call admitted before the refusal, not sent after all
		if adm := e.Admit("q", Scheduled, t0.Add(time.Second)); adm.OK || adm.Reason != DeferConfig {
			t.Fatalf("%+v, want deferred until the probe", adm)
		}
	})
}

// TestKeyConflictHoldsNothingBack: one call's key conflict (a first request under its
// idempotency key exists) is an answer about that call only: it neither holds the
// provider's other calls back as a configuration problem nor counts towards opening
// the circuit.
func TestKeyConflictHoldsNothingBack(t *testing.T) {
	conflict := &provider.Error{Class: provider.ErrKeyConflict, StatusCode: 422, Code: "idempotency_error"}
	e := newEntry(100, 100) // the breaker opens after one outage
	e.gw.Clock = clocktesting.NewFakePassiveClock(t0)
	for i := 0; i < 3; i++ {
		if adm := e.Admit("p", Scheduled, t0); !adm.OK {
			t.Fatalf("call %d: %+v", i, adm)
		}
		e.Done(context.Background(), conflict)
	}
	if msg := e.ConfigProblem(); msg != "" {
		t.Fatalf("a key conflict is a configuration problem: %q", msg)
	}
	if st := e.Breaker.Status(); st.State != v1alpha1.CircuitClosed || st.ConsecutiveFailures != 0 {
		t.Fatalf("a key conflict moved the circuit: %+v", st)
	}
	if adm := e.Admit("other", Scheduled, t0); !adm.OK {
		t.Fatalf("another payment's call is held back: %+v", adm)
	}
	t.Run("it is an answer: a configuration problem clears", func(t *testing.T) {
		e := newEntry(100, 100)
		e.gw.Clock = clocktesting.NewFakePassiveClock(t0)
		e.config.record(&provider.Error{Class: provider.ErrProviderConfig, StatusCode: 401}, t0, time.Minute)
		e.Done(context.Background(), conflict)
		if msg := e.ConfigProblem(); msg != "" {
			t.Fatalf("still held back: %q", msg)
		}
	})
}

// TestDonePublishesCircuitChanges: an admitted call's outcome that opens or
// closes the circuit moves the provider's circuit metric.
func TestDonePublishesCircuitChanges(t *testing.T) {
	e := newEntry(100, 100) // the breaker opens after one outage
	e.Key = types.NamespacedName{Namespace: "shop", Name: "published"}
	e.gw.Clock = clocktesting.NewFakePassiveClock(t0)
	open := func() float64 { return testutil.ToFloat64(metrics.CircuitOpen.WithLabelValues("shop", "published")) }
	e.Done(context.Background(), outage)
	if open() != 1 {
		t.Fatalf("circuit metric %v after the circuit opened, want 1", open())
	}
	e.Done(context.Background(), nil)
	if open() != 0 {
		t.Fatalf("circuit metric %v after the circuit closed, want 0", open())
	}
}

// TestDonePublishesOnlyChanges: the PaymentProvider's status and Events
// follow the circuit's changes, one Event per change, none for an outcome
// that changes nothing.
func TestDonePublishesOnlyChanges(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "events"}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(prov).WithStatusSubresource(prov).Build()
	rec := events.NewFakeRecorder(10)
	e := newEntry(100, 100) // the breaker opens after one outage
	e.Key = client.ObjectKeyFromObject(prov)
	e.gw.Clock = clocktesting.NewFakePassiveClock(t0)
	e.gw.Status = statuswriter.Writer{Client: c, APIReader: c}
	e.gw.Recorder = rec
	degraded := func() string {
		t.Helper()
		if err := c.Get(context.Background(), e.Key, prov); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(prov.Status.Conditions, v1alpha1.ConditionDegraded)
		if cond == nil {
			return ""
		}
		return string(cond.Status) + "/" + cond.Reason
	}
	var got []string
	for i, err := range []error{outage, outage, nil, nil} {
		e.Done(context.Background(), err)
		for len(rec.Events) > 0 {
			got = append(got, strings.Fields(<-rec.Events)[1])
		}
		if i == 1 {
			if d := degraded(); d != "True/CircuitOpen" {
				t.Errorf("open: Degraded %q, want True/CircuitOpen", d)
			}
		}
	}
	if d := degraded(); d != "False/CircuitClosed" {
		t.Errorf("closed: Degraded %q, want False/CircuitClosed", d)
	}
	if want := []string{"CircuitOpen", "CircuitClosed"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if err := c.Get(context.Background(), e.Key, prov); err != nil {
		t.Fatal(err)
	}
	if st := prov.Status.Circuit.State; st != v1alpha1.CircuitClosed {
		t.Errorf("status.circuit.state %q, want Closed", st)
	}
}

// TestAConfigProblemClearsOnlyOnAnAnswer: refused credentials are cleared
// by an answer of the provider (a success, a rejection, a key conflict),
// never by no answer (a timeout, a 5xx, a 429): those say nothing about the
// credentials, and clearing on them would send every payment's calls into
// the refusal again and show the provider Ready while it is not. recorded
// reports only a change.
func TestAConfigProblemClearsOnlyOnAnAnswer(t *testing.T) {
	refused := &provider.Error{Class: provider.ErrProviderConfig, StatusCode: 401}
	for _, tc := range []struct {
		name    string
		outcome error
		clears  bool
	}{
		{"a timeout", transport, false},
		{"a 5xx", outage, false},
		{"a 429", throttled, false},
		{"a success", nil, true},
		{"a rejection", rejected, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c configState
			if !c.record(refused, t0, time.Minute) {
				t.Fatal("the first refusal is not reported as a change")
			}
			if c.record(refused, t0, time.Minute) {
				t.Error("a second refusal is reported as a change")
			}
			changed := c.record(tc.outcome, t0.Add(time.Minute), time.Minute)
			if changed != tc.clears || (c.err == "") != tc.clears {
				t.Errorf("after %s: changed %v, problem %q; want cleared %v", tc.name, changed, c.err, tc.clears)
			}
			if tc.clears && c.record(nil, t0.Add(2*time.Minute), time.Minute) {
				t.Error("a success with nothing to clear is reported as a change")
			}
		})
	}
}
