package payment

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// The backfill reconcile's two other decisions, around PlanBackfill: whether
// a run starts (StartBackfill) and what its end means for the provider's
// Backfill condition, the requeue and a one-off request (EndBackfill).

// backfillOneOffFloor is the shortest requeue after a one-off run between two
// periodic ones, whose next run may be due already.
const backfillOneOffFloor = 10 * time.Millisecond

// BackfillStart is whether a backfill reconcile runs, and what it records
// first.
type BackfillStart struct {
	// Due: a periodic run is due.
	Due bool
	// OneOff is the pending backfill-from value the run serves ("" = none);
	// From is its time.
	OneOff string
	From   time.Time
	// MarkDone is a backfill-from value recorded as done without a run (it
	// is not an RFC 3339 time in the past), after Event is recorded.
	MarkDone string
	Event    Event
	// Next is when the next periodic run is due (zero: the backfill is off,
	// or has never run).
	Next time.Time
	// RequeueAfter is when to look again when nothing runs (0 = not until
	// the spec or an annotation changes).
	RequeueAfter time.Duration
}

// Run says a run is due or requested.
func (s BackfillStart) Run() bool { return s.Due || s.OneOff != "" }

// StartBackfill decides whether a backfill runs now: a periodic run is due
// when spec.backfill.enabled is set and interval has passed since
// status.backfill.lastRunTime; a one-off is requested by a backfill-from value
// other than the backfill-from-done one. A value that is not an RFC 3339 time
// in the past is not run: it is marked done with a Warning. The interval is
// kept from the status, so a restart keeps the cadence.
func StartBackfill(p *v1alpha1.PaymentProvider, now time.Time) BackfillStart {
	var s BackfillStart
	st, interval := p.Status.Backfill, BackfillTimingFor(&p.Spec).Interval
	if oneOff := p.Annotations[v1alpha1.AnnotationBackfillFrom]; oneOff != p.Annotations[v1alpha1.AnnotationBackfillFromDone] {
		from, err := time.Parse(time.RFC3339, strings.TrimSpace(oneOff))
		if err != nil || from.After(now) {
			s.MarkDone = oneOff
			s.Event = Event{Warning: true, Reason: "InvalidBackfillFrom",
				Message: fmt.Sprintf("%s=%q is not an RFC 3339 time in the past; nothing replayed", v1alpha1.AnnotationBackfillFrom, oneOff)}
		} else {
			s.OneOff, s.From = oneOff, from
		}
	}
	if !p.Spec.Backfill.Enabled {
		// The Backfill condition, if any, keeps reporting the last run.
		return s
	}
	if st.LastRunTime == nil {
		s.Due = true
		return s
	}
	s.Next = st.LastRunTime.Add(interval)
	s.Due = !now.Before(s.Next)
	if !s.Run() {
		s.RequeueAfter = s.Next.Sub(now)
	}
	return s
}

// BackfillResult is how a backfill reconcile's attempt ended.
type BackfillResult int

const (
	// BackfillCompleted: the run read its whole window and stored it.
	BackfillCompleted BackfillResult = iota
	// BackfillUnavailable: the provider's config is not usable (no run).
	BackfillUnavailable
	// BackfillUnsupported: the provider type has no events API (no run).
	BackfillUnsupported
	// BackfillDeferred: the provider may not be called for a while (an
	// open circuit, a long wait for the token bucket).
	BackfillDeferred
	// BackfillListFailed: the provider did not list a page.
	BackfillListFailed
	// BackfillStoreFailed: storing a page in the inbox failed (the API
	// server); the cursor did not move past it.
	BackfillStoreFailed
)

// BackfillOutcome is what a backfill attempt did.
type BackfillOutcome struct {
	Result BackfillResult
	// Read, Stored and Skipped count the events read, newly stored in the
	// inbox and skipped as unstorable.
	Read, Stored, Skipped int
	// Err is the failure (Unavailable, ListFailed, StoreFailed); a
	// ListFailed error may carry the provider's Retry-After.
	Err error
	// DeferReason and Wait: why and for how long calls are deferred
	// (Deferred).
	DeferReason string
	Wait        time.Duration
	// Retention is how long the provider keeps events, named when the run's
	// window was cut to it.
	Retention time.Duration
	// Retry is the controller's wait for an unusable or failing provider;
	// the backfill waits at most its interval.
	Retry time.Duration
}

// BackfillEnd is what a backfill attempt's end writes and when the provider
// is looked at again.
type BackfillEnd struct {
	// The Backfill condition. A completed run's message is followed by the
	// cursor it leaves: write SyncedMessage.
	Status  metav1.ConditionStatus
	Reason  string
	Message string
	// RequeueAfter: 0 = not until the spec or an annotation changes (or,
	// after StoreFailed, the error's backoff).
	RequeueAfter time.Duration
	// MarkDone is the backfill-from value recorded as done ("" = none),
	// after Event is recorded.
	MarkDone string
	Event    Event
}

// SyncedMessage is a completed run's condition message on the status it is
// written to.
func (e BackfillEnd) SyncedMessage(st v1alpha1.BackfillStatus) string {
	return e.Message + "; cursor " + backfillCursor(st)
}

// EndBackfill decides what an attempt's end means: p is the provider as the
// attempt left it, start and run what it was to do, now when it ended. A
// failure leaves the one-off pending, to be run again; only a completed run,
// or a provider type that will never have an events API, settles it.
func EndBackfill(p *v1alpha1.PaymentProvider, start BackfillStart, run BackfillRun, out BackfillOutcome, now time.Time) BackfillEnd {
	interval := BackfillTimingFor(&p.Spec).Interval
	retry := min(interval, out.Retry)
	since := run.Since.UTC().Format(time.RFC3339)
	failed := func(reason, msg string, requeue time.Duration) BackfillEnd {
		return BackfillEnd{Status: metav1.ConditionFalse, Reason: reason, Message: msg, RequeueAfter: requeue}
	}
	switch out.Result {
	case BackfillUnavailable:
		return failed(v1alpha1.ReasonBackfillUnavailable, fmt.Sprintf("cannot reach the provider: %v", out.Err), retry)
	case BackfillUnsupported:
		// Without an events API to read, webhooks (which such providers
		// redeliver for days) and status queries are the channels.
		end := failed(v1alpha1.ReasonBackfillUnsupported, fmt.Sprintf("provider type %s has no events API; its payments are settled by webhooks and status queries", p.Spec.Type), 0)
		if start.OneOff != "" {
			end.MarkDone, end.Event = start.OneOff, Event{Warning: true, Reason: v1alpha1.ReasonBackfillUnsupported, Message: end.Message}
		}
		return end
	case BackfillDeferred:
		return failed(v1alpha1.ReasonBackfillDeferred, fmt.Sprintf("provider calls deferred (%s); resuming in %s from cursor %s",
			out.DeferReason, out.Wait.Round(time.Millisecond), backfillCursor(p.Status.Backfill)), out.Wait)
	case BackfillListFailed:
		msg := fmt.Sprintf("reading events since %s failed after %d event(s): %v", since, out.Read, out.Err)
		if p.Status.Backfill.Progress != nil {
			msg += "; the next run resumes where this one stopped"
		}
		if ra, ok := provider.RetryAfter(out.Err); ok && ra > 0 {
			retry = ra
		}
		return failed(v1alpha1.ReasonBackfillListFailed, msg, retry)
	case BackfillStoreFailed:
		return failed(v1alpha1.ReasonBackfillWriteFailed, fmt.Sprintf("storing events failed after %d event(s); the page is re-read on retry: %v", out.Read, out.Err), 0)
	}
	msg := fmt.Sprintf("read %d event(s) since %s: %d new, %d already in the inbox", out.Read, since, out.Stored, out.Read-out.Stored-out.Skipped)
	if out.Skipped > 0 {
		msg += fmt.Sprintf(", %d unstorable (see Events)", out.Skipped)
	}
	if run.Resumed {
		msg += "; resumed an unfinished run"
	}
	if run.Retained {
		msg += fmt.Sprintf("; the provider keeps events for %s only, older ones cannot be read", out.Retention)
	}
	end := BackfillEnd{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBackfillSynced, Message: msg}
	if run.OneOff != "" {
		end.MarkDone = run.OneOff
		end.Event = Event{Reason: "BackfillCompleted", Message: fmt.Sprintf("%s=%s replayed: %s", v1alpha1.AnnotationBackfillFrom, run.OneOff, msg)}
	}
	switch {
	case !p.Spec.Backfill.Enabled:
	case run.Regular:
		end.RequeueAfter = interval
	default:
		// A one-off between two periodic runs keeps their cadence.
		end.RequeueAfter = max(start.Next.Sub(now), backfillOneOffFloor)
	}
	return end
}

func backfillCursor(st v1alpha1.BackfillStatus) string {
	if c := st.Cursor; c != nil {
		return c.UTC().Format(time.RFC3339)
	}
	return "(none)"
}
