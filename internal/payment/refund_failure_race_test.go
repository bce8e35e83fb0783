package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// chargeRefunded is a Stripe-like charge.refunded (cumulative total) of
// pay_1; refundFailed a refund.failed of one of its refunds.
func chargeRefunded(id string, total int64, at time.Time) payment.Observation {
	return payment.FromEvent(provider.Event{
		ID: id, Type: "charge.refunded", Status: provider.StatusRefund, PaymentID: "pay_1",
		Amount: orderValue, Currency: orderCurrency, RefundedTotal: total, OccurredAt: at,
	}, v1alpha1.ViaWebhook)
}

func refundFailed(id, refund string, amount int64, at time.Time) payment.Observation {
	return payment.FromEvent(provider.Event{
		ID: id, Type: "refund.failed", Status: provider.StatusUnknown, PaymentID: "pay_1", OccurredAt: at,
		Refund: &provider.Refund{ID: refund, PaymentID: "pay_1", Status: provider.RefundFailed, RawStatus: "failed",
			Amount: amount, Currency: orderCurrency},
	}, v1alpha1.ViaWebhook)
}

// TestRefundFailureReadRaceClearsTheAsk: the read a failed refund asked
// for is answered after an event moved the refunded total (a late
// charge.refunded of another dashboard refund that happened before the
// failure). AfterRefundRead then takes no figure ("read again"), but it has
// already cleared refundFailureSeenAt: no Refund object stands for the failed
// refund, so nothing asks for the read again and the payment keeps a total
// the provider no longer has.
func TestRefundFailureReadRaceClearsTheAsk(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Hour)
	p := succeededPayment() // 1999 USD, pay_1

	// Dashboard refund A (1000) succeeded and was counted.
	p = store(p, payment.ApplyEvent(p, chargeRefunded("evt_ch_1000", 1000, now), now))
	// Dashboard refund B (500) succeeded too (provider total 1500), then A
	// failed (provider total 500). A's refund.failed arrives first.
	now = now.Add(time.Hour)
	p = store(p, payment.ApplyEvent(p, refundFailed("evt_re_a_failed", "re_a", 1000, now), now))
	if p.Status.RefundFailureSeenAt == nil {
		t.Fatal("fixture: the failed refund asks for no read")
	}
	step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, now)
	if step.Action != payment.Query || step.Read == nil || !step.Read.Lowers {
		t.Fatalf("fixture: plans %s (%s), want a read that may lower", step.Action, step.Why)
	}
	// While the read is out, B's charge.refunded (total 1500, from before
	// A failed) is applied.
	p = store(p, payment.ApplyEvent(p, chargeRefunded("evt_ch_1500", 1500, now.Add(-time.Minute)), now))
	if p.Status.AmountRefunded == nil || p.Status.AmountRefunded.Value != 1500 {
		t.Fatalf("fixture: amountRefunded %+v, want 1500", p.Status.AmountRefunded)
	}
	// The read answers the provider's present figure: 500.
	read := answer(provider.StatusSucceeded)
	read.Payment.RefundedTotal = 500
	p = store(p, payment.AfterRefundRead(p, pol, read, *step.Read, now.Add(time.Second)))

	// Whatever the payment does next: a read that may lower is due again.
	now = now.Add(time.Minute)
	for i := 0; i < 3; i++ {
		step = payment.Plan(p, pol, payment.Facts{RefundsListed: true}, now)
		if step.Action == payment.Write {
			p = store(p, step.Outcome)
			continue
		}
		if step.Action == payment.Query && step.Read != nil {
			p = store(p, payment.AfterRefundRead(p, pol, read, *step.Read, now))
			now = now.Add(time.Minute)
			continue
		}
		break
	}
	if got := p.Status.AmountRefunded; got == nil || got.Value != 500 {
		t.Errorf("provider's refunded total is 500, payment keeps amountRefunded %+v (phase %s, refundFailureSeenAt %v, last plan %s: %s): the read the failed refund asked for was dropped when an event moved the total meanwhile",
			got, p.Status.Phase, p.Status.RefundFailureSeenAt, step.Action, step.Why)
	}
}

// TestSecondRefundFailureDuringTheRead: a second refund fails while
// the read the first failure asked for is out. The second event is Stale
// ("a read is already due"), and the answer of the read sent before it
// clears the ask: the second failure is never read.
func TestSecondRefundFailureDuringTheRead(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Hour)
	p := succeededPayment()
	p = store(p, payment.ApplyEvent(p, chargeRefunded("evt_ch_1000", 1000, now), now)) // A 500 + B 500

	now = now.Add(time.Hour)
	p = store(p, payment.ApplyEvent(p, refundFailed("evt_a_failed", "re_a", 500, now), now))
	step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, now)
	if step.Action != payment.Query || step.Read == nil {
		t.Fatalf("fixture: plans %s (%s), want a read", step.Action, step.Why)
	}
	// The read goes out and the provider answers 500 (A taken back)...
	read := answer(provider.StatusSucceeded)
	read.Payment.RefundedTotal = 500
	// ...and before its answer is applied, B fails too (provider now 0).
	p = store(p, payment.ApplyEvent(p, refundFailed("evt_b_failed", "re_b", 500, now.Add(time.Second)), now.Add(time.Second)))
	p = store(p, payment.AfterRefundRead(p, pol, read, *step.Read, now.Add(2*time.Second)))

	now = now.Add(time.Minute)
	final := read
	final.Payment.RefundedTotal = 0
	for i := 0; i < 3; i++ {
		step = payment.Plan(p, pol, payment.Facts{RefundsListed: true}, now)
		if step.Action == payment.Write {
			p = store(p, step.Outcome)
			continue
		}
		if step.Action == payment.Query && step.Read != nil {
			p = store(p, payment.AfterRefundRead(p, pol, final, *step.Read, now))
			now = now.Add(time.Minute)
			continue
		}
		break
	}
	if got := p.Status.AmountRefunded; p.Status.Phase != v1alpha1.PhaseSucceeded || got != nil && got.Value != 0 {
		t.Errorf("both refunds failed (provider total 0): payment %s, amountRefunded %+v — the second failure, Stale behind the read already out, was never read",
			p.Status.Phase, got)
	}
}
