package inbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// ErrInvalidEvent means the event cannot be stored as it is (an id or
// reference longer than the WebhookEvent schema allows, or the API server
// rejected the object as invalid). Retrying the same event cannot succeed, so
// the receiver answers 400 rather than 503.
var ErrInvalidEvent = errors.New("event cannot be stored")

// ErrNotReparsable means a stored event's payload cannot be parsed again (it
// was truncated to MaxStoredPayload), so only the receiver's first attempt
// could apply it. Status queries still settle the payment.
var ErrNotReparsable = errors.New("stored payload cannot be parsed again")

// Schema limits of WebhookEventSpec, checked before the create so a provider
// sending oversized ids gets a clear 400 instead of a retried 503.
const (
	maxEventID   = 512
	maxEventType = 256
	maxRef       = 255
	maxRefundRef = 512
)

// longer reports whether s has more than n characters: the API server
// counts a schema's maxLength in characters, not bytes, so a value of
// multi-byte characters within the limit is stored, not refused.
func longer(s string, n int) bool {
	return len(s) > n && utf8.RuneCountInString(s) > n
}

// NewEvent builds the inbox object for one provider event. Its name is
// derived from (provider, event id), so creating it is the dedup: the second
// copy of an event, by webhook or by backfill, gets AlreadyExists.
func NewEvent(prov *v1alpha1.PaymentProvider, ev provider.Event, via v1alpha1.EventVia, scheme string, now time.Time) (*v1alpha1.WebhookEvent, error) {
	switch {
	case ev.ID == "":
		return nil, fmt.Errorf("%w: event has no id", ErrInvalidEvent)
	case longer(ev.ID, maxEventID):
		return nil, fmt.Errorf("%w: event id longer than %d characters", ErrInvalidEvent, maxEventID)
	case longer(ev.Type, maxEventType):
		return nil, fmt.Errorf("%w: event %s: type longer than %d characters", ErrInvalidEvent, ev.ID, maxEventType)
	case longer(ev.PaymentID, maxRef), longer(ev.MerchantReference, maxRef):
		return nil, fmt.Errorf("%w: event %s: payment reference longer than %d characters", ErrInvalidEvent, ev.ID, maxRef)
	case ev.Refund != nil && (longer(ev.Refund.ID, maxRef) || longer(ev.Refund.Reference, maxRefundRef)):
		return nil, fmt.Errorf("%w: event %s: refund reference too long", ErrInvalidEvent, ev.ID)
	case !utf8.ValidString(ev.ID) || !utf8.ValidString(ev.PaymentID) || !utf8.ValidString(ev.MerchantReference):
		return nil, fmt.Errorf("%w: event %s: ids are not UTF-8", ErrInvalidEvent, ev.ID)
	}
	payload, truncated := capPayload(ev.Raw)
	sum := sha256.Sum256(ev.Raw)
	return &v1alpha1.WebhookEvent{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: prov.Namespace,
			Name:      v1alpha1.WebhookEventName(prov.Name, ev.ID),
		},
		Spec: v1alpha1.WebhookEventSpec{
			Provider:          prov.Name,
			EventID:           ev.ID,
			Type:              ev.Type,
			Via:               via,
			ReceivedAt:        metav1.NewTime(now),
			ProviderPaymentID: ev.PaymentID,
			MerchantReference: ev.MerchantReference,
			RefundReference:   refundField(ev, func(r *provider.Refund) string { return r.Reference }),
			ProviderRefundID:  refundField(ev, func(r *provider.Refund) string { return r.ID }),
			Payload:           payload,
			PayloadTruncated:  truncated,
			// The hash of the whole body is kept for every event, not only
			// truncated ones: it lets an auditor match the record to the
			// provider's copy without trusting the stored text.
			PayloadSHA256:   hex.EncodeToString(sum[:]),
			SignatureScheme: scheme,
		},
	}, nil
}

// capPayload keeps at most MaxStoredPayload bytes, cut on a UTF-8 boundary so
// the stored string stays valid text (the API server would otherwise replace
// the broken rune and the prefix would no longer match the raw bytes).
func capPayload(raw []byte) (string, bool) {
	if len(raw) <= v1alpha1.MaxStoredPayload {
		return string(raw), false
	}
	cut := v1alpha1.MaxStoredPayload
	for cut > 0 && !utf8.RuneStart(raw[cut]) {
		cut--
	}
	return string(raw[:cut]), true
}

// Reparse recovers the provider event from a stored WebhookEvent, for the
// inbox processor, which has the record but not the original request.
func Reparse(adapter provider.Provider, evt *v1alpha1.WebhookEvent) (provider.Event, error) {
	if evt.Spec.PayloadTruncated {
		return provider.Event{}, fmt.Errorf("%w: payload of event %s was truncated to %d bytes", ErrNotReparsable, evt.Spec.EventID, v1alpha1.MaxStoredPayload)
	}
	ev, err := adapter.ParseEvent([]byte(evt.Spec.Payload))
	if err != nil {
		return provider.Event{}, fmt.Errorf("%w: event %s: %w", ErrNotReparsable, evt.Spec.EventID, err)
	}
	if ev.ID != evt.Spec.EventID {
		// The name was derived from the id; a payload that disagrees was not
		// written by the receiver and must not move a payment.
		return provider.Event{}, fmt.Errorf("%w: payload id %q differs from spec.eventID %q", ErrNotReparsable, ev.ID, evt.Spec.EventID)
	}
	return ev, nil
}

func refundField(ev provider.Event, f func(*provider.Refund) string) string {
	if ev.Refund == nil {
		return ""
	}
	return f(ev.Refund)
}
