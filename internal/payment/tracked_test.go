package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// A Payment that only tracks a provider payment paywarden did not create
// (spec.providerPaymentID) is never captured unless asked: its
// captureMethod defaults to Automatic, but whoever created the payment
// decides when its money is taken.
func TestATrackedPaymentIsCapturedOnlyWhenAsked(t *testing.T) {
	pol := testPolicy()
	p := authorizedPay("tracked", v1alpha1.CaptureAutomatic)
	p.Spec.ProviderPaymentID = "pay_1"
	now := t0.Add(time.Minute)
	if p.Status.Phase != v1alpha1.PhaseAuthorized {
		t.Fatalf("setup: %s", p.Status.Phase)
	}
	step := payment.Plan(p, pol, payment.Facts{}, now)
	if step.Action == payment.Write && step.Outcome.Status.Operation != nil || step.Action == payment.CallCapture {
		t.Fatalf("%v (%s): a tracked payment was captured without being asked", step.Action, step.Why)
	}
	if w := payment.WaitingFor(&p.Spec, &p.Status); w != "Capture" {
		t.Errorf("waitingFor %q, want Capture", w)
	}
	// Waiting for its capture consumes no query attempt.
	before := p.Status.Query.Attempts
	p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusAuthorized), false, now))
	if p.Status.Query.Attempts != before {
		t.Errorf("attempts %d -> %d while waiting for the capture", before, p.Status.Query.Attempts)
	}

	// Asked: the capture goes.
	asked := annotate(p, v1alpha1.AnnotationCapture, payment.CaptureAll)
	step = payment.Plan(asked, pol, payment.Facts{}, now)
	if step.Action != payment.Write || step.Outcome.Status.Operation == nil || step.Outcome.Status.Operation.Kind != v1alpha1.OperationCapture {
		t.Fatalf("%v (%s), want the capture marked", step.Action, step.Why)
	}

	// Asked before the payer approved it: the annotation waits for the
	// approval (only an approved tracked payment is capturable).
	early := newPay("early")
	early.Spec.ProviderPaymentID, early.Status.Phase = "pay_2", v1alpha1.PhaseProcessing
	step = payment.Plan(annotate(early, v1alpha1.AnnotationCapture, payment.CaptureAll), pol, payment.Facts{}, now)
	if op := step.Outcome.Status.Operation; step.Action == payment.CallCapture || op != nil && op.Kind == v1alpha1.OperationCapture || step.Outcome.Status.Actions.Capture != "" {
		t.Fatalf("%v (%s): a tracked payment nobody approved was captured", step.Action, step.Why)
	}

	// A payment paywarden created keeps its Automatic capture.
	own := authorizedPay("own", v1alpha1.CaptureAutomatic)
	if step := payment.Plan(own, pol, payment.Facts{}, now); step.Action != payment.Write || step.Outcome.Status.Operation == nil {
		t.Errorf("own payment: %v (%s), want the automatic capture", step.Action, step.Why)
	}
}
