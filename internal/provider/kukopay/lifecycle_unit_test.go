package kukopay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

func TestPaymentLifecycleStatuses(t *testing.T) {
	exp := now.Add(7 * 24 * time.Hour)
	tests := []struct {
		name string
		obj  kukopay.PaymentObject
		want provider.Payment
	}{
		{"requires_action is Pending with the payer's link",
			kukopay.PaymentObject{ID: "p", Status: "requires_action", Amount: 1000, Currency: "EUR", NextAction: &kukopay.NextAction{Type: "redirect_to_url", RedirectURL: "https://pay.example/x", ExpiresAt: now.Unix()}},
			provider.Payment{ID: "p", Status: provider.StatusPending, RawStatus: "requires_action", Amount: 1000, Currency: "EUR", CustomerAction: &provider.CustomerAction{URL: "https://pay.example/x", ExpiresAt: now}}},
		{"requires_capture is Authorized for amount_capturable until capture_before",
			kukopay.PaymentObject{ID: "p", Status: "requires_capture", Amount: 1000, AmountCapturable: 900, Currency: "EUR", CaptureBefore: exp.Unix()},
			provider.Payment{ID: "p", Status: provider.StatusAuthorized, RawStatus: "requires_capture", Amount: 900, Currency: "EUR", AuthorizationExpiresAt: exp}},
		{"canceled is Canceled",
			kukopay.PaymentObject{ID: "p", Status: "canceled", Amount: 1000, Currency: "EUR", CancellationReason: "requested_by_customer"},
			provider.Payment{ID: "p", Status: provider.StatusCanceled, RawStatus: "canceled", Amount: 1000, Currency: "EUR"}},
		{"an authorization expired uncaptured is Expired with AuthorizationExpired",
			kukopay.PaymentObject{ID: "p", Status: "expired", Amount: 1000, Currency: "EUR", CancellationReason: kukopay.CancellationAuthorizationExpired},
			provider.Payment{ID: "p", Status: provider.StatusExpired, RawStatus: "expired", Amount: 1000, Currency: "EUR", FailureCode: provider.FailureAuthorizationExpired, FailureMessage: "the authorization expired before it was captured"}},
		{"an unpaid payment that expired has no failure code",
			kukopay.PaymentObject{ID: "p", Status: "expired", Amount: 1000, Currency: "EUR", CancellationReason: "checkout_expired"},
			provider.Payment{ID: "p", Status: provider.StatusExpired, RawStatus: "expired", Amount: 1000, Currency: "EUR"}},
		{"a partially refunded payment's amount is what was received",
			kukopay.PaymentObject{ID: "p", Status: "partially_refunded", Amount: 1000, AmountReceived: 990, AmountRefunded: 300, Currency: "EUR"},
			provider.Payment{ID: "p", Status: provider.StatusRefund, RawStatus: "partially_refunded", Amount: 990, RefundedTotal: 300, Currency: "EUR"}},
		{"a currency in lower case is its ISO code",
			kukopay.PaymentObject{ID: "p", Status: "succeeded", Amount: 1000, AmountReceived: 1000, Currency: "eur"},
			provider.Payment{ID: "p", Status: provider.StatusSucceeded, RawStatus: "succeeded", Amount: 1000, Currency: "EUR"}},
		{"a pending payment's amount is what was asked",
			kukopay.PaymentObject{ID: "p", Status: "processing", Amount: 1000, AmountReceived: 990, Currency: "EUR"},
			provider.Payment{ID: "p", Status: provider.StatusProcessing, RawStatus: "processing", Amount: 1000, Currency: "EUR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.obj.Normalize()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.CustomerAction) != fmt.Sprint(tt.want.CustomerAction) {
				t.Fatalf("action %+v, want %+v", got.CustomerAction, tt.want.CustomerAction)
			}
			got.CustomerAction, tt.want.CustomerAction = nil, nil
			if got != tt.want {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestRefundStatusTable(t *testing.T) {
	want := map[string]provider.RefundStatus{"pending": provider.RefundPending, "succeeded": provider.RefundSucceeded, "failed": provider.RefundFailed, "canceled": provider.RefundFailed}
	providertest.RefundStatusTable(t, want, kukopay.RefundStatuses(), kukopay.MapRefundStatus, "requires_action")
}
