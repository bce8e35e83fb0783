package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// TestAResolveDoesNotDropACaptureWhoseOutcomeIsUnknown: the operator
// captured an authorization and the capture call got no answer (a timeout):
// the provider may have taken the money. The core keeps status.operation and
// looks the outcome up before anything else, and refuses an operator's
// cancel meanwhile. A resolve to a phase without the money (Canceled,
// Failed, Expired) is refused the same way: applied, it would settle the
// payment, drop the operation and never look the capture up, and release
// the merchant reference (SPEC §12.1) while the provider may hold the money.
// A resolve Succeeded (the operator saw the capture at the provider) is
// taken.
func TestAResolveDoesNotDropACaptureWhoseOutcomeIsUnknown(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Minute)
	p := annotate(authorizedFor(t, "resolve-lost-capture", orderValue), v1alpha1.AnnotationCapture, payment.CaptureAll)
	p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
	if s := payment.Plan(p, pol, payment.Facts{FreshOperation: true}, now); s.Action != payment.CallCapture {
		t.Fatalf("step %s, want the capture call", s.Action)
	}
	// The capture went out; no answer.
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, fails(errTimeout), now))
	if op := p.Status.Operation; op == nil || op.Kind != v1alpha1.OperationCapture {
		t.Fatalf("operation %+v, want the capture kept for its lookup", op)
	}

	// A cancel is refused while the capture is in progress.
	canceled := annotate(p, v1alpha1.AnnotationCancel, "customer called off the order")
	if out, why, ok := payment.OperatorAction(canceled, now.Add(time.Second)); !ok || why != "operator cancel" {
		t.Fatalf("cancel: %q %v", why, ok)
	} else if _, refused := out.Refusal(); !refused {
		t.Fatalf("a cancel during the capture was not refused: phase %s", out.Status.Phase)
	}

	for _, to := range []string{"Canceled", "Failed", "Expired"} {
		t.Run(to, func(t *testing.T) {
			r := annotate(p, v1alpha1.AnnotationResolve, to)
			r.Annotations[v1alpha1.AnnotationResolveReason] = "customer called off the order"
			at := now.Add(time.Second)
			var steps []string
			for i := 0; i < 6; i++ {
				s := payment.Plan(r, pol, payment.Facts{}, at)
				steps = append(steps, s.Action.String()+" ("+s.Why+")")
				switch s.Action {
				case payment.Write:
					r = store(r, s.Outcome)
				case payment.Wait:
					at = s.At
				case payment.Query:
					return // the capture's outcome is looked up: held
				default:
					if r.Status.Phase.IsFinal() && !r.Status.Phase.TookMoney() && r.Status.Operation == nil {
						t.Fatalf("resolved %s while the capture's outcome was unknown: phase %s, operation dropped, never looked up; steps %v. "+
							"Want the resolve refused like the cancel (a Capture is in progress), or the capture looked up first: "+
							"the provider may hold the captured money while the order's merchant reference is released", to, r.Status.Phase, steps)
					}
					return
				}
			}
		})
	}
}

// TestAResolveSucceededDuringACaptureIsTaken: the operator who saw the
// capture at the provider may resolve the payment Succeeded while paywarden
// still waits for the capture's answer.
func TestAResolveSucceededDuringACaptureIsTaken(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Minute)
	p := annotate(authorizedFor(t, "resolve-captured", orderValue), v1alpha1.AnnotationCapture, payment.CaptureAll)
	p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, fails(errTimeout), now))
	r := annotate(p, v1alpha1.AnnotationResolve, "Succeeded")
	r.Annotations[v1alpha1.AnnotationResolveReason] = "captured in the provider's dashboard"
	r = store(r, payment.Plan(r, pol, payment.Facts{}, now.Add(time.Second)).Outcome)
	if r.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("resolved Succeeded during the capture: phase %s, want Succeeded", r.Status.Phase)
	}
}
