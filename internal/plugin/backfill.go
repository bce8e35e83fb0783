package plugin

import (
	"errors"
	"fmt"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// A one-off backfill is the annotation backfill-from on a PaymentProvider
// (controllers.Backfill): the manager replays the provider's events from
// that time once, then records the value in backfill-from-done. A value
// that is not an RFC 3339 time in the past is marked done without a replay
// (an InvalidBackfillFrom Event): it is refused here before anything is
// written.

// PlanBackfill decides a replay of prov's events since fromText: an RFC
// 3339 time, or how far back from now as a duration ("2h").
func PlanBackfill(prov *v1alpha1.PaymentProvider, fromText string, now time.Time) (Request, error) {
	req := Request{Verb: "backfill"}
	from, err := backfillFrom(fromText, now)
	if err != nil {
		return req, refused("backfill", "--from: %v", err)
	}
	if !prov.DeletionTimestamp.IsZero() {
		return req, refused("backfill", "paymentprovider %s is being deleted; the manager replays nothing for it", prov.Name)
	}
	v := from.UTC().Format(time.RFC3339)
	req.Value, req.Set = v, map[string]string{v1alpha1.AnnotationBackfillFrom: v}
	req.Describe = "replay of the provider's events since " + v
	asked, done := prov.Annotations[v1alpha1.AnnotationBackfillFrom], prov.Annotations[v1alpha1.AnnotationBackfillFromDone]
	switch {
	case done == v:
		// The manager runs each value once: the same time again runs once
		// its done mark is gone.
		req.Unset = []string{v1alpha1.AnnotationBackfillFromDone}
		req.Describe += ", again"
	case asked != "" && asked != done && asked != v:
		req.Note = fmt.Sprintf("it replaces %s=%s, which the manager had not run yet", v1alpha1.AnnotationBackfillFrom, asked)
	}
	return req, nil
}

// backfillFrom reads --from: an RFC 3339 time in the past, or a positive
// duration back from now (to the second).
func backfillFrom(text string, now time.Time) (time.Time, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return time.Time{}, errors.New("give an RFC 3339 time (2026-05-01T08:00:00Z) or how far back (2h)")
	}
	if t, err := time.Parse(time.RFC3339, text); err == nil {
		if t.After(now) {
			return t, fmt.Errorf("%s is in the future (now is %s): there is nothing to replay yet", text, stamp(now))
		}
		return t, nil
	}
	d, err := time.ParseDuration(text)
	switch {
	case err != nil:
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-05-01T08:00:00Z) nor how far back (2h)", text)
	case d <= 0:
		return time.Time{}, fmt.Errorf("%q: how far back must be positive", text)
	}
	return now.Add(-d).Truncate(time.Second), nil
}

// CheckBackfill says how far the manager got with the replay req asked of
// prov, given an Event by which it refused it (nil when none).
func CheckBackfill(prov *v1alpha1.PaymentProvider, req Request, refusal *eventsv1.Event) Progress {
	c := meta.FindStatusCondition(prov.Status.Conditions, v1alpha1.ConditionBackfill)
	if prov.Annotations[v1alpha1.AnnotationBackfillFromDone] != req.Value {
		s := fmt.Sprintf("the manager has not finished the replay since %s yet (paymentprovider %s", req.Value, prov.Name)
		if c != nil && c.Status != metav1.ConditionTrue {
			s += fmt.Sprintf("; Backfill %s: %s", c.Reason, c.Message)
		}
		return Progress{Text: s + ")"}
	}
	switch {
	case refusal != nil:
		return Progress{Done: true, Failed: true, Text: fmt.Sprintf("backfill refused by the manager: %s", refusal.Note)}
	case c == nil:
		return Progress{Done: true, Text: "replayed (no Backfill condition)"}
	case c.Status != metav1.ConditionTrue:
		return Progress{Done: true, Failed: true, Text: fmt.Sprintf("not replayed: Backfill %s: %s", c.Reason, c.Message)}
	}
	return Progress{Done: true, Text: "replayed: " + c.Message}
}
