package kukopay_test

import (
	"errors"
	"testing"

	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestUnreadableAnswerToAWriteIsOutcomeUnknown: a write KukoPay carried out whose
// 2xx answer cannot be read (cut short, or JSON without the object) is "it
// happened, look it up": Retryable with ErrUnreadableAnswer (the core's NoAnswer:
// repeated with its Idempotency-Key, which replays the first answer), never a
// refusal and never an empty answer taken for the payment.
func TestUnreadableAnswerToAWriteIsOutcomeUnknown(t *testing.T) {
	for _, body := range []struct{ name, body string }{{"cut in half", ""}, {"JSON without the object", "{}"}} {
		t.Run(body.name, func(t *testing.T) {
			srv, a, _ := simAdapter(t, paysim.Options{})
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
			garble(paysim.OpCreate)
			_, err := a.Create(ctx, provider.CreateRequest{IdempotencyKey: key("create"), MerchantReference: key("ORD"), Amount: 1000, Currency: "EUR", Checkout: shop})
			check("create", err)

			p := authorized(t, srv, a, 1000)
			garble(paysim.OpCapture)
			_, err = a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("capture")})
			check("capture", err)

			p = authorized(t, srv, a, 1000)
			garble(paysim.OpVoid)
			_, err = a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("cancel")})
			check("cancel", err)

			p = paid(t, srv, a, 1000)
			garble(paysim.OpRefund)
			_, err = a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("refund"), Reference: "ns.rf", Amount: 300, Currency: "EUR"})
			check("refund", err)

			if n := srv.Sim.Counters().APIFaults.Garbled; n != 4 {
				t.Errorf("%d garbled answers, want one per write", n)
			}
		})
	}
}
