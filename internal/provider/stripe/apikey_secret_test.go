package stripe_test

import (
	"testing"
	"time"

	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// TestAnAPIKeyIsNotASigningSecret: a Stripe API key (publishable pk_,
// secret sk_, restricted rk_) put in the signing Secret is refused: the
// provider is not Ready (Capabilities' CheckSecret), and Verify never takes
// it as an HMAC key. A publishable key is public, so an event signed with it
// by stripe-go's own signer would otherwise verify: a forged
// payment_intent.succeeded. Beside the endpoint's real whsec_ secret (a
// rotation), the real one still verifies.
func TestAnAPIKeyIsNotASigningSecret(t *testing.T) {
	body := []byte(`{"id":"evt_forged","object":"event","type":"payment_intent.succeeded"}`)
	now := time.Unix(1767225600, 0)
	for _, key := range []string{"pk_live_51Hpublishable", "sk_test_4eCsecret", "rk_live_restricted", " pk_test_padded\n"} {
		if err := stripe.Capabilities().Verification.CheckSigningSecret([]byte(key)); err == nil {
			t.Errorf("%q is accepted as a signing secret", key)
		}
		forged := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: key, Timestamp: now})
		if err := stripe.Verify(forged.Header, body, [][]byte{[]byte(key)}, 5*time.Minute, now); err == nil {
			t.Errorf("an event signed with the API key %q verifies", key)
		}
	}
	real := "whsec_endpointsecret"
	if err := stripe.Capabilities().Verification.CheckSigningSecret([]byte(real)); err != nil {
		t.Errorf("the endpoint's signing secret is refused: %v", err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: real, Timestamp: now})
	if err := stripe.Verify(signed.Header, body, [][]byte{[]byte("pk_live_51Hpublishable"), []byte(real)}, 5*time.Minute, now); err != nil {
		t.Errorf("beside an API key, the real secret does not verify: %v", err)
	}
}
