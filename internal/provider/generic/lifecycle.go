package generic

import (
	"context"
	"net/http"
	"net/url"

	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/provider"
)

// Authorize is unsupported: a job is charged as submitted.
func (a *Adapter) Authorize(context.Context, provider.ActionRequest) (provider.Payment, error) {
	return provider.Payment{}, provider.Unsupported(a.c.Name(), "authorize")
}

// Capture is unsupported: a job is charged as submitted.
func (a *Adapter) Capture(context.Context, provider.ActionRequest) (provider.Payment, error) {
	return provider.Payment{}, provider.Unsupported(a.c.Name(), "capture")
}

// Cancel is unsupported: the API has no way to stop a submitted job.
func (a *Adapter) Cancel(context.Context, provider.ActionRequest) (provider.Payment, error) {
	return provider.Payment{}, provider.Unsupported(a.c.Name(), "cancel")
}

func refundsPath(jobID string) string { return "/jobs/" + url.PathEscape(jobID) + "/refunds" }

// CreateRefund implements provider.Provider: POST /jobs/{jobId}/refunds {amount,
// reference, reason} with Idempotency-Key = req.IdempotencyKey; amount 0 (omitted)
// refunds what is left. The answer (202) is the refund, usually still processing; its
// outcome comes as job.refunded / job.refund_failed or from GetRefund. A 404 names the
// job: ErrNotFound.
func (a *Adapter) CreateRefund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	const op = "create refund"
	if req.PaymentID == "" {
		return provider.Refund{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Detail: "empty job id"}
	}
	if req.Amount < 0 {
		return provider.Refund{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Detail: "negative refund amount"}
	}
	body := CreateRefundRequest{Reference: req.Reference, Reason: req.Reason}
	if req.Amount > 0 {
		if !currency.Known(req.Currency) {
			return provider.Refund{}, provider.AmountNotRepresentable(a.c.Name(), op, "currency "+req.Currency+" is not an ISO 4217 currency with a minor unit")
		}
		body.Amount = &Amount{Value: req.Amount, Currency: req.Currency}
	}
	h := a.header()
	if req.IdempotencyKey != "" {
		h.Set(HeaderIdempotencyKey, req.IdempotencyKey)
	}
	var out JobRefund
	err := a.c.Do(ctx, provider.Request{
		Op: op, Method: http.MethodPost, Path: refundsPath(req.PaymentID), Header: h, JSON: body,
		NotFound: true, ConflictRetryable: true,
	}, &out)
	if err != nil {
		return provider.Refund{}, err
	}
	if out.RefundID == "" {
		return provider.Refund{}, provider.NoID(a.c.Name(), op, "refund")
	}
	return a.refund(op, req.PaymentID, out)
}

// GetRefund implements provider.Provider: GET /jobs/{jobId}/refunds/{refundId}.
func (a *Adapter) GetRefund(ctx context.Context, paymentID, refundID string) (provider.Refund, error) {
	const op = "get refund"
	if paymentID == "" || refundID == "" {
		return provider.Refund{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Detail: "empty job or refund id"}
	}
	var out JobRefund
	err := a.c.Do(ctx, provider.Request{
		Op: op, Method: http.MethodGet, Path: refundsPath(paymentID) + "/" + url.PathEscape(refundID), Header: a.header(), NotFound: true,
	}, &out)
	if err != nil {
		return provider.Refund{}, err
	}
	return a.refund(op, paymentID, out)
}

// FindRefund is unsupported: the API cannot search refunds by reference.
func (a *Adapter) FindRefund(context.Context, string, string) (provider.Refund, error) {
	return provider.Refund{}, provider.Unsupported(a.c.Name(), "find refund")
}
