package payment_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestAReversedRefundNoRefundTracksLowersTheTotal: Stripe documents that a
// refund can fail after it succeeded; the charge's amount_refunded goes down
// and the money is back with the merchant (SPEC §12.2, §11.7: the Payment's
// refunded total comes from the provider's cumulative figure). When no
// Refund object stands for the reversed refund (made in the provider's
// dashboard, or a paywarden Refund deleted after its payment counted it),
// the reversal event still makes the payment read the provider's figure
// (refundFailureSeenAt): it goes back to Succeeded, and a new Refund that
// pays the customer back is not refused OverRefund on the stale total.
func TestAReversedRefundNoRefundTracksLowersTheTotal(t *testing.T) {
	for _, tc := range []struct {
		name    string
		counted []types.UID // the payment's refundsCounted before the reversal
	}{
		{"a dashboard refund", nil},
		{"a paywarden Refund deleted after it was counted", []types.UID{"uid-gone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := testPolicy()
			now := t0.Add(time.Hour)
			p := succeededPayment() // 1999 USD, pay_1
			p.Status.RefundsCounted = tc.counted

			// The provider refunds everything (charge.refunded, cumulative 1999).
			refunded := payment.FromEvent(provider.Event{
				ID: "evt_refunded", Type: "charge.refunded", Status: provider.StatusRefund, PaymentID: "pay_1",
				Amount: orderValue, Currency: orderCurrency, RefundedTotal: orderValue, OccurredAt: now,
			}, v1alpha1.ViaWebhook)
			p = store(p, payment.ApplyEvent(p, refunded, now))
			if p.Status.Phase != v1alpha1.PhaseRefunded {
				t.Fatalf("fixture: phase %s, want Refunded", p.Status.Phase)
			}

			// A day later the refund fails: Stripe takes it back out of the
			// charge's amount_refunded (now 0) and sends refund.failed.
			now = now.Add(24 * time.Hour)
			failed := payment.FromEvent(provider.Event{
				ID: "evt_refund_failed", Type: "refund.failed", Status: provider.StatusUnknown, PaymentID: "pay_1",
				Amount: orderValue, Currency: orderCurrency, OccurredAt: now,
				Refund: &provider.Refund{ID: "re_1", PaymentID: "pay_1", Status: provider.RefundFailed, RawStatus: "failed",
					Amount: orderValue, Currency: orderCurrency, FailureCode: "expired_or_canceled_card"},
			}, v1alpha1.ViaWebhook)
			out := payment.ApplyEvent(p, failed, now)
			p = store(p, out)

			// Whatever the payment does next on its own (no Refund object
			// stands for the reversed refund): a read of the provider's
			// figure, if it asks for one, answers 0.
			for i := 0; i < 3; i++ {
				step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, now)
				if step.Action == payment.Write {
					p = store(p, step.Outcome)
					continue
				}
				if step.Action == payment.Query && step.Read != nil {
					p = store(p, payment.AfterRefundRead(p, pol, answer(provider.StatusSucceeded), *step.Read, now))
					now = now.Add(time.Minute)
					continue
				}
				t.Logf("payment plans %s (%s)", step.Action, step.Why)
				break
			}

			// The merchant refunds the customer again with a Refund.
			again := newRefund("again", 0, now)
			_, wait, refusal := payment.RefundAllowance(again, p, nil)
			if p.Status.Phase != v1alpha1.PhaseSucceeded || strings.HasPrefix(refusal, v1alpha1.ReasonOverRefund) {
				t.Errorf("after the provider took the refund back (cumulative refunded 0): payment %s, amountRefunded %+v; a new Refund: wait %q refusal %q — the money the customer is owed cannot be refunded, and the payment says it was",
					p.Status.Phase, p.Status.AmountRefunded, wait, refusal)
			}
		})
	}
}

// TestARefundFailureAsksForOneRead: an event about a failed refund asks for
// a read of the provider's refunded total, and only of a payment whose total
// counts a refund; the answered read clears the ask, so the payment does not
// read the provider again and again. A second failure before the read is
// planned is covered by that read; one seen after it was planned (the read
// may have been answered before that refund failed) asks for another.
func TestARefundFailureAsksForOneRead(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Hour)
	failed := func(id string, at time.Time) payment.Observation {
		return payment.FromEvent(provider.Event{
			ID: id, Type: "refund.failed", Status: provider.StatusUnknown, PaymentID: "pay_1", OccurredAt: at,
			Refund: &provider.Refund{ID: "re_" + id, PaymentID: "pay_1", Status: provider.RefundFailed, Amount: 500, Currency: orderCurrency},
		}, v1alpha1.ViaWebhook)
	}

	// A payment whose total counts no refund: nothing to lower, no read.
	paid := succeededPayment()
	if out := payment.ApplyEvent(paid, failed("evt_a", now), now); out.Status.RefundFailureSeenAt != nil {
		t.Errorf("a failed refund of a payment that counts none asks for a read")
	}

	p := succeededPayment()
	p.Status.Phase = v1alpha1.PhasePartiallyRefunded
	p.Status.AmountRefunded = &v1alpha1.Money{Value: 1000, Currency: orderCurrency}
	p = store(p, payment.ApplyEvent(p, failed("evt_b", now), now))
	first := p.Status.RefundFailureSeenAt
	if first == nil {
		t.Fatal("a failed refund of a payment that counts 1000 refunded asks for no read")
	}
	// A second failure in the same second: a later mark all the same.
	p = store(p, payment.ApplyEvent(p, failed("evt_c", now), now.Add(100*time.Millisecond)))
	if seen := p.Status.RefundFailureSeenAt; seen == nil || !seen.After(first.Time) {
		t.Fatalf("a second failure does not renew the ask: %v after %v", seen, first)
	}

	read := func(total int64, at time.Time) {
		t.Helper()
		step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, at)
		if step.Action != payment.Query || step.Read == nil || !step.Read.Lowers {
			t.Fatalf("the payment plans %s (%s), want a read of its refunded total that may lower it", step.Action, step.Why)
		}
		call := answer(provider.StatusSucceeded)
		call.Payment.RefundedTotal = total
		p = store(p, payment.AfterRefundRead(p, pol, call, *step.Read, at))
	}
	// The provider still counts 1000 (the failed refunds were others).
	read(1000, now.Add(2*time.Second))
	if p.Status.RefundFailureSeenAt != nil || p.Status.Phase != v1alpha1.PhasePartiallyRefunded {
		t.Fatalf("after the read: refundFailureSeenAt %v, phase %s", p.Status.RefundFailureSeenAt, p.Status.Phase)
	}
	if step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, now.Add(3*time.Second)); step.Action == payment.Query {
		t.Errorf("after the read the payment reads again: %s", step.Why)
	}

	// A failure seen while a read is out: that read does not clear it.
	p = store(p, payment.ApplyEvent(p, failed("evt_d", now), now.Add(4*time.Second)))
	step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, now.Add(5*time.Second))
	p = store(p, payment.ApplyEvent(p, failed("evt_e", now), now.Add(6*time.Second)))
	call := answer(provider.StatusSucceeded)
	call.Payment.RefundedTotal = 500
	p = store(p, payment.AfterRefundRead(p, pol, call, *step.Read, now.Add(7*time.Second)))
	if p.Status.RefundFailureSeenAt == nil {
		t.Fatal("a failure seen after the read was planned is cleared by it")
	}
	read(0, now.Add(8*time.Second))
	if p.Status.RefundFailureSeenAt != nil || p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.AmountRefunded != nil {
		t.Errorf("after the second read: refundFailureSeenAt %v, phase %s, refunded %+v; want Succeeded, nothing refunded", p.Status.RefundFailureSeenAt, p.Status.Phase, p.Status.AmountRefunded)
	}
}
