package payment_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// TestAllowanceMoved: every change of a payment RefundAllowance reads wakes
// its waiting Refunds, and a change it does not read (the status-query
// schedule) does not.
func TestAllowanceMoved(t *testing.T) {
	seen := metav1.NewTime(t0)
	for _, tc := range []struct {
		name   string
		change func(*v1alpha1.Payment)
		want   bool
	}{
		{"nothing", func(*v1alpha1.Payment) {}, false},
		{"the schedule", func(p *v1alpha1.Payment) { p.Status.Query.Attempts++ }, false},
		{"the phase", func(p *v1alpha1.Payment) { p.Status.Phase = v1alpha1.PhasePartiallyRefunded }, true},
		{"a review", func(p *v1alpha1.Payment) {
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConflictingStatus})
		}, true},
		{"what it received", func(p *v1alpha1.Payment) {
			p.Status.AmountReceived = &v1alpha1.Money{Value: 1, Currency: orderCurrency}
		}, true},
		{"the refunded figure", func(p *v1alpha1.Payment) {
			p.Status.AmountRefunded = &v1alpha1.Money{Value: 1, Currency: orderCurrency}
		}, true},
		{"the Refunds it counts", func(p *v1alpha1.Payment) { p.Status.RefundsCounted = append(p.Status.RefundsCounted, "r9") }, true},
		{"the reversals it read", func(p *v1alpha1.Payment) { p.Status.RefundsReversed = append(p.Status.RefundsReversed, "r9") }, true},
		{"a refund failure to read", func(p *v1alpha1.Payment) { p.Status.RefundFailureSeenAt = &seen }, true},
	} {
		o := paidPayment(0)
		n := o.DeepCopy()
		tc.change(n)
		if got := payment.AllowanceMoved(o, n); got != tc.want {
			t.Errorf("%s: AllowanceMoved = %v, want %v", tc.name, got, tc.want)
		}
		if got := payment.AllowanceMoved(n, o); got != tc.want {
			t.Errorf("%s, undone: AllowanceMoved = %v, want %v", tc.name, got, tc.want)
		}
	}
}
