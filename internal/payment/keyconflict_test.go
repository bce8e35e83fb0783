package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// A key conflict (SPEC §12.1): the provider already has a first request under the
// call's idempotency key (Stripe idempotency_error, KukoPay 422 idempotency_error). It
// concerns that one call: never a verdict on the payment or refund, never a problem of
// the provider account; the call's outcome is looked up.

var errKeyConflict = &provider.Error{Provider: "shop/kukopay", Op: "create", Class: provider.ErrKeyConflict, StatusCode: 422, Code: "idempotency_error"}

// lookupPolicy is the test policy of a provider that can look a payment up by merchant
// reference and a refund up by reference.
func lookupPolicy() payment.Policy {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown, pol.LookupByReference = provider.Lifecycle{Refunds: true, RefundLookup: true, ManualCapture: true, Cancel: true}, true, true
	return pol
}

// noLookupPolicy is the test policy of a provider that cannot look anything up.
func noLookupPolicy() payment.Policy {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Refunds: true, ManualCapture: true, Cancel: true}, true
	return pol
}

func TestKeyConflictIsItsOwnClass(t *testing.T) {
	if c := payment.Classify(errKeyConflict); c != payment.KeyConflict || c.StatusName() != "KeyConflict" || c.String() != "key_conflict" {
		t.Fatalf("class %v %q %q", c, c.StatusName(), c.String())
	}
}

func TestAfterCreateKeyConflict(t *testing.T) {
	marked := func(pol payment.Policy) *v1alpha1.Payment {
		p := newPay("order")
		return store(p, planned(p, pol, t0).Outcome)
	}
	for _, tc := range []struct {
		name string
		pol  payment.Policy
		wait time.Duration // until the next call
		next payment.Action
	}{
		{"a key conflict on create is looked up by merchant reference at once", lookupPolicy(), payment.MinWait, payment.Lookup},
		{"a key conflict at a provider that cannot look up retries the create on the backoff", noLookupPolicy(), 30 * time.Second, payment.Create},
		{"a key conflict at a provider whose capabilities are unknown retries the create on the backoff", testPolicy(), 30 * time.Second, payment.Create},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := store(marked(tc.pol), payment.AfterCreate(marked(tc.pol), tc.pol, fails(errKeyConflict), t0))
			st := p.Status
			if st.Phase != v1alpha1.PhasePending || st.Failure != nil || review(p) != "" {
				t.Fatalf("a key conflict settled the payment: phase %q failure %+v review %q", st.Phase, st.Failure, review(p))
			}
			if st.Query.LastErrorClass != "KeyConflict" || st.Query.Attempts != 0 {
				t.Errorf("lastErrorClass %q attempts %d", st.Query.LastErrorClass, st.Query.Attempts)
			}
			if st.Query.NextTime == nil || !st.Query.NextTime.Time.Equal(t0.Add(tc.wait)) {
				t.Fatalf("next %v, want t0+%s", st.Query.NextTime, tc.wait)
			}
			if s := planned(p, tc.pol, t0.Add(tc.wait)); s.Action != tc.next {
				t.Fatalf("then %s (%s), want %s", s.Action, s.Why, tc.next)
			}
		})
	}
}

// TestAfterLookupAfterKeyConflict: the lookup that follows a key conflict inside the
// key window records what it finds; finding nothing yet is no verdict (the first
// request may still be running) and is looked up again on the backoff. Past the window
// the usual rule holds: anything but "found" is CreateOutcomeUnknown.
func TestAfterLookupAfterKeyConflict(t *testing.T) {
	pol := lookupPolicy()
	conflicted := func() *v1alpha1.Payment {
		p := newPay("order")
		p = store(p, planned(p, pol, t0).Outcome)
		return store(p, payment.AfterCreate(p, pol, fails(errKeyConflict), t0))
	}
	at := t0.Add(time.Second)
	for _, tc := range []struct {
		name   string
		call   payment.Call
		now    time.Time
		phase  v1alpha1.PaymentPhase
		review string
		class  string
		id     string
		next   payment.Action // at the next wake-up; Nothing: none scheduled
	}{
		{"found: the first create's payment is recorded and queried", answer(provider.StatusPending), at, v1alpha1.PhasePending, "", "", "pay_1", payment.Query},
		{"found paid: settled", answer(provider.StatusSucceeded), at, v1alpha1.PhaseSucceeded, "", "", "pay_1", payment.Nothing},
		{"not found yet inside the window: looked up again, never a verdict", fails(errNotFound), at, v1alpha1.PhasePending, "", "KeyConflict", "", payment.Lookup},
		{"a refused search inside the window: looked up again, never a verdict", fails(errRefused), at, v1alpha1.PhasePending, "", "KeyConflict", "", payment.Lookup},
		{"no answer to the lookup: the create is repeated with its key", fails(errNoAnswer), at, v1alpha1.PhasePending, "", "NoAnswer", "", payment.Create},
		{"not found past the window: create outcome unknown, never failed", fails(errNotFound), t0.Add(pol.LookupAfter()), v1alpha1.PhaseUnknown, v1alpha1.ReasonCreateOutcomeUnknown, "", "", payment.Nothing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := conflicted()
			if s := planned(p, pol, t0.Add(payment.MinWait)); s.Action != payment.Lookup {
				t.Fatalf("after the conflict: %s (%s)", s.Action, s.Why)
			}
			p = store(p, payment.AfterLookup(p, pol, tc.call, tc.now))
			st := p.Status
			if st.Phase != tc.phase || review(p) != tc.review || st.ProviderPaymentID != tc.id || st.Failure != nil {
				t.Fatalf("phase %q review %q id %q failure %+v, want %q %q %q", st.Phase, review(p), st.ProviderPaymentID, st.Failure, tc.phase, tc.review, tc.id)
			}
			if tc.class != "" && st.Query.LastErrorClass != tc.class {
				t.Errorf("lastErrorClass %q, want %q", st.Query.LastErrorClass, tc.class)
			}
			if tc.next == payment.Nothing {
				if st.Query.NextTime != nil {
					t.Fatalf("next %v, want none", st.Query.NextTime)
				}
				return
			}
			if st.Query.NextTime == nil || !st.Query.NextTime.Time.After(tc.now) {
				t.Fatalf("next %v: a call due at once", st.Query.NextTime)
			}
			if s := planned(p, pol, st.Query.NextTime.Time); s.Action != tc.next {
				t.Fatalf("then %s (%s), want %s", s.Action, s.Why, tc.next)
			}
		})
	}
}

// TestScenarioKeyConflictOnCreate: a create answered with a key conflict again and
// again never fails the payment; with a search the payment is found once the first
// request is visible, without a search the create is repeated with its key until it
// is replayed.
func TestScenarioKeyConflictOnCreate(t *testing.T) {
	visible := t0.Add(10 * time.Minute)
	t.Run("with a search: looked up until found", func(t *testing.T) {
		p, calls := drive(t, newPay("conflict"), lookupPolicy(), func(a payment.Action, _ int, now time.Time) payment.Call {
			switch {
			case a == payment.Create:
				return fails(errKeyConflict)
			case a == payment.Lookup && now.Before(visible):
				return fails(errNotFound)
			}
			return answer(provider.StatusSucceeded)
		}, t0.Add(3*time.Hour))
		if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.Failure != nil || review(p) != "" {
			t.Fatalf("phase %q failure %+v review %q", p.Status.Phase, p.Status.Failure, review(p))
		}
		if n := count(calls, payment.Create); n != 1 {
			t.Errorf("%d creates, want 1: the conflict is looked up, not created again", n)
		}
		if n := count(calls, payment.Lookup); n < 2 {
			t.Errorf("%d lookups, want a lookup again after nothing was found", n)
		}
	})
	t.Run("without a search: created again with its key on the backoff", func(t *testing.T) {
		p, calls := drive(t, newPay("conflict"), noLookupPolicy(), func(a payment.Action, _ int, now time.Time) payment.Call {
			if a == payment.Create && now.Before(visible) {
				return fails(errKeyConflict)
			}
			return answer(provider.StatusSucceeded)
		}, t0.Add(3*time.Hour))
		if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.Failure != nil || review(p) != "" {
			t.Fatalf("phase %q failure %+v review %q", p.Status.Phase, p.Status.Failure, review(p))
		}
		if n := count(calls, payment.Lookup); n != 0 {
			t.Errorf("%d lookups at a provider that cannot look up", n)
		}
		var last time.Time
		for _, c := range calls {
			if c.action == payment.Create && !last.IsZero() && c.at.Sub(last) < 30*time.Second {
				t.Errorf("create at %s only %s after the last: not on the backoff", c.at, c.at.Sub(last))
			}
			if c.action == payment.Create {
				last = c.at
			}
		}
		if n := count(calls, payment.Create); n < 2 {
			t.Errorf("%d creates, want the create repeated", n)
		}
	})
}

// TestAfterOperationKeyConflict: a capture or cancel answered with a key conflict is
// an operation whose outcome is unknown: kept, looked up with a status query, then
// repeated with its key; never refused, never a review.
func TestAfterOperationKeyConflict(t *testing.T) {
	pol := lookupPolicy()
	for _, tc := range []struct {
		kind       v1alpha1.OperationKind
		annotation string
	}{
		{v1alpha1.OperationCapture, v1alpha1.AnnotationCapture},
		{v1alpha1.OperationCancel, v1alpha1.AnnotationCancel},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			p := annotate(authorizedPay("op", v1alpha1.CaptureManual), tc.annotation, "1")
			now := t0.Add(time.Minute)
			s := payment.Plan(p, pol, payment.Facts{}, now)
			if s.Action != payment.Write || s.Outcome.Status.Operation == nil || s.Outcome.Status.Operation.Kind != tc.kind {
				t.Fatalf("step %s (%s) %+v", s.Action, s.Why, s.Outcome.Status.Operation)
			}
			p = store(p, s.Outcome)
			if s := payment.Plan(p, pol, payment.Facts{FreshOperation: true}, now); s.Action != payment.CallCapture && s.Action != payment.CallCancel {
				t.Fatalf("after the marker: %s", s.Action)
			}
			out := payment.AfterOperation(p, pol, tc.kind, fails(errKeyConflict), now)
			p = store(p, out)
			st := p.Status
			if st.Operation == nil || st.Operation.RetryAt == nil || st.Phase != v1alpha1.PhaseAuthorized || review(p) != "" || len(out.Events) != 0 {
				t.Fatalf("a key conflict ended the %s: op %+v phase %q review %q events %v", tc.kind, st.Operation, st.Phase, review(p), eventReasons(out))
			}
			if st.Query.LastErrorClass != "KeyConflict" {
				t.Errorf("lastErrorClass %q", st.Query.LastErrorClass)
			}
			if s := payment.Plan(p, pol, payment.Facts{}, st.Operation.RetryAt.Time); s.Action != payment.Query {
				t.Fatalf("at the retry: %s (%s), want the status query that looks the outcome up", s.Action, s.Why)
			}
		})
	}
}

// TestRefundKeyConflict: a refund answered with a key conflict is looked up by
// reference (where the provider can) or retried on the backoff; never Failed.
func TestRefundKeyConflict(t *testing.T) {
	facts := payment.RefundFacts{Payment: paidPayment(0)}
	found := payment.RefundCall{Refund: provider.Refund{ID: "re_1", Status: provider.RefundPending, Amount: 500, Currency: orderCurrency}}
	t.Run("looked up by reference, again while nothing is found, recorded once found", func(t *testing.T) {
		pol := lookupPolicy()
		r := newRefundMarked(pol, facts)
		r.Status = payment.AfterRefundCreate(r, pol, payment.RefundCall{Err: errKeyConflict}, t0).Status
		if r.Status.Phase != v1alpha1.RefundPending || r.Status.Failure != nil || r.Status.Query.LastErrorClass != "KeyConflict" ||
			r.Status.Query.NextTime == nil || !r.Status.Query.NextTime.Time.Equal(t0.Add(payment.MinWait)) {
			t.Fatalf("a key conflict, to be looked up at once: %+v", r.Status)
		}
		if s := payment.PlanRefund(r, pol, facts, r.Status.Query.NextTime.Time); s.Action != payment.Lookup {
			t.Fatalf("then %s (%s), want the lookup", s.Action, s.Why)
		}
		at := t0.Add(time.Second)
		r.Status = payment.AfterRefundLookup(r, pol, payment.RefundCall{Err: errNotFound}, at).Status
		if r.Status.Phase != v1alpha1.RefundPending || refundReview(&r.Status) != "" || r.Status.Query.NextTime == nil || !r.Status.Query.NextTime.Time.After(at) {
			t.Fatalf("not found yet: %+v", r.Status)
		}
		if s := payment.PlanRefund(r, pol, facts, r.Status.Query.NextTime.Time); s.Action != payment.Lookup {
			t.Fatalf("then %s (%s), want the lookup again", s.Action, s.Why)
		}
		r.Status = payment.AfterRefundLookup(r, pol, found, r.Status.Query.NextTime.Time).Status
		if r.Status.ProviderRefundID != "re_1" || r.Status.Query.LastError != "" {
			t.Fatalf("found: %+v", r.Status)
		}
	})
	t.Run("without a refund search the refund is repeated on the backoff", func(t *testing.T) {
		pol := noLookupPolicy()
		r := newRefundMarked(pol, facts)
		r.Status = payment.AfterRefundCreate(r, pol, payment.RefundCall{Err: errKeyConflict}, t0).Status
		if r.Status.Phase != v1alpha1.RefundPending || r.Status.Failure != nil || r.Status.Query.NextTime == nil || !r.Status.Query.NextTime.Time.Equal(t0.Add(30*time.Second)) {
			t.Fatalf("a key conflict: %+v", r.Status)
		}
		if s := payment.PlanRefund(r, pol, facts, r.Status.Query.NextTime.Time); s.Action != payment.Create {
			t.Fatalf("then %s (%s), want the refund again with its key", s.Action, s.Why)
		}
	})
	t.Run("not found past the window: create outcome unknown, never failed", func(t *testing.T) {
		pol := lookupPolicy()
		r := newRefundMarked(pol, facts)
		r.Status = payment.AfterRefundCreate(r, pol, payment.RefundCall{Err: errKeyConflict}, t0).Status
		late := t0.Add(pol.LookupAfter())
		r.Status = payment.AfterRefundLookup(r, pol, payment.RefundCall{Err: errNotFound}, late).Status
		if r.Status.Phase != v1alpha1.RefundUnknown || refundReview(&r.Status) != v1alpha1.ReasonCreateOutcomeUnknown {
			t.Fatalf("%+v", r.Status)
		}
	})
}
