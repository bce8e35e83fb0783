package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxStoredPayload is the largest payload stored on a WebhookEvent; a larger
// one is truncated, flagged and fingerprinted with its sha256.
const MaxStoredPayload = 64 << 10

// EventVia says how an event reached the inbox.
// +kubebuilder:validation:Enum=Webhook;Backfill
type EventVia string

// Ways an event reaches the inbox.
const (
	ViaWebhook  EventVia = "Webhook"
	ViaBackfill EventVia = "Backfill"
)

// EventResult is what became of an inbox event.
// +kubebuilder:validation:Enum=Pending;Applied;Duplicate;Stale;Conflict;Ignored;Orphaned
type EventResult string

// Results of an inbox event (SPEC §5).
const (
	// ResultPending: stored, not yet applied; the inbox processor finishes it.
	ResultPending EventResult = "Pending"
	// ResultApplied: the event changed the payment.
	ResultApplied EventResult = "Applied"
	// ResultDuplicate: the payment had already seen this event.
	ResultDuplicate EventResult = "Duplicate"
	// ResultStale: the event is older news than the payment's phase.
	ResultStale EventResult = "Stale"
	// ResultConflict: the event contradicts a final phase; the payment needs review.
	ResultConflict EventResult = "Conflict"
	// ResultIgnored: an event type paywarden does not act on.
	ResultIgnored EventResult = "Ignored"
	// ResultOrphaned: no Payment matches yet; applied when it appears.
	ResultOrphaned EventResult = "Orphaned"
)

// IsDone reports whether nothing more will be done with the event.
func (r EventResult) IsDone() bool {
	return r != "" && r != ResultPending && r != ResultOrphaned
}

// FinishedResults are the results IsDone reports true for. The manager's
// cache holds only events without one of them (controllers.CacheOptions):
// a field selector can exclude values, not list the ones to keep.
var FinishedResults = []EventResult{ResultApplied, ResultDuplicate, ResultStale, ResultConflict, ResultIgnored}

// FieldResult is the selectable field of a WebhookEvent's result.
const FieldResult = "status.result"

// WebhookEventSpec is one provider event as received; immutable.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type WebhookEventSpec struct {
	// provider is the name of the PaymentProvider the event came from.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Provider string `json:"provider"`
	// eventID is the provider's id of the event; the object's name is derived
	// from it, so a second copy of the event cannot be created.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +required
	EventID string `json:"eventID"`
	// type is the provider's event type (e.g. payment.succeeded).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Type string `json:"type,omitempty"`
	// via says whether the event came as a webhook or from the events-API backfill.
	// +required
	Via EventVia `json:"via"`
	// receivedAt is when paywarden received the event.
	// +required
	ReceivedAt metav1.Time `json:"receivedAt"`
	// providerPaymentID the event is about.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	ProviderPaymentID string `json:"providerPaymentID,omitempty"`
	// merchantReference the event is about.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	MerchantReference string `json:"merchantReference,omitempty"`
	// refundReference is paywarden's reference of the refund a refund event
	// is about ("<namespace>/<name>/<uid>" of its Refund), when the provider kept it.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	RefundReference string `json:"refundReference,omitempty"`
	// providerRefundID is the provider's id of the refund a refund event is about.
	// +kubebuilder:validation:MaxLength=255
	// +optional
	ProviderRefundID string `json:"providerRefundID,omitempty"`
	// payment is the name of the Payment the event was matched to, when known
	// at receipt.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Payment string `json:"payment,omitempty"`
	// payload is the raw event body as received, up to 64 KiB.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	Payload string `json:"payload,omitempty"`
	// payloadTruncated is true when the payload was longer than 64 KiB and cut.
	// +optional
	PayloadTruncated bool `json:"payloadTruncated,omitempty"`
	// payloadSHA256 is the hex sha256 of the whole raw payload.
	// +kubebuilder:validation:Pattern=`^([0-9a-f]{64})?$`
	// +optional
	PayloadSHA256 string `json:"payloadSHA256,omitempty"`
	// signatureScheme that verified the event (empty for backfilled events,
	// which come over the authenticated API).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	SignatureScheme string `json:"signatureScheme,omitempty"`
}

// WebhookEventStatus is what became of the event.
type WebhookEventStatus struct {
	// result of applying the event.
	// +optional
	Result EventResult `json:"result,omitempty"`
	// message explains the result.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
	// appliedAt is when the result was reached.
	// +optional
	AppliedAt *metav1.Time `json:"appliedAt,omitempty"`
	// attempts to apply the event.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
}

// WebhookEvent is the inbox record and audit trail of one provider event.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=whevent,categories=paywarden
// +kubebuilder:selectablefield:JSONPath=".status.result"
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=".spec.provider"
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=".spec.type"
// +kubebuilder:printcolumn:name="Via",type=string,JSONPath=".spec.via"
// +kubebuilder:printcolumn:name="Result",type=string,JSONPath=".status.result"
// +kubebuilder:printcolumn:name="Payment",type=string,JSONPath=".spec.payment"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type WebhookEvent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the event as received; immutable.
	// +required
	Spec WebhookEventSpec `json:"spec"`

	// status is what became of the event.
	// +optional
	Status WebhookEventStatus `json:"status,omitempty"`
}

// WebhookEventList is a list of WebhookEvents.
//
// +kubebuilder:object:root=true
type WebhookEventList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebhookEvent `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WebhookEvent{}, &WebhookEventList{})
}
