package paypal

import (
	"maps"

	"github.com/paywarden/paywarden/internal/provider"
)

// orderStatuses maps every order status except COMPLETED, which says only that the
// order flow ended: whether money moved is in the capture status (captureStatuses).
// EXPIRED is not a documented PayPal order status but is kept because the spec asks for
// it and an expired order must never read as Unknown.
var orderStatuses = map[string]provider.Status{
	"CREATED":               provider.StatusPending,
	"SAVED":                 provider.StatusPending,
	"APPROVED":              provider.StatusPending,
	"PAYER_ACTION_REQUIRED": provider.StatusPending,
	"VOIDED":                provider.StatusFailed,
	"EXPIRED":               provider.StatusExpired,
}

// captureStatuses maps purchase_units[].payments.captures[].status for COMPLETED orders.
var captureStatuses = map[string]provider.Status{
	"COMPLETED":          provider.StatusSucceeded,
	"DECLINED":           provider.StatusFailed,
	"FAILED":             provider.StatusFailed,
	"PENDING":            provider.StatusProcessing,
	"REFUNDED":           provider.StatusRefund,
	"PARTIALLY_REFUNDED": provider.StatusRefund,
}

// eventStatuses maps the webhook event types paywarden acts on.
// CHECKOUT.ORDER.APPROVED is Pending: the payer approved but no money moved yet.
var eventStatuses = map[string]provider.Status{
	"PAYMENT.CAPTURE.COMPLETED": provider.StatusSucceeded,
	"PAYMENT.CAPTURE.DENIED":    provider.StatusFailed,
	"PAYMENT.CAPTURE.DECLINED":  provider.StatusFailed,
	"PAYMENT.CAPTURE.PENDING":   provider.StatusProcessing,
	"PAYMENT.CAPTURE.REFUNDED":  provider.StatusRefund,
	"CHECKOUT.ORDER.APPROVED":   provider.StatusPending,
	"CUSTOMER.DISPUTE.CREATED":  provider.StatusDispute,
}

// OrderStatuses returns a copy of the order status table (COMPLETED excluded: see
// CaptureStatuses).
func OrderStatuses() map[string]provider.Status { return maps.Clone(orderStatuses) }

// CaptureStatuses returns a copy of the capture status table used for COMPLETED orders.
func CaptureStatuses() map[string]provider.Status { return maps.Clone(captureStatuses) }

// EventStatuses returns a copy of the supported event type table.
func EventStatuses() map[string]provider.Status { return maps.Clone(eventStatuses) }

// MapEventType normalizes an event type; supported is false for types not acted on.
func MapEventType(typ string) (status provider.Status, supported bool) {
	s, ok := eventStatuses[typ]
	return s, ok
}

// MapCaptureStatus normalizes a capture status; unlisted strings are Unknown.
func MapCaptureStatus(raw string) provider.Status {
	if s, ok := captureStatuses[raw]; ok {
		return s
	}
	return provider.StatusUnknown
}

// MapOrderStatus normalizes an order. For COMPLETED it reads the last capture of the
// first purchase unit that has one; a COMPLETED order without a capture is Unknown
// (keep querying) rather than paid. raw is "<order status>" or "<order>/<capture>".
func MapOrderStatus(o Order) (status provider.Status, raw string) {
	if o.Status != "COMPLETED" {
		if s, ok := orderStatuses[o.Status]; ok {
			return s, o.Status
		}
		return provider.StatusUnknown, o.Status
	}
	c, ok := lastCapture(o)
	if !ok {
		return provider.StatusUnknown, "COMPLETED/"
	}
	return MapCaptureStatus(c.Status), "COMPLETED/" + c.Status
}

func lastCapture(o Order) (Capture, bool) {
	for _, pu := range o.PurchaseUnits {
		if pu.Payments != nil && len(pu.Payments.Captures) > 0 {
			return pu.Payments.Captures[len(pu.Payments.Captures)-1], true
		}
	}
	return Capture{}, false
}
