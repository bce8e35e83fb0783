package payment_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// The Refund's state machine in detail (SPEC §11.7): what each change
// writes, says and warns about.

// sentAt is a sent Refund of 500 in phase, under review for review ("":
// none).
func sentAt(phase v1alpha1.RefundPhase, review string) *v1alpha1.Refund {
	r := newRefund("r", 500, t0)
	r.Status.Amount = &v1alpha1.Money{Value: 500, Currency: orderCurrency}
	r.Status.ProviderRefundID, r.Status.Phase = "re_1", phase
	if review != "" {
		meta.SetStatusCondition(&r.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: review, Message: "x"})
	}
	return r
}

// TestASuccessReportedBeforeTheFailure: a success that occurred no later
// than the failure was reported (the failure's event time, else its history
// entry) is a refund that failed after it succeeded, delivered late: stale.
// One that occurred after it, or one the failure's time is unknown for,
// contradicts it.
func TestASuccessReportedBeforeTheFailure(t *testing.T) {
	failedAt := func(event, history *time.Time) *v1alpha1.Refund {
		r := sentAt(v1alpha1.RefundFailed, "")
		if event != nil {
			r.Status.LastEvent = &v1alpha1.EventRef{ID: "evt-failed", Time: ptrTime(*event)}
		}
		if history != nil {
			r.Status.History = []v1alpha1.HistoryEntry{{Time: metav1.NewTime(*history), From: "Succeeded", To: "Failed"}}
		}
		return r
	}
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	success := func(occurred time.Duration) payment.Observation {
		return refundObs(payment.ObservedSucceeded, "evt-late", withOccurredAt(t0.Add(occurred)))
	}
	for _, tc := range []struct {
		name string
		r    *v1alpha1.Refund
		obs  payment.Observation
		want payment.Decision
	}{
		{"before the failure's event", failedAt(at(2*time.Hour), at(time.Hour)), success(90 * time.Minute), payment.Stale},
		{"at the failure's event", failedAt(at(2*time.Hour), nil), success(2 * time.Hour), payment.Stale},
		{"after the failure's event", failedAt(at(2*time.Hour), at(3*time.Hour)), success(150 * time.Minute), payment.Conflict},
		{"before the failure's history entry, no event", failedAt(nil, at(time.Hour)), success(30 * time.Minute), payment.Stale},
		{"after the failure's history entry, no event", failedAt(nil, at(time.Hour)), success(90 * time.Minute), payment.Conflict},
		{"the failure's time unknown", failedAt(nil, nil), success(-time.Hour), payment.Conflict},
		{"the success's time unknown", failedAt(at(2*time.Hour), nil), refundObs(payment.ObservedSucceeded, "evt-late"), payment.Conflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := payment.ApplyRefund(tc.r, tc.obs, t0.Add(4*time.Hour))
			if res.Decision != tc.want || res.Status.Phase != v1alpha1.RefundFailed {
				t.Fatalf("%s -> %s (%s), want %s, still Failed", res.Decision, res.Status.Phase, res.Reason, tc.want)
			}
		})
	}
	// An event whose time is not recorded: the history entry stands for it.
	r := failedAt(nil, at(time.Hour))
	r.Status.LastEvent = &v1alpha1.EventRef{ID: "evt-failed"}
	if res := payment.ApplyRefund(r, success(30*time.Minute), t0.Add(4*time.Hour)); res.Decision != payment.Stale {
		t.Errorf("an event without a time before the history entry: %s (%s), want Stale", res.Decision, res.Reason)
	}
}

// TestARefundFailingAfterItSucceededSaysWhy: the Warning names the
// provider's failure code, if any.
func TestARefundFailingAfterItSucceededSaysWhy(t *testing.T) {
	res := payment.ApplyRefund(sentAt(v1alpha1.RefundSucceeded, ""), refundObs(payment.ObservedFailed, "evt-2", withFailure("expired_or_canceled_card", "")), t0)
	if e := eventOf(res.Events, v1alpha1.ReasonRefundReversed); e == nil || !e.Warning || !strings.HasSuffix(e.Message, "(expired_or_canceled_card)") {
		t.Errorf("with a code: %+v", res.Events)
	}
	res = payment.ApplyRefund(sentAt(v1alpha1.RefundSucceeded, ""), refundObs(payment.ObservedFailed, "evt-2"), t0)
	if e := eventOf(res.Events, v1alpha1.ReasonRefundReversed); e == nil || strings.Contains(e.Message, "(") || res.Status.Failure == nil || res.Status.Failure.Code != v1alpha1.ReasonRefundReversed {
		t.Errorf("without a code: %+v, failure %+v", res.Events, res.Status.Failure)
	}
}

// TestARefundsFailureReason: the history says the observation's reason,
// else the provider's failure code.
func TestARefundsFailureReason(t *testing.T) {
	last := func(res payment.RefundResult) string {
		h := res.Status.History
		if len(h) == 0 {
			return ""
		}
		return h[len(h)-1].Reason
	}
	res := payment.ApplyRefund(sentAt(v1alpha1.RefundProcessing, ""), refundObs(payment.ObservedFailed, "evt-1", withFailure("insufficient_funds", "")), t0)
	if last(res) != "insufficient_funds" {
		t.Errorf("without a reason: history says %q, want the code", last(res))
	}
	obs := refundObs(payment.ObservedFailed, "evt-1", withFailure("insufficient_funds", ""))
	obs.Reason = "the merchant's balance is too low"
	res = payment.ApplyRefund(sentAt(v1alpha1.RefundProcessing, ""), obs, t0)
	if last(res) != obs.Reason {
		t.Errorf("with a reason: history says %q, want %q", last(res), obs.Reason)
	}
	if e := eventOf(res.Events, "RefundFailed"); e == nil || !e.Warning || !strings.HasSuffix(e.Message, ": "+obs.Reason) {
		t.Errorf("the RefundFailed Event: %+v", res.Events)
	}
}

// TestARefundsReviews: paywarden's own reason replaces another of its own
// (the newer says what is wrong now); the same reason again is stale; a
// review's message is the observation's reason, else one naming the reason.
func TestARefundsReviews(t *testing.T) {
	res := payment.ApplyRefund(sentAt(v1alpha1.RefundUnknown, v1alpha1.ReasonRetriesExhausted), refundObs(payment.ObservedUnknown, "", withReview(v1alpha1.ReasonProviderUnreachable)), t0)
	if res.Decision != payment.Applied || refundReview(&res.Status) != v1alpha1.ReasonProviderUnreachable {
		t.Errorf("another paywarden reason: %s, review %q; want it applied", res.Decision, refundReview(&res.Status))
	}
	res = payment.ApplyRefund(sentAt(v1alpha1.RefundUnknown, v1alpha1.ReasonRetriesExhausted), refundObs(payment.ObservedUnknown, "", withReview(v1alpha1.ReasonRetriesExhausted)), t0)
	if res.Decision != payment.Stale {
		t.Errorf("the same reason again: %s, want Stale", res.Decision)
	}
	res = payment.ApplyRefund(sentAt(v1alpha1.RefundProcessing, ""), refundObs(payment.ObservedUnknown, "", withReview(v1alpha1.ReasonRetriesExhausted)), t0)
	if c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Message != "paywarden cannot settle this refund automatically: "+v1alpha1.ReasonRetriesExhausted {
		t.Errorf("a review without a reason: %+v", c)
	}
	if e := eventOf(res.Events, "RefundUnknown"); e == nil || !e.Warning {
		t.Errorf("the RefundUnknown Event is not a Warning: %+v", res.Events)
	}
	obs := refundObs(payment.ObservedUnknown, "", withReview(v1alpha1.ReasonRetriesExhausted))
	obs.Reason = "no answer after 12 queries"
	res = payment.ApplyRefund(sentAt(v1alpha1.RefundProcessing, ""), obs, t0)
	if c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Message != obs.Reason {
		t.Errorf("a review with a reason: %+v", c)
	}
}

// TestARefundConflictUnderReviewIsNotRepeated: a status query repeating a
// contradiction already under review is stale; an event is news and is
// recorded.
func TestARefundConflictUnderReviewIsNotRepeated(t *testing.T) {
	res := payment.ApplyRefund(sentAt(v1alpha1.RefundFailed, v1alpha1.ReasonConflictingStatus), refundObs(payment.ObservedSucceeded, ""), t0)
	if res.Decision != payment.Stale {
		t.Errorf("a query repeating the conflict: %s, want Stale", res.Decision)
	}
	res = payment.ApplyRefund(sentAt(v1alpha1.RefundFailed, v1alpha1.ReasonConflictingStatus), refundObs(payment.ObservedSucceeded, "evt-9"), t0)
	if res.Decision != payment.Conflict {
		t.Errorf("an event repeating the conflict: %s, want Conflict", res.Decision)
	}
}

// TestARefundsSuccessIsNormal: the RefundSucceeded Event is Normal, and the
// raw status without news keeps the one shown.
func TestARefundsSuccessIsNormal(t *testing.T) {
	res := payment.ApplyRefund(sentAt(v1alpha1.RefundProcessing, ""), refundObs(payment.ObservedSucceeded, "evt-1"), t0)
	if e := eventOf(res.Events, "RefundSucceeded"); e == nil || e.Warning || !strings.Contains(e.Message, "refund Processing -> Succeeded via Webhook") || strings.HasSuffix(e.Message, ": ") {
		t.Errorf("the RefundSucceeded Event: %+v", res.Events)
	}
	r := sentAt(v1alpha1.RefundProcessing, "")
	r.Status.ProviderStatus = "pending"
	if res := payment.ApplyRefund(r, refundObs(payment.ObservedProcessing, ""), t0); res.Status.ProviderStatus != "pending" {
		t.Errorf("an observation without a raw status cleared the one shown: %q", res.Status.ProviderStatus)
	}
}

// TestFromRefund: an amount only with a success that names its currency; a
// failure only with a failed refund that says why.
func TestFromRefund(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rf      provider.Refund
		want    payment.Observed
		amount  bool
		failure bool
	}{
		{"succeeded", provider.Refund{ID: "re_1", Status: provider.RefundSucceeded, Amount: 500, Currency: "USD"}, payment.ObservedSucceeded, true, false},
		{"succeeded, no currency", provider.Refund{ID: "re_1", Status: provider.RefundSucceeded, Amount: 500}, payment.ObservedSucceeded, false, false},
		{"pending with an amount", provider.Refund{ID: "re_1", Status: provider.RefundPending, Amount: 500, Currency: "USD"}, payment.ObservedPending, false, false},
		{"failed with a code", provider.Refund{ID: "re_1", Status: provider.RefundFailed, FailureCode: "lost_or_stolen_card"}, payment.ObservedFailed, false, true},
		{"failed with a message", provider.Refund{ID: "re_1", Status: provider.RefundFailed, FailureMessage: "card lost"}, payment.ObservedFailed, false, true},
		{"failed, no reason", provider.Refund{ID: "re_1", Status: provider.RefundFailed}, payment.ObservedFailed, false, false},
		{"processing with a code", provider.Refund{ID: "re_1", Status: provider.RefundProcessing, FailureCode: "x"}, payment.ObservedProcessing, false, false},
		{"unknown status", provider.Refund{ID: "re_1", Status: "requires_action"}, payment.ObservedUnknown, false, false},
	} {
		obs := payment.FromRefund(tc.rf, v1alpha1.SourceStatusQuery, "")
		if obs.Observed != tc.want || (obs.Amount != nil) != tc.amount || (obs.Failure != nil) != tc.failure {
			t.Errorf("%s: %s amount %+v failure %+v; want %s, amount %v, failure %v", tc.name, obs.Observed, obs.Amount, obs.Failure, tc.want, tc.amount, tc.failure)
		}
	}
}

func eventOf(events []payment.Event, reason string) *payment.Event {
	for i := range events {
		if events[i].Reason == reason {
			return &events[i]
		}
	}
	return nil
}

// TestPlanRefundAtRest: a settled Refund needs nothing, unless it still
// shows a schedule or a wait, which one write clears, or an operator action
// not taken yet; one parked in Unknown waits for a final answer or an
// operator; one in flight without a next query is queried, not left.
// RefundAtRest, on which the controller skips the reads of the payment and
// provider, holds only where the plan is Nothing whatever the facts, and
// only for a Refund owned by a Payment of the name it refunds.
func TestPlanRefundAtRest(t *testing.T) {
	pol := testPolicy()
	facts := payment.RefundFacts{Payment: paidPayment(0)}
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Payment", Name: "order-1", UID: "uid-order-1"}
	settled := func(set func(r *v1alpha1.Refund)) *v1alpha1.Refund {
		r := sentAt(v1alpha1.RefundSucceeded, "")
		r.Status.CreateRequestedAt = ptrTime(t0)
		r.OwnerReferences = []metav1.OwnerReference{owner}
		set(r)
		return r
	}
	annotate := func(k, v string) func(r *v1alpha1.Refund) {
		return func(r *v1alpha1.Refund) { r.Annotations = map[string]string{k: v} }
	}
	deleting := metav1.NewTime(t0)
	for name, tc := range map[string]struct {
		r    *v1alpha1.Refund
		want payment.Action
		rest bool
	}{
		"settled":                  {settled(func(*v1alpha1.Refund) {}), payment.Nothing, true},
		"settled Failed":           {settled(func(r *v1alpha1.Refund) { r.Status.Phase = v1alpha1.RefundFailed }), payment.Nothing, true},
		"settled with a schedule":  {settled(func(r *v1alpha1.Refund) { r.Status.Query.NextTime = micro(t0) }), payment.Write, false},
		"settled with a wait":      {settled(func(r *v1alpha1.Refund) { r.Status.WaitingFor = "Provider" }), payment.Write, false},
		"settled, a requery asked": {settled(annotate(v1alpha1.AnnotationRequery, "1")), payment.Write, false},
		"settled, a requery taken": {settled(func(r *v1alpha1.Refund) {
			annotate(v1alpha1.AnnotationRequery, "1")(r)
			r.Status.Actions.Requery = "1"
		}), payment.Nothing, true},
		"settled, a resolve asked": {settled(annotate(v1alpha1.AnnotationResolve, string(v1alpha1.RefundFailed))), payment.Write, false},
		"settled, not owned":       {settled(func(r *v1alpha1.Refund) { r.OwnerReferences = nil }), payment.Nothing, false},
		"settled, owned by another payment": {settled(func(r *v1alpha1.Refund) {
			o := owner
			o.Name = "order-2"
			r.OwnerReferences = []metav1.OwnerReference{o}
		}), payment.Nothing, false},
		"settled, owned by a namesake of another kind": {settled(func(r *v1alpha1.Refund) {
			o := owner
			o.Kind = "Refund"
			r.OwnerReferences = []metav1.OwnerReference{o}
		}), payment.Nothing, false},
		"settled, owned by a Payment of another API": {settled(func(r *v1alpha1.Refund) {
			o := owner
			o.APIVersion = "shop.example.com/v1"
			r.OwnerReferences = []metav1.OwnerReference{o}
		}), payment.Nothing, false},
		"settled and deleted": {settled(func(r *v1alpha1.Refund) { r.DeletionTimestamp = &deleting }), payment.Nothing, false},
		"parked in Unknown": {func() *v1alpha1.Refund {
			r := sentAt(v1alpha1.RefundUnknown, v1alpha1.ReasonRetriesExhausted)
			r.Status.CreateRequestedAt = ptrTime(t0)
			r.OwnerReferences = []metav1.OwnerReference{owner}
			return r
		}(), payment.Nothing, false},
	} {
		now := t0.Add(time.Hour)
		step := payment.PlanRefund(tc.r, pol, facts, now)
		if step.Action != tc.want {
			t.Errorf("%s: %s (%s), want %s", name, step.Action, step.Why, tc.want)
		}
		if step.Action == payment.Write && (step.Outcome.Status.Query.NextTime != nil || step.Outcome.Status.WaitingFor != "") {
			t.Errorf("%s: the write keeps %+v, waiting for %q", name, step.Outcome.Status.Query.NextTime, step.Outcome.Status.WaitingFor)
		}
		if got := payment.RefundAtRest(tc.r, now); got != tc.rest {
			t.Errorf("%s: at rest %v, want %v", name, got, tc.rest)
		}
		if payment.RefundAtRest(tc.r, now) {
			// Whatever the payment and ledger say: gone, or under review.
			for _, f := range []payment.RefundFacts{{}, facts, {Payment: paidPayment(500), Ledger: []payment.LedgerRecord{{}}}} {
				if step := payment.PlanRefund(tc.r, pol, f, now); step.Action != payment.Nothing {
					t.Errorf("%s: at rest, yet planned %s (%s) on facts %+v", name, step.Action, step.Why, f)
				}
			}
		}
	}
	inFlight := sentAt(v1alpha1.RefundProcessing, "")
	inFlight.Status.CreateRequestedAt = ptrTime(t0)
	inFlight.OwnerReferences = []metav1.OwnerReference{owner}
	if step := payment.PlanRefund(inFlight, pol, facts, t0.Add(time.Hour)); step.Action == payment.Nothing {
		t.Errorf("a refund in flight without a next query: %s (%s), want it followed", step.Action, step.Why)
	}
	if payment.RefundAtRest(inFlight, t0.Add(time.Hour)) {
		t.Error("a refund in flight is at rest")
	}
}

// TestARefundCallWaitsForItsTime: a refund whose create got no answer
// waits for its retry, and a sent one for its next query; either goes at
// once when it waited for a configuration fix and the provider's
// configuration is accepted, and not before.
func TestARefundCallWaitsForItsTime(t *testing.T) {
	pol := testPolicy()
	unsent := newRefund("r", 500, t0)
	unsent.Status.Phase, unsent.Status.Amount = v1alpha1.RefundPending, &v1alpha1.Money{Value: 500, Currency: orderCurrency}
	for _, tc := range []struct {
		name string
		r    *v1alpha1.Refund
		call payment.Action
	}{
		{"a create without an answer", unsent, payment.Create},
		{"a sent refund", sentAt(v1alpha1.RefundProcessing, ""), payment.Query},
	} {
		r := tc.r
		r.Status.CreateRequestedAt = ptrTime(t0)
		r.Status.Query.NextTime = micro(t0.Add(time.Minute))
		r.Status.Query.LastErrorClass = payment.NoAnswer.StatusName()
		facts := payment.RefundFacts{Payment: paidPayment(0), ConfigAccepted: true}
		for _, at := range []struct {
			name    string
			class   payment.ErrorClass
			config  bool
			elapsed time.Duration
			want    payment.Action
		}{
			{"not due", payment.NoAnswer, true, time.Second, payment.Wait},
			{"due", payment.NoAnswer, true, time.Minute, tc.call},
			{"a configuration fixed", payment.ConfigProblem, true, time.Second, tc.call},
			{"a configuration not fixed", payment.ConfigProblem, false, time.Second, payment.Wait},
		} {
			r.Status.Query.LastErrorClass, facts.ConfigAccepted = at.class.StatusName(), at.config
			step := payment.PlanRefund(r, pol, facts, t0.Add(at.elapsed))
			if step.Action != at.want || at.want == payment.Wait && !step.At.Equal(t0.Add(time.Minute)) {
				t.Errorf("%s, %s: %s (%s) at %v, want %s", tc.name, at.name, step.Action, step.Why, step.At, at.want)
			}
		}
	}
}

// TestARefundsWaitFollowsItsReason: a Refund waiting for one reason that
// now waits for another says so; the same wait again writes nothing.
func TestARefundsWaitFollowsItsReason(t *testing.T) {
	pol := testPolicy()
	r := newRefund("r", 500, t0)
	first := payment.PlanRefund(r, pol, payment.RefundFacts{}, t0)
	if first.Action != payment.Write || first.Outcome.Status.WaitingFor != v1alpha1.ReasonPaymentNotFound {
		t.Fatalf("no payment: %s, waiting for %q", first.Action, first.Outcome.Status.WaitingFor)
	}
	r.Status = first.Outcome.Status
	if again := payment.PlanRefund(r, pol, payment.RefundFacts{}, t0.Add(time.Minute)); again.Action != payment.Nothing {
		t.Errorf("the same wait again: %s (%s), want Nothing", again.Action, again.Why)
	}
	unpaid := paidPayment(0)
	unpaid.Status.Phase = v1alpha1.PhasePending
	next := payment.PlanRefund(r, pol, payment.RefundFacts{Payment: unpaid}, t0.Add(time.Minute))
	if next.Action != payment.Write || next.Outcome.Status.WaitingFor != v1alpha1.ReasonPaymentNotSucceeded {
		t.Errorf("the payment found, not paid yet: %s, waiting for %q; want %s", next.Action, next.Outcome.Status.WaitingFor, v1alpha1.ReasonPaymentNotSucceeded)
	}
}

// TestARefundAnswerWithoutItsCallChangesNothing: the answer of a refund
// call is taken only by a Refund whose marker is stored and which has no
// refund id yet (one learned from a webhook meanwhile stands).
func TestARefundAnswerWithoutItsCallChangesNothing(t *testing.T) {
	pol := testPolicy()
	answer := payment.RefundCall{Refund: provider.Refund{ID: "re_2", Status: provider.RefundFailed, FailureCode: "x"}}
	known := sentAt(v1alpha1.RefundProcessing, "")
	known.Status.CreateRequestedAt = ptrTime(t0)
	unmarked := newRefund("r", 500, t0)
	unmarked.Status.Phase = v1alpha1.RefundPending
	for name, r := range map[string]*v1alpha1.Refund{"with a refund id": known, "without a marker": unmarked} {
		before := r.Status.DeepCopy()
		out := payment.AfterRefundCreate(r, pol, answer, t0.Add(time.Second))
		if out.Status.ProviderRefundID != before.ProviderRefundID || out.Status.Phase != before.Phase || out.Status.Failure != nil {
			t.Errorf("%s: the answer was taken: %+v", name, out.Status)
		}
	}
}

// TestARefundAnsweredWithoutAnIdIsNoAnswer: a refund call answered without
// a refund id proves nothing: it is retried with the same key on the
// create's backoff.
func TestARefundAnsweredWithoutAnIdIsNoAnswer(t *testing.T) {
	pol := testPolicy()
	r := newRefund("r", 500, t0)
	r.Status.Phase, r.Status.CreateRequestedAt = v1alpha1.RefundPending, ptrTime(t0)
	for name, call := range map[string]payment.RefundCall{
		"without a refund id": {Refund: provider.Refund{Status: provider.RefundSucceeded, Amount: 500, Currency: orderCurrency}},
		"no answer":           {Err: errNoAnswer},
	} {
		r := r.DeepCopy()
		r.Status = payment.AfterRefundCreate(r, pol, call, t0).Status
		r.Status = payment.AfterRefundCreate(r, pol, call, t0.Add(time.Hour)).Status
		q := r.Status.Query
		if r.Status.Phase != v1alpha1.RefundPending || r.Status.ProviderRefundID != "" || q.ConsecutiveErrors != 2 ||
			q.NextTime == nil || !q.NextTime.Time.Equal(t0.Add(time.Hour+pol.Schedule[1])) {
			t.Errorf("%s twice: phase %s id %q query %+v; want Pending, 2 errors, the next at the create backoff's second step (%v)",
				name, r.Status.Phase, r.Status.ProviderRefundID, q, pol.Schedule[1])
		}
		if name == "without a refund id" && !strings.Contains(q.LastError, "without a refund id") {
			t.Errorf("the error does not say so: %q", q.LastError)
		}
	}
}
