package generic

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// Amount is a value in minor units with its currency.
type Amount struct {
	Value    int64  `json:"value"`
	Currency string `json:"currency"`
}

// CreateJobRequest is the body of POST /jobs.
type CreateJobRequest struct {
	CorrelationID string            `json:"correlationId"`
	Amount        Amount            `json:"amount"`
	Description   string            `json:"description,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// ReturnURL and CancelURL are where the payer is sent back from the provider's
	// page when the job needs the payer (Job.Action); ExpiresAt (RFC 3339) is when
	// that page should stop working.
	ReturnURL string `json:"returnUrl,omitempty"`
	CancelURL string `json:"cancelUrl,omitempty"`
	ExpiresAt string `json:"expiresAt,omitempty"`
}

// JobAction is where the payer must go for the job to go on, and until when.
type JobAction struct {
	URL       string `json:"url"`
	ExpiresAt string `json:"expiresAt,omitempty"` // RFC 3339
}

// CreateRefundRequest is the body of POST /jobs/{jobId}/refunds; without Amount what
// is left is refunded.
type CreateRefundRequest struct {
	Amount    *Amount `json:"amount,omitempty"`
	Reference string  `json:"reference,omitempty"`
	Reason    string  `json:"reason,omitempty"`
}

// JobRefund is a refund of a job (POST/GET /jobs/{jobId}/refunds[/{refundId}], and
// the refund member of job.refunded / job.refund_failed events).
type JobRefund struct {
	RefundID     string      `json:"refundId"`
	JobID        string      `json:"jobId"`
	Reference    string      `json:"reference,omitempty"`
	Reason       string      `json:"reason,omitempty"`
	RefundStatus string      `json:"refundStatus"` // processing | succeeded | failed | unknown
	Amount       Amount      `json:"amount"`
	Failure      *JobFailure `json:"failure,omitempty"`
	SubmittedAt  string      `json:"submittedAt,omitempty"`
	CompletedAt  string      `json:"completedAt,omitempty"`
}

// Normalize maps the refund to the provider-neutral form. A currency paywarden
// could not store (provider.Currency) is an error.
func (r JobRefund) Normalize() (provider.Refund, error) {
	cur, err := provider.Currency(r.Amount.Value, r.Amount.Currency)
	if err != nil {
		return provider.Refund{}, err
	}
	out := provider.Refund{
		ID: r.RefundID, PaymentID: r.JobID, Reference: r.Reference,
		Status: MapRefundStatus(r.RefundStatus), RawStatus: r.RefundStatus,
		Amount: r.Amount.Value, Currency: cur,
	}
	if r.Failure != nil {
		out.FailureCode, out.FailureMessage = r.Failure.Code, r.Failure.Message
	}
	return out, nil
}

// Job is the async job (GET /jobs/{jobId}, and the data of every event).
type Job struct {
	JobID           string      `json:"jobId"`
	CorrelationID   string      `json:"correlationId"`
	JobStatus       string      `json:"jobStatus"`
	ProcessingStage string      `json:"processingStage,omitempty"`
	Amount          Amount      `json:"amount"`
	AmountReceived  *Amount     `json:"amountReceived,omitempty"`
	AmountRefunded  *Amount     `json:"amountRefunded,omitempty"`
	Failure         *JobFailure `json:"failure,omitempty"`
	SubmittedAt     string      `json:"submittedAt,omitempty"`
	CompletedAt     string      `json:"completedAt,omitempty"`
	// Action is set while the job waits for the payer.
	Action *JobAction `json:"action,omitempty"`
	// Refund is the refund a job.refunded or job.refund_failed event is about.
	Refund *JobRefund `json:"refund,omitempty"`
}

// JobFailure explains a failed job.
type JobFailure struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// JobList is the answer of GET /jobs?correlationId=.
type JobList struct {
	Items []Job `json:"items"`
}

// EventEnvelope is one event: the webhook body and an element of GET /events. Its shape
// follows the Standard Webhooks payload recommendation plus an id.
type EventEnvelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"` // RFC 3339
	Data      json.RawMessage `json:"data"`
}

// EventList is the answer of GET /events.
type EventList struct {
	Events     []json.RawMessage `json:"events"`
	NextCursor string            `json:"nextCursor,omitempty"`
	HasMore    bool              `json:"hasMore"`
}

// Normalize maps the job to a provider.Payment; the amount is the received amount once
// the job succeeded so an amount mismatch shows. A currency paywarden could not
// store (provider.Currency) is an error.
func (j Job) Normalize() (provider.Payment, error) {
	st := MapJobStatus(j.JobStatus)
	amount := j.Amount
	if (st == provider.StatusSucceeded || st == provider.StatusRefund) && j.AmountReceived != nil {
		amount = *j.AmountReceived
	}
	cur, err := provider.Currency(amount.Value, amount.Currency)
	if err != nil {
		return provider.Payment{}, err
	}
	p := provider.Payment{
		ID: j.JobID, MerchantReference: j.CorrelationID, Status: st, RawStatus: j.JobStatus,
		Amount: amount.Value, Currency: cur,
	}
	if j.ProcessingStage != "" {
		p.RawStatus += "/" + j.ProcessingStage
	}
	if j.AmountRefunded != nil {
		p.RefundedTotal = j.AmountRefunded.Value
	}
	if j.Failure != nil {
		p.FailureCode, p.FailureMessage = j.Failure.Code, j.Failure.Message
	}
	if j.Action != nil && j.Action.URL != "" && (st == provider.StatusProcessing || st == provider.StatusUnknown) {
		at, err := rfc3339Time("action.expiresAt", j.Action.ExpiresAt)
		if err != nil {
			return provider.Payment{}, err
		}
		p.CustomerAction = &provider.CustomerAction{URL: j.Action.URL, ExpiresAt: at}
	}
	return p, nil
}

// rfc3339Time reads an RFC 3339 time of field in UTC, as paywarden stores it;
// zero when absent or not RFC 3339 (the API's times are informative). One
// whose offset carries it out of the years 0000-9999 in UTC
// ("9999-12-31T23:59:59-01:00") is an error: stored, the status write would
// be refused.
func rfc3339Time(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, nil
	}
	return provider.StorableTime(field, t)
}

// jobStatuses maps jobStatus. The spec's four values (processing, succeeded, failed,
// unknown) plus expired and the refund states, which paysim's outcomes need.
var jobStatuses = map[string]provider.Status{
	"processing":         provider.StatusProcessing,
	"succeeded":          provider.StatusSucceeded,
	"failed":             provider.StatusFailed,
	"unknown":            provider.StatusUnknown,
	"expired":            provider.StatusExpired,
	"partially_refunded": provider.StatusRefund,
	"refunded":           provider.StatusRefund,
}

// eventStatuses maps the event types paywarden acts on. job.unknown is absent: "the
// provider does not know" is no news, polling handles it.
var eventStatuses = map[string]provider.Status{
	"job.processing": provider.StatusProcessing,
	"job.succeeded":  provider.StatusSucceeded,
	"job.failed":     provider.StatusFailed,
	"job.expired":    provider.StatusExpired,
	"job.refunded":   provider.StatusRefund,
	// A failed refund settles the Refund it carries; the job's refunded total is
	// unchanged.
	"job.refund_failed": provider.StatusRefund,
	"job.disputed":      provider.StatusDispute,
}

// refundStatuses maps refundStatus; unknown, like jobStatus unknown, is not final.
var refundStatuses = map[string]provider.RefundStatus{
	"processing": provider.RefundProcessing,
	"succeeded":  provider.RefundSucceeded,
	"failed":     provider.RefundFailed,
	"unknown":    provider.RefundUnknown,
}

// RefundStatuses returns a copy of the refundStatus table.
func RefundStatuses() map[string]provider.RefundStatus { return maps.Clone(refundStatuses) }

// MapRefundStatus normalizes a refundStatus; unlisted strings are Unknown.
func MapRefundStatus(raw string) provider.RefundStatus {
	return provider.Lookup(refundStatuses, raw, provider.RefundUnknown)
}

// JobStatuses returns a copy of the jobStatus table.
func JobStatuses() map[string]provider.Status { return maps.Clone(jobStatuses) }

// EventStatuses returns a copy of the supported event type table.
func EventStatuses() map[string]provider.Status { return maps.Clone(eventStatuses) }

// MapJobStatus normalizes a jobStatus; unlisted strings are Unknown.
func MapJobStatus(raw string) provider.Status {
	return provider.Lookup(jobStatuses, raw, provider.StatusUnknown)
}

// MapEventType normalizes an event type; supported is false for types not acted on.
func MapEventType(typ string) (status provider.Status, supported bool) {
	s, ok := eventStatuses[typ]
	return s, ok
}
