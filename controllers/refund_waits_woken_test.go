package controllers_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// TestRefundBesideEndedInDoubtResolvedFailedIsDecided: a Refund of a Failed
// payment under review (ConflictingStatus) waits PaymentNotSucceeded. The
// human confirms the failure (resolve Failed): the review is cleared, the
// phase stays Failed, and the Refund is refused PaymentNotPaid at once: the
// refund controller's Payment watch wakes Refunds on every change the
// allowance reads (payment.AllowanceMoved), the review included.
func TestRefundBesideEndedInDoubtResolvedFailedIsDecided(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "refund-wake")
	_, _ = simProvider(t, ns, v1alpha1.ProviderKukoPay)
	m := refundManager(t, ns)

	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "doubt", Provider: "kukopay", Outcome: paysim.OutcomeFail})
	p = fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseFailed, fixture.Timeout)
	// The provider said it succeeded after it failed: under review.
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonConflictingStatus, Message: "provider reported Succeeded for a payment already Failed"})
	})
	// The Refund must be judged on the review: a Refund judged on a cache
	// that has not yet seen it is refused PaymentNotPaid, rightly.
	fixture.WaitCached(t, m.Client(), p)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "r1", Payment: p.Name, Amount: 500})
	rf = fixture.WaitRefund(t, env.Client, rf, "waiting PaymentNotSucceeded", func(r *v1alpha1.Refund) bool {
		return r.Status.WaitingFor == v1alpha1.ReasonPaymentNotSucceeded
	})

	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationResolveReason, "checked: declined")
	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationResolve, string(v1alpha1.PhaseFailed))
	fixture.WaitPayment(t, env.Client, p, "review cleared", func(p *v1alpha1.Payment) bool {
		return !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionNeedsReview)
	})
	// Decided on the payment's change: a wait nothing wakes would time out.
	fixture.WaitRefund(t, env.Client, rf, "Failed (PaymentNotPaid) once the payment is confirmed Failed", func(r *v1alpha1.Refund) bool {
		return r.Status.Phase == v1alpha1.RefundFailed
	})
}

// TestRefundOfEverythingWaitingOnFailureMarkIsDecidedAfterTheRead: a Refund
// of everything created while status.refundFailureSeenAt is set waits
// EarlierRefundInFlight. The read that answers for the mark clears it; when
// the provider's figure is unchanged (the failed refund was never counted:
// a PayPal refund PENDING then FAILED), nothing else of the payment moves,
// and the mark's clearing alone wakes the Refund (payment.AllowanceMoved).
// The mark's setting alone wakes the payment (paymentNews), whose read
// clears it.
func TestRefundOfEverythingWaitingOnFailureMarkIsDecidedAfterTheRead(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "refund-wake")
	sim, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	m := refundManager(t, ns)

	p := paidPayment(t, ns, "kukopay", "marked", 1000)
	r0 := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "r0", Payment: p.Name, Amount: 300})
	fixture.WaitRefundPhase(t, env.Client, r0, v1alpha1.RefundSucceeded)
	p = waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 300)
	fixture.WaitPayment(t, env.Client, p, "r0 counted", func(p *v1alpha1.Payment) bool { return len(p.Status.RefundsCounted) == 1 })

	// A refund event said a refund no Refund stands for failed. The mark
	// alone wakes the payment (it moves neither the phase nor the figure);
	// its read fails while the provider answers 500, so the mark stays.
	sim.SetFaults(paysim.Faults{ServerErrorRate: 1, Operations: []string{paysim.OpGet}})
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) { st.RefundFailureSeenAt = &now })
	fixture.WaitCached(t, m.Client(), p)
	fixture.WaitPayment(t, env.Client, p, "its read tried", func(p *v1alpha1.Payment) bool {
		return p.Status.Query.ConsecutiveErrors > 0 && p.Status.RefundFailureSeenAt != nil
	})
	time.Sleep(time.Second)
	r1 := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "r1", Payment: p.Name})
	fixture.WaitRefund(t, env.Client, r1, "waiting EarlierRefundInFlight", func(r *v1alpha1.Refund) bool {
		return r.Status.WaitingFor == v1alpha1.ReasonEarlierRefundInFlight
	})
	// The provider answers again: the read finds 300, as before, and
	// clears the mark without moving the figure.
	sim.SetFaults(paysim.Faults{})
	fixture.WaitPayment(t, env.Client, p, "mark cleared", func(p *v1alpha1.Payment) bool { return p.Status.RefundFailureSeenAt == nil })
	fixture.WaitRefund(t, env.Client, r1, "decided (sent) once the read cleared refundFailureSeenAt", func(r *v1alpha1.Refund) bool {
		return r.Status.CreateRequestedAt != nil
	})
}
