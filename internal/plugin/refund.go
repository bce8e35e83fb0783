package plugin

import (
	"fmt"
	"slices"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/payment"
)

// candidateUID stands for the Refund not created yet among its payment's
// Refunds while its allowance is decided.
const candidateUID = "kubectl-paywarden-candidate"

// PlanRefund builds the Refund of p that refund creates (named
// "<payment>-<random>" by the API server) and decides it with the manager's
// rule (payment.RefundAllowance) over the payment's other Refunds: what the
// manager would refuse is refused before anything is created. note says why
// the manager will let it wait, if it will.
func PlanRefund(p *v1alpha1.Payment, siblings []v1alpha1.Refund, amountText string, all bool, reason string, now time.Time) (rf *v1alpha1.Refund, describe, note string, err error) {
	rf = &v1alpha1.Refund{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, GenerateName: p.Name + "-"},
		Spec:       v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: p.Name}, Reason: reason},
	}
	switch {
	case all == (amountText != ""):
		return nil, "", "", refused("refund", "give either --amount (in %s major units) or --all (everything still refundable)", p.Spec.Amount.Currency)
	case amountText != "":
		minor, err := currency.ParseMajor(amountText, p.Spec.Amount.Currency)
		if err != nil {
			return nil, "", "", refused("refund", "--amount: %v", err)
		}
		rf.Spec.Amount = &v1alpha1.Amount{Value: minor, Currency: p.Spec.Amount.Currency}
	}
	// The candidate is counted after every Refund there is, as the manager
	// will count it once created.
	candidate := rf.DeepCopy()
	candidate.UID = candidateUID
	created := now
	for _, s := range siblings {
		if t := s.CreationTimestamp.Time; !t.Before(created) {
			created = t.Add(time.Second)
		}
	}
	candidate.CreationTimestamp = metav1.NewTime(created)
	amount, waitFor, refusal := payment.RefundAllowance(candidate, p, siblings)
	if refusal != "" {
		return nil, "", "", refused("refund", "%s", refusal)
	}
	describe = "refund of everything still refundable"
	switch {
	case amount.Value > 0:
		describe = "refund of " + v1alpha1.FormatAmount(amount.Value, amount.Currency)
	case rf.Spec.Amount != nil:
		describe = "refund of " + v1alpha1.FormatAmount(rf.Spec.Amount.Value, rf.Spec.Amount.Currency)
	}
	if waitFor != "" {
		note = "the refund waits (" + waitFor + ") before the manager decides it"
	}
	return rf, describe, note, nil
}

// CheckRefund says how far a Refund got: done in Succeeded, Failed, or
// Unknown (a human's).
func CheckRefund(rf *v1alpha1.Refund) Progress {
	st := &rf.Status
	switch st.Phase {
	case v1alpha1.RefundSucceeded:
		s := fmt.Sprintf("refunded: refund %s is Succeeded, %s", rf.Name, st.AmountDisplay)
		if st.ProviderRefundID != "" {
			s += " (provider refund id " + st.ProviderRefundID + ")"
		}
		return Progress{Done: true, Text: s}
	case v1alpha1.RefundFailed:
		s := fmt.Sprintf("refund %s Failed", rf.Name)
		if f := st.Failure; f != nil {
			s += ": " + f.Code + ": " + f.Message
		}
		return Progress{Done: true, Failed: true, Text: s}
	case v1alpha1.RefundUnknown:
		s := fmt.Sprintf("refund %s is Unknown and needs a human (docs/runbook-refund-unknown.md)", rf.Name)
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview); c != nil {
			s += ": " + c.Reason + ": " + c.Message
		}
		return Progress{Done: true, Failed: true, Text: s}
	}
	s := fmt.Sprintf("refund %s is %s", rf.Name, refundPhase(rf))
	if e := st.Query.LastError; e != "" {
		s += "; last error: " + e
	}
	return Progress{Text: s}
}

// RefundResolvePhases are the phases an operator may settle a Refund in.
var RefundResolvePhases = []string{string(v1alpha1.RefundSucceeded), string(v1alpha1.RefundFailed)}

// decideRefund runs the manager's decision on a copy of rf with the
// request's annotations (payment.RefundOperatorAction, as PlanRefund runs
// it): a refusal is returned as an error.
func decideRefund(rf *v1alpha1.Refund, req Request, why string, now time.Time) error {
	cp := rf.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	for k, v := range req.Set {
		cp.Annotations[k] = v
	}
	out, got, ok := payment.RefundOperatorAction(cp, now)
	switch {
	case !ok:
		return nil
	case got != why:
		return refused(req.Verb, "an earlier operator action (%s) on refund %s is still waiting for the manager; see %s", got, rf.Name, cmdLine("why", rf.Namespace, rf.Spec.PaymentRef.Name))
	}
	if e, no := out.Refusal(); no {
		return refused(req.Verb, "%s", e.Message)
	}
	return nil
}

// PlanRefundResolve decides a resolve of a Refund to phase (Succeeded or
// Failed) with the operator's reason. The manager settles a Refund by hand
// while it is not final, or final but under review.
func PlanRefundResolve(rf *v1alpha1.Refund, to, reason string, now time.Time) (Request, error) {
	req := Request{Verb: "resolve", Value: to + ": " + reason, Describe: "resolve to " + to + ": " + reason,
		Set: map[string]string{v1alpha1.AnnotationResolve: to, v1alpha1.AnnotationResolveReason: reason}}
	switch {
	case !slices.Contains(RefundResolvePhases, to):
		return req, refused("resolve", "--phase %q: a refund is resolved to %s", to, strings.Join(RefundResolvePhases, " or "))
	case strings.TrimSpace(reason) == "":
		return req, refused("resolve", "--reason is required: it is recorded in the refund's history")
	case req.Value == rf.Status.Actions.Resolve:
		return req, refused("resolve", "this resolve was already acted on (status.actions.resolve); give another --reason")
	}
	return req, decideRefund(rf, req, "operator resolve", now)
}

// PlanRefundRequery decides a requery of a Refund: a status query now and
// its schedule restarted, which also takes an Unknown refund back. Its
// answer is the first query after the one rf shows.
func PlanRefundRequery(rf *v1alpha1.Refund, now time.Time) (Request, error) {
	v := now.UTC().Format(time.RFC3339Nano)
	req := Request{Verb: "requery", Value: v, Describe: "status query now, and the query schedule restarted", Set: map[string]string{v1alpha1.AnnotationRequery: v}}
	if l := rf.Status.Query.LastTime; l != nil {
		req.LastQuery = l.Time
	}
	return req, decideRefund(rf, req, "operator requery", now)
}

// CheckRefundAction says how far the manager got with req on rf, given a
// refusal Event recorded since the write (nil when none).
func CheckRefundAction(rf *v1alpha1.Refund, req Request, refusal *eventsv1.Event) Progress {
	st := &rf.Status
	acted := map[string]string{"resolve": st.Actions.Resolve, "requery": st.Actions.Requery}[req.Verb]
	switch {
	case acted != req.Value:
		return Progress{Text: fmt.Sprintf("the manager has not acted on the %s yet (refund %s is %s)", req.Verb, rf.Name, refundPhase(rf))}
	case refusal != nil:
		return Progress{Done: true, Failed: true, Text: fmt.Sprintf("%s refused by the manager: %s", req.Verb, refusal.Note)}
	case req.Verb == "resolve":
		to, _, _ := strings.Cut(req.Value, ": ")
		if string(st.Phase) == to {
			return Progress{Done: true, Text: fmt.Sprintf("resolved: refund %s is %s", rf.Name, st.Phase)}
		}
		return Progress{Text: fmt.Sprintf("refund %s is %s", rf.Name, refundPhase(rf))}
	}
	if l := st.Query.LastTime; l != nil && l.Time.After(req.LastQuery) {
		review := ""
		if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue {
			review = fmt.Sprintf("; needs review: %s: %s", c.Reason, c.Message)
		}
		return Progress{Done: true, Text: queryAnswered(l.Time, fmt.Sprintf("refund %s is %s", rf.Name, refundPhase(rf)), st.ProviderStatus, &st.Query, review)}
	}
	if st.Phase.IsFinal() {
		return Progress{Done: true, Text: fmt.Sprintf("refund %s is %s", rf.Name, st.Phase)}
	}
	return Progress{Text: queryPending(fmt.Sprintf("refund %s is %s", rf.Name, refundPhase(rf)), &st.Query)}
}
