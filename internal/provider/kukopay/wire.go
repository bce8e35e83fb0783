package kukopay

import (
	"encoding/json"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// CreatePaymentRequest is the body of POST /v1/payments.
type CreatePaymentRequest struct {
	OutTradeNo  string            `json:"out_trade_no"`
	Amount      int64             `json:"amount"`
	Currency    string            `json:"currency"`
	Description string            `json:"description,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

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
}

// RefundObject is the data.object of refund.* events.
type RefundObject struct {
	ID             string `json:"id"`
	Object         string `json:"object"` // "refund"
	Payment        string `json:"payment"`
	OutTradeNo     string `json:"out_trade_no"`
	Amount         int64  `json:"amount"` // this refund
	Currency       string `json:"currency"`
	Status         string `json:"status"` // succeeded | failed
	FailureCode    string `json:"failure_code,omitempty"`
	FailureMessage string `json:"failure_message,omitempty"`
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
// received once the payment succeeded, so an amount mismatch is visible upstream.
func (p PaymentObject) Normalize() provider.Payment {
	st := MapPaymentStatus(p.Status)
	amount := p.Amount
	if (st == provider.StatusSucceeded || st == provider.StatusRefund) && p.AmountReceived != 0 {
		amount = p.AmountReceived
	}
	return provider.Payment{
		ID: p.ID, MerchantReference: p.OutTradeNo, Status: st, RawStatus: p.Status,
		Amount: amount, Currency: p.Currency, RefundedTotal: p.AmountRefunded,
		FailureCode: p.FailureCode, FailureMessage: p.FailureMessage,
	}
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
	ev := provider.Event{
		ID: e.ID, Type: e.Type, OccurredAt: time.Unix(e.Created, 0).UTC(),
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
	var err error
	switch kind {
	case "payment":
		var p PaymentObject
		if err = json.Unmarshal(e.Data.Object, &p); err == nil {
			n := p.Normalize()
			ev.PaymentID, ev.MerchantReference = p.ID, p.OutTradeNo
			ev.Amount, ev.Currency, ev.RefundedTotal = n.Amount, p.Currency, p.AmountRefunded
			ev.FailureCode, ev.FailureMessage = p.FailureCode, p.FailureMessage
		}
	case "refund":
		var r RefundObject
		if err = json.Unmarshal(e.Data.Object, &r); err == nil {
			ev.PaymentID, ev.MerchantReference = r.Payment, r.OutTradeNo
			ev.Amount, ev.Currency, ev.RefundedTotal = r.Amount, r.Currency, r.PaymentAmountRefunded
			ev.FailureCode, ev.FailureMessage = r.FailureCode, r.FailureMessage
		}
	case "dispute":
		var d DisputeObject
		if err = json.Unmarshal(e.Data.Object, &d); err == nil {
			ev.PaymentID, ev.MerchantReference = d.Payment, d.OutTradeNo
			ev.Amount, ev.Currency = d.Amount, d.Currency
			ev.FailureCode = d.Reason
		}
	}
	if err != nil && supported {
		return provider.Event{}, provider.MalformedEvent("kukopay event "+e.ID+" data.object", err)
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
