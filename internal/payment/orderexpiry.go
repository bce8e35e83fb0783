package payment

import (
	"fmt"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// A provider may delete a payment nobody completed (PayPal deletes an order
// that was not approved, or approved and neither captured nor authorized,
// after about 3 hours: provider.Lifecycle.OrderLifetime) and answer "not
// found" for it from then on. Such an answer is the provider's verdict that
// the payment expired unpaid, but only when the facts allow nothing else: a
// blanket "404 means expired" would also settle an order read with the wrong
// account, or one looked up before it could exist.

// orderExpiresAt is the earliest time p's order can have been deleted by the
// provider for want of completion: the provider type's order lifetime after
// the order was asked for (the create marker; for a payment paywarden only
// tracks, its object's creation, which came after the order's). ok is false
// when the provider keeps such orders, or when p shows that its order was
// completed: money was received or reserved, or a capture is under way.
func orderExpiresAt(p *v1alpha1.Payment, pol Policy) (time.Time, bool) {
	life := pol.Lifecycle.OrderLifetime
	if !pol.LifecycleKnown || life <= 0 || !neverCompleted(&p.Status) {
		return time.Time{}, false
	}
	asked := p.CreationTimestamp.Time
	if t := p.Status.CreateRequestedAt; t != nil {
		asked = t.Time
	}
	return asked.Add(life), true
}

// neverCompleted: nothing in st says the provider completed the order. It
// waits for the payer, or the payer approved and no capture (or
// authorization) took effect; an Unknown payment counts when paywarden itself
// gave up on it (a query it could not settle) and nothing was received or
// reserved.
func neverCompleted(st *v1alpha1.PaymentStatus) bool {
	if st.AmountReceived != nil || st.AmountAuthorized != nil || st.AuthorizationExpiresAt != nil {
		return false
	}
	switch st.Phase {
	case "", v1alpha1.PhasePending:
		return true
	case v1alpha1.PhaseProcessing:
		return st.PayerApproved
	case v1alpha1.PhaseUnknown:
		return !IsHumanReason(reviewReason(st.Conditions)) && st.AmountToCapture == nil
	}
	return false
}

// orderExpired reports whether err, a provider's answer about p, says that
// the provider deleted p's order uncompleted: a "not found" at or after
// orderExpiresAt.
func orderExpired(p *v1alpha1.Payment, pol Policy, err error, now time.Time) bool {
	if Classify(err) != NotFound {
		return false
	}
	at, ok := orderExpiresAt(p, pol)
	return ok && !now.Before(at)
}

// orderExpiredObservation is the provider's verdict orderExpired found, as
// an observation from source.
func orderExpiredObservation(p *v1alpha1.Payment, pol Policy, source v1alpha1.ObservationSource, err error) Observation {
	msg := fmt.Sprintf("the provider no longer has order %s (%v): nobody completed it, and the provider deletes such an order %s after it is created; no money moved",
		ProviderID(p), err, pol.Lifecycle.OrderLifetime)
	return Observation{
		Source: source, Observed: ObservedExpired, ProviderPaymentID: ProviderID(p),
		Failure: &v1alpha1.Failure{Code: v1alpha1.ReasonOrderExpired, Message: msg},
		Reason:  v1alpha1.ReasonOrderExpired,
	}
}

// orderExpiryQuery is when a payment whose schedule ran out is read once
// more before it is given up on: after its order would have been deleted
// (with a tenth of the lifetime to spare), so that the provider's "not
// found" settles it Expired instead of RetriesExhausted. ok is false when no
// such read is due, and when that read is further away than two of the
// schedule's last steps: a schedule far shorter than the order's life gives
// up as it says (RetriesExhausted), it is not stretched by hours.
func orderExpiryQuery(p *v1alpha1.Payment, pol Policy, now time.Time) (time.Time, bool) {
	at, ok := orderExpiresAt(p, pol)
	if !ok {
		return time.Time{}, false
	}
	at = at.Add(pol.Lifecycle.OrderLifetime / 10)
	return at, now.Before(at) && at.Sub(now) <= 2*lastStep(pol, string(p.UID))
}
