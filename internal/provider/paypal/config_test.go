package paypal_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// fakePayPal answers the token endpoint with token and every other call with api.
type fakePayPal struct {
	token, api       http.HandlerFunc
	tokens, apiCalls atomic.Int32
}

func (f *fakePayPal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/oauth2/token" {
		f.tokens.Add(1)
		f.token(w, r)
		return
	}
	f.apiCalls.Add(1)
	f.api(w, r)
}

func issueToken(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"access_token":"tok","token_type":"Bearer","expires_in":32400}`))
}

func answer(code int, body string) http.HandlerFunc {
	return providertest.Answer(code, "application/json", body)
}

func fakeAdapter(t *testing.T, f *fakePayPal) *paypal.Adapter {
	t.Helper()
	return providertest.Serve(t, f, func(apiURL string) (*paypal.Adapter, error) {
		return paypal.New(provider.Config{
			Name: "ns/pp", APIURL: apiURL, WebhookID: "WH-ID",
			Credentials: map[string][]byte{"clientID": []byte("id"), "clientSecret": []byte("secret")},
		})
	})
}

func TestConfigurationErrors(t *testing.T) {
	orderJSON := `{"id":"O1","status":"CREATED","purchase_units":[{"amount":{"currency_code":"USD","value":"1.00"}}]}`
	tests := []struct {
		name            string
		token, api      http.HandlerFunc
		call            func(*paypal.Adapter) error
		class           error
		tokens, apiHits int32
	}{
		{"token endpoint 401 invalid_client", answer(401, `{"error":"invalid_client","error_description":"Client Authentication failed"}`), answer(200, orderJSON),
			get, provider.ErrProviderConfig, 1, 0},
		{"token endpoint 400 invalid_client", answer(400, `{"error":"invalid_client","error_description":"Client credentials are missing"}`), answer(200, orderJSON),
			get, provider.ErrProviderConfig, 1, 0},
		{"token endpoint 400 of another kind is still configuration", answer(400, `{"error":"unsupported_grant_type"}`), answer(200, orderJSON),
			get, provider.ErrProviderConfig, 1, 0},
		{"token endpoint outage stays retryable", answer(503, ``), answer(200, orderJSON),
			get, provider.ErrRetryable, 1, 0},
		{"401 twice: refreshed once, then configuration", issueToken, answer(401, `{"error":"invalid_token"}`),
			get, provider.ErrProviderConfig, 2, 2},
		{"401 on create twice is configuration, never a rejected payment", issueToken, answer(401, `{"error":"invalid_token"}`),
			create, provider.ErrProviderConfig, 2, 2},
		{"403 is configuration without a token refresh", issueToken, answer(403, `{"name":"NOT_AUTHORIZED","message":"Authorization failed due to insufficient permissions."}`),
			create, provider.ErrProviderConfig, 1, 1},
		{"404 on the orders collection is configuration", issueToken, answer(404, `{"name":"RESOURCE_NOT_FOUND"}`),
			create, provider.ErrProviderConfig, 1, 1},
		{"404 on one order is not found", issueToken, answer(404, `{"name":"RESOURCE_NOT_FOUND"}`),
			get, provider.ErrNotFound, 1, 1},
		{"409 on create is retryable", issueToken, answer(409, `{"name":"CONFLICT"}`),
			create, provider.ErrRetryable, 1, 1},
		{"422 on create is a rejection", issueToken, answer(422, `{"name":"UNPROCESSABLE_ENTITY"}`),
			create, provider.ErrNonRetryable, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakePayPal{token: tt.token, api: tt.api}
			err := tt.call(fakeAdapter(t, f))
			providertest.AssertClass(t, err, tt.class)
			if f.tokens.Load() != tt.tokens || f.apiCalls.Load() != tt.apiHits {
				t.Errorf("token requests %d, API requests %d; want %d, %d", f.tokens.Load(), f.apiCalls.Load(), tt.tokens, tt.apiHits)
			}
		})
	}

	t.Run("a revoked token is replaced once and the call succeeds", func(t *testing.T) {
		var n atomic.Int32
		f := &fakePayPal{token: issueToken, api: func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				answer(401, `{"error":"invalid_token"}`)(w, r)
				return
			}
			answer(200, orderJSON)(w, r)
		}}
		if err := get(fakeAdapter(t, f)); err != nil {
			t.Fatal(err)
		}
		if f.tokens.Load() != 2 {
			t.Errorf("tokens %d", f.tokens.Load())
		}
	})

	for _, tt := range []struct {
		name       string
		token, api http.HandlerFunc
	}{
		{"verification API rejecting our token twice cannot decide", issueToken, answer(401, `{"error":"invalid_token"}`)},
		{"token endpoint rejecting our client with 400 cannot decide", answer(400, `{"error":"invalid_client"}`), answer(200, `{"verification_status":"SUCCESS"}`)},
		{"token endpoint rejecting our client with 401 cannot decide", answer(401, `{"error":"invalid_client"}`), answer(200, `{"verification_status":"SUCCESS"}`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, body := transmission("2026-09-21T12:00:00Z")
			_, err := fakeAdapter(t, &fakePayPal{token: tt.token, api: tt.api}).VerifyWebhook(context.Background(), h, body, nil, 0, parseTime(t, "2026-09-21T12:00:00Z"))
			providertest.AssertClass(t, err, provider.ErrProviderConfig)
			if errors.Is(err, provider.ErrInvalidSignature) {
				t.Fatal("our own credentials problem must not reject the sender's webhook")
			}
		})
	}
	t.Run("verification API answering 400 rejects the webhook", func(t *testing.T) {
		h, body := transmission("2026-09-21T12:00:00Z")
		_, err := fakeAdapter(t, &fakePayPal{token: issueToken, api: answer(400, `{"name":"VALIDATION_ERROR"}`)}).VerifyWebhook(context.Background(), h, body, nil, 0, parseTime(t, "2026-09-21T12:00:00Z"))
		if !errors.Is(err, provider.ErrInvalidSignature) || !errors.Is(err, provider.ErrNoMatchingSignature) {
			t.Fatalf("err = %v", err)
		}
	})
}

func get(a *paypal.Adapter) error {
	_, err := a.Get(context.Background(), "O1")
	return err
}

func create(a *paypal.Adapter) error {
	_, err := a.Create(context.Background(), provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ref", Amount: 100, Currency: "USD"})
	return err
}
