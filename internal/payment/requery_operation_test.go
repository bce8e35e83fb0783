package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestARequeryDoesNotTurnAnUnansweredLookupIntoAnAnsweredOne: an operator's
// requery while a capture's outcome is unknown must not let the capture be
// repeated without an answered lookup.
//
//  1. A manual capture is marked and called; its answer is lost (timeout).
//  2. The lookup of its outcome (a status query) gets no answer either (a
//     timeout): query.lastTime moves, query.lastError says why, so it does not
//     count as a lookup (docs/state-machine.md, "Authorize, capture and
//     cancel": "Only an answered query ... counts as the lookup: one that got
//     no answer ... says nothing about the call, and is made again").
//  3. The operator annotates payments.paywarden.dev/requery (SPEC §2.4) to
//     hurry things up; the requery clears query.lastError.
//  4. Taken for an answered lookup, the unanswered query's lastTime would let
//     the capture be marked again and repeated with nobody having learnt
//     whether the first one took the money (SPEC §11.5: capture is
//     crash-safe like create: marker, deterministic key, lookup when the
//     outcome is unknown).
//
// Correct: the requery's query is the lookup; the capture is repeated only
// after a lookup that was answered.
func TestARequeryDoesNotTurnAnUnansweredLookupIntoAnAnsweredOne(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle = provider.Lifecycle{ManualCapture: true, PartialCapture: true, Cancel: true, Checkout: true}
	pol.LifecycleKnown = true
	now := t0.Add(time.Minute)

	p := annotate(authorizedPay("requery-lookup", v1alpha1.CaptureManual), v1alpha1.AnnotationCapture, "all")
	p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
	if s := payment.Plan(p, pol, payment.Facts{FreshOperation: true}, now); s.Action != payment.CallCapture {
		t.Fatalf("step %s (%s), want the capture", s.Action, s.Why)
	}
	// 1. The capture's answer is lost.
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, fails(errTimeout), now))
	// 2. The lookup gets no answer.
	at := p.Status.Operation.RetryAt.Time
	if s := payment.Plan(p, pol, payment.Facts{}, at); s.Action != payment.Query {
		t.Fatalf("step %s (%s), want the lookup", s.Action, s.Why)
	}
	p = store(p, payment.AfterQuery(p, pol, fails(errTimeout), false, at))
	// 3. The operator's requery.
	p = annotate(p, v1alpha1.AnnotationRequery, "1")
	s := payment.Plan(p, pol, payment.Facts{}, at.Add(time.Second))
	if s.Action != payment.Write {
		t.Fatalf("requery: step %s (%s), want its write", s.Action, s.Why)
	}
	p = store(p, s.Outcome)
	// 4. Nothing has answered about the capture yet: only a lookup may come next.
	for _, when := range []time.Time{at.Add(time.Second), p.Status.Operation.RetryAt.Time} {
		s := payment.Plan(p, pol, payment.Facts{}, when)
		if s.Action == payment.Wait {
			continue
		}
		if s.Action != payment.Query {
			op := s.Outcome.Status.Operation
			t.Fatalf("at %s after the requery: step %s (%s), operation %+v; want the lookup of the capture (no lookup was answered since the capture went out)",
				when.Format(time.RFC3339), s.Action, s.Why, op)
		}
		return
	}
	t.Fatalf("no step after the requery but waits")
}
