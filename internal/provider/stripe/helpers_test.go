package stripe_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

const testKey = "sk_test_paywarden"

// newAdapter is the adapter under test for the Stripe API at apiURL.
func newAdapter(apiURL string) (*stripe.Adapter, error) {
	return stripe.New(provider.Config{
		Name: "ns/stripe", APIURL: apiURL, Timeout: 5 * time.Second,
		Credentials: map[string][]byte{stripe.CredentialSecretKey: []byte(testKey)},
	})
}

// serve builds an adapter against a handler.
func serve(t *testing.T, h http.HandlerFunc) *stripe.Adapter {
	t.Helper()
	return providertest.Serve(t, h, newAdapter)
}

// stripeAnswer answers with a Stripe error body.
func stripeAnswer(code int, body string, header ...string) http.HandlerFunc {
	return providertest.Answer(code, "application/json", body, header...)
}
