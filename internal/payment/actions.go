package payment

import (
	"fmt"
	"strings"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// OperatorAction decides on the payment's operator annotations (SPEC §2.4),
// in the order Plan acts on them: resolve, requery, cancel, capture. ok is
// false when none has a value not yet acted on (a capture set early also
// waits for the authorization). Refusals are Warning Events of the outcome
// (CaptureRefused, CancelRefused, ResolveIgnored, ...): kubectl paywarden
// runs it on a copy with the annotation it is about to write, so it refuses
// locally exactly what the manager would, before anything is written.
func OperatorAction(p *v1alpha1.Payment, now time.Time) (out Outcome, why string, ok bool) {
	if out, ok := Resolve(p, now); ok {
		return out, "operator resolve", true
	}
	if out, ok := Requery(p, now); ok {
		return out, "operator requery", true
	}
	if out, ok := cancelAction(p, now); ok {
		return out, "operator cancel", true
	}
	if out, ok := captureAction(p, now); ok {
		return out, "operator capture", true
	}
	return Outcome{}, "", false
}

// Resolve applies the operator's resolve annotation (SPEC §2.4) once per
// value: a Manual observation through the state machine. ok is false when
// there is nothing new to act on.
func Resolve(p *v1alpha1.Payment, now time.Time) (Outcome, bool) {
	v := resolveValue(p)
	if v == "" || v == p.Status.Actions.Resolve {
		return Outcome{}, false
	}
	c := begin(p, now)
	to := p.Annotations[v1alpha1.AnnotationResolve]
	res := c.apply(Observation{
		Source: v1alpha1.SourceManual, Observed: Observed(to),
		Reason: p.Annotations[v1alpha1.AnnotationResolveReason],
	})
	c.st().Actions.Resolve = v
	if res.Decision != Applied {
		c.event(true, "ResolveIgnored", fmt.Sprintf("resolve %q not applied: %s", to, res.Reason))
	}
	return c.done(), true
}

// Requery applies the operator's requery annotation once per value: the
// schedule restarts with a query due now, which also takes an Unknown
// payment back into automatic handling. The phase is left to the answer.
func Requery(p *v1alpha1.Payment, now time.Time) (Outcome, bool) {
	v := p.Annotations[v1alpha1.AnnotationRequery]
	if v == "" || v == p.Status.Actions.Requery {
		return Outcome{}, false
	}
	c := begin(p, now)
	st := c.st()
	st.Actions.Requery = v
	if st.Phase.IsFinal() {
		c.event(false, "RequeryIgnored", fmt.Sprintf("payment is already %s; nothing to query", st.Phase))
		return c.done(), true
	}
	st.Query.Attempts, st.Query.ConsecutiveErrors, st.Query.LastError, st.Query.LastErrorClass = 0, 0, "", ""
	if st.Operation != nil {
		// The next query is the lookup of the operation's outcome: a
		// lookup that got no answer before is not made an answered one.
		st.Query.LastTime = nil
	}
	st.Query.UnansweredSince = nil
	st.Query.NextTime = ptrMicro(now)
	phase := st.Phase
	if phase == "" {
		phase = v1alpha1.PhasePending
	}
	m := machine{st: *st, deciding: deciding{obs: Observation{Source: v1alpha1.SourceManual}, now: now}}
	m.appendHistory(phase, phase, "Requery: restart the status-query schedule")
	c.p.Status = m.st
	c.event(false, "Requery", "status-query schedule restarted by an operator")
	return c.done(), true
}

func resolveValue(p *v1alpha1.Payment) string {
	v := p.Annotations[v1alpha1.AnnotationResolve]
	if v == "" {
		return ""
	}
	return v + ": " + p.Annotations[v1alpha1.AnnotationResolveReason]
}

// Refusal is the Event by which an operator action was refused or left
// alone (CaptureRefused, CancelIgnored, ResolveIgnored, ...), if the outcome
// has one: nothing the operator asked for happens.
func (o Outcome) Refusal() (Event, bool) { return refusal(o.Events) }

func refusal(events []Event) (Event, bool) {
	for _, e := range events {
		if strings.HasSuffix(e.Reason, "Refused") || strings.HasSuffix(e.Reason, "Ignored") {
			return e, true
		}
	}
	return Event{}, false
}

// ActionsUnanswered reports whether p carries an operator annotation with a
// value not acted on yet (its status.actions records another): one set
// while nothing read the payment, which its next reconcile answers.
func ActionsUnanswered(p *v1alpha1.Payment) bool {
	a := &p.Status.Actions
	unanswered := func(v, done string) bool { return v != "" && v != done }
	return unanswered(resolveValue(p), a.Resolve) ||
		unanswered(p.Annotations[v1alpha1.AnnotationRequery], a.Requery) ||
		unanswered(p.Annotations[v1alpha1.AnnotationCancel], a.Cancel) ||
		unanswered(p.Annotations[v1alpha1.AnnotationCapture], a.Capture)
}
