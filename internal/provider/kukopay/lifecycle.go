package kukopay

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/provider"
)

// KukoPay's error codes for calls on a payment in the wrong state (HTTP 400). The
// "already" codes describe a state the caller wanted anyway, so the adapter answers
// with the payment's state instead of an error.
const (
	ErrorCodeAlreadyCaptured = "payment_already_captured"
	ErrorCodeNotCapturable   = "payment_not_capturable"
	ErrorCodeAlreadyCanceled = "payment_already_canceled"
	ErrorCodeNotCancelable   = "payment_not_cancelable"
	ErrorCodeNotRefundable   = "payment_not_refundable"
	ErrorCodeAmountTooLarge  = "amount_too_large"
	ErrorCodeResourceMissing = "resource_missing"
)

func (a *Adapter) refuse(op, detail string) error {
	return &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Detail: detail}
}

func (a *Adapter) actionHeader(key string) http.Header {
	h := a.header()
	if key != "" {
		h.Set(HeaderIdempotencyKey, key)
	}
	return h
}

// code is KukoPay's error code of err ("" when err is not a provider answer).
func code(err error) string {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// checkActionAmount refuses, before any request, an amount KukoPay cannot take.
func (a *Adapter) checkActionAmount(op string, amount int64, cur string) error {
	if amount < 0 {
		return a.refuse(op, "negative amount")
	}
	if amount > 0 && cur != "" && !currency.Known(cur) {
		return provider.AmountNotRepresentable(a.c.Name(), op, "currency "+cur+" is not an ISO 4217 currency with a minor unit")
	}
	return nil
}

// Authorize is unsupported: a KukoPay payment is authorized by the payer (or the
// stored payment method) without a merchant call (Capabilities.Lifecycle.AuthorizeStep
// is false).
func (a *Adapter) Authorize(context.Context, provider.ActionRequest) (provider.Payment, error) {
	return provider.Payment{}, provider.Unsupported(a.c.Name(), "authorize")
}

// Capture implements provider.Provider: POST /v1/payments/{id}/capture
// {amount_to_capture} with Idempotency-Key = req.IdempotencyKey; req.Amount 0 captures
// amount_capturable, less captures part and releases the rest. A payment that was
// already captured (payment_already_captured) is not an error: its state is returned
// as Get reads it. A payment that is not requires_capture (payment_not_capturable)
// and an amount above amount_capturable (amount_too_large) are refused:
// ErrNonRetryable.
func (a *Adapter) Capture(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	const op = "capture"
	if req.PaymentID == "" {
		return provider.Payment{}, a.refuse(op, "empty payment id")
	}
	if err := a.checkActionAmount(op, req.Amount, req.Currency); err != nil {
		return provider.Payment{}, err
	}
	out, err := a.act(ctx, op, req, CaptureRequest{AmountToCapture: req.Amount})
	if code(err) == ErrorCodeAlreadyCaptured {
		return a.Get(ctx, req.PaymentID)
	}
	if err != nil {
		return provider.Payment{}, err
	}
	return a.written(op, out)
}

// Cancel implements provider.Provider: POST /v1/payments/{id}/cancel
// {cancellation_reason: req.Reason} with Idempotency-Key = req.IdempotencyKey. A
// pending, requires_action or requires_capture payment becomes canceled. A payment
// already canceled is not an error; neither is one that ended without money moving
// (failed, expired): their state is returned as Get reads it. A payment that took
// money (succeeded, refunded, processing) is refused with ErrNonRetryable: refund
// instead.
func (a *Adapter) Cancel(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	const op = "cancel"
	if req.PaymentID == "" {
		return provider.Payment{}, a.refuse(op, "empty payment id")
	}
	out, err := a.act(ctx, op, req, CancelRequest{CancellationReason: req.Reason})
	switch code(err) {
	case ErrorCodeAlreadyCanceled:
		return a.Get(ctx, req.PaymentID)
	case ErrorCodeNotCancelable:
		p, gerr := a.Get(ctx, req.PaymentID)
		if gerr != nil {
			return provider.Payment{}, gerr
		}
		switch p.Status {
		case provider.StatusCanceled, provider.StatusFailed, provider.StatusExpired:
			return p, nil
		}
		var pe *provider.Error
		if errors.As(err, &pe) {
			c := *pe
			c.Detail += ": the payment took money (" + p.RawStatus + "), refund instead"
			return provider.Payment{}, &c
		}
		return provider.Payment{}, err
	}
	if err != nil {
		return provider.Payment{}, err
	}
	return a.written(op, out)
}

// act makes the call op (capture, cancel) on payment req.PaymentID: POST
// /v1/payments/{id}/{op} with body and Idempotency-Key = req.IdempotencyKey. The
// answer is the payment; a 422 idempotency_error is a key conflict (keyConflict).
func (a *Adapter) act(ctx context.Context, op string, req provider.ActionRequest, body any) (PaymentObject, error) {
	var out PaymentObject
	err := a.c.Do(ctx, provider.Request{
		Op: op, Method: http.MethodPost, Path: "/v1/payments/" + url.PathEscape(req.PaymentID) + "/" + op,
		Header: a.actionHeader(req.IdempotencyKey), JSON: body,
		NotFound: true, ConflictRetryable: true,
	}, &out)
	return out, keyConflict(err)
}

// CreateRefund implements provider.Provider: POST /v1/refunds {payment, amount,
// reason, metadata.reference} with Idempotency-Key = req.IdempotencyKey. Amount 0
// refunds what is left. KukoPay refuses a refund of a payment that took no money
// (payment_not_refundable) or above what is left (amount_too_large): ErrNonRetryable.
func (a *Adapter) CreateRefund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	const op = "create refund"
	if req.PaymentID == "" {
		return provider.Refund{}, a.refuse(op, "empty payment id")
	}
	if err := a.checkActionAmount(op, req.Amount, req.Currency); err != nil {
		return provider.Refund{}, err
	}
	body := CreateRefundRequest{Payment: req.PaymentID, Amount: req.Amount, Reason: req.Reason}
	if req.Reference != "" {
		body.Metadata = map[string]string{MetadataReference: req.Reference}
	}
	var out RefundObject
	err := a.c.Do(ctx, provider.Request{
		Op: op, Method: http.MethodPost, Path: "/v1/refunds", Header: a.actionHeader(req.IdempotencyKey),
		JSON: body, ConflictRetryable: true,
	}, &out)
	if err != nil {
		return provider.Refund{}, keyConflict(err)
	}
	if out.ID == "" {
		return provider.Refund{}, provider.NoID(a.c.Name(), op, "refund")
	}
	return a.refund(op, out)
}

// GetRefund implements provider.Provider: GET /v1/refunds/{id}. A refund of another
// payment than paymentID is ErrNotFound.
func (a *Adapter) GetRefund(ctx context.Context, paymentID, refundID string) (provider.Refund, error) {
	const op = "get refund"
	if refundID == "" {
		return provider.Refund{}, a.refuse(op, "empty refund id")
	}
	var out RefundObject
	err := a.c.Do(ctx, provider.Request{
		Op: op, Method: http.MethodGet, Path: "/v1/refunds/" + url.PathEscape(refundID), Header: a.header(), NotFound: true,
	}, &out)
	if err != nil {
		return provider.Refund{}, err
	}
	if paymentID != "" && out.Payment != paymentID {
		return provider.Refund{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNotFound, Detail: "refund " + refundID + " belongs to payment " + out.Payment + ", not " + paymentID}
	}
	return a.refund(op, out)
}

// FindRefund implements provider.Provider: GET /v1/refunds?payment=&reference=, the
// refund whose metadata.reference is reference; ErrNotFound when none.
func (a *Adapter) FindRefund(ctx context.Context, paymentID, reference string) (provider.Refund, error) {
	const op = "find refund"
	var out List[RefundObject]
	err := a.c.Do(ctx, provider.Request{
		Op: op, Method: http.MethodGet, Path: "/v1/refunds", Header: a.header(),
		Query: url.Values{"payment": {paymentID}, "reference": {reference}},
	}, &out)
	if err != nil {
		return provider.Refund{}, err
	}
	for _, r := range out.Data {
		// Filter again, as FindByMerchantReference does: an ignored query parameter
		// must not hand us another refund.
		if r.Payment == paymentID && r.Metadata[MetadataReference] == reference {
			return a.refund(op, r)
		}
	}
	return provider.Refund{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNotFound, Detail: "no refund of payment " + paymentID + " with reference " + reference}
}
