package paypal_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

var ctx = context.Background()

func TestOrderLinksByRel(t *testing.T) {
	for _, tt := range []struct {
		name  string
		links []paypal.Link
		want  string
	}{
		{"payer-action wins over approve", []paypal.Link{{Rel: "approve", Href: "a"}, {Rel: "payer-action", Href: "p"}}, "p"},
		{"approve for orders created without a payment source", []paypal.Link{{Rel: "self", Href: "s"}, {Rel: "approve", Href: "a"}}, "a"},
		{"no link, no action", []paypal.Link{{Rel: "self", Href: "s"}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := paypal.NormalizeOrder(paypal.Order{ID: "O", Status: "PAYER_ACTION_REQUIRED", Links: tt.links})
			got := ""
			if p.CustomerAction != nil {
				got = p.CustomerAction.URL
			}
			if got != tt.want {
				t.Fatalf("action %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("an approved order has no payer action left", func(t *testing.T) {
		p := paypal.NormalizeOrder(paypal.Order{ID: "O", Status: "APPROVED", Links: []paypal.Link{{Rel: "approve", Href: "a"}}})
		if p.CustomerAction != nil || p.Status != provider.StatusApproved {
			t.Fatalf("%+v", p)
		}
	})
}

func TestAuthorizationStatusTable(t *testing.T) {
	want := map[string]provider.Status{
		"CREATED": provider.StatusAuthorized, "PENDING": provider.StatusAuthorized, "VOIDED": provider.StatusCanceled,
		"EXPIRED": provider.StatusExpired, "DENIED": provider.StatusFailed,
	}
	table := paypal.AuthorizationStatuses()
	if len(table) != len(want) {
		t.Errorf("table has %d rows, test covers %d", len(table), len(want))
	}
	auth := func(st string) paypal.Order {
		return paypal.Order{ID: "O", Status: "COMPLETED", Intent: "AUTHORIZE", PurchaseUnits: []paypal.PurchaseUnit{{
			InvoiceID: "ref", Amount: paypal.Money{CurrencyCode: "USD", Value: "20.00"},
			Payments: &paypal.Payments{Authorizations: []paypal.Authorization{{
				ID: "A1", Status: st, Amount: paypal.Money{CurrencyCode: "USD", Value: "18.00"}, ExpirationTime: "2026-10-20T12:00:00Z",
			}}},
		}}}
	}
	for raw, st := range want {
		t.Run(fmt.Sprintf("COMPLETED order with a %s authorization and no capture is %s", raw, st), func(t *testing.T) {
			p := paypal.NormalizeOrder(auth(raw))
			if p.Status != st || p.RawStatus != "COMPLETED/authorization:"+raw || table[raw] != st {
				t.Fatalf("got %s %q", p.Status, p.RawStatus)
			}
		})
	}
	t.Run("an Authorized order reports the authorized amount and its expiry", func(t *testing.T) {
		p := paypal.NormalizeOrder(auth("CREATED"))
		if p.Amount != 1800 || p.Currency != "USD" || !p.AuthorizationExpiresAt.Equal(time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC)) {
			t.Fatalf("%+v", p)
		}
	})
	t.Run("an expired authorization has the AuthorizationExpired failure code", func(t *testing.T) {
		p := paypal.NormalizeOrder(auth("EXPIRED"))
		if p.Status != provider.StatusExpired || p.FailureCode != provider.FailureAuthorizationExpired {
			t.Fatalf("%+v", p)
		}
	})
	for _, raw := range []string{"CAPTURED", "PARTIALLY_CAPTURED"} {
		t.Run(raw+" follows the capture", func(t *testing.T) {
			o := auth(raw)
			o.PurchaseUnits[0].Payments.Captures = []paypal.Capture{{ID: "C", Status: "COMPLETED", Amount: paypal.Money{CurrencyCode: "USD", Value: "12.00"}}}
			p := paypal.NormalizeOrder(o)
			if p.Status != provider.StatusSucceeded || p.Amount != 1200 || p.RawStatus != "COMPLETED/COMPLETED" {
				t.Fatalf("%+v", p)
			}
		})
		t.Run(raw+" without its capture is Unknown, not paid", func(t *testing.T) {
			if p := paypal.NormalizeOrder(auth(raw)); p.Status != provider.StatusUnknown {
				t.Fatalf("%+v", p)
			}
		})
	}
}

func TestRefundStatusTable(t *testing.T) {
	want := map[string]provider.RefundStatus{
		"COMPLETED": provider.RefundSucceeded, "PENDING": provider.RefundPending, "FAILED": provider.RefundFailed, "CANCELLED": provider.RefundFailed,
	}
	providertest.RefundStatusTable(t, want, paypal.RefundStatuses(), paypal.MapRefundStatus, "ON_HOLD")
}

// TestAlreadyCapturedRaceIsState: PayPal says "already captured" to the capture call
// itself (another capture won between the read and the call): not an error, the
// order's state.
func TestAlreadyCapturedRaceIsState(t *testing.T) {
	approved := `{"id":"O1","status":"APPROVED","intent":"CAPTURE","purchase_units":[{"invoice_id":"r","amount":{"currency_code":"USD","value":"10.00"}}]}`
	authorized := `{"id":"O1","status":"COMPLETED","intent":"AUTHORIZE","purchase_units":[{"invoice_id":"r","amount":{"currency_code":"USD","value":"10.00"},"payments":{"authorizations":[{"id":"A1","status":"CREATED","amount":{"currency_code":"USD","value":"10.00"}}]}}]}`
	captured := `{"id":"O1","status":"COMPLETED","intent":"CAPTURE","purchase_units":[{"invoice_id":"r","amount":{"currency_code":"USD","value":"10.00"},"payments":{"captures":[{"id":"C1","status":"COMPLETED","amount":{"currency_code":"USD","value":"10.00"}}]}}]}`
	refusal := func(issue string) string {
		return `{"name":"UNPROCESSABLE_ENTITY","message":"The requested action could not be performed.","details":[{"issue":"` + issue + `"}]}`
	}
	for _, tt := range []struct {
		name, before, path, issue string
	}{
		{"ORDER_ALREADY_CAPTURED", approved, "/v2/checkout/orders/O1/capture", paypal.IssueOrderAlreadyCaptured},
		{"AUTHORIZATION_ALREADY_CAPTURED", authorized, "/v2/payments/authorizations/A1/capture", paypal.IssueAuthorizationAlreadyCaptured},
	} {
		t.Run(tt.name+" is state, not an error", func(t *testing.T) {
			var gets atomic.Int32
			f := &fakePayPal{token: issueToken, api: func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && gets.Add(1) == 1:
					answer(200, tt.before)(w, r)
				case r.Method == http.MethodGet:
					answer(200, captured)(w, r)
				case r.URL.Path == tt.path:
					answer(422, refusal(tt.issue))(w, r)
				default:
					t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
					answer(500, `{}`)(w, r)
				}
			}}
			got, err := fakeAdapter(t, f).Capture(ctx, provider.ActionRequest{PaymentID: "O1", IdempotencyKey: "k"})
			if err != nil || got.Status != provider.StatusSucceeded || gets.Load() != 2 {
				t.Fatalf("%+v %v (%d reads)", got, err, gets.Load())
			}
		})
	}
	t.Run("another refusal keeps its issue as the error code", func(t *testing.T) {
		f := &fakePayPal{token: issueToken, api: func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet {
				answer(200, approved)(w, r)
				return
			}
			answer(422, refusal("PAYER_ACTION_REQUIRED"))(w, r)
		}}
		_, err := fakeAdapter(t, f).Capture(ctx, provider.ActionRequest{PaymentID: "O1", IdempotencyKey: "k"})
		var pe *provider.Error
		if !errors.Is(err, provider.ErrNonRetryable) || !errors.As(err, &pe) || pe.Code != "PAYER_ACTION_REQUIRED" || pe.StatusCode != 422 {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a void answered PREVIOUSLY_VOIDED is state, not an error", func(t *testing.T) {
		var gets atomic.Int32
		voided := strings.Replace(authorized, `"status":"CREATED"`, `"status":"VOIDED"`, 1)
		f := &fakePayPal{token: issueToken, api: func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.Method == http.MethodGet && gets.Add(1) == 1:
				answer(200, authorized)(w, r)
			case r.Method == http.MethodGet:
				answer(200, voided)(w, r)
			default:
				answer(422, refusal(paypal.IssuePreviouslyVoided))(w, r)
			}
		}}
		got, err := fakeAdapter(t, f).Cancel(ctx, provider.ActionRequest{PaymentID: "O1", IdempotencyKey: "k"})
		if err != nil || got.Status != provider.StatusCanceled {
			t.Fatalf("%+v %v", got, err)
		}
	})
}

func TestLifecycleCapabilities(t *testing.T) {
	want := provider.Lifecycle{Checkout: true, ManualCapture: true, PartialCapture: true, AuthorizeStep: true, Cancel: true, Refunds: true, OrderLifetime: 3 * time.Hour}
	if got := paypal.Capabilities().Lifecycle; got != want {
		t.Fatalf("%+v", got)
	}
}
