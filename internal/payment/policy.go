package payment

import (
	"errors"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// Policy is everything about a provider account that shapes the decisions
// about its payments: the query schedule, the idempotency window, how long to
// wait for any answer. It is plain data, built from the PaymentProvider spec,
// so every decision stays a pure function of (payment, what happened, now).
type Policy struct {
	// Schedule is the list of waits between status queries.
	Schedule []time.Duration
	// JitterPercent spreads each wait by up to ± this percentage.
	JitterPercent int32
	// KeyWindow is how long the provider replays a create for one key.
	KeyWindow time.Duration
	// KeyWindowMarginPercent is the part of KeyWindow, at its end, during
	// which paywarden no longer repeats a create but looks the payment up.
	KeyWindowMarginPercent int32
	// MaxUnreachable is how long a payment waits for any answer at all.
	MaxUnreachable time.Duration
	// ConfigRetry is how long a call waits after the provider refused
	// paywarden's configuration (credentials, routes), when nothing else wakes
	// it sooner.
	ConfigRetry time.Duration
	// Lifecycle is what the provider type supports of a checkout (its
	// adapter's capabilities); LifecycleKnown says it was filled in.
	Lifecycle      provider.Lifecycle
	LifecycleKnown bool
	// LookupByReference: the provider can find a payment by merchant
	// reference (its adapter's capability; only with LifecycleKnown).
	LookupByReference bool
}

// DefaultConfigRetry is Policy.ConfigRetry unless set.
const DefaultConfigRetry = time.Minute

// PolicyFor builds the policy of a provider account from its spec, with the
// defaults of SPEC §3 and §11.
func PolicyFor(spec *v1alpha1.PaymentProviderSpec) Policy {
	return Policy{
		Schedule:               spec.QuerySchedule(),
		JitterPercent:          spec.JitterPercent(),
		KeyWindow:              spec.KeyWindow(),
		KeyWindowMarginPercent: spec.KeyWindowMarginPercent(),
		MaxUnreachable:         spec.MaxUnreachable(),
		ConfigRetry:            DefaultConfigRetry,
	}
}

// WithCapabilities completes a provider account's policy with what its
// adapter type declares: the checkout lifecycle, lookups by merchant
// reference, and the provider's documented create key window where
// spec.idempotencyWindow sets none (PayPal keeps a create's PayPal-Request-Id
// for 6 hours, not the 24 hours other providers keep their keys: repeating a
// create with the key after 6 hours would make a second order). The
// account's spec.orderLifetime replaces the type's documented order lifetime
// where the type has one.
func (pol Policy) WithCapabilities(spec *v1alpha1.PaymentProviderSpec, caps provider.Capabilities) Policy {
	pol.Lifecycle, pol.LifecycleKnown = caps.Lifecycle, true
	pol.LookupByReference = caps.LookupByReference
	if spec.IdempotencyWindow == nil && caps.CreateKeyWindow > 0 {
		pol.KeyWindow = caps.CreateKeyWindow
	}
	if spec.OrderLifetime != nil && caps.Lifecycle.OrderLifetime > 0 {
		pol.Lifecycle.OrderLifetime = spec.OrderLifetime.Duration
	}
	return pol
}

// LookupAfter is how long after the create marker a create is no longer
// repeated with the same key: the key window minus its safety margin.
func (pol Policy) LookupAfter() time.Duration {
	margin := min(max(pol.KeyWindowMarginPercent, 0), 100)
	return pol.KeyWindow * time.Duration(100-margin) / 100
}

// canLookUp: a payment can be looked up by merchant reference.
func (pol Policy) canLookUp() bool { return pol.LifecycleKnown && pol.LookupByReference }

// canLookUpRefund: a refund can be looked up by paywarden's reference.
func (pol Policy) canLookUpRefund() bool { return pol.LifecycleKnown && pol.Lifecycle.RefundLookup }

func (pol Policy) configRetry() time.Duration {
	if pol.ConfigRetry <= 0 {
		return DefaultConfigRetry
	}
	return pol.ConfigRetry
}

// ErrorClass is what a failed provider call means for a payment.
type ErrorClass int

// The error classes (SPEC §4, §11.3).
const (
	// Answered: no error; the provider answered.
	Answered ErrorClass = iota
	// NoAnswer: a transport error, a timeout, a 5xx or a 429, or a 2xx the
	// adapter cannot read (provider.ErrUnreadableAnswer: to a write, "it
	// happened, look it up"). The call's outcome is unknown; it says nothing
	// about the payment and consumes no schedule attempt.
	NoAnswer
	// ConfigProblem: the provider refused paywarden's configuration
	// (credentials, routes, redirects). Never a verdict on a payment.
	ConfigProblem
	// NotFound: the provider has no such payment.
	NotFound
	// Refused: a definitive answer about the payment itself (a decline, a
	// validation error); the only error that may fail a payment.
	Refused
	// Unsupported: the provider type has no such operation.
	Unsupported
	// KeyConflict: the provider has a first request under the call's
	// idempotency key (with another body or route). It concerns that one
	// call: never a verdict on the payment (the first request may have moved
	// money), never a problem of the provider account. The call's outcome is
	// looked up.
	KeyConflict
)

// Classify reads the class of a provider error (the adapters decide it).
func Classify(err error) ErrorClass {
	switch {
	case err == nil:
		return Answered
	case errors.Is(err, provider.ErrProviderConfig):
		return ConfigProblem
	case errors.Is(err, provider.ErrKeyConflict):
		return KeyConflict
	case errors.Is(err, provider.ErrRetryable):
		return NoAnswer
	case errors.Is(err, provider.ErrNotFound):
		return NotFound
	case errors.Is(err, provider.ErrUnsupported):
		return Unsupported
	case errors.Is(err, provider.ErrNonRetryable):
		return Refused
	default:
		// An error no adapter classified (a bug, a context error that escaped)
		// must not settle a payment: treat it as no answer.
		return NoAnswer
	}
}

// StatusName is the class as recorded in status.query.lastErrorClass.
func (c ErrorClass) StatusName() string {
	switch c {
	case NoAnswer:
		return "NoAnswer"
	case ConfigProblem:
		return "ProviderConfig"
	case NotFound:
		return "NotFound"
	case Refused:
		return "Refused"
	case Unsupported:
		return "Unsupported"
	case KeyConflict:
		return "KeyConflict"
	}
	return ""
}

// String names the class for metrics and logs.
func (c ErrorClass) String() string {
	switch c {
	case Answered:
		return "answered"
	case NoAnswer:
		return "no_answer"
	case ConfigProblem:
		return "config"
	case NotFound:
		return "not_found"
	case Refused:
		return "refused"
	case Unsupported:
		return "unsupported"
	case KeyConflict:
		return "key_conflict"
	}
	return "unknown"
}
