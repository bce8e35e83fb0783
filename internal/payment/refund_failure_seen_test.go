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
// a read of the provider's refunded total, of any payment that took money
// (its total may not count the refund yet: events come in any order); the
// answered read clears the ask, so the payment does not read the provider
// again and again. A second failure before the read is planned is covered
// by that read; one seen after it was planned (the read may have been
// answered before that refund failed) asks for another.
func TestARefundFailureAsksForOneRead(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Hour)
	failed := func(id string, at time.Time) payment.Observation {
		return payment.FromEvent(provider.Event{
			ID: id, Type: "refund.failed", Status: provider.StatusUnknown, PaymentID: "pay_1", OccurredAt: at,
			Refund: &provider.Refund{ID: "re_" + id, PaymentID: "pay_1", Status: provider.RefundFailed, Amount: 500, Currency: orderCurrency},
		}, v1alpha1.ViaWebhook)
	}

	// A payment whose total counts no refund yet: read all the same (the
	// failed refund's own event may come later, TestARefundFailureBeforeItsRefundEvent).
	paid := succeededPayment()
	if out := payment.ApplyEvent(paid, failed("evt_a", now), now); out.Status.RefundFailureSeenAt == nil {
		t.Errorf("a failed refund of a payment that counts none yet asks for no read")
	}
	// Of one that has not taken the money yet, there is nothing to read:
	// the event waits for the success (Orphaned), which a backfill reading
	// newest first applies after it.
	pending := succeededPayment()
	pending.Status.Phase = v1alpha1.PhaseProcessing
	out := payment.ApplyEvent(pending, failed("evt_a", now), now)
	if res, msg := payment.EventResult(pending, out, failed("evt_a", now)); out.Status.RefundFailureSeenAt != nil || res != v1alpha1.ResultOrphaned {
		t.Errorf("a failed refund of a Processing payment: %s (%s), refundFailureSeenAt %v; want Orphaned, no read", res, msg, out.Status.RefundFailureSeenAt)
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
		p = readRefundedTotal(t, p, pol, total, at)
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

// TestARefundFailureBeforeItsRefundEvent: a refund made in the provider's
// dashboard succeeds, then fails (Stripe: charge.refunded with
// amount_refunded 500, later refund.failed, the charge's total back to 0).
// A backfill reading newest first, or unordered delivery, applies the
// failure first, when the payment's total counts no refund: it still asks
// for a read of the provider's figure. The older charge.refunded, applied
// before that read, is lowered by it; applied after it, it is stale.
func TestARefundFailureBeforeItsRefundEvent(t *testing.T) {
	pol := testPolicy()
	t1 := t0.Add(time.Hour)
	t3 := t1.Add(2 * time.Hour)
	failed := payment.FromEvent(provider.Event{
		ID: "evt_refund_failed", Type: "refund.failed", Status: provider.StatusUnknown, PaymentID: "pay_1", OccurredAt: t3,
		Refund: &provider.Refund{ID: "re_dash", PaymentID: "pay_1", Status: provider.RefundFailed, Amount: 500, Currency: orderCurrency},
	}, v1alpha1.ViaBackfill)
	refunded := payment.FromEvent(provider.Event{
		ID: "evt_charge_refunded", Type: "charge.refunded", Status: provider.StatusRefund, PaymentID: "pay_1", OccurredAt: t1,
		Currency: orderCurrency, RefundedTotal: 500,
	}, v1alpha1.ViaBackfill)
	now := t3.Add(time.Hour)
	read := func(p *v1alpha1.Payment, total int64, at time.Time) *v1alpha1.Payment {
		t.Helper()
		return readRefundedTotal(t, p, pol, total, at)
	}
	nothingRefunded := func(when string, p *v1alpha1.Payment) {
		t.Helper()
		if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.AmountRefunded != nil || p.Status.RefundFailureSeenAt != nil {
			t.Errorf("%s: %s, refunded %+v, refundFailureSeenAt %v; want Succeeded, nothing refunded, no read asked for",
				when, p.Status.Phase, p.Status.AmountRefunded, p.Status.RefundFailureSeenAt)
		}
	}

	p := succeededPayment()
	out := payment.ApplyEvent(p, failed, now)
	if res, msg := payment.EventResult(p, out, failed); res != v1alpha1.ResultApplied || out.Status.RefundFailureSeenAt == nil {
		t.Fatalf("the failure first: %s (%s), refundFailureSeenAt %v; want Applied, a read asked for", res, msg, out.Status.RefundFailureSeenAt)
	}
	p = store(p, out)

	// charge.refunded before the read: counted, then lowered by the read.
	before := store(p, payment.ApplyEvent(p, refunded, now.Add(time.Second)))
	if a := before.Status.AmountRefunded; a == nil || a.Value != 500 {
		t.Fatalf("charge.refunded before the read: refunded %+v, want 500", a)
	}
	nothingRefunded("charge.refunded, then the read", read(before, 0, now.Add(2*time.Second)))

	// charge.refunded after the read: older than it, stale.
	after := read(p, 0, now.Add(2*time.Second))
	nothingRefunded("the read", after)
	late := payment.ApplyEvent(after, refunded, now.Add(3*time.Second))
	if res, msg := payment.EventResult(after, late, refunded); res != v1alpha1.ResultStale {
		t.Errorf("charge.refunded after the read: %s (%s); want Stale", res, msg)
	}
	nothingRefunded("the read, then charge.refunded", store(after, late))
}

// readRefundedTotal plans p (at planned, else at at), which must be a read
// of its refunded total that may lower it, and stores the provider's answer
// total, taken at at.
func readRefundedTotal(t *testing.T, p *v1alpha1.Payment, pol payment.Policy, total int64, at time.Time, planned ...time.Time) *v1alpha1.Payment {
	t.Helper()
	plan := at
	if len(planned) > 0 {
		plan = planned[0]
	}
	step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, plan)
	if step.Action != payment.Query || step.Read == nil || !step.Read.Lowers {
		t.Fatalf("the payment plans %s (%s), want a read of its refunded total that may lower it", step.Action, step.Why)
	}
	call := answer(provider.StatusSucceeded)
	call.Payment.RefundedTotal = total
	return store(p, payment.AfterRefundRead(p, pol, call, *step.Read, at))
}

// TestARefundMadeWhileAFailuresReadIsOutCounts: a Refund object's refund
// fails outright (refund.failed; the payment's total counts nothing), which
// asks for a read of the provider's figure. A refund made in the provider's
// dashboard while that read is out (after the provider computed its answer,
// 0) is reported in the read's own second: it is no older news than the
// read, and counts (the read makes stale only what happened a whole second
// before it was sent).
func TestARefundMadeWhileAFailuresReadIsOutCounts(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Hour)
	p := succeededPayment()
	failed := payment.FromEvent(provider.Event{
		ID: "evt_refund_failed", Type: "refund.failed", Status: provider.StatusUnknown, PaymentID: "pay_1", OccurredAt: now,
		Refund: &provider.Refund{ID: "re_obj", PaymentID: "pay_1", Status: provider.RefundFailed, Amount: 300, Currency: orderCurrency},
	}, v1alpha1.ViaWebhook)
	p = store(p, payment.ApplyEvent(p, failed, now))
	if p.Status.RefundFailureSeenAt == nil {
		t.Fatal("fixture: no read asked for")
	}
	// The read: sent at now+1s, the provider answers 0 at now+1.2s, the
	// answer is taken at now+1.6s (network, the token bucket).
	sent := now.Add(time.Second)
	step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, sent)
	if step.Action != payment.Query || step.Read == nil {
		t.Fatalf("plans %s (%s)", step.Action, step.Why)
	}
	call := answer(provider.StatusSucceeded)
	call.Payment.RefundedTotal = 0
	p = store(p, payment.AfterRefundRead(p, pol, call, *step.Read, sent.Add(600*time.Millisecond)))
	// The dashboard refund, at now+1.4s (after the provider's answer).
	dash := payment.FromEvent(provider.Event{
		ID: "evt_charge_refunded", Type: "charge.refunded", Status: provider.StatusRefund, PaymentID: "pay_1",
		OccurredAt: sent.Add(400 * time.Millisecond).Truncate(time.Second), Currency: orderCurrency, Amount: orderValue, RefundedTotal: 500,
	}, v1alpha1.ViaWebhook)
	later := sent.Add(3 * time.Second)
	out := payment.ApplyEvent(p, dash, later)
	res, msg := payment.EventResult(p, out, dash)
	p = store(p, out)
	next := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, later.Add(time.Hour))
	if a := p.Status.AmountRefunded; a == nil || a.Value != 500 {
		t.Errorf("a dashboard refund of 500 made while the failure's read was out: event %s (%s); payment %s, refunded %+v; next step %s (%s) — the provider says 500 refunded",
			res, msg, p.Status.Phase, a, next.Action, next.Why)
	}
}

// TestARefundFailureOfAPaymentWithoutProviderIDAsksNoRead: a payment whose
// create had no answer, resolved Succeeded by hand, has no provider id, so
// its refunded total cannot be read. A refund.failed found by its merchant
// reference asks for no read: one asked for would never be made, and a
// Refund of everything would wait on it for ever.
func TestARefundFailureOfAPaymentWithoutProviderIDAsksNoRead(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Minute)
	p := newPay("no-id")
	p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
	p = store(p, payment.AfterCreate(p, pol, fails(errTimeout), now))
	r := annotate(p, v1alpha1.AnnotationResolve, "Succeeded")
	r.Annotations[v1alpha1.AnnotationResolveReason] = "the payer's bank statement shows it"
	p = store(r, payment.Plan(r, pol, payment.Facts{}, now.Add(time.Second)).Outcome)
	if p.Status.Phase != v1alpha1.PhaseSucceeded || payment.ProviderID(p) != "" {
		t.Fatalf("fixture: %s id %q", p.Status.Phase, payment.ProviderID(p))
	}
	at := now.Add(time.Hour)
	failed := payment.FromEvent(provider.Event{ID: "evt_rf", Type: "refund.failed", Status: provider.StatusUnknown, OccurredAt: at,
		Refund: &provider.Refund{ID: "re_x", Status: provider.RefundFailed, Amount: 100, Currency: orderCurrency}}, v1alpha1.ViaWebhook)
	p = store(p, payment.ApplyEvent(p, failed, at))
	step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, at.Add(30*24*time.Hour))
	all := newRefund("all", 0, at)
	_, wait, refusal := payment.RefundAllowance(all, p, nil)
	if p.Status.RefundFailureSeenAt != nil || wait != "" {
		t.Errorf("refundFailureSeenAt %v set, and a month later the payment plans %s (%s): never cleared; a Refund of everything: wait %q refusal %q",
			p.Status.RefundFailureSeenAt, step.Action, step.Why, wait, refusal)
	}
}

// TestALoweringReadTakesARefundMadeWhileItWasOut: a dashboard refund of 300
// is counted, then fails; the read that answers for the failure finds 0 and
// lowers the total. A new dashboard refund of 500 made while that read was
// out (after the provider computed its answer) is reported in the read's
// own second: it counts, as it does beside a read that lowered nothing. The
// lowering read stamps refundsLoweredAt as any read answering a failure
// does, the second before it was sent, not when its answer came.
func TestALoweringReadTakesARefundMadeWhileItWasOut(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Hour)
	p := succeededPayment()
	ref := payment.FromEvent(provider.Event{ID: "evt_r1", Type: "charge.refunded", Status: provider.StatusRefund, PaymentID: "pay_1",
		OccurredAt: now, Currency: orderCurrency, Amount: orderValue, RefundedTotal: 300}, v1alpha1.ViaWebhook)
	p = store(p, payment.ApplyEvent(p, ref, now))
	now = now.Add(24 * time.Hour)
	failed := payment.FromEvent(provider.Event{
		ID: "evt_refund_failed", Type: "refund.failed", Status: provider.StatusUnknown, PaymentID: "pay_1", OccurredAt: now,
		Refund: &provider.Refund{ID: "re_dash1", PaymentID: "pay_1", Status: provider.RefundFailed, Amount: 300, Currency: orderCurrency},
	}, v1alpha1.ViaWebhook)
	p = store(p, payment.ApplyEvent(p, failed, now))
	sent := now.Add(10 * time.Second)
	p = readRefundedTotal(t, p, pol, 0, sent.Add(1600*time.Millisecond), sent)
	if p.Status.AmountRefunded != nil || p.Status.RefundsLoweredAt == nil {
		t.Fatalf("after the read: refunded %+v, refundsLoweredAt %v; want nothing refunded, a stamp", p.Status.AmountRefunded, p.Status.RefundsLoweredAt)
	}
	dash := payment.FromEvent(provider.Event{ID: "evt_r2", Type: "charge.refunded", Status: provider.StatusRefund, PaymentID: "pay_1",
		OccurredAt: sent.Add(400 * time.Millisecond).Truncate(time.Second), Currency: orderCurrency, Amount: orderValue, RefundedTotal: 500}, v1alpha1.ViaWebhook)
	out := payment.ApplyEvent(p, dash, sent.Add(5*time.Second))
	if res, msg := payment.EventResult(p, out, dash); res != v1alpha1.ResultApplied || out.Status.AmountRefunded == nil || out.Status.AmountRefunded.Value != 500 {
		t.Errorf("a dashboard refund of 500 made while a lowering read was out: %s (%s), refunded %+v; want Applied, 500", res, msg, out.Status.AmountRefunded)
	}
	// The failed refund's own success, from well before the read was sent,
	// stays stale.
	old := payment.FromEvent(provider.Event{ID: "evt_r1_again", Type: "charge.refunded", Status: provider.StatusRefund, PaymentID: "pay_1",
		OccurredAt: sent.Add(-2 * time.Second), Currency: orderCurrency, Amount: orderValue, RefundedTotal: 300}, v1alpha1.ViaWebhook)
	if res, msg := payment.EventResult(p, payment.ApplyEvent(p, old, sent.Add(6*time.Second)), old); res != v1alpha1.ResultStale {
		t.Errorf("a refund total from before the read was sent: %s (%s); want Stale", res, msg)
	}
}

// TestARefundEventFromTheReadsOwnSecondsIsReadAgain: Stripe's backfill lists
// events newest first, so the failed refund's own charge.refunded can come
// after the read that answered for its failure, stamped in the same second
// as that read. It may be a refund the read answered for or one made while
// it was out: it is taken, and the total read again, which settles it.
func TestARefundEventFromTheReadsOwnSecondsIsReadAgain(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Hour)
	p := succeededPayment()
	failed := payment.FromEvent(provider.Event{
		ID: "evt_refund_failed", Type: "refund.failed", Status: provider.StatusUnknown, PaymentID: "pay_1", OccurredAt: now,
		Refund: &provider.Refund{ID: "re_obj", PaymentID: "pay_1", Status: provider.RefundFailed, Amount: 500, Currency: orderCurrency},
	}, v1alpha1.ViaWebhook)
	p = store(p, payment.ApplyEvent(p, failed, now))
	sent := now.Add(time.Second)
	step := payment.Plan(p, pol, payment.Facts{RefundsListed: true}, sent)
	if step.Action != payment.Query || step.Read == nil {
		t.Fatalf("plans %s (%s)", step.Action, step.Why)
	}
	zero := answer(provider.StatusSucceeded)
	zero.Payment.RefundedTotal = 0
	p = store(p, payment.AfterRefundRead(p, pol, zero, *step.Read, sent.Add(300*time.Millisecond)))
	stamp := p.Status.RefundsLoweredAt
	if stamp == nil {
		t.Fatal("fixture: the read stamped nothing")
	}
	for _, tc := range []struct {
		name      string
		occurred  time.Time
		result    v1alpha1.EventResult
		readAgain bool
	}{
		{"the stamp's second: stale", stamp.Time, v1alpha1.ResultStale, false},
		{"the read's own second: taken, read again", stamp.Add(time.Second), v1alpha1.ResultApplied, true},
		{"the second after: taken, read again", stamp.Add(payment.RefundReadAmbiguity), v1alpha1.ResultApplied, true},
		{"later: taken", stamp.Add(payment.RefundReadAmbiguity + time.Second), v1alpha1.ResultApplied, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := payment.FromEvent(provider.Event{
				ID: "evt_charge_refunded", Type: "charge.refunded", Status: provider.StatusRefund, PaymentID: "pay_1",
				OccurredAt: tc.occurred, Currency: orderCurrency, Amount: orderValue, RefundedTotal: 500,
			}, v1alpha1.ViaBackfill)
			at := sent.Add(2 * time.Second)
			out := payment.ApplyEvent(p, ev, at)
			res, msg := payment.EventResult(p, out, ev)
			q := store(p, out)
			if res != tc.result || (q.Status.RefundFailureSeenAt != nil) != tc.readAgain {
				t.Fatalf("%s (%s), read asked: %v; want %s, read asked: %v", res, msg, q.Status.RefundFailureSeenAt != nil, tc.result, tc.readAgain)
			}
			if !tc.readAgain {
				return
			}
			// The read settles it on the provider's figure.
			step := payment.Plan(q, pol, payment.Facts{RefundsListed: true}, at.Add(time.Minute))
			if step.Action != payment.Query || step.Read == nil {
				t.Fatalf("after the taken event: plans %s (%s), want a read", step.Action, step.Why)
			}
			q = store(q, payment.AfterRefundRead(q, pol, zero, *step.Read, at.Add(time.Minute)))
			if q.Status.Phase != v1alpha1.PhaseSucceeded || q.Status.AmountRefunded != nil || q.Status.RefundFailureSeenAt != nil {
				t.Fatalf("after the read: %s, refunded %+v, read asked %v; want Succeeded, nothing refunded (the provider's 0)", q.Status.Phase, q.Status.AmountRefunded, q.Status.RefundFailureSeenAt)
			}
		})
	}
}
