package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// An unpaid payment past spec.expiresAfter is closed at its provider before
// paywarden calls it Expired (SPEC §2.5): otherwise the payer can still pay
// the Checkout Session, PaymentIntent or order paywarden gave up on, and
// the late payment lands in review (LateSuccess).
func TestCloseOutClosesTheProviderObjectFirst(t *testing.T) {
	canCancel := func() payment.Policy {
		pol := testPolicy()
		pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Cancel: true}, true
		return pol
	}
	expiring := func() *v1alpha1.Payment { return expiresAfter(created("close-out"), 10*time.Minute) }
	past := t0.Add(11 * time.Minute)
	// closeOutQuery runs the close-out's status query (answered Pending)
	// and returns the payment as stored.
	closeOutQuery := func(t *testing.T, p *v1alpha1.Payment, pol payment.Policy) *v1alpha1.Payment {
		t.Helper()
		step := payment.Plan(p, pol, payment.Facts{}, past)
		if step.Action != payment.Query || !step.CloseOut {
			t.Fatalf("%v (%s), want the close-out query", step.Action, step.Why)
		}
		return store(p, payment.AfterQuery(p, pol, answer(provider.StatusPending), true, past))
	}
	// cancelAnswered runs the close-out's query at a provider that can
	// cancel, then gives the cancel call its answer.
	cancelAnswered := func(t *testing.T, call payment.Call) (*v1alpha1.Payment, payment.Policy) {
		t.Helper()
		pol := canCancel()
		p := closeOutQuery(t, expiring(), pol)
		return store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, call, past)), pol
	}

	t.Run("closed at the provider, then Expired", func(t *testing.T) {
		pol := canCancel()
		p := closeOutQuery(t, expiring(), pol)
		op := p.Status.Operation
		if p.Status.Phase.IsFinal() || op == nil || op.Kind != v1alpha1.OperationCancel || op.Reason != v1alpha1.ReasonUnpaidTimeout {
			t.Fatalf("phase %s operation %+v, want a cancel at the provider first", p.Status.Phase, op)
		}
		if step := payment.Plan(p, pol, payment.Facts{FreshOperation: true}, past); step.Action != payment.CallCancel {
			t.Fatalf("%v (%s), want the cancel call", step.Action, step.Why)
		}
		canceled := answer(provider.StatusCanceled)
		p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, canceled, past))
		if p.Status.Phase != v1alpha1.PhaseExpired || p.Status.ExpiredLocally || p.Status.Operation != nil {
			t.Fatalf("phase %s locally %v operation %+v, want Expired at the provider", p.Status.Phase, p.Status.ExpiredLocally, p.Status.Operation)
		}
		if last := p.Status.History[len(p.Status.History)-1]; last.Reason != v1alpha1.ReasonUnpaidTimeout {
			t.Errorf("history %+v, want UnpaidTimeout", last)
		}
	})
	t.Run("the close seen before the cancel's answer: Expired, not Canceled", func(t *testing.T) {
		// The provider's event of the close can come before the cancel
		// call's answer is stored (or instead of it, when the answer is
		// lost); so can a look-up of the cancel's outcome.
		for name, seen := range map[string]func(*v1alpha1.Payment, payment.Policy) payment.Outcome{
			"webhook canceled": func(p *v1alpha1.Payment, _ payment.Policy) payment.Outcome {
				return payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, EventID: "evt_close", Observed: payment.ObservedCanceled}, past)
			},
			"webhook expired": func(p *v1alpha1.Payment, _ payment.Policy) payment.Outcome {
				return payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, EventID: "evt_close", Observed: payment.ObservedExpired}, past)
			},
			"look-up": func(p *v1alpha1.Payment, pol payment.Policy) payment.Outcome {
				return payment.AfterQuery(p, pol, answer(provider.StatusCanceled), true, past.Add(2*time.Second))
			},
		} {
			pol := canCancel()
			p := closeOutQuery(t, expiring(), pol)
			p = store(p, seen(p, pol))
			if p.Status.Phase != v1alpha1.PhaseExpired || p.Status.Operation != nil {
				t.Fatalf("%s: phase %s operation %+v, want Expired", name, p.Status.Phase, p.Status.Operation)
			}
			if last := p.Status.History[len(p.Status.History)-1]; last.Reason != v1alpha1.ReasonUnpaidTimeout {
				t.Errorf("%s: history %+v, want UnpaidTimeout", name, last)
			}
			// The cancel's answer, arriving after, changes nothing.
			if again := store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, answer(provider.StatusCanceled), past)); again.Status.Phase != v1alpha1.PhaseExpired {
				t.Errorf("%s: then the answer: phase %s, want Expired", name, again.Status.Phase)
			}
		}
		// A cancel the operator asked for stays Canceled.
		p := created("operator-cancel")
		p.Status.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCancel, Reason: "customer changed their mind"}
		p = store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, EventID: "evt_c", Observed: payment.ObservedCanceled}, past))
		if p.Status.Phase != v1alpha1.PhaseCanceled {
			t.Errorf("an operator's cancel: phase %s, want Canceled", p.Status.Phase)
		}
	})
	t.Run("paid meanwhile: the cancel finds it paid", func(t *testing.T) {
		p, _ := cancelAnswered(t, answer(provider.StatusSucceeded))
		if p.Status.Phase != v1alpha1.PhaseSucceeded || review(p) != "" {
			t.Fatalf("phase %s review %q, want Succeeded", p.Status.Phase, review(p))
		}
	})
	t.Run("the provider refuses to close it: a fresh query decides, never blind", func(t *testing.T) {
		for _, tc := range []struct {
			then provider.Status
			want v1alpha1.PaymentPhase
		}{
			{provider.StatusPending, v1alpha1.PhaseExpired},
			// Refused because the payer paid meanwhile: never Expired.
			{provider.StatusProcessing, v1alpha1.PhaseProcessing},
			{provider.StatusSucceeded, v1alpha1.PhaseSucceeded},
		} {
			p, pol := cancelAnswered(t, fails(errRefused))
			if p.Status.Phase.IsFinal() || p.Status.Operation != nil || !p.Status.CloseOutRefused {
				t.Fatalf("refused: phase %s operation %+v refused %v, want a fresh query first", p.Status.Phase, p.Status.Operation, p.Status.CloseOutRefused)
			}
			now := past.Add(time.Second)
			step := payment.Plan(p, pol, payment.Facts{}, now)
			if step.Action != payment.Query || !step.CloseOut {
				t.Fatalf("after the refusal: %v (%s), want the close-out's fresh query", step.Action, step.Why)
			}
			p = store(p, payment.AfterQuery(p, pol, answer(tc.then), true, now))
			if p.Status.Phase != tc.want || p.Status.Operation != nil {
				t.Errorf("then %s: phase %s operation %+v, want %s and no second cancel", tc.then, p.Status.Phase, p.Status.Operation, tc.want)
			}
			if tc.want == v1alpha1.PhaseExpired && !p.Status.ExpiredLocally {
				t.Errorf("then %s: want Expired locally", tc.then)
			}
		}
	})
	t.Run("the close-out's cancel looked up: a payment that moved on is not canceled", func(t *testing.T) {
		for _, then := range []provider.Status{provider.StatusProcessing, provider.StatusAuthorized} {
			pol := canCancel()
			p := closeOutQuery(t, expiring(), pol)
			// Not this process's marker: its outcome is looked up first.
			step := payment.Plan(p, pol, payment.Facts{}, past.Add(2*time.Second))
			if step.Action != payment.Query {
				t.Fatalf("%v (%s), want the look-up", step.Action, step.Why)
			}
			p = store(p, payment.AfterQuery(p, pol, answer(then), step.CloseOut, past.Add(2*time.Second)))
			if p.Status.Operation != nil {
				t.Fatalf("then %s: operation %+v kept, want the close-out dropped", then, p.Status.Operation)
			}
			if s := payment.Plan(p, pol, payment.Facts{}, past.Add(3*time.Second)); s.Action == payment.CallCancel ||
				s.Action == payment.Write && s.Outcome.Status.Operation != nil && s.Outcome.Status.Operation.Kind == v1alpha1.OperationCancel {
				t.Fatalf("then %s: %v (%s): a cancel for a payment that moved on", then, s.Action, s.Why)
			}
		}
	})
	t.Run("the close-out's cancel looked up: still unpaid, the cancel is repeated with its key", func(t *testing.T) {
		pol := canCancel()
		p := closeOutQuery(t, expiring(), pol)
		key := p.Status.Operation.IdempotencyKey
		// Not this process's marker: its outcome is looked up first.
		now := past.Add(2 * time.Second)
		step := payment.Plan(p, pol, payment.Facts{}, now)
		if step.Action != payment.Query {
			t.Fatalf("%v (%s), want the look-up", step.Action, step.Why)
		}
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusPending), step.CloseOut, now))
		if op := p.Status.Operation; p.Status.Phase.IsFinal() || op == nil || !isCloseOutOp(op) || op.IdempotencyKey != key {
			t.Fatalf("phase %s operation %+v, want the close-out's cancel kept (key %s)", p.Status.Phase, op, key)
		}
		step = payment.Plan(p, pol, payment.Facts{}, now.Add(time.Second))
		if step.Action == payment.Write {
			p = store(p, step.Outcome)
			step = payment.Plan(p, pol, payment.Facts{FreshOperation: true}, now.Add(time.Second))
		}
		if step.Action != payment.CallCancel || p.Status.Operation.IdempotencyKey != key {
			t.Fatalf("%v (%s) with key %s, want the cancel repeated with key %s", step.Action, step.Why, p.Status.Operation.IdempotencyKey, key)
		}
	})
	t.Run("the cancel's answer says the payment moved on: it stands", func(t *testing.T) {
		for _, tc := range []struct {
			ans  provider.Status
			want v1alpha1.PaymentPhase
		}{
			{provider.StatusProcessing, v1alpha1.PhaseProcessing},
			{provider.StatusAuthorized, v1alpha1.PhaseAuthorized},
		} {
			p, _ := cancelAnswered(t, answer(tc.ans))
			if p.Status.Phase != tc.want {
				t.Errorf("cancel answered %s: phase %s, want %s", tc.ans, p.Status.Phase, tc.want)
			}
		}
	})
	t.Run("an operation marked while the close-out query was out is not replaced by the close-out", func(t *testing.T) {
		// The query's answer is decided again on fresh state after a write
		// conflict: the cancel an operator asked for meanwhile is not turned
		// into the close-out's (the operator's reason is not lost).
		pol := canCancel()
		p := expiring()
		step := payment.Plan(p, pol, payment.Facts{}, past)
		if step.Action != payment.Query || !step.CloseOut {
			t.Fatalf("%v (%s), want the close-out query", step.Action, step.Why)
		}
		p = annotate(p, v1alpha1.AnnotationCancel, "customer changed their mind")
		p = store(p, payment.Plan(p, pol, payment.Facts{}, past).Outcome)
		marked := p.Status.Operation
		if marked == nil || marked.Kind != v1alpha1.OperationCancel || isCloseOutOp(marked) {
			t.Fatalf("operation %+v, want the operator's cancel", marked)
		}
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusPending), step.CloseOut, past))
		if op := p.Status.Operation; op == nil || op.Reason != marked.Reason {
			t.Fatalf("operation %+v replaced or dropped the operator's cancel %+v", op, marked)
		}
		// Nor is the payment expired locally under it: the cancel still
		// goes out and closes the provider's object, so the payer cannot
		// pay what paywarden ended.
		if p.Status.Phase != v1alpha1.PhasePending {
			t.Fatalf("phase %s with the operator's cancel not sent, want Pending until it is", p.Status.Phase)
		}
		if next := payment.Plan(p, pol, payment.Facts{}, past.Add(2*time.Second)); next.Action != payment.CallCancel && next.Action != payment.Query && next.Action != payment.Lookup {
			t.Fatalf("next %v (%s), want the operator's cancel sent (or looked up first)", next.Action, next.Why)
		}
	})
	t.Run("no cancel at this provider type: closed out locally at once", func(t *testing.T) {
		pol := testPolicy()
		pol.LifecycleKnown = true
		p := closeOutQuery(t, expiring(), pol)
		if p.Status.Phase != v1alpha1.PhaseExpired || !p.Status.ExpiredLocally {
			t.Fatalf("phase %s locally %v, want Expired locally", p.Status.Phase, p.Status.ExpiredLocally)
		}
	})
	t.Run("a tracked payment is not closed by paywarden", func(t *testing.T) {
		pol := canCancel()
		p := expiring()
		p.Spec.ProviderPaymentID = "pay_1"
		p = closeOutQuery(t, p, pol)
		if p.Status.Phase != v1alpha1.PhaseExpired || p.Status.Operation != nil {
			t.Fatalf("phase %s operation %+v, want Expired locally, nothing sent", p.Status.Phase, p.Status.Operation)
		}
	})
}

// isCloseOutOp: op is the cancel of an unpaid payment past expiresAfter.
func isCloseOutOp(op *v1alpha1.Operation) bool {
	return op.Kind == v1alpha1.OperationCancel && op.Reason == v1alpha1.ReasonUnpaidTimeout
}

// TestACloseOutCancelAnsweredUnpaidClosesItOutLocally: the provider answers
// the close-out's cancel with the payment still open and unpaid: it is
// closed out locally (Expired), as the close-out decided, with nothing more
// to ask the provider.
func TestACloseOutCancelAnsweredUnpaidClosesItOutLocally(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Cancel: true}, true
	past := t0.Add(11 * time.Minute)
	p := expiresAfter(created("close-out"), 10*time.Minute)
	p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusPending), true, past))
	if op := p.Status.Operation; op == nil || !isCloseOutOp(op) {
		t.Fatalf("operation %+v, want the close-out's cancel", op)
	}
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, answer(provider.StatusPending), past))
	if p.Status.Phase != v1alpha1.PhaseExpired || p.Status.Operation != nil || p.Status.Query.NextTime != nil {
		t.Fatalf("phase %s operation %+v next %v, want Expired, nothing more to do", p.Status.Phase, p.Status.Operation, p.Status.Query.NextTime)
	}
}

// TestAnOperationsAnswerThatParksLeavesNoQuery: a capture answered with
// another amount than authorized parks the payment for a human; no status
// query is scheduled after it (a query would take it out of review).
func TestAnOperationsAnswerThatParksLeavesNoQuery(t *testing.T) {
	pol := testPolicy()
	p := authorizedPay("order-1", v1alpha1.CaptureManual)
	p.Annotations = map[string]string{v1alpha1.AnnotationCapture: "all"}
	out, _, _ := payment.OperatorAction(p, t0.Add(time.Minute))
	p = store(p, out)
	if p.Status.Operation == nil {
		t.Fatal("no capture marker")
	}
	paid := answer(provider.StatusSucceeded)
	paid.Payment.Amount = orderValue + 100
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, paid, t0.Add(2*time.Minute)))
	if review(p) == "" || p.Status.Phase != v1alpha1.PhaseUnknown || p.Status.Query.NextTime != nil || p.Status.Operation != nil {
		t.Fatalf("phase %s review %q next %v operation %+v; want parked for review, no query", p.Status.Phase, review(p), p.Status.Query.NextTime, p.Status.Operation)
	}
}
