package gateway

import (
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// backlog is a provider at qps 50 / burst 100 (a token every 20ms) with n
// scheduled status queries due at t0, each asking once as its reconcile
// would: the first 100 go out at once, the others hold a token each.
func backlog(t *testing.T, n int) (*Entry, map[string]time.Time) {
	t.Helper()
	e := newEntry(50, 100)
	due := map[string]time.Time{}
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("query-%d", i)
		if adm := e.Admit(key, Scheduled, t0); !adm.OK {
			due[key] = t0.Add(adm.Wait)
		}
	}
	if len(due) != n-100 {
		t.Fatalf("%d queries held, want %d", len(due), n-100)
	}
	return e, due
}

const tokenInterval = 20 * time.Millisecond

// serve lets every held query whose token is due by now take it, as their
// reconciles coming back would; it returns how many went out.
func serve(t *testing.T, e *Entry, due map[string]time.Time, now time.Time) int {
	t.Helper()
	n := 0
	for key, at := range due {
		if at.After(now) {
			continue
		}
		adm := e.Admit(key, Scheduled, at)
		if adm.OK {
			delete(due, key)
			n++
			continue
		}
		due[key] = at.Add(adm.Wait) // displaced: told its new time
	}
	return n
}

// TestMoneyCallWaitsAtMostOneTokenBehindScheduledQueries is issue 23's
// figure with a fake clock: a create asked for while 2000 status queries are
// due waits for one token, not for the 1900 held before it.
func TestMoneyCallWaitsAtMostOneTokenBehindScheduledQueries(t *testing.T) {
	e, due := backlog(t, 2000)
	now := t0.Add(5 * time.Millisecond)
	adm := e.Admit("create", Money, now)
	if adm.OK || adm.Wait > tokenInterval {
		t.Fatalf("create behind 1900 held queries: %+v, want a wait of at most %s", adm, tokenInterval)
	}
	if again := e.Admit("create", Money, now.Add(adm.Wait)); !again.OK {
		t.Fatalf("create at its time: %+v", again)
	}

	// Later in the backlog, with queries going out as they come back.
	now = t0.Add(7*time.Second + 3*time.Millisecond)
	serve(t, e, due, now)
	adm = e.Admit("capture", Money, now)
	if adm.OK || adm.Wait > tokenInterval {
		t.Fatalf("capture 7s into the backlog: %+v, want a wait of at most %s", adm, tokenInterval)
	}
}

// TestPriorityKeepsTheProvidersRate: calls taken out of turn take tokens from
// the line, never extra ones: the provider sees no more than burst + qps × t.
func TestPriorityKeepsTheProvidersRate(t *testing.T) {
	e, due := backlog(t, 2000)
	sent := 100
	step := 5 * time.Millisecond
	for now := t0; now.Before(t0.Add(10 * time.Second)); now = now.Add(step) {
		sent += serve(t, e, due, now)
		if now.Sub(t0)%(250*time.Millisecond) == 0 {
			key := fmt.Sprintf("create-%d", now.Sub(t0)/time.Millisecond)
			for at := now; ; {
				adm := e.Admit(key, Money, at)
				if adm.OK {
					sent++
					break
				}
				at = at.Add(adm.Wait)
			}
		}
		if limit := 100 + int(now.Sub(t0)/tokenInterval) + 1; sent > limit {
			t.Fatalf("%d calls by %s, more than the bucket's %d", sent, now.Sub(t0), limit)
		}
	}
}

// TestDisplacedQueryQueuesAgain: the query whose token a create took is told
// so when it comes back, and gets a token later; a new query does not jump
// ahead of a waiting create.
func TestDisplacedQueryQueuesAgain(t *testing.T) {
	e := newEntry(10, 1) // a token every 100ms
	if adm := e.Admit("first", Scheduled, t0); !adm.OK {
		t.Fatalf("first: %+v", adm)
	}
	q := e.Admit("query", Scheduled, t0) // holds t0+100ms
	m := e.Admit("create", Money, t0)
	if q.Wait != 100*time.Millisecond || m.Wait != 100*time.Millisecond {
		t.Fatalf("query %+v, create %+v: the create should take the query's token at +100ms", q, m)
	}
	back := e.Admit("query", Scheduled, t0.Add(100*time.Millisecond))
	if back.OK || back.Wait != 100*time.Millisecond {
		t.Fatalf("displaced query back at its old time: %+v, want the next token at +200ms", back)
	}
	if late := e.Admit("late query", Scheduled, t0.Add(50*time.Millisecond)); late.Wait != 250*time.Millisecond {
		t.Fatalf("a later query: %+v, want behind both at +300ms", late)
	}
	if adm := e.Admit("create", Money, t0.Add(100*time.Millisecond)); !adm.OK {
		t.Fatalf("create at its time: %+v", adm)
	}
}

// TestPriorityOrder: money before reads before scheduled queries; within one
// priority, first come first served. A read displaced by money still goes
// before the scheduled queries.
func TestPriorityOrder(t *testing.T) {
	e := newEntry(10, 1)
	e.Admit("first", Scheduled, t0)
	e.Admit("q1", Scheduled, t0) // +100ms
	e.Admit("q2", Scheduled, t0) // +200ms
	e.Admit("q3", Scheduled, t0) // +300ms
	read := e.Admit("read", Read, t0)
	if read.Wait != 100*time.Millisecond {
		t.Fatalf("read: %+v, want q1's token at +100ms", read)
	}
	m1 := e.Admit("money-1", Money, t0)
	m2 := e.Admit("money-2", Money, t0)
	if m1.Wait != 100*time.Millisecond || m2.Wait != 200*time.Millisecond {
		t.Fatalf("money-1 %+v, money-2 %+v: want +100ms and +200ms, in the order they asked", m1, m2)
	}
	if r := e.Admit("read", Read, t0.Add(100*time.Millisecond)); r.OK || r.Wait != 200*time.Millisecond {
		t.Fatalf("displaced read: %+v, want q3's token at +300ms, ahead of the queries", r)
	}
	if m := e.Admit("money-3", Money, t0.Add(10*time.Millisecond)); m.Wait != 290*time.Millisecond {
		t.Fatalf("money-3 %+v: want the read's token at +300ms, never one of an earlier money call", m)
	}
}

// TestHeldQueryMovesUpForMoney: a payment holding a token for its query that
// now needs a money call (a webhook approved it: capture) moves up the line.
func TestHeldQueryMovesUpForMoney(t *testing.T) {
	e := newEntry(10, 1)
	e.Admit("first", Scheduled, t0)
	e.Admit("other", Scheduled, t0)           // +100ms
	mine := e.Admit("payment", Scheduled, t0) // +200ms
	if mine.Wait != 200*time.Millisecond {
		t.Fatalf("query: %+v", mine)
	}
	if adm := e.Admit("payment", Money, t0.Add(10*time.Millisecond)); adm.Wait != 90*time.Millisecond {
		t.Fatalf("capture of a payment holding a query's token: %+v, want the earlier token at +100ms", adm)
	}
	if adm := e.Admit("other", Scheduled, t0.Add(100*time.Millisecond)); adm.Wait != 100*time.Millisecond {
		t.Fatalf("the displaced query: %+v, want the payment's old token at +200ms", adm)
	}
}

// TestAForgoneProbeLetsAnotherThrough: a half-open circuit's probe, or the
// probe of a refused configuration, that does not go out (held back by the
// bucket, or forgone after admission) is handed back.
func TestAForgoneProbeLetsAnotherThrough(t *testing.T) {
	t.Run("circuit probe forgone", func(t *testing.T) {
		e := newEntry(100, 100)
		e.Breaker.Record(outage, t0) // opens after one outage
		at := t0.Add(time.Minute)
		if adm := e.Admit("probe", Money, at); !adm.OK {
			t.Fatalf("probe: %+v", adm)
		}
		e.Forgo()
		if adm := e.Admit("next", Money, at); !adm.OK {
			t.Fatalf("after a forgone probe: %+v, want another probe let through", adm)
		}
		if st := e.Breaker.Status(); st.State != v1alpha1.CircuitHalfOpen {
			t.Fatalf("circuit %s, want HalfOpen", st.State)
		}
	})
	t.Run("configuration probe held back by the bucket", func(t *testing.T) {
		e := newEntry(1, 1)
		refused := &provider.Error{Class: provider.ErrProviderConfig, StatusCode: 401}
		e.config.record(refused, t0, time.Minute)
		at := t0.Add(time.Minute)
		e.Limiter.ReserveN(at, 1) // another caller took the token due now
		adm := e.Admit("probe", Money, at)
		if adm.OK || adm.Reason != DeferRateLimited || adm.Wait != time.Second {
			t.Fatalf("probe with an empty bucket: %+v, want held back by the bucket for 1s", adm)
		}
		if adm := e.Admit("probe", Money, at.Add(time.Second)); !adm.OK {
			t.Fatalf("the probe back at its token's time: %+v, want it let through", adm)
		}
	})
}

// A call that comes back late for its held token (its reconcile was slow,
// within a minute) still finds it: it is not forgotten as abandoned and made
// to take a second token, which would spend the provider's rate twice for
// one call.
func TestALateHolderStillFindsItsToken(t *testing.T) {
	e := newEntry(1, 1) // a token a second
	if adm := e.Admit("first", Scheduled, t0); !adm.OK {
		t.Fatalf("first call: %+v", adm)
	}
	adm := e.Admit("late", Scheduled, t0)
	if adm.OK || adm.Wait != time.Second {
		t.Fatalf("second call: %+v, want a token held for it in 1s", adm)
	}
	// Another call passes by 1.5s later (sweeping what was abandoned) and
	// is told to wait for the next token, after the late one's.
	other := e.Admit("other", Scheduled, t0.Add(1500*time.Millisecond))
	if other.OK || other.Wait != 500*time.Millisecond {
		t.Fatalf("a third call 1.5s in: %+v, want the token due at 2s", other)
	}
	// The late holder comes back 2.5s in, 1.5s after its token was due.
	if adm := e.Admit("late", Scheduled, t0.Add(2500*time.Millisecond)); !adm.OK {
		t.Errorf("the late holder: %+v, want the token held for it", adm)
	}
}

// TestAReleasedHolderAsksAnew: a payment that gave its held token back
// (settled meanwhile) and asks again later takes a new one; the one it gave
// back went to another caller, and one token is never spent twice.
func TestAReleasedHolderAsksAnew(t *testing.T) {
	e := newEntry(10, 1) // a token every 100ms
	e.gw.Clock = clocktesting.NewFakePassiveClock(t0)
	if adm := e.Admit("first", Scheduled, t0); !adm.OK {
		t.Fatalf("first: %+v", adm)
	}
	if adm := e.Admit("released", Scheduled, t0); adm.OK || adm.Wait != 100*time.Millisecond {
		t.Fatalf("released: %+v, want a token held at +100ms", adm)
	}
	e.Release("released")
	if adm := e.Admit("other", Scheduled, t0); adm.OK || adm.Wait != 100*time.Millisecond {
		t.Fatalf("other: %+v, want the token given back, at +100ms", adm)
	}
	if adm := e.Admit("released", Scheduled, t0.Add(100*time.Millisecond)); adm.OK || adm.Wait != 100*time.Millisecond {
		t.Fatalf("released, asking again: %+v, want a new token at +200ms", adm)
	}
}

// TestAnAbandonedTokenIsForgottenAfterAMinute: a holder that never came back
// for a minute past its token's time is forgotten when the next call sweeps
// (at most once a second); one back within the minute still has its token.
func TestAnAbandonedTokenIsForgottenAfterAMinute(t *testing.T) {
	for _, tc := range []struct {
		name      string
		late      time.Duration // past the holder's token when another call sweeps
		swept     time.Duration // a sweep ran this long before that call; 0: none
		forgotten bool
	}{
		{"a minute late exactly: kept", time.Minute, 0, false},
		{"more than a minute late: forgotten", time.Minute + time.Millisecond, 0, true},
		{"a sweep ran less than a second before: kept until the next", time.Minute + 500*time.Millisecond, 600 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEntry(1, 1) // a token a second
			e.Admit("first", Scheduled, t0)
			if adm := e.Admit("holder", Scheduled, t0); adm.OK || adm.Wait != time.Second {
				t.Fatalf("holder: %+v, want a token held at +1s", adm)
			}
			sweep := t0.Add(time.Second + tc.late)
			if tc.swept != 0 {
				e.Limiter.ReserveN(sweep.Add(-tc.swept), 1)
				e.Admit("earlier sweeper", Scheduled, sweep.Add(-tc.swept))
			}
			e.Limiter.ReserveN(sweep, 1) // the bucket is empty when the sweeper asks
			if adm := e.Admit("sweeper", Scheduled, sweep); adm.OK {
				t.Fatalf("sweeper: %+v, want held", adm)
			}
			// The holder comes back just after: its token, or a new one
			// behind the sweeper's.
			adm := e.Admit("holder", Scheduled, sweep.Add(time.Millisecond))
			if adm.OK == tc.forgotten {
				t.Fatalf("holder back: %+v, want forgotten %v", adm, tc.forgotten)
			}
		})
	}
}
