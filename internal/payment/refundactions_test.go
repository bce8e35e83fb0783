package payment_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// A Refund's operator actions, and what its look-ups and queries decide
// (SPEC §11.7).

func annotated(r *v1alpha1.Refund, kv ...string) *v1alpha1.Refund {
	if r.Annotations == nil {
		r.Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		r.Annotations[kv[i]] = kv[i+1]
	}
	return r
}

// TestARefundResolve: a resolve of a Refund under review settles it once;
// the same resolve again is not acted on; one that cannot apply is refused
// with a Warning, and remembered so it is not refused again and again.
func TestARefundResolve(t *testing.T) {
	r := annotated(sentAt(v1alpha1.RefundUnknown, v1alpha1.ReasonCreateOutcomeUnknown),
		v1alpha1.AnnotationResolve, "Succeeded", v1alpha1.AnnotationResolveReason, "seen in the dashboard")
	out, why, ok := payment.RefundOperatorAction(r, t0)
	if !ok || why != "operator resolve" || out.Status.Phase != v1alpha1.RefundSucceeded || out.Status.Actions.Resolve != "Succeeded: seen in the dashboard" {
		t.Fatalf("resolve: ok %v (%s) phase %s actions %+v", ok, why, out.Status.Phase, out.Status.Actions)
	}
	if _, refused := out.Refusal(); refused {
		t.Errorf("an applied resolve was refused: %+v", out.Events)
	}
	r.Status = out.Status
	if _, _, ok := payment.RefundOperatorAction(r, t0.Add(time.Minute)); ok {
		t.Error("the same resolve was acted on twice")
	}

	settled := annotated(sentAt(v1alpha1.RefundSucceeded, ""), v1alpha1.AnnotationResolve, "Failed", v1alpha1.AnnotationResolveReason, "wrong refund")
	out, _, ok = payment.RefundOperatorAction(settled, t0)
	e, refused := out.Refusal()
	if !ok || !refused || e.Reason != "ResolveIgnored" || !e.Warning || out.Status.Phase != v1alpha1.RefundSucceeded || out.Status.Actions.Resolve != "Failed: wrong refund" {
		t.Errorf("a resolve of a settled refund nobody reviews: ok %v, event %+v, phase %s, actions %+v; want ResolveIgnored (Warning), remembered, still Succeeded", ok, e, out.Status.Phase, out.Status.Actions)
	}
	if _, _, ok := payment.RefundOperatorAction(sentAt(v1alpha1.RefundProcessing, ""), t0); ok {
		t.Error("a Refund without annotations has an operator action")
	}
}

// TestARefundRequery: a requery restarts the query schedule once (a Normal
// Event); of a settled refund it is left alone, with a Normal
// RequeryIgnored.
func TestARefundRequery(t *testing.T) {
	r := annotated(sentAt(v1alpha1.RefundProcessing, ""), v1alpha1.AnnotationRequery, "1")
	r.Status.Query.Attempts, r.Status.Query.ConsecutiveErrors, r.Status.Query.LastError = 5, 2, "timeout"
	r.Status.Query.NextTime = micro(t0.Add(time.Hour))
	out, why, ok := payment.RefundOperatorAction(r, t0)
	q := out.Status.Query
	if !ok || why != "operator requery" || q.Attempts != 0 || q.ConsecutiveErrors != 0 || q.LastError != "" || q.NextTime == nil || !q.NextTime.Time.Equal(t0) || out.Status.Actions.Requery != "1" {
		t.Fatalf("requery: ok %v (%s) query %+v actions %+v", ok, why, q, out.Status.Actions)
	}
	if e := eventOf(out.Events, "Requery"); e == nil || e.Warning {
		t.Errorf("the Requery Event: %+v", out.Events)
	}
	r.Status = out.Status
	if _, _, ok := payment.RefundOperatorAction(r, t0.Add(time.Minute)); ok {
		t.Error("the same requery was acted on twice")
	}
	settled := annotated(sentAt(v1alpha1.RefundSucceeded, ""), v1alpha1.AnnotationRequery, "1")
	out, _, ok = payment.RefundOperatorAction(settled, t0)
	e, refused := out.Refusal()
	if !ok || !refused || e.Reason != "RequeryIgnored" || e.Warning || out.Status.Query.NextTime != nil || out.Status.Actions.Requery != "1" {
		t.Errorf("a requery of a settled refund: ok %v, event %+v, query %+v", ok, e, out.Status.Query)
	}
}

// TestARefundLookUp: past the key window, a look-up that finds the refund
// follows it; one that finds nothing usable (an answer without a refund
// id) parks it for a human, never Failed; no answer looks again on the
// create's backoff; a Refund that already has its id is left alone.
func TestARefundLookUp(t *testing.T) {
	pol := testPolicy()
	marked := func() *v1alpha1.Refund {
		r := newRefund("r", 500, t0)
		r.Status.Phase, r.Status.CreateRequestedAt = v1alpha1.RefundPending, ptrTime(t0)
		r.Status.Amount = &v1alpha1.Money{Value: 500, Currency: orderCurrency}
		return r
	}
	late := t0.Add(pol.LookupAfter() + time.Minute)

	found := payment.AfterRefundLookup(marked(), pol, payment.RefundCall{Refund: provider.Refund{ID: "re_1", Status: provider.RefundProcessing}}, late)
	if found.Status.ProviderRefundID != "re_1" || found.Status.Phase != v1alpha1.RefundProcessing || found.Status.Query.NextTime == nil {
		t.Errorf("found: %+v", found.Status)
	}
	empty := payment.AfterRefundLookup(marked(), pol, payment.RefundCall{Refund: provider.Refund{Status: provider.RefundSucceeded}}, late)
	if empty.Status.Phase != v1alpha1.RefundUnknown || refundReview(&empty.Status) != v1alpha1.ReasonCreateOutcomeUnknown || empty.Status.ProviderRefundID != "" {
		t.Errorf("an answer without a refund id: phase %s review %q", empty.Status.Phase, refundReview(&empty.Status))
	}
	if c := meta.FindStatusCondition(empty.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || !strings.Contains(c.Message, "the provider answered without a refund id") {
		t.Errorf("the review does not say what the look-up found: %+v", c)
	}

	r := marked()
	r.Status = payment.AfterRefundLookup(r, pol, payment.RefundCall{Err: errNoAnswer}, late).Status
	r.Status = payment.AfterRefundLookup(r, pol, payment.RefundCall{Err: errNoAnswer}, late.Add(time.Hour)).Status
	if q := r.Status.Query; q.ConsecutiveErrors != 2 || q.NextTime == nil || !q.NextTime.Time.Equal(late.Add(time.Hour+pol.Schedule[1])) || r.Status.Phase != v1alpha1.RefundPending {
		t.Errorf("two look-ups without an answer: %+v; want the create backoff's second step (%v)", q, pol.Schedule[1])
	}

	known := sentAt(v1alpha1.RefundProcessing, "")
	known.Status.CreateRequestedAt = ptrTime(t0)
	if out := payment.AfterRefundLookup(known, pol, payment.RefundCall{Refund: provider.Refund{ID: "re_2", Status: provider.RefundFailed}}, late); out.Status.ProviderRefundID != "re_1" || out.Status.Phase != v1alpha1.RefundProcessing {
		t.Errorf("a refund with its id took a look-up's answer: %+v", out.Status)
	}
}

// TestARefundQueryCountsAttempts: an answer consumes an attempt of a refund
// in flight, none of one settled or parked; an answer that parks it (an
// amount mismatch) leaves no next query, neither from the query nor from
// the create's answer.
func TestARefundQueryCountsAttempts(t *testing.T) {
	pol := testPolicy()
	inFlight := sentAt(v1alpha1.RefundProcessing, "")
	inFlight.Status.CreateRequestedAt = ptrTime(t0)
	out := payment.AfterRefundQuery(inFlight, pol, payment.RefundCall{Refund: provider.Refund{ID: "re_1", Status: provider.RefundProcessing}}, t0)
	if out.Status.Query.Attempts != 1 || out.Status.Query.NextTime == nil {
		t.Errorf("in flight: %+v, want 1 attempt and a next query", out.Status.Query)
	}
	parked := sentAt(v1alpha1.RefundUnknown, v1alpha1.ReasonRetriesExhausted)
	parked.Status.CreateRequestedAt = ptrTime(t0)
	parked.Status.Query.Attempts = 7
	if out := payment.AfterRefundQuery(parked, pol, payment.RefundCall{Refund: provider.Refund{ID: "re_1", Status: provider.RefundProcessing}}, t0); out.Status.Query.Attempts != 7 || out.Status.Query.NextTime != nil {
		t.Errorf("parked: %+v, want no attempt consumed and no next query", out.Status.Query)
	}
	mismatch := provider.Refund{ID: "re_1", Status: provider.RefundSucceeded, Amount: 499, Currency: orderCurrency}
	out = payment.AfterRefundQuery(inFlight, pol, payment.RefundCall{Refund: mismatch}, t0)
	if out.Status.Phase != v1alpha1.RefundUnknown || refundReview(&out.Status) != v1alpha1.ReasonAmountMismatch || out.Status.Query.NextTime != nil {
		t.Errorf("a query answer of another amount: phase %s review %q next %v; want parked, no next query", out.Status.Phase, refundReview(&out.Status), out.Status.Query.NextTime)
	}
	created := newRefund("r", 500, t0)
	created.Status.Phase, created.Status.CreateRequestedAt = v1alpha1.RefundPending, ptrTime(t0)
	created.Status.Amount = &v1alpha1.Money{Value: 500, Currency: orderCurrency}
	out = payment.AfterRefundCreate(created, pol, payment.RefundCall{Refund: mismatch}, t0)
	if out.Status.Phase != v1alpha1.RefundUnknown || out.Status.Query.NextTime != nil {
		t.Errorf("a create answer of another amount: phase %s next %v; want parked, no next query", out.Status.Phase, out.Status.Query.NextTime)
	}
}
