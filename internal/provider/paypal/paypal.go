// Package paypal is the adapter for PayPal Orders v2: OAuth2 client-credentials tokens
// cached until they expire, orders created with PayPal-Request-Id, order status read
// together with the capture or authorization status (an order can be COMPLETED while its
// capture is still PENDING or was DECLINED, or while it is only authorized), and
// webhooks verified through PayPal's verify-webhook-signature API.
//
// The checkout lifecycle follows PayPal: an order waits for the payer's approval (the
// payer-action link is Payment.CustomerAction), then for the merchant's capture
// (intent CAPTURE) or authorization (intent AUTHORIZE; capture and void later through
// the Payments v2 authorization API). PayPal takes no money without the merchant's
// call. Refunds go through the Payments v2 capture API.
//
// ListEvents reads PayPal's webhook events list (GET
// /v1/notifications/webhooks-events), so lost webhooks are recovered by the
// backfill. PayPal has no search by invoice id that paywarden can rely on, so
// FindByMerchantReference returns provider.ErrUnsupported.
package paypal

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// Header names used by PayPal.
const (
	HeaderRequestID        = "PayPal-Request-Id"
	HeaderTransmissionID   = "PAYPAL-TRANSMISSION-ID"
	HeaderTransmissionTime = "PAYPAL-TRANSMISSION-TIME"
	HeaderTransmissionSig  = "PAYPAL-TRANSMISSION-SIG"
	HeaderCertURL          = "PAYPAL-CERT-URL"
	HeaderAuthAlgo         = "PAYPAL-AUTH-ALGO"
)

// Credentials Secret keys.
const (
	CredentialClientID     = "clientID"
	CredentialClientSecret = "clientSecret"
)

// VerificationSuccess is the verification_status of an authentic webhook.
const VerificationSuccess = "SUCCESS"

// Adapter implements provider.Provider for PayPal.
type Adapter struct {
	c         *provider.Client
	webhookID string
	tokens    *tokenSource
}

var (
	_ provider.Provider       = (*Adapter)(nil)
	_ provider.RemoteVerifier = (*Adapter)(nil)
)

// Type is the PaymentProvider type of this adapter.
const Type = "paypal"

// CreateKeyWindow is how long PayPal replays an order create for one
// PayPal-Request-Id: "The server stores keys for 6 hours" (PayPal Orders v2
// API reference, "Create order", header PayPal-Request-Id; up to 72 hours
// only when PayPal enables it for the account, which spec.idempotencyWindow
// can then say).
const CreateKeyWindow = 6 * time.Hour

// OrderLifetime is how long PayPal keeps an order nobody completed (not
// approved, or approved and neither captured nor authorized); then it deletes
// it and GET /v2/checkout/orders/{id} (and a capture or authorize of it)
// answers 404 RESOURCE_NOT_FOUND. "Any order that doesn't get completed will
// automatically expire. The default amount of time is 3 hours" (PayPal's SDK
// maintainers, paypal/Checkout-PHP-SDK issue 84); the capture window after an
// approval "is controlled by the merchant, but the default is 3 hours"
// (PayPal developer docs, "Handle uncaptured payments").
const OrderLifetime = 3 * time.Hour

// HonorPeriod is how long PayPal guarantees the funds of an authorization,
// from its creation: "Within this period, there is a 3-day honor period
// starting from the authorization date. PayPal recommends capturing funds
// within this 3-day honor period ... After the honor period expires, capture
// success depends on risk assessment and fund availability" (PayPal developer
// docs, "Authorization and honor period"). The authorization itself stays
// valid for 29 days (its expiration_time).
const HonorPeriod = 3 * 24 * time.Hour

// EventRetention is how far back PayPal lists webhook events. The API
// reference (Webhooks Management API v1, "List event notifications") names no
// limit; the Webhooks Events dashboard over the same events takes a date range
// that "must be in the last 30 days" (PayPal developer docs, "Webhooks Events
// dashboard"), which paywarden assumes for the API too.
const EventRetention = 30 * 24 * time.Hour

// Capabilities describes PayPal: OAuth2 client credentials, an events API (newest
// first, see ListEvents; EventRetention) and no search by invoice id, webhooks
// verified by PayPal's API with the credentials and the configured webhook id (no
// signing Secret). Checkout: the payer approves at PayPal;
// intent AUTHORIZE needs the merchant's authorize call after approval
// (AuthorizeStep); refunds cannot be searched by reference; PayPal stores no payment
// method paywarden could charge. A create's PayPal-Request-Id is kept for
// CreateKeyWindow; an order nobody completed is deleted after OrderLifetime.
func Capabilities() provider.Capabilities {
	return provider.Capabilities{
		Type:              Type,
		CreateKeyWindow:   CreateKeyWindow,
		CredentialKeys:    []string{CredentialClientID, CredentialClientSecret},
		Verification:      provider.Verification{Credentials: true, WebhookID: true},
		EventsAPI:         true,
		EventsNewestFirst: true,
		EventsRetention:   EventRetention,
		Lifecycle: provider.Lifecycle{
			Checkout: true, ManualCapture: true, PartialCapture: true, AuthorizeStep: true,
			Cancel: true, Refunds: true, OrderLifetime: OrderLifetime,
		},
	}
}

// New builds a PayPal adapter; cfg.Credentials must hold "clientID" and "clientSecret".
func New(cfg provider.Config) (*Adapter, error) {
	if err := Capabilities().CheckCredentials(cfg.Name, cfg.Credentials); err != nil {
		return nil, err
	}
	cfg.HTTPClient = withErrorBodies(cfg)
	c, err := provider.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	id, secret := string(cfg.Credentials[CredentialClientID]), string(cfg.Credentials[CredentialClientSecret])
	return &Adapter{c: c, webhookID: cfg.WebhookID, tokens: &tokenSource{c: c, clientID: id, clientSecret: secret}}, nil
}

// Capabilities implements provider.Provider.
func (a *Adapter) Capabilities() provider.Capabilities { return Capabilities() }

// tokenSource caches the OAuth2 token until shortly before it expires. Asking PayPal for
// a token on every call would double the request count and hit its token rate limit.
type tokenSource struct {
	c                      *provider.Client
	clientID, clientSecret string

	mu     sync.Mutex
	token  string
	expiry time.Time
}

// maxTokenMargin is how long before expiry a token is replaced, so a request never
// leaves with a token that expires in flight.
const maxTokenMargin = 5 * time.Minute

func (t *tokenSource) get(ctx context.Context) (string, error) {
	// Holding the lock across the fetch means concurrent callers wait for one fetch
	// instead of each asking PayPal for a token.
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && t.c.Now().Before(t.expiry) {
		return t.token, nil
	}
	h := http.Header{}
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(t.clientID+":"+t.clientSecret)))
	var out TokenResponse
	err := t.c.Do(ctx, provider.Request{
		Op: "token", Method: http.MethodPost, Path: "/v1/oauth2/token", Header: h,
		Form: url.Values{"grant_type": {"client_credentials"}},
	}, &out)
	if err != nil {
		return "", tokenError(err)
	}
	if out.AccessToken == "" {
		return "", &provider.Error{Provider: t.c.Name(), Op: "token", Class: provider.ErrRetryable, Detail: "empty access_token"}
	}
	ttl := time.Duration(out.ExpiresIn) * time.Second
	margin := min(maxTokenMargin, ttl/10)
	t.token, t.expiry = out.AccessToken, t.c.Now().Add(ttl-margin)
	return t.token, nil
}

// tokenError classifies a failed token request. The request carries nothing about a
// payment, so a definitive refusal of it (401/400 invalid_client, an unsupported grant,
// a wrong path) is always a configuration problem, never a verdict on the payment that
// needed the token. Transient failures stay retryable.
func tokenError(err error) error {
	var pe *provider.Error
	if errors.As(err, &pe) && !errors.Is(err, provider.ErrRetryable) && !errors.Is(err, provider.ErrProviderConfig) {
		c := *pe
		c.Class = provider.ErrProviderConfig
		return &c
	}
	return err
}

// invalidate drops tok if it is still the cached one (a 401 means PayPal revoked it).
func (t *tokenSource) invalidate(tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token == tok {
		t.token = ""
	}
}

// do sends r with a bearer token; on 401 it fetches a fresh token and tries once more
// (PayPal revokes tokens before expires_in, e.g. when the app's secret is rotated). A
// second 401 is ErrProviderConfig, as classified by the client: the new token was
// refused too, so the credentials or the app's permissions are wrong.
//
// A refused call's *provider.Error carries PayPal's issue (details[0].issue, e.g.
// ORDER_ALREADY_CAPTURED) as its Code when the body has one: PayPal answers every
// business refusal with the same name, UNPROCESSABLE_ENTITY, and only the issue tells
// "already captured" (state) from "not approved" (refusal).
func (a *Adapter) do(ctx context.Context, r provider.Request, out any) error {
	slot := &errorBodySlot{}
	err := a.send(context.WithValue(ctx, errorBodyKey{}, slot), r, out)
	return withIssue(err, slot.body)
}

func (a *Adapter) send(ctx context.Context, r provider.Request, out any) error {
	for attempt := 0; ; attempt++ {
		tok, err := a.tokens.get(ctx)
		if err != nil {
			return err
		}
		r.Header = r.Header.Clone()
		if r.Header == nil {
			r.Header = http.Header{}
		}
		r.Header.Set("Authorization", "Bearer "+tok)
		err = a.c.Do(ctx, r, out)
		var pe *provider.Error
		if attempt == 0 && errors.As(err, &pe) && pe.StatusCode == http.StatusUnauthorized {
			a.tokens.invalidate(tok)
			continue
		}
		return err
	}
}

// Create implements provider.Provider: POST /v2/checkout/orders with PayPal-Request-Id.
// The amount is converted from ISO minor units to PayPal's decimals (ToMoney).
// The merchant reference goes into both invoice_id and custom_id: invoice_id is what
// the PayPal dashboard shows, custom_id survives into every capture and dispute.
//
// Intent is CAPTURE for automatic capture and AUTHORIZE for manual capture. With
// req.Checkout the order carries payment_source.paypal.experience_context (return_url,
// cancel_url; user_action PAY_NOW for CAPTURE, since the money is taken on return), and
// PayPal answers PAYER_ACTION_REQUIRED with a payer-action link. req.ExpiresAt is not
// sent (PayPal orders take no expiry) and req.StoredMethod is refused: PayPal holds no
// payment method paywarden could charge (Capabilities.Lifecycle.StoredMethod is false).
func (a *Adapter) Create(ctx context.Context, req provider.CreateRequest) (provider.Payment, error) {
	if req.StoredMethod != nil {
		return provider.Payment{}, &provider.Error{Provider: a.c.Name(), Op: "create", Class: provider.ErrNonRetryable, Detail: "PayPal cannot charge a stored payment method"}
	}
	// Refused before any request, the token included: nothing PayPal could answer
	// would make this amount sendable.
	amount, err := ToMoney(req.Amount, req.Currency)
	if err != nil {
		return provider.Payment{}, &provider.Error{Provider: a.c.Name(), Op: "create", Class: provider.ErrNonRetryable, Err: err}
	}
	h := http.Header{}
	if req.IdempotencyKey != "" {
		h.Set(HeaderRequestID, req.IdempotencyKey)
	}
	h.Set("Prefer", "return=representation")
	body := CreateOrderRequest{Intent: IntentCapture, PurchaseUnits: []PurchaseUnitRequest{{
		ReferenceID: "default", InvoiceID: req.MerchantReference, CustomID: req.MerchantReference,
		Description: req.Description,
		Amount:      amount,
	}}}
	if req.CaptureMethod == provider.CaptureManual {
		body.Intent = IntentAuthorize
	}
	if req.Checkout != nil {
		ec := &ExperienceContext{ReturnURL: req.Checkout.ReturnURL, CancelURL: req.Checkout.CancelURL}
		if body.Intent == IntentCapture {
			ec.UserAction = "PAY_NOW"
		}
		body.PaymentSource = &PaymentSource{PayPal: &WalletSource{ExperienceContext: ec}}
	}
	var out Order
	err = a.do(ctx, provider.Request{
		Op: "create", Method: http.MethodPost, Path: "/v2/checkout/orders", Header: h, ConflictRetryable: true,
		JSON: body,
	}, &out)
	if err != nil {
		return provider.Payment{}, err
	}
	return a.writtenOrder("create", out)
}

// writtenOrder reads an order answered to a write (create, authorize, capture): one
// without the order's id cannot be read, and the write may have taken effect.
func (a *Adapter) writtenOrder(op string, out Order) (provider.Payment, error) {
	if out.ID == "" {
		return provider.Payment{}, provider.NoID(a.c.Name(), op, "order")
	}
	return NormalizeOrder(out), nil
}

// Get implements provider.Provider: GET /v2/checkout/orders/{id}.
func (a *Adapter) Get(ctx context.Context, id string) (provider.Payment, error) {
	if id == "" {
		return provider.Payment{}, &provider.Error{Provider: a.c.Name(), Op: "get", Class: provider.ErrNonRetryable, Detail: "empty order id"}
	}
	var out Order
	err := a.do(ctx, provider.Request{Op: "get", Method: http.MethodGet, Path: "/v2/checkout/orders/" + url.PathEscape(id), NotFound: true}, &out)
	if err != nil {
		return provider.Payment{}, err
	}
	return NormalizeOrder(out), nil
}

// FindByMerchantReference is unsupported: PayPal has no order search by invoice id.
func (a *Adapter) FindByMerchantReference(context.Context, string) (provider.Payment, error) {
	return provider.Payment{}, provider.Unsupported(a.c.Name(), "find")
}

// EventsPageSize is how many events one ListEvents call asks for. PayPal
// documents no maximum (page_size defaults to 10) and that "the response might
// have fewer items than the requested page_size value".
const EventsPageSize = 100

// ListEvents implements provider.Provider through GET
// /v1/notifications/webhooks-events?start_time= (Webhooks Management API v1,
// "List event notifications"). The next page is the link with rel "next";
// NextCursor is its query (the filters and PayPal's place in the list), sent
// back to the same path: the link's host is never called with the token.
//
// The reference does not say in which order events are listed; its sample
// answer's next link continues a day before the end of its window, so the first
// page holds the newest events: Capabilities says newest first, which makes the
// backfill move its cursor only after a run's last page — right for either
// order. event_type takes one type, so every type is asked for and the page
// keeps the events paywarden acts on.
func (a *Adapter) ListEvents(ctx context.Context, since time.Time, cursor string) (provider.EventPage, error) {
	const op = "list events"
	q, err := eventsQuery(since, cursor)
	if err != nil {
		return provider.EventPage{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Detail: "page cursor is not a query: " + err.Error()}
	}
	var out EventList
	if err := a.do(ctx, provider.Request{Op: op, Method: http.MethodGet, Path: eventsPath, Query: q}, &out); err != nil {
		return provider.EventPage{}, err
	}
	events, unreadable, _, err := provider.ReadEvents(out.Events, ParseEvent)
	if err != nil {
		return provider.EventPage{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrNonRetryable, Err: err}
	}
	page := provider.EventPage{Unreadable: unreadable}
	for _, ev := range events {
		if ev.Supported {
			page.Events = append(page.Events, ev)
		}
	}
	if next := linkHref(out.Links, RelNext); next != "" {
		u, err := url.Parse(next)
		if err != nil || u.RawQuery == "" {
			return provider.EventPage{}, &provider.Error{Provider: a.c.Name(), Op: op, Class: provider.ErrRetryable, Detail: "unreadable next link " + strconv.Quote(next)}
		}
		page.NextCursor, page.HasMore = u.RawQuery, true
	}
	return page, nil
}

const eventsPath = "/v1/notifications/webhooks-events"

// eventsQuery is the query of ListEvents: the first page of the events
// created at or after since, or the page a next link's query names.
func eventsQuery(since time.Time, cursor string) (url.Values, error) {
	if cursor != "" {
		return url.ParseQuery(cursor)
	}
	q := url.Values{"page_size": {strconv.Itoa(EventsPageSize)}}
	if !since.IsZero() {
		q.Set("start_time", since.UTC().Format(time.RFC3339))
	}
	return q, nil
}

// ParseEvent implements provider.Provider.
func (a *Adapter) ParseEvent(rawBody []byte) (provider.Event, error) { return ParseEvent(rawBody) }

// NormalizeOrder maps an order (with its authorizations, captures and refunds) to a
// provider.Payment. While the payer must approve, CustomerAction is the payer-action
// link (approve for orders created without a payment_source); PayPal does not say
// until when it works. An Authorized order's Amount is the authorized amount,
// AuthorizationExpiresAt its expiration_time and FundsGuaranteedUntil the end of
// its honor period (HonorPeriod); an expired authorization has the FailureCode
// provider.FailureAuthorizationExpired.
func NormalizeOrder(o Order) provider.Payment {
	st, raw := MapOrderStatus(o)
	p := provider.Payment{ID: o.ID, Status: st, RawStatus: raw}
	if awaitingPayer[o.Status] {
		if href := linkHref(o.Links, RelPayerAction, RelApprove); href != "" {
			p.CustomerAction = &provider.CustomerAction{URL: href}
		}
	}
	if len(o.PurchaseUnits) == 0 {
		return p
	}
	pu := o.PurchaseUnits[0]
	p.MerchantReference = firstNonEmpty(pu.InvoiceID, pu.CustomID)
	p.Currency = pu.Amount.CurrencyCode
	p.Amount, _ = ParseAmount(pu.Amount.Value, p.Currency)
	if c, ok := lastCapture(o); ok {
		if c.StatusDetails != nil {
			p.FailureCode = c.StatusDetails.Reason
		}
		// Once money moved, the amount that counts is what was captured, so an amount
		// mismatch between order and capture is visible to the state machine; and
		// that capture is what a refund names.
		if st == provider.StatusSucceeded || st == provider.StatusRefund {
			if n, err := ParseAmount(c.Amount.Value, c.Amount.CurrencyCode); err == nil {
				p.Amount, p.Currency = n, c.Amount.CurrencyCode
			}
			p.CaptureID = c.ID
		}
	}
	if _, captured := lastCapture(o); !captured {
		if au, ok := lastAuthorization(o); ok {
			normalizeAuthorization(&p, au)
		}
	}
	for _, pu := range o.PurchaseUnits {
		if pu.Payments == nil {
			continue
		}
		for _, r := range pu.Payments.Refunds {
			if r.Status != "COMPLETED" {
				continue
			}
			if n, err := ParseAmount(r.Amount.Value, r.Amount.CurrencyCode); err == nil {
				p.RefundedTotal += n
			}
		}
	}
	return p
}

// normalizeAuthorization fills in what the authorization of a not yet captured order
// says about the payment.
func normalizeAuthorization(p *provider.Payment, au Authorization) {
	switch p.Status {
	case provider.StatusAuthorized:
		// What can be captured is what was authorized, whatever the order said.
		if n, err := ParseAmount(au.Amount.Value, au.Amount.CurrencyCode); err == nil {
			p.Amount, p.Currency = n, au.Amount.CurrencyCode
		}
		p.AuthorizationExpiresAt = parseTime(au.ExpirationTime)
		p.FundsGuaranteedUntil = fundsGuaranteedUntil(au)
	case provider.StatusExpired:
		p.FailureCode, p.FailureMessage = provider.FailureAuthorizationExpired, "the authorization expired before it was captured"
	case provider.StatusFailed:
		if au.StatusDetails != nil {
			p.FailureCode = au.StatusDetails.Reason
		}
	}
}

// fundsGuaranteedUntil is when the honor period of authorization au ends: its
// create_time plus HonorPeriod, but not after its expiration_time; zero when
// PayPal does not say when it was created.
func fundsGuaranteedUntil(au Authorization) time.Time {
	created := parseTime(au.CreateTime)
	if created.IsZero() {
		return time.Time{}
	}
	until := created.Add(HonorPeriod)
	if exp := parseTime(au.ExpirationTime); !exp.IsZero() && exp.Before(until) {
		until = exp
	}
	return until
}

// linkHref returns the href of the first link with one of rels (in the order of rels).
func linkHref(links []Link, rels ...string) string {
	for _, rel := range rels {
		for _, l := range links {
			if l.Rel == rel && l.Href != "" {
				return l.Href
			}
		}
	}
	return ""
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
