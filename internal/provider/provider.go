// Package provider defines the one interface paywarden uses to talk to a payment
// provider, the normalized statuses and events every adapter translates into, and the
// error classes callers branch on.
//
// The reconciler, the webhook receiver and the backfill never look at a provider's own
// status strings or HTTP codes: the adapter decides what an answer means (Succeeded,
// Processing, ...) and whether a failed call may be retried. That keeps "what may change
// a phase" in the state machine and "what did the provider say" here.
//
// Adapters live in sub-packages (kukopay, paypal, generic); package providers builds one
// from a PaymentProvider's type.
package provider

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Status is a normalized provider status.
type Status string

// The normalized statuses. Refund and Dispute describe what happened to a succeeded
// payment; Unknown means the provider itself does not know yet (not final).
const (
	StatusPending    Status = "Pending"
	StatusProcessing Status = "Processing"
	StatusSucceeded  Status = "Succeeded"
	StatusFailed     Status = "Failed"
	StatusExpired    Status = "Expired"
	StatusRefund     Status = "Refund"
	StatusDispute    Status = "Dispute"
	StatusUnknown    Status = "Unknown"
)

// DefaultTimeout bounds one provider request when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Config is what an adapter needs to reach one provider account.
type Config struct {
	Name        string            // "<namespace>/<name>" of the PaymentProvider, for errors/logs
	APIURL      string            // base URL; adapter paths are appended to it
	Credentials map[string][]byte // keys of the credentials Secret (kukopay: "apiKey"; paypal: "clientID","clientSecret"; generic: "token")
	WebhookID   string            // paypal webhook id
	Timeout     time.Duration     // per request; default 10s
	HTTPClient  *http.Client      // optional; else one built with Timeout. Redirects are never followed either way.
	Now         func() time.Time  // optional clock (token expiry); default time.Now
}

// CreateRequest asks the provider for a new payment.
type CreateRequest struct {
	IdempotencyKey, MerchantReference, Description string
	Amount                                         int64 // minor units
	Currency                                       string
	Metadata                                       map[string]string
}

// Payment is the provider's view of one payment, normalized.
type Payment struct {
	ID, MerchantReference string
	Status                Status // normalized
	RawStatus             string // provider's own status string (paypal: "<order>/<capture>")
	Amount                int64  // minor units the provider has for the payment (received when succeeded)
	Currency              string
	RefundedTotal         int64 // cumulative refunded, minor units
	FailureCode           string
	FailureMessage        string
}

// Event is one provider event (webhook or events API), normalized.
type Event struct {
	ID, Type string
	// Status is the normalized meaning of the event (Succeeded, Failed, Expired,
	// Processing, Refund, Dispute, Pending).
	Status Status
	// Supported is false for event types paywarden does not act on; the receiver
	// answers 200 and records them as Ignored so the provider stops retrying.
	Supported                    bool
	OccurredAt                   time.Time
	PaymentID, MerchantReference string
	Amount                       int64
	Currency                     string
	RefundedTotal                int64
	FailureCode, FailureMessage  string
	Raw                          []byte // the raw JSON of this one event exactly as the provider sent it
}

// EventPage is one page of the provider's events API.
type EventPage struct {
	Events     []Event
	NextCursor string
	HasMore    bool
}

// Provider is implemented by every adapter. All methods are safe for concurrent use.
type Provider interface {
	// Create creates a payment, sending req.IdempotencyKey as the provider's
	// idempotency header so a repeated call replays the first answer.
	Create(ctx context.Context, req CreateRequest) (Payment, error)
	// Get reads a payment by the provider's id; ErrNotFound when the provider has none.
	Get(ctx context.Context, id string) (Payment, error)
	// FindByMerchantReference looks a payment up by merchant reference (used when the
	// idempotency key window passed); ErrNotFound when none, ErrUnsupported where the
	// provider has no such search.
	FindByMerchantReference(ctx context.Context, ref string) (Payment, error)
	// ListEvents pages through events created at or after since; cursor "" = first
	// page. ErrUnsupported for providers without an events API (paypal).
	ListEvents(ctx context.Context, since time.Time, cursor string) (EventPage, error)
	// VerifyWebhook checks the signature on the raw body and returns the scheme name
	// used ("kukopay-hmac-sha256", "paypal-verify-api", "standard-webhooks").
	// A rejected signature is ErrInvalidSignature; any other error (e.g. PayPal's
	// verification API unreachable) is classified like an API error and means "could
	// not decide": answer 5xx so the provider retries.
	VerifyWebhook(ctx context.Context, h http.Header, rawBody []byte, secrets [][]byte, tolerance time.Duration, now time.Time) (scheme string, err error)
	// ParseEvent decodes one webhook body; ErrMalformedEvent when it cannot.
	ParseEvent(rawBody []byte) (Event, error)
	// Capabilities says what this adapter's type needs and can do (the same value as
	// the type's entry in package providers).
	Capabilities() Capabilities
}

// Capabilities is what an adapter type needs and can do; controllers read it instead of
// switching on the type.
type Capabilities struct {
	Type              string       // "kukopay", "paypal", "generic"
	CredentialKeys    []string     // non-empty keys the credentials Secret must have
	EventsAPI         bool         // ListEvents works (backfill possible)
	LookupByReference bool         // FindByMerchantReference works
	Verification      Verification // what VerifyWebhook needs
}

// Verification is what an adapter type's VerifyWebhook needs from the PaymentProvider.
type Verification struct {
	SigningSecret bool // verifies with the signing Secret's keys (kukopay, generic)
	Credentials   bool // needs the API credentials (paypal verify API)
	WebhookID     bool // needs spec.webhook.paypalWebhookID (paypal)
	// CheckSecret validates one signing-secret value (generic: whsec_ base64); nil = any
	// non-empty value.
	CheckSecret func([]byte) error
}

// MissingCredentials returns the CredentialKeys that creds lacks or has empty, in the
// order of CredentialKeys; nil when nothing is missing.
func (c Capabilities) MissingCredentials(creds map[string][]byte) []string {
	var missing []string
	for _, k := range c.CredentialKeys {
		if len(creds[k]) == 0 {
			missing = append(missing, k)
		}
	}
	return missing
}

// CheckCredentials is the error an adapter's constructor returns when creds lacks a
// key its type needs; it names every missing key and never a value.
func (c Capabilities) CheckCredentials(providerName string, creds map[string][]byte) error {
	missing := c.MissingCredentials(creds)
	if len(missing) == 0 {
		return nil
	}
	quoted := make([]string, len(missing))
	for i, k := range missing {
		quoted[i] = strconv.Quote(k)
	}
	return fmt.Errorf("provider %s: %s credentials Secret needs non-empty %s", providerName, c.Type, strings.Join(quoted, ", "))
}

// Signature scheme names returned by VerifyWebhook.
const (
	SchemeKukoPay          = "kukopay-hmac-sha256"
	SchemePayPal           = "paypal-verify-api"
	SchemeStandardWebhooks = "standard-webhooks"
)

// DefaultTolerance is the replay window used when VerifyWebhook gets tolerance <= 0.
const DefaultTolerance = 5 * time.Minute

// WithinTolerance reports whether ts is no further than tolerance from now, in either
// direction: a timestamp from the future is as suspicious as an old one (a clock that
// runs ahead would otherwise let a captured request be replayed for longer).
func WithinTolerance(ts, now time.Time, tolerance time.Duration) bool {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	// Compare without negating: Sub saturates at the int64 limits, and negating the
	// minimum would overflow back into "inside the window".
	d := now.Sub(ts)
	return d >= -tolerance && d <= tolerance
}

// HeaderValue returns the first value of header name. Besides the canonical lookup it
// matches keys case-insensitively, because a header map built by hand (tests, proxies,
// non-Go front ends that hand over lower-case HTTP/2 names) need not be canonical, and
// a signature check must not fail on spelling.
func HeaderValue(h http.Header, name string) string {
	if v := h.Get(name); v != "" {
		return v
	}
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, name) {
			return vs[0]
		}
	}
	return ""
}
