// Package paypal is the adapter for PayPal Orders v2: OAuth2 client-credentials tokens
// cached until they expire, orders created with PayPal-Request-Id, order status read
// together with the capture status (an order can be COMPLETED while its capture is still
// PENDING or was DECLINED), and webhooks verified through PayPal's
// verify-webhook-signature API.
//
// PayPal has no events API and no search by invoice id that paywarden can rely on, so
// ListEvents and FindByMerchantReference return provider.ErrUnsupported.
package paypal

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
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

var _ provider.Provider = (*Adapter)(nil)

// Type is the PaymentProvider type of this adapter.
const Type = "paypal"

// Capabilities describes PayPal: OAuth2 client credentials, no events API and no
// search by invoice id, webhooks verified by PayPal's API with the credentials and the
// configured webhook id (no signing Secret).
func Capabilities() provider.Capabilities {
	return provider.Capabilities{
		Type:           Type,
		CredentialKeys: []string{CredentialClientID, CredentialClientSecret},
		Verification:   provider.Verification{Credentials: true, WebhookID: true},
	}
}

// New builds a PayPal adapter; cfg.Credentials must hold "clientID" and "clientSecret".
func New(cfg provider.Config) (*Adapter, error) {
	if err := Capabilities().CheckCredentials(cfg.Name, cfg.Credentials); err != nil {
		return nil, err
	}
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
func (a *Adapter) do(ctx context.Context, r provider.Request, out any) error {
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
func (a *Adapter) Create(ctx context.Context, req provider.CreateRequest) (provider.Payment, error) {
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
	var out Order
	err = a.do(ctx, provider.Request{
		Op: "create", Method: http.MethodPost, Path: "/v2/checkout/orders", Header: h, ConflictRetryable: true,
		JSON: CreateOrderRequest{Intent: "CAPTURE", PurchaseUnits: []PurchaseUnitRequest{{
			ReferenceID: "default", InvoiceID: req.MerchantReference, CustomID: req.MerchantReference,
			Description: req.Description,
			Amount:      amount,
		}}},
	}, &out)
	if err != nil {
		return provider.Payment{}, err
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

// ListEvents is unsupported: paywarden does not backfill PayPal.
func (a *Adapter) ListEvents(context.Context, time.Time, string) (provider.EventPage, error) {
	return provider.EventPage{}, provider.Unsupported(a.c.Name(), "list events")
}

// ParseEvent implements provider.Provider.
func (a *Adapter) ParseEvent(rawBody []byte) (provider.Event, error) { return ParseEvent(rawBody) }

// NormalizeOrder maps an order (with its captures and refunds) to a provider.Payment.
func NormalizeOrder(o Order) provider.Payment {
	st, raw := MapOrderStatus(o)
	p := provider.Payment{ID: o.ID, Status: st, RawStatus: raw}
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
		// mismatch between order and capture is visible to the state machine.
		if st == provider.StatusSucceeded || st == provider.StatusRefund {
			if n, err := ParseAmount(c.Amount.Value, c.Amount.CurrencyCode); err == nil {
				p.Amount, p.Currency = n, c.Amount.CurrencyCode
			}
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

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
