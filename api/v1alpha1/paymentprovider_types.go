package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ProviderType selects the provider adapter.
// +kubebuilder:validation:Enum=kukopay;paypal;generic;stripe
type ProviderType string

// The provider types paywarden speaks (SPEC §4).
const (
	ProviderKukoPay ProviderType = "kukopay"
	ProviderPayPal  ProviderType = "paypal"
	ProviderGeneric ProviderType = "generic"
	ProviderStripe  ProviderType = "stripe"
)

// Condition types on a PaymentProvider.
const (
	// ConditionDegraded is True while the provider's circuit breaker is open.
	ConditionDegraded = "Degraded"
)

// CircuitState is the state of a provider's circuit breaker.
// +kubebuilder:validation:Enum=Closed;Open;HalfOpen
type CircuitState string

// Circuit breaker states.
const (
	CircuitClosed   CircuitState = "Closed"
	CircuitOpen     CircuitState = "Open"
	CircuitHalfOpen CircuitState = "HalfOpen"
)

// SecretReference names a Secret in the provider's namespace.
type SecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// WebhookConfig says how webhooks from this provider are verified.
type WebhookConfig struct {
	// signingSecretRef names a Secret whose every key is an active signing
	// secret: rotate by adding a key, and remove the old key later.
	// +optional
	SigningSecretRef *SecretReference `json:"signingSecretRef,omitempty"`
	// tolerance is how far a webhook timestamp may be from now, in either
	// direction, before it is rejected as a replay.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Tolerance *metav1.Duration `json:"tolerance,omitempty"`
	// maxBodyBytes caps a webhook body; larger requests get 413.
	// +kubebuilder:default=1048576
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=16777216
	// +optional
	MaxBodyBytes *int64 `json:"maxBodyBytes,omitempty"`
	// paypalWebhookID is the webhook id PayPal assigned; required to verify
	// PayPal webhooks.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	PayPalWebhookID string `json:"paypalWebhookID,omitempty"`
}

// StatusQueryConfig shapes the per-payment status-query schedule.
type StatusQueryConfig struct {
	// schedule is the list of delays between status queries; when it is
	// exhausted and the payment is not final, the payment becomes Unknown with
	// NeedsReview=RetriesExhausted. Default 30s,1m,2m,5m,15m,1h.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:Type=string
	// +kubebuilder:validation:items:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +listType=atomic
	// +optional
	Schedule []metav1.Duration `json:"schedule,omitempty"`
	// jitter spreads each delay by up to ± this percentage, so payments
	// created together do not query together.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Jitter *int32 `json:"jitter,omitempty"`
	// timeout of one provider call.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// qps is the steady rate of calls to this provider, shared by every
	// payment (a token bucket).
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +optional
	QPS *int32 `json:"qps,omitempty"`
	// burst is the token bucket's size.
	// +kubebuilder:default=20
	// +kubebuilder:validation:Minimum=1
	// +optional
	Burst *int32 `json:"burst,omitempty"`
	// maxUnreachable is how long a payment keeps waiting while the provider
	// gives no answer at all (transport errors, timeouts, 5xx, 429) before it
	// becomes Unknown with NeedsReview=ProviderUnreachable. Calls that get no
	// answer never consume schedule attempts. Longer than any provider's
	// webhook redelivery window, so a webhook can still settle it.
	// +kubebuilder:default="72h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	MaxUnreachable *metav1.Duration `json:"maxUnreachable,omitempty"`
}

// SweepConfig shapes the overdue sweep, the safety net for lost requeues.
type SweepConfig struct {
	// interval between sweeps.
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// overdueAfter is how far past its query.nextTime a payment must be to
	// count as overdue.
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	OverdueAfter *metav1.Duration `json:"overdueAfter,omitempty"`
}

// BackfillConfig shapes the events-API backfill (every provider type: kukopay,
// generic, stripe and paypal).
type BackfillConfig struct {
	// enabled turns the backfill on.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// interval between backfill runs.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Interval *metav1.Duration `json:"interval,omitempty"`
	// overlap re-reads this much before the cursor, to catch events the
	// provider recorded late.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	Overlap *metav1.Duration `json:"overlap,omitempty"`
	// maxLookback bounds how far back a run reads.
	// +kubebuilder:default="72h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	MaxLookback *metav1.Duration `json:"maxLookback,omitempty"`
}

// CircuitBreakerConfig shapes the per-provider circuit breaker.
type CircuitBreakerConfig struct {
	// consecutiveFailures (transport errors or 5xx) that open the circuit.
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +optional
	ConsecutiveFailures *int32 `json:"consecutiveFailures,omitempty"`
	// openFor is how long the circuit stays open before one probe is let through.
	// +kubebuilder:default="1m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	OpenFor *metav1.Duration `json:"openFor,omitempty"`
}

// RetentionConfig says how long paywarden keeps what it has settled.
type RetentionConfig struct {
	// webhookEvents are deleted this long after they were received; longer than
	// any provider's redelivery window (3 days) and the backfill's default
	// maxLookback (72h), so a redelivered or re-read event is still a
	// duplicate.
	// +kubebuilder:default="96h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	WebhookEvents *metav1.Duration `json:"webhookEvents,omitempty"`
	// finalPayments deletes Payments this long after their last change in a
	// final phase (a refund or a dispute restarts the clock); never one with
	// NeedsReview=True or with a Refund in flight. The default outlasts every
	// provider's redelivery window and keeps 100 000 payments a day within
	// etcd's room (docs/capacity.md); keep them longer only with the room for
	// it, or archive them first.
	// +kubebuilder:default="72h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	FinalPayments *metav1.Duration `json:"finalPayments,omitempty"`
}

// PaymentProviderSpec configures one provider account.
type PaymentProviderSpec struct {
	// type of provider API.
	// +required
	Type ProviderType `json:"type"`
	// apiURL is the base URL of the provider's API.
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	// +kubebuilder:validation:MaxLength=2048
	// +required
	APIURL string `json:"apiURL"`
	// credentialsSecretRef names the Secret with the API credentials (kukopay:
	// apiKey; paypal: clientID and clientSecret; generic: token; stripe: secretKey).
	// +required
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef"`
	// webhook verification settings.
	// +kubebuilder:default={}
	// +optional
	Webhook WebhookConfig `json:"webhook,omitempty"`
	// statusQuery shapes the per-payment status-query schedule.
	// +kubebuilder:default={}
	// +optional
	StatusQuery StatusQueryConfig `json:"statusQuery,omitempty"`
	// idempotencyWindow is how long the provider replays a create for the same
	// idempotency key; past it, paywarden looks a payment up by merchant
	// reference instead of repeating the create. Unset: the window the
	// provider type documents (paypal: 6h), else 24h.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	IdempotencyWindow *metav1.Duration `json:"idempotencyWindow,omitempty"`
	// orderLifetime is how long the provider keeps a payment nobody completed
	// (paypal: an order not approved, or approved and neither captured nor
	// authorized) before it deletes it; a "not found" for such a payment after
	// it is the provider's word that it expired unpaid (Expired, reason
	// OrderExpired). Unset: what the provider type documents (paypal: 3h, the
	// default PayPal names); set it when the account keeps orders for another
	// time. Ignored by types that keep such payments.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	OrderLifetime *metav1.Duration `json:"orderLifetime,omitempty"`
	// idempotencyWindowMargin is the safety margin, in percent of
	// idempotencyWindow, before the window ends at which paywarden stops
	// repeating a create and looks the payment up instead: a late retry from a
	// replica with a skewed clock must not reach a provider that has forgotten
	// the key.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=90
	// +optional
	IdempotencyWindowMargin *int32 `json:"idempotencyWindowMargin,omitempty"`
	// sweep shapes the overdue sweep.
	// +kubebuilder:default={}
	// +optional
	Sweep SweepConfig `json:"sweep,omitempty"`
	// backfill shapes the events-API backfill.
	// +kubebuilder:default={}
	// +optional
	Backfill BackfillConfig `json:"backfill,omitempty"`
	// circuitBreaker shapes the circuit breaker.
	// +kubebuilder:default={}
	// +optional
	CircuitBreaker CircuitBreakerConfig `json:"circuitBreaker,omitempty"`
	// retention says how long settled objects are kept.
	// +kubebuilder:default={}
	// +optional
	Retention RetentionConfig `json:"retention,omitempty"`
}

// CircuitStatus mirrors the provider's circuit breaker.
type CircuitStatus struct {
	// state of the breaker.
	// +optional
	State CircuitState `json:"state,omitempty"`
	// openedAt is when the breaker last opened.
	// +optional
	OpenedAt *metav1.Time `json:"openedAt,omitempty"`
	// consecutiveFailures counted so far.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
}

// BackfillStatus is the events-API backfill's position.
type BackfillStatus struct {
	// lastRunTime is when the last backfill run finished.
	// +optional
	LastRunTime *metav1.Time `json:"lastRunTime,omitempty"`
	// cursor is the time up to which every event has been durably written to
	// the inbox; the next run reads from cursor minus overlap.
	// +optional
	Cursor *metav1.Time `json:"cursor,omitempty"`
	// eventsSeen counts events read by backfill runs.
	// +optional
	EventsSeen int64 `json:"eventsSeen,omitempty"`
	// progress is a run of a newest-first events API (Stripe, PayPal) that has
	// not read every page yet: the next run resumes it, and the cursor moves
	// only once it has read its last page.
	// +optional
	Progress *BackfillProgress `json:"progress,omitempty"`
}

// BackfillProgress is where an unfinished backfill run stopped.
type BackfillProgress struct {
	// since is the start of the run's window: events created at or after it.
	Since metav1.Time `json:"since"`
	// oneOff is the backfill-from value the run serves; empty for a periodic run.
	// +optional
	OneOff string `json:"oneOff,omitempty"`
	// pageCursor is the provider's cursor of the first page not read yet;
	// empty: the run starts again from its first page.
	// +optional
	PageCursor string `json:"pageCursor,omitempty"`
	// newest is the time (to the second) of the newest event the run has
	// stored; the cursor moves to it when the run completes.
	// +optional
	Newest *metav1.Time `json:"newest,omitempty"`
}

// PaymentProviderStatus is the observed state of a provider account.
type PaymentProviderStatus struct {
	// conditions: Ready (credentials and secrets resolvable), Degraded (circuit open).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// circuit mirrors the circuit breaker.
	// +optional
	Circuit CircuitStatus `json:"circuit,omitempty"`
	// backfill is the events-API backfill's position.
	// +optional
	Backfill BackfillStatus `json:"backfill,omitempty"`
	// webhookPath is the receiver path this provider's webhooks go to:
	// /webhooks/<namespace>/<name>.
	// +optional
	WebhookPath string `json:"webhookPath,omitempty"`
	// observedGeneration is the generation last validated.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Annotations of a one-off backfill (the "replay after an outage" runbook).
const (
	// AnnotationBackfillFrom, set on a PaymentProvider to an RFC 3339 time,
	// replays the provider's events from that time once, whether or not
	// spec.backfill.enabled is set.
	AnnotationBackfillFrom = AnnotationPrefix + "backfill-from"
	// AnnotationBackfillFromDone is written by paywarden with the
	// backfill-from value it has acted on, so each value runs exactly once;
	// setting backfill-from to a new value runs again.
	AnnotationBackfillFromDone = AnnotationPrefix + "backfill-from-done"
)

// ConditionBackfill reports the events-API backfill of a PaymentProvider:
// True after a complete run, False with the reason when a run could not
// complete or the provider type has no events API.
const ConditionBackfill = "Backfill"

// Reasons of the Backfill condition.
const (
	ReasonBackfillSynced      = "Synced"
	ReasonBackfillUnsupported = "Unsupported"
	ReasonBackfillUnavailable = "ProviderUnavailable"
	ReasonBackfillDeferred    = "Deferred"
	ReasonBackfillListFailed  = "ListFailed"
	ReasonBackfillWriteFailed = "WriteFailed"
)

// MaxPaymentProviderNameLength is the longest PaymentProvider name: its
// WebhookEvents are named "<provider>-<20 hex>" (WebhookEventName), and that
// must fit the 253-character object-name limit: 253 - 1 - 20 = 232.
const MaxPaymentProviderNameLength = 232

// PaymentProvider is one account at a payment provider: where its API is, its
// credentials, how its webhooks are verified and how hard paywarden may call it.
//
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 232",message="metadata.name must be at most 232 characters: the provider's WebhookEvents are named <name>-<20 hex characters>, and object names are limited to 253"
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=payprov,categories=paywarden
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=".spec.type"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Circuit",type=string,JSONPath=".status.circuit.state"
// +kubebuilder:printcolumn:name="Webhook-Path",type=string,JSONPath=".status.webhookPath",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type PaymentProvider struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec configures the provider account.
	// +required
	Spec PaymentProviderSpec `json:"spec"`

	// status is the observed state of the provider account.
	// +optional
	Status PaymentProviderStatus `json:"status,omitempty"`
}

// PaymentProviderList is a list of PaymentProviders.
//
// +kubebuilder:object:root=true
type PaymentProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PaymentProvider `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PaymentProvider{}, &PaymentProviderList{})
}
