package provider

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error classes. Every error an adapter returns from an API call matches exactly one of
// ErrRetryable, ErrNonRetryable, ErrNotFound, ErrUnsupported, ErrProviderConfig or
// ErrKeyConflict (errors.Is); callers branch on the class and never on HTTP codes.
// "Not retryable" in the broad sense is !errors.Is(err, ErrRetryable).
var (
	// ErrRetryable: transport errors, timeouts, cancellation, 5xx, 429, 408, a 409 on
	// create (the same idempotency key is still in flight), problem "retryable": true.
	// The outcome of the call is unknown or transient; retry later (honouring
	// RetryAfter), never conclude anything about the payment.
	ErrRetryable = errors.New("retryable provider error")
	// ErrNonRetryable: a definitive answer about the request itself (other 4xx, problem
	// "retryable": false, an amount the provider cannot represent).
	ErrNonRetryable = errors.New("non-retryable provider error")
	// ErrNotFound: the provider has no such payment (404 on Get, empty search).
	ErrNotFound = errors.New("not found at provider")
	// ErrUnsupported: the provider has no such operation (e.g. PayPal events API).
	ErrUnsupported = errors.New("operation not supported by provider")
	// ErrProviderConfig: the provider refused paywarden, not the payment: 401/403
	// (wrong or rotated credentials), any 3xx (redirects are never followed), a 404 on
	// a collection or route path (wrong apiURL), an OAuth client rejected by the token
	// endpoint. It is never a verdict on a payment: the call is deferred like an open
	// circuit and resumes once the PaymentProvider is fixed. A problem "retryable"
	// member does not override it: a credential problem does not go away by retrying.
	ErrProviderConfig = errors.New("provider configuration error")
	// ErrKeyConflict: the provider already has a first request under this idempotency
	// key, with another body or on another route (Stripe idempotency_error, KukoPay
	// 422 idempotency_error). It concerns that one call: never a verdict on the
	// payment (the first request may have moved money), never a problem of the
	// provider account. The caller looks the call's outcome up.
	ErrKeyConflict = errors.New("idempotency key already used for another request")
)

// ErrAmountNotRepresentable is wrapped, together with ErrNonRetryable, by an adapter
// that refuses an amount before any call because its provider cannot express it (an
// unknown currency, HUF with fillér at PayPal). Callers use it to record the failure
// code AmountNotRepresentable on the payment.
var ErrAmountNotRepresentable = errors.New("amount not representable at provider")

// AmountNotRepresentable builds the error an adapter returns for an amount it refuses
// before calling the provider: class ErrNonRetryable, wrapping ErrAmountNotRepresentable.
func AmountNotRepresentable(providerName, op, detail string) error {
	return &Error{Provider: providerName, Op: op, Class: ErrNonRetryable, Detail: detail, Err: ErrAmountNotRepresentable}
}

// ErrUnreadableAnswer is wrapped, together with ErrRetryable, by an adapter that got a
// 2xx answer it cannot read: a body that is not JSON, cut short, of another shape, or
// without the object it should carry (no id, an amount with no ISO equivalent). The
// provider accepted the request, so the call may have taken effect: to a write it
// means "it happened, look it up", never a refusal. Like a timeout after sending, the
// outcome is unknown; the core repeats the call with its idempotency key (the
// provider replays the first answer, e.g. Stripe's "Idempotent requests": "Subsequent
// requests with the same key return the same result") or looks it up.
var ErrUnreadableAnswer = errors.New("unreadable answer")

// UnreadableAnswer builds the error an adapter returns for a 2xx answer it cannot
// read (status is its HTTP status, 0 when unknown): class ErrRetryable, wrapping
// ErrUnreadableAnswer and cause.
func UnreadableAnswer(providerName, op string, status int, cause error) error {
	err := ErrUnreadableAnswer
	if cause != nil {
		err = fmt.Errorf("%w: %w", ErrUnreadableAnswer, cause)
	}
	return &Error{Provider: providerName, Op: op, Class: ErrRetryable, StatusCode: status, Err: err}
}

// NoID is the UnreadableAnswer of a 2xx answer to a write that carries no id of the
// object it is about (what: "payment", "refund", ...): well-formed JSON of another
// shape, which decodes without error into an empty object.
func NoID(providerName, op, what string) error {
	return UnreadableAnswer(providerName, op, 0, fmt.Errorf("the answer carries no %s id", what))
}

// Classes lists the error classes, for tests that check "exactly one class".
func Classes() []error {
	return []error{ErrRetryable, ErrNonRetryable, ErrNotFound, ErrUnsupported, ErrProviderConfig, ErrKeyConflict}
}

// ErrInvalidSignature is returned by VerifyWebhook when the request is not authentic.
// It always wraps one of the reasons below, so logs and metrics can say why.
var (
	ErrInvalidSignature = errors.New("invalid webhook signature")

	ErrMissingHeader       = errors.New("missing signature header")
	ErrMalformedHeader     = errors.New("malformed signature header")
	ErrTimestampTolerance  = errors.New("timestamp outside tolerance")
	ErrNoMatchingSignature = errors.New("no matching signature")
)

// BlankSecret reports whether a configured signing secret is empty or only whitespace.
// VerifyWebhook never uses one as a key: an HMAC under the empty key (or under " " or a
// newline) is one anyone can compute, so it would authenticate a forgery. The receiver
// drops empty values before it calls an adapter, but each adapter checks for itself.
func BlankSecret(secret []byte) bool { return len(bytes.TrimSpace(secret)) == 0 }

// BlankWebhookID reports whether a configured webhook id (the id the provider assigned
// to paywarden's webhook endpoint, which its verification API checks) is empty or only
// whitespace: no provider assigns such an id, so VerifyWebhook refuses every webhook
// without asking the provider.
func BlankWebhookID(id string) bool { return strings.TrimSpace(id) == "" }

// Configuration errors of Verification's checks; the PaymentProvider controller reports
// them with the Secret key or spec field they are about.
var (
	ErrBlankSecret    = errors.New("signing secret is blank (empty or whitespace only): it is never used as a key, so no webhook verifies with it")
	ErrBlankWebhookID = errors.New("webhook id is blank (empty or whitespace only)")
)

// BlankSecrets is the rejection when secrets were configured but every one is blank.
// The detail says the configuration is at fault; the reason is the one of any request
// no configured secret signed (ErrNoMatchingSignature, answered 401 like "no secrets
// configured"), because without a key nothing can be verified.
func BlankSecrets() error {
	return SignatureError(ErrNoMatchingSignature, "signing secret missing: every configured secret is blank (empty or whitespace only)")
}

// MatchSecrets checks a signature with each configured secret, every one of them
// whatever an earlier one found: none configured is no match; a blank one
// (BlankSecret) is never a key and is skipped, so it does not block a real one
// beside it, and with only blank ones nothing verifies (BlankSecrets); one
// match among the rest verifies. match reports whether secret signed the
// request; its error refuses the request at once (a header no secret can make
// valid).
func MatchSecrets(secrets [][]byte, match func(secret []byte) (bool, error)) error {
	if len(secrets) == 0 {
		return SignatureError(ErrNoMatchingSignature, "no secrets configured")
	}
	matched, usable := false, 0
	for _, secret := range secrets {
		if BlankSecret(secret) {
			continue
		}
		usable++
		ok, err := match(secret)
		if err != nil {
			return err
		}
		matched = matched || ok
	}
	if usable == 0 {
		return BlankSecrets()
	}
	if !matched {
		return SignatureError(ErrNoMatchingSignature, "")
	}
	return nil
}

// ErrMalformedEvent is returned by ParseEvent for a body it cannot decode.
var ErrMalformedEvent = errors.New("malformed event")

// SignatureError builds an ErrInvalidSignature that wraps reason (one of the reason
// sentinels) and adds detail. Detail must never contain secrets or the body.
func SignatureError(reason error, detail string) error {
	if detail == "" {
		return fmt.Errorf("%w: %w", ErrInvalidSignature, reason)
	}
	return fmt.Errorf("%w: %w: %s", ErrInvalidSignature, reason, detail)
}

// MalformedEvent builds an ErrMalformedEvent with a detail and optional cause.
func MalformedEvent(detail string, cause error) error {
	if cause != nil {
		return fmt.Errorf("%w: %s: %w", ErrMalformedEvent, detail, cause)
	}
	return fmt.Errorf("%w: %s", ErrMalformedEvent, detail)
}

// Error is a classified failure of one provider operation.
type Error struct {
	Provider   string        // Config.Name
	Op         string        // "create", "get", "find", "list events", "verify webhook", "token"
	Class      error         // one of Classes()
	StatusCode int           // HTTP status, 0 when no answer was received
	Code       string        // the provider's machine-readable error code, when the body has one
	Problem    *Problem      // decoded application/problem+json body, if any
	RetryAfter time.Duration // hint from Retry-After / retryAfter; 0 when none
	Detail     string        // short provider message (never a request body or secret)
	Err        error         // underlying cause (transport error, context error, ...)
}

// Error names the provider and operation first, so a log line alone says where.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("provider ")
	if e.Provider != "" {
		b.WriteString(e.Provider)
	} else {
		b.WriteString("(unnamed)")
	}
	b.WriteString(": ")
	b.WriteString(e.Op)
	if e.StatusCode != 0 {
		b.WriteString(": HTTP ")
		b.WriteString(strconv.Itoa(e.StatusCode))
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.RetryAfter > 0 {
		b.WriteString(" (retry after ")
		b.WriteString(e.RetryAfter.String())
		b.WriteString(")")
	}
	if e.Class != nil {
		b.WriteString(" [")
		b.WriteString(e.Class.Error())
		b.WriteString("]")
	}
	return b.String()
}

// Unwrap exposes both the class and the cause, so errors.Is works for
// ErrRetryable and for e.g. context.DeadlineExceeded alike.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Class != nil {
		errs = append(errs, e.Class)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// RetryAfter extracts a Retry-After/retryAfter hint from err.
func RetryAfter(err error) (time.Duration, bool) {
	var pe *Error
	if errors.As(err, &pe) && pe.RetryAfter > 0 {
		return pe.RetryAfter, true
	}
	return 0, false
}

// Unsupported returns the ErrUnsupported error for op.
func Unsupported(providerName, op string) error {
	return &Error{Provider: providerName, Op: op, Class: ErrUnsupported}
}

// ParseRetryAfter parses an HTTP Retry-After value: delay-seconds or an HTTP-date
// (RFC 9110 §10.2.3). A date in the past yields 0, true: "retry now" is still a hint.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > maxRetryAfterSeconds {
			// An absurd hint is treated as the cap rather than ignored: the provider
			// clearly asked us to back off.
			return maxRetryAfterSeconds * time.Second, true
		}
		return time.Duration(n) * time.Second, true
	}
	// http.ParseTime accepts the three date formats RFC 9110 says recipients must parse.
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	if d > maxRetryAfterSeconds*time.Second {
		d = maxRetryAfterSeconds * time.Second
	}
	return d, true
}

// maxRetryAfterSeconds caps hints at a day; longer waits are the schedule's business.
const maxRetryAfterSeconds = 24 * 60 * 60

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
