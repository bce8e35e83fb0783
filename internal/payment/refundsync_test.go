package payment_test

import (
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
	}{
		{"no Refund succeeded", v1alpha1.PhaseSucceeded, false, nil, nil, false},
		{"a Refund succeeded, not read since", v1alpha1.PhaseSucceeded, false, nil, []types.UID{"a"}, true},
		{"counted", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"a"}, []types.UID{"a"}, false},
		{"a second Refund not counted", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"a"}, []types.UID{"a", "b"}, true},
		// A Refund deleted and applied again is another object: the old
		// one's count is not the new one's.
		{"re-created under the same name", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"old"}, []types.UID{"new"}, true},
		{"a counted Refund deleted", v1alpha1.PhasePartiallyRefunded, false, []types.UID{"a", "gone"}, []types.UID{"a"}, false},
		{"fully refunded, counted", v1alpha1.PhaseRefunded, false, []types.UID{"a"}, []types.UID{"a"}, false},
		{"fully refunded, behind", v1alpha1.PhaseRefunded, false, []types.UID{"a"}, []types.UID{"a", "b"}, true},
		// Refunds apply only after success: nothing to read for these.
		{"failed payment", v1alpha1.PhaseFailed, false, nil, []types.UID{"a"}, false},
		{"still processing", v1alpha1.PhaseProcessing, false, nil, []types.UID{"a"}, false},
		{"no provider id to read", v1alpha1.PhaseSucceeded, true, nil, []types.UID{"a"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := succeededPayment()
			p.Status.Phase = tc.phase
			p.Status.RefundsCounted = tc.counted
			if tc.noID {
				p.Status.ProviderPaymentID, p.Spec.ProviderPaymentID = "", ""
			}
			if got := payment.RefundsUncounted(p, payment.Facts{SucceededRefunds: tc.succeeded}); got != tc.want {
				t.Errorf("RefundsUncounted = %v, want %v", got, tc.want)
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
		if step.Action != payment.Query || len(step.Counts) != 1 || step.Counts[0] != "five" {
			t.Fatalf("read %d: %v counts %v (%s), want a read counting Refund five", i, step.Action, step.Counts, step.Why)
		}
		if i > 0 {
			gaps = append(gaps, now.Sub(last))
		}
		last = now
		p = store(p, payment.AfterRefundRead(p, pol, fails(errNoAnswer), step.Counts, now))
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
	p = store(p, payment.AfterRefundRead(p, pol, refundedAnswer(500), step.Counts, now))
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
	if step.Action != payment.Query || len(step.Counts) != 2 {
		t.Fatalf("second Refund: %v counts %v, want a read counting both", step.Action, step.Counts)
	}
	p = store(p, payment.AfterRefundRead(p, pol, refundedAnswer(800), step.Counts, now))
	if p.Status.AmountRefunded.Value != 800 || payment.RefundsUncounted(p, facts) {
		t.Errorf("second Refund: refunded %+v counted %v", p.Status.AmountRefunded, p.Status.RefundsCounted)
	}
}
