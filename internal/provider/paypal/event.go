package paypal

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/paywarden/paywarden/internal/provider"
)

// ParseEvent decodes one PayPal webhook event. Unknown event types parse with
// Supported=false as long as the envelope is sound.
//
// Event.PaymentID is always the ORDER id, the id Create and Get return and paywarden
// records as the payment's providerPaymentID; never an authorization, capture, refund
// or dispute id, which would look like a second payment for the same order. Capture
// and authorization events name the order in supplementary_data.related_ids.order_id
// (or an "up" link to the order); refunds may carry it in supplementary_data;
// disputes never do. Without it PaymentID stays empty and the payment is found by
// merchant reference.
//
// CHECKOUT.PAYMENT-APPROVAL.REVERSED is Expired for its order_id (FailureCode
// FailureApprovalReversed).
//
// PAYMENT.AUTHORIZATION.VOIDED is Canceled, or Expired when its authorization
// reads EXPIRED: PayPal sends it for a void and for an authorization reaching
// the end of its validity alike.
//
// CUSTOMER.DISPUTE.RESOLVED is a Dispute with Event.DisputeOutcome won or lost
// (DisputeResult); CUSTOMER.DISPUTE.CREATED opens one.
//
// PAYMENT.CAPTURE.REFUNDED also carries Event.Refund (the refund's id, status, amount
// and, as Reference, its invoice_id), so it can settle a Refund resource;
// RefundedTotal stays the capture's cumulative refunded amount.
func ParseEvent(raw []byte) (provider.Event, error) {
	var e WebhookEvent
	if err := json.Unmarshal(raw, &e); err != nil {
		return provider.Event{}, provider.MalformedEvent("paypal event is not a JSON event object", err)
	}
	if e.ID == "" || e.EventType == "" {
		return provider.Event{}, provider.MalformedEvent("paypal event lacks id or event_type", nil)
	}
	ev := provider.Event{ID: e.ID, Type: e.EventType, Raw: append([]byte(nil), raw...)}
	ev.OccurredAt = parseTime(e.CreateTime)
	ev.Status, ev.Supported = MapEventType(e.EventType)
	if !ev.Supported {
		return ev, nil
	}
	if len(e.Resource) == 0 || string(e.Resource) == "null" {
		return provider.Event{}, provider.MalformedEvent("paypal event "+e.ID+" has no resource", nil)
	}
	var err error
	// own is the resource's id, which PayPal documents on every resource
	// paywarden acts on (Payments v2 capture, refund and authorization id;
	// Orders v2 order id; Disputes v1 dispute_id), while its link to the order
	// may be missing (a refund or reversal PayPal made carries neither order
	// id nor custom_id; a dispute names only the capture).
	var own string
	switch ev.Status {
	case provider.StatusSucceeded, provider.StatusFailed, provider.StatusProcessing:
		var c Capture
		if err = json.Unmarshal(e.Resource, &c); err == nil {
			own = c.ID
			ev.MerchantReference = firstNonEmpty(c.InvoiceID, c.CustomID)
			ev.PaymentID = orderID(c.SupplementaryData, c.Links)
			ev.Currency = c.Amount.CurrencyCode
			ev.Amount, err = ParseAmount(c.Amount.Value, c.Amount.CurrencyCode)
			if c.StatusDetails != nil {
				ev.FailureCode = c.StatusDetails.Reason
			}
		}
	case provider.StatusRefund:
		var r Refund
		if err = json.Unmarshal(e.Resource, &r); err == nil {
			own = r.ID
			// custom_id first: paywarden's refunds carry the payment's merchant
			// reference there and the refund's own reference in invoice_id.
			ev.MerchantReference = firstNonEmpty(r.CustomID, r.InvoiceID)
			if r.SupplementaryData != nil {
				ev.PaymentID = r.SupplementaryData.RelatedIDs.OrderID
			}
			if e.EventType == "PAYMENT.CAPTURE.REFUNDED" {
				ref := NormalizeRefund(r, ev.PaymentID)
				ev.Refund = &ref
			}
			ev.Currency = r.Amount.CurrencyCode
			ev.Amount, err = ParseAmount(r.Amount.Value, r.Amount.CurrencyCode)
			if err == nil && r.SellerPayableBreakdown != nil && r.SellerPayableBreakdown.TotalRefundedAmount != nil {
				m := r.SellerPayableBreakdown.TotalRefundedAmount
				ev.RefundedTotal, err = ParseAmount(m.Value, m.CurrencyCode)
			} else if err == nil {
				// Without the cumulative total, this refund is the best lower bound.
				ev.RefundedTotal = ev.Amount
			}
		}
	case provider.StatusExpired:
		var r ApprovalReversal
		if err = json.Unmarshal(e.Resource, &r); err == nil {
			own = r.OrderID
			ev.PaymentID = r.OrderID
			ev.FailureCode = FailureApprovalReversed
			ev.FailureMessage = "PayPal reversed the payer's approval: the order was not captured in time, PayPal canceled it and refunded the payer"
			if len(r.PurchaseUnits) > 0 {
				pu := r.PurchaseUnits[0]
				ev.MerchantReference = firstNonEmpty(pu.InvoiceID, pu.CustomID)
				ev.Currency = pu.Amount.CurrencyCode
				if pu.Amount.Value != "" {
					ev.Amount, err = ParseAmount(pu.Amount.Value, pu.Amount.CurrencyCode)
				}
			}
		}
	case provider.StatusApproved:
		var o Order
		if err = json.Unmarshal(e.Resource, &o); err == nil {
			p := NormalizeOrder(o)
			own = o.ID
			ev.PaymentID, ev.MerchantReference, ev.Amount, ev.Currency = p.ID, p.MerchantReference, p.Amount, p.Currency
		}
	case provider.StatusAuthorized, provider.StatusCanceled:
		var au Authorization
		if err = json.Unmarshal(e.Resource, &au); err == nil {
			own = au.ID
			ev.MerchantReference = firstNonEmpty(au.InvoiceID, au.CustomID)
			ev.PaymentID = orderID(au.SupplementaryData, au.Links)
			ev.Currency = au.Amount.CurrencyCode
			ev.Amount, err = ParseAmount(au.Amount.Value, au.Amount.CurrencyCode)
			if ev.Status == provider.StatusCanceled && au.Status == "EXPIRED" {
				// PAYMENT.AUTHORIZATION.VOIDED also reports an authorization that
				// reached the end of its validity; one that says so is Expired.
				// One that reads VOIDED is told apart by the core, by its time.
				ev.Status, ev.FailureCode = provider.StatusExpired, provider.FailureAuthorizationExpired
			}
		}
	case provider.StatusDispute:
		var d Dispute
		if err = json.Unmarshal(e.Resource, &d); err == nil {
			own = d.DisputeID
			// A dispute names the capture, not the order, so only the merchant reference
			// can find the payment.
			for _, t := range d.DisputedTransactions {
				if ref := firstNonEmpty(t.InvoiceNumber, t.Custom); ref != "" {
					ev.MerchantReference = ref
					break
				}
			}
			ev.Currency = d.DisputeAmount.CurrencyCode
			ev.FailureCode = d.Reason
			ev.DisputeOutcome = DisputeResult(e.EventType, d)
			if d.DisputeAmount.Value != "" {
				ev.Amount, err = ParseAmount(d.DisputeAmount.Value, d.DisputeAmount.CurrencyCode)
			}
		}
	}
	if err != nil {
		return provider.Event{}, provider.MalformedEvent("paypal event "+e.ID+" resource", err)
	}
	if own == "" && !ev.NamesPayment() {
		// No id of its own and no order id or merchant reference: no PayPal
		// resource, and stored it would match nothing and wait Orphaned until
		// retention. One with its id but no link is documented and is kept.
		return provider.Event{}, provider.MalformedEvent("paypal event "+e.ID+" resource carries no id and names no order or merchant reference", nil)
	}
	return ev, nil
}

// orderID returns the order id of a capture or authorization: its supplementary
// data's order_id, else the one of its "up" link.
func orderID(sd *SupplementaryData, links []Link) string {
	if sd != nil && sd.RelatedIDs.OrderID != "" {
		return sd.RelatedIDs.OrderID
	}
	return orderIDFromLinks(links)
}

// orderIDFromLinks returns the order id of an "up" link to /v2/checkout/orders/{id}, as
// a capture carries; "" for any other link (a refund's "up" is its capture).
func orderIDFromLinks(links []Link) string {
	for _, l := range links {
		if l.Rel != "up" {
			continue
		}
		u, err := url.Parse(l.Href)
		if err != nil {
			continue
		}
		id, ok := strings.CutPrefix(u.Path, "/v2/checkout/orders/")
		if ok && id != "" && !strings.Contains(id, "/") {
			return id
		}
	}
	return ""
}
