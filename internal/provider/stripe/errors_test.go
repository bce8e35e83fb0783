package stripe_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

var createReq = provider.CreateRequest{
	IdempotencyKey: "k", MerchantReference: "ORD-1", Amount: 1000, Currency: "USD",
	StoredMethod: &provider.StoredMethod{Customer: "cus_1", PaymentMethod: "pm_1"},
}

// TestErrorClasses maps Stripe's answers (through stripe-go's error types) onto the
// provider error classes.
func TestErrorClasses(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		call    string // create (default), get, find, events, capture
		class   error
		code    string
		retry   time.Duration
	}{
		{"rate limit is retryable and honours Retry-After", stripeAnswer(429, `{"error":{"type":"invalid_request_error","code":"rate_limit","message":"slow down"}}`, "Retry-After", "7"), "", provider.ErrRetryable, "rate_limit", 7 * time.Second},
		{"lock timeout 429 is retryable", stripeAnswer(429, `{"error":{"type":"invalid_request_error","code":"lock_timeout","message":"busy"}}`), "", provider.ErrRetryable, "lock_timeout", 0},
		{"api_error 500 is retryable", stripeAnswer(500, `{"error":{"type":"api_error","message":"boom"}}`), "", provider.ErrRetryable, "", 0},
		{"a replayed 500 is retryable", stripeAnswer(500, `{"error":{"type":"api_error","message":"boom"}}`, "Idempotent-Replayed", "true"), "", provider.ErrRetryable, "", 0},
		{"503 is retryable", stripeAnswer(503, `{"error":{"type":"api_error","message":"down"}}`), "get", provider.ErrRetryable, "", 0},
		{"409 on create (same key in flight) is retryable", stripeAnswer(409, `{"error":{"type":"idempotency_error","code":"idempotency_key_in_use","message":"in progress"}}`), "", provider.ErrRetryable, "idempotency_key_in_use", 0},
		{"idempotency_error on a create is a key conflict of that call, not configuration", stripeAnswer(400, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}}`), "", provider.ErrKeyConflict, "", 0},
		{"idempotency_error on a capture is a key conflict of that call", stripeAnswer(400, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}}`), "capture", provider.ErrKeyConflict, "", 0},
		{"idempotency_error on a refund is a key conflict of that call", stripeAnswer(400, `{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters"}}`), "refund", provider.ErrKeyConflict, "", 0},
		{"401 is configuration", stripeAnswer(401, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided"}}`), "", provider.ErrProviderConfig, "", 0},
		{"403 is configuration", stripeAnswer(403, `{"error":{"type":"invalid_request_error","message":"permission"}}`), "get", provider.ErrProviderConfig, "", 0},
		{"livemode_mismatch with 400 is configuration, not a refusal", stripeAnswer(400, `{"error":{"type":"invalid_request_error","code":"livemode_mismatch","message":"test key, live object"}}`), "", provider.ErrProviderConfig, "livemode_mismatch", 0},
		{"testmode_charges_only is configuration", stripeAnswer(400, `{"error":{"type":"invalid_request_error","code":"testmode_charges_only","message":"not activated"}}`), "", provider.ErrProviderConfig, "testmode_charges_only", 0},
		{"account_invalid is configuration", stripeAnswer(400, `{"error":{"type":"invalid_request_error","code":"account_invalid","message":"bad Stripe-Account"}}`), "", provider.ErrProviderConfig, "account_invalid", 0},
		{"an expired API key is configuration", stripeAnswer(401, `{"error":{"type":"invalid_request_error","code":"api_key_expired","message":"expired"}}`), "", provider.ErrProviderConfig, "api_key_expired", 0},
		{"card_error is a definitive decline with the decline code", stripeAnswer(402, `{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds."}}`), "", provider.ErrNonRetryable, "insufficient_funds", 0},
		{"card_error without decline code keeps the error code", stripeAnswer(402, `{"error":{"type":"card_error","code":"expired_card","message":"expired"}}`), "", provider.ErrNonRetryable, "expired_card", 0},
		{"invalid_request_error is not retryable", stripeAnswer(400, `{"error":{"type":"invalid_request_error","code":"parameter_unknown","param":"x","message":"Received unknown parameter: x"}}`), "", provider.ErrNonRetryable, "parameter_unknown", 0},
		{"Stripe-Should-Retry: true makes a 400 retryable", stripeAnswer(400, `{"error":{"type":"invalid_request_error","message":"try again"}}`, "Stripe-Should-Retry", "true"), "", provider.ErrRetryable, "", 0},
		{"404 resource_missing on a read is not found", stripeAnswer(404, `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such payment_intent"}}`), "get", provider.ErrNotFound, "resource_missing", 0},
		{"404 unrecognized URL on a read is configuration", stripeAnswer(404, `{"error":{"type":"invalid_request_error","message":"Unrecognized request URL (GET: /v1/payment_intent/pi_1)."}}`), "get", provider.ErrProviderConfig, "", 0},
		{"404 on the search route is configuration", stripeAnswer(404, `{"error":{"type":"invalid_request_error","message":"Unrecognized request URL"}}`), "find", provider.ErrProviderConfig, "", 0},
		{"404 on the events route is configuration", stripeAnswer(404, `{"error":{"type":"invalid_request_error","message":"Unrecognized request URL"}}`), "events", provider.ErrProviderConfig, "", 0},
		{"404 resource_missing on capture is a definitive answer", stripeAnswer(404, `{"error":{"type":"invalid_request_error","code":"resource_missing","message":"No such payment_intent"}}`), "capture", provider.ErrNonRetryable, "resource_missing", 0},
		{"a redirect is configuration and is not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example/v1/payment_intents", http.StatusFound)
		}, "", provider.ErrProviderConfig, "", 0},
		{"a proxy's HTML 502 is retryable and keeps its status", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			_, _ = w.Write([]byte("<html>bad gateway</html>"))
		}, "", provider.ErrRetryable, "", 0},
		{"a proxy's HTML 401 is configuration", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(401)
			_, _ = w.Write([]byte("<html>no</html>"))
		}, "get", provider.ErrProviderConfig, "", 0},
		{"a 2xx that is not JSON is retryable (the call may have worked)", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("<html>ok</html>"))
		}, "", provider.ErrRetryable, "", 0},
		{"a 2xx of the wrong shape is retryable", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"id":"pi_1","amount":"lots"}`))
		}, "", provider.ErrRetryable, "", 0},
		{"an oversized body is retryable", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"id":"` + strings.Repeat("x", provider.MaxResponseBytes) + `"}`))
		}, "get", provider.ErrRetryable, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := serve(t, tt.handler)
			ctx := context.Background()
			var err error
			switch tt.call {
			case "get":
				_, err = a.Get(ctx, "pi_1")
			case "find":
				_, err = a.FindByMerchantReference(ctx, "ORD-1")
			case "events":
				_, err = a.ListEvents(ctx, time.Now(), "")
			case "capture":
				_, err = a.Capture(ctx, provider.ActionRequest{PaymentID: "pi_1", IdempotencyKey: "c"})
			case "refund":
				_, err = a.CreateRefund(ctx, provider.RefundRequest{PaymentID: "pi_1", IdempotencyKey: "r", Reference: "ns.r", Amount: 100, Currency: "USD"})
			default:
				_, err = a.Create(ctx, createReq)
			}
			providertest.AssertClass(t, err, tt.class)
			var pe *provider.Error
			if !errors.As(err, &pe) {
				t.Fatalf("%T is not a *provider.Error", err)
			}
			if pe.Code != tt.code {
				t.Errorf("Code = %q, want %q", pe.Code, tt.code)
			}
			if pe.RetryAfter != tt.retry {
				t.Errorf("RetryAfter = %s, want %s", pe.RetryAfter, tt.retry)
			}
			if !strings.HasPrefix(pe.Error(), "provider ns/stripe: ") {
				t.Errorf("message %q does not name the provider first", pe.Error())
			}
		})
	}
}

func TestTransportErrorsAreRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	a := providertest.At(t, "http://"+addr, newAdapter)
	_, err = a.Get(context.Background(), "pi_1")
	providertest.AssertClass(t, err, provider.ErrRetryable)

	t.Run("a cancelled context is retryable and says so", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := a.Get(ctx, "pi_1")
		providertest.AssertClass(t, err, provider.ErrRetryable)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v does not wrap context.Canceled", err)
		}
	})
}

// TestNoSDKRetries: the reconciler owns retries; stripe-go must not retry on its own
// (it would by default, twice, sleeping in between).
func TestNoSDKRetries(t *testing.T) {
	var calls atomic.Int32
	a := serve(t, func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.Header().Set("Stripe-Should-Retry", "true")
		stripeAnswer(500, `{"error":{"type":"api_error","message":"boom"}}`)(w, nil)
	})
	if _, err := a.Create(context.Background(), createReq); !errors.Is(err, provider.ErrRetryable) {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d requests for one call", n)
	}
}

// TestRequestsCarryKeyAndIdempotencyKey checks the headers stripe-go sends for us.
func TestRequestsCarryKeyAndIdempotencyKey(t *testing.T) {
	var got http.Header
	a := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		stripeAnswer(200, `{"id":"pi_1","object":"payment_intent","amount":1000,"currency":"usd","status":"succeeded","amount_received":1000}`)(w, r)
	})
	if _, err := a.Create(context.Background(), createReq); err != nil {
		t.Fatal(err)
	}
	if got.Get("Authorization") != "Bearer "+testKey || got.Get("Idempotency-Key") != "k" || got.Get("Stripe-Version") == "" {
		t.Fatalf("headers %v", got)
	}
}

func TestConfig(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  provider.Config
		want string
	}{
		{"no secret key", provider.Config{Name: "ns/s", APIURL: "https://api.stripe.com"}, `"secretKey"`},
		{"empty secret key", provider.Config{Name: "ns/s", APIURL: "https://api.stripe.com", Credentials: map[string][]byte{"secretKey": nil}}, `"secretKey"`},
		{"no apiURL", provider.Config{Name: "ns/s", Credentials: map[string][]byte{"secretKey": []byte("sk")}}, "apiURL"},
		{"relative apiURL", provider.Config{Name: "ns/s", APIURL: "api.stripe.com", Credentials: map[string][]byte{"secretKey": []byte("sk")}}, "apiURL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := stripe.New(tt.cfg)
			if err == nil || a != nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "ns/s") {
				t.Fatalf("%v %v", a, err)
			}
		})
	}
	t.Run("capabilities", func(t *testing.T) {
		c := stripe.Capabilities()
		l := c.Lifecycle
		if c.Type != "stripe" || len(c.CredentialKeys) != 1 || c.CredentialKeys[0] != "secretKey" || !c.EventsAPI || !c.LookupByReference ||
			!c.Verification.SigningSecret || c.Verification.Credentials || c.Verification.WebhookID ||
			!l.Checkout || !l.StoredMethod || !l.ManualCapture || !l.PartialCapture || !l.Cancel || !l.Refunds || !l.RefundLookup || l.AuthorizeStep {
			t.Fatalf("%+v", c)
		}
	})
	t.Run("authorize is not a step at Stripe", func(t *testing.T) {
		_, err := providertest.At(t, providertest.Unreachable, newAdapter).Authorize(context.Background(), provider.ActionRequest{PaymentID: "pi_1"})
		providertest.AssertClass(t, err, provider.ErrUnsupported)
	})
}
