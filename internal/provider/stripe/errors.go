package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/paywarden/paywarden/internal/provider"
)

// Stripe answer headers the classification reads.
const (
	headerRetryAfter  = "Retry-After"
	headerShouldRetry = "Stripe-Should-Retry"
)

// callKind says what kind of call failed, where one status means different things.
type callKind int

const (
	// callRead reads one object by id: 404 resource_missing is ErrNotFound.
	callRead callKind = iota
	// callWrite creates or acts (create, capture, cancel, refund): a 409 means the
	// same idempotency key is still in flight, retryable with that key.
	callWrite
	// callList lists or searches: a 404 means the route does not exist.
	callList
)

// configCodes are Stripe error codes that say the account or key is wrong, whatever
// the status: no payment can go through until the PaymentProvider is fixed.
// They come with 400 as often as 401/403 (Stripe, "Error codes":
// livemode_mismatch, testmode_charges_only, account_invalid, ...), and a 400 with
// one of them refuses the account, never the payment.
var configCodes = map[stripego.ErrorCode]bool{
	stripego.ErrorCodeAPIKeyExpired:           true,
	stripego.ErrorCodePlatformAPIKeyExpired:   true,
	stripego.ErrorCodeSecretKeyRequired:       true,
	stripego.ErrorCodeLivemodeMismatch:        true,
	stripego.ErrorCodeTestmodeChargesOnly:     true,
	stripego.ErrorCodeAccountInvalid:          true,
	stripego.ErrorCodeAccountClosed:           true,
	stripego.ErrorCodePlatformAccountRequired: true,
}

// classify turns whatever stripe-go returned into a *provider.Error with a class. The
// order matters: configuration answers are decided first and nothing in the body
// changes them; then the answers that say "try again" (429, 5xx, 409 on a write,
// Stripe-Should-Retry: true); then card declines and request errors.
func (a *Adapter) classify(ctx context.Context, op string, kind callKind, err error) error {
	if err == nil {
		return nil
	}
	pe := &provider.Error{Provider: a.name, Op: op}
	var se *stripego.Error
	var redirect *redirectError
	var status *statusError
	var undecodable *undecodableError
	switch {
	case errors.As(err, &se):
		a.classifyStripe(pe, kind, se)
	case errors.As(err, &redirect):
		pe.Class, pe.StatusCode, pe.Detail = provider.ErrProviderConfig, redirect.status, redirect.Error()
	case errors.As(err, &status):
		pe.StatusCode, pe.Detail = status.status, http.StatusText(status.status)
		pe.Class = classByStatus(status.status, kind, "")
		pe.RetryAfter = a.retryAfter(status.header)
	case errors.As(err, &undecodable) && undecodable.status >= 200 && undecodable.status < 300:
		// Stripe accepted the request; its answer is lost on the way: the call may
		// have taken effect (see answerError).
		return provider.UnreadableAnswer(a.name, op, undecodable.status, undecodable)
	case errors.As(err, &undecodable):
		pe.Class, pe.StatusCode, pe.Err = provider.ErrRetryable, undecodable.status, undecodable
	case isUndecodable(err):
		return provider.UnreadableAnswer(a.name, op, 0, err)
	case isTransport(err):
		// No answer, or no complete answer: the outcome is unknown. The context error
		// is wrapped too, so callers can tell a cancellation apart.
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		pe.Class, pe.Err = provider.ErrRetryable, err
	default:
		// stripe-go refused to build the request (an idempotency key over 255
		// characters, say): nothing was sent, and sending it again cannot help.
		pe.Class, pe.Err = provider.ErrNonRetryable, err
	}
	return pe
}

// isTransport reports an error of the HTTP round trip itself (connection refused,
// reset, timeout, cancelled context), as opposed to one stripe-go made up locally.
func isTransport(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// isUndecodable reports stripe-go's error for an answer it could not decode into the
// object asked for (the guard lets only valid JSON through, but a JSON of the wrong
// shape still fails here). The call may have taken effect.
func isUndecodable(err error) bool {
	return strings.HasPrefix(err.Error(), "Couldn't deserialize JSON")
}

func (a *Adapter) classifyStripe(pe *provider.Error, kind callKind, se *stripego.Error) {
	pe.StatusCode = se.HTTPStatusCode
	pe.Code = string(se.Code)
	pe.Detail = truncate(se.Msg, 300)
	var header http.Header
	if se.LastResponse != nil {
		header = se.LastResponse.Header
	}
	pe.RetryAfter = a.retryAfter(header)
	switch {
	case se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden || configCodes[se.Code]:
		pe.Class = provider.ErrProviderConfig
	case se.HTTPStatusCode == http.StatusConflict && kind == callWrite:
		// Stripe answers 409 while a request with the same idempotency key is still
		// executing; the retry with that key gets the first request's answer.
		pe.Class = provider.ErrRetryable
	case se.Type == stripego.ErrorTypeIdempotency:
		// The key was used with other parameters or on another endpoint: a first
		// request under this key exists and may have moved money. It concerns this
		// one call, neither the payment (no verdict) nor the account (no hold).
		pe.Class = provider.ErrKeyConflict
	case se.HTTPStatusCode == http.StatusTooManyRequests || se.HTTPStatusCode == http.StatusRequestTimeout ||
		se.HTTPStatusCode >= 500 || se.Type == stripego.ErrorTypeAPI:
		// A 500 may be a replay of a stored 500 (Stripe keeps the first answer under
		// the idempotency key for 24h): still not an answer about the payment.
		pe.Class = provider.ErrRetryable
	case header.Get(headerShouldRetry) == "true":
		pe.Class = provider.ErrRetryable
	case se.Type == stripego.ErrorTypeCard:
		// A decline: definitive about this payment. The decline code is what the
		// payment records as its failure code.
		pe.Class = provider.ErrNonRetryable
		if se.DeclineCode != "" {
			pe.Code = string(se.DeclineCode)
		}
	default:
		pe.Class = classByStatus(se.HTTPStatusCode, kind, se.Code)
	}
}

// classByStatus classifies by HTTP status alone (and Stripe's resource_missing code
// where there is one).
func classByStatus(code int, kind callKind, errCode stripego.ErrorCode) error {
	switch {
	case code >= 300 && code < 400, code == http.StatusUnauthorized, code == http.StatusForbidden:
		return provider.ErrProviderConfig
	case code == http.StatusNotFound:
		switch {
		case errCode == stripego.ErrorCodeResourceMissing && kind == callRead:
			return provider.ErrNotFound
		case errCode == stripego.ErrorCodeResourceMissing:
			// Stripe knows the route but not the object: a definitive answer.
			return provider.ErrNonRetryable
		default:
			// "Unrecognized request URL": the apiURL is wrong.
			return provider.ErrProviderConfig
		}
	case code == http.StatusConflict && kind == callWrite, code == http.StatusTooManyRequests,
		code == http.StatusRequestTimeout, code >= 500:
		return provider.ErrRetryable
	default:
		return provider.ErrNonRetryable
	}
}

// retryAfter reads Retry-After (seconds or HTTP-date) from an answer.
func (a *Adapter) retryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	d, _ := provider.ParseRetryAfter(h.Get(headerRetryAfter), a.now())
	return d
}
