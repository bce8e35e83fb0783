package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// TestStripeAmounts pins Stripe's documented rules (docs.stripe.com/currencies).
func TestStripeAmounts(t *testing.T) {
	tests := []struct {
		minor  int64
		code   string
		stripe int64 // -1: refused
	}{
		{1999, "USD", 1999},
		{1999, "EUR", 1999},
		{500, "JPY", 500},                           // zero-decimal at Stripe and ISO
		{5000, "UGX", 5000},                         // zero-decimal at Stripe and ISO
		{150000, "MGA", 1500},                       // zero-decimal at Stripe, two decimals in ISO
		{150050, "MGA", -1},                         // a fraction of an ariary cannot be sent
		{5, "ISK", 500},                             // two decimals at Stripe, whole krónur only
		{5120, "KWD", 5120},                         // three decimals, last digit 0
		{5124, "KWD", -1},                           // three decimals, last digit not 0
		{1000, "TND", 1000},                         // three decimals
		{199950, "HUF", 199950},                     // two decimals for charges (zero-decimal for payouts only)
		{199950, "TWD", 199950},                     // two decimals for charges
		{100, "CLF", -1},                            // four ISO decimals: no Stripe representation
		{100, "UYI", -1},                            // zero ISO decimals, not a Stripe zero-decimal currency
		{100, "XYZ", -1},                            // not ISO
		{100, "usd", -1},                            // ISO codes are upper case here
		{100, "", -1},                               //
		{1 << 62, "ISK", -1},                        // would overflow
		{9007199254740993, "USD", 9007199254740993}, // past 2^53: no float on the way
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s", tt.minor, tt.code), func(t *testing.T) {
			got, err := stripe.ToStripe(tt.minor, tt.code)
			if tt.stripe < 0 {
				if err == nil {
					t.Fatalf("accepted as %d", got)
				}
				return
			}
			if err != nil || got != tt.stripe {
				t.Fatalf("ToStripe = %d, %v; want %d", got, err, tt.stripe)
			}
			back, err := stripe.FromStripe(got, strings.ToLower(tt.code))
			if err != nil || back != tt.minor {
				t.Fatalf("FromStripe(%d) = %d, %v", got, back, err)
			}
		})
	}
	t.Run("reading refuses a fraction of the ISO unit rather than rounding", func(t *testing.T) {
		if _, err := stripe.FromStripe(550, "isk"); err == nil {
			t.Fatal("550 ISK (5.50 kr) read as whole krónur")
		}
	})
}

// echoStripe answers a PaymentIntent create with a succeeded intent for the amount
// and currency it was sent, recording the amount exactly as it was on the wire.
type echoStripe struct {
	requests atomic.Int32
	wire     atomic.Value // string
}

func (e *echoStripe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.requests.Add(1)
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	amount, cur := r.PostForm.Get("amount"), r.PostForm.Get("currency")
	e.wire.Store(amount)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"pi_1","object":"payment_intent","amount":%s,"amount_received":%s,"currency":%q,"status":"succeeded","metadata":{"merchant_reference":"ORD-1"}}`, amount, amount, cur)
}

// TestEveryCurrencyAcceptedRoundTrips: for every ISO currency Create either refuses
// the amount before any request (AmountNotRepresentable) or sends Stripe's amount and
// reads the same ISO amount back, from the answer and from a webhook.
func TestEveryCurrencyAcceptedRoundTrips(t *testing.T) {
	accepted, refused := 0, 0
	for _, code := range currency.Codes() {
		exp, _ := currency.Exponent(code)
		for _, minor := range []int64{currency.Pow10(exp) * 1999, 1, 10, 199950} {
			want, toErr := stripe.ToStripe(minor, code)
			t.Run(fmt.Sprintf("%d %s", minor, code), func(t *testing.T) {
				srv := &echoStripe{}
				a := serve(t, srv.ServeHTTP)
				p, err := a.Create(context.Background(), provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ORD-1", Amount: minor, Currency: code})
				if toErr != nil {
					refused++
					providertest.AssertClass(t, err, provider.ErrNonRetryable)
					if !errors.Is(err, provider.ErrAmountNotRepresentable) {
						t.Errorf("err %v does not wrap ErrAmountNotRepresentable", err)
					}
					if n := srv.requests.Load(); n != 0 {
						t.Errorf("%d requests sent for a refused amount", n)
					}
					return
				}
				accepted++
				if err != nil {
					t.Fatal(err)
				}
				if got := srv.wire.Load(); got != fmt.Sprint(want) {
					t.Errorf("sent amount %v, want %d", got, want)
				}
				if p.Amount != minor || p.Currency != code {
					t.Errorf("read back %d %s", p.Amount, p.Currency)
				}
				ev, err := stripe.ParseEvent([]byte(fmt.Sprintf(`{"id":"evt_1","object":"event","type":"payment_intent.succeeded","created":1767225600,"data":{"object":{"id":"pi_1","object":"payment_intent","amount":%[1]d,"amount_received":%[1]d,"currency":%[2]q,"status":"succeeded"}}}`, want, strings.ToLower(code))))
				if err != nil || ev.Amount != minor || ev.Currency != code {
					t.Errorf("event read back %d %s %v", ev.Amount, ev.Currency, err)
				}
			})
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("accepted %d, refused %d", accepted, refused)
	}
}

func TestActionsRefuseUnrepresentableAmountsBeforeAnyCall(t *testing.T) {
	srv := &echoStripe{}
	a := serve(t, srv.ServeHTTP)
	ctx := context.Background()
	_, err := a.Capture(ctx, provider.ActionRequest{PaymentID: "pi_1", IdempotencyKey: "k", Amount: 5124, Currency: "KWD"})
	if !errors.Is(err, provider.ErrAmountNotRepresentable) {
		t.Fatalf("capture: %v", err)
	}
	_, err = a.CreateRefund(ctx, provider.RefundRequest{PaymentID: "pi_1", IdempotencyKey: "k", Amount: 150050, Currency: "MGA"})
	if !errors.Is(err, provider.ErrAmountNotRepresentable) {
		t.Fatalf("refund: %v", err)
	}
	if n := srv.requests.Load(); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}
