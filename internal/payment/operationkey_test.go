package payment_test

import (
	"strings"
	"testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// TestAnOperationKeyFitsWhereItsPaymentsCreateKeyFits: the idempotency key
// of a capture, authorize or cancel is derived from the create's key, and
// the providers bound their keys: PayPal-Request-Id takes 1..108
// characters, Stripe's Idempotency-Key 255.
//
//  1. A PayPal Payment with spec.idempotencyKey of 104 characters (the CRD
//     allows 255): its create is sent with that key, which PayPal takes.
//  2. The payer approves; paywarden marks the automatic capture, the
//     authorization of a Manual payment, or a cancel.
//  3. "<104 characters>/capture" (112) would be refused by PayPal on every
//     retry and every new annotation: the approved money never taken (the
//     order expires after 3 h). Likewise at Stripe for a key of 248..255.
//
// SPEC §11.5 (capture is crash-safe like create: marker, deterministic key),
// §12.1 (a capture, cancel or refund derives its identity from the
// payment's plus its own). The derived key stays within the providers'
// limits whenever the create's key does (hashed like RefundKey),
// deterministic and stored with the marker.
func TestAnOperationKeyFitsWhereItsPaymentsCreateKeyFits(t *testing.T) {
	const paypalMax, stripeMax = 108, 255
	for _, tc := range []struct {
		provider string
		limit    int
		keyLen   int
	}{
		{"paypal", paypalMax, 104},
		{"stripe", stripeMax, 250},
	} {
		p := newPay("long-key-" + tc.provider)
		p.Spec.IdempotencyKey = "k" + strings.Repeat("0", tc.keyLen-1)
		if got := len(payment.CreateKey(p)); got > tc.limit {
			t.Fatalf("%s: the create key itself is %d characters; the test wants one that fits", tc.provider, got)
		}
		for _, kind := range []v1alpha1.OperationKind{v1alpha1.OperationCapture, v1alpha1.OperationAuthorize, v1alpha1.OperationCancel} {
			if key := payment.OperationKey(p, kind); len(key) > tc.limit {
				t.Errorf("%s: the create key (%d characters) fits the provider's %d, but the %s key is %d characters: every %s call is refused",
					tc.provider, tc.keyLen, tc.limit, kind, len(key), strings.ToLower(string(kind)))
			}
		}
	}
}
