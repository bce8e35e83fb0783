package stripe_test

import (
	"errors"
	"testing"

	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestUnreadableAnswerToAWriteIsOutcomeUnknown: a write (create, capture, cancel,
// refund) that Stripe carried out but whose 2xx answer cannot be read — cut short,
// or well-formed JSON without the object — is "it happened, look it up": class
// Retryable with ErrUnreadableAnswer, which the core reads as NoAnswer (repeat with
// the key, which replays the stored answer; Stripe API reference, "Idempotent
// requests"), never a refusal that could fail a charged payment or a made refund.
func TestUnreadableAnswerToAWriteIsOutcomeUnknown(t *testing.T) {
	for _, body := range []struct{ name, body string }{{"cut in half", ""}, {"JSON without the object", "{}"}} {
		t.Run(body.name, func(t *testing.T) {
			e := startSim(t, paysim.Options{})
			garble := func(op string) {
				e.sim.SetFaults(paysim.Faults{GarbledAnswerRate: 1, GarbledBody: body.body, Operations: []string{op}})
			}
			check := func(what string, err error) {
				t.Helper()
				e.sim.SetFaults(paysim.Faults{})
				if c := payment.Classify(err); c != payment.NoAnswer || !errors.Is(err, provider.ErrUnreadableAnswer) {
					t.Errorf("%s: class %s (%v); want no answer, unreadable", what, c, err)
				}
			}
			authorized := func(ref string) provider.Payment {
				t.Helper()
				p, err := e.a.Create(ctx, offSessionReq("key-"+ref, ref, 1000, provider.CaptureManual))
				if err != nil || p.Status != provider.StatusAuthorized {
					t.Fatalf("authorized payment %s: %+v %v", ref, p, err)
				}
				return p
			}

			garble(paysim.OpCreate)
			_, err := e.a.Create(ctx, offSessionReq("key-charge", "charge", 1000, provider.CaptureAutomatic))
			check("off-session charge", err)

			garble(paysim.OpCreate)
			_, err = e.a.Create(ctx, checkoutReq("key-session", "session", 1000))
			check("checkout session", err)

			p := authorized("capture")
			garble(paysim.OpCapture)
			_, err = e.a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "key-capture:capture"})
			check("capture", err)

			p = authorized("cancel")
			garble(paysim.OpVoid)
			_, err = e.a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "key-cancel:cancel"})
			check("cancel", err)

			paid, err := e.a.Create(ctx, offSessionReq("key-refund", "refund", 1000, provider.CaptureAutomatic))
			if err != nil || paid.Status != provider.StatusSucceeded {
				t.Fatalf("paid payment: %+v %v", paid, err)
			}
			garble(paysim.OpRefund)
			_, err = e.a.CreateRefund(ctx, provider.RefundRequest{PaymentID: paid.ID, IdempotencyKey: "key-refund:1", Reference: "rf-1", Amount: 500, Currency: "EUR"})
			check("refund", err)

			if n := e.sim.Counters().APIFaults.Garbled; n != 5 {
				t.Errorf("%d garbled answers, want one per write", n)
			}
		})
	}
}
