package payment_test

import (
	"slices"
	"testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// TestAllowedTransitions: the explored tables hold the steps the state
// diagrams (docs/state-machine.md) draw and none they rule out. The property
// tests check the other way round: every step a random sequence takes is in
// the table.
func TestAllowedTransitions(t *testing.T) {
	checkTransitions(t, allowedTransitions(), []transitionCase[v1alpha1.PaymentPhase]{
		{"a new payment is created pending", "", v1alpha1.PhasePending, true},
		{"an approved payment is authorized", v1alpha1.PhaseProcessing, v1alpha1.PhaseAuthorized, true},
		{"a capture under way is processing", v1alpha1.PhaseAuthorized, v1alpha1.PhaseProcessing, true},
		{"an authorization is canceled", v1alpha1.PhaseAuthorized, v1alpha1.PhaseCanceled, true},
		{"a refund after success", v1alpha1.PhaseSucceeded, v1alpha1.PhasePartiallyRefunded, true},
		{"a refund that failed after it succeeded lowers the total", v1alpha1.PhasePartiallyRefunded, v1alpha1.PhaseSucceeded, true},
		{"a payment closed out unpaid succeeds late", v1alpha1.PhaseExpired, v1alpha1.PhaseSucceeded, true},
		{"a conflict keeps the phase", v1alpha1.PhaseFailed, v1alpha1.PhaseFailed, true},
		{"a final phase never goes back to pending", v1alpha1.PhaseSucceeded, v1alpha1.PhasePending, false},
		{"a failed payment is never succeeded without an operator", v1alpha1.PhaseFailed, v1alpha1.PhaseSucceeded, false},
		{"a payment that took money is never canceled", v1alpha1.PhaseSucceeded, v1alpha1.PhaseCanceled, false},
		{"a refunded payment is never authorized", v1alpha1.PhaseRefunded, v1alpha1.PhaseAuthorized, false},
		{"unknown does not go back to processing", v1alpha1.PhaseUnknown, v1alpha1.PhaseProcessing, false},
	})
	checkTransitions(t, allowedRefundTransitions(), []transitionCase[v1alpha1.RefundPhase]{
		{"a refund is sent", v1alpha1.RefundPending, v1alpha1.RefundProcessing, true},
		{"a refund succeeds", v1alpha1.RefundProcessing, v1alpha1.RefundSucceeded, true},
		{"a refund fails after it succeeded", v1alpha1.RefundSucceeded, v1alpha1.RefundFailed, true},
		{"an unknown refund is settled by the provider", v1alpha1.RefundUnknown, v1alpha1.RefundSucceeded, true},
		{"a failed refund never succeeds without an operator", v1alpha1.RefundFailed, v1alpha1.RefundSucceeded, false},
		{"a settled refund never goes back", v1alpha1.RefundSucceeded, v1alpha1.RefundProcessing, false},
	})
}

// transitionCase is one step a state diagram draws (allowed) or rules out.
type transitionCase[P ~string] struct {
	name     string
	from, to P
	allowed  bool
}

// checkTransitions checks each case against an explored transition table.
func checkTransitions[P ~string](t *testing.T, table map[P][]P, cases []transitionCase[P]) {
	t.Helper()
	for _, tc := range cases {
		if got := slices.Contains(table[tc.from], tc.to); got != tc.allowed {
			t.Errorf("%s: %q -> %q allowed %v, want %v (table %v)", tc.name, tc.from, tc.to, got, tc.allowed, table[tc.from])
		}
	}
}
