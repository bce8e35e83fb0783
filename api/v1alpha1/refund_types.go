package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RefundPhase is where a refund stands. Succeeded and Failed are final.
// +kubebuilder:validation:Enum=Pending;Processing;Succeeded;Failed;Unknown
type RefundPhase string

// The phases of a refund.
const (
	// RefundPending: not at the provider yet (it may wait for its payment, see
	// status.waitingFor), or accepted and not yet processed.
	RefundPending    RefundPhase = "Pending"
	RefundProcessing RefundPhase = "Processing"
	RefundSucceeded  RefundPhase = "Succeeded"
	RefundFailed     RefundPhase = "Failed"
	// RefundUnknown: paywarden cannot settle it automatically; NeedsReview
	// says why.
	RefundUnknown RefundPhase = "Unknown"
)

// IsFinal reports whether the refund is settled.
func (p RefundPhase) IsFinal() bool {
	return p == RefundSucceeded || p == RefundFailed
}

// Reasons a Refund waits or is refused before any call (status.waitingFor,
// failure codes).
const (
	// ReasonPaymentNotFound: the Payment named by spec.paymentRef does not exist (yet).
	ReasonPaymentNotFound = "PaymentNotFound"
	// ReasonPaymentNotSucceeded: the payment has not taken the money yet;
	// the refund waits for it.
	ReasonPaymentNotSucceeded = "PaymentNotSucceeded"
	// ReasonPaymentNotPaid: the payment ended without taking money; there is
	// nothing to refund.
	ReasonPaymentNotPaid = "PaymentNotPaid"
	// ReasonOverRefund: with the refunds before it, this one would return
	// more than the payment received.
	ReasonOverRefund = "OverRefund"
	// ReasonRefundsNotSupported: the provider type cannot refund.
	ReasonRefundsNotSupported = "RefundsNotSupported"
	// ReasonEarlierRefundUndecided: a Refund of the same payment created
	// earlier has no amount yet; this one waits so they are counted in order.
	ReasonEarlierRefundUndecided = "EarlierRefundUndecided"
	// ReasonEarlierRefundInFlight: the payment's refunded total, as the
	// provider reports it, may already count a Refund of the same payment
	// that is still in flight; this one waits until that Refund settles, so
	// it is counted once and a refund that fits is not refused.
	ReasonEarlierRefundInFlight = "EarlierRefundInFlight"
)

// RefundSpec is the refund asked for. It is immutable once created.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable after creation; create a new Refund instead"
type RefundSpec struct {
	// paymentRef names the Payment refunded, in the same namespace.
	// +required
	PaymentRef LocalObjectReference `json:"paymentRef"`
	// amount to refund, in minor units of the payment's currency. Omitted
	// refunds everything still refundable when the refund is decided.
	// +optional
	Amount *Amount `json:"amount,omitempty"`
	// reason is recorded and forwarded to the provider where it takes one.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Reason string `json:"reason,omitempty"`
	// idempotencyKey is sent as the provider's idempotency header, so a
	// retried refund is never made twice. Defaults to one derived from the
	// payment's idempotency key and this Refund's metadata.uid, never the
	// uid alone. Like merchant references, values must be unique.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// RefundStatus is paywarden's view of the refund at the provider, written
// only through the refund state machine in internal/payment.
type RefundStatus struct {
	// phase is where the refund stands.
	// +optional
	Phase RefundPhase `json:"phase,omitempty"`
	// amount is the amount refunded (or to be), fixed when the refund was
	// decided (spec.amount, or what was still refundable then).
	// +optional
	Amount *Money `json:"amount,omitempty"`
	// amountDisplay is the amount in major units with its currency, for kubectl.
	// +optional
	AmountDisplay string `json:"amountDisplay,omitempty"`
	// waitingFor says why a Pending refund has not been sent: the payment
	// (PaymentNotFound, PaymentNotSucceeded) or an earlier Refund
	// (EarlierRefundUndecided, EarlierRefundInFlight).
	// +optional
	WaitingFor string `json:"waitingFor,omitempty"`
	// providerPaymentID is the provider's id of the payment refunded.
	// +optional
	ProviderPaymentID string `json:"providerPaymentID,omitempty"`
	// providerRefundID is the provider's id of the refund.
	// +optional
	ProviderRefundID string `json:"providerRefundID,omitempty"`
	// providerStatus is the provider's own status string, as last seen.
	// +optional
	ProviderStatus string `json:"providerStatus,omitempty"`
	// createRequestedAt is written before the provider's refund call: if set
	// without a providerRefundID, a refund may have been made and is resolved
	// with the same idempotency key, never repeated blindly.
	// +optional
	CreateRequestedAt *metav1.Time `json:"createRequestedAt,omitempty"`

	// idempotencyKey is the key of the refund call, fixed with
	// createRequestedAt: every retry sends it.
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// failure explains a Failed refund.
	// +optional
	Failure *Failure `json:"failure,omitempty"`
	// query is the position in the status-query schedule.
	// +optional
	Query QueryStatus `json:"query,omitempty"`
	// lastEvent is the last observation applied.
	// +optional
	LastEvent *EventRef `json:"lastEvent,omitempty"`
	// recentEventIDs are the ids of the last provider events seen (at most 16).
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
	// actions remembers operator annotations already acted on (requery, resolve).
	// +optional
	Actions ActionStatus `json:"actions,omitempty"`
	// conditions: Ready (settled, nothing to do), NeedsReview.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// adoptedAt is set when this Refund took over the outcome of an earlier
	// Refund of the same name, amount and payment (kept in the ledger after
	// that one was deleted) instead of refunding again.
	// +optional
	AdoptedAt *metav1.Time `json:"adoptedAt,omitempty"`
}

// Refund returns (part of) a succeeded Payment's money to the payer, exactly
// once, whatever happens.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rf,categories=paywarden
// +kubebuilder:selectablefield:JSONPath=`.spec.paymentRef.name`
// +kubebuilder:selectablefield:JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Payment",type=string,JSONPath=".spec.paymentRef.name"
// +kubebuilder:printcolumn:name="Amount",type=string,JSONPath=".status.amountDisplay"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Waiting-For",type=string,JSONPath=".status.waitingFor"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Provider-ID",type=string,JSONPath=".status.providerRefundID",priority=1
type Refund struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the refund asked for; immutable.
	// +required
	Spec RefundSpec `json:"spec"`

	// status is paywarden's view of the refund at the provider.
	// +optional
	Status RefundStatus `json:"status,omitempty"`
}

// RefundList is a list of Refunds.
//
// +kubebuilder:object:root=true
type RefundList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Refund `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Refund{}, &RefundList{})
}

// MaxRefundReference is the longest refund reference paywarden sends: PayPal
// keeps it in a refund's invoice_id, which takes at most 127 characters (the
// others keep it in metadata or a reference field that take more).
const MaxRefundReference = 127

// Reference is paywarden's reference of the refund at the provider (kept in
// the refund's metadata where the provider allows), so a refund whose answer
// was lost can be found and a refund event finds its Refund:
// "<namespace>/<name>/<uid>". The UID tells this Refund from an earlier one
// of the same name (deleted and re-created): an event about that one's refund
// is not this one's. A name too long for MaxRefundReference is cut and ends
// in "~" (which no object name does); the UID alone identifies the Refund.
func (r *Refund) Reference() string {
	name := r.Name
	if over := len(r.Namespace) + len(name) + len(r.UID) + 2 - MaxRefundReference; over > 0 {
		name = name[:max(len(name)-over-1, 0)] + RefundReferenceCut
	}
	return r.Namespace + "/" + name + "/" + string(r.UID)
}

// RefundReferenceCut ends the name in a Reference whose name was cut to fit.
const RefundReferenceCut = "~"
