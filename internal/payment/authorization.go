package payment

import (
	"fmt"
	"time"

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
// and paywarden did not ask for a cancel (no cancel operation, not the cancel
// call's answer).
func voidedAtItsEnd(st *v1alpha1.PaymentStatus, obs Observation, now time.Time) bool {
	if obs.Observed != ObservedCanceled || st.Phase != v1alpha1.PhaseAuthorized || st.AuthorizationExpiresAt == nil {
		return false
	}
	if obs.Source == v1alpha1.SourceCancel || (st.Operation != nil && st.Operation.Kind == v1alpha1.OperationCancel) {
		return false
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
