// Package kukopay is the adapter for KukoPay: payments with an out_trade_no and an
// Idempotency-Key, an events API whose objects are identical to webhook bodies, and
// X-KukoPay-Signature HMAC-SHA256 webhooks that carry one v1 per active secret during a
// key rotation.
//
// KukoPay's checkout lifecycle is shaped like Stripe's PaymentIntents: a hosted
// checkout (return_url) or a stored payment method (customer + payment_method tokens),
// capture_method automatic or manual (requires_capture until captured, canceled or
// expired at capture_before), capture and cancel calls, and refunds with their own
// resource, searchable by the merchant's reference.
//
// The wire structs here are the single definition of the format: paysim imports them to
// serve the same JSON, and Sign/SignatureHeaderValue to sign what it sends.
package kukopay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// Header names of the KukoPay API.
const (
	HeaderAPIKey         = "X-Api-Key"
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderSignature      = "X-KukoPay-Signature"
)

// CredentialAPIKey is the credentials Secret key holding the API key.
const CredentialAPIKey = "apiKey"

// eventsPageSize is how many events one ListEvents call asks for.
const eventsPageSize = 100

// Adapter implements provider.Provider for KukoPay.
type Adapter struct {
	c      *provider.Client
	apiKey string
}

var _ provider.Provider = (*Adapter)(nil)

// Type is the PaymentProvider type of this adapter.
const Type = "kukopay"

// Capabilities describes KukoPay: an API key, an events API, search by out_trade_no,
// webhooks signed with the signing Secret's keys (any non-empty value).
func Capabilities() provider.Capabilities {
	return provider.Capabilities{
		Type:              Type,
		CredentialKeys:    []string{CredentialAPIKey},
		EventsAPI:         true,
		LookupByReference: true,
		Verification:      provider.Verification{SigningSecret: true},
		Lifecycle: provider.Lifecycle{
			Checkout: true, StoredMethod: true, ManualCapture: true, PartialCapture: true,
			Cancel: true, Refunds: true, RefundLookup: true,
		},
	}
}

// New builds a KukoPay adapter; cfg.Credentials must hold "apiKey".
func New(cfg provider.Config) (*Adapter, error) {
	if err := Capabilities().CheckCredentials(cfg.Name, cfg.Credentials); err != nil {
		return nil, err
	}
	c, err := provider.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Adapter{c: c, apiKey: string(cfg.Credentials[CredentialAPIKey])}, nil
}

// Capabilities implements provider.Provider.
func (a *Adapter) Capabilities() provider.Capabilities { return Capabilities() }

func (a *Adapter) header() http.Header {
	h := http.Header{}
	h.Set(HeaderAPIKey, a.apiKey)
	return h
}

// Create implements provider.Provider. out_trade_no and the Idempotency-Key header are
// both sent: the key replays the first answer for 24h, the merchant reference protects
// beyond that window.
//
// capture_method is "manual" for provider.CaptureManual, else "automatic".
// req.Checkout becomes return_url/cancel_url (a hosted checkout: requires_action with
// next_action.redirect_url), req.StoredMethod customer/payment_method (a server-side
// charge), and req.ExpiresAt expires_at, kept within KukoPay's 30 minutes to 24
// hours from req.RequestedAt (the create marker), never from this call's clock: a
// retry with the same Idempotency-Key must send the same body, or KukoPay refuses it
// (422 idempotency_error) although the first request may have charged.
func (a *Adapter) Create(ctx context.Context, req provider.CreateRequest) (provider.Payment, error) {
	if err := provider.CheckISOAmount(a.c.Name(), req); err != nil {
		return provider.Payment{}, err
	}
	h := a.header()
	if req.IdempotencyKey != "" {
		h.Set(HeaderIdempotencyKey, req.IdempotencyKey)
	}
	body := CreatePaymentRequest{
		OutTradeNo: req.MerchantReference, Amount: req.Amount, Currency: req.Currency,
		Description: req.Description, Metadata: req.Metadata, CaptureMethod: CaptureAutomatic,
	}
	if req.CaptureMethod == provider.CaptureManual {
		body.CaptureMethod = CaptureManual
	}
	if req.Checkout != nil {
		body.ReturnURL, body.CancelURL = req.Checkout.ReturnURL, req.Checkout.CancelURL
	}
	if req.StoredMethod != nil {
		body.Customer, body.PaymentMethod = req.StoredMethod.Customer, req.StoredMethod.PaymentMethod
	}
	if !req.ExpiresAt.IsZero() {
		from := req.RequestedAt
		if from.IsZero() {
			from = a.c.Now()
		}
		body.ExpiresAt = CheckoutExpiry(req.ExpiresAt, from).Unix()
	}
	var out PaymentObject
	err := a.c.Do(ctx, provider.Request{
		Op: "create", Method: http.MethodPost, Path: "/v1/payments", Header: h, ConflictRetryable: true,
		JSON: body,
	}, &out)
	if err != nil {
		return provider.Payment{}, keyConflict(duplicateReference(err))
	}
	return a.written("create", out)
}

// written reads the answer to a write (create, capture, cancel): one without the
// payment's id cannot be read, and the write may have taken effect.
func (a *Adapter) written(op string, out PaymentObject) (provider.Payment, error) {
	if out.ID == "" {
		return provider.Payment{}, provider.NoID(a.c.Name(), op, "payment")
	}
	return a.payment(op, out)
}

// payment reads a payment KukoPay answered with: one carrying a currency or a
// time paywarden cannot store (PaymentObject.Normalize) is an answer that
// cannot be read (provider.UnreadableAnswer), never a payment taken as it is.
func (a *Adapter) payment(op string, out PaymentObject) (provider.Payment, error) {
	p, err := out.Normalize()
	if err != nil {
		return provider.Payment{}, provider.UnreadableAnswer(a.c.Name(), op, 0, fmt.Errorf("payment %s: %w", out.ID, err))
	}
	return p, nil
}

// refund reads a refund KukoPay answered with, as payment reads a payment.
func (a *Adapter) refund(op string, out RefundObject) (provider.Refund, error) {
	r, err := out.Normalize()
	if err != nil {
		return provider.Refund{}, provider.UnreadableAnswer(a.c.Name(), op, 0, fmt.Errorf("refund %s: %w", out.ID, err))
	}
	return r, nil
}

// CheckoutExpiry keeps a requested checkout expiry within KukoPay's bounds
// (MinCheckoutLifetime to MaxCheckoutLifetime from the create marker's time,
// requested). It is a pure function of the request, so every retry of one create
// sends the same expires_at.
func CheckoutExpiry(at, requested time.Time) time.Time {
	switch d := at.Sub(requested); {
	case d < MinCheckoutLifetime:
		return requested.Add(MinCheckoutLifetime)
	case d > MaxCheckoutLifetime:
		return requested.Add(MaxCheckoutLifetime)
	}
	return at
}

// ErrorCodeIdempotency is KukoPay's error code (HTTP 422) for a request whose
// Idempotency-Key already belongs to another request (another body or route).
const ErrorCodeIdempotency = "idempotency_error"

// keyConflict reclassifies KukoPay's 422 idempotency_error: a first request under this
// key exists and may have moved money, so it is no verdict on the payment (as other
// 422s are) but a key conflict of this one call, whose outcome the caller looks up.
func keyConflict(err error) error {
	return reclassify(err, http.StatusUnprocessableEntity, ErrorCodeIdempotency, provider.ErrKeyConflict)
}

// ErrorCodeDuplicateOutTradeNo is KukoPay's error code for a create whose out_trade_no
// already belongs to a payment with a different amount or currency.
const ErrorCodeDuplicateOutTradeNo = "duplicate_out_trade_no"

// duplicateReference reclassifies KukoPay's one non-transient 409: a create is
// retryable on 409 (the same Idempotency-Key still in flight), but an out_trade_no that
// belongs to a different payment is a definitive answer about this one, and retrying
// with the same key can only repeat it.
func duplicateReference(err error) error {
	return reclassify(err, http.StatusConflict, ErrorCodeDuplicateOutTradeNo, provider.ErrNonRetryable)
}

// reclassify returns a copy of err in class when err is KukoPay's answer with
// HTTP status and error code code, and any other err as it is.
func reclassify(err error, status int, code string, class error) error {
	var pe *provider.Error
	if errors.As(err, &pe) && pe.StatusCode == status && pe.Code == code {
		c := *pe
		c.Class = class
		return &c
	}
	return err
}

// Get implements provider.Provider.
func (a *Adapter) Get(ctx context.Context, id string) (provider.Payment, error) {
	if id == "" {
		return provider.Payment{}, &provider.Error{Provider: a.c.Name(), Op: "get", Class: provider.ErrNonRetryable, Detail: "empty payment id"}
	}
	var out PaymentObject
	err := a.c.Do(ctx, provider.Request{
		Op: "get", Method: http.MethodGet, Path: "/v1/payments/" + url.PathEscape(id),
		Header: a.header(), NotFound: true,
	}, &out)
	if err != nil {
		return provider.Payment{}, err
	}
	return a.payment("get", out)
}

// FindByMerchantReference implements provider.Provider through
// GET /v1/payments?out_trade_no=.
func (a *Adapter) FindByMerchantReference(ctx context.Context, ref string) (provider.Payment, error) {
	var out List[PaymentObject]
	err := a.c.Do(ctx, provider.Request{
		Op: "find", Method: http.MethodGet, Path: "/v1/payments",
		Query: url.Values{"out_trade_no": {ref}}, Header: a.header(),
	}, &out)
	if err != nil {
		return provider.Payment{}, err
	}
	var found []provider.Payment
	for _, p := range out.Data {
		// Filter again: a provider that ignores an unknown query parameter would
		// otherwise hand us somebody else's payment.
		if p.OutTradeNo == ref {
			n, err := a.payment("find", p)
			if err != nil {
				return provider.Payment{}, err
			}
			found = append(found, n)
		}
	}
	return provider.OneMatch(a.c.Name(), "payment", ref, found)
}

// ListEvents implements provider.Provider through GET /v1/events?created[gte]=, paging
// with starting_after=<last event id>. NextCursor is empty when HasMore is false.
func (a *Adapter) ListEvents(ctx context.Context, since time.Time, cursor string) (provider.EventPage, error) {
	q := url.Values{
		"created[gte]": {since.UTC().Format(time.RFC3339)},
		"limit":        {fmt.Sprint(eventsPageSize)},
	}
	if cursor != "" {
		q.Set("starting_after", cursor)
	}
	var out List[json.RawMessage]
	err := a.c.Do(ctx, provider.Request{Op: "list events", Method: http.MethodGet, Path: "/v1/events", Query: q, Header: a.header()}, &out)
	if err != nil {
		return provider.EventPage{}, err
	}
	events, unreadable, last, err := provider.ReadEvents(out.Data, ParseEvent)
	var next string
	if err == nil {
		next, err = provider.ContinueAfter(out.HasMore, len(out.Data), last, cursor)
	}
	if err != nil {
		return provider.EventPage{}, &provider.Error{Provider: a.c.Name(), Op: "list events", Class: provider.ErrNonRetryable, Err: err}
	}
	return provider.EventPage{Events: events, Unreadable: unreadable, NextCursor: next, HasMore: out.HasMore}, nil
}

// VerifyWebhook implements provider.Provider.
func (a *Adapter) VerifyWebhook(_ context.Context, h http.Header, rawBody []byte, secrets [][]byte, tolerance time.Duration, now time.Time) (string, error) {
	return provider.SchemeKukoPay, Verify(provider.HeaderValue(h, HeaderSignature), rawBody, secrets, tolerance, now)
}

// ParseEvent implements provider.Provider.
func (a *Adapter) ParseEvent(rawBody []byte) (provider.Event, error) { return ParseEvent(rawBody) }
