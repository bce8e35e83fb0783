package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// TestASecondCaptureAfterARefusalIsANewAttempt: a merchant's partial
// capture the provider refused ends the operation (CaptureRefused) and the
// payment stays Authorized; the operator then asks for another capture (a
// new annotation value, another amount). That is a second capture, not a
// retry of the refused one, and it has a key of its own, as a capture after
// a funding decline has ("/capture/2"; SPEC §12.1: a capture's identity is
// the payment's plus its own). Under the refused one's key the provider
// would answer with that key's first answer (PayPal replays the refusal) or,
// for another body, a key conflict (Stripe idempotency_error, KukoPay 422),
// which paywarden would loop on (look up, still Authorized, repeat with the
// same key) until the authorization lapsed: the money never captured.
func TestASecondCaptureAfterARefusalIsANewAttempt(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Minute)
	p := authorizedFor(t, "recapture", 1000)

	// First capture: 600 of the 1000 authorized.
	p = annotate(p, v1alpha1.AnnotationCapture, "600")
	s := payment.Plan(p, pol, payment.Facts{}, now)
	p = store(p, s.Outcome)
	first := p.Status.Operation
	if first == nil || first.Kind != v1alpha1.OperationCapture || first.Amount == nil || first.Amount.Value != 600 {
		t.Fatalf("fixture: first capture %+v", first)
	}
	firstKey, firstBody := first.IdempotencyKey, first.Amount.Value

	// The provider refuses it (a definitive 4xx about this capture).
	refused := payment.Call{Err: &provider.Error{Provider: "shop/kukopay", Op: "capture", Class: provider.ErrNonRetryable, StatusCode: 402, Detail: "capture declined"}}
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, refused, now))
	if p.Status.Phase != v1alpha1.PhaseAuthorized || p.Status.Operation != nil {
		t.Fatalf("fixture: after the refusal phase %s op %+v", p.Status.Phase, p.Status.Operation)
	}

	// The operator asks for another capture: everything authorized.
	p = annotate(p, v1alpha1.AnnotationCapture, "all")
	s = payment.Plan(p, pol, payment.Facts{}, now.Add(time.Minute))
	p = store(p, s.Outcome)
	second := p.Status.Operation
	if second == nil || second.Kind != v1alpha1.OperationCapture {
		t.Fatalf("second capture not marked: %s (%s) op %+v", s.Action, s.Why, second)
	}
	secondBody := int64(0) // the whole authorization
	if second.Amount != nil {
		secondBody = second.Amount.Value
	}
	if second.IdempotencyKey == firstKey {
		t.Errorf("the second capture (amount %d) is sent under the refused capture's key %q (amount %d): the provider replays the refusal or answers a key conflict forever; a new capture attempt needs a key of its own",
			secondBody, firstKey, firstBody)
	}
}

// TestASecondCancelAfterARefusalIsANewAttempt: the same for a cancel.
// Stripe refuses the cancel of a PaymentIntent that is processing and
// stores that answer under the key; once the payment is Authorized the
// operator asks again (a new annotation value): under the refused one's key
// the provider would replay the refusal, and the payer's reserved money could
// not be released through paywarden until the authorization lapsed.
func TestASecondCancelAfterARefusalIsANewAttempt(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Minute)
	p := annotate(authorizedFor(t, "recancel", 1000), v1alpha1.AnnotationCancel, "customer asked")
	p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
	first := p.Status.Operation
	if first == nil || first.Kind != v1alpha1.OperationCancel {
		t.Fatalf("fixture: first cancel %+v", first)
	}
	refused := payment.Call{Err: &provider.Error{Provider: "shop/stripe", Op: "cancel", Class: provider.ErrNonRetryable, StatusCode: 400, Detail: "payment_intent_unexpected_state"}}
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, refused, now))
	if p.Status.Phase != v1alpha1.PhaseAuthorized || p.Status.Operation != nil {
		t.Fatalf("fixture: after the refusal phase %s op %+v", p.Status.Phase, p.Status.Operation)
	}
	p = annotate(p, v1alpha1.AnnotationCancel, "customer asked again")
	s := payment.Plan(p, pol, payment.Facts{}, now.Add(time.Hour))
	p = store(p, s.Outcome)
	second := p.Status.Operation
	if second == nil || second.Kind != v1alpha1.OperationCancel {
		t.Fatalf("second cancel not marked: %s (%s) op %+v", s.Action, s.Why, second)
	}
	if second.IdempotencyKey == first.IdempotencyKey {
		t.Errorf("the second cancel is sent under the refused cancel's key %q: the provider replays the refusal; a new cancel attempt needs a key of its own", first.IdempotencyKey)
	}
}
