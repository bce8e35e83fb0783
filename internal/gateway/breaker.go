package gateway

import (
	"errors"
	"sync"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// Breaker is a provider's circuit breaker (SPEC §3): N consecutive transport
// or 5xx failures open it; while open, calls are deferred to the reopen time
// (they do not consume schedule attempts); after openFor one probe is let
// through (half-open), and its result closes or re-opens the circuit.
type Breaker struct {
	mu        sync.Mutex
	threshold int32
	openFor   time.Duration
	state     v1alpha1.CircuitState
	failures  int32
	openedAt  time.Time
	probing   bool
}

// NewBreaker returns a closed breaker.
func NewBreaker(threshold int32, openFor time.Duration) *Breaker {
	return &Breaker{threshold: threshold, openFor: openFor, state: v1alpha1.CircuitClosed}
}

// Configure changes the thresholds without losing the state.
func (b *Breaker) Configure(threshold int32, openFor time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.threshold, b.openFor = threshold, openFor
}

// Allow reports whether a call may go out now. When it may not, retryAt is
// when to try again.
func (b *Breaker) Allow(now time.Time) (ok bool, retryAt time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case v1alpha1.CircuitOpen:
		reopen := b.openedAt.Add(b.openFor)
		if now.Before(reopen) {
			return false, reopen
		}
		b.state, b.probing = v1alpha1.CircuitHalfOpen, true
		return true, time.Time{}
	case v1alpha1.CircuitHalfOpen:
		if b.probing {
			// One probe at a time; the others wait a fraction of openFor.
			return false, now.Add(b.openFor / 4)
		}
		b.probing = true
		return true, time.Time{}
	}
	return true, time.Time{}
}

// Release returns an admitted call that never went out (the rate limiter
// deferred it), so a half-open circuit can let another probe through.
func (b *Breaker) Release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// Record feeds the outcome of an allowed call and reports whether the state
// changed.
func (b *Breaker) Record(err error, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	before := b.state
	b.probing = false
	switch {
	case IsOutage(err):
		b.failures++
		if b.state == v1alpha1.CircuitHalfOpen || b.failures >= b.threshold {
			b.state, b.openedAt = v1alpha1.CircuitOpen, now
		}
	case err != nil && errors.Is(err, provider.ErrRetryable):
		// 429 and other throttling answers say nothing about an outage.
		if b.state == v1alpha1.CircuitHalfOpen {
			b.state = v1alpha1.CircuitOpen
			b.openedAt = now
		}
	default:
		b.failures = 0
		b.state = v1alpha1.CircuitClosed
	}
	return b.state != before
}

// Status is the breaker's state for PaymentProvider status.
func (b *Breaker) Status() v1alpha1.CircuitStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := v1alpha1.CircuitStatus{State: b.state, ConsecutiveFailures: b.failures}
	if !b.openedAt.IsZero() && b.state != v1alpha1.CircuitClosed {
		st.OpenedAt = timePtr(b.openedAt)
	}
	return st
}

// IsOutage reports whether err says the provider is down: no answer at all
// (transport error, timeout) or a 5xx. Throttling (429) and rejections are not
// outages.
func IsOutage(err error) bool {
	if err == nil || !errors.Is(err, provider.ErrRetryable) {
		return false
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.StatusCode == 0 || pe.StatusCode >= 500
	}
	return true
}
