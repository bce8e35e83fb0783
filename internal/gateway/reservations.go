package gateway

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// reservations are the tokens of a provider's bucket held for payments that
// were told to come back later: the first time a payment is held back it
// reserves the next free token, and when it returns at that time the token
// is its own. Payments are served in the order they first asked, so under a
// backlog the oldest due goes first and nobody starves.
type reservations struct {
	mu      sync.Mutex
	byKey   map[string]held
	swept   time.Time
	maxKeep time.Duration
}

type held struct {
	r  *rate.Reservation
	at time.Time
}

func newReservations() *reservations {
	return &reservations{byKey: map[string]held{}, maxKeep: time.Minute}
}

// take returns ok when key may call now, else how long to wait for its token.
func (rs *reservations) take(l *rate.Limiter, key string, now time.Time) (time.Duration, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if h, ok := rs.byKey[key]; ok && key != "" {
		if wait := h.at.Sub(now); wait > 0 {
			return wait, false
		}
		delete(rs.byKey, key)
		return 0, true
	}
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return time.Second, false
	}
	wait := r.DelayFrom(now)
	if wait <= 0 {
		return 0, true
	}
	if key == "" {
		// Nobody to hold it for: the caller waits and asks again.
		r.CancelAt(now)
		return wait, false
	}
	rs.byKey[key] = held{r: r, at: now.Add(wait)}
	rs.sweep(now)
	return wait, false
}

// release cancels key's reservation, giving the token back to the bucket.
func (rs *reservations) release(key string, now time.Time) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if h, ok := rs.byKey[key]; ok {
		h.r.CancelAt(now)
		delete(rs.byKey, key)
	}
}

// sweep forgets reservations whose payment never came back (deleted, or
// settled by a webhook and never reconciled again), at most once a second.
func (rs *reservations) sweep(now time.Time) {
	if now.Sub(rs.swept) < time.Second {
		return
	}
	rs.swept = now
	for k, h := range rs.byKey {
		if now.Sub(h.at) > rs.maxKeep {
			delete(rs.byKey, k)
		}
	}
}
