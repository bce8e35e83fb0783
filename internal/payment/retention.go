package payment

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Retention (spec.retention.finalPayments) deletes a final payment some time
// after it last changed. These say what keeps one however old it is; the
// controller reads, deletes and writes the ledger.

// RetentionHold says why p is kept whatever its age ("" when nothing in p
// keeps it): it is being deleted or not final; it was adopted (whoever
// re-applies it keeps it: deleting it again starts a delete/re-apply loop
// with a GitOps re-sync); a human must review it; or its dispute is open
// (the provider may still take the money back, and a lost dispute must find
// the payment to raise NeedsReview=DisputeLost on it, SPEC §0).
func RetentionHold(p *v1alpha1.Payment) string {
	st := &p.Status
	switch {
	case !p.DeletionTimestamp.IsZero():
		return "being deleted"
	case !st.Phase.IsFinal():
		return fmt.Sprintf("not final (%s)", orNone(string(st.Phase)))
	case st.AdoptedAt != nil:
		return "adopted: kept by whoever applied it again"
	case meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionNeedsReview):
		return "needs review"
	case meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDisputed):
		return "its dispute is open"
	}
	return ""
}

// RetentionHorizon is how far ahead retention keeps a final payment in its
// queue: one whose retention ends later waits in no queue, and the
// retention scan, run every RetentionHorizon/4, hands it back once its end
// is within the horizon. The queue then holds the payments that go within
// the hour, not the days of them retention keeps (SPEC §12.4: work, not
// retention, sizes what the manager holds); and a scan is how retention
// reaches payments no cache holds one by one.
const RetentionHorizon = time.Hour

// RetentionLeft is how long until retention (keep, the provider's
// retention.finalPayments) may delete p, a final payment: counted from its
// last history entry (its final transition, or a later refund or dispute:
// those restart the clock), else from when Ready last changed, else from
// its creation. Zero or less: now.
func RetentionLeft(p *v1alpha1.Payment, keep time.Duration, now time.Time) time.Duration {
	return RetentionLeftSince(RetentionSince(p), keep, now)
}

// RetentionLeftSince is RetentionLeft of a payment whose retention started
// at since (RetentionSince).
func RetentionLeftSince(since time.Time, keep time.Duration, now time.Time) time.Duration {
	return since.Add(keep).Sub(now)
}

// RetentionSince is when p's retention started (see RetentionLeft).
func RetentionSince(p *v1alpha1.Payment) time.Time {
	if n := len(p.Status.History); n > 0 {
		return p.Status.History[n-1].Time.Time
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.LastTransitionTime.Time
	}
	return p.CreationTimestamp.Time
}

// RetentionWait is how long a final payment that nothing holds, whose
// retention ends in left (> 0), waits in the retention queue: until that
// end, when it is within horizon; else not at all (0), and the retention
// scan hands it back once it is. The scan hands back exactly the payments
// this gives a wait: not one past its end (that one was judged at its end
// and is kept by a Refund, whose settling brings it back), nor one far off.
func RetentionWait(left, horizon time.Duration) time.Duration {
	if left > horizon {
		return 0
	}
	return max(left, 0)
}

// RetentionScanHandsBack says whether the retention scan hands a final
// payment that nothing holds, whose retention ends in left, to the retention
// queue: one that ends within horizon and has a wait (RetentionWait); and in
// the scan at start, one past its end as well. Nothing judged that one
// while no manager ran, and no cache event brings a closed payment at start
// (the manager's cache holds open work only); afterwards a payment past its
// end was judged at its end and is kept by a Refund, whose settling brings
// it back.
func RetentionScanHandsBack(left, horizon time.Duration, atStart bool) bool {
	if left <= 0 {
		return atStart
	}
	return RetentionWait(left, horizon) > 0
}

// RefundsHold says which of p's Refunds keeps it past its retention ("" when
// none does): one not final (its settling brings the payment back), one a
// human must review (it is owned by p and would go with it, its review
// unanswered), or one settled that p's refunded total does not count yet
// (Uncounted).
func RefundsHold(p *v1alpha1.Payment, refunds []v1alpha1.Refund) string {
	for i := range refunds {
		rf := &refunds[i]
		switch {
		case !rf.Status.Phase.IsFinal():
			return fmt.Sprintf("Refund %s is not final (%s)", rf.Name, orNone(string(rf.Status.Phase)))
		case meta.IsStatusConditionTrue(rf.Status.Conditions, v1alpha1.ConditionNeedsReview):
			return fmt.Sprintf("Refund %s needs review", rf.Name)
		}
	}
	if name := Uncounted(p, refunds); name != "" {
		return fmt.Sprintf("Refund %s is not counted in the refunded total yet", name)
	}
	return ""
}

// RetentionRemembers reports whether retention writes p to the ledger before
// it deletes it (where no money-in-flight finalizer does): p was sent to the
// provider (its create marker), or it took money, as a tracked payment
// (spec.providerPaymentID, made elsewhere) does without a call. A new
// Payment of its order then adopts it instead of charging the order again
// (SPEC §12.1).
func RetentionRemembers(p *v1alpha1.Payment) bool {
	return p.Status.CreateRequestedAt != nil || p.Status.Phase.TookMoney()
}

// HoldTracked reports whether p, a tracked payment (spec.providerPaymentID:
// made elsewhere, never sent by paywarden), must now get the
// money-in-flight finalizer: the provider has answered for it, and it took
// the money or may still take it (Pending, Processing, Authorized, Unknown).
// A Payment paywarden sends is held before its first marker; a tracked one
// has no marker, so without this a deletion by hand (not retention, which
// writes the ledger itself) would forget the order, and a new Payment of it
// would be created at the provider: the order charged twice (SPEC §12.1).
// Held, its deletion waits for the provider's final answer (payment.InFlight)
// and it is written to the ledger when it goes. One that ended without the
// money (Failed, Expired, Canceled) needs no hold, and one being deleted is
// not held any more: it was not, and is gone already.
func HoldTracked(p *v1alpha1.Payment) bool {
	phase := p.Status.Phase
	return p.Spec.ProviderPaymentID != "" && p.DeletionTimestamp.IsZero() && phase != "" && (phase.TookMoney() || !phase.IsFinal())
}
