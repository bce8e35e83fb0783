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
	// StatusApproved: the payer approved at the provider and the merchant's
	// call is due: a capture (automatic capture) or an authorization (manual
	// capture at providers with an authorize step, see
	// Capabilities.AuthorizeStep). No money is reserved yet.
	StatusApproved Status = "Approved"
	// StatusAuthorized: the money is reserved; a capture takes it (all or
	// part), a cancel releases it, and it expires uncaptured after
	// Payment.AuthorizationExpiresAt.
	StatusAuthorized Status = "Authorized"
	// StatusCanceled: canceled or voided before any money was taken.
	StatusCanceled Status = "Canceled"
)

// CaptureMethod says when the money of an authorized payment is taken.
type CaptureMethod string

// Capture methods.
const (
	// CaptureAutomatic: paywarden (or the provider) captures as soon as the
	// payment is approved or authorized.
	CaptureAutomatic CaptureMethod = "Automatic"
	// CaptureManual: the payment waits in Authorized until the merchant asks
	// for the capture.
	CaptureManual CaptureMethod = "Manual"
)

// Checkout is where the provider sends the payer back from its hosted page.
type Checkout struct {
	ReturnURL, CancelURL string
}

// StoredMethod identifies a payment method the provider already holds (a
// server-side charge): tokens only, never card data.
type StoredMethod struct {
	Customer, PaymentMethod string
}

// CustomerAction is where the payer must go to approve or complete the
// payment, and until when the link works.
type CustomerAction struct {
	URL       string
	ExpiresAt time.Time // zero when the provider does not say
}

// ActionRequest asks for a money-moving call on an existing payment:
// Authorize, Capture or Cancel. IdempotencyKey is deterministic (derived
// from the payment's key and the action), so a repeated call after a crash
// is replayed by the provider rather than done twice.
type ActionRequest struct {
	PaymentID      string
	IdempotencyKey string
	// Amount (Capture) is the amount to capture in ISO minor units; 0 takes
	// the whole authorized amount. A partial capture releases the rest.
	Amount   int64
	Currency string
	// Reason (Cancel) is the merchant's reason, forwarded where the provider
	// takes one.
	Reason string
}

// RefundStatus is a refund's normalized status.
type RefundStatus string

// Refund statuses. Pending and Processing are not final; Unknown means the
// provider itself does not know yet.
const (
	RefundPending    RefundStatus = "Pending"
	RefundProcessing RefundStatus = "Processing"
	RefundSucceeded  RefundStatus = "Succeeded"
	RefundFailed     RefundStatus = "Failed"
	RefundUnknown    RefundStatus = "Unknown"
)

// RefundRequest asks for a refund of (part of) a payment.
type RefundRequest struct {
	// PaymentID is the provider's id of the payment refunded.
	PaymentID string
	// IdempotencyKey is sent as the provider's idempotency header.
	IdempotencyKey string
	// Reference is paywarden's reference of the refund (forwarded as
	// metadata where the provider keeps it), for FindRefund.
	Reference string
	Amount    int64 // ISO minor units; 0 refunds what is left
	Currency  string
	Reason    string
	// MerchantReference is the payment's merchant reference, as sent when
	// it was created; adapters that send it with a refund send this one.
	MerchantReference string
	// CaptureID, when paywarden has read it (Payment.CaptureID), is the
	// capture refunded; an adapter that needs one reads the payment for it
	// when it is empty. The refund call is the same either way.
	CaptureID string
}

// Refund is the provider's view of one refund, normalized.
type Refund struct {
	ID, PaymentID, Reference string
	Status                   RefundStatus
	RawStatus                string
	Amount                   int64
	Currency                 string
	FailureCode              string
	FailureMessage           string
}

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
	// CaptureMethod is Automatic when empty.
	CaptureMethod CaptureMethod
	// Checkout, when set, makes the payer approve at the provider's hosted
	// page (Payment.CustomerAction is the link).
	Checkout *Checkout
	// StoredMethod, when set, charges a payment method the provider holds,
	// without the payer.
	StoredMethod *StoredMethod
	// ExpiresAt, when set, is when the payer's checkout should stop working
	// (the adapter keeps it within the provider's bounds, counted from
	// RequestedAt).
	ExpiresAt time.Time
	// RequestedAt is the time the create marker was stored
	// (status.createRequestedAt, to the second). Every time-dependent
	// parameter (an expiry clamped to the provider's bounds) is computed from
	// it, never from the adapter's clock, so a retry of the create is
	// byte-identical and the provider replays the first answer instead of
	// refusing the key. Adapters fall back to their clock only when it is zero.
	RequestedAt time.Time
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
	// CustomerAction is set while the payer must act (approve, authenticate).
	CustomerAction *CustomerAction
	// CheckoutID is the provider's id of the checkout the payment belongs to
	// (a Stripe Checkout Session), when it differs from ID; an id that names
	// the same payment.
	CheckoutID string
	// CaptureID is the provider's id of the capture that took the money,
	// where refunds name it instead of the payment (PayPal); set only when
	// the payment Succeeded or was refunded.
	CaptureID string
	// AuthorizationExpiresAt is when an Authorized payment's reservation
	// ends (zero when unknown).
	AuthorizationExpiresAt time.Time
	// FundsGuaranteedUntil is when the provider stops guaranteeing an
	// Authorized payment's reserved funds, before AuthorizationExpiresAt
	// (PayPal's honor period); zero when they are held until then.
	FundsGuaranteedUntil time.Time
}

// Event is one provider event (webhook or events API), normalized.
type Event struct {
	ID, Type string
	// Status is the normalized meaning of the event (Succeeded, Failed, Expired,
	// Processing, Refund, Dispute, Pending).
	Status Status
	// Supported is false for event types paywarden does not act on; the receiver
	// answers 200 and records them as Ignored so the provider stops retrying.
	Supported bool
	// NotActedOn, on an event that is not Supported, says why when its type
	// alone does not (e.g. rendered in another API version); the Ignored
	// record shows it.
	NotActedOn                   string
	OccurredAt                   time.Time
	PaymentID, MerchantReference string
	Amount                       int64
	Currency                     string
	RefundedTotal                int64
	FailureCode, FailureMessage  string
	// CheckoutID, as in Payment: another id of the same payment.
	CheckoutID string
	// Refund is the refund a refund event is about (id, status, amount), so
	// the event can settle a Refund resource; RefundedTotal stays the
	// payment's cumulative refunded amount.
	Refund *Refund
	// DisputeOutcome, on a Dispute event, is how the dispute ended:
	// DisputeWon, DisputeLost, or "" while it is open.
	DisputeOutcome string
	Raw            []byte // the raw JSON of this one event exactly as the provider sent it
}

// NamesPayment reports whether the event names a payment paywarden can find: the
// provider's payment id or a merchant reference, the only keys the receiver and the
// inbox look a Payment up by (a refund event's Refund is found under its payment).
// An adapter's ParseEvent refuses a supported event whose object names none and
// carries nothing else its provider documents as always there (ErrMalformedEvent):
// stored, it would wait Orphaned until retention for a payment it cannot match.
func (e Event) NamesPayment() bool { return e.PaymentID != "" || e.MerchantReference != "" }

// Dispute outcomes (Event.DisputeOutcome).
const (
	// DisputeWon: the dispute ended in the merchant's favour; the money
	// stays (or is reinstated).
	DisputeWon = "won"
	// DisputeLost: the payer won; the provider took the disputed amount
	// back from the merchant.
	DisputeLost = "lost"
)

// EventPage is one page of the provider's events API.
type EventPage struct {
	Events []Event
	// Unreadable are the page's entries that are not events paywarden can
	// read (ReadEvents): left out of Events, reported by the backfill.
	Unreadable []UnreadableEvent
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
	// page. ErrUnsupported for providers without an events API
	// (Capabilities.EventsAPI false).
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

	// Authorize turns an approved payment into an authorization (reserves the
	// money), for providers whose approval does not (Capabilities.AuthorizeStep).
	Authorize(ctx context.Context, req ActionRequest) (Payment, error)
	// Capture takes the money of an approved or authorized payment, all or
	// req.Amount. An "already captured" answer is not an error: the payment's
	// current state is returned.
	Capture(ctx context.Context, req ActionRequest) (Payment, error)
	// Cancel cancels a payment that has not taken money (voids its
	// authorization). An "already canceled" answer is not an error; a payment
	// that has taken money is refused with ErrNonRetryable.
	Cancel(ctx context.Context, req ActionRequest) (Payment, error)
	// CreateRefund refunds (part of) a succeeded payment, once per key.
	CreateRefund(ctx context.Context, req RefundRequest) (Refund, error)
	// GetRefund reads one refund; ErrNotFound when the provider has none.
	GetRefund(ctx context.Context, paymentID, refundID string) (Refund, error)
	// FindRefund looks a refund up by paywarden's reference (past the key
	// window); ErrNotFound when none, ErrUnsupported where the provider
	// cannot search.
	FindRefund(ctx context.Context, paymentID, reference string) (Refund, error)
}

// RemoteVerifier is implemented by an adapter whose VerifyWebhook asks the provider's
// API (Verification.Credentials: PayPal's verify-webhook-signature), so that every
// verification spends the merchant's API quota. The receiver remembers the provider's
// verdict on one exact request while the request is within its tolerance, so a
// redelivery or a replay costs no second call; VerificationKey says what "one exact
// request" is, which only the adapter knows.
type RemoteVerifier interface {
	// VerificationKey identifies the request that h and rawBody make to this adapter:
	// two requests have the same key exactly when VerifyWebhook would ask the provider
	// the same question (every header it forwards, the body, the account's webhook
	// id), so a forgery that reuses a genuine request's id has a key of its own. The
	// key is a digest, small enough to keep many. sentAt is the time the request says
	// it was sent. An error means VerifyWebhook rejects the request without a call.
	VerificationKey(h http.Header, rawBody []byte) (key string, sentAt time.Time, err error)
}

// Capabilities is what an adapter type needs and can do; controllers read it instead of
// switching on the type.
type Capabilities struct {
	Type              string       // "kukopay", "paypal", "generic", "stripe"
	CredentialKeys    []string     // non-blank keys the credentials Secret must have
	EventsAPI         bool         // ListEvents works (backfill possible)
	LookupByReference bool         // FindByMerchantReference works
	Verification      Verification // what VerifyWebhook needs
	Lifecycle         Lifecycle    // what a checkout can do beyond create and read
	// EventsNewestFirst: ListEvents pages from the newest event towards older ones
	// (Stripe, PayPal), so a run has read its whole window only after its last page; else
	// oldest first, where every stored page is a prefix of the window.
	EventsNewestFirst bool
	// EventsRetention is how far back ListEvents reaches (0: no documented limit);
	// asking for older events cannot return them.
	EventsRetention time.Duration
	// CreateKeyWindow is how long the provider documents replaying a create
	// for one idempotency key (0: it documents none). It is the default of
	// PaymentProvider spec.idempotencyWindow for the type.
	CreateKeyWindow time.Duration
}

// Lifecycle is what an adapter type supports of a real checkout.
type Lifecycle struct {
	Checkout       bool // a hosted page where the payer approves (Payment.CustomerAction)
	StoredMethod   bool // a server-side charge of a stored payment method
	ManualCapture  bool // CaptureManual: Authorized until the merchant captures
	PartialCapture bool // a capture of less than the authorized amount
	// AuthorizeStep: an approved payment is not authorized until the
	// merchant calls Authorize (PayPal orders with intent AUTHORIZE).
	AuthorizeStep bool
	Cancel        bool // Cancel works
	Refunds       bool // CreateRefund and GetRefund work
	RefundLookup  bool // FindRefund works
	// OrderLifetime is how long the provider keeps a payment nobody completed
	// (not approved, or approved and neither captured nor authorized): after
	// it the provider deletes it, and reads of it answer ErrNotFound. 0: such
	// payments are never deleted.
	OrderLifetime time.Duration
}

// Verification is what an adapter type's VerifyWebhook needs from the PaymentProvider.
type Verification struct {
	SigningSecret bool // verifies with the signing Secret's keys (kukopay, generic, stripe)
	Credentials   bool // needs the API credentials (paypal verify API)
	WebhookID     bool // needs spec.webhook.paypalWebhookID (paypal)
	// CheckSecret validates the format of one non-blank signing-secret value (generic:
	// whsec_ base64); nil = any. Callers use CheckSigningSecret, which refuses a blank
	// value first.
	CheckSecret func([]byte) error
}

// CheckSigningSecret validates one value of the signing Secret for an adapter type that
// verifies with it (SigningSecret): a blank one (BlankSecret) is refused for every such
// type, since its VerifyWebhook never uses one as a key and every webhook would be
// rejected; then the type's CheckSecret. It accepts anything for a type that does not
// use the signing Secret.
func (v Verification) CheckSigningSecret(secret []byte) error {
	if !v.SigningSecret {
		return nil
	}
	if BlankSecret(secret) {
		return ErrBlankSecret
	}
	if v.CheckSecret != nil {
		return v.CheckSecret(secret)
	}
	return nil
}

// CheckWebhookID validates the configured webhook id for an adapter type that needs one
// (WebhookID): a blank one (BlankWebhookID) is refused, since VerifyWebhook refuses every
// webhook without asking the provider. It accepts anything for a type that needs none.
func (v Verification) CheckWebhookID(id string) error {
	if v.WebhookID && BlankWebhookID(id) {
		return ErrBlankWebhookID
	}
	return nil
}

// MissingCredentials returns the CredentialKeys that creds lacks or has blank (empty or
// only whitespace: it authenticates nothing), in the
// order of CredentialKeys; nil when nothing is missing.
func (c Capabilities) MissingCredentials(creds map[string][]byte) []string {
	var missing []string
	for _, k := range c.CredentialKeys {
		if BlankSecret(creds[k]) {
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
