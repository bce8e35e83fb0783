package gateway

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
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

func TestIsOutage(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{outage, true},
		{transport, true},
		{fmt.Errorf("wrapped: %w", outage), true},
		{throttled, false},
		{rejected, false},
		{&provider.Error{Class: provider.ErrNotFound, StatusCode: 404}, false},
	}
	for _, c := range cases {
		if got := IsOutage(c.err); got != c.want {
			t.Errorf("IsOutage(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestAdmitDefersWithoutSpendingTokens(t *testing.T) {
	e := &Entry{Limiter: rate.NewLimiter(1, 2), Breaker: NewBreaker(1, time.Minute)}
	for i := 0; i < 2; i++ {
		if ok, _, _ := e.Admit(t0); !ok {
			t.Fatalf("call %d within the burst was deferred", i)
		}
	}
	ok, wait, reason := e.Admit(t0)
	if ok || reason != "rate_limited" || wait <= 0 || wait > time.Second {
		t.Fatalf("third call: ok=%v wait=%s reason=%q, want deferred up to 1s by the rate limiter", ok, wait, reason)
	}
	// Deferred calls give their reservation back: after one second exactly
	// one token is there, however many calls were deferred meanwhile.
	for i := 0; i < 10; i++ {
		e.Admit(t0.Add(500 * time.Millisecond))
	}
	if ok, _, _ := e.Admit(t0.Add(time.Second)); !ok {
		t.Fatal("deferred calls drained the bucket")
	}
	e.Breaker.Record(outage, t0)
	if ok, wait, reason := e.Admit(t0.Add(2 * time.Second)); ok || reason != "circuit_open" || wait != time.Minute-2*time.Second {
		t.Errorf("open circuit: ok=%v wait=%s reason=%q", ok, wait, reason)
	}
}
