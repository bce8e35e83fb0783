package paypal_test

import (
	"testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestUnreadableAnswerToAWriteIsOutcomeUnknown: a write PayPal carried out whose
// 2xx answer cannot be read (cut short, or JSON without the order, capture or
// refund) is "it happened, look it up": Retryable with ErrUnreadableAnswer (the
// core's NoAnswer: repeated with its PayPal-Request-Id, which replays the first
// answer), never a refusal and never an empty answer taken for the order.
func TestUnreadableAnswerToAWriteIsOutcomeUnknown(t *testing.T) {
	paysimtest.EachGarbledBody(t, 5, func(t *testing.T, body string) *paysim.Sim {
		srv, a := simAdapter(t, paysim.Options{})
		g := paysimtest.Garbler{Sim: srv.Sim, Body: body}

		g.Next(paysim.OpCreate)
		_, err := a.Create(ctx, provider.CreateRequest{IdempotencyKey: key("create"), MerchantReference: "ref-x", Amount: 1000, Currency: "USD", Checkout: &provider.Checkout{ReturnURL: "https://shop.example/return"}})
		g.Want(t, "create", err)

		p := approvedOrder(t, srv, a, provider.CaptureManual, 1000, "USD")
		g.Next(paysim.OpAuthorize)
		_, err = a.Authorize(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("authorize")})
		g.Want(t, "authorize", err)

		p = approvedOrder(t, srv, a, provider.CaptureAutomatic, 1000, "USD")
		g.Next(paysim.OpCapture)
		_, err = a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("capture")})
		g.Want(t, "order capture", err)

		p = authorizedOrder(t, srv, a, 1000, "USD")
		g.Next(paysim.OpCapture)
		_, err = a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("capture")})
		g.Want(t, "authorization capture", err)

		p = capturedOrder(t, srv, a, 1000)
		g.Next(paysim.OpRefund)
		_, err = a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("refund"), Reference: "ns.rf", Amount: 300, Currency: "USD"})
		g.Want(t, "refund", err)

		return srv.Sim
	})
}
