package kukopay_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// newAdapter is the adapter under test for the KukoPay API at apiURL.
func newAdapter(apiURL string) (*kukopay.Adapter, error) {
	return kukopay.New(provider.Config{Name: "ns/kuko", APIURL: apiURL, Credentials: map[string][]byte{"apiKey": []byte("k")}})
}

func serve(t *testing.T, h http.HandlerFunc) *kukopay.Adapter {
	t.Helper()
	return providertest.Serve(t, h, newAdapter)
}

// adapter is the adapter under test for an API nothing answers at.
func adapter(t *testing.T) *kukopay.Adapter {
	t.Helper()
	return providertest.At(t, providertest.Unreachable, newAdapter)
}

func kukoError(code int, errCode string) http.HandlerFunc {
	return providertest.Answer(code, "application/json", `{"error":{"code":"`+errCode+`","message":"m"}}`)
}

func TestCreateConflicts(t *testing.T) {
	req := provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ORD-1", Amount: 100, Currency: "CNY"}
	tests := []struct {
		name    string
		handler http.HandlerFunc
		class   error
	}{
		{"409 with the same key in progress is retryable", kukoError(409, "idempotency_key_in_use"), provider.ErrRetryable},
		{"409 without a body is retryable", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(409) }, provider.ErrRetryable},
		{"409 out_trade_no used by another payment is a rejection", kukoError(409, kukopay.ErrorCodeDuplicateOutTradeNo), provider.ErrNonRetryable},
		{"422 idempotency_error (same key, another body) is a key conflict, not a rejection", kukoError(422, kukopay.ErrorCodeIdempotency), provider.ErrKeyConflict},
		{"another 422 is a rejection", kukoError(422, "invalid_request"), provider.ErrNonRetryable},
		{"401 is configuration", kukoError(401, "authentication_failure"), provider.ErrProviderConfig},
		{"404 on the payments collection is configuration", kukoError(404, "resource_missing"), provider.ErrProviderConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := serve(t, tt.handler).Create(context.Background(), req)
			providertest.AssertClass(t, err, tt.class)
		})
	}
	t.Run("404 on one payment is not found", func(t *testing.T) {
		_, err := serve(t, kukoError(404, "resource_missing")).Get(context.Background(), "pay_1")
		providertest.AssertClass(t, err, provider.ErrNotFound)
	})
	t.Run("404 on the search route is configuration, not an empty search", func(t *testing.T) {
		_, err := serve(t, kukoError(404, "resource_missing")).FindByMerchantReference(context.Background(), "ORD-1")
		providertest.AssertClass(t, err, provider.ErrProviderConfig)
	})
}

// A key conflict on a money-moving call on an existing payment concerns that call too.
func TestActionKeyConflicts(t *testing.T) {
	ctx := context.Background()
	a := serve(t, kukoError(422, kukopay.ErrorCodeIdempotency))
	action := provider.ActionRequest{PaymentID: "pay_1", IdempotencyKey: "k/capture", Currency: "EUR"}
	_, err := a.Capture(ctx, action)
	providertest.AssertClass(t, err, provider.ErrKeyConflict)
	_, err = a.Cancel(ctx, action)
	providertest.AssertClass(t, err, provider.ErrKeyConflict)
	_, err = a.CreateRefund(ctx, provider.RefundRequest{PaymentID: "pay_1", IdempotencyKey: "r", Reference: "ns.r", Amount: 100, Currency: "EUR"})
	providertest.AssertClass(t, err, provider.ErrKeyConflict)
}

// TestKeyReusedWithAnotherBodyIsAKeyConflict: paysim's KukoPay mode answers a key
// reused with another body 422 idempotency_error, on a create and on a refund.
func TestKeyReusedWithAnotherBodyIsAKeyConflict(t *testing.T) {
	srv, a, _ := simAdapter(t, paysim.Options{})
	req := provider.CreateRequest{IdempotencyKey: key("reuse"), MerchantReference: key("ORD"), Amount: 1000, Currency: "EUR"}
	create(t, a, req)
	req.Amount = 2000
	_, err := a.Create(context.Background(), req)
	providertest.AssertClass(t, err, provider.ErrKeyConflict)

	p := paid(t, srv, a, 1000)
	refund := provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("refund"), Reference: "ns.r", Amount: 100, Currency: "EUR"}
	if _, err := a.CreateRefund(context.Background(), refund); err != nil {
		t.Fatal(err)
	}
	refund.Amount = 200
	_, err = a.CreateRefund(context.Background(), refund)
	providertest.AssertClass(t, err, provider.ErrKeyConflict)
}

// TestActionAnswersAboutOnePayment: what capture, cancel and the refund
// calls answer concerns one payment or refund, never the provider account.
// A 404 on one payment's action or one refund is not found (a provider-wide
// configuration problem would hold every payment's calls back); a 409 (the
// same key still in progress) is retried with that key, never a refusal: a
// refund refused so would be shown failed while it may go through.
func TestActionAnswersAboutOnePayment(t *testing.T) {
	ctx := context.Background()
	action := provider.ActionRequest{PaymentID: "pay_1", IdempotencyKey: "k/capture", Currency: "EUR"}
	refund := provider.RefundRequest{PaymentID: "pay_1", IdempotencyKey: "r", Reference: "ns.r", Amount: 100, Currency: "EUR"}
	calls := map[string]func(*kukopay.Adapter) error{
		"capture": func(a *kukopay.Adapter) error { _, err := a.Capture(ctx, action); return err },
		"cancel":  func(a *kukopay.Adapter) error { _, err := a.Cancel(ctx, action); return err },
		"refund":  func(a *kukopay.Adapter) error { _, err := a.CreateRefund(ctx, refund); return err },
	}
	for name, call := range calls {
		t.Run(name+": 409 with the key in progress is retryable", func(t *testing.T) {
			providertest.AssertClass(t, call(serve(t, kukoError(409, "idempotency_key_in_use"))), provider.ErrRetryable)
		})
	}
	for _, name := range []string{"capture", "cancel"} {
		t.Run(name+": 404 on the payment is not found", func(t *testing.T) {
			providertest.AssertClass(t, calls[name](serve(t, kukoError(404, "resource_missing"))), provider.ErrNotFound)
		})
	}
	t.Run("get refund: 404 on the refund is not found", func(t *testing.T) {
		_, err := serve(t, kukoError(404, "resource_missing")).GetRefund(ctx, "pay_1", "re_1")
		providertest.AssertClass(t, err, provider.ErrNotFound)
	})
}

// TestFindRefundTakesOnlyItsOwnRefund: the refund search filters by payment
// and reference again on its answer. An API that ignored either parameter
// would otherwise hand back another refund (of this payment under another
// reference, or another payment's under this one), and the Refund would
// adopt a refund it did not make.
func TestFindRefundTakesOnlyItsOwnRefund(t *testing.T) {
	list := `{"object":"list","data":[` +
		`{"id":"re_other_ref","object":"refund","payment":"pay_1","amount":100,"currency":"EUR","status":"succeeded","metadata":{"reference":"ns.other"}},` +
		`{"id":"re_other_pay","object":"refund","payment":"pay_2","amount":100,"currency":"EUR","status":"succeeded","metadata":{"reference":"ns.r"}}]}`
	a := serve(t, providertest.Answer(200, "application/json", list))
	got, err := a.FindRefund(context.Background(), "pay_1", "ns.r")
	if err == nil {
		t.Fatalf("found %s: another refund taken for this one", got.ID)
	}
	providertest.AssertClass(t, err, provider.ErrNotFound)
}
