package payment_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/payment"
)

// TestDelay: the schedule's step for an attempt, moved by at most the jitter
// (a share of the step, the same for the same seed and attempt, so a query's
// time is the same however often it is computed); past the schedule's end,
// no step (SPEC §11.2).
func TestDelay(t *testing.T) {
	schedule := []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute}
	for _, tc := range []struct {
		name    string
		jitter  int32
		attempt int32
		ok      bool
		lo, hi  time.Duration // inclusive
	}{
		{"first step, no jitter", 0, 0, true, 10 * time.Second, 10 * time.Second},
		{"last step, no jitter", 0, 2, true, 10 * time.Minute, 10 * time.Minute},
		{"negative jitter is none", -5, 1, true, time.Minute, time.Minute},
		{"past the end", 0, 3, false, 0, 0},
		{"past the end with jitter", 10, 3, false, 0, 0},
		{"a negative attempt", 10, -1, false, 0, 0},
		{"first step, 10% jitter", 10, 0, true, 9 * time.Second, 11 * time.Second},
		{"last step, 10% jitter", 10, 2, true, 9 * time.Minute, 11 * time.Minute},
		{"100% jitter", 100, 1, true, 0, 2 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := payment.Delay(schedule, tc.jitter, tc.attempt, "uid-1")
			if ok != tc.ok || d < tc.lo || d > tc.hi {
				t.Fatalf("Delay = %v, %v; want %v in [%v, %v]", d, ok, tc.ok, tc.lo, tc.hi)
			}
			if again, _ := payment.Delay(schedule, tc.jitter, tc.attempt, "uid-1"); again != d {
				t.Fatalf("Delay is %v, then %v for the same seed and attempt", d, again)
			}
		})
	}
	if d, ok := payment.Delay(nil, 10, 0, "uid-1"); ok || d != 0 {
		t.Errorf("an empty schedule: %v, %v; want no step", d, ok)
	}
	if d, ok := payment.Delay([]time.Duration{0}, 10, 0, "uid-1"); !ok || d != 0 {
		t.Errorf("a zero step with jitter: %v, %v; want 0, a step", d, ok)
	}
}

// TestDelaySpreadsPayments: with jitter, payments' steps differ by seed and
// fill the jitter's range on both sides of the step, so payments created
// together do not query together.
func TestDelaySpreadsPayments(t *testing.T) {
	step := time.Minute
	seen := map[time.Duration]bool{}
	var below, above int
	for i := 0; i < 200; i++ {
		d, ok := payment.Delay([]time.Duration{step}, 20, 0, fmt.Sprintf("uid-%d", i))
		if !ok || d < 48*time.Second || d > 72*time.Second {
			t.Fatalf("seed %d: %v, %v; want a step within 20%% of %v", i, d, ok, step)
		}
		seen[d] = true
		switch {
		case d < step:
			below++
		case d > step:
			above++
		}
	}
	if len(seen) < 150 || below < 60 || above < 60 {
		t.Errorf("200 seeds: %d distinct steps, %d below and %d above the step; want them spread on both sides", len(seen), below, above)
	}
}
