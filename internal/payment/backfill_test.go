package payment_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

var (
	bfNow    = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	bfTiming = payment.BackfillTiming{Interval: 10 * time.Minute, Overlap: 5 * time.Minute, MaxLookback: 72 * time.Hour}
	// oldestFirst is KukoPay's and the generic events API; newestFirst is
	// Stripe's ("List all events": newest first, going back up to 30 days).
	oldestFirst = provider.Capabilities{EventsAPI: true}
	newestFirst = provider.Capabilities{EventsAPI: true, EventsNewestFirst: true, EventsRetention: 30 * 24 * time.Hour}
)

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(bfNow.Add(d)); return &t }

func TestPlanBackfill(t *testing.T) {
	for _, tc := range []struct {
		name   string
		st     v1alpha1.BackfillStatus
		timing payment.BackfillTiming
		caps   provider.Capabilities
		due    bool
		oneOff string
		from   time.Time
		want   payment.BackfillRun
	}{
		{name: "a first periodic run reads maxLookback back", caps: oldestFirst, due: true,
			want: payment.BackfillRun{Since: bfNow.Add(-72 * time.Hour), Regular: true, Advance: true}},
		{name: "a periodic run reads from the cursor less the overlap", caps: oldestFirst, due: true,
			st:   v1alpha1.BackfillStatus{Cursor: at(-time.Hour)},
			want: payment.BackfillRun{Since: bfNow.Add(-time.Hour - 5*time.Minute), Regular: true, Advance: true}},
		{name: "a periodic run reads no further back than maxLookback", caps: oldestFirst, due: true,
			st:   v1alpha1.BackfillStatus{Cursor: at(-100 * time.Hour)},
			want: payment.BackfillRun{Since: bfNow.Add(-72 * time.Hour), Regular: true, Advance: true}},
		{name: "a one-off after the cursor reads from its time and may not move the cursor", caps: oldestFirst,
			st: v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour)}, oneOff: "x", from: bfNow.Add(-time.Hour),
			want: payment.BackfillRun{Since: bfNow.Add(-time.Hour), OneOff: "x"}},
		{name: "a one-off before the cursor may move it", caps: oldestFirst,
			st: v1alpha1.BackfillStatus{Cursor: at(-time.Hour)}, oneOff: "x", from: bfNow.Add(-2 * time.Hour),
			want: payment.BackfillRun{Since: bfNow.Add(-2 * time.Hour), OneOff: "x", Advance: true}},
		{name: "a due run serving a one-off reads from the earlier of both", caps: oldestFirst, due: true,
			st: v1alpha1.BackfillStatus{Cursor: at(-time.Hour)}, oneOff: "x", from: bfNow.Add(-5 * time.Hour),
			want: payment.BackfillRun{Since: bfNow.Add(-5 * time.Hour), Regular: true, OneOff: "x", Advance: true}},
		{name: "newest first: an unfinished periodic run is resumed where it stopped", caps: newestFirst, due: true,
			st: v1alpha1.BackfillStatus{Cursor: at(-time.Hour), Progress: &v1alpha1.BackfillProgress{
				Since: *at(-65 * time.Minute), PageCursor: "evt_100", Newest: at(-time.Minute)}},
			want: payment.BackfillRun{Since: bfNow.Add(-65 * time.Minute), PageCursor: "evt_100", Regular: true, Advance: true, NewestFirst: true, Resumed: true}},
		{name: "newest first: an unfinished one-off is resumed by the same one-off", caps: newestFirst, oneOff: "x", from: bfNow.Add(-3 * time.Hour),
			st:   v1alpha1.BackfillStatus{Progress: &v1alpha1.BackfillProgress{Since: *at(-3 * time.Hour), OneOff: "x", PageCursor: "evt_7"}},
			want: payment.BackfillRun{Since: bfNow.Add(-3 * time.Hour), PageCursor: "evt_7", OneOff: "x", NewestFirst: true, Resumed: true}},
		{name: "newest first: a run serving other requests starts afresh", caps: newestFirst, oneOff: "y", from: bfNow.Add(-3 * time.Hour),
			st:   v1alpha1.BackfillStatus{Progress: &v1alpha1.BackfillProgress{Since: *at(-time.Hour), PageCursor: "evt_7"}},
			want: payment.BackfillRun{Since: bfNow.Add(-3 * time.Hour), OneOff: "y", NewestFirst: true}},
		{name: "oldest first: a progress is never resumed (the cursor is the progress)", caps: oldestFirst, due: true,
			st:   v1alpha1.BackfillStatus{Cursor: at(-time.Hour), Progress: &v1alpha1.BackfillProgress{Since: *at(-3 * time.Hour), PageCursor: "evt_7"}},
			want: payment.BackfillRun{Since: bfNow.Add(-65 * time.Minute), Regular: true, Advance: true}},
		{name: "Stripe keeps 30 days: a longer maxLookback asks only for those", caps: newestFirst, due: true,
			timing: payment.BackfillTiming{Overlap: 5 * time.Minute, MaxLookback: 40 * 24 * time.Hour},
			want:   payment.BackfillRun{Since: bfNow.Add(-30 * 24 * time.Hour), Regular: true, Advance: true, NewestFirst: true, Retained: true}},
		{name: "Stripe keeps 30 days: an older one-off asks only for those", caps: newestFirst, oneOff: "x", from: bfNow.Add(-45 * 24 * time.Hour),
			st:   v1alpha1.BackfillStatus{Cursor: at(-time.Hour)},
			want: payment.BackfillRun{Since: bfNow.Add(-30 * 24 * time.Hour), OneOff: "x", Advance: true, NewestFirst: true, Retained: true}},
		{name: "Stripe keeps 30 days: a resumed window is cut as well", caps: newestFirst, oneOff: "x", from: bfNow.Add(-31 * 24 * time.Hour),
			st:   v1alpha1.BackfillStatus{Progress: &v1alpha1.BackfillProgress{Since: *at(-31 * 24 * time.Hour), OneOff: "x", PageCursor: "evt_9"}},
			want: payment.BackfillRun{Since: bfNow.Add(-30 * 24 * time.Hour), PageCursor: "evt_9", OneOff: "x", NewestFirst: true, Resumed: true, Retained: true}},
		{name: "a provider without a documented retention is asked for the whole window", caps: oldestFirst, oneOff: "x", from: bfNow.Add(-45 * 24 * time.Hour),
			want: payment.BackfillRun{Since: bfNow.Add(-45 * 24 * time.Hour), OneOff: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timing := tc.timing
			if timing == (payment.BackfillTiming{}) {
				timing = bfTiming
			}
			if got := payment.PlanBackfill(tc.st, timing, tc.caps, tc.due, tc.oneOff, tc.from, bfNow); got != tc.want {
				t.Errorf("PlanBackfill\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

func TestAfterBackfillPage(t *testing.T) {
	periodic := payment.BackfillRun{Since: bfNow.Add(-time.Hour), Regular: true, Advance: true}
	stripeRun := periodic
	stripeRun.NewestFirst = true
	afterCursor := payment.BackfillRun{Since: bfNow.Add(-time.Hour), OneOff: "x", NewestFirst: true}
	progress := func(cursor string, newest time.Duration) *v1alpha1.BackfillProgress {
		return &v1alpha1.BackfillProgress{Since: metav1.NewTime(bfNow.Add(-time.Hour)), PageCursor: cursor, Newest: at(newest)}
	}
	for _, tc := range []struct {
		name      string
		st        v1alpha1.BackfillStatus
		run       payment.BackfillRun
		page      payment.BackfillPage
		want      v1alpha1.BackfillStatus
		wantWrite bool
	}{
		{name: "oldest first: a stored page moves the cursor to its newest event", run: periodic,
			st:   v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour)},
			page: payment.BackfillPage{Newest: bfNow.Add(-30 * time.Minute), NextCursor: "evt_100"},
			want: v1alpha1.BackfillStatus{Cursor: at(-30 * time.Minute)}, wantWrite: true},
		{name: "oldest first: a page of the overlap, read again, changes nothing", run: periodic,
			st:   v1alpha1.BackfillStatus{Cursor: at(-30 * time.Minute)},
			page: payment.BackfillPage{Newest: bfNow.Add(-31 * time.Minute), Last: true},
			want: v1alpha1.BackfillStatus{Cursor: at(-30 * time.Minute)}},
		{name: "oldest first: a run that starts after the cursor does not move it", run: payment.BackfillRun{Since: bfNow.Add(-time.Hour), OneOff: "x"},
			st:   v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour)},
			page: payment.BackfillPage{Newest: bfNow.Add(-30 * time.Minute), Last: true},
			want: v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour)}},
		{name: "oldest first: the cursor has second precision", run: periodic,
			page: payment.BackfillPage{Newest: bfNow.Add(-30*time.Minute + 900*time.Millisecond), Last: true},
			want: v1alpha1.BackfillStatus{Cursor: at(-30 * time.Minute)}, wantWrite: true},
		{name: "newest first: page 1 of several leaves the cursor and records where the run is", run: stripeRun,
			st:   v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour)},
			page: payment.BackfillPage{Newest: bfNow.Add(-time.Minute), NextCursor: "evt_100"},
			want: v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour), Progress: progress("evt_100", -time.Minute)}, wantWrite: true},
		{name: "newest first: a later page keeps the newest event of the run", run: stripeRun,
			st:   v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour), Progress: progress("evt_100", -time.Minute)},
			page: payment.BackfillPage{Newest: bfNow.Add(-20 * time.Minute), NextCursor: "evt_200"},
			want: v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour), Progress: progress("evt_200", -time.Minute)}, wantWrite: true},
		{name: "newest first: the last page moves the cursor to the run's newest event and ends the progress", run: stripeRun,
			st:   v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour), Progress: progress("evt_200", -time.Minute)},
			page: payment.BackfillPage{Newest: bfNow.Add(-50 * time.Minute), Last: true},
			want: v1alpha1.BackfillStatus{Cursor: at(-time.Minute)}, wantWrite: true},
		{name: "newest first: a run of one page moves the cursor at once", run: stripeRun,
			page: payment.BackfillPage{Newest: bfNow.Add(-time.Minute), Last: true},
			want: v1alpha1.BackfillStatus{Cursor: at(-time.Minute)}, wantWrite: true},
		{name: "newest first: an idle run changes nothing", run: stripeRun,
			st:   v1alpha1.BackfillStatus{Cursor: at(-time.Minute)},
			page: payment.BackfillPage{Last: true},
			want: v1alpha1.BackfillStatus{Cursor: at(-time.Minute)}},
		{name: "newest first: a complete run that started after the cursor ends its progress, the cursor stays", run: afterCursor,
			st: v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour), Progress: &v1alpha1.BackfillProgress{
				Since: metav1.NewTime(bfNow.Add(-time.Hour)), OneOff: "x", PageCursor: "evt_100", Newest: at(-time.Minute)}},
			page: payment.BackfillPage{Newest: bfNow.Add(-50 * time.Minute), Last: true},
			want: v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour)}, wantWrite: true},
		{name: "newest first: the progress of other requests is not this run's newest", run: stripeRun,
			st: v1alpha1.BackfillStatus{Progress: &v1alpha1.BackfillProgress{
				Since: metav1.NewTime(bfNow.Add(-time.Hour)), OneOff: "x", PageCursor: "evt_100", Newest: at(-time.Second)}},
			page: payment.BackfillPage{Newest: bfNow.Add(-10 * time.Minute), Last: true},
			want: v1alpha1.BackfillStatus{Cursor: at(-10 * time.Minute)}, wantWrite: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, write := payment.AfterBackfillPage(tc.st, tc.run, tc.page)
			if write != tc.wantWrite || !equalBackfill(got, tc.want) {
				t.Errorf("AfterBackfillPage: write %v\n got  %s\n want %s (write %v)", write, dumpBackfill(got), dumpBackfill(tc.want), tc.wantWrite)
			}
		})
	}
}

func TestAfterBackfillListError(t *testing.T) {
	stopped := v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour), Progress: &v1alpha1.BackfillProgress{
		Since: *at(-time.Hour), PageCursor: "evt_100", Newest: at(-time.Minute)}}
	restart := stopped
	restart.Progress = &v1alpha1.BackfillProgress{Since: *at(-time.Hour), Newest: at(-time.Minute)}
	for _, tc := range []struct {
		name      string
		st        v1alpha1.BackfillStatus
		err       error
		want      v1alpha1.BackfillStatus
		wantWrite bool
	}{
		{name: "no answer (429, 5xx, timeout) keeps the progress, to be resumed", st: stopped,
			err: &provider.Error{Class: provider.ErrRetryable, StatusCode: 429}, want: stopped},
		{name: "a page refused by its cursor (the event is gone) starts the window again, keeping the run's newest", st: stopped,
			err: &provider.Error{Class: provider.ErrNonRetryable, StatusCode: 400}, want: restart, wantWrite: true},
		{name: "a refused first page has no progress to change",
			st: v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour)}, err: &provider.Error{Class: provider.ErrNonRetryable},
			want: v1alpha1.BackfillStatus{Cursor: at(-2 * time.Hour)}},
		{name: "a configuration problem keeps the progress", st: stopped,
			err: &provider.Error{Class: provider.ErrProviderConfig, StatusCode: 401}, want: stopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, write := payment.AfterBackfillListError(tc.st, tc.err)
			if write != tc.wantWrite || !equalBackfill(got, tc.want) {
				t.Errorf("AfterBackfillListError: write %v\n got  %s\n want %s (write %v)", write, dumpBackfill(got), dumpBackfill(tc.want), tc.wantWrite)
			}
		})
	}
}

func equalBackfill(a, b v1alpha1.BackfillStatus) bool {
	eqTime := func(x, y *metav1.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(y)) }
	if !eqTime(a.Cursor, b.Cursor) || !eqTime(a.LastRunTime, b.LastRunTime) || a.EventsSeen != b.EventsSeen {
		return false
	}
	if (a.Progress == nil) != (b.Progress == nil) {
		return false
	}
	if p, q := a.Progress, b.Progress; p != nil {
		return p.Since.Equal(&q.Since) && p.OneOff == q.OneOff && p.PageCursor == q.PageCursor && eqTime(p.Newest, q.Newest)
	}
	return true
}

func dumpBackfill(s v1alpha1.BackfillStatus) string {
	out := "cursor " + timeString(s.Cursor)
	if p := s.Progress; p != nil {
		out += " progress{since " + p.Since.UTC().Format(time.RFC3339) + " oneOff " + p.OneOff + " page " + p.PageCursor + " newest " + timeString(p.Newest) + "}"
	}
	return out
}

func timeString(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
