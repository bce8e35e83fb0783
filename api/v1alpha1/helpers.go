package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	iso4217 "github.com/paywarden/paywarden/internal/currency"
)

// ManualCapture reports whether the payment's money is taken only when the
// capture annotation asks: captureMethod Manual, and every payment that only
// tracks a provider payment paywarden did not create (spec.providerPaymentID),
// whatever its captureMethod says (it defaults to Automatic).
func (s *PaymentSpec) ManualCapture() bool {
	return s.CaptureMethod == CaptureManual || s.ProviderPaymentID != ""
}

// MerchantRef is the merchant reference sent to the provider: the spec's, or
// "<namespace>.<name>". A default longer than the 64 characters providers
// accept keeps its first 47 characters and appends a hash of the whole, so it
// stays unique and deterministic.
func (p *Payment) MerchantRef() string {
	if p.Spec.MerchantReference != "" {
		return p.Spec.MerchantReference
	}
	ref := p.Namespace + "." + p.Name
	if len(ref) <= 64 {
		return ref
	}
	sum := sha256.Sum256([]byte(ref))
	return ref[:47] + "-" + hex.EncodeToString(sum[:])[:16]
}

// IdempotencyKey is the key sent with the provider create: the spec's, or
// one derived from the order (SPEC §12.1): the namespace, the provider, the
// merchant reference and the object's name. It never depends on the UID, so
// the same manifest deleted and applied again, re-synced by GitOps or
// restored from a backup sends the same key, and the provider replays the
// first answer instead of charging again. The name tells a new attempt at an
// order (a new Payment after a decline) from the same attempt applied again.
func (p *Payment) IdempotencyKey() string {
	if p.Spec.IdempotencyKey != "" {
		return p.Spec.IdempotencyKey
	}
	return "pw1-" + digest("payment", p.Namespace, p.Spec.ProviderRef.Name, p.MerchantRef(), p.Name)[:40]
}

// OrderIdentity is the ledger's key of the payment's order: the namespace,
// the provider and the merchant reference (one order, whatever the attempt).
func (p *Payment) OrderIdentity() string {
	return digest("order", p.Namespace, p.Spec.ProviderRef.Name, p.MerchantRef())[:32]
}

// RefundIdentity is the ledger's key of a Refund: its payment's order and
// its name.
func RefundIdentity(p *Payment, refundName string) string {
	return digest("refund", p.OrderIdentity(), refundName)[:32]
}

// digest hashes parts unambiguously (each is length-prefixed).
func digest(parts ...string) string {
	h := sha256.New()
	for _, s := range parts {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// FormatAmount renders minor units in major units with the currency, following
// the ISO 4217 exponent of internal/currency (the one table paywarden has):
// 1999 USD is "19.99 USD", 1999 JPY is "1999 JPY", 199900 HUF is "1999.00 HUF".
// An unknown code is shown with two decimals: this is a display string, and
// hiding the amount would help nobody.
func FormatAmount(value int64, currency string) string {
	exp, ok := iso4217.Exponent(currency)
	if !ok {
		exp = 2
	}
	return iso4217.FormatMinor(value, exp) + " " + currency
}

// WebhookEventName is the deterministic name of the inbox object for one
// provider event. Creating it is the dedup: a second copy of the event, by
// webhook or backfill, gets AlreadyExists.
func WebhookEventName(provider, eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return fmt.Sprintf("%s-%s", provider, hex.EncodeToString(sum[:])[:20])
}

// Defaults of the PaymentProvider spec (SPEC §3). The API server applies them
// through the CRD schema; the helpers below apply them again for objects built
// in code.
var (
	DefaultSchedule = []time.Duration{
		30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour,
	}
)

const (
	DefaultJitterPercent       = 10
	DefaultQueryTimeout        = 10 * time.Second
	DefaultQPS                 = 10
	DefaultBurst               = 20
	DefaultTolerance           = 5 * time.Minute
	DefaultMaxBodyBytes        = 1 << 20
	DefaultIdempotencyWindow   = 24 * time.Hour
	DefaultSweepInterval       = 15 * time.Minute
	DefaultOverdueAfter        = 15 * time.Minute
	DefaultBackfillInterval    = 10 * time.Minute
	DefaultBackfillOverlap     = 5 * time.Minute
	DefaultBackfillMaxLookback = 72 * time.Hour
	DefaultCircuitFailures     = 5
	DefaultCircuitOpenFor      = time.Minute
	DefaultWebhookRetention    = 96 * time.Hour
	DefaultFinalRetention      = 72 * time.Hour
	DefaultMaxUnreachable      = 72 * time.Hour
	DefaultKeyWindowMargin     = 10
)

// QuerySchedule is the effective status-query schedule.
func (s *PaymentProviderSpec) QuerySchedule() []time.Duration {
	if len(s.StatusQuery.Schedule) == 0 {
		return append([]time.Duration(nil), DefaultSchedule...)
	}
	out := make([]time.Duration, len(s.StatusQuery.Schedule))
	for i, d := range s.StatusQuery.Schedule {
		out[i] = d.Duration
	}
	return out
}

// JitterPercent is the effective schedule jitter in percent.
func (s *PaymentProviderSpec) JitterPercent() int32 {
	return int32Or(s.StatusQuery.Jitter, DefaultJitterPercent)
}

// QueryTimeout is the effective timeout of one provider call.
func (s *PaymentProviderSpec) QueryTimeout() time.Duration {
	return durationOr(s.StatusQuery.Timeout, DefaultQueryTimeout)
}

// RateLimit is the effective token bucket: calls per second and burst.
func (s *PaymentProviderSpec) RateLimit() (qps, burst int32) {
	return int32Or(s.StatusQuery.QPS, DefaultQPS), int32Or(s.StatusQuery.Burst, DefaultBurst)
}

// WebhookTolerance is the effective allowed clock skew of a webhook timestamp.
func (s *PaymentProviderSpec) WebhookTolerance() time.Duration {
	return durationOr(s.Webhook.Tolerance, DefaultTolerance)
}

// WebhookMaxBodyBytes is the effective webhook body cap.
func (s *PaymentProviderSpec) WebhookMaxBodyBytes() int64 {
	if s.Webhook.MaxBodyBytes == nil || *s.Webhook.MaxBodyBytes <= 0 {
		return DefaultMaxBodyBytes
	}
	return *s.Webhook.MaxBodyBytes
}

// KeyWindow is the effective idempotency window of the provider.
func (s *PaymentProviderSpec) KeyWindow() time.Duration {
	return durationOr(s.IdempotencyWindow, DefaultIdempotencyWindow)
}

// KeyWindowMarginPercent is the effective safety margin before the end of the
// idempotency window, in percent of it.
func (s *PaymentProviderSpec) KeyWindowMarginPercent() int32 {
	return int32Or(s.IdempotencyWindowMargin, DefaultKeyWindowMargin)
}

// MaxUnreachable is how long a payment waits for any answer from the provider
// before it gives up with ProviderUnreachable.
func (s *PaymentProviderSpec) MaxUnreachable() time.Duration {
	return durationOr(s.StatusQuery.MaxUnreachable, DefaultMaxUnreachable)
}

// SweepTiming is the effective sweep interval and overdue threshold.
func (s *PaymentProviderSpec) SweepTiming() (interval, overdueAfter time.Duration) {
	return durationOr(s.Sweep.Interval, DefaultSweepInterval), durationOr(s.Sweep.OverdueAfter, DefaultOverdueAfter)
}

// BackfillTiming is the effective backfill interval, overlap and lookback.
func (s *PaymentProviderSpec) BackfillTiming() (interval, overlap, maxLookback time.Duration) {
	return durationOr(s.Backfill.Interval, DefaultBackfillInterval),
		durationOr(s.Backfill.Overlap, DefaultBackfillOverlap),
		durationOr(s.Backfill.MaxLookback, DefaultBackfillMaxLookback)
}

// CircuitTiming is the effective failure threshold and open time of the breaker.
func (s *PaymentProviderSpec) CircuitTiming() (failures int32, openFor time.Duration) {
	return int32Or(s.CircuitBreaker.ConsecutiveFailures, DefaultCircuitFailures),
		durationOr(s.CircuitBreaker.OpenFor, DefaultCircuitOpenFor)
}

// WebhookEventRetention is how long inbox events are kept.
func (s *PaymentProviderSpec) WebhookEventRetention() time.Duration {
	return durationOr(s.Retention.WebhookEvents, DefaultWebhookRetention)
}

// FinalPaymentRetention is how long final Payments are kept after their last
// change (docs/capacity.md sizes it).
func (s *PaymentProviderSpec) FinalPaymentRetention() time.Duration {
	return durationOr(s.Retention.FinalPayments, DefaultFinalRetention)
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return def
	}
	return d.Duration
}

func int32Or(v *int32, def int32) int32 {
	if v == nil || *v < 0 {
		return def
	}
	return *v
}
