package payment_test

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// bfProvider is a provider with a 10m backfill interval, its last periodic run
// at lastRun (nil = never) and the given backfill-from and backfill-from-done
// annotations ("" = unset).
func bfProvider(enabled bool, lastRun *metav1.Time, from, done string) *v1alpha1.PaymentProvider {
	p := &v1alpha1.PaymentProvider{}
	p.Spec.Type = v1alpha1.ProviderKukoPay
	p.Spec.Backfill.Enabled = enabled
	p.Spec.Backfill.Interval = &metav1.Duration{Duration: 10 * time.Minute}
	p.Status.Backfill.LastRunTime = lastRun
	p.Annotations = map[string]string{}
	if from != "" {
		p.Annotations[v1alpha1.AnnotationBackfillFrom] = from
	}
	if done != "" {
		p.Annotations[v1alpha1.AnnotationBackfillFromDone] = done
	}
	return p
}

func TestStartBackfill(t *testing.T) {
	hourAgo := bfNow.Add(-time.Hour).Format(time.RFC3339)
	invalid := func(v string) payment.Event {
		return payment.Event{Warning: true, Reason: "InvalidBackfillFrom",
			Message: `payments.paywarden.dev/backfill-from="` + v + `" is not an RFC 3339 time in the past; nothing replayed`}
	}
	for _, tc := range []struct {
		name    string
		p       *v1alpha1.PaymentProvider
		want    payment.BackfillStart
		wantRun bool
	}{
		{name: "a disabled backfill without a request does nothing and is not requeued",
			p: bfProvider(false, at(-time.Hour), "", "")},
		{name: "an enabled backfill that never ran is due", p: bfProvider(true, nil, "", ""),
			want: payment.BackfillStart{Due: true}, wantRun: true},
		{name: "a periodic run is due once the interval has passed", p: bfProvider(true, at(-10*time.Minute), "", ""),
			want: payment.BackfillStart{Due: true, Next: bfNow}, wantRun: true},
		{name: "a periodic run is due later than the interval too", p: bfProvider(true, at(-time.Hour), "", ""),
			want: payment.BackfillStart{Due: true, Next: bfNow.Add(-50 * time.Minute)}, wantRun: true},
		{name: "before the interval has passed the provider is requeued for its end", p: bfProvider(true, at(-4*time.Minute), "", ""),
			want: payment.BackfillStart{Next: bfNow.Add(6 * time.Minute), RequeueAfter: 6 * time.Minute}},
		{name: "a backfill-from in the past runs a one-off, with the backfill disabled", p: bfProvider(false, nil, hourAgo, ""),
			want: payment.BackfillStart{OneOff: hourAgo, From: bfNow.Add(-time.Hour)}, wantRun: true},
		{name: "a backfill-from is read around blanks, and kept as written", p: bfProvider(false, nil, " "+hourAgo+"\n", ""),
			want: payment.BackfillStart{OneOff: " " + hourAgo + "\n", From: bfNow.Add(-time.Hour)}, wantRun: true},
		{name: "a backfill-from of now is in the past", p: bfProvider(false, nil, bfNow.Format(time.RFC3339), ""),
			want: payment.BackfillStart{OneOff: bfNow.Format(time.RFC3339), From: bfNow}, wantRun: true},
		{name: "a backfill-from already done does not run again", p: bfProvider(false, nil, hourAgo, hourAgo)},
		{name: "a new backfill-from runs though an older one is done", p: bfProvider(false, nil, hourAgo, "2026-04-01T00:00:00Z"),
			want: payment.BackfillStart{OneOff: hourAgo, From: bfNow.Add(-time.Hour)}, wantRun: true},
		{name: "a backfill-from that is not RFC 3339 is marked done with a Warning", p: bfProvider(false, nil, "yesterday", ""),
			want: payment.BackfillStart{MarkDone: "yesterday", Event: invalid("yesterday")}},
		{name: "a backfill-from in the future is marked done with a Warning", p: bfProvider(false, nil, "2026-05-01T12:00:01Z", ""),
			want: payment.BackfillStart{MarkDone: "2026-05-01T12:00:01Z", Event: invalid("2026-05-01T12:00:01Z")}},
		{name: "an invalid backfill-from leaves a periodic run not yet due requeued", p: bfProvider(true, at(-4*time.Minute), "yesterday", ""),
			want: payment.BackfillStart{MarkDone: "yesterday", Event: invalid("yesterday"), Next: bfNow.Add(6 * time.Minute), RequeueAfter: 6 * time.Minute}},
		{name: "an invalid backfill-from leaves a due periodic run due", p: bfProvider(true, nil, "yesterday", ""),
			want: payment.BackfillStart{Due: true, MarkDone: "yesterday", Event: invalid("yesterday")}, wantRun: true},
		{name: "a one-off between two periodic runs runs at once, the next periodic run kept", p: bfProvider(true, at(-4*time.Minute), hourAgo, ""),
			want: payment.BackfillStart{OneOff: hourAgo, From: bfNow.Add(-time.Hour), Next: bfNow.Add(6 * time.Minute)}, wantRun: true},
		{name: "a one-off and a due periodic run are served together", p: bfProvider(true, at(-time.Hour), hourAgo, ""),
			want: payment.BackfillStart{Due: true, OneOff: hourAgo, From: bfNow.Add(-time.Hour), Next: bfNow.Add(-50 * time.Minute)}, wantRun: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := payment.StartBackfill(tc.p, bfNow)
			if !equalStart(got, tc.want) || got.Run() != tc.wantRun {
				t.Errorf("StartBackfill (run %v)\n got  %+v\n want %+v (run %v)", got.Run(), got, tc.want, tc.wantRun)
			}
		})
	}
}

func equalStart(a, b payment.BackfillStart) bool {
	return a.Due == b.Due && a.OneOff == b.OneOff && a.From.Equal(b.From) && a.MarkDone == b.MarkDone &&
		a.Event == b.Event && a.Next.Equal(b.Next) && a.RequeueAfter == b.RequeueAfter
}

func TestEndBackfill(t *testing.T) {
	const oneOff = "2026-05-01T09:00:00Z"
	enabled, disabled := bfProvider(true, nil, "", ""), bfProvider(false, nil, "", "")
	withStatus := func(p *v1alpha1.PaymentProvider, st v1alpha1.BackfillStatus) *v1alpha1.PaymentProvider {
		p = p.DeepCopy()
		p.Status.Backfill = st
		return p
	}
	shortInterval := enabled.DeepCopy()
	shortInterval.Spec.Backfill.Interval = &metav1.Duration{Duration: 30 * time.Second}
	stripe := disabled.DeepCopy()
	stripe.Spec.Type = v1alpha1.ProviderStripe

	periodic := payment.BackfillRun{Since: bfNow.Add(-65 * time.Minute), Regular: true, Advance: true}
	oneOffRun := payment.BackfillRun{Since: bfNow.Add(-3 * time.Hour), OneOff: oneOff}
	resumed := periodic
	resumed.NewestFirst, resumed.Resumed, resumed.Retained = true, true, true
	due := payment.BackfillStart{Due: true}
	between := payment.BackfillStart{OneOff: oneOff, Next: bfNow.Add(4 * time.Minute)}
	overdue := payment.BackfillStart{OneOff: oneOff, Next: bfNow.Add(-time.Second)}
	boom := errors.New("boom")
	throttled := &provider.Error{Provider: "stripe", Op: "list events", Class: provider.ErrRetryable, StatusCode: 429, RetryAfter: 42 * time.Second}
	noHint := &provider.Error{Provider: "stripe", Op: "list events", Class: provider.ErrRetryable, StatusCode: 503}
	done := func(msg string) payment.Event {
		return payment.Event{Reason: "BackfillCompleted", Message: "payments.paywarden.dev/backfill-from=" + oneOff + " replayed: " + msg}
	}
	unsupported := "provider type kukopay has no events API; its payments are settled by webhooks and status queries"
	synced := func(msg string, requeue time.Duration) payment.BackfillEnd {
		return payment.BackfillEnd{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBackfillSynced, Message: msg, RequeueAfter: requeue}
	}
	failed := func(reason, msg string, requeue time.Duration) payment.BackfillEnd {
		return payment.BackfillEnd{Status: metav1.ConditionFalse, Reason: reason, Message: msg, RequeueAfter: requeue}
	}
	for _, tc := range []struct {
		name  string
		p     *v1alpha1.PaymentProvider
		start payment.BackfillStart
		run   payment.BackfillRun
		out   payment.BackfillOutcome
		want  payment.BackfillEnd
	}{
		{name: "an unusable provider is retried after the provider retry", p: enabled, start: due,
			out:  payment.BackfillOutcome{Result: payment.BackfillUnavailable, Err: boom, Retry: time.Minute},
			want: failed(v1alpha1.ReasonBackfillUnavailable, "cannot reach the provider: boom", time.Minute)},
		{name: "an unusable provider is retried no later than the interval", p: shortInterval, start: due,
			out:  payment.BackfillOutcome{Result: payment.BackfillUnavailable, Err: boom, Retry: time.Minute},
			want: failed(v1alpha1.ReasonBackfillUnavailable, "cannot reach the provider: boom", 30*time.Second)},
		{name: "a provider type without an events API is reported and not requeued", p: enabled, start: due,
			out:  payment.BackfillOutcome{Result: payment.BackfillUnsupported, Retry: time.Minute},
			want: failed(v1alpha1.ReasonBackfillUnsupported, unsupported, 0)},
		{name: "a one-off at a provider type without an events API is marked done with a Warning", p: disabled,
			start: payment.BackfillStart{OneOff: oneOff}, out: payment.BackfillOutcome{Result: payment.BackfillUnsupported},
			want: payment.BackfillEnd{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonBackfillUnsupported, Message: unsupported,
				MarkDone: oneOff, Event: payment.Event{Warning: true, Reason: v1alpha1.ReasonBackfillUnsupported, Message: unsupported}}},
		{name: "deferred calls resume after the wait, from the cursor the run left", start: due, run: periodic,
			p:    withStatus(enabled, v1alpha1.BackfillStatus{Cursor: at(-30 * time.Minute)}),
			out:  payment.BackfillOutcome{Result: payment.BackfillDeferred, DeferReason: "circuit_open", Wait: 1234567 * time.Microsecond, Retry: time.Minute},
			want: failed(v1alpha1.ReasonBackfillDeferred, "provider calls deferred (circuit_open); resuming in 1.235s from cursor 2026-05-01T11:30:00Z", 1234567*time.Microsecond)},
		{name: "deferred calls before any cursor name none", p: enabled, start: due, run: periodic,
			out:  payment.BackfillOutcome{Result: payment.BackfillDeferred, DeferReason: "rate_limited", Wait: 20 * time.Second},
			want: failed(v1alpha1.ReasonBackfillDeferred, "provider calls deferred (rate_limited); resuming in 20s from cursor (none)", 20*time.Second)},
		{name: "a failed list is retried after the provider retry", p: enabled, start: due, run: periodic,
			out:  payment.BackfillOutcome{Result: payment.BackfillListFailed, Read: 3, Err: boom, Retry: time.Minute},
			want: failed(v1alpha1.ReasonBackfillListFailed, "reading events since 2026-05-01T10:55:00Z failed after 3 event(s): boom", time.Minute)},
		{name: "a failed list with progress says the next run resumes", start: due, run: periodic,
			p:    withStatus(enabled, v1alpha1.BackfillStatus{Progress: &v1alpha1.BackfillProgress{Since: *at(-65 * time.Minute), PageCursor: "evt_9"}}),
			out:  payment.BackfillOutcome{Result: payment.BackfillListFailed, Read: 100, Err: noHint, Retry: time.Minute},
			want: failed(v1alpha1.ReasonBackfillListFailed, "reading events since 2026-05-01T10:55:00Z failed after 100 event(s): "+noHint.Error()+"; the next run resumes where this one stopped", time.Minute)},
		{name: "a failed list waits for the provider's Retry-After", p: enabled, start: due, run: periodic,
			out:  payment.BackfillOutcome{Result: payment.BackfillListFailed, Err: throttled, Retry: time.Minute},
			want: failed(v1alpha1.ReasonBackfillListFailed, "reading events since 2026-05-01T10:55:00Z failed after 0 event(s): "+throttled.Error(), 42*time.Second)},
		{name: "a failed list of a one-off leaves it pending", p: disabled, start: payment.BackfillStart{OneOff: oneOff}, run: oneOffRun,
			out:  payment.BackfillOutcome{Result: payment.BackfillListFailed, Err: boom, Retry: time.Minute},
			want: failed(v1alpha1.ReasonBackfillListFailed, "reading events since 2026-05-01T09:00:00Z failed after 0 event(s): boom", time.Minute)},
		{name: "a failed store is left to the error's backoff, the one-off pending", p: disabled, start: payment.BackfillStart{OneOff: oneOff}, run: oneOffRun,
			out:  payment.BackfillOutcome{Result: payment.BackfillStoreFailed, Read: 7, Err: boom, Retry: time.Minute},
			want: failed(v1alpha1.ReasonBackfillWriteFailed, "storing events failed after 7 event(s); the page is re-read on retry: boom", 0)},
		{name: "a completed periodic run comes back after the interval", p: enabled, start: due, run: periodic,
			out:  payment.BackfillOutcome{Read: 10, Stored: 4, Retry: time.Minute},
			want: synced("read 10 event(s) since 2026-05-01T10:55:00Z: 4 new, 6 already in the inbox", 10*time.Minute)},
		{name: "a completed run names unstorable events, a resumed run and the provider's retention", p: enabled, start: due, run: resumed,
			out: payment.BackfillOutcome{Read: 10, Stored: 4, Skipped: 2, Retention: 720 * time.Hour},
			want: synced("read 10 event(s) since 2026-05-01T10:55:00Z: 4 new, 4 already in the inbox, 2 unstorable (see Events)"+
				"; resumed an unfinished run; the provider keeps events for 720h0m0s only, older ones cannot be read", 10*time.Minute)},
		{name: "a completed one-off of a disabled backfill is marked done and not requeued", p: stripe, start: payment.BackfillStart{OneOff: oneOff}, run: oneOffRun,
			out: payment.BackfillOutcome{Read: 2, Stored: 2},
			want: payment.BackfillEnd{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBackfillSynced,
				Message:  "read 2 event(s) since 2026-05-01T09:00:00Z: 2 new, 0 already in the inbox",
				MarkDone: oneOff, Event: done("read 2 event(s) since 2026-05-01T09:00:00Z: 2 new, 0 already in the inbox")}},
		{name: "a one-off between two periodic runs keeps their cadence", p: enabled, start: between, run: oneOffRun,
			out: payment.BackfillOutcome{},
			want: payment.BackfillEnd{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBackfillSynced,
				Message:  "read 0 event(s) since 2026-05-01T09:00:00Z: 0 new, 0 already in the inbox",
				MarkDone: oneOff, Event: done("read 0 event(s) since 2026-05-01T09:00:00Z: 0 new, 0 already in the inbox"), RequeueAfter: 4 * time.Minute}},
		{name: "a one-off that outlasted the next periodic run's time is requeued at once", p: enabled, start: overdue, run: oneOffRun,
			out: payment.BackfillOutcome{},
			want: payment.BackfillEnd{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBackfillSynced,
				Message:  "read 0 event(s) since 2026-05-01T09:00:00Z: 0 new, 0 already in the inbox",
				MarkDone: oneOff, Event: done("read 0 event(s) since 2026-05-01T09:00:00Z: 0 new, 0 already in the inbox"), RequeueAfter: 10 * time.Millisecond}},
		{name: "a periodic run serving a one-off comes back after the interval and marks it done", p: enabled,
			start: payment.BackfillStart{Due: true, OneOff: oneOff}, run: payment.BackfillRun{Since: bfNow.Add(-3 * time.Hour), Regular: true, OneOff: oneOff, Advance: true},
			out: payment.BackfillOutcome{Read: 1},
			want: payment.BackfillEnd{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonBackfillSynced,
				Message:  "read 1 event(s) since 2026-05-01T09:00:00Z: 0 new, 1 already in the inbox",
				MarkDone: oneOff, Event: done("read 1 event(s) since 2026-05-01T09:00:00Z: 0 new, 1 already in the inbox"), RequeueAfter: 10 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := payment.EndBackfill(tc.p, tc.start, tc.run, tc.out, bfNow); got != tc.want {
				t.Errorf("EndBackfill\n got  %+v\n want %+v", got, tc.want)
			}
		})
	}
}

func TestBackfillSyncedMessageNamesTheCursorWritten(t *testing.T) {
	end := payment.BackfillEnd{Message: "read 0 event(s)"}
	for _, tc := range []struct {
		name string
		st   v1alpha1.BackfillStatus
		want string
	}{
		{name: "a cursor is named in UTC to the second", st: v1alpha1.BackfillStatus{Cursor: at(-90 * time.Minute)},
			want: "read 0 event(s); cursor 2026-05-01T10:30:00Z"},
		{name: "no cursor yet is named as none", want: "read 0 event(s); cursor (none)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := end.SyncedMessage(tc.st); got != tc.want {
				t.Errorf("SyncedMessage = %q, want %q", got, tc.want)
			}
		})
	}
}
