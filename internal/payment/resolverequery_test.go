package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// TestTheResolveAndRequeryAnnotationsEvents: a resolve annotation takes a
// payment not final to the chosen phase quietly, and on a final one without
// a review is ignored with a Warning; a requery restarts the schedule of a
// payment not final (a Normal Event, a history entry in its own phase) and
// is ignored, with a Normal Event, on a final one. Each value is acted on
// once.
func TestTheResolveAndRequeryAnnotationsEvents(t *testing.T) {
	now := t0.Add(time.Hour)
	unknown := created("order-1")
	unknown.Status.Phase = v1alpha1.PhaseUnknown
	unstarted := newPay("order-1")
	paid := settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0)
	for _, tc := range []struct {
		name    string
		p       *v1alpha1.Payment
		kv      []string
		phase   v1alpha1.PaymentPhase // after it
		event   string
		warning bool
		action  func(v1alpha1.ActionStatus) string
	}{
		{"resolve, pending", created("order-1"), []string{v1alpha1.AnnotationResolve, "Failed", v1alpha1.AnnotationResolveReason, "payer says no"},
			v1alpha1.PhaseFailed, "", false, func(a v1alpha1.ActionStatus) string { return a.Resolve }},
		{"resolve, paid", paid, []string{v1alpha1.AnnotationResolve, "Failed", v1alpha1.AnnotationResolveReason, "payer says no"},
			v1alpha1.PhaseSucceeded, "ResolveIgnored", true, func(a v1alpha1.ActionStatus) string { return a.Resolve }},
		{"requery, unknown", unknown, []string{v1alpha1.AnnotationRequery, "1"},
			v1alpha1.PhaseUnknown, "Requery", false, func(a v1alpha1.ActionStatus) string { return a.Requery }},
		{"requery, not started", unstarted, []string{v1alpha1.AnnotationRequery, "1"},
			"", "Requery", false, func(a v1alpha1.ActionStatus) string { return a.Requery }},
		{"requery, paid", paid, []string{v1alpha1.AnnotationRequery, "1"},
			v1alpha1.PhaseSucceeded, "RequeryIgnored", false, func(a v1alpha1.ActionStatus) string { return a.Requery }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.p.DeepCopy()
			for i := 0; i < len(tc.kv); i += 2 {
				p = annotate(p, tc.kv[i], tc.kv[i+1])
			}
			out, _, ok := payment.OperatorAction(p, now)
			if !ok || tc.action(out.Status.Actions) == "" {
				t.Fatalf("acted %v, actions %+v", ok, out.Status.Actions)
			}
			if out.Status.Phase != tc.phase {
				t.Errorf("phase %q, want %q", out.Status.Phase, tc.phase)
			}
			if tc.event == "" {
				if len(out.Events) > 0 && eventOf(out.Events, "ResolveIgnored") != nil {
					t.Errorf("Events %+v, want no ResolveIgnored", out.Events)
				}
			} else if e := eventOf(out.Events, tc.event); e == nil || e.Warning != tc.warning {
				t.Errorf("Events %+v, want %s (warning %v)", out.Events, tc.event, tc.warning)
			}
			if tc.event == "Requery" {
				q := out.Status.Query
				if q.NextTime == nil || !q.NextTime.Time.Equal(now) || q.Attempts != 0 {
					t.Errorf("query %+v, want one due now, attempts 0", q)
				}
				want := tc.phase
				if want == "" {
					want = v1alpha1.PhasePending
				}
				h := out.Status.History
				if len(h) == 0 || h[len(h)-1].From != want || h[len(h)-1].To != want {
					t.Errorf("history %+v, want a last entry %s → %s", h, want, want)
				}
			}
			if _, _, ok := payment.OperatorAction(store(p, out), now.Add(time.Minute)); ok {
				t.Error("the same annotation was acted on twice")
			}
		})
	}
}
