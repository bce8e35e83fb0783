package kukopay

import (
	"maps"

	"github.com/paywarden/paywarden/internal/provider"
)

// paymentStatuses maps KukoPay payment.status to the normalized status. Anything not
// listed is Unknown: a status we do not understand must never settle a payment.
var paymentStatuses = map[string]provider.Status{
	"pending":            provider.StatusPending,
	"processing":         provider.StatusProcessing,
	"succeeded":          provider.StatusSucceeded,
	"failed":             provider.StatusFailed,
	"expired":            provider.StatusExpired,
	"partially_refunded": provider.StatusRefund,
	"refunded":           provider.StatusRefund,
}

// eventStatuses maps the event types paywarden acts on. refund.failed is deliberately
// absent: a failed refund leaves the money where it was, so there is nothing to apply;
// the receiver acknowledges it and records it as Ignored for the audit trail.
var eventStatuses = map[string]provider.Status{
	"payment.succeeded": provider.StatusSucceeded,
	"payment.failed":    provider.StatusFailed,
	"payment.expired":   provider.StatusExpired,
	"refund.succeeded":  provider.StatusRefund,
	"dispute.created":   provider.StatusDispute,
}

// PaymentStatuses returns a copy of the payment status mapping table.
func PaymentStatuses() map[string]provider.Status { return maps.Clone(paymentStatuses) }

// EventStatuses returns a copy of the supported event type table.
func EventStatuses() map[string]provider.Status { return maps.Clone(eventStatuses) }

// MapPaymentStatus normalizes a payment status; unlisted strings are Unknown.
func MapPaymentStatus(raw string) provider.Status {
	if s, ok := paymentStatuses[raw]; ok {
		return s
	}
	return provider.StatusUnknown
}

// MapEventType normalizes an event type; supported is false for types not acted on.
func MapEventType(typ string) (status provider.Status, supported bool) {
	s, ok := eventStatuses[typ]
	return s, ok
}
