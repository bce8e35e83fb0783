package generic_test

import (
	"testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestUnreadableAnswerToAWriteIsOutcomeUnknown: a create or refund the provider
// accepted (202) whose answer cannot be read (cut short, or JSON without the job or
// refund) is "it happened, look it up": Retryable with ErrUnreadableAnswer (the
// core's NoAnswer), never a refusal and never an empty answer taken for the job.
func TestUnreadableAnswerToAWriteIsOutcomeUnknown(t *testing.T) {
	paysimtest.EachGarbledBody(t, 2, func(t *testing.T, body string) *paysim.Sim {
		srv, a := simAdapter(t, paysim.Options{})
		g := paysimtest.Garbler{Sim: srv.Sim, Body: body}

		g.Next(paysim.OpCreate)
		_, err := a.Create(ctx, provider.CreateRequest{IdempotencyKey: key("create"), MerchantReference: key("ref"), Amount: 1000, Currency: "USD", Checkout: &provider.Checkout{ReturnURL: "https://shop.example/r"}})
		g.Want(t, "create", err)

		p := paidJob(t, srv, a, 1000)
		g.Next(paysim.OpRefund)
		_, err = a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("refund"), Reference: "ns.rf", Amount: 300, Currency: "USD"})
		g.Want(t, "refund", err)

		return srv.Sim
	})
}
