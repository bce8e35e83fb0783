package payment_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// actionCase is an operator annotation on a payment, and the Event it
// gives ("" for none) with its severity.
type actionCase struct {
	name    string
	p       *v1alpha1.Payment
	event   string
	warning bool
}

// TestTheCancelAnnotationsEvents: what a cancel annotation does, and how
// loudly it says so: refused (Warning) for a payment that took the money or
// has another operation in progress, ignored (Normal) for one already
// settled without money, requested (Normal) with its own key for one at the
// provider, and nothing more for one whose cancel is already in flight. Each
// value is acted on once.
func TestTheCancelAnnotationsEvents(t *testing.T) {
	withCancel := func(p *v1alpha1.Payment) *v1alpha1.Payment {
		p.Annotations = map[string]string{v1alpha1.AnnotationCancel: "customer asked"}
		return p
	}
	inFlight := func(kind v1alpha1.OperationKind) *v1alpha1.Payment {
		p := created("order-1")
		p.Status.Operation = &v1alpha1.Operation{Kind: kind, RequestedAt: metav1.NewTime(t0), IdempotencyKey: payment.CreateKey(p) + "/x"}
		return p
	}
	for _, tc := range []actionCase{
		{"paid", settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0), "CancelRefused", true},
		{"failed", settled("order-1", v1alpha1.PhaseFailed, 0, 0), "CancelIgnored", false},
		{"a capture in progress", inFlight(v1alpha1.OperationCapture), "CancelRefused", true},
		{"a cancel in flight", inFlight(v1alpha1.OperationCancel), "", false},
		{"at the provider", created("order-1"), "CancelRequested", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := withCancel(tc.p)
			out, _, ok := payment.OperatorAction(p, t0.Add(time.Minute))
			if !ok || out.Status.Actions.Cancel != "customer asked" {
				t.Fatalf("acted %v, actions %+v", ok, out.Status.Actions)
			}
			var cancelEvents []payment.Event
			for _, e := range out.Events {
				if len(e.Reason) >= 6 && e.Reason[:6] == "Cancel" {
					cancelEvents = append(cancelEvents, e)
				}
			}
			switch {
			case tc.event == "" && len(cancelEvents) != 0:
				t.Errorf("Events %+v, want none", cancelEvents)
			case tc.event != "" && (len(cancelEvents) != 1 || cancelEvents[0].Reason != tc.event || cancelEvents[0].Warning != tc.warning):
				t.Errorf("Events %+v, want one %s (warning %v)", cancelEvents, tc.event, tc.warning)
			}
			if tc.event == "CancelRequested" {
				if op := out.Status.Operation; op == nil || op.Kind != v1alpha1.OperationCancel || op.IdempotencyKey != payment.CreateKey(p)+"/cancel" {
					t.Errorf("operation %+v, want a cancel under %s/cancel", op, payment.CreateKey(p))
				}
			}
			if tc.name == "a cancel in flight" && (out.Status.Operation == nil || out.Status.Operation.IdempotencyKey != p.Status.Operation.IdempotencyKey) {
				t.Errorf("the cancel in flight was replaced: %+v", out.Status.Operation)
			}
			again := store(p, out)
			if _, _, ok := payment.OperatorAction(again, t0.Add(2*time.Minute)); ok {
				t.Error("the same cancel was acted on twice")
			}
		})
	}
}

// TestTheCaptureAnnotationsEvents: a capture annotation on a settled or an
// Automatic payment is ignored (Normal); on an authorized Manual payment it
// is requested (Normal) under the capture's key, or refused (Warning) for an
// amount it cannot take.
func TestTheCaptureAnnotationsEvents(t *testing.T) {
	withCapture := func(p *v1alpha1.Payment, v string) *v1alpha1.Payment {
		p.Annotations = map[string]string{v1alpha1.AnnotationCapture: v}
		return p
	}
	for _, tc := range []actionCase{
		{"settled", withCapture(settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0), "all"), "CaptureIgnored", false},
		{"automatic", withCapture(created("order-1"), "all"), "CaptureIgnored", false},
		{"authorized", withCapture(authorizedPay("order-1", v1alpha1.CaptureManual), "all"), "CaptureRequested", false},
		{"authorized, a part of it", withCapture(authorizedPay("order-1", v1alpha1.CaptureManual), "909"), "CaptureRequested", false},
		{"authorized, an amount it cannot take", withCapture(authorizedPay("order-1", v1alpha1.CaptureManual), "6.00"), "CaptureRefused", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, ok := payment.OperatorAction(tc.p, t0.Add(time.Minute))
			if !ok {
				t.Fatal("not acted on")
			}
			e := eventOf(out.Events, tc.event)
			if e == nil || e.Warning != tc.warning {
				t.Fatalf("Events %+v, want %s (warning %v)", out.Events, tc.event, tc.warning)
			}
			if op := out.Status.Operation; tc.event == "CaptureRequested" && (op == nil || op.IdempotencyKey != payment.CreateKey(tc.p)+"/capture") {
				t.Errorf("operation %+v, want a capture under %s/capture", op, payment.CreateKey(tc.p))
			}
			if a := out.Status.AmountToCapture; tc.name == "authorized, a part of it" && (a == nil || a.Value != 909) {
				t.Errorf("amount to capture %+v, want 909", a)
			}
		})
	}
}
