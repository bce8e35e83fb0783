package stripe_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

const testKey = "sk_test_paywarden"

func newAdapter(t *testing.T, apiURL string) *stripe.Adapter {
	t.Helper()
	a, err := stripe.New(provider.Config{
		Name: "ns/stripe", APIURL: apiURL, Timeout: 5 * time.Second,
		Credentials: map[string][]byte{stripe.CredentialSecretKey: []byte(testKey)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// serve builds an adapter against a handler.
func serve(t *testing.T, h http.HandlerFunc) *stripe.Adapter {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return newAdapter(t, srv.URL)
}

// stripeAnswer answers with a Stripe error body.
func stripeAnswer(code int, body string, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}
