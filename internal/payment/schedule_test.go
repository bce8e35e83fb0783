package payment_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
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

// TestASettledPaymentKeepsNoSchedule: a payment settled with anything of
// its schedule left (a next query, a run of unanswered calls, an operation)
// is written once without it; one without any needs nothing.
func TestASettledPaymentKeepsNoSchedule(t *testing.T) {
	for _, tc := range []struct {
		name  string
		left  func(*v1alpha1.PaymentStatus)
		write bool
	}{
		{"nothing left", func(*v1alpha1.PaymentStatus) {}, false},
		{"a next query", func(st *v1alpha1.PaymentStatus) { st.Query.NextTime = micro(t0) }, true},
		{"unanswered calls", func(st *v1alpha1.PaymentStatus) { st.Query.UnansweredSince = micro(t0) }, true},
		{"an operation", func(st *v1alpha1.PaymentStatus) {
			st.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCancel, RequestedAt: metav1.NewTime(t0), IdempotencyKey: "k/cancel"}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := settled("order-1", v1alpha1.PhaseFailed, 0, 0)
			p.Status.Query.NextTime, p.Status.Query.UnansweredSince, p.Status.Operation = nil, nil, nil
			p.Status.Closed = true // as stored once nothing was left
			tc.left(&p.Status)
			s := payment.Plan(p, testPolicy(), payment.Facts{}, t0.Add(time.Hour))
			if (s.Action == payment.Write) != tc.write {
				t.Fatalf("%s (%s), want a write %v", s.Action, s.Why, tc.write)
			}
			if st := s.Outcome.Status; tc.write && (st.Query.NextTime != nil || st.Query.UnansweredSince != nil || st.Operation != nil || st.Phase != v1alpha1.PhaseFailed) {
				t.Errorf("written %s with next %v unanswered %v operation %+v", st.Phase, st.Query.NextTime, st.Query.UnansweredSince, st.Operation)
			}
		})
	}
}
