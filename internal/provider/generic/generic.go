// Package generic is the adapter for a generic asynchronous-job payment API (seed 003):
// POST /jobs answers a jobId at once and the outcome arrives later, by webhook or by
// polling GET /jobs/{jobId}. Errors are RFC 9457 problem details whose retryable and
// retryAfter members decide the error class; webhooks are signed per the Standard
// Webhooks specification.
//
// jobStatus "unknown" is not final: the provider lost track for now, so paywarden keeps
// querying and only gives up into its own Unknown phase when the schedule runs out.
package generic

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// Header names of the API.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderWebhookID      = "webhook-id"
	HeaderWebhookTS      = "webhook-timestamp"
	HeaderWebhookSig     = "webhook-signature"
)

// CredentialToken is the credentials Secret key holding the bearer token.
const CredentialToken = "token"

const eventsPageSize = 100

// Adapter implements provider.Provider for the generic async-job API.
type Adapter struct {
	c     *provider.Client
	token string
}

var _ provider.Provider = (*Adapter)(nil)

// Type is the PaymentProvider type of this adapter.
const Type = "generic"

// Capabilities describes the generic async-job API: a bearer token, an events API,
// search by correlationId, Standard Webhooks signed with whsec_ (or bare base64, or
// raw) secrets.
func Capabilities() provider.Capabilities {
	return provider.Capabilities{
		Type:              Type,
		CredentialKeys:    []string{CredentialToken},
		EventsAPI:         true,
		LookupByReference: true,
		Verification:      provider.Verification{SigningSecret: true, CheckSecret: CheckSecret},
		// The payer may be sent to the provider's page (Job.Action); refunds are jobs
		// of their own. There is no capture, cancel or refund search.
		Lifecycle: provider.Lifecycle{Checkout: true, Refunds: true},
	}
}

// CheckSecret validates the format of one non-blank signing-secret value (a blank one is
// refused before, by provider.Verification.CheckSigningSecret, for every adapter) as
// Verify reads it (VerificationKeys): a whsec_ secret must decode to a non-empty key;
// an ed25519 key (whpk_, whsk_) is refused; any other value is accepted, as raw bytes
// and, when it is base64, as the key it encodes (the official libraries' reading of a
// bare base64 secret). (Verify skips a secret it cannot read, so without this check a
// typo in the Secret would only show as every webhook being rejected.)
func CheckSecret(s []byte) error {
	_, err := VerificationKeys(s)
	return err
}

// New builds the adapter; cfg.Credentials must hold "token".
func New(cfg provider.Config) (*Adapter, error) {
	if err := Capabilities().CheckCredentials(cfg.Name, cfg.Credentials); err != nil {
		return nil, err
	}
	c, err := provider.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Adapter{c: c, token: string(cfg.Credentials[CredentialToken])}, nil
}

// Capabilities implements provider.Provider.
func (a *Adapter) Capabilities() provider.Capabilities { return Capabilities() }

func (a *Adapter) header() http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+a.token)
	return h
}

// Create implements provider.Provider: POST /jobs with Idempotency-Key; the merchant
// reference travels as correlationId so both sides' logs line up. req.Checkout is sent
// as returnUrl/cancelUrl and req.ExpiresAt as expiresAt; capture method and stored
// methods do not exist in this API (a job is charged as submitted).
func (a *Adapter) Create(ctx context.Context, req provider.CreateRequest) (provider.Payment, error) {
	if err := provider.CheckISOAmount(a.c.Name(), req); err != nil {
		return provider.Payment{}, err
	}
	h := a.header()
	if req.IdempotencyKey != "" {
		h.Set(HeaderIdempotencyKey, req.IdempotencyKey)
	}
	body := CreateJobRequest{
		CorrelationID: req.MerchantReference, Amount: Amount{Value: req.Amount, Currency: req.Currency},
		Description: req.Description, Metadata: req.Metadata,
	}
	if req.Checkout != nil {
		body.ReturnURL, body.CancelURL = req.Checkout.ReturnURL, req.Checkout.CancelURL
	}
	if !req.ExpiresAt.IsZero() {
		body.ExpiresAt = req.ExpiresAt.UTC().Format(time.RFC3339)
	}
	var out Job
	err := a.c.Do(ctx, provider.Request{
		Op: "create", Method: http.MethodPost, Path: "/jobs", Header: h, ConflictRetryable: true,
		JSON: body,
	}, &out)
	if j, ok := namedJob(err); ok {
		return a.payment("create", j)
	}
	if err != nil {
		return provider.Payment{}, err
	}
	if out.JobID == "" {
		return provider.Payment{}, provider.NoID(a.c.Name(), "create", "job")
	}
	return a.payment("create", out)
}

// payment reads a job the API answered with: one carrying a currency paywarden
// cannot store (Job.Normalize) is an answer that cannot be read
// (provider.UnreadableAnswer), never a payment taken as it is.
func (a *Adapter) payment(op string, j Job) (provider.Payment, error) {
	p, err := j.Normalize()
	if err != nil {
		return provider.Payment{}, provider.UnreadableAnswer(a.c.Name(), op, 0, fmt.Errorf("job %s: %w", j.JobID, err))
	}
	return p, nil
}

// refund reads a refund the API answered with, as payment reads a job; a
// refund that does not name its job is jobID's.
func (a *Adapter) refund(op, jobID string, jr JobRefund) (provider.Refund, error) {
	r, err := jr.Normalize()
	if err != nil {
		return provider.Refund{}, provider.UnreadableAnswer(a.c.Name(), op, 0, fmt.Errorf("refund %s: %w", jr.RefundID, err))
	}
	if r.PaymentID == "" {
		r.PaymentID = jobID
	}
	return r, nil
}

// namedJob reads a create's refusal (a problem with retryable:false, or a
// 4xx) that names a job (jobId) the refusal does not say ended without the
// money (jobStatus processing, unknown, none, succeeded or refunded: not
// failed or expired): the job exists and took, or may still take, the
// money (retryable:false means "do not send this again", not "no job"). It
// is the create's answer: the payment follows the job by its id ("unknown"
// is not final: keep querying, then Unknown), never a refusal that fails
// the payment and releases its merchant reference while the job holds the
// money. That holds whatever the status code: a 5xx or a 409 that says
// retryable:false stays retryable or a key conflict for the client (a
// write's outcome is not refused by it), but its named job is followed. A
// retryable answer (409 with the key in progress, not saying
// retryable:false) stays one: the create is sent again with its key.
func namedJob(err error) (Job, bool) {
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Problem == nil || pe.Problem.JobID == "" || pe.Class == provider.ErrProviderConfig {
		return Job{}, false
	}
	pr := pe.Problem
	if pe.Class != provider.ErrNonRetryable && (pr.Retryable == nil || *pr.Retryable) {
		return Job{}, false
	}
	if st := MapJobStatus(pr.JobStatus); st == provider.StatusFailed || st == provider.StatusExpired {
		return Job{}, false
	}
	return Job{JobID: pr.JobID, CorrelationID: pr.CorrelationID, JobStatus: cmp.Or(pr.JobStatus, "unknown"), ProcessingStage: pr.ProcessingStage}, true
}

// Get implements provider.Provider: GET /jobs/{jobId}.
func (a *Adapter) Get(ctx context.Context, id string) (provider.Payment, error) {
	if id == "" {
		return provider.Payment{}, &provider.Error{Provider: a.c.Name(), Op: "get", Class: provider.ErrNonRetryable, Detail: "empty job id"}
	}
	var out Job
	err := a.c.Do(ctx, provider.Request{Op: "get", Method: http.MethodGet, Path: "/jobs/" + url.PathEscape(id), Header: a.header(), NotFound: true}, &out)
	if err != nil {
		return provider.Payment{}, err
	}
	return a.payment("get", out)
}

// FindByMerchantReference implements provider.Provider: GET /jobs?correlationId=.
func (a *Adapter) FindByMerchantReference(ctx context.Context, ref string) (provider.Payment, error) {
	var out JobList
	err := a.c.Do(ctx, provider.Request{Op: "find", Method: http.MethodGet, Path: "/jobs", Query: url.Values{"correlationId": {ref}}, Header: a.header()}, &out)
	if err != nil {
		return provider.Payment{}, err
	}
	var found []provider.Payment
	for _, j := range out.Items {
		if j.CorrelationID == ref {
			p, err := a.payment("find", j)
			if err != nil {
				return provider.Payment{}, err
			}
			found = append(found, p)
		}
	}
	return provider.OneMatch(a.c.Name(), "job", ref, found)
}

// ListEvents implements provider.Provider: GET /events?since=&cursor=. NextCursor is
// empty when HasMore is false.
func (a *Adapter) ListEvents(ctx context.Context, since time.Time, cursor string) (provider.EventPage, error) {
	q := url.Values{"since": {since.UTC().Format(time.RFC3339)}, "limit": {fmt.Sprint(eventsPageSize)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out EventList
	if err := a.c.Do(ctx, provider.Request{Op: "list events", Method: http.MethodGet, Path: "/events", Query: q, Header: a.header()}, &out); err != nil {
		return provider.EventPage{}, err
	}
	events, unreadable, _, err := provider.ReadEvents(out.Events, ParseEvent)
	if err != nil {
		return provider.EventPage{}, &provider.Error{Provider: a.c.Name(), Op: "list events", Class: provider.ErrNonRetryable, Err: err}
	}
	page := provider.EventPage{Events: events, Unreadable: unreadable, HasMore: out.HasMore}
	if out.HasMore {
		page.NextCursor = out.NextCursor
	}
	return page, nil
}

// VerifyWebhook implements provider.Provider (Standard Webhooks).
func (a *Adapter) VerifyWebhook(_ context.Context, h http.Header, rawBody []byte, secrets [][]byte, tolerance time.Duration, now time.Time) (string, error) {
	return provider.SchemeStandardWebhooks, Verify(h, rawBody, secrets, tolerance, now)
}

// ParseEvent implements provider.Provider.
func (a *Adapter) ParseEvent(rawBody []byte) (provider.Event, error) { return ParseEvent(rawBody) }

// ParseEvent decodes one event ({"id","type","timestamp","data":<job>}). The id is in
// the body as well as in the webhook-id header because events fetched from the events
// API have no headers and must dedup against webhook copies.
func ParseEvent(raw []byte) (provider.Event, error) {
	var e EventEnvelope
	if err := json.Unmarshal(raw, &e); err != nil {
		return provider.Event{}, provider.MalformedEvent("generic event is not a JSON event object", err)
	}
	if e.ID == "" || e.Type == "" {
		return provider.Event{}, provider.MalformedEvent("generic event lacks id or type", nil)
	}
	at, err := rfc3339Time("timestamp", e.Timestamp)
	if err != nil {
		// Stored as status.lastEvent.time, it would be refused by the API
		// server: acknowledged, the event could never be applied.
		return provider.Event{}, provider.MalformedEvent("generic event "+e.ID, err)
	}
	ev := provider.Event{ID: e.ID, Type: e.Type, OccurredAt: at, Raw: append([]byte(nil), raw...)}
	ev.Status, ev.Supported = MapEventType(e.Type)
	if len(e.Data) == 0 || string(e.Data) == "null" {
		if ev.Supported {
			return provider.Event{}, provider.MalformedEvent("generic event "+e.ID+" has no data", nil)
		}
		return ev, nil
	}
	var j Job
	if err := json.Unmarshal(e.Data, &j); err != nil {
		if ev.Supported {
			return provider.Event{}, provider.MalformedEvent("generic event "+e.ID+" data", err)
		}
		return ev, nil
	}
	if ev.Supported && j.JobID == "" && j.CorrelationID == "" {
		// An event's data is the job (docs/providers.md, generic: "Events:
		// {id, type, timestamp, data: <job>}"), and a job is known by its jobId
		// and the correlationId paywarden sent (seed 003). Data that names
		// neither ({} included) is no job, and stored it would wait Orphaned
		// until retention.
		return provider.Event{}, provider.MalformedEvent("generic event "+e.ID+" data names no job (no jobId, no correlationId)", nil)
	}
	p, err := j.Normalize()
	if err != nil {
		if ev.Supported {
			return provider.Event{}, provider.MalformedEvent("generic event "+e.ID+" data", err)
		}
		return ev, nil
	}
	ev.PaymentID, ev.MerchantReference = j.JobID, j.CorrelationID
	ev.Amount, ev.Currency, ev.RefundedTotal = p.Amount, p.Currency, p.RefundedTotal
	ev.FailureCode, ev.FailureMessage = p.FailureCode, p.FailureMessage
	if j.Refund != nil && j.Refund.RefundID != "" {
		r, err := j.Refund.Normalize()
		if err != nil {
			if ev.Supported {
				return provider.Event{}, provider.MalformedEvent("generic event "+e.ID+" data.refund", err)
			}
			return ev, nil
		}
		if r.PaymentID == "" {
			r.PaymentID = j.JobID
		}
		ev.Refund = &r
	}
	return ev, nil
}
