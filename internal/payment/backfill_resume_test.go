package payment_test

import (
	"errors"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestResumedOneOffMovesCursorOverUnreadEvents: a newest-first provider
// (Stripe, PayPal). The last periodic run left the cursor at C. Between two
// periodic runs an operator asks for a replay from a time after C
// (backfill-from); the one-off run stores its first page and fails on the
// second (429, circuit, restart). When it is retried the periodic run is due
// too. Resuming the one-off's progress (its Since after C) as the periodic
// run would move the cursor, after its last page, over the events created
// between C-overlap and the one-off's time, which no run read: the run
// starts afresh from the periodic window instead, which covers both.
func TestResumedOneOffMovesCursorOverUnreadEvents(t *testing.T) {
	cursor := at(-30 * time.Minute) // where the last periodic run stopped
	from := bfNow.Add(-12 * time.Minute)
	st := v1alpha1.BackfillStatus{Cursor: cursor}

	// 1. The one-off starts between two periodic runs (not due).
	t1 := bfNow.Add(-10 * time.Minute)
	run := payment.PlanBackfill(st, bfTiming, newestFirst, false, "x", from, t1)
	if run.Advance {
		t.Fatalf("setup: a one-off after the cursor may not move it: %+v", run)
	}
	// Its first page is stored; more pages follow.
	st, _ = payment.AfterBackfillPage(st, run, payment.BackfillPage{Newest: t1.Add(-time.Second), NextCursor: "evt_p1"})
	// The second page fails with a 429: the progress is kept, to be resumed.
	st, _ = payment.AfterBackfillListError(st, &provider.Error{Provider: "stripe", Op: "list events", Class: provider.ErrRetryable, Err: errors.New("429")})
	if st.Progress == nil {
		t.Fatalf("setup: progress lost: %s", dumpBackfill(st))
	}

	// 2. The retry comes when the periodic run is due as well.
	run = payment.PlanBackfill(st, bfTiming, newestFirst, true, "x", from, bfNow)
	st2, _ := payment.AfterBackfillPage(st, run, payment.BackfillPage{Last: true})

	// The cursor may move past C only if this run read everything from C
	// (less the overlap) on.
	if st2.Cursor != nil && st2.Cursor.After(cursor.Time) && run.Since.After(cursor.Time) {
		t.Errorf("the cursor moved from %s to %s, but the run only read events since %s: "+
			"the events created in [%s, %s) were never read by any run and never will be (run %+v)",
			cursor.UTC().Format(time.RFC3339), st2.Cursor.UTC().Format(time.RFC3339), run.Since.UTC().Format(time.RFC3339),
			cursor.Add(-bfTiming.Overlap).UTC().Format(time.RFC3339), run.Since.UTC().Format(time.RFC3339), run)
	}
}
