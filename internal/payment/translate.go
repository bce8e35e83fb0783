package payment

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// report is what a provider said about one payment, whichever way it came:
// the answer to a call (provider.Payment) or an event (provider.Event). Both
// are translated into observations here and nowhere else, so a status query
// and a webhook cannot disagree about what a provider status means.
type report struct {
	status                      provider.Status
	raw, eventID, paymentID     string
	amount, refundedTotal       int64
	currency                    string
	failureCode, failureMessage string
	source                      v1alpha1.ObservationSource
	checkoutID                  string
	captureID                   string
	action                      *provider.CustomerAction
	authorizationExpiresAt      time.Time
	fundsGuaranteedUntil        time.Time
	// paymentAmount is true when amount is what the payment itself is for (a
	// payment read back), false when it is the amount of the event's own
	// subject (a refund event carries the refund's amount).
	paymentAmount bool
}

// FromPayment translates the provider's view of a payment, as read by a
// create, a lookup or a status query, into observations for Apply, in order.
// A refunded payment is reported as its success followed by the refund, so a
// payment whose success was never seen still settles and is checked against
// the amount asked for.
func FromPayment(pp provider.Payment, source v1alpha1.ObservationSource) []Observation {
	return report{
		status: pp.Status, raw: pp.RawStatus, paymentID: pp.ID,
		amount: pp.Amount, currency: pp.Currency, refundedTotal: pp.RefundedTotal,
		failureCode: pp.FailureCode, failureMessage: pp.FailureMessage,
		source: source, paymentAmount: true, checkoutID: pp.CheckoutID, captureID: pp.CaptureID,
		action: pp.CustomerAction, authorizationExpiresAt: pp.AuthorizationExpiresAt,
		fundsGuaranteedUntil: pp.FundsGuaranteedUntil,
	}.observations()
}

// FromEvent translates a provider event (webhook or events API) into the one
// observation it carries. A refund event says nothing about the amount paid,
// so it is not turned into a success: applied before the success, it waits
// (see EventResult).
func FromEvent(ev provider.Event, via v1alpha1.EventVia) Observation {
	source := v1alpha1.SourceWebhook
	if via == v1alpha1.ViaBackfill {
		source = v1alpha1.SourceBackfill
	}
	obs := report{
		status: ev.Status, raw: ev.Type, eventID: ev.ID, paymentID: ev.PaymentID,
		amount: ev.Amount, currency: ev.Currency, refundedTotal: ev.RefundedTotal,
		failureCode: ev.FailureCode, failureMessage: ev.FailureMessage,
		source: source, paymentAmount: ev.Status == provider.StatusSucceeded || ev.Status == provider.StatusAuthorized,
		checkoutID: ev.CheckoutID,
	}.observations()
	last := obs[len(obs)-1]
	last.OccurredAt = ev.OccurredAt
	last.RefundFailed = ev.Refund != nil && ev.Refund.Status == provider.RefundFailed
	if last.Observed == ObservedDispute {
		last.Dispute = ev.DisputeOutcome
	}
	return last
}

func (r report) observations() []Observation {
	obs := Observation{
		Source: r.source, Observed: observed(r.status), Raw: r.raw,
		EventID: r.eventID, ProviderPaymentID: r.paymentID, CheckoutID: r.checkoutID,
	}
	if a := r.action; a != nil && a.URL != "" {
		obs.CustomerAction = &v1alpha1.CustomerAction{URL: a.URL}
		if !a.ExpiresAt.IsZero() {
			t := metav1.NewTime(a.ExpiresAt)
			obs.CustomerAction.ExpiresAt = &t
		}
	}
	money := func(v int64) *v1alpha1.Money {
		if r.currency == "" {
			return nil
		}
		return &v1alpha1.Money{Value: v, Currency: r.currency}
	}
	switch obs.Observed {
	case ObservedSucceeded:
		obs.Amount = money(r.amount)
		obs.CaptureID = r.captureID
	case ObservedAuthorized:
		if r.paymentAmount {
			obs.Amount = money(r.amount)
		}
		if !r.authorizationExpiresAt.IsZero() {
			t := metav1.NewTime(r.authorizationExpiresAt)
			obs.AuthorizationExpiresAt = &t
		}
		if !r.fundsGuaranteedUntil.IsZero() {
			t := metav1.NewTime(r.fundsGuaranteedUntil)
			obs.FundsGuaranteedUntil = &t
		}
	case ObservedFailed, ObservedExpired, ObservedPending:
		// A Pending answer with a failure is an attempt that failed and a
		// payment that waits for another payment method (Stripe's
		// requires_payment_method with last_payment_error).
		if r.failureCode != "" || r.failureMessage != "" {
			obs.Failure = &v1alpha1.Failure{Code: r.failureCode, Message: r.failureMessage}
		}
	case ObservedRefund:
		obs.RefundedTotal = money(r.refundedTotal)
		obs.CaptureID = r.captureID
		if r.paymentAmount {
			success := obs
			success.Observed, success.Amount, success.RefundedTotal = ObservedSucceeded, money(r.amount), nil
			return []Observation{success, obs}
		}
	}
	return []Observation{obs}
}

// observed maps the adapters' normalized status onto the state machine's.
// Anything unlisted is Unknown, which the state machine never settles on.
func observed(s provider.Status) Observed {
	switch s {
	case provider.StatusPending:
		return ObservedPending
	case provider.StatusProcessing:
		return ObservedProcessing
	case provider.StatusSucceeded:
		return ObservedSucceeded
	case provider.StatusFailed:
		return ObservedFailed
	case provider.StatusExpired:
		return ObservedExpired
	case provider.StatusRefund:
		return ObservedRefund
	case provider.StatusDispute:
		return ObservedDispute
	case provider.StatusApproved:
		return ObservedApproved
	case provider.StatusAuthorized:
		return ObservedAuthorized
	case provider.StatusCanceled:
		return ObservedCanceled
	default:
		return ObservedUnknown
	}
}
