package stripe_test

import (
	"net/http"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// TestRefundWithoutAPaymentIntentIsNoPaymentsRefund: a refund Stripe reads
// without a PaymentIntent (a refund of a bare charge) is no refund of a
// payment paywarden made, all of which are PaymentIntents.
func TestRefundWithoutAPaymentIntentIsNoPaymentsRefund(t *testing.T) {
	a := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"re_1","object":"refund","amount":100,"currency":"eur","charge":"ch_1","payment_intent":null,"status":"succeeded"}`))
	})
	_, err := a.GetRefund(ctx, "pi_1", "re_1")
	providertest.AssertClass(t, err, provider.ErrNotFound)
}
