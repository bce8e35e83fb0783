package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
)

// TestACancelWhileAJobsCreateIsUnknownNeverSubmitsTheJob: at the async-job
// API (type generic) a job without a checkout is charged as submitted and
// cannot be stopped (generic.Capabilities: no capture, no cancel; "a job is
// charged as submitted"), exactly what a charge of a stored method is for
// Stripe and KukoPay.
//
//  1. A generic Payment (no spec.checkout) marks its create and sends POST
//     /jobs; the answer is lost (timeout). Outcome unknown.
//  2. The operator withdraws the order: payments.paywarden.dev/cancel.
//  3. Repeating the create "to learn the payment to cancel", as for a
//     create that takes no money, would submit the job now if the first
//     POST /jobs never arrived: a charge the operator has just withdrawn,
//     and the cancel that follows is Unsupported at this API.
//
// docs/state-machine.md ("the cancel annotation while the create's outcome is
// unknown"): "A charge ... is never created again (a first create that never
// arrived would take the money being withdrawn): it is looked up by merchant
// reference"; SPEC §11.5 (cancel → void/cancel at the provider, refused once
// money moved), §12.1 (none of this may move money again).
//
// Correct: a job the API charges as submitted is a charge: after a cancel it
// is looked up by correlationId (the API can), never submitted again.
func TestACancelWhileAJobsCreateIsUnknownNeverSubmitsTheJob(t *testing.T) {
	caps := generic.Capabilities()
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown, pol.LookupByReference = caps.Lifecycle, true, caps.LookupByReference
	p := createLost(t, "job", pol, func(*v1alpha1.PaymentSpec) {}) // a job without a checkout
	_, calls := drive(t, p, pol, func(a payment.Action, _ int, now time.Time) payment.Call {
		switch a {
		case payment.Create:
			t.Errorf("the job was submitted again at %s after the operator's cancel (the first POST /jobs may never have arrived: this one charges)", now)
			return answer(provider.StatusProcessing)
		case payment.Lookup:
			return fails(errNotFound)
		case payment.CallCancel:
			return fails(provider.Unsupported("shop/generic", "cancel"))
		}
		return answer(provider.StatusProcessing)
	}, t0.Add(2*pol.KeyWindow))
	if n := count(calls, payment.Create); n != 0 {
		t.Fatalf("%d creates after the cancel, want none", n)
	}
}
