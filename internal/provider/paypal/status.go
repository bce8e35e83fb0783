package paypal

import (
	"maps"

	"github.com/paywarden/paywarden/internal/provider"
)

// orderStatuses maps every order status except COMPLETED, which says only that the
// order flow ended: whether money moved is in the capture (captureStatuses) or, for an
// order with intent AUTHORIZE that was not captured yet, in the authorization
// (authorizationStatuses).
//
// APPROVED is not "unpaid": the payer approved and the merchant's capture (intent
// CAPTURE) or authorization (intent AUTHORIZE) is due; PayPal takes no money without
// it. EXPIRED is not a documented PayPal order status but is kept because the spec
// asks for it and an expired order must never read as Unknown.
var orderStatuses = map[string]provider.Status{
	"CREATED":               provider.StatusPending,
	"SAVED":                 provider.StatusPending,
	"PAYER_ACTION_REQUIRED": provider.StatusPending,
	"APPROVED":              provider.StatusApproved,
	"VOIDED":                provider.StatusCanceled,
	"EXPIRED":               provider.StatusExpired,
}

// awaitingPayer are the order statuses in which the payer must still approve at
// PayPal (Payment.CustomerAction is the approval link).
var awaitingPayer = map[string]bool{"CREATED": true, "SAVED": true, "PAYER_ACTION_REQUIRED": true}

// captureStatuses maps purchase_units[].payments.captures[].status for COMPLETED orders.
var captureStatuses = map[string]provider.Status{
	"COMPLETED":          provider.StatusSucceeded,
	"DECLINED":           provider.StatusFailed,
	"FAILED":             provider.StatusFailed,
	"PENDING":            provider.StatusProcessing,
	"REFUNDED":           provider.StatusRefund,
	"PARTIALLY_REFUNDED": provider.StatusRefund,
}

// authorizationStatuses maps purchase_units[].payments.authorizations[].status of a
// COMPLETED order that has no capture. CAPTURED and PARTIALLY_CAPTURED are absent on
// purpose: the capture decides then, and an authorization that says "captured" next
// to no capture is Unknown (keep querying) rather than paid.
var authorizationStatuses = map[string]provider.Status{
	"CREATED": provider.StatusAuthorized,
	"PENDING": provider.StatusAuthorized,
	"VOIDED":  provider.StatusCanceled,
	"EXPIRED": provider.StatusExpired,
	"DENIED":  provider.StatusFailed,
}

// refundStatuses maps a refund's status. CANCELLED is Failed: the refund will not
// happen and the money stays with the merchant.
var refundStatuses = map[string]provider.RefundStatus{
	"COMPLETED": provider.RefundSucceeded,
	"PENDING":   provider.RefundPending,
	"FAILED":    provider.RefundFailed,
	"CANCELLED": provider.RefundFailed,
}

// FailureApprovalReversed is the FailureCode of CHECKOUT.PAYMENT-APPROVAL.REVERSED.
const FailureApprovalReversed = "PAYMENT_APPROVAL_REVERSED"

// eventStatuses maps the webhook event types paywarden acts on.
// CHECKOUT.ORDER.APPROVED is Approved: the payer approved, no money moved yet.
// CHECKOUT.PAYMENT-APPROVAL.REVERSED is Expired: the approved order was not
// captured within the capture window (3 hours by default), so PayPal canceled
// it and refunded the payer ("Handle uncaptured payments"); nothing was taken.
// PAYMENT.CAPTURE.REVERSED (PayPal took the money back, e.g. after a bank
// chargeback) is reported like a refund: its resource carries the amount returned.
var eventStatuses = map[string]provider.Status{
	"PAYMENT.CAPTURE.COMPLETED":          provider.StatusSucceeded,
	"PAYMENT.CAPTURE.DENIED":             provider.StatusFailed,
	"PAYMENT.CAPTURE.DECLINED":           provider.StatusFailed,
	"PAYMENT.CAPTURE.PENDING":            provider.StatusProcessing,
	"PAYMENT.CAPTURE.REFUNDED":           provider.StatusRefund,
	"PAYMENT.CAPTURE.REVERSED":           provider.StatusRefund,
	"CHECKOUT.ORDER.APPROVED":            provider.StatusApproved,
	"CHECKOUT.PAYMENT-APPROVAL.REVERSED": provider.StatusExpired,
	"PAYMENT.AUTHORIZATION.CREATED":      provider.StatusAuthorized,
	"PAYMENT.AUTHORIZATION.VOIDED":       provider.StatusCanceled,
	"CUSTOMER.DISPUTE.CREATED":           provider.StatusDispute,
	"CUSTOMER.DISPUTE.RESOLVED":          provider.StatusDispute,
}

// disputeWon are the outcome codes of a resolved dispute that leave the money
// with the merchant: the seller's favour, and the buyer withdrawing the claim.
// PayPal lists the codes (Customer Disputes API v1, definition
// dispute_outcome) without defining them, so every other code, and a
// resolution without one, reads as lost: where PayPal does not say the
// merchant kept the money, a human looks (NeedsReview=DisputeLost). ACCEPTED
// is the merchant accepting the claim, "which refunds the disputed amount"
// (PayPal developer docs, "Subscribe to disputes webhooks");
// RESOLVED_WITH_PAYOUT, DENIED and NONE do not say who paid.
var disputeWon = map[string]bool{OutcomeSellerFavour: true, OutcomeCanceled: true}

// DisputeResult is how a dispute event says the dispute ended:
// CUSTOMER.DISPUTE.RESOLVED is provider.DisputeWon or provider.DisputeLost
// by its dispute_outcome.outcome_code (disputeWon), every other dispute event
// is an open dispute ("").
func DisputeResult(eventType string, d Dispute) string {
	switch {
	case eventType != "CUSTOMER.DISPUTE.RESOLVED":
		return ""
	case d.DisputeOutcome != nil && disputeWon[d.DisputeOutcome.OutcomeCode]:
		return provider.DisputeWon
	}
	return provider.DisputeLost
}

// OrderStatuses returns a copy of the order status table (COMPLETED excluded: see
// CaptureStatuses and AuthorizationStatuses).
func OrderStatuses() map[string]provider.Status { return maps.Clone(orderStatuses) }

// CaptureStatuses returns a copy of the capture status table used for COMPLETED orders.
func CaptureStatuses() map[string]provider.Status { return maps.Clone(captureStatuses) }

// AuthorizationStatuses returns a copy of the authorization status table used for
// COMPLETED orders without a capture.
func AuthorizationStatuses() map[string]provider.Status {
	return maps.Clone(authorizationStatuses)
}

// RefundStatuses returns a copy of the refund status table.
func RefundStatuses() map[string]provider.RefundStatus { return maps.Clone(refundStatuses) }

// EventStatuses returns a copy of the supported event type table.
func EventStatuses() map[string]provider.Status { return maps.Clone(eventStatuses) }

// MapEventType normalizes an event type; supported is false for types not acted on.
func MapEventType(typ string) (status provider.Status, supported bool) {
	s, ok := eventStatuses[typ]
	return s, ok
}

// MapCaptureStatus normalizes a capture status; unlisted strings are Unknown.
func MapCaptureStatus(raw string) provider.Status {
	return provider.Lookup(captureStatuses, raw, provider.StatusUnknown)
}

// MapAuthorizationStatus normalizes the status of an authorization that has no
// capture; unlisted strings (CAPTURED without a capture among them) are Unknown.
func MapAuthorizationStatus(raw string) provider.Status {
	return provider.Lookup(authorizationStatuses, raw, provider.StatusUnknown)
}

// MapRefundStatus normalizes a refund status; unlisted strings are Unknown.
func MapRefundStatus(raw string) provider.RefundStatus {
	return provider.Lookup(refundStatuses, raw, provider.RefundUnknown)
}

// MapOrderStatus normalizes an order. For COMPLETED it reads the last capture of the
// first purchase unit that has one; without a capture, the last authorization of the
// first purchase unit that has one (intent AUTHORIZE, not captured yet); with neither
// the order is Unknown (keep querying) rather than paid. raw is "<order status>",
// "<order>/<capture>" or "<order>/authorization:<authorization>".
func MapOrderStatus(o Order) (status provider.Status, raw string) {
	if o.Status != "COMPLETED" {
		if s, ok := orderStatuses[o.Status]; ok {
			return s, o.Status
		}
		return provider.StatusUnknown, o.Status
	}
	if c, ok := lastCapture(o); ok {
		return MapCaptureStatus(c.Status), "COMPLETED/" + c.Status
	}
	if a, ok := lastAuthorization(o); ok {
		return MapAuthorizationStatus(a.Status), "COMPLETED/authorization:" + a.Status
	}
	return provider.StatusUnknown, "COMPLETED/"
}

func lastCapture(o Order) (Capture, bool) {
	for _, pu := range o.PurchaseUnits {
		if pu.Payments != nil && len(pu.Payments.Captures) > 0 {
			return pu.Payments.Captures[len(pu.Payments.Captures)-1], true
		}
	}
	return Capture{}, false
}

func lastAuthorization(o Order) (Authorization, bool) {
	for _, pu := range o.PurchaseUnits {
		if pu.Payments != nil && len(pu.Payments.Authorizations) > 0 {
			return pu.Payments.Authorizations[len(pu.Payments.Authorizations)-1], true
		}
	}
	return Authorization{}, false
}
