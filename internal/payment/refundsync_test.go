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

// A Refund that settles always brings its payment's refunded total to the
// provider's cumulative figure: the settled payment is read until an answer
// read after the Refund succeeded is stored, on the schedule's backoff while
// the provider cannot be read, and is left alone once it is.

func succeededPayment() *v1alpha1.Payment {
	p := created("synced")
	return store(p, payment.AfterQuery(p, testPolicy(), answer(provider.StatusSucceeded), false, t0.Add(30*time.Second)))
}

func refundedAnswer(total int64) payment.Call {
	c := answer(provider.StatusRefund)
	c.Payment.RefundedTotal = total
	return c
}

func TestRefundsUncounted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		phase     v1alpha1.PaymentPhase
		noID      bool
		counted   []types.UID
		succeeded []types.UID
		want      bool
		reversed  []types.UID
		lowers    bool
	}{
		{"no Refund succeeded", v1alpha1.PhaseSucceeded, false, nil, nil, false, nil, false},
		{"a Refund succeeded, not read since", v1alpha1.PhaseSucceeded, false, nil, []types.UID{"a"}, true, nil, false},
		{"counted", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"a"}, []types.UID{"a"}, false, nil, false},
		{"a second Refund not counted", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"a"}, []types.UID{"a", "b"}, true, nil, false},
		// A Refund deleted and applied again is another object: the old
		// one's count is not the new one's.
		{"re-created under the same name", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"old"}, []types.UID{"new"}, true, nil, false},
		{"a counted Refund deleted", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"a", "gone"}, []types.UID{"a"}, false, nil, false},
		{"fully refunded, counted", v1alpha1.PhaseRefunded, false, []types.UID{"a"}, []types.UID{"a"}, false, nil, false},
		{"fully refunded, behind", v1alpha1.PhaseRefunded, false, []types.UID{"a"}, []types.UID{"a", "b"}, true, nil, false},
		// Refunds apply only after success: nothing to read for these.
		{"failed payment", v1alpha1.PhaseFailed, false, nil, []types.UID{"a"}, false, nil, false},
		{"still processing", v1alpha1.PhaseProcessing, false, nil, []types.UID{"a"}, false, nil, false},
		{"no provider id to read", v1alpha1.PhaseSucceeded, true, nil, []types.UID{"a"}, false, nil, false},
		// A Refund that failed after it succeeded: the provider's figure
		// went down (counted by a read or an event alike).
		{"a counted Refund reversed", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"a", "b"}, []types.UID{"b"}, true, []types.UID{"a"}, true},
		{"the only Refund reversed, never read", v1alpha1.PhaseRefunded, false, nil, nil, true, []types.UID{"a"}, true},
		{"a reversal already read", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"b"}, []types.UID{"b"}, false, []types.UID{"a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := succeededPayment()
			p.Status.Phase = tc.phase
			p.Status.RefundsCounted = tc.counted
			if tc.name == "a reversal already read" {
				p.Status.RefundsReversed = []types.UID{"a"}
			}
			if tc.noID {
				p.Status.ProviderPaymentID, p.Spec.ProviderPaymentID = "", ""
			}
			read, got := payment.RefundsUncounted(p, payment.Facts{SucceededRefunds: tc.succeeded, ReversedRefunds: tc.reversed})
			if got != tc.want || got && read.Lowers != tc.lowers {
				t.Errorf("RefundsUncounted = %v (lowers %v), want %v (lowers %v)", got, read.Lowers, tc.want, tc.lowers)
			}
		})
	}
}

func TestScenarioASettledRefundIsCountedFromTheProvidersFigure(t *testing.T) {
	pol := testPolicy()
	p := succeededPayment()
	if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.Query.NextTime != nil {
		t.Fatalf("setup: %s next %v", p.Status.Phase, p.Status.Query.NextTime)
	}
	facts := payment.Facts{SucceededRefunds: []types.UID{"five"}}
	now := t0.Add(time.Hour)

	// The provider cannot be read for a while: the read is repeated on the
	// schedule's backoff, never at once, and the payment stays Succeeded
	// and keeps no schedule.
	var gaps []time.Duration
	last := now
	for i := 0; i < 4; i++ {
		step := payment.Plan(p, pol, facts, now)
		if step.Action == payment.Wait {
			now = step.At
			step = payment.Plan(p, pol, facts, now)
		}
		if step.Action != payment.Query || step.Read == nil || len(step.Read.Counts) != 1 || step.Read.Counts[0] != "five" {
			t.Fatalf("read %d: %v read %+v (%s), want a read counting Refund five", i, step.Action, step.Read, step.Why)
		}
		if i > 0 {
			gaps = append(gaps, now.Sub(last))
		}
		last = now
		p = store(p, payment.AfterRefundRead(p, pol, fails(errNoAnswer), *step.Read, now))
		if p.Status.Phase != v1alpha1.PhaseSucceeded || review(p) != "" || len(p.Status.RefundsCounted) != 0 {
			t.Fatalf("read %d failed: phase %s review %q counted %v, want Succeeded and nothing counted", i, p.Status.Phase, review(p), p.Status.RefundsCounted)
		}
		if p.Status.Query.NextTime != nil {
			t.Fatalf("read %d failed: next time %v, want none: a settled payment keeps no schedule", i, p.Status.Query.NextTime)
		}
		if step := payment.Plan(p, pol, facts, now); step.Action != payment.Wait || !step.At.After(now) {
			t.Fatalf("read %d failed: then %v at %s, want a wait", i, step.Action, step.At)
		}
	}
	for i, g := range gaps {
		if g < payment.MinWait || i > 0 && g < gaps[i-1] {
			t.Errorf("gaps between reads %v: want a backoff that never shrinks", gaps)
			break
		}
	}

	// The provider answers with its cumulative figure: counted, and nothing
	// more is read.
	now = payment.Plan(p, pol, facts, now).At
	step := payment.Plan(p, pol, facts, now)
	if step.Action != payment.Query {
		t.Fatalf("%v (%s), want the read", step.Action, step.Why)
	}
	p = store(p, payment.AfterRefundRead(p, pol, refundedAnswer(500), *step.Read, now))
	if p.Status.Phase != v1alpha1.PhasePartiallyRefunded || p.Status.AmountRefunded == nil || p.Status.AmountRefunded.Value != 500 {
		t.Fatalf("after the answer: %s refunded %+v, want PartiallyRefunded 500", p.Status.Phase, p.Status.AmountRefunded)
	}
	if step := payment.Plan(p, pol, facts, now.Add(time.Hour)); step.Action != payment.Nothing || p.Status.Query.NextTime != nil {
		t.Errorf("counted: %v (%s) next %v, want nothing more", step.Action, step.Why, p.Status.Query.NextTime)
	}
	// A second Refund succeeds: one more read, at once (the last read is
	// long past), and it counts both.
	facts.SucceededRefunds = append(facts.SucceededRefunds, "three")
	now = now.Add(2 * time.Hour)
	step = payment.Plan(p, pol, facts, now)
	if step.Action != payment.Query || step.Read == nil || len(step.Read.Counts) != 2 || step.Read.Lowers {
		t.Fatalf("second Refund: %v read %+v, want a read counting both", step.Action, step.Read)
	}
	p = store(p, payment.AfterRefundRead(p, pol, refundedAnswer(800), *step.Read, now))
	if _, behind := payment.RefundsUncounted(p, facts); p.Status.AmountRefunded.Value != 800 || behind {
		t.Errorf("second Refund: refunded %+v counted %v", p.Status.AmountRefunded, p.Status.RefundsCounted)
	}
}

// A refund that fails after it succeeded (Stripe) takes its money back out
// of the provider's figure: the Refund is Failed, its payment reads the
// lower total and returns to PartiallyRefunded, or to Succeeded when
// nothing is refunded any more. A lower figure is taken only from such a
// read: a late event with an older, lower total stays stale.
func TestScenarioARefundReversedLowersItsPaymentsTotal(t *testing.T) {
	pol := testPolicy()
	p := succeededPayment()
	now := t0.Add(time.Hour)
	read := func(facts payment.Facts, total int64) {
		t.Helper()
		step := payment.Plan(p, pol, facts, now)
		if step.Action != payment.Query || step.Read == nil {
			t.Fatalf("%v (%s), want a read of the refunded total", step.Action, step.Why)
		}
		c := refundedAnswer(total)
		if total == 0 {
			c = answer(provider.StatusSucceeded)
		}
		p = store(p, payment.AfterRefundRead(p, pol, c, *step.Read, now))
		now = now.Add(time.Hour)
	}
	read(payment.Facts{SucceededRefunds: []types.UID{"five", "three"}}, 800)
	if p.Status.Phase != v1alpha1.PhasePartiallyRefunded || p.Status.AmountRefunded.Value != 800 {
		t.Fatalf("%s %+v, want PartiallyRefunded 800", p.Status.Phase, p.Status.AmountRefunded)
	}

	// A late event of the first refund alone (500) is older news.
	late := payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedRefund, EventID: "evt-late", RefundedTotal: &v1alpha1.Money{Value: 500, Currency: orderCurrency}}
	if res := payment.Apply(p, late, now); res.Decision != payment.Stale || res.Status.AmountRefunded.Value != 800 {
		t.Fatalf("a late lower total: %s %+v, want Stale at 800", res.Decision, res.Status.AmountRefunded)
	}

	// "three" fails after it succeeded: the provider says 500.
	read(payment.Facts{SucceededRefunds: []types.UID{"five"}, ReversedRefunds: []types.UID{"three"}}, 500)
	if p.Status.Phase != v1alpha1.PhasePartiallyRefunded || p.Status.AmountRefunded.Value != 500 || p.Status.AmountRefundedDisplay != "5.00 USD" {
		t.Fatalf("%s %+v %q, want PartiallyRefunded 500", p.Status.Phase, p.Status.AmountRefunded, p.Status.AmountRefundedDisplay)
	}
	if last := p.Status.History[len(p.Status.History)-1]; !strings.HasPrefix(last.Reason, v1alpha1.ReasonRefundReversed) {
		t.Errorf("history %+v, want the reversal recorded", last)
	}
	// An event from before that read (delivered late, or found by the
	// backfill) still carries the total the provider has since taken back:
	// stale, though higher. A refund made after the read raises the total.
	readAt := now.Add(-time.Hour)
	before := payment.Observation{Source: v1alpha1.SourceBackfill, Observed: payment.ObservedRefund, EventID: "evt-before",
		OccurredAt: readAt.Add(-10 * time.Minute), RefundedTotal: &v1alpha1.Money{Value: 800, Currency: orderCurrency}}
	if res := payment.Apply(p, before, now); res.Decision != payment.Stale || res.Status.AmountRefunded.Value != 500 {
		t.Fatalf("an event from before the reversal's read: %s %+v, want Stale at 500", res.Decision, res.Status.AmountRefunded)
	}
	after := payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedRefund, EventID: "evt-after",
		OccurredAt: readAt.Add(10 * time.Minute), RefundedTotal: &v1alpha1.Money{Value: 900, Currency: orderCurrency}}
	if res := payment.Apply(p, after, now); res.Decision != payment.Applied || res.Status.AmountRefunded.Value != 900 {
		t.Fatalf("a refund after the reversal's read: %s %+v, want Applied at 900", res.Decision, res.Status.AmountRefunded)
	}
	// "five" fails too: nothing is refunded any more.
	read(payment.Facts{ReversedRefunds: []types.UID{"three", "five"}}, 0)
	if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.AmountRefunded != nil || p.Status.AmountRefundedDisplay != "" {
		t.Fatalf("%s %+v %q, want Succeeded with nothing refunded", p.Status.Phase, p.Status.AmountRefunded, p.Status.AmountRefundedDisplay)
	}
	if step := payment.Plan(p, pol, payment.Facts{ReversedRefunds: []types.UID{"three", "five"}}, now); step.Action != payment.Nothing {
		t.Errorf("after the reversals: %v (%s), want nothing more", step.Action, step.Why)
	}
	// The money is refundable again.
	if allowed, wait, refusal := payment.RefundAllowance(&v1alpha1.Refund{Spec: v1alpha1.RefundSpec{Amount: &v1alpha1.Amount{Value: orderValue, Currency: orderCurrency}}}, p, nil); allowed.Value != orderValue || wait != "" || refusal != "" {
		t.Errorf("allowance after the reversals: %+v %q %q, want the whole %d", allowed, wait, refusal, orderValue)
	}
}

// A Refund the provider fails after it succeeded is told apart from one that
// simply failed: only the first took money back out of the figure.
func TestRefundReversed(t *testing.T) {
	r := newRefund("r", 500, t0)
	r.Status = sentRefund("r", 500, v1alpha1.RefundSucceeded).Status
	failed := payment.ApplyRefund(r, refundObs(payment.ObservedFailed, "evt-failed", withFailure("expired_or_canceled_card", "")), t0)
	r.Status = failed.Status
	if !payment.RefundReversed(r) || r.Status.Failure == nil || r.Status.Failure.Code != "expired_or_canceled_card" {
		t.Errorf("reversed: %v, failure %+v", payment.RefundReversed(r), r.Status.Failure)
	}
	if len(failed.Events) == 0 || failed.Events[0].Reason != v1alpha1.ReasonRefundReversed || !failed.Events[0].Warning {
		t.Errorf("events %+v, want a RefundReversed Warning", failed.Events)
	}
	plain := newRefund("p", 500, t0)
	plain.Status = sentRefund("p", 500, v1alpha1.RefundProcessing).Status
	plain.Status = payment.ApplyRefund(plain, refundObs(payment.ObservedFailed, "evt-failed", withFailure("insufficient_funds", "")), t0).Status
	if plain.Status.Phase != v1alpha1.RefundFailed || payment.RefundReversed(plain) {
		t.Errorf("a refund that failed before it succeeded: %s reversed %v", plain.Status.Phase, payment.RefundReversed(plain))
	}
	// Either record says it: the failure's code, or the history's entry
	// (the failure replaced since, or the entry trimmed from the history).
	byCode := r.DeepCopy()
	byCode.Status.History, byCode.Status.Failure = nil, &v1alpha1.Failure{Code: v1alpha1.ReasonRefundReversed}
	byHistory := r.DeepCopy()
	byHistory.Status.Failure = &v1alpha1.Failure{Code: "expired_or_canceled_card"}
	for name, rf := range map[string]*v1alpha1.Refund{"by its failure's code": byCode, "by its history": byHistory} {
		if !payment.RefundReversed(rf) {
			t.Errorf("reversed %s: not seen", name)
		}
	}
}

// A settled payment, and its Refunds, may go (deleted, or past retention)
// only once its refunded total counts every Refund that settled: the
// settlement is known only while the Refund stands.
func TestUncountedKeepsThePaymentAndItsRefund(t *testing.T) {
	refund := func(name string, uid types.UID, phase v1alpha1.RefundPhase, providerID string) v1alpha1.Refund {
		r := v1alpha1.Refund{}
		r.Name, r.UID, r.Status.Phase, r.Status.ProviderRefundID = name, uid, phase, providerID
		return r
	}
	for _, tc := range []struct {
		name     string
		phase    v1alpha1.PaymentPhase
		counted  []types.UID
		reversed []types.UID
		refunds  []v1alpha1.Refund
		want     string
	}{
		{"no Refunds", v1alpha1.PhaseSucceeded, nil, nil, nil, ""},
		{"succeeded, not counted", v1alpha1.PhaseSucceeded, nil, nil, []v1alpha1.Refund{refund("five", "a", v1alpha1.RefundSucceeded, "re_1")}, "five"},
		{"succeeded, counted", v1alpha1.PhasePartiallyRefunded, []types.UID{"a"}, nil, []v1alpha1.Refund{refund("five", "a", v1alpha1.RefundSucceeded, "re_1")}, ""},
		{"the second one not counted", v1alpha1.PhasePartiallyRefunded, []types.UID{"a"}, nil,
			[]v1alpha1.Refund{refund("five", "a", v1alpha1.RefundSucceeded, "re_1"), refund("six", "b", v1alpha1.RefundSucceeded, "re_2")}, "six"},
		{"failed at the provider, not read since", v1alpha1.PhasePartiallyRefunded, []types.UID{"a"}, nil,
			[]v1alpha1.Refund{refund("five", "a", v1alpha1.RefundSucceeded, "re_1"), refund("six", "b", v1alpha1.RefundFailed, "re_2")}, "six"},
		{"failed at the provider, read", v1alpha1.PhasePartiallyRefunded, []types.UID{"a"}, []types.UID{"b"},
			[]v1alpha1.Refund{refund("five", "a", v1alpha1.RefundSucceeded, "re_1"), refund("six", "b", v1alpha1.RefundFailed, "re_2")}, ""},
		{"refused before any call: nothing to count", v1alpha1.PhaseSucceeded, nil, nil, []v1alpha1.Refund{refund("big", "a", v1alpha1.RefundFailed, "")}, ""},
		{"still pending: RefundInFlight's business", v1alpha1.PhaseSucceeded, nil, nil, []v1alpha1.Refund{refund("five", "a", v1alpha1.RefundPending, "re_1")}, ""},
		// A payment that took no money has no refunded total to count in.
		{"the payment failed", v1alpha1.PhaseFailed, nil, nil, []v1alpha1.Refund{refund("five", "a", v1alpha1.RefundSucceeded, "re_1")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := succeededPayment()
			p.Status.Phase, p.Status.RefundsCounted, p.Status.RefundsReversed = tc.phase, tc.counted, tc.reversed
			if got := payment.Uncounted(p, tc.refunds); got != tc.want {
				t.Errorf("Uncounted = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestARefundedTotalReadBacksOff: the read of a settled payment's refunded
// total is due at once; after failed reads, one step of the schedule per
// failure in a row after the last, and the schedule's last step past its
// end.
func TestARefundedTotalReadBacksOff(t *testing.T) {
	pol := testPolicy()
	facts := payment.Facts{SucceededRefunds: []types.UID{"uid-r1"}}
	last := t0.Add(time.Hour)
	for _, tc := range []struct {
		errors int32
		want   time.Duration // 0: due at once
	}{
		{0, 0},
		{1, pol.Schedule[0]},
		{2, pol.Schedule[1]},
		{int32(len(pol.Schedule)) + 3, pol.Schedule[len(pol.Schedule)-1]},
	} {
		p := paidPayment(0)
		p.Status.Query.LastTime = micro(last)
		p.Status.Query.ConsecutiveErrors = tc.errors
		step := payment.Plan(p, pol, facts, last)
		switch {
		case tc.want == 0 && (step.Action != payment.Query || step.Read == nil):
			t.Errorf("%d failures: %s (%s), want the read at once", tc.errors, step.Action, step.Why)
		case tc.want != 0 && (step.Action != payment.Wait || !step.At.Equal(last.Add(tc.want))):
			t.Errorf("%d failures: %s at %v (%s), want a wait until +%v", tc.errors, step.Action, step.At, step.Why, tc.want)
		}
	}
}
