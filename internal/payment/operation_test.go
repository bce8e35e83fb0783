package payment_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// authorizedFor is a Manual payment of value minor units, Authorized for all
// of it.
func authorizedFor(t *testing.T, name string, value int64) *v1alpha1.Payment {
	t.Helper()
	pol := testPolicy()
	p := newPay(name)
	p.Spec.Amount.Value = value
	p.Spec.CaptureMethod = v1alpha1.CaptureManual
	p = store(p, planned(p, pol, t0).Outcome)
	p = store(p, payment.AfterCreate(p, pol, payment.Call{Payment: provider.Payment{ID: "pay_1", Status: provider.StatusAuthorized, Amount: value, Currency: orderCurrency}}, t0))
	if p.Status.Phase != v1alpha1.PhaseAuthorized {
		t.Fatalf("fixture: phase %s", p.Status.Phase)
	}
	return p
}

// TestCaptureAnnotation: the capture annotation is `all` or a positive
// integer of minor units up to the authorized amount (SPEC §12.3). Anything
// else is refused with a Warning naming the accepted forms, nothing is sent,
// and the value is remembered as handled so it is not tried again.
func TestCaptureAnnotation(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Minute)
	for _, tc := range []struct {
		value   string
		capture int64 // 0: refused
	}{
		{"all", 1000},
		{" all ", 1000},
		{"1000", 1000},
		{"600", 600},
		{"1", 1},
		{"0600", 600},
		// Malformed: each of these captured all 1000 once.
		{"6.00", 0},
		{"19.99", 0},
		{"600 USD", 0},
		{"1e2", 0},
		{"600,00", 0},
		{"ALL", 0},
		{"everything", 0},
		{"+600", 0},
		{"0x258", 0},
		{"6_00", 0},
		// Out of range.
		{"0", 0},
		{"-600", 0},
		{"1001", 0},
		{"99999999999999999999", 0},
	} {
		t.Run(tc.value, func(t *testing.T) {
			p := annotate(authorizedFor(t, "capture", 1000), v1alpha1.AnnotationCapture, tc.value)
			s := payment.Plan(p, pol, payment.Facts{}, now)
			st := s.Outcome.Status
			if s.Action != payment.Write || st.Actions.Capture != tc.value {
				t.Fatalf("step %s (%s) actions %+v, want the annotation handled once", s.Action, s.Why, st.Actions)
			}
			if tc.capture > 0 {
				if st.Operation == nil || st.Operation.Kind != v1alpha1.OperationCapture || st.AmountToCapture == nil || st.AmountToCapture.Value != tc.capture {
					t.Fatalf("operation %+v amountToCapture %+v, want a capture of %d", st.Operation, st.AmountToCapture, tc.capture)
				}
				if partial := st.Operation.Amount != nil; partial != (tc.capture != 1000) || (partial && st.Operation.Amount.Value != tc.capture) {
					t.Fatalf("operation amount %+v for a capture of %d of 1000", st.Operation.Amount, tc.capture)
				}
				return
			}
			if st.Operation != nil || st.AmountToCapture != nil || st.Phase != v1alpha1.PhaseAuthorized {
				t.Fatalf("a malformed capture %q planned: operation %+v amountToCapture %+v phase %s", tc.value, st.Operation, st.AmountToCapture, st.Phase)
			}
			if len(s.Outcome.Events) != 1 || !s.Outcome.Events[0].Warning || s.Outcome.Events[0].Reason != "CaptureRefused" {
				t.Fatalf("events %+v, want one Warning CaptureRefused", s.Outcome.Events)
			}
			msg := s.Outcome.Events[0].Message
			if !strings.Contains(msg, `"all"`) || !strings.Contains(msg, "minor units") || !strings.Contains(msg, "nothing was sent") {
				t.Errorf("message %q does not name the accepted forms", msg)
			}
			// Remembered: the next reconcile neither captures nor warns again.
			p = store(p, s.Outcome)
			next := payment.Plan(p, pol, payment.Facts{}, now.Add(time.Second))
			if next.Action == payment.CallCapture || next.Outcome.Status.Operation != nil || len(next.Outcome.Events) > 0 {
				t.Fatalf("acted on again: %s (%s) events %+v", next.Action, next.Why, next.Outcome.Events)
			}
		})
	}
	// Set while another operation is in flight, it waits for that one to
	// end: its marker is never replaced.
	t.Run("all, while a cancel is in flight", func(t *testing.T) {
		p := annotate(authorizedFor(t, "capture", 1000), v1alpha1.AnnotationCapture, "all")
		p.Status.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCancel, RequestedAt: metav1.NewTime(now), Reason: "customer left"}
		s := payment.Plan(p, pol, payment.Facts{}, now)
		if st := s.Outcome.Status; s.Action == payment.CallCapture || st.Actions.Capture != "" || st.Operation != nil && st.Operation.Kind != v1alpha1.OperationCancel {
			t.Fatalf("step %s (%s) operation %+v actions %+v, want the capture waiting for the cancel", s.Action, s.Why, st.Operation, st.Actions)
		}
	})
}

// TestOperationRetryIsNeverDueAtOnce: a schedule may name steps shorter than
// MinWait (even 0s); the repeat of an operation whose outcome is unknown, and
// the next look-up of it, still come MinWait later at the earliest.
func TestOperationRetryIsNeverDueAtOnce(t *testing.T) {
	pol := testPolicy()
	pol.Schedule = []time.Duration{0}
	now := t0.Add(time.Minute)
	for name, decide := range map[string]func(p *v1alpha1.Payment) payment.Outcome{
		"the capture call got no answer": func(p *v1alpha1.Payment) payment.Outcome {
			return payment.AfterOperation(p, pol, v1alpha1.OperationCapture, fails(errNoAnswer), now)
		},
		"the look-up of the capture got no answer": func(p *v1alpha1.Payment) payment.Outcome {
			return payment.AfterQuery(p, pol, fails(errNoAnswer), false, now)
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := annotate(authorizedFor(t, "floor", 1000), v1alpha1.AnnotationCapture, "all")
			p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
			if op := p.Status.Operation; op == nil || op.Kind != v1alpha1.OperationCapture {
				t.Fatalf("fixture: operation %+v, want the capture", op)
			}
			p = store(p, decide(p))
			if op := p.Status.Operation; op == nil || op.RetryAt == nil || !op.RetryAt.Time.Equal(now.Add(payment.MinWait)) {
				t.Fatalf("operation %+v, want it retried at %s (MinWait)", op, now.Add(payment.MinWait))
			}
		})
	}
}
