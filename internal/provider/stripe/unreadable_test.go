package stripe_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

// TestUnreadableAnswerToAWriteIsOutcomeUnknown: a write (create, capture, cancel,
// refund) that Stripe carried out but whose 2xx answer cannot be read — cut short,
// or well-formed JSON without the object — is "it happened, look it up": class
// Retryable with ErrUnreadableAnswer, which the core reads as NoAnswer (repeat with
// the key, which replays the stored answer; Stripe API reference, "Idempotent
// requests"), never a refusal that could fail a charged payment or a made refund.
func TestUnreadableAnswerToAWriteIsOutcomeUnknown(t *testing.T) {
	paysimtest.EachGarbledBody(t, 5, func(t *testing.T, body string) *paysim.Sim {
		e := startSim(t, paysim.Options{})
		g := paysimtest.Garbler{Sim: e.sim, Body: body}
		authorized := func(ref string) provider.Payment {
			t.Helper()
			p, err := e.a.Create(ctx, offSessionReq("key-"+ref, ref, 1000, provider.CaptureManual))
			if err != nil || p.Status != provider.StatusAuthorized {
				t.Fatalf("authorized payment %s: %+v %v", ref, p, err)
			}
			return p
		}

		g.Next(paysim.OpCreate)
		_, err := e.a.Create(ctx, offSessionReq("key-charge", "charge", 1000, provider.CaptureAutomatic))
		g.Want(t, "off-session charge", err)

		g.Next(paysim.OpCreate)
		_, err = e.a.Create(ctx, checkoutReq("key-session", "session", 1000))
		g.Want(t, "checkout session", err)

		p := authorized("capture")
		g.Next(paysim.OpCapture)
		_, err = e.a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "key-capture:capture"})
		g.Want(t, "capture", err)

		p = authorized("cancel")
		g.Next(paysim.OpVoid)
		_, err = e.a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "key-cancel:cancel"})
		g.Want(t, "cancel", err)

		paid, err := e.a.Create(ctx, offSessionReq("key-refund", "refund", 1000, provider.CaptureAutomatic))
		if err != nil || paid.Status != provider.StatusSucceeded {
			t.Fatalf("paid payment: %+v %v", paid, err)
		}
		g.Next(paysim.OpRefund)
		_, err = e.a.CreateRefund(ctx, provider.RefundRequest{PaymentID: paid.ID, IdempotencyKey: "key-refund:1", Reference: "rf-1", Amount: 500, Currency: "EUR"})
		g.Want(t, "refund", err)

		return e.sim
	})
}

// TestAnAnswerWithATimePaywardenCannotStoreIsUnreadable: a PaymentIntent whose
// card authorization ends (capture_before), or a Checkout Session whose page
// expires (expires_at), after the year 9999 cannot be written to a status
// (RFC 3339). Such an answer to a read is unreadable, as one with an amount
// with no ISO equivalent (answerError: NonRetryable, reading again reads the
// same), never a payment whose every status write the API server refuses.
func TestAnAnswerWithATimePaywardenCannotStoreIsUnreadable(t *testing.T) {
	for name, answer := range map[string]struct{ id, body string }{
		"a PaymentIntent authorized until the year 10000": {pi, intent("requires_capture", `,"latest_charge":{"id":"ch_1","payment_method_details":{"card":{"capture_before":253402300800}}}`)},
		"a Checkout Session open until the year 10000":    {cs, `{"id":"` + cs + `","object":"checkout.session","status":"open","url":"https://checkout.stripe.com/c/pay/x","expires_at":253402300800,"amount_total":1000,"currency":"eur"}`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := serve(t, stripeAnswer(http.StatusOK, answer.body)).Get(ctx, answer.id)
			if err == nil || !strings.Contains(err.Error(), "unreadable answer") || !strings.Contains(err.Error(), "outside the years 0000-9999") {
				t.Fatalf("err = %v, want an unreadable answer for its time", err)
			}
			providertest.AssertClass(t, err, provider.ErrNonRetryable)
		})
	}
}
