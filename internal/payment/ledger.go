package payment

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// ledger is the part of a status that every state machine keeps the same
// way, Payment's and Refund's: the bounded history of applied changes, the
// last event and the recent event ids that dedup redeliveries, the
// NeedsReview condition, and the Events announcing changes.
type ledger struct {
	history    *[]v1alpha1.HistoryEntry
	dropped    *int32
	last       **v1alpha1.EventRef
	recent     *[]string
	conditions *[]metav1.Condition
	events     *[]Event
	now        time.Time
}

// remember records an applied observation as the last event, and its event
// id (if any) for dedup.
func (l ledger) remember(source v1alpha1.ObservationSource, observed, raw, eventID string, occurredAt time.Time) {
	ref := &v1alpha1.EventRef{ID: eventID, Type: raw, Source: source}
	if ref.Type == "" {
		ref.Type = observed
	}
	if !occurredAt.IsZero() {
		t := metav1.NewTime(occurredAt)
		ref.Time = &t
	}
	*l.last = ref
	if eventID == "" {
		return
	}
	*l.recent = append(*l.recent, eventID)
	if n := len(*l.recent); n > MaxRecentEventIDs {
		*l.recent = append([]string(nil), (*l.recent)[n-MaxRecentEventIDs:]...)
	}
}

// appendHistory adds one entry, never earlier than the last one (writers'
// clocks differ), keeping at most MaxHistory.
func (l ledger) appendHistory(from, to v1alpha1.PaymentPhase, source v1alpha1.ObservationSource, eventID, reason string) {
	t := l.now
	h := *l.history
	if n := len(h); n > 0 && h[n-1].Time.After(t) {
		t = h[n-1].Time.Time
	}
	h = append(h, v1alpha1.HistoryEntry{Time: metav1.NewTime(t), From: from, To: to, Source: source, EventID: eventID, Reason: reason})
	if n := len(h); n > MaxHistory {
		*l.dropped += int32(n - MaxHistory)
		h = append([]v1alpha1.HistoryEntry(nil), h[n-MaxHistory:]...)
	}
	*l.history = h
}

func (l ledger) needsReview(reason, msg string) {
	meta.SetStatusCondition(l.conditions, metav1.Condition{
		Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: reason,
		Message: msg, LastTransitionTime: metav1.NewTime(l.now),
	})
	l.warn(reason, msg)
}

func (l ledger) clearReview(msg string) {
	meta.SetStatusCondition(l.conditions, metav1.Condition{
		Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonReviewed,
		Message: msg, LastTransitionTime: metav1.NewTime(l.now),
	})
}

func (l ledger) warn(reason, msg string) {
	*l.events = append(*l.events, Event{Warning: true, Reason: reason, Message: msg})
}

func (l ledger) reviewReason() string { return reviewReason(*l.conditions) }

// reviewReason is the reason of the NeedsReview condition while it stands,
// "" when nobody needs to look.
func reviewReason(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}

func (l ledger) seen(id string) bool {
	for _, s := range *l.recent {
		if s == id {
			return true
		}
	}
	return false
}

// setReadyCondition derives Ready: True only when settled and nobody needs
// to look.
func setReadyCondition(conds *[]metav1.Condition, final bool, phase string, now time.Time) {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, LastTransitionTime: metav1.NewTime(now)}
	review := meta.FindStatusCondition(*conds, v1alpha1.ConditionNeedsReview)
	switch {
	case review != nil && review.Status == metav1.ConditionTrue:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, review.Reason, "needs review: "+review.Message
	case final:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonSettled, "settled as "+phase
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonInProgress, "waiting for the provider's final answer"
	}
	meta.SetStatusCondition(conds, c)
}
