package kukopay_test

import (
	"testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestUnreadableAnswerToAWriteIsOutcomeUnknown: a write KukoPay carried out whose
// 2xx answer cannot be read (cut short, or JSON without the object) is "it
// happened, look it up": Retryable with ErrUnreadableAnswer (the core's NoAnswer:
// repeated with its Idempotency-Key, which replays the first answer), never a
// refusal and never an empty answer taken for the payment.
func TestUnreadableAnswerToAWriteIsOutcomeUnknown(t *testing.T) {
	paysimtest.EachGarbledBody(t, 4, func(t *testing.T, body string) *paysim.Sim {
		srv, a, _ := simAdapter(t, paysim.Options{})
		g := paysimtest.Garbler{Sim: srv.Sim, Body: body}

		g.Next(paysim.OpCreate)
		_, err := a.Create(ctx, provider.CreateRequest{IdempotencyKey: key("create"), MerchantReference: key("ORD"), Amount: 1000, Currency: "EUR", Checkout: shop})
		g.Want(t, "create", err)

		p := authorized(t, srv, a, 1000)
		g.Next(paysim.OpCapture)
		_, err = a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("capture")})
		g.Want(t, "capture", err)

		p = authorized(t, srv, a, 1000)
		g.Next(paysim.OpVoid)
		_, err = a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("cancel")})
		g.Want(t, "cancel", err)

		p = paid(t, srv, a, 1000)
		g.Next(paysim.OpRefund)
		_, err = a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("refund"), Reference: "ns.rf", Amount: 300, Currency: "EUR"})
		g.Want(t, "refund", err)

		return srv.Sim
	})
}
