package payment_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// A payment closes (leaves the caches of open work) only when it has nothing
// left to do on its own, and every status write stores the mark as Closable
// says, so a payment with work again is open in the same write.
func TestClosable(t *testing.T) {
	condition := func(typ string) func(*v1alpha1.Payment) {
		return func(p *v1alpha1.Payment) {
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Test"})
		}
	}
	for _, tc := range []struct {
		name     string
		phase    v1alpha1.PaymentPhase
		change   func(*v1alpha1.Payment)
		closable bool
	}{
		{"succeeded, nothing left", v1alpha1.PhaseSucceeded, func(*v1alpha1.Payment) {}, true},
		{"failed, nothing left", v1alpha1.PhaseFailed, func(*v1alpha1.Payment) {}, true},
		{"refunded, nothing left", v1alpha1.PhaseRefunded, func(*v1alpha1.Payment) {}, true},
		{"adopted: nothing left to do either", v1alpha1.PhaseSucceeded, func(p *v1alpha1.Payment) { p.Status.AdoptedAt = &metav1.Time{Time: t0} }, true},
		{"pending", v1alpha1.PhasePending, func(*v1alpha1.Payment) {}, false},
		{"authorized: waits for its capture", v1alpha1.PhaseAuthorized, func(*v1alpha1.Payment) {}, false},
		{"unknown", v1alpha1.PhaseUnknown, func(*v1alpha1.Payment) {}, false},
		{"under review", v1alpha1.PhaseSucceeded, condition(v1alpha1.ConditionNeedsReview), false},
		{"its dispute open", v1alpha1.PhaseSucceeded, condition(v1alpha1.ConditionDisputed), false},
		{"a query scheduled", v1alpha1.PhaseSucceeded, func(p *v1alpha1.Payment) { p.Status.Query.NextTime = micro(t0) }, false},
		{"calls unanswered", v1alpha1.PhaseSucceeded, func(p *v1alpha1.Payment) { p.Status.Query.UnansweredSince = micro(t0) }, false},
		{"an operation in flight", v1alpha1.PhaseSucceeded, func(p *v1alpha1.Payment) {
			p.Status.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCancel, RequestedAt: metav1.NewTime(t0), IdempotencyKey: "k/cancel"}
		}, false},
		{"a refund's failure to read the total for", v1alpha1.PhaseSucceeded, func(p *v1alpha1.Payment) { p.Status.RefundFailureSeenAt = &metav1.Time{Time: t0} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := settled("order-1", tc.phase, 0, 0)
			p.Status.Query = v1alpha1.QueryStatus{}
			tc.change(p)
			if got := payment.Closable(p); got != tc.closable {
				t.Fatalf("Closable = %v, want %v", got, tc.closable)
			}
			// Every write stores the mark as Closable says, whatever the
			// outcome carried.
			for _, carried := range []bool{false, true} {
				out := payment.Outcome{Status: *p.Status.DeepCopy()}
				out.Status.Closed = carried
				stored := p.DeepCopy()
				out.StoreIn(stored)
				if stored.Status.Closed != tc.closable {
					t.Errorf("stored closed=%v with the outcome carrying %v, want %v", stored.Status.Closed, carried, tc.closable)
				}
			}
		})
	}
}

// A payment stored before the mark, or with a mark that is wrong, gets it
// set right by a write of its own; one with the right mark needs nothing.
func TestPlanStoresTheClosedMark(t *testing.T) {
	pol := testPolicy()
	p := created("closing")
	p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusSucceeded), false, t0.Add(30*time.Second)))
	if !p.Status.Closed {
		t.Fatalf("a payment settled with nothing left is stored open: %+v", p.Status)
	}
	if step := payment.Plan(p, pol, payment.Facts{}, t0.Add(time.Hour)); step.Action != payment.Nothing {
		t.Fatalf("closed and settled: Plan = %s (%s), want Nothing", step.Action, step.Why)
	}
	for _, tc := range []struct {
		name   string
		change func(*v1alpha1.Payment)
		want   bool
	}{
		{"settled before the mark existed", func(p *v1alpha1.Payment) { p.Status.Closed = false }, true},
		{"put under review by hand, still marked", func(p *v1alpha1.Payment) {
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: "Test"})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p.DeepCopy()
			tc.change(q)
			step := payment.Plan(q, pol, payment.Facts{}, t0.Add(time.Hour))
			if step.Action != payment.Write || step.Outcome.Status.Closed != tc.want {
				t.Fatalf("Plan = %s (%s) closed=%v, want a write of closed=%v", step.Action, step.Why, step.Outcome.Status.Closed, tc.want)
			}
			if q := store(q, step.Outcome); payment.Plan(q, pol, payment.Facts{}, t0.Add(time.Hour)).Action == payment.Write {
				t.Fatal("the write of the mark asks for another")
			}
		})
	}
	// Still pending: open, and stored open.
	q := created("open")
	if q.Status.Closed || payment.Closable(q) {
		t.Fatal("a pending payment is closable")
	}
}

// An operator's annotation not acted on yet is what a closed payment must be
// reconciled for at start: its status.actions records every value acted on.
func TestActionsUnanswered(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		actions     v1alpha1.ActionStatus
		want        bool
	}{
		{"none", nil, v1alpha1.ActionStatus{}, false},
		{"a requery not acted on", map[string]string{v1alpha1.AnnotationRequery: "2"}, v1alpha1.ActionStatus{Requery: "1"}, true},
		{"a requery acted on", map[string]string{v1alpha1.AnnotationRequery: "2"}, v1alpha1.ActionStatus{Requery: "2"}, false},
		{"a resolve not acted on", map[string]string{v1alpha1.AnnotationResolve: "Failed", v1alpha1.AnnotationResolveReason: "r"}, v1alpha1.ActionStatus{}, true},
		{"a resolve acted on", map[string]string{v1alpha1.AnnotationResolve: "Failed", v1alpha1.AnnotationResolveReason: "r"}, v1alpha1.ActionStatus{Resolve: "Failed: r"}, false},
		{"a resolve with a new reason", map[string]string{v1alpha1.AnnotationResolve: "Failed", v1alpha1.AnnotationResolveReason: "s"}, v1alpha1.ActionStatus{Resolve: "Failed: r"}, true},
		{"a cancel not acted on", map[string]string{v1alpha1.AnnotationCancel: "1"}, v1alpha1.ActionStatus{}, true},
		{"a capture not acted on", map[string]string{v1alpha1.AnnotationCapture: "all"}, v1alpha1.ActionStatus{}, true},
		{"a capture acted on", map[string]string{v1alpha1.AnnotationCapture: "all"}, v1alpha1.ActionStatus{Capture: "all"}, false},
		{"someone else's annotation", map[string]string{"team": "x"}, v1alpha1.ActionStatus{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := settled("order-1", v1alpha1.PhaseSucceeded, 0, 0)
			p.Annotations, p.Status.Actions = tc.annotations, tc.actions
			if got := payment.ActionsUnanswered(p); got != tc.want {
				t.Fatalf("ActionsUnanswered = %v, want %v", got, tc.want)
			}
		})
	}
}

// The retention scan hands back what ends within the horizon, and at start
// what is past its end too: a closed payment gets no start-up event.
func TestRetentionScanHandsBack(t *testing.T) {
	h := time.Hour
	for _, tc := range []struct {
		left           time.Duration
		atStart, later bool
	}{
		{2 * h, false, false},
		{h + time.Second, false, false},
		{h, true, true},
		{time.Second, true, true},
		{0, true, false},
		{-72 * h, true, false},
	} {
		if got := payment.RetentionScanHandsBack(tc.left, h, true); got != tc.atStart {
			t.Errorf("left %s, at start: %v, want %v", tc.left, got, tc.atStart)
		}
		if got := payment.RetentionScanHandsBack(tc.left, h, false); got != tc.later {
			t.Errorf("left %s, later: %v, want %v", tc.left, got, tc.later)
		}
	}
}
