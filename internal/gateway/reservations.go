package gateway

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Priority is a call's place in its provider's line (SPEC §12.3). Under a
// backlog a call never waits behind one of lower priority: it takes the
// earliest token held for a lower-priority call, and that call queues again.
type Priority int

// The priorities, lowest first.
const (
	// Scheduled: a status query on the payment's or refund's schedule.
	Scheduled Priority = iota
	// Read: a read that stands for a webhook or that someone waits for (an
	// events page of the backfill, a payment read back after its refund).
	Read
	// Money: a call that moves money or that a payer waits for (create,
	// authorize, capture, cancel, refund) and the look-ups of their outcome.
	Money
)

func (p Priority) String() string {
	switch p {
	case Scheduled:
		return "scheduled"
	case Read:
		return "read"
	case Money:
		return "money"
	}
	return "unknown"
}

// reservations are the tokens of a provider's bucket held for calls that
// were told to come back later: the first time a call is held back it
// reserves the next free token, and when it returns at that time the token
// is its own. Calls of one priority are served in the order they first
// asked, so under a backlog the oldest due goes first and nobody spins. A
// call of higher priority takes the earliest token held for a lower one (its
// holder gets the token just reserved, at the end of the line): a create
// asked for during a backlog of 2000 status queries waits for one token, not
// for 2000.
type reservations struct {
	mu      sync.Mutex
	byKey   map[string]held
	swept   time.Time
	maxKeep time.Duration
}

type held struct {
	r    *rate.Reservation
	at   time.Time
	prio Priority
}

func newReservations() *reservations {
	return &reservations{byKey: map[string]held{}, maxKeep: time.Minute}
}

// take returns ok when key may call now, else how long to wait for its token.
func (rs *reservations) take(l *rate.Limiter, key string, prio Priority, now time.Time) (time.Duration, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if h, ok := rs.byKey[key]; ok && key != "" {
		if prio > h.prio {
			// Held for a lower-priority call (a query), asked for a higher
			// one (a capture): it may move up the line.
			delete(rs.byKey, key)
			rs.seat(key, prio, h.r, h.at)
		}
		return rs.due(key, now)
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
	rs.seat(key, prio, r, now.Add(wait))
	rs.sweep(now)
	return rs.due(key, now)
}

// due hands key its held token when its time has come.
func (rs *reservations) due(key string, now time.Time) (time.Duration, bool) {
	h := rs.byKey[key]
	if wait := h.at.Sub(now); wait > 0 {
		return wait, false
	}
	delete(rs.byKey, key)
	return 0, true
}

// seat holds the token r (due at) for key, unless a call of lower priority
// holds an earlier one: then key takes that token, and the displaced holder
// is seated with r in its turn. Each turn seats a lower priority, so it ends.
func (rs *reservations) seat(key string, prio Priority, r *rate.Reservation, at time.Time) {
	for {
		victim, ok := rs.earliestBelow(prio, at)
		if !ok {
			rs.byKey[key] = held{r: r, at: at, prio: prio}
			return
		}
		v := rs.byKey[victim]
		rs.byKey[key] = held{r: v.r, at: v.at, prio: prio}
		key, prio = victim, v.prio
	}
}

// earliestBelow is the holder of the earliest token due before than that is
// held for a call of lower priority than prio. A scan: only calls above the
// lowest priority make it, and those are few.
func (rs *reservations) earliestBelow(prio Priority, than time.Time) (string, bool) {
	if prio == Scheduled {
		return "", false // nobody is below
	}
	key, at := "", than
	for k, h := range rs.byKey {
		if h.prio < prio && h.at.Before(at) {
			key, at = k, h.at
		}
	}
	return key, key != ""
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
