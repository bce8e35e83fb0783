package payment

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// A refund's identity at the provider (SPEC §12.1): the payment's, plus the
// Refund's own, its UID. Objects are deleted and re-created under the same
// name; the UID is what tells a new Refund "r1" from the old one, so the old
// one's refund never settles the new one and the new one is never taken for
// a replay of the old one's call.

// MaxRefundKey bounds a default refund idempotency key, and every key
// derived from a payment's (its capture's, authorization's, cancel's):
// PayPal's PayPal-Request-Id takes at most 108 characters, the lowest of the
// providers' limits (Stripe's is 255).
const MaxRefundKey = 100

// derivedKey is the key of a call derived from its payment's key pk: pk and
// suffix, with pk replaced by its hash when the whole would pass
// MaxRefundKey (a long spec.idempotencyKey), so the key stays deterministic,
// fits wherever the create's did, and keeps suffix readable.
func derivedKey(pk, suffix string) string {
	if len(pk)+len(suffix) > MaxRefundKey {
		sum := sha256.Sum256([]byte(pk))
		pk = "p" + hex.EncodeToString(sum[:])[:32]
	}
	return pk + suffix
}

// RefundKey is the idempotency key of rf's refund call: spec.idempotencyKey
// when set, else "<payment key>/refund/<uid>", derived from the payment's
// order identity (Payment.IdempotencyKey) and the Refund's UID, never from
// the UID alone. A payment key too long for MaxRefundKey is replaced by its
// hash, so the key stays deterministic and the UID stays readable.
func RefundKey(p *v1alpha1.Payment, rf *v1alpha1.Refund) string {
	if rf.Spec.IdempotencyKey != "" {
		return rf.Spec.IdempotencyKey
	}
	return derivedKey(CreateKey(p), "/refund/"+string(rf.UID))
}

// RefundRef is a refund reference (v1alpha1.Refund.Reference) read back from
// the provider.
type RefundRef struct {
	Namespace, Name string
	UID             string
	// Cut: the name was cut to fit the reference and is only a prefix.
	Cut bool
}

// ParseRefundReference reads a reference paywarden sent. A reference of
// another form (a refund made elsewhere, or one sent before references named
// the Refund's UID, "<namespace>/<name>") is not ok: it names no Refund.
func ParseRefundReference(ref string) (RefundRef, bool) {
	parts := strings.Split(ref, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return RefundRef{}, false
	}
	name, cut := strings.CutSuffix(parts[1], v1alpha1.RefundReferenceCut)
	return RefundRef{Namespace: parts[0], Name: name, UID: parts[2], Cut: cut}, true
}

// ForeignRefund says why an observation of a provider refund is not about
// r's refund, or "" when it may be: it names a provider refund id other than
// the one r recorded, or it carries a reference naming another Refund (an
// earlier object of the same name has another UID). A reference paywarden
// cannot read says nothing either way; the id decides.
func ForeignRefund(r *v1alpha1.Refund, providerRefundID, reference string) string {
	if id, own := providerRefundID, r.Status.ProviderRefundID; id != "" && own != "" && id != own {
		return fmt.Sprintf("about provider refund %s, this Refund is %s", id, own)
	}
	if ref, ok := ParseRefundReference(reference); ok && (ref.UID != string(r.UID) || ref.Namespace != r.Namespace) {
		return fmt.Sprintf("about the refund of another Refund (reference %s), this Refund is %s", reference, r.Reference())
	}
	return ""
}

// RefundCallKey is the key rf's refund call is sent with: the one stored
// with its marker. A marker stored without one was written by a paywarden
// that keyed refunds by spec.idempotencyKey or the Refund's UID: its retry
// keeps that key, so the provider replays the first call.
func RefundCallKey(p *v1alpha1.Payment, rf *v1alpha1.Refund) string {
	st := &rf.Status
	switch {
	case st.IdempotencyKey != "":
		return st.IdempotencyKey
	case st.CreateRequestedAt != nil && rf.Spec.IdempotencyKey != "":
		return rf.Spec.IdempotencyKey
	case st.CreateRequestedAt != nil || p == nil:
		return string(rf.UID)
	}
	return RefundKey(p, rf)
}

// RefundCallNames is what rf's refund call names besides the payment its
// marker names (status.providerPaymentID): the capture p read with its
// success (status.captureID, PayPal's) and p's merchant reference, and only
// when p is the order the marker names and p created it. Else both are
// empty, and the adapter reads the order for them. The call is the same
// either way, so a retry of it is one too (SPEC §12.1): an order's capture
// is its last one, and an order paywarden created carries p's merchant
// reference, where one tracked (spec.providerPaymentID) carries its own. A
// Payment of the same name made since for another order lends nothing.
func RefundCallNames(p *v1alpha1.Payment, rf *v1alpha1.Refund) (captureID, merchantRef string) {
	if p == nil || p.Spec.ProviderPaymentID != "" || rf.Status.ProviderPaymentID == "" || p.Status.ProviderPaymentID != rf.Status.ProviderPaymentID {
		return "", ""
	}
	return p.Status.CaptureID, p.MerchantRef()
}
