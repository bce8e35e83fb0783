package plugin

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/payment"
)

// The operator's actions are the annotations the manager already
// understands (SPEC §2.4). Each is decided here before it is written, by
// the manager's own rules (payment.OperatorAction on a copy with the
// annotation), so what the manager would refuse is refused without writing
// anything; then the manager's answer is awaited in the payment's status.

// ErrRefused is the class of an action refused before anything was written.
var ErrRefused = errors.New("refused, nothing written")

// Request is an annotation write the manager will act on.
type Request struct {
	Verb string
	// Set are the annotations to write.
	Set map[string]string
	// Value is what status.actions records once the manager acted on it.
	Value string
	// Describe says what was asked ("capture of 30.00 USD of the 45.00 USD authorized").
	Describe string
	// Note says what the manager will make of it when it does not act at once.
	Note string
	// Unset are annotations to remove with the write.
	Unset []string
	// LastQuery, for a requery of a Refund, is its last status query before
	// the request: the answer is a later one.
	LastQuery time.Time
}

func refused(verb, format string, args ...any) error {
	return fmt.Errorf("%s %w: %s", verb, ErrRefused, fmt.Sprintf(format, args...))
}

// decide runs the manager's decision on a copy of p with the request's
// annotations: a refusal is returned as an error, and ok is false when the
// manager will not act yet (a capture waiting for its authorization).
func decide(p *v1alpha1.Payment, req Request, why string, now time.Time) (ok bool, err error) {
	cp := p.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	for k, v := range req.Set {
		cp.Annotations[k] = v
	}
	out, got, ok := payment.OperatorAction(cp, now)
	switch {
	case !ok:
		return false, nil
	case got != why:
		return false, refused(req.Verb, "an earlier operator action (%s) is still waiting for the manager; see %s", got, whyCmd(p))
	}
	if e, no := out.Refusal(); no {
		return false, refused(req.Verb, "%s", e.Message)
	}
	return true, nil
}

// PlanCapture decides a capture of amountText (major units of the
// payment's currency; empty: everything authorized).
func PlanCapture(p *v1alpha1.Payment, amountText string, now time.Time) (Request, error) {
	auth := payment.AuthorizedAmount(p)
	req := Request{Verb: "capture", Value: payment.CaptureAll, Describe: "capture of all " + v1alpha1.FormatAmount(auth.Value, auth.Currency) + " authorized"}
	if amountText != "" {
		minor, err := currency.ParseMajor(amountText, p.Spec.Amount.Currency)
		if err != nil {
			return req, refused("capture", "--amount: %v", err)
		}
		req.Value = strconv.FormatInt(minor, 10)
		req.Describe = fmt.Sprintf("capture of %s of the %s authorized", v1alpha1.FormatAmount(minor, p.Spec.Amount.Currency), v1alpha1.FormatAmount(auth.Value, auth.Currency))
	}
	if req.Value == p.Status.Actions.Capture {
		// The manager acts on each value once; the same amount asked again
		// is written another way it reads alike.
		if req.Value == payment.CaptureAll {
			req.Value = strconv.FormatInt(auth.Value, 10)
		} else {
			req.Value = "0" + req.Value
		}
	}
	req.Set = map[string]string{v1alpha1.AnnotationCapture: req.Value}
	ok, err := decide(p, req, "operator capture", now)
	if err != nil {
		return req, err
	}
	if !ok {
		req.Note = fmt.Sprintf("the payment is %s: the capture waits until it is Authorized", phase(p))
	}
	return req, nil
}

// PlanCancel decides a cancel with the operator's reason.
func PlanCancel(p *v1alpha1.Payment, reason string, now time.Time) (Request, error) {
	req := Request{Verb: "cancel", Value: reason, Describe: "cancel: " + reason, Set: map[string]string{v1alpha1.AnnotationCancel: reason}}
	if strings.TrimSpace(reason) == "" {
		return req, refused("cancel", "--reason is required: it is recorded in the payment's history")
	}
	if reason == p.Status.Actions.Cancel {
		return req, refused("cancel", "a cancel with this reason was already acted on (status.actions.cancel); give another --reason")
	}
	if _, err := decide(p, req, "operator cancel", now); err != nil {
		return req, err
	}
	return req, nil
}

// PlanRequery decides a requery: the value is the time asked, so every
// requery is a new value.
func PlanRequery(p *v1alpha1.Payment, now time.Time) (Request, error) {
	v := now.UTC().Format(time.RFC3339Nano)
	req := Request{Verb: "requery", Value: v, Describe: "status query now, and the query schedule restarted", Set: map[string]string{v1alpha1.AnnotationRequery: v}}
	if _, err := decide(p, req, "operator requery", now); err != nil {
		return req, err
	}
	return req, nil
}

// ResolvePhases are the phases an operator may settle a payment in.
var ResolvePhases = []string{string(v1alpha1.PhaseSucceeded), string(v1alpha1.PhaseFailed), string(v1alpha1.PhaseExpired), string(v1alpha1.PhaseCanceled)}

// PlanResolve decides a resolve to phase with the operator's reason.
func PlanResolve(p *v1alpha1.Payment, to, reason string, now time.Time) (Request, error) {
	req := Request{Verb: "resolve", Value: to + ": " + reason, Describe: "resolve to " + to + ": " + reason,
		Set: map[string]string{v1alpha1.AnnotationResolve: to, v1alpha1.AnnotationResolveReason: reason}}
	switch {
	case !slices.Contains(ResolvePhases, to):
		return req, refused("resolve", "--phase %q: give one of %s", to, strings.Join(ResolvePhases, ", "))
	case strings.TrimSpace(reason) == "":
		return req, refused("resolve", "--reason is required: it is recorded in the payment's history")
	case req.Value == p.Status.Actions.Resolve:
		return req, refused("resolve", "this resolve was already acted on (status.actions.resolve); give another --reason")
	}
	if _, err := decide(p, req, "operator resolve", now); err != nil {
		return req, err
	}
	return req, nil
}

// Progress is how far the manager got with a request.
type Progress struct {
	Done bool
	// Failed: done, but not as asked (refused by the manager or the
	// provider, or the payment ended otherwise).
	Failed bool
	// Text is the outcome once done, what it still waits for otherwise.
	Text string
}

// refusalReasons are the Events by which the manager refuses each action.
var refusalReasons = map[string][]string{
	"capture": {"CaptureRefused", "CaptureIgnored"},
	"cancel":  {"CancelRefused", "CancelIgnored"},
	"requery": {"RequeryIgnored"},
	"resolve": {"ResolveIgnored"},
	// A one-off backfill the manager marked done without running it.
	"backfill": {"InvalidBackfillFrom", v1alpha1.ReasonBackfillUnsupported},
}

// Refusal is the newest Event refusing verb among events that happened
// since (the write).
func Refusal(verb string, events []eventsv1.Event, since time.Time) *eventsv1.Event {
	var found *eventsv1.Event
	for i := range events {
		e := &events[i]
		t := eventTime(e)
		if e.Series != nil && !e.Series.LastObservedTime.IsZero() {
			t = e.Series.LastObservedTime.Time
		}
		if slices.Contains(refusalReasons[verb], e.Reason) && !t.Before(since) && (found == nil || t.After(eventTime(found))) {
			found = e
		}
	}
	return found
}

// Check says how far the manager got with req on p, given a refusal Event
// recorded since the write (nil when none).
func Check(p *v1alpha1.Payment, req Request, refusal *eventsv1.Event) Progress {
	st := &p.Status
	acted := map[string]string{"capture": st.Actions.Capture, "cancel": st.Actions.Cancel, "requery": st.Actions.Requery, "resolve": st.Actions.Resolve}[req.Verb]
	if acted != req.Value {
		s := fmt.Sprintf("the manager has not acted on the %s yet (payment %s is %s)", req.Verb, p.Name, phase(p))
		if req.Note != "" {
			s += "; " + req.Note
		}
		return Progress{Text: s}
	}
	if refusal != nil {
		return Progress{Done: true, Failed: true, Text: fmt.Sprintf("%s refused by the manager: %s", req.Verb, refusal.Note)}
	}
	if op := st.Operation; op != nil && strings.EqualFold(string(op.Kind), req.Verb) {
		return Progress{Text: fmt.Sprintf("the %s call to the provider is in progress (%s)", req.Verb, operationDetail(op, time.Time{}))}
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue && req.Verb != "requery" {
		return Progress{Done: true, Failed: true, Text: fmt.Sprintf("payment %s is %s and needs review: %s: %s", p.Name, phase(p), c.Reason, c.Message)}
	}
	switch req.Verb {
	case "capture":
		switch {
		case st.Phase.TookMoney():
			return Progress{Done: true, Text: fmt.Sprintf("captured: payment %s is %s, %s", p.Name, st.Phase, amount(p))}
		case st.Phase.IsFinal():
			return Progress{Done: true, Failed: true, Text: fmt.Sprintf("not captured: payment %s ended %s", p.Name, st.Phase)}
		}
		return Progress{Text: fmt.Sprintf("the capture was sent; payment %s is %s (provider status %q)", p.Name, phase(p), st.ProviderStatus)}
	case "cancel":
		switch {
		case st.Phase == v1alpha1.PhaseCanceled:
			return Progress{Done: true, Text: fmt.Sprintf("canceled: payment %s is Canceled", p.Name)}
		case st.Phase.TookMoney():
			return Progress{Done: true, Failed: true, Text: fmt.Sprintf("not canceled: payment %s is %s, it took the money first; refund it: %s", p.Name, st.Phase, cmdLine("refund", p.Namespace, p.Name, "--all"))}
		case st.Phase.IsFinal():
			return Progress{Done: true, Failed: true, Text: fmt.Sprintf("not canceled: payment %s ended %s first", p.Name, st.Phase)}
		}
		return Progress{Text: fmt.Sprintf("payment %s is %s", p.Name, phase(p))}
	case "resolve":
		to, _, _ := strings.Cut(req.Value, ": ")
		if string(st.Phase) == to {
			return Progress{Done: true, Text: fmt.Sprintf("resolved: payment %s is %s", p.Name, st.Phase)}
		}
		return Progress{Text: fmt.Sprintf("payment %s is %s", p.Name, phase(p))}
	case "requery":
		asked := requeriedAt(p)
		if l := st.Query.LastTime; l != nil && !asked.IsZero() && !l.Time.Before(asked) {
			return Progress{Done: true, Text: queryAnswered(l.Time, fmt.Sprintf("payment %s is %s", p.Name, phase(p)), st.ProviderStatus, &st.Query, "")}
		}
		if st.Phase.IsFinal() {
			return Progress{Done: true, Text: fmt.Sprintf("payment %s is %s", p.Name, st.Phase)}
		}
		return Progress{Text: queryPending(fmt.Sprintf("payment %s is %s", p.Name, phase(p)), &st.Query)}
	}
	return Progress{Done: true}
}

// queryAnswered says what the status query answered at: the object as it is
// now (what), the provider's status, the error the answer carried, review
// (what else needs saying, or "") and when the next query is due.
func queryAnswered(at time.Time, what, providerStatus string, q *v1alpha1.QueryStatus, review string) string {
	s := fmt.Sprintf("queried at %s: %s", stamp(at), what)
	if providerStatus != "" {
		s += fmt.Sprintf(" (provider status %q)", providerStatus)
	}
	if e := q.LastError; e != "" {
		s += fmt.Sprintf("; no usable answer (%s): %s", q.LastErrorClass, e)
	}
	s += review
	if n := q.NextTime; n != nil {
		s += "; next query at " + stamp(n.Time)
	}
	return s
}

// queryPending says that the restarted status query has not been answered
// yet on the object as it is now (what), and when it is due.
func queryPending(what string, q *v1alpha1.QueryStatus) string {
	s := "the schedule restarted; the status query has not been answered yet (" + what
	if n := q.NextTime; n != nil {
		s += ", query due at " + stamp(n.Time)
	}
	return s + ")"
}

// requeriedAt is when the manager restarted the schedule for the last
// requery (its history entry).
func requeriedAt(p *v1alpha1.Payment) time.Time {
	h := p.Status.History
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Source == v1alpha1.SourceManual && strings.HasPrefix(h[i].Reason, "Requery") {
			return h[i].Time.Time
		}
	}
	return time.Time{}
}
