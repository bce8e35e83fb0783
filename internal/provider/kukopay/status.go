package kukopay

import (
	"maps"

	"github.com/paywarden/paywarden/internal/provider"
)

// paymentStatuses maps KukoPay payment.status to the normalized status. Anything not
// listed is Unknown: a status we do not understand must never settle a payment.
var paymentStatuses = map[string]provider.Status{
	"pending":            provider.StatusPending,
	"requires_action":    provider.StatusPending, // the payer must act: next_action
	"requires_capture":   provider.StatusAuthorized,
	"canceled":           provider.StatusCanceled,
	"processing":         provider.StatusProcessing,
	"succeeded":          provider.StatusSucceeded,
	"failed":             provider.StatusFailed,
	"expired":            provider.StatusExpired,
	"partially_refunded": provider.StatusRefund,
	"refunded":           provider.StatusRefund,
}

// eventStatuses maps the event types paywarden acts on. refund.failed is a Refund
// event too: it settles the Refund it carries (Event.Refund) as failed, and its
// cumulative payment_amount_refunded is unchanged, so the payment stays where it was.
var eventStatuses = map[string]provider.Status{
	"payment.succeeded":  provider.StatusSucceeded,
	"payment.failed":     provider.StatusFailed,
	"payment.expired":    provider.StatusExpired,
	"payment.authorized": provider.StatusAuthorized,
	"payment.canceled":   provider.StatusCanceled,
	"refund.succeeded":   provider.StatusRefund,
	"refund.failed":      provider.StatusRefund,
	"dispute.created":    provider.StatusDispute,
}

// refundStatuses maps a refund's status; canceled is Failed (the refund will not
// happen).
var refundStatuses = map[string]provider.RefundStatus{
	"pending":   provider.RefundPending,
	"succeeded": provider.RefundSucceeded,
	"failed":    provider.RefundFailed,
	"canceled":  provider.RefundFailed,
}

// RefundStatuses returns a copy of the refund status table.
func RefundStatuses() map[string]provider.RefundStatus { return maps.Clone(refundStatuses) }

// MapRefundStatus normalizes a refund status; unlisted strings are Unknown.
func MapRefundStatus(raw string) provider.RefundStatus {
	return provider.Lookup(refundStatuses, raw, provider.RefundUnknown)
}

// PaymentStatuses returns a copy of the payment status mapping table.
func PaymentStatuses() map[string]provider.Status { return maps.Clone(paymentStatuses) }

// EventStatuses returns a copy of the supported event type table.
func EventStatuses() map[string]provider.Status { return maps.Clone(eventStatuses) }

// MapPaymentStatus normalizes a payment status; unlisted strings are Unknown.
func MapPaymentStatus(raw string) provider.Status {
	return provider.Lookup(paymentStatuses, raw, provider.StatusUnknown)
}

// MapEventType normalizes an event type; supported is false for types not acted on.
func MapEventType(typ string) (status provider.Status, supported bool) {
	s, ok := eventStatuses[typ]
	return s, ok
}
