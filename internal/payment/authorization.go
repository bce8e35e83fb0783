package payment

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Rules about an authorization's lifetime, from the facts status keeps
// (authorizationExpiresAt) and what the provider reports.

// voidedAtItsEnd reports whether obs, a void or cancel of st's authorization,
// is the authorization reaching the end of its validity rather than anyone's
// cancel: PayPal sends PAYMENT.AUTHORIZATION.VOIDED for both ("voided either
// due to authorization reaching its 30 day validity period or ... manually
// voided", PayPal webhook event names, Payments v2). It is the end when it
// comes at or after authorizationExpiresAt (the event's own time, else now)
// and paywarden did not ask for a cancel before then (no cancel operation,
// or one asked for at or after authorizationExpiresAt; not the cancel call's
// answer otherwise).
func voidedAtItsEnd(st *v1alpha1.PaymentStatus, obs Observation, now time.Time) bool {
	if obs.Observed != ObservedCanceled || st.Phase != v1alpha1.PhaseAuthorized || st.AuthorizationExpiresAt == nil {
		return false
	}
	if op := st.Operation; obs.Source == v1alpha1.SourceCancel || (op != nil && op.Kind == v1alpha1.OperationCancel) {
		// paywarden's cancel voided it, unless that cancel was asked for
		// once the authorization had ended: nothing was left for it to void,
		// whether its answer, a look-up or the void's event comes first.
		return op != nil && op.Kind == v1alpha1.OperationCancel && !op.RequestedAt.Time.Before(st.AuthorizationExpiresAt.Time)
	}
	at := obs.OccurredAt
	if at.IsZero() {
		at = now
	}
	return !at.Before(st.AuthorizationExpiresAt.Time)
}

// expiredAtItsEnd is obs read as what it is, the authorization's expiry.
func expiredAtItsEnd(st *v1alpha1.PaymentStatus, obs Observation) Observation {
	obs.Observed = ObservedExpired
	obs.Failure = &v1alpha1.Failure{Code: v1alpha1.ReasonAuthorizationExpired, Message: fmt.Sprintf(
		"the provider voided the authorization (%s) at the end of its validity (%s), uncaptured; nobody asked for a cancel",
		obs.Raw, st.AuthorizationExpiresAt.UTC().Format(time.RFC3339))}
	return obs
}

// honorPeriodEnded says, once, that an Authorized payment is past the time
// until which the provider guarantees its reserved funds
// (status.fundsGuaranteedUntil: PayPal's 3-day honor period, "after the honor
// period expires, capture success depends on risk assessment and fund
// availability", PayPal developer docs, "Authorization and honor period"),
// uncaptured: condition FundsGuaranteed=False (HonorPeriodEnded) and a Warning
// Event. Not while a capture is under way; not past the authorization's own
// end (its expiry says more). ok is false when there is nothing to say.
func honorPeriodEnded(p *v1alpha1.Payment, now time.Time) (Outcome, bool) {
	st := &p.Status
	until := st.FundsGuaranteedUntil
	switch {
	case st.Phase != v1alpha1.PhaseAuthorized, until == nil, now.Before(until.Time),
		st.Operation != nil && st.Operation.Kind == v1alpha1.OperationCapture,
		st.AuthorizationExpiresAt != nil && !now.Before(st.AuthorizationExpiresAt.Time):
		return Outcome{}, false
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFundsGuaranteed); c != nil && c.Status == metav1.ConditionFalse {
		return Outcome{}, false
	}
	valid := "its authorization"
	if exp := st.AuthorizationExpiresAt; exp != nil {
		valid += " is valid until " + exp.UTC().Format(time.RFC3339)
	} else {
		valid += " is still valid"
	}
	msg := fmt.Sprintf("the provider guaranteed the authorized funds until %s, and they were not captured: a capture may now be declined (%s)",
		until.UTC().Format(time.RFC3339), valid)
	c := begin(p, now)
	meta.SetStatusCondition(&c.st().Conditions, metav1.Condition{
		Type: v1alpha1.ConditionFundsGuaranteed, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonHonorPeriodEnded,
		Message: msg, LastTransitionTime: metav1.NewTime(now),
	})
	c.event(true, v1alpha1.ReasonHonorPeriodEnded, msg)
	return c.done(), true
}
