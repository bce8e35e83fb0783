package kukopay_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/providertest"
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

// TestAnAnswerPaywardenCannotStoreIsUnreadable: a payment or refund whose
// currency is not three letters A-Z (once a lower-case code is read as upper
// case) or whose time lies past the year 9999 cannot be written to a status
// (the CRD's ^[A-Z]{3}$, RFC 3339). Such an answer is ErrUnreadableAnswer
// (Retryable: the outcome is unknown, the payment is read again), never a
// payment taken as it is, whose every status write the API server refuses.
func TestAnAnswerPaywardenCannotStoreIsUnreadable(t *testing.T) {
	payment := func(fields string) http.HandlerFunc {
		return providertest.Answer(http.StatusOK, "application/json", `{"id":"pay_1","object":"payment","out_trade_no":"ORD-1","amount":1999,`+fields+`}`)
	}
	refund := `{"id":"re_1","object":"refund","payment":"pay_1","amount":300,"currency":"u$d","status":"succeeded","metadata":{"reference":"ns.rf"}}`
	calls := []struct {
		name string
		call func(a *kukopay.Adapter) error
		h    http.HandlerFunc
	}{
		{"get: a currency of two letters", func(a *kukopay.Adapter) error { _, err := a.Get(ctx, "pay_1"); return err }, payment(`"currency":"US","status":"succeeded"`)},
		{"get: capture_before in the year 10000", func(a *kukopay.Adapter) error { _, err := a.Get(ctx, "pay_1"); return err },
			payment(`"currency":"USD","status":"requires_capture","capture_before":253402300800`)},
		{"get: next_action.expires_at in the year 10000", func(a *kukopay.Adapter) error { _, err := a.Get(ctx, "pay_1"); return err },
			payment(`"currency":"USD","status":"requires_action","next_action":{"type":"redirect_to_url","redirect_url":"https://pay.example/x","expires_at":253402300800}`)},
		{"capture: a currency with a digit", func(a *kukopay.Adapter) error {
			_, err := a.Capture(ctx, provider.ActionRequest{PaymentID: "pay_1", IdempotencyKey: "k"})
			return err
		}, payment(`"currency":"US1","status":"succeeded"`)},
		{"find: a currency of four letters", func(a *kukopay.Adapter) error { _, err := a.FindByMerchantReference(ctx, "ORD-1"); return err },
			providertest.Answer(http.StatusOK, "application/json", `{"object":"list","data":[{"id":"pay_1","out_trade_no":"ORD-1","amount":1999,"currency":"USDT","status":"succeeded"}]}`)},
		{"get refund", func(a *kukopay.Adapter) error { _, err := a.GetRefund(ctx, "pay_1", "re_1"); return err }, providertest.Answer(http.StatusOK, "application/json", refund)},
		{"create refund", func(a *kukopay.Adapter) error {
			_, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: "pay_1", IdempotencyKey: "k", Reference: "ns.rf", Amount: 300, Currency: "USD"})
			return err
		}, providertest.Answer(http.StatusOK, "application/json", refund)},
		{"find refund", func(a *kukopay.Adapter) error { _, err := a.FindRefund(ctx, "pay_1", "ns.rf"); return err },
			providertest.Answer(http.StatusOK, "application/json", `{"object":"list","data":[`+refund+`]}`)},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.call(serve(t, c.h))
			if !errors.Is(err, provider.ErrUnreadableAnswer) {
				t.Fatalf("err = %v, want ErrUnreadableAnswer", err)
			}
			providertest.AssertClass(t, err, provider.ErrRetryable)
		})
	}
	t.Run("a currency in lower case is read as its ISO code", func(t *testing.T) {
		p, err := serve(t, payment(`"currency":"usd","status":"succeeded"`)).Get(ctx, "pay_1")
		if err != nil || p.Currency != "USD" {
			t.Fatalf("%+v, %v: want USD", p, err)
		}
	})
}
