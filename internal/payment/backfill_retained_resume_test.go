package payment_test

import (
	"errors"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestRetainedPeriodicRunIsResumed: a newest-first provider that keeps
// events 30 days (Stripe, PayPal) and a maxLookback longer than that
// (allowed: PlanBackfill cuts the window to the provider's retention). The
// periodic run's window is cut (Retained) and stored in its progress; its
// second page fails (429). When it is retried, still due, the new guard
// (p.Since after the uncut periodic window now-maxLookback) takes the cut
// window for a one-off from after the cursor, and the run starts again from
// its first page: every retry re-reads the pages already stored, and a run
// that cannot read its whole window in one go never moves the cursor.
func TestRetainedPeriodicRunIsResumed(t *testing.T) {
	timing := bfTiming
	timing.MaxLookback = 45 * 24 * time.Hour // longer than the provider's 30 days
	st := v1alpha1.BackfillStatus{}          // first run (or a cursor older than 30 days)

	t1 := bfNow.Add(-10 * time.Minute)
	run := payment.PlanBackfill(st, timing, newestFirst, true, "", time.Time{}, t1)
	if !run.Retained {
		t.Fatalf("setup: the window was not cut to the provider's retention: %+v", run)
	}
	st, _ = payment.AfterBackfillPage(st, run, payment.BackfillPage{Newest: t1.Add(-time.Second), NextCursor: "evt_p1"})
	st, _ = payment.AfterBackfillListError(st, &provider.Error{Provider: "stripe", Op: "list events", Class: provider.ErrRetryable, Err: errors.New("429")})
	if st.Progress == nil || st.Progress.PageCursor != "evt_p1" {
		t.Fatalf("setup: progress lost: %s", dumpBackfill(st))
	}

	// The retry, a minute later: the periodic run is still due.
	run = payment.PlanBackfill(st, timing, newestFirst, true, "", time.Time{}, t1.Add(time.Minute))
	if !run.Resumed || run.PageCursor != "evt_p1" {
		t.Errorf("the periodic run's own progress (%s) is not resumed: the retry reads from the first page again (run %+v)",
			dumpBackfill(st), run)
	}
}
