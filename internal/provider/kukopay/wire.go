package kukopay

import (
	"encoding/json"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// Capture methods (CreatePaymentRequest.CaptureMethod, PaymentObject.CaptureMethod).
const (
	CaptureAutomatic = "automatic" // the money is taken as soon as the payment is authorized
	CaptureManual    = "manual"    // requires_capture until POST /v1/payments/{id}/capture
)

// CancellationAuthorizationExpired is the cancellation_reason of a payment whose
// authorization expired uncaptured (status "expired").
const CancellationAuthorizationExpired = "authorization_expired"

// CreatePaymentRequest is the body of POST /v1/payments.
type CreatePaymentRequest struct {
	OutTradeNo  string            `json:"out_trade_no"`
	Amount      int64             `json:"amount"`
	Currency    string            `json:"currency"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// CaptureMethod is CaptureAutomatic or CaptureManual.
	CaptureMethod string `json:"capture_method,omitempty"`
	// ReturnURL and CancelURL make the payment a hosted checkout: it starts in
	// requires_action with next_action.redirect_url, and the payer comes back to
	// one of them.
	ReturnURL string `json:"return_url,omitempty"`
	CancelURL string `json:"cancel_url,omitempty"`
	// ExpiresAt (unix seconds) is when the hosted checkout stops working; KukoPay
	// takes 30 minutes to 24 hours from now and defaults to 24 hours.
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// Customer and PaymentMethod are KukoPay tokens of a stored payment method, for a
	// server-side charge without the payer.
	Customer      string `json:"customer,omitempty"`
	PaymentMethod string `json:"payment_method,omitempty"`
}

// Hosted checkout bounds for CreatePaymentRequest.ExpiresAt.
const (
	MinCheckoutLifetime = 30 * time.Minute
	MaxCheckoutLifetime = 24 * time.Hour
)

// NextAction is what the payer must do for a payment in requires_action.
type NextAction struct {
	Type        string `json:"type"` // "redirect_to_url"
	RedirectURL string `json:"redirect_url"`
	ExpiresAt   int64  `json:"expires_at,omitempty"` // unix seconds
}

// CaptureRequest is the body of POST /v1/payments/{id}/capture; AmountToCapture 0
// (omitted) captures amount_capturable.
type CaptureRequest struct {
	AmountToCapture int64 `json:"amount_to_capture,omitempty"`
}

// CancelRequest is the body of POST /v1/payments/{id}/cancel.
type CancelRequest struct {
	CancellationReason string `json:"cancellation_reason,omitempty"`
}

// CreateRefundRequest is the body of POST /v1/refunds. Amount 0 (omitted) refunds what
// is left; Metadata["reference"] is the merchant's reference of the refund, searchable
// with GET /v1/refunds?reference=.
type CreateRefundRequest struct {
	Payment  string            `json:"payment"`
	Amount   int64             `json:"amount,omitempty"`
	Reason   string            `json:"reason,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// MetadataReference is the refund metadata key holding the merchant's reference.
const MetadataReference = "reference"

// PaymentObject is a KukoPay payment, as returned by the API and embedded in
// payment.* events.
type PaymentObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"` // "payment"
	OutTradeNo     string            `json:"out_trade_no"`
	Amount         int64             `json:"amount"`
	AmountReceived int64             `json:"amount_received"`
	AmountRefunded int64             `json:"amount_refunded"`
	Currency       string            `json:"currency"`
	Status         string            `json:"status"`
	FailureCode    string            `json:"failure_code,omitempty"`
	FailureMessage string            `json:"failure_message,omitempty"`
	Description    string            `json:"description,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	Created        int64             `json:"created"` // unix seconds

	CaptureMethod string `json:"capture_method,omitempty"`
	// AmountCapturable is what a capture can take while the payment is
	// requires_capture; CaptureBefore (unix seconds) is when that authorization
	// expires.
	AmountCapturable int64       `json:"amount_capturable,omitempty"`
	CaptureBefore    int64       `json:"capture_before,omitempty"`
	NextAction       *NextAction `json:"next_action,omitempty"`
	// CancellationReason says why a payment is canceled, or "authorization_expired"
	// for an expired authorization.
	CancellationReason string `json:"cancellation_reason,omitempty"`
	Customer           string `json:"customer,omitempty"`
	PaymentMethod      string `json:"payment_method,omitempty"`
}

// RefundObject is a refund (POST/GET /v1/refunds) and the data.object of refund.*
// events.
type RefundObject struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"` // "refund"
	Payment        string            `json:"payment"`
	OutTradeNo     string            `json:"out_trade_no"`
	Amount         int64             `json:"amount"` // this refund
	Currency       string            `json:"currency"`
	Status         string            `json:"status"` // pending | succeeded | failed | canceled
	Reason         string            `json:"reason,omitempty"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	FailureCode    string            `json:"failure_code,omitempty"`
	FailureMessage string            `json:"failure_message,omitempty"`
	// PaymentAmountRefunded is the payment's cumulative refunded amount after this
	// refund, so a receiver never has to add refunds up itself (and double-count a
	// redelivered one).
	PaymentAmountRefunded int64 `json:"payment_amount_refunded"`
	Created               int64 `json:"created"`
}

// DisputeObject is the data.object of dispute.* events.
type DisputeObject struct {
	ID         string `json:"id"`
	Object     string `json:"object"` // "dispute"
	Payment    string `json:"payment"`
	OutTradeNo string `json:"out_trade_no"`
	Amount     int64  `json:"amount"`
	Currency   string `json:"currency"`
	Reason     string `json:"reason,omitempty"`
	Status     string `json:"status"`
	Created    int64  `json:"created"`
}

// EventObject is one KukoPay event: the webhook body and an element of GET /v1/events.
type EventObject struct {
	ID      string    `json:"id"`
	Object  string    `json:"object"` // "event"
	Type    string    `json:"type"`
	Created int64     `json:"created"` // unix seconds
	Data    EventData `json:"data"`
}

// EventData wraps the object the event is about.
type EventData struct {
	Object json.RawMessage `json:"object"`
}

// List is KukoPay's list envelope (payments search and events).
type List[T any] struct {
	Object  string `json:"object"` // "list"
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

// ErrorBody is KukoPay's error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Normalize maps the payment to the provider-neutral form. The amount is what was
// received once the payment succeeded, so an amount mismatch is visible upstream, and
// what can be captured while it is authorized. A payment in requires_action carries
// next_action as CustomerAction; an authorization that expired uncaptured has the
// FailureCode provider.FailureAuthorizationExpired. A currency or time paywarden
// could not store (provider.Currency, unixTime) is an error: the payment cannot be read.
func (p PaymentObject) Normalize() (provider.Payment, error) {
	cur, err := provider.Currency(p.Amount, p.Currency)
	if err != nil {
		return provider.Payment{}, err
	}
	st := MapPaymentStatus(p.Status)
	amount := p.Amount
	if (st == provider.StatusSucceeded || st == provider.StatusRefund) && p.AmountReceived != 0 {
		amount = p.AmountReceived
	}
	out := provider.Payment{
		ID: p.ID, MerchantReference: p.OutTradeNo, Status: st, RawStatus: p.Status,
		Amount: amount, Currency: cur, RefundedTotal: p.AmountRefunded,
		FailureCode: p.FailureCode, FailureMessage: p.FailureMessage,
	}
	switch st {
	case provider.StatusAuthorized:
		if p.AmountCapturable > 0 {
			out.Amount = p.AmountCapturable
		}
		if out.AuthorizationExpiresAt, err = unixTime("capture_before", p.CaptureBefore); err != nil {
			return provider.Payment{}, err
		}
	case provider.StatusPending:
		if p.NextAction != nil && p.NextAction.RedirectURL != "" {
			at, err := unixTime("next_action.expires_at", p.NextAction.ExpiresAt)
			if err != nil {
				return provider.Payment{}, err
			}
			out.CustomerAction = &provider.CustomerAction{URL: p.NextAction.RedirectURL, ExpiresAt: at}
		}
	case provider.StatusExpired:
		if p.CancellationReason == CancellationAuthorizationExpired {
			out.FailureCode, out.FailureMessage = provider.FailureAuthorizationExpired, "the authorization expired before it was captured"
		}
	}
	return out, nil
}

// Normalize maps the refund to the provider-neutral form; Reference is
// metadata.reference. A currency paywarden could not store is an error.
func (r RefundObject) Normalize() (provider.Refund, error) {
	cur, err := provider.Currency(r.Amount, r.Currency)
	if err != nil {
		return provider.Refund{}, err
	}
	return provider.Refund{
		ID: r.ID, PaymentID: r.Payment, Reference: r.Metadata[MetadataReference],
		Status: MapRefundStatus(r.Status), RawStatus: r.Status, Amount: r.Amount, Currency: cur,
		FailureCode: r.FailureCode, FailureMessage: r.FailureMessage,
	}, nil
}

// unixTime is the UTC time of unix seconds field; zero for 0 (or less: not
// set). Past the year 9999 it is an error (provider.UnixTime).
func unixTime(field string, sec int64) (time.Time, error) {
	if sec <= 0 {
		return time.Time{}, nil
	}
	return provider.UnixTime(field, sec)
}

// ParseEvent decodes one KukoPay event. Unknown event types parse (Supported=false) as
// long as the envelope is sound, so the receiver can acknowledge them.
func ParseEvent(raw []byte) (provider.Event, error) {
	var e EventObject
	if err := json.Unmarshal(raw, &e); err != nil {
		return provider.Event{}, provider.MalformedEvent("kukopay event is not a JSON event object", err)
	}
	if e.ID == "" || e.Type == "" {
		return provider.Event{}, provider.MalformedEvent("kukopay event lacks id or type", nil)
	}
	created, err := provider.UnixTime("created", e.Created)
	if err != nil {
		// Stored as status.lastEvent.time, it would be refused by the API
		// server: acknowledged, the event could never be applied.
		return provider.Event{}, provider.MalformedEvent("kukopay event "+e.ID, err)
	}
	ev := provider.Event{
		ID: e.ID, Type: e.Type, OccurredAt: created,
		Raw: append([]byte(nil), raw...),
	}
	st, supported := MapEventType(e.Type)
	ev.Status, ev.Supported = st, supported
	kind := objectKind(e.Type)
	if len(e.Data.Object) == 0 || string(e.Data.Object) == "null" {
		if supported {
			return provider.Event{}, provider.MalformedEvent("kukopay event "+e.ID+" has no data.object", nil)
		}
		return ev, nil
	}
	switch kind {
	case "payment":
		var p PaymentObject
		var n provider.Payment
		if err = json.Unmarshal(e.Data.Object, &p); err == nil {
			n, err = p.Normalize()
		}
		if err == nil {
			ev.PaymentID, ev.MerchantReference = p.ID, p.OutTradeNo
			ev.Amount, ev.Currency, ev.RefundedTotal = n.Amount, n.Currency, p.AmountRefunded
			ev.FailureCode, ev.FailureMessage = n.FailureCode, n.FailureMessage
		}
	case "refund":
		var r RefundObject
		var ref provider.Refund
		if err = json.Unmarshal(e.Data.Object, &r); err == nil {
			ref, err = r.Normalize()
		}
		if err == nil {
			ev.PaymentID, ev.MerchantReference = r.Payment, r.OutTradeNo
			ev.Amount, ev.Currency, ev.RefundedTotal = r.Amount, ref.Currency, r.PaymentAmountRefunded
			ev.FailureCode, ev.FailureMessage = r.FailureCode, r.FailureMessage
			if r.ID != "" {
				ev.Refund = &ref
			}
		}
	case "dispute":
		var d DisputeObject
		var cur string
		if err = json.Unmarshal(e.Data.Object, &d); err == nil {
			cur, err = provider.Currency(d.Amount, d.Currency)
		}
		if err == nil {
			ev.PaymentID, ev.MerchantReference = d.Payment, d.OutTradeNo
			ev.Amount, ev.Currency = d.Amount, cur
			ev.FailureCode = d.Reason
		}
	}
	if err != nil && supported {
		return provider.Event{}, provider.MalformedEvent("kukopay event "+e.ID+" data.object", err)
	}
	if supported && !ev.NamesPayment() {
		// Every object KukoPay documents names its payment: a payment its id, a
		// refund or dispute its payment, all three out_trade_no
		// (docs/providers.md, kukopay). One that names neither ({} included)
		// is no such object, and stored it would wait Orphaned until retention.
		return provider.Event{}, provider.MalformedEvent("kukopay event "+e.ID+" data.object names no payment (no payment id, no out_trade_no)", nil)
	}
	return ev, nil
}

// objectKind is the part of the event type before the first dot.
func objectKind(typ string) string {
	for i := 0; i < len(typ); i++ {
		if typ[i] == '.' {
			return typ[:i]
		}
	}
	return typ
}
