package payment

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// The events-API backfill's decisions (SPEC §3, §5): where a run reads, and what
// a stored page lets it write. The backfill controller does the I/O around them.
//
// The cursor says "every event up to here is in the inbox". How a page may move
// it depends on the order the provider lists events in:
//   - oldest first (KukoPay, generic): each stored page is a prefix of the
//     window, so the cursor follows the newest event of each page;
//   - newest first (Stripe: "List all events", Stripe API reference, Events;
//     PayPal, whose order is undocumented and read so, paypal.ListEvents):
//     the first page holds the newest events and the older ones come after, so
//     the cursor moves only when the run has read its last page. Until then
//     status.backfill.progress keeps the run's window, the cursor of its next
//     page and the newest event stored, so a run that stopped on a failed page
//     (429, 5xx, an open circuit, a restart) is resumed there: nothing read is
//     read again, nothing unread is skipped.

// BackfillTiming is a provider's backfill spec, with defaults applied.
type BackfillTiming struct {
	Interval, Overlap, MaxLookback time.Duration
}

// BackfillTimingFor reads the backfill timing of a provider spec.
func BackfillTimingFor(spec *v1alpha1.PaymentProviderSpec) BackfillTiming {
	interval, overlap, maxLookback := spec.BackfillTiming()
	return BackfillTiming{Interval: interval, Overlap: overlap, MaxLookback: maxLookback}
}

// BackfillRun is where one backfill run reads and what it may move.
type BackfillRun struct {
	// Since: the run reads the events created at or after it.
	Since time.Time
	// PageCursor is the page the run starts with ("" = the first page of
	// the window); set when it resumes an unfinished run.
	PageCursor string
	// Regular: a periodic run (it sets lastRunTime when it completes).
	Regular bool
	// OneOff is the backfill-from value the run also serves ("" = none).
	OneOff string
	// Advance: the run starts at or before the cursor, so what it stores
	// may move the cursor (a periodic run always may: a cursor older than
	// maxLookback is given up by design).
	Advance bool
	// NewestFirst: the provider lists newest first (see the package notes).
	NewestFirst bool
	// Resumed: the run continues an unfinished one (status.backfill.progress).
	Resumed bool
	// Retained is set when the window was cut to the provider's retention
	// (Capabilities.EventsRetention): events before Since can no longer be
	// read, and are not asked for.
	Retained bool
}

// PlanBackfill decides where a run reads: due says a periodic run is due,
// oneOff/from a pending backfill-from request ("" = none). A run resumes the
// unfinished one in st.Progress when it serves the same requests; the window
// never reaches further back than the provider keeps events.
func PlanBackfill(st v1alpha1.BackfillStatus, t BackfillTiming, caps provider.Capabilities, due bool, oneOff string, from, now time.Time) BackfillRun {
	run := BackfillRun{Regular: due, OneOff: oneOff, NewestFirst: caps.EventsNewestFirst}
	var periodic time.Time // where a periodic run starts
	oldest := time.Time{}  // the oldest event the provider still keeps
	if caps.EventsRetention > 0 {
		oldest = now.Add(-caps.EventsRetention)
	}
	if due {
		periodic = now.Add(-t.MaxLookback)
		if st.Cursor != nil && st.Cursor.Add(-t.Overlap).After(periodic) {
			periodic = st.Cursor.Add(-t.Overlap)
		}
	}
	// A run in progress is resumed when it serves the same requests; a
	// periodic run due now resumes it only when it started no later than the
	// periodic window would, cut to the provider's retention (a one-off
	// replay from after the cursor, resumed as a periodic run, would move the
	// cursor over events nothing read).
	if p := st.Progress; p != nil && caps.EventsNewestFirst && p.OneOff == oneOff && (due || oneOff != "") && !(due && p.Since.After(maxTime(periodic, oldest))) {
		run.Since, run.PageCursor, run.Resumed = p.Since.Time, p.PageCursor, true
	} else {
		run.Since = periodic
		if oneOff != "" && (!due || from.Before(run.Since)) {
			run.Since = from
		}
	}
	if caps.EventsRetention > 0 && run.Since.Before(oldest) {
		run.Since, run.Retained = oldest, true
	}
	run.Advance = due || (st.Cursor != nil && !run.Since.After(st.Cursor.Time))
	return run
}

// BackfillPage is what a run has just stored of one page.
type BackfillPage struct {
	// Newest is the creation time of the page's newest event (zero when the
	// page was empty).
	Newest time.Time
	// NextCursor is the provider's cursor of the next page; Last says there
	// is none.
	NextCursor string
	Last       bool
}

// AfterBackfillPage is what a page, durably stored in the inbox, lets the run
// write: the cursor (oldest-first providers, or a newest-first run's last
// page) or the run's progress (a newest-first run with pages still unread).
// write is false when nothing changes (a page of the overlap, re-read). The
// stored times have second precision: rounding down only re-reads a little
// more.
func AfterBackfillPage(st v1alpha1.BackfillStatus, run BackfillRun, page BackfillPage) (out v1alpha1.BackfillStatus, write bool) {
	out = st
	newest := page.Newest.Truncate(time.Second)
	if !run.NewestFirst {
		if run.Advance && !newest.IsZero() && (st.Cursor == nil || newest.After(st.Cursor.Time)) {
			out.Cursor = ptrTime(newest)
			return out, true
		}
		return out, false
	}
	if p := st.Progress; p != nil && p.OneOff == run.OneOff && p.Newest != nil && p.Newest.After(newest) {
		// The run's progress (PlanBackfill resumes a progress that serves the
		// same requests): its first page, stored before it stopped, held
		// the newest event.
		newest = p.Newest.Time
	}
	if !page.Last {
		p := &v1alpha1.BackfillProgress{Since: metav1.NewTime(run.Since), OneOff: run.OneOff, PageCursor: page.NextCursor}
		if !newest.IsZero() {
			p.Newest = ptrTime(newest)
		}
		out.Progress = p
		return out, true
	}
	out.Progress = nil
	write = st.Progress != nil
	if run.Advance && !newest.IsZero() && (st.Cursor == nil || newest.After(st.Cursor.Time)) {
		out.Cursor, write = ptrTime(newest), true
	}
	return out, write
}

// AfterBackfillListError is what a page the provider would not list means for
// the run's progress. A page asked for by its cursor and refused outright
// (NotFound, Refused: the cursor's event is gone, e.g. past the provider's
// retention) starts the run's window again from its first page on the next
// try, keeping what it stored; any other failure (no answer, an open circuit)
// keeps the progress as it is, to be resumed.
func AfterBackfillListError(st v1alpha1.BackfillStatus, err error) (out v1alpha1.BackfillStatus, write bool) {
	out = st
	p := st.Progress
	if p == nil || p.PageCursor == "" {
		return out, false
	}
	switch Classify(err) {
	case NotFound, Refused:
		c := *p
		c.PageCursor = ""
		out.Progress = &c
		return out, true
	}
	return out, false
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
