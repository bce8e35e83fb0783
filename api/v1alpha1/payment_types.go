package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Annotations an operator sets on a Payment (SPEC §2.4). Each value is acted on
// once; the value last acted on is remembered in status.actions.
const (
	// AnnotationRequery asks for a status query now and restarts the query
	// schedule; any new value triggers it. It also takes an Unknown payment back
	// into automatic handling.
	AnnotationRequery = AnnotationPrefix + "requery"
	// AnnotationResolve settles a payment by hand: Succeeded, Failed or Expired.
	AnnotationResolve = AnnotationPrefix + "resolve"
	// AnnotationResolveReason is the operator's reason for a resolve; it is
	// recorded in history.
	AnnotationResolveReason = AnnotationPrefix + "resolve-reason"
	// AnnotationCapture captures an Authorized payment with captureMethod
	// Manual: "all" takes the whole authorized amount, a positive whole
	// number of minor units takes that much (a partial capture; the rest is
	// released). Anything else ("19.99", "600 USD", "1e2") is refused with a
	// CaptureRefused Warning Event and nothing is sent. Each new value is
	// acted on once; set before the payment is Authorized, it waits for it.
	AnnotationCapture = AnnotationPrefix + "capture"
	// AnnotationCancel cancels a payment that has not taken money (voids its
	// authorization, cancels the order at the provider); its value is the
	// reason. On a payment that took money it is refused with a Warning Event:
	// create a Refund instead.
	AnnotationCancel = AnnotationPrefix + "cancel"
)

// PaymentPhase is where a payment stands.
// +kubebuilder:validation:Enum=Pending;Processing;Authorized;Succeeded;Failed;Expired;Canceled;Unknown;PartiallyRefunded;Refunded
type PaymentPhase string

// The phases of a payment. Succeeded, Failed, Expired, Canceled,
// PartiallyRefunded and Refunded are final: only a refund, a dispute or an
// operator moves them.
const (
	PhasePending    PaymentPhase = "Pending"
	PhaseProcessing PaymentPhase = "Processing"
	// PhaseAuthorized: the money is reserved, not taken; a capture takes it,
	// a cancel releases it, and it expires uncaptured.
	PhaseAuthorized        PaymentPhase = "Authorized"
	PhaseSucceeded         PaymentPhase = "Succeeded"
	PhaseFailed            PaymentPhase = "Failed"
	PhaseExpired           PaymentPhase = "Expired"
	PhaseCanceled          PaymentPhase = "Canceled"
	PhaseUnknown           PaymentPhase = "Unknown"
	PhasePartiallyRefunded PaymentPhase = "PartiallyRefunded"
	PhaseRefunded          PaymentPhase = "Refunded"
)

// IsFinal reports whether the provider (or an operator) has settled the payment.
func (p PaymentPhase) IsFinal() bool {
	switch p {
	case PhaseSucceeded, PhaseFailed, PhaseExpired, PhaseCanceled, PhasePartiallyRefunded, PhaseRefunded:
		return true
	}
	return false
}

// TookMoney reports whether the payment took the payer's money (it may
// since have been refunded).
func (p PaymentPhase) TookMoney() bool {
	switch p {
	case PhaseSucceeded, PhasePartiallyRefunded, PhaseRefunded:
		return true
	}
	return false
}

// ObservationSource says which channel an observation came through.
// +kubebuilder:validation:Enum=Create;Webhook;StatusQuery;Backfill;Sweep;Manual;Authorize;Capture;Cancel;Ledger
type ObservationSource string

// The channels that feed the state machine (SPEC §0), and the answers of the
// money-moving calls on an existing payment.
const (
	SourceCreate      ObservationSource = "Create"
	SourceWebhook     ObservationSource = "Webhook"
	SourceStatusQuery ObservationSource = "StatusQuery"
	SourceBackfill    ObservationSource = "Backfill"
	SourceSweep       ObservationSource = "Sweep"
	SourceManual      ObservationSource = "Manual"
	SourceAuthorize   ObservationSource = "Authorize"
	SourceCapture     ObservationSource = "Capture"
	SourceCancel      ObservationSource = "Cancel"
	// SourceLedger: the outcome of an earlier object of the same order (or
	// refund), kept in paywarden's ledger after that object was deleted.
	SourceLedger ObservationSource = "Ledger"
)

// FinalizerMoneyInFlight holds a Payment or Refund whose money-moving call
// may have gone out: it is removed once the object is settled and its
// identity and outcome are in the ledger (SPEC §12.1).
const FinalizerMoneyInFlight = AnnotationPrefix + "money-in-flight"

// AnnotationMoneyUID is the UID of the object that put the money-in-flight
// finalizer on: a copy restored without status (from a backup, or an export
// applied again) carries another object's UID and is looked up at the
// provider before anything is created.
const AnnotationMoneyUID = AnnotationPrefix + "money-uid"

// AnnotationLedgerIdentity, on a Refund, is the ledger identity it is
// remembered under once settled and deleted (its Payment may be gone then).
const AnnotationLedgerIdentity = AnnotationPrefix + "ledger-identity"

// Condition types on a Payment.
const (
	// ConditionReady is True when the payment is settled in a final phase and
	// needs nothing more from anyone.
	ConditionReady = "Ready"
	// ConditionNeedsReview is True when a human must look at the payment; its
	// reason says why. Only a Manual action clears it.
	ConditionNeedsReview = "NeedsReview"
	// ConditionDisputed is True once the provider reported a dispute.
	ConditionDisputed = "Disputed"
	// ConditionFundsGuaranteed is False (reason HonorPeriodEnded) once an
	// Authorized payment is past status.fundsGuaranteedUntil uncaptured: the
	// money is still reserved, but a capture may be declined. It is removed
	// when the payment leaves Authorized.
	ConditionFundsGuaranteed = "FundsGuaranteed"
)

// Reasons of the NeedsReview condition (SPEC §2, §11). The first four below
// are raised by paywarden itself when it cannot settle a payment
// automatically; AmountMismatch, ConflictingStatus, LateSuccess and
// DuplicatePayment report something the provider did that a human must judge,
// and a reason paywarden raises itself never replaces them.
const (
	ReasonRetriesExhausted       = "RetriesExhausted"
	ReasonAmountMismatch         = "AmountMismatch"
	ReasonConflictingStatus      = "ConflictingStatus"
	ReasonLateSuccess            = "LateSuccess"
	ReasonCreateOutcomeUnknown   = "CreateOutcomeUnknown"
	ReasonNonRetryableQueryError = "NonRetryableQueryError"
	// ReasonProviderUnreachable: the provider gave no answer at all for
	// statusQuery.maxUnreachable.
	ReasonProviderUnreachable = "ProviderUnreachable"
	// ReasonDuplicatePayment: the provider reported a payment id other than
	// the one recorded for this order (a possible double charge), or another
	// Payment already uses this merchant reference.
	ReasonDuplicatePayment = "DuplicatePayment"
	// ReasonCaptureRefused: the provider refused paywarden's automatic capture
	// (or authorization) of an approved payment; a human decides.
	ReasonCaptureRefused = "CaptureRefused"
)

// Other reasons used on conditions, failures and history entries.
const (
	ReasonCreateRejected = "CreateRejected"
	// ReasonAmountNotRepresentable is the failure code of a payment whose
	// amount the provider cannot represent (e.g. HUF with fillér on PayPal);
	// it is refused before any call.
	ReasonAmountNotRepresentable = "AmountNotRepresentable"
	ReasonUnpaidTimeout          = "UnpaidTimeout"
	ReasonSettled                = "Settled"
	ReasonInProgress             = "InProgress"
	ReasonResolved               = "ResolvedManually"
	ReasonReviewed               = "Reviewed"
	ReasonDisputeOpened          = "DisputeOpened"
	// ReasonDisputeWon: a dispute ended in the merchant's favour.
	ReasonDisputeWon = "DisputeWon"
	// ReasonDisputeLost: the payer won a dispute and the provider took the
	// disputed money back; a NeedsReview reason (the payment reads
	// Succeeded, but the money is gone: a human settles the order).
	ReasonDisputeLost = "DisputeLost"
	// ReasonAuthorizationExpired: an authorization ended uncaptured.
	ReasonAuthorizationExpired = "AuthorizationExpired"
	// ReasonCanceledByOperator: canceled through the cancel annotation.
	ReasonCanceledByOperator = "CanceledByOperator"
	// ReasonRefundReversed: a refund the provider had reported succeeded
	// failed afterwards (Stripe: the refund's status goes succeeded →
	// failed and its balance transaction is reversed); the money is back
	// with the merchant, the Refund is Failed and the payment's refunded
	// total goes down.
	ReasonRefundReversed = "RefundReversed"
	// ReasonHonorPeriodEnded: an Authorized payment is past the time until
	// which the provider guarantees its funds (PayPal's 3-day honor period),
	// uncaptured (condition FundsGuaranteed=False, a Warning Event).
	ReasonHonorPeriodEnded = "HonorPeriodEnded"
	// ReasonOrderExpired: the provider deleted the order nobody completed at
	// the end of its lifetime (PayPal: about 3 hours) and answers "not found"
	// for it; no money moved.
	ReasonOrderExpired = "OrderExpired"
	// ReasonWebhookEventExpired (an Event only): a webhook event that waited
	// for the payment (news about money it had not taken yet) was deleted
	// past the provider's retention.webhookEvents without being applied.
	ReasonWebhookEventExpired = "WebhookEventExpired"
)

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// name of the referenced object in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// Amount is a positive amount of money in minor units.
type Amount struct {
	// value in minor units of the currency (cents for USD, yen for JPY). Must be
	// greater than zero.
	// +kubebuilder:validation:Minimum=1
	// +required
	Value int64 `json:"value"`
	// currency is the ISO 4217 code, in upper case (e.g. USD, EUR, JPY).
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	// +required
	Currency string `json:"currency"`
}

// Money is an amount of money in minor units that may be zero (a refunded total,
// an amount received).
type Money struct {
	// value in minor units of the currency.
	// +kubebuilder:validation:Minimum=0
	Value int64 `json:"value"`
	// currency is the ISO 4217 code, in upper case.
	// +kubebuilder:validation:Pattern=`^[A-Z]{3}$`
	Currency string `json:"currency"`
}

// PaymentSpec is what the platform team asks for. It is immutable once created:
// a payment cannot change amount, currency or provider after the fact.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable after creation; create a new Payment instead"
// +kubebuilder:validation:XValidation:rule="!(has(self.checkout) && has(self.paymentMethod))",message="set checkout (the payer approves at the provider) or paymentMethod (a server-side charge), not both"
type PaymentSpec struct {
	// providerRef names the PaymentProvider, in the same namespace, that takes
	// this payment.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="providerRef is immutable"
	// +required
	ProviderRef LocalObjectReference `json:"providerRef"`

	// amount to collect, in minor units, with its currency.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="amount and currency are immutable"
	// +required
	Amount Amount `json:"amount"`

	// merchantReference is the merchant order number sent to the provider
	// (KukoPay out_trade_no, PayPal invoice_id/custom_id). Defaults to
	// "<namespace>.<name>" (shortened with a hash suffix when that exceeds 64
	// characters).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +optional
	MerchantReference string `json:"merchantReference,omitempty"`

	// idempotencyKey is sent as the provider's idempotency header on create, so
	// a retried create never makes a second payment. Defaults to "pw1-" and a
	// hash of the namespace, the provider, the merchant reference and the
	// name (never metadata.uid), so the same manifest applied again sends the
	// same key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`

	// description is forwarded to the provider.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`

	// metadata is forwarded to the provider as key/value pairs.
	// +kubebuilder:validation:MaxProperties=50
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`

	// providerPaymentID, when set, makes paywarden track a payment that was
	// created elsewhere (a checkout page, say) instead of creating one: it never
	// calls the provider's create for this Payment.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	ProviderPaymentID string `json:"providerPaymentID,omitempty"`

	// expiresAfter closes out a payment that is still unpaid this long after
	// creation: after one fresh status query confirms it is not paid, the phase
	// becomes Expired with reason UnpaidTimeout. Go duration syntax (e.g. "30m").
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +optional
	ExpiresAfter *metav1.Duration `json:"expiresAfter,omitempty"`

	// captureMethod says when the money is taken: Automatic (the default)
	// captures as soon as the provider reports the payment approved or
	// authorized; Manual waits in phase Authorized for the
	// payments.paywarden.dev/capture annotation. A payment that only tracks
	// spec.providerPaymentID (created elsewhere) always waits for the
	// annotation: paywarden never takes money it was not asked to take.
	// +kubebuilder:validation:Enum=Automatic;Manual
	// +kubebuilder:default=Automatic
	// +optional
	CaptureMethod CaptureMethod `json:"captureMethod,omitempty"`

	// checkout is where the provider sends the payer back from its hosted
	// page. Set it when the payer approves the payment at the provider;
	// status.customerAction then holds the link to send the payer to.
	// +optional
	Checkout *CheckoutSpec `json:"checkout,omitempty"`

	// paymentMethod charges a payment method the provider already holds,
	// without the payer (a server-side charge). Provider tokens only: card
	// numbers are refused.
	// +optional
	PaymentMethod *PaymentMethodRef `json:"paymentMethod,omitempty"`
}

// CaptureMethod says when an authorized payment's money is taken.
type CaptureMethod string

// Capture methods.
const (
	CaptureAutomatic CaptureMethod = "Automatic"
	CaptureManual    CaptureMethod = "Manual"
)

// CheckoutSpec is where the provider sends the payer back.
type CheckoutSpec struct {
	// returnURL is where the payer lands after approving. https, or http on
	// localhost for development.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getHostname() != '' && (self.startsWith('https://') || self.matches('^http://(localhost|127[.]0[.]0[.]1)(:[0-9]+)?(/.*)?$'))",message="returnURL must be an https URL (http is allowed for localhost)"
	// +required
	ReturnURL string `json:"returnURL"`
	// cancelURL is where the payer lands after giving up. Same rules.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getHostname() != '' && (self.startsWith('https://') || self.matches('^http://(localhost|127[.]0[.]0[.]1)(:[0-9]+)?(/.*)?$'))",message="cancelURL must be an https URL (http is allowed for localhost)"
	// +optional
	CancelURL string `json:"cancelURL,omitempty"`
}

// PaymentMethodRef names a stored payment method by the provider's tokens.
type PaymentMethodRef struct {
	// customer is the provider's customer id (e.g. cus_...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.:-]+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{12,19}$')",message="customer must be a provider token, never a card number"
	// +optional
	Customer string `json:"customer,omitempty"`
	// paymentMethod is the provider's payment-method token (e.g. pm_...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.:-]+$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]{12,19}$')",message="paymentMethod must be a provider token, never a card number"
	// +required
	PaymentMethod string `json:"paymentMethod"`
}

// Failure is the provider's reason for a failed payment.
type Failure struct {
	// code is the provider's or paywarden's failure code.
	// +optional
	Code string `json:"code,omitempty"`
	// message explains the failure for a human.
	// +optional
	Message string `json:"message,omitempty"`
}

// QueryStatus is the position in the status-query schedule. Everything the
// reconciler needs to resume after a restart lives here, nothing in memory.
type QueryStatus struct {
	// attempts is how many scheduled status queries have been made.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// lastTime is when the provider was last queried.
	// +optional
	LastTime *metav1.MicroTime `json:"lastTime,omitempty"`
	// nextTime is when the next status query is due. Empty when nothing is
	// scheduled (final phase, or Unknown waiting for an operator). Kept to the
	// microsecond: the schedule must never fire early because of rounding.
	// +optional
	NextTime *metav1.MicroTime `json:"nextTime,omitempty"`
	// lastError is the error of the last failed call; cleared by an answer.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// lastErrorClass says what lastError means for the payment: NoAnswer (a
	// transport error, timeout, 5xx or 429: retried at the same step),
	// ProviderConfig (the provider refused paywarden's credentials or route:
	// waits for the PaymentProvider to be fixed), KeyConflict (the provider
	// has a first request under the call's idempotency key: its outcome is
	// looked up), NotFound, Refused or Unsupported.
	// +kubebuilder:validation:Enum=NoAnswer;ProviderConfig;KeyConflict;NotFound;Refused;Unsupported
	// +optional
	LastErrorClass string `json:"lastErrorClass,omitempty"`
	// consecutiveErrors counts failed calls in a row.
	// +optional
	ConsecutiveErrors int32 `json:"consecutiveErrors,omitempty"`
	// unansweredSince is when the first call of the current run of calls that
	// got no answer (transport errors, timeouts, 5xx, 429) went out; cleared
	// by an answer. The payment gives up with ProviderUnreachable when it is
	// older than the provider's statusQuery.maxUnreachable.
	// +optional
	UnansweredSince *metav1.MicroTime `json:"unansweredSince,omitempty"`
}

// EventRef identifies the last observation applied to the payment.
type EventRef struct {
	// id of the provider event, when the observation had one.
	// +optional
	ID string `json:"id,omitempty"`
	// type is the provider's event type or the observation's normalized status.
	// +optional
	Type string `json:"type,omitempty"`
	// source is the channel the observation came through.
	// +optional
	Source ObservationSource `json:"source,omitempty"`
	// time the provider says the event occurred (or when it was observed).
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// HistoryEntry records one applied change of a payment.
type HistoryEntry struct {
	// time of the change.
	Time metav1.Time `json:"time"`
	// from is the phase before the change.
	// +optional
	From PaymentPhase `json:"from,omitempty"`
	// to is the phase after the change.
	To PaymentPhase `json:"to"`
	// source is the channel that brought the observation.
	Source ObservationSource `json:"source"`
	// eventID of the provider event, if any.
	// +optional
	EventID string `json:"eventID,omitempty"`
	// reason for the change, machine-readable first word, then detail.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ActionStatus remembers the operator actions already carried out, so each
// annotation value is acted on exactly once.
type ActionStatus struct {
	// requery is the last requery annotation value acted on.
	// +optional
	Requery string `json:"requery,omitempty"`
	// resolve is the last resolve annotation value acted on, with its reason.
	// +optional
	Resolve string `json:"resolve,omitempty"`
	// capture is the last capture annotation value acted on.
	// +optional
	Capture string `json:"capture,omitempty"`
	// cancel is the last cancel annotation value acted on.
	// +optional
	Cancel string `json:"cancel,omitempty"`
}

// RefundSummary is one Refund of a payment, for kubectl describe.
type RefundSummary struct {
	// name of the Refund.
	Name string `json:"name"`
	// amount of the refund, for display.
	// +optional
	Amount string `json:"amount,omitempty"`
	// phase of the Refund.
	// +optional
	Phase RefundPhase `json:"phase,omitempty"`
}

// CustomerAction is where the payer must go.
type CustomerAction struct {
	// url of the provider's page for the payer.
	// +optional
	URL string `json:"url,omitempty"`
	// expiresAt is when the link stops working, if the provider says.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// OperationKind is a money-moving call on an existing payment.
// +kubebuilder:validation:Enum=Authorize;Capture;Cancel
type OperationKind string

// Operation kinds.
const (
	OperationAuthorize OperationKind = "Authorize"
	OperationCapture   OperationKind = "Capture"
	OperationCancel    OperationKind = "Cancel"
)

// Operation is a money-moving call in progress.
type Operation struct {
	// kind of call.
	Kind OperationKind `json:"kind"`
	// requestedAt is when the operation was decided, before any call.
	RequestedAt metav1.Time `json:"requestedAt"`
	// lastAttemptAt is when the last call went out without an answer; the
	// outcome is then looked up before the call is repeated.
	// +optional
	LastAttemptAt *metav1.MicroTime `json:"lastAttemptAt,omitempty"`
	// retryAt is when the call may be tried again after an attempt without an
	// answer (its outcome is looked up first). The operation keeps its own
	// timing: it never moves the payment's status-query schedule.
	// +optional
	RetryAt *metav1.MicroTime `json:"retryAt,omitempty"`
	// attempts counts calls that went out without an answer.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// idempotencyKey is the key of this call, fixed with its marker: every
	// retry sends it, whatever version of paywarden makes the retry.
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// amount to capture (Capture); absent takes the whole authorized amount.
	// +optional
	Amount *Money `json:"amount,omitempty"`
	// reason given for a Cancel.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`
}

// PaymentStatus is paywarden's view of the payment at the provider. It is
// written only through the state machine in internal/payment.
type PaymentStatus struct {
	// phase is where the payment stands.
	// +optional
	Phase PaymentPhase `json:"phase,omitempty"`

	// amountDisplay is the amount in major units with its currency, as shown
	// by kubectl (e.g. "19.99 USD", "1999 JPY").
	// +optional
	AmountDisplay string `json:"amountDisplay,omitempty"`

	// providerPaymentID is the provider's id for this payment.
	// +optional
	ProviderPaymentID string `json:"providerPaymentID,omitempty"`

	// providerStatus is the provider's own status string, as last seen.
	// +optional
	ProviderStatus string `json:"providerStatus,omitempty"`

	// createRequestedAt is written before the provider's create is called: if
	// it is set without a providerPaymentID, a create may have happened and is
	// resolved with the same idempotency key, never repeated blindly.
	// +optional
	CreateRequestedAt *metav1.Time `json:"createRequestedAt,omitempty"`

	// idempotencyKey is the key of the create, fixed with createRequestedAt:
	// every retry sends it, whatever version of paywarden makes the retry.
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`

	// amountReceived is what the provider reports as paid.
	// +optional
	AmountReceived *Money `json:"amountReceived,omitempty"`

	// amountRefunded is the cumulative refunded amount, as the provider
	// reports it (refunds made by Refunds and elsewhere alike).
	// +optional
	AmountRefunded *Money `json:"amountRefunded,omitempty"`

	// amountRefundedDisplay is amountRefunded for kubectl (e.g. "5.00 USD").
	// +optional
	AmountRefundedDisplay string `json:"amountRefundedDisplay,omitempty"`

	// refunds are this payment's Refunds as of its last status write (at
	// most 20, oldest first; the oldest settled ones are dropped first): a
	// settled Refund is listed at once, one on its way with the payment's
	// next write.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Refunds []RefundSummary `json:"refunds,omitempty"`

	// refundsCounted are the UIDs of this payment's Refunds that succeeded
	// before amountRefunded was last read from the provider, so it counts
	// them. A Refund that succeeded and is not listed makes paywarden read
	// the provider's cumulative figure (again, on the schedule's backoff)
	// until it is.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	// +optional
	RefundsCounted []types.UID `json:"refundsCounted,omitempty"`

	// refundsReversed are the UIDs of this payment's Refunds that failed
	// after they had succeeded (RefundReversed) and that amountRefunded was
	// read without since. A reversed Refund not listed makes paywarden read
	// the provider's (lower) figure.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	// +optional
	RefundsReversed []types.UID `json:"refundsReversed,omitempty"`
	// refundsLoweredAt is up to when the provider's refunded total, read
	// after a refund failed (a refund may fail after it succeeded), answers
	// for every refund: the second before that read was sent. A refund event
	// that occurred before it (to the second) carries a total the read
	// answers for, and is stale.
	// +optional
	RefundsLoweredAt *metav1.Time `json:"refundsLoweredAt,omitempty"`
	// refundFailureSeenAt is when an event said a refund of the payment
	// failed, and no read of the provider's refunded total has followed yet:
	// the refund may have succeeded before (a Stripe refund can fail days
	// later), made in the provider's dashboard or by a Refund since deleted,
	// so that no Refund object stands for it. The next read may lower the
	// total; it clears this.
	// +optional
	RefundFailureSeenAt *metav1.Time `json:"refundFailureSeenAt,omitempty"`

	// failure explains a Failed payment.
	// +optional
	Failure *Failure `json:"failure,omitempty"`

	// query is the position in the status-query schedule.
	// +optional
	Query QueryStatus `json:"query,omitempty"`

	// expiredLocally is true when paywarden itself closed the payment out as
	// Expired (unpaid after spec.expiresAfter), as opposed to the provider.
	// +optional
	ExpiredLocally bool `json:"expiredLocally,omitempty"`

	// closeOutRefused is true when the provider refused to close the unpaid
	// payment past spec.expiresAfter: the next status query that still
	// finds it unpaid closes it out locally instead of asking again.
	// +optional
	CloseOutRefused bool `json:"closeOutRefused,omitempty"`

	// lastEvent is the last observation applied.
	// +optional
	LastEvent *EventRef `json:"lastEvent,omitempty"`

	// recentEventIDs are the ids of the last provider events seen (at most 16),
	// a second line of dedup behind the WebhookEvent inbox.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	RecentEventIDs []string `json:"recentEventIDs,omitempty"`

	// history of applied changes, oldest first, at most 20 entries.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	History []HistoryEntry `json:"history,omitempty"`

	// historyDropped counts history entries dropped to keep history bounded.
	// +optional
	HistoryDropped int32 `json:"historyDropped,omitempty"`

	// actions remembers operator annotations already acted on.
	// +optional
	Actions ActionStatus `json:"actions,omitempty"`

	// customerAction is where the payer must go to approve or complete the
	// payment, while the provider waits for them.
	// +optional
	CustomerAction *CustomerAction `json:"customerAction,omitempty"`

	// checkoutID is the provider's id of the checkout the payment belongs to
	// (a Stripe Checkout Session), when it differs from providerPaymentID.
	// +optional
	CheckoutID string `json:"checkoutID,omitempty"`

	// captureID is the provider's id of the capture that took the money,
	// where refunds name the capture instead of the payment (PayPal); read
	// with the payment's success, it spares a refund reading the payment for
	// it first.
	// +optional
	CaptureID string `json:"captureID,omitempty"`

	// payerApproved is true once the payer approved at the provider and the
	// merchant's call is due: the capture (captureMethod Automatic) or the
	// authorization (Manual, at providers with an authorize step).
	// +optional
	PayerApproved bool `json:"payerApproved,omitempty"`

	// fundingDeclines counts the times the provider declined the payer's
	// funding source at the capture (or authorization) of the approved
	// payment and sent the payer back to approve again with another one
	// (PayPal INSTRUMENT_DECLINED). Each capture or authorization after such a
	// new approval is a new attempt with its own idempotency key:
	// <idempotencyKey>/capture/<fundingDeclines+1>.
	// +optional
	FundingDeclines int32 `json:"fundingDeclines,omitempty"`

	// operationsRefused counts the operations (capture, cancel,
	// authorization) the provider refused. An operation asked for after a
	// refusal is a new attempt, not a retry of the refused one, and has its
	// own idempotency key: <idempotencyKey>/<operation>/<n+1>, n counting the
	// refusals and, for a capture or authorization, fundingDeclines.
	// +optional
	OperationsRefused int32 `json:"operationsRefused,omitempty"`

	// amountAuthorized is the amount reserved by the authorization.
	// +optional
	AmountAuthorized *Money `json:"amountAuthorized,omitempty"`

	// authorizationExpiresAt is when the authorization ends uncaptured.
	// +optional
	AuthorizationExpiresAt *metav1.Time `json:"authorizationExpiresAt,omitempty"`

	// fundsGuaranteedUntil is when the provider stops guaranteeing the
	// authorized funds (PayPal: the 3-day honor period of its 29-day
	// authorization): a capture after it may be declined although the
	// authorization is valid until authorizationExpiresAt. Absent: the funds
	// are held until authorizationExpiresAt.
	// +optional
	FundsGuaranteedUntil *metav1.Time `json:"fundsGuaranteedUntil,omitempty"`

	// amountToCapture is what the capture asked for (a partial capture takes
	// less than the amount); the provider's success is checked against it.
	// +optional
	AmountToCapture *Money `json:"amountToCapture,omitempty"`

	// operation is the money-moving call in progress (authorize, capture,
	// cancel). It is written before the call, so after a crash the outcome is
	// looked up before the call is repeated with the same idempotency key.
	// +optional
	Operation *Operation `json:"operation,omitempty"`

	// waitingFor says, in a word, what the payment waits for, for kubectl:
	// Payer, Capture, Cancel, Authorize, Review:<reason>.
	// +optional
	WaitingFor string `json:"waitingFor,omitempty"`

	// conditions: Ready, NeedsReview, Disputed.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// adoptedAt is set when this object took over the outcome of an earlier
	// object of the same order (deleted, retained away or restored without
	// status) instead of being created at the provider again. An adopted
	// payment is not deleted by retention: whoever re-applied it keeps it.
	// +optional
	AdoptedAt *metav1.Time `json:"adoptedAt,omitempty"`

	// closed is set, in the same write, once the payment has nothing left to
	// do on its own (payment.Closable): settled, nothing scheduled or in
	// flight, no review, no open dispute. The manager and the receiver keep
	// only open payments in their caches; a closed one is read from the API
	// server when an event, a Refund, an annotation or its deletion needs
	// it, and opens again as soon as it has work. Set by paywarden only.
	// +optional
	Closed bool `json:"closed,omitempty"`
}

// FieldClosed is the selectable field of a Payment's status.closed: the
// caches select "status.closed!=true" (open) or "status.closed=true".
const FieldClosed = "status.closed"

// Payment is one payment at a provider, driven to the provider's final answer.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pay,categories=paywarden
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:selectablefield:JSONPath=".status.closed"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Amount",type=string,JSONPath=".status.amountDisplay"
// +kubebuilder:printcolumn:name="Refunded",type=string,JSONPath=".status.amountRefundedDisplay"
// +kubebuilder:printcolumn:name="Waiting-For",type=string,JSONPath=".status.waitingFor"
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=".spec.providerRef.name"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Provider-ID",type=string,JSONPath=".status.providerPaymentID",priority=1
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=".status.query.attempts",priority=1
// +kubebuilder:printcolumn:name="Next-Query",type=date,JSONPath=".status.query.nextTime",priority=1
// +kubebuilder:printcolumn:name="Payer-Link",type=string,JSONPath=".status.customerAction.url",priority=1
// +kubebuilder:printcolumn:name="Funds-Guaranteed-Until",type=date,JSONPath=".status.fundsGuaranteedUntil",priority=1
type Payment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the payment asked for; immutable.
	// +required
	Spec PaymentSpec `json:"spec"`

	// status is paywarden's view of the payment at the provider.
	// +optional
	Status PaymentStatus `json:"status,omitempty"`
}

// PaymentList is a list of Payments.
//
// +kubebuilder:object:root=true
type PaymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Payment `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Payment{}, &PaymentList{})
}
