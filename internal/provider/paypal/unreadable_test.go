package paypal_test

import (
	"errors"
	"testing"

	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestUnreadableAnswerToAWriteIsOutcomeUnknown: a write PayPal carried out whose
// 2xx answer cannot be read (cut short, or JSON without the order, capture or
// refund) is "it happened, look it up": Retryable with ErrUnreadableAnswer (the
// core's NoAnswer: repeated with its PayPal-Request-Id, which replays the first
// answer), never a refusal and never an empty answer taken for the order.
func TestUnreadableAnswerToAWriteIsOutcomeUnknown(t *testing.T) {
	for _, body := range []struct{ name, body string }{{"cut in half", ""}, {"JSON without the object", "{}"}} {
		t.Run(body.name, func(t *testing.T) {
			srv, a := simAdapter(t, paysim.Options{})
			garble := func(op string) {
				srv.Sim.SetFaults(paysim.Faults{GarbledAnswerRate: 1, GarbledBody: body.body, Operations: []string{op}})
			}
			check := func(what string, err error) {
				t.Helper()
				srv.Sim.SetFaults(paysim.Faults{})
				if c := payment.Classify(err); c != payment.NoAnswer || !errors.Is(err, provider.ErrUnreadableAnswer) {
					t.Errorf("%s: class %s (%v); want no answer, unreadable", what, c, err)
				}
			}
			approved := func(capture provider.CaptureMethod) provider.Payment {
				t.Helper()
				p := createOrder(t, a, capture, 1000, "USD")
				if err := srv.Sim.Approve(paysim.PayPal, p.ID); err != nil {
					t.Fatal(err)
				}
				return p
			}

			garble(paysim.OpCreate)
			_, err := a.Create(ctx, provider.CreateRequest{IdempotencyKey: key("create"), MerchantReference: "ref-x", Amount: 1000, Currency: "USD", Checkout: &provider.Checkout{ReturnURL: "https://shop.example/return"}})
			check("create", err)

			p := approved(provider.CaptureManual)
			garble(paysim.OpAuthorize)
			_, err = a.Authorize(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("authorize")})
			check("authorize", err)

			p = approved(provider.CaptureAutomatic)
			garble(paysim.OpCapture)
			_, err = a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("capture")})
			check("order capture", err)

			p = authorizedOrder(t, srv, a, 1000, "USD")
			garble(paysim.OpCapture)
			_, err = a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("capture")})
			check("authorization capture", err)

			p = approved(provider.CaptureAutomatic)
			captured, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("capture")})
			if err != nil || captured.Status != provider.StatusSucceeded {
				t.Fatalf("capture: %+v %v", captured, err)
			}
			garble(paysim.OpRefund)
			_, err = a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("refund"), Reference: "ns.rf", Amount: 300, Currency: "USD"})
			check("refund", err)

			if n := srv.Sim.Counters().APIFaults.Garbled; n != 5 {
				t.Errorf("%d garbled answers, want one per write", n)
			}
		})
	}
}
