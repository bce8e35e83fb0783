package payment

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Closable reports whether p has nothing left to do on its own: final, no
// review asked, no dispute open, no query scheduled or unanswered, no
// operation in flight, no refund's failure to read the refunded total for. Plan gives such a payment Nothing to do until news
// reaches it: an event, an operator's annotation, a Refund that settles, its
// deletion. A closed payment (status.closed, stored with every status write
// by Outcome.StoreIn) leaves the manager's and the receiver's caches of
// open work; those news read it from the API server, and the write they
// bring opens it again when it is no longer closable.
func Closable(p *v1alpha1.Payment) bool {
	st := &p.Status
	return st.Phase.IsFinal() &&
		!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionNeedsReview) &&
		!meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionDisputed) &&
		st.Query.NextTime == nil && st.Query.UnansweredSince == nil &&
		st.Operation == nil &&
		st.RefundFailureSeenAt == nil
}
