package payment_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// The Refund's state machine and its guard rails (SPEC §11.7).

func newRefund(name string, amount int64, created time.Time) *v1alpha1.Refund {
	r := &v1alpha1.Refund{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: "order-1"}},
	}
	if amount > 0 {
		r.Spec.Amount = &v1alpha1.Amount{Value: amount, Currency: orderCurrency}
	}
	return r
}

// sentRefund is a Refund decided for amount and sent, in phase.
func sentRefund(name string, amount int64, phase v1alpha1.RefundPhase) v1alpha1.Refund {
	r := newRefund(name, 0, t0)
	r.Status.Phase = phase
	r.Status.Amount = &v1alpha1.Money{Value: amount, Currency: orderCurrency}
	r.Status.CreateRequestedAt = ptrTime(t0)
	r.Status.ProviderRefundID = "re_" + name
	return *r
}

func ptrTime(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

func paidPayment(refunded int64) *v1alpha1.Payment {
	p := buildPayment(nil, givenSucceeded)
	p.Status.ProviderPaymentID = "pay_1"
	if refunded > 0 {
		p.Status.AmountRefunded = &v1alpha1.Money{Value: refunded, Currency: orderCurrency}
		p.Status.Phase = v1alpha1.PhasePartiallyRefunded
	}
	return p
}

// countedBy is p whose refunded total was read after the named Refunds
// succeeded (status.refundsCounted).
func countedBy(p *v1alpha1.Payment, names ...string) *v1alpha1.Payment {
	for _, n := range names {
		p.Status.RefundsCounted = append(p.Status.RefundsCounted, types.UID("uid-"+n))
	}
	return p
}

func refundObs(o payment.Observed, eventID string, opts ...obsOpt) payment.Observation {
	obs := payment.Observation{Source: v1alpha1.SourceWebhook, Observed: o, EventID: eventID}
	if eventID == "" {
		obs.Source = v1alpha1.SourceStatusQuery
	}
	for _, opt := range opts {
		opt(&obs)
	}
	return obs
}

func refundReview(st *v1alpha1.RefundStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}

func TestApplyRefund(t *testing.T) {
	const (
		pending    = v1alpha1.RefundPending
		processing = v1alpha1.RefundProcessing
		succeeded  = v1alpha1.RefundSucceeded
		failed     = v1alpha1.RefundFailed
		unknown    = v1alpha1.RefundUnknown
	)
	amount := withAmount(500, orderCurrency)
	at := func(phase v1alpha1.RefundPhase, review string) *v1alpha1.Refund {
		r := newRefund("r", 500, t0)
		r.Status.Amount = &v1alpha1.Money{Value: 500, Currency: orderCurrency}
		r.Status.ProviderRefundID = "re_1"
		r.Status.Phase = phase
		if review != "" {
			meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: review, Message: "x"})
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		given    *v1alpha1.Refund
		obs      payment.Observation
		decision payment.Decision
		phase    v1alpha1.RefundPhase
		review   string
	}{
		{"a new refund becomes pending", newRefund("r", 500, t0), refundObs(payment.ObservedPending, ""), payment.Applied, pending, ""},
		{"pending then processing moves forward", at(pending, ""), refundObs(payment.ObservedProcessing, ""), payment.Applied, processing, ""},
		{"pending after processing is stale", at(processing, ""), refundObs(payment.ObservedPending, ""), payment.Stale, processing, ""},
		{"success with the amount asked for is Succeeded", at(processing, ""), refundObs(payment.ObservedSucceeded, "evt-1", amount), payment.Applied, succeeded, ""},
		{"success without an amount is Succeeded", at(processing, ""), refundObs(payment.ObservedSucceeded, "evt-1"), payment.Applied, succeeded, ""},
		{"success of another amount needs review", at(processing, ""), refundObs(payment.ObservedSucceeded, "evt-1", withAmount(499, orderCurrency)), payment.Applied, unknown, v1alpha1.ReasonAmountMismatch},
		{"success of the amount in another currency needs review", at(processing, ""), refundObs(payment.ObservedSucceeded, "evt-1", withAmount(500, "EUR")), payment.Applied, unknown, v1alpha1.ReasonAmountMismatch},
		{"failure fails it", at(processing, ""), refundObs(payment.ObservedFailed, "evt-1", withFailure("insufficient_funds", "")), payment.Applied, failed, ""},
		// Stripe documents refunds that fail after succeeding (the balance
		// transaction is reversed): a fact, not a conflict.
		{"failure after success reverses it", at(succeeded, ""), refundObs(payment.ObservedFailed, "evt-2", withFailure("expired_or_canceled_card", "")), payment.Applied, failed, ""},
		{"failure after success without a code reverses it", at(succeeded, ""), refundObs(payment.ObservedFailed, "evt-2"), payment.Applied, failed, ""},
		{"success after failure is a conflict", at(failed, ""), refundObs(payment.ObservedSucceeded, "evt-2"), payment.Conflict, failed, v1alpha1.ReasonConflictingStatus},
		{"failure again is stale", at(failed, ""), refundObs(payment.ObservedFailed, ""), payment.Stale, failed, ""},
		{"unknown from the provider is ignored", at(processing, ""), refundObs(payment.ObservedUnknown, ""), payment.Ignored, processing, ""},
		{"retries exhausted parks it in Unknown", at(processing, ""), refundObs(payment.ObservedUnknown, "", withReview(v1alpha1.ReasonRetriesExhausted)), payment.Applied, unknown, v1alpha1.ReasonRetriesExhausted},
		{"a paywarden review does not replace an amount mismatch", at(unknown, v1alpha1.ReasonAmountMismatch), refundObs(payment.ObservedUnknown, "", withReview(v1alpha1.ReasonRetriesExhausted)), payment.Stale, unknown, v1alpha1.ReasonAmountMismatch},
		{"a paywarden review on a final refund is stale", at(succeeded, ""), refundObs(payment.ObservedUnknown, "", withReview(v1alpha1.ReasonProviderUnreachable)), payment.Stale, succeeded, ""},
		{"processing does not take a refund out of Unknown", at(unknown, v1alpha1.ReasonRetriesExhausted), refundObs(payment.ObservedProcessing, ""), payment.Stale, unknown, v1alpha1.ReasonRetriesExhausted},
		{"a final answer takes it out of Unknown", at(unknown, v1alpha1.ReasonRetriesExhausted), refundObs(payment.ObservedSucceeded, "evt-3", amount), payment.Applied, succeeded, v1alpha1.ReasonRetriesExhausted},
		{"news about another provider refund is ignored", at(processing, ""), refundObs(payment.ObservedFailed, "evt-4", func(o *payment.Observation) { o.ProviderRefundID = "re_other" }), payment.Ignored, processing, ""},
		{"an operator settles a refund under review", at(unknown, v1alpha1.ReasonCreateOutcomeUnknown), payment.Observation{Source: v1alpha1.SourceManual, Observed: payment.ObservedSucceeded, Reason: "seen in the dashboard"}, payment.Applied, succeeded, ""},
		// A settled refund nobody reviews is not reopened by a resolve: turning
		// a Succeeded refund Failed would free its amount for another refund.
		{"an operator resolves a conflict on a settled refund", at(failed, v1alpha1.ReasonConflictingStatus), payment.Observation{Source: v1alpha1.SourceManual, Observed: payment.ObservedSucceeded, Reason: "refunded per the dashboard"}, payment.Applied, succeeded, ""},
		{"an operator's resolve leaves a settled refund nobody reviews alone", at(succeeded, ""), payment.Observation{Source: v1alpha1.SourceManual, Observed: payment.ObservedFailed, Reason: "wrong refund"}, payment.Ignored, succeeded, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.given.Status.DeepCopy()
			res := payment.ApplyRefund(tc.given, tc.obs, t0.Add(time.Hour))
			if !sameRefundStatus(before, &tc.given.Status) {
				t.Fatal("ApplyRefund changed its input")
			}
			if res.Decision != tc.decision || res.Status.Phase != tc.phase || refundReview(&res.Status) != tc.review {
				t.Fatalf("%s -> %s review %q (%s), want %s -> %s review %q", res.Decision, res.Status.Phase, refundReview(&res.Status), res.Reason, tc.decision, tc.phase, tc.review)
			}
			if res.Status.Phase.IsFinal() && res.Status.Query.NextTime != nil {
				t.Error("a settled refund keeps a schedule")
			}
			if (res.Decision == payment.Applied || res.Decision == payment.Conflict) && len(res.Events) == 0 {
				t.Error("a change without an Event")
			}
		})
	}
	t.Run("a refund put under review keeps no query schedule", func(t *testing.T) {
		r := at(processing, "")
		r.Status.Query.NextTime = micro(t0.Add(time.Minute))
		res := payment.ApplyRefund(r, refundObs(payment.ObservedSucceeded, "evt-1", withAmount(499, orderCurrency)), t0)
		if res.Status.Phase != unknown || res.Status.Query.NextTime != nil {
			t.Fatalf("%s next query %v, want Unknown and parked for an operator", res.Status.Phase, res.Status.Query.NextTime)
		}
	})
	t.Run("a success before any decision records the provider's amount", func(t *testing.T) {
		// The Refund appeared after its refund was made (its event waited in
		// the inbox): without an amount its siblings would wait for it forever.
		res := payment.ApplyRefund(newRefund("r", 0, t0), refundObs(payment.ObservedSucceeded, "evt-1", amount), t0)
		if res.Status.Phase != succeeded || res.Status.Amount == nil || res.Status.Amount.Value != 500 || res.Status.AmountDisplay == "" {
			t.Fatalf("phase %s amount %+v %q", res.Status.Phase, res.Status.Amount, res.Status.AmountDisplay)
		}
		later := newRefund("s", 0, t0.Add(time.Minute))
		settled := newRefund("r", 0, t0)
		settled.Status = res.Status
		if got, wait, refusal := payment.RefundAllowance(later, countedBy(paidPayment(500), "r"), []v1alpha1.Refund{*settled}); wait != "" || refusal != "" || got.Value != orderValue-500 {
			t.Errorf("the rest after it: %d wait %q refusal %q", got.Value, wait, refusal)
		}
	})
	t.Run("the same event twice is a duplicate", func(t *testing.T) {
		r := at(processing, "")
		r.Status = payment.ApplyRefund(r, refundObs(payment.ObservedSucceeded, "evt-1", amount), t0).Status
		if res := payment.ApplyRefund(r, refundObs(payment.ObservedSucceeded, "evt-1", amount), t0); res.Decision != payment.Duplicate {
			t.Errorf("decision %s", res.Decision)
		}
	})
}

// fullRefund is a Refund of everything the payment received; partRefund
// one of v minor units. Both are created a minute after t0.
func fullRefund() *v1alpha1.Refund { return newRefund("r", 0, t0.Add(time.Minute)) }

func partRefund(v int64) *v1alpha1.Refund { return newRefund("r", v, t0.Add(time.Minute)) }

// allowanceCase is a Refund decided beside its payment and sibling Refunds:
// the amount it may refund, or why it waits or is refused.
type allowanceCase struct {
	name     string
	refund   *v1alpha1.Refund
	payment  *v1alpha1.Payment
	siblings []v1alpha1.Refund
	amount   int64
	wait     string
	refusal  string
	says     string // in the refusal
}

// checkAllowance checks RefundAllowance's answer to each case.
func checkAllowance(t *testing.T, cases []allowanceCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			amount, wait, refusal := payment.RefundAllowance(tc.refund, tc.payment, tc.siblings)
			if wait != tc.wait || !strings.HasPrefix(refusal, tc.refusal) || (tc.refusal == "") != (refusal == "") || amount.Value != tc.amount {
				t.Fatalf("amount %d wait %q refusal %q, want %d %q %q", amount.Value, wait, refusal, tc.amount, tc.wait, tc.refusal)
			}
			if !strings.Contains(refusal, tc.says) {
				t.Errorf("refusal %q does not say %q", refusal, tc.says)
			}
		})
	}
}

func TestRefundAllowance(t *testing.T) {
	pending := buildPayment(nil, givenPending)
	failedPay := buildPayment(nil, givenFailed)
	checkAllowance(t, []allowanceCase{
		{"no payment yet: wait", fullRefund(), nil, nil, 0, v1alpha1.ReasonPaymentNotFound, "", ""},
		{"a pending payment: wait", fullRefund(), pending, nil, 0, v1alpha1.ReasonPaymentNotSucceeded, "", ""},
		{"a failed payment: refused", fullRefund(), failedPay, nil, 0, "", v1alpha1.ReasonPaymentNotPaid, ""},
		{"no amount refunds everything received", fullRefund(), paidPayment(0), nil, orderValue, "", "", ""},
		{"a partial refund", partRefund(500), paidPayment(0), nil, 500, "", "", ""},
		{"more than received is refused", partRefund(orderValue + 1), paidPayment(0), nil, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"dashboard refunds count", partRefund(1500), paidPayment(600), nil, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"the rest after a dashboard refund", fullRefund(), paidPayment(600), nil, orderValue - 600, "", "", ""},
		{"a succeeded Refund counts once with the provider's figure", partRefund(1000), countedBy(paidPayment(500), "a"), []v1alpha1.Refund{sentRefund("a", 500, v1alpha1.RefundSucceeded)}, 1000, "", "", ""},
		{"a succeeded Refund the figure was not read for yet may be beside it: wait", partRefund(1000), paidPayment(500), []v1alpha1.Refund{sentRefund("a", 500, v1alpha1.RefundSucceeded)}, 0, v1alpha1.ReasonEarlierRefundInFlight, "", ""},
		{"everything, beside a Refund the figure may or may not count: wait, never less than the rest", fullRefund(), paidPayment(300), []v1alpha1.Refund{sentRefund("a", 500, v1alpha1.RefundSucceeded)}, 0, v1alpha1.ReasonEarlierRefundInFlight, "", ""},
		{"everything, once the figure counts it: the rest", fullRefund(), countedBy(paidPayment(800), "a"), []v1alpha1.Refund{sentRefund("a", 500, v1alpha1.RefundSucceeded)}, orderValue - 800, "", "", ""},
		{"beside it, too much: refused", partRefund(1500), paidPayment(500), []v1alpha1.Refund{sentRefund("a", 500, v1alpha1.RefundSucceeded)}, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"a Refund in flight counts", partRefund(1000), paidPayment(0), []v1alpha1.Refund{sentRefund("a", 1000, v1alpha1.RefundProcessing)}, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"a provider total that may already count a Refund in flight: wait for it rather than refuse", partRefund(500), paidPayment(1000), []v1alpha1.Refund{sentRefund("a", 1000, v1alpha1.RefundProcessing)}, 0, v1alpha1.ReasonEarlierRefundInFlight, "", ""},
		{"everything, while the provider total may count a Refund in flight: wait", fullRefund(), paidPayment(1000), []v1alpha1.Refund{sentRefund("a", 1000, v1alpha1.RefundProcessing)}, 0, v1alpha1.ReasonEarlierRefundInFlight, "", ""},
		{"too much even if the provider total counts the Refund in flight: refused", partRefund(1000), paidPayment(1000), []v1alpha1.Refund{sentRefund("a", 1000, v1alpha1.RefundProcessing)}, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"a provider total beyond the Refunds that fits only if it counts the one in flight: wait", partRefund(400), paidPayment(1500), []v1alpha1.Refund{sentRefund("a", 1000, v1alpha1.RefundProcessing)}, 0, v1alpha1.ReasonEarlierRefundInFlight, "", ""},
		{"nothing left whatever the provider total counts: refused", fullRefund(), paidPayment(orderValue), []v1alpha1.Refund{sentRefund("a", 1000, v1alpha1.RefundProcessing)}, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"once the Refund in flight succeeded and was read it is counted once", partRefund(500), countedBy(paidPayment(1000), "a"), []v1alpha1.Refund{sentRefund("a", 1000, v1alpha1.RefundSucceeded)}, 500, "", "", ""},
		{"a sibling under review stops every later one: wait", partRefund(100), paidPayment(0), []v1alpha1.Refund{func() v1alpha1.Refund {
			r := sentRefund("a", 500, v1alpha1.RefundUnknown)
			r.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonAmountMismatch}}
			return r
		}()}, 0, v1alpha1.ReasonEarlierRefundUndecided, "", ""},
		{"a sibling stuck under another review counts at its amount: too much is refused", partRefund(1600), paidPayment(0), []v1alpha1.Refund{func() v1alpha1.Refund {
			r := sentRefund("a", 500, v1alpha1.RefundUnknown)
			r.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonRetriesExhausted}}
			return r
		}()}, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"a failed sibling under review counts at its amount", partRefund(1600), paidPayment(0), []v1alpha1.Refund{func() v1alpha1.Refund {
			r := sentRefund("a", 500, v1alpha1.RefundFailed)
			r.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConflictingStatus}}
			return r
		}()}, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"a failed Refund does not count", partRefund(1000), paidPayment(0), []v1alpha1.Refund{sentRefund("a", 1999, v1alpha1.RefundFailed)}, 1000, "", "", ""},
		{"an older Refund not sent yet counts", partRefund(1000), paidPayment(0), []v1alpha1.Refund{*newRefund("a", 1500, t0)}, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"a newer Refund not sent yet does not", partRefund(1000), paidPayment(0), []v1alpha1.Refund{*newRefund("z", 1500, t0.Add(time.Hour))}, 1000, "", "", ""},
		{"an older Refund of everything, undecided: wait", partRefund(1000), paidPayment(0), []v1alpha1.Refund{*newRefund("a", 0, t0)}, 0, v1alpha1.ReasonEarlierRefundUndecided, "", ""},
		{"a zero amount (past the API's validation) is refused", func() *v1alpha1.Refund { r := partRefund(1); r.Spec.Amount.Value = 0; return r }(), paidPayment(0), nil, 0, "", v1alpha1.ReasonOverRefund, ""},
		{"another currency is refused", func() *v1alpha1.Refund { r := partRefund(100); r.Spec.Amount.Currency = "EUR"; return r }(), paidPayment(0), nil, 0, "", v1alpha1.ReasonOverRefund, ""},
	})
	// Two Refunds created together that add up to more than received: the
	// later one is refused, whichever is decided first.
	a, b := newRefund("a", 1200, t0), newRefund("b", 1200, t0)
	if _, _, refusal := payment.RefundAllowance(a, paidPayment(0), []v1alpha1.Refund{*b}); refusal != "" {
		t.Errorf("the earlier Refund was refused: %s", refusal)
	}
	if _, _, refusal := payment.RefundAllowance(b, paidPayment(0), []v1alpha1.Refund{*a}); !strings.HasPrefix(refusal, v1alpha1.ReasonOverRefund) {
		t.Errorf("the later Refund was allowed: %q", refusal)
	}
}

func TestPlanRefund(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Refunds: true}, true
	facts := payment.RefundFacts{Payment: paidPayment(0)}
	r := newRefund("r", 500, t0)
	s := payment.PlanRefund(r, pol, facts, t0)
	if s.Action != payment.Write || s.Outcome.Status.CreateRequestedAt == nil || s.Outcome.Status.Amount.Value != 500 || s.Outcome.Status.ProviderPaymentID != "pay_1" {
		t.Fatalf("step %s %+v", s.Action, s.Outcome.Status)
	}
	r.Status = s.Outcome.Status
	if s := payment.PlanRefund(r, pol, facts, t0); s.Action != payment.Create {
		t.Fatalf("after the marker: %s", s.Action)
	}
	lost := payment.AfterRefundCreate(r, pol, payment.RefundCall{Err: errTimeout}, t0)
	r.Status = lost.Status
	if r.Status.Phase != v1alpha1.RefundPending || r.Status.Failure != nil || r.Status.Query.NextTime == nil {
		t.Fatalf("a lost answer: %+v", r.Status)
	}
	if s := payment.PlanRefund(r, pol, facts, r.Status.Query.NextTime.Time); s.Action != payment.Create {
		t.Fatalf("the retry: %s, want the same create (same key)", s.Action)
	}
	if s := payment.PlanRefund(r, pol, facts, t0.Add(pol.LookupAfter())); s.Action != payment.Lookup {
		t.Fatalf("past the window: %s, want a lookup", s.Action)
	}
	notFound := payment.AfterRefundLookup(r, pol, payment.RefundCall{Err: errNotFound}, t0.Add(pol.LookupAfter()))
	if notFound.Status.Phase != v1alpha1.RefundUnknown || refundReview(&notFound.Status) != v1alpha1.ReasonCreateOutcomeUnknown {
		t.Fatalf("lookup not found: %+v", notFound.Status)
	}
	answered := payment.AfterRefundCreate(r, pol, payment.RefundCall{Refund: provider.Refund{ID: "re_1", Status: provider.RefundPending, Amount: 500, Currency: orderCurrency}}, t0)
	r.Status = answered.Status
	if r.Status.ProviderRefundID != "re_1" || r.Status.Query.NextTime == nil {
		t.Fatalf("answered: %+v", r.Status)
	}
	if s := payment.PlanRefund(r, pol, facts, r.Status.Query.NextTime.Time); s.Action != payment.Query {
		t.Fatalf("then queried: %s", s.Action)
	}
	refused := payment.AfterRefundCreate(newRefundMarked(pol, facts), pol, payment.RefundCall{Err: errRefused}, t0)
	if refused.Status.Phase != v1alpha1.RefundFailed {
		t.Fatalf("a refused refund: %+v", refused.Status)
	}
	t.Run("a provider type without refunds refuses before any call", func(t *testing.T) {
		none := pol
		none.Lifecycle.Refunds = false
		s := payment.PlanRefund(newRefund("x", 500, t0), none, facts, t0)
		if s.Action != payment.Write || s.Outcome.Status.Phase != v1alpha1.RefundFailed || s.Outcome.Status.Failure.Code != v1alpha1.ReasonRefundsNotSupported {
			t.Fatalf("step %s %+v", s.Action, s.Outcome.Status)
		}
	})
	t.Run("a refund of a pending payment waits, writing once", func(t *testing.T) {
		r := newRefund("w", 500, t0)
		f := payment.RefundFacts{Payment: buildPayment(nil, givenPending)}
		s := payment.PlanRefund(r, pol, f, t0)
		if s.Action != payment.Write || s.Outcome.Status.WaitingFor != v1alpha1.ReasonPaymentNotSucceeded || s.Outcome.Status.CreateRequestedAt != nil {
			t.Fatalf("step %s %+v", s.Action, s.Outcome.Status)
		}
		r.Status = s.Outcome.Status
		if s := payment.PlanRefund(r, pol, f, t0.Add(time.Second)); s.Action != payment.Nothing {
			t.Errorf("waiting again: %s", s.Action)
		}
	})
}

func newRefundMarked(pol payment.Policy, facts payment.RefundFacts) *v1alpha1.Refund {
	r := newRefund("m", 500, t0)
	r.Status = payment.PlanRefund(r, pol, facts, t0).Outcome.Status
	return r
}

func sameRefundStatus(a, b *v1alpha1.RefundStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// TestRefundSequenceProperties runs random observation sequences through the
// refund machine and checks its invariants after every step.
func TestRefundSequenceProperties(t *testing.T) {
	r, seed := propRand(t)
	for i := 0; i < 1000; i++ {
		if err := checkRefundSequence(randChooser{r}, 1+r.Intn(40)); err != nil {
			t.Fatalf("seed %d sequence %d: %v", seed, i, err)
		}
	}
}

// FuzzRefundSequence checks the same invariants on fuzzer-chosen sequences.
func FuzzRefundSequence(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := &byteChooser{b: data}
		if err := checkRefundSequence(c, 1+c.intn(40)); err != nil {
			t.Fatal(err)
		}
	})
}

// allowedRefundTransitions is payment.AllowedRefundTransitions, explored once
// per test binary.
var allowedRefundTransitions = sync.OnceValue(payment.AllowedRefundTransitions)

func checkRefundSequence(c chooser, steps int) error {
	observed := []payment.Observed{payment.ObservedPending, payment.ObservedProcessing, payment.ObservedSucceeded, payment.ObservedSucceeded, payment.ObservedFailed, payment.ObservedUnknown}
	reviews := []string{"", v1alpha1.ReasonRetriesExhausted, v1alpha1.ReasonCreateOutcomeUnknown, v1alpha1.ReasonProviderUnreachable}
	r := newRefund("prop", 500, t0)
	r.Status.Amount = &v1alpha1.Money{Value: 500, Currency: orderCurrency}
	now := t0
	for i := 0; i < steps; i++ {
		now = now.Add(time.Duration(c.intn(120)) * time.Minute)
		obs := payment.Observation{Source: v1alpha1.SourceWebhook, Observed: observed[c.intn(len(observed))], EventID: fmt.Sprintf("evt-%d", c.intn(6))}
		switch c.intn(5) {
		case 0:
			obs.Source, obs.EventID = v1alpha1.SourceStatusQuery, ""
		case 1:
			obs = payment.Observation{Source: v1alpha1.SourceManual, Observed: []payment.Observed{payment.ObservedSucceeded, payment.ObservedFailed, payment.ObservedPending}[c.intn(3)], Reason: "checked"}
		}
		if obs.Observed == payment.ObservedUnknown {
			obs.Review = reviews[c.intn(len(reviews))]
		}
		if obs.Observed == payment.ObservedSucceeded && c.intn(4) == 0 {
			obs.Amount = &v1alpha1.Money{Value: 499, Currency: orderCurrency}
		}
		from := r.Status.Phase
		res := payment.ApplyRefund(r, obs, now)
		to := res.Status.Phase
		switch {
		case from.IsFinal() && !to.IsFinal():
			return fmt.Errorf("step %d: %s moved a final %s to %s", i, obs.Observed, from, to)
		case from != to && to == v1alpha1.RefundFailed && obs.Observed != payment.ObservedFailed:
			return fmt.Errorf("step %d: failed by %s", i, obs.Observed)
		case to == v1alpha1.RefundUnknown && refundReview(&res.Status) == "":
			return fmt.Errorf("step %d: Unknown without review", i)
		case len(res.Status.History) > payment.MaxHistory:
			return fmt.Errorf("step %d: %d history entries", i, len(res.Status.History))
		case to.IsFinal() && res.Status.Query.NextTime != nil:
			return fmt.Errorf("step %d: final with a schedule", i)
		case from != to && res.Transition == nil:
			return fmt.Errorf("step %d: moved without a transition", i)
		}
		if obs.Source != v1alpha1.SourceManual {
			// Every step is in the table explored from the machine.
			allowed := allowedRefundTransitions()
			for _, h := range res.Status.History[min(len(r.Status.History), len(res.Status.History)):] {
				if !slices.Contains(allowed[v1alpha1.RefundPhase(h.From)], v1alpha1.RefundPhase(h.To)) {
					return fmt.Errorf("step %d: %q -> %q is not in AllowedRefundTransitions: the exploration misses a rule", i, h.From, h.To)
				}
			}
		}
		again := payment.ApplyRefund(&v1alpha1.Refund{ObjectMeta: r.ObjectMeta, Spec: r.Spec, Status: res.Status}, obs, now)
		if again.Decision == payment.Applied && obs.Source != v1alpha1.SourceManual {
			return fmt.Errorf("step %d: the same %s applied twice", i, obs.Observed)
		}
		r.Status = res.Status
	}
	return nil
}

// TestApplyRefundObservationsThatDoNotApply: what a refund cannot be
// (expired, canceled, a refunded total) is ignored and changes nothing; the
// provider not knowing the outcome yet is ignored too, but its raw status is
// shown.
func TestApplyRefundObservationsThatDoNotApply(t *testing.T) {
	at := func() *v1alpha1.Refund {
		r := newRefund("r", 500, t0)
		r.Status.ProviderRefundID, r.Status.Phase, r.Status.ProviderStatus = "re_1", v1alpha1.RefundProcessing, "processing"
		return r
	}
	for _, o := range []payment.Observed{payment.ObservedExpired, payment.ObservedCanceled, payment.ObservedRefund} {
		res := payment.ApplyRefund(at(), refundObs(o, "", func(obs *payment.Observation) { obs.Raw = "odd" }), t0)
		if res.Decision != payment.Ignored || !strings.Contains(res.Reason, "does not apply to a refund") || res.Status.ProviderStatus != "processing" || res.Status.Phase != v1alpha1.RefundProcessing {
			t.Errorf("%s: %s (%s), provider status %q; want Ignored, nothing changed", o, res.Decision, res.Reason, res.Status.ProviderStatus)
		}
	}
	res := payment.ApplyRefund(at(), refundObs(payment.ObservedUnknown, "", func(obs *payment.Observation) { obs.Raw = "requires_action" }), t0)
	if res.Decision != payment.Ignored || !strings.Contains(res.Reason, "does not know the outcome yet") || res.Status.ProviderStatus != "requires_action" {
		t.Errorf("unknown: %s (%s), provider status %q; want Ignored with the raw status shown", res.Decision, res.Reason, res.Status.ProviderStatus)
	}
}
