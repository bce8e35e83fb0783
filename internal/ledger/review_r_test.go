package ledger

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// TestARefundAppliedAgainAfterItsNameWasReusedIsNotRefundedTwice: a GitOps
// history of one Refund manifest "five" of a payment of 1999. Commit A asks
// 500: it is refunded, and the object is replaced when commit B changes the
// (immutable) amount to 300: the 500 Refund is let go (ledger: five 500
// Succeeded); the 300 one asks another amount, so it is a new refund
// (AdoptRefund: false) and is refunded too, then deleted (ledger: five 300
// Succeeded). Commit B is reverted: "five" asking 500 is applied again. By
// the rule (docs/state-machine.md: a Refund deleted and created again under
// the same name is another refund "unless it asks the same amount and the
// ledger remembers the first one settled: then it adopts that outcome") it
// is the first refund again and must adopt it. But Store.Put replaces the
// record of the same kind and name, so the ledger has forgotten the 500
// refund, AdoptRefund sees only the 300 one and the 500 is sent again: the
// payment's room (1999-800) lets it through, and 500 is refunded twice.
func TestARefundAppliedAgainAfterItsNameWasReusedIsNotRefundedTwice(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	refundRec := func(asked int64, id string) payment.LedgerRecord {
		return payment.LedgerRecord{Kind: payment.LedgerRefund, Name: "five", Phase: string(v1alpha1.RefundSucceeded), ProviderID: id,
			Asked: asked, Amount: asked, Currency: "USD", SettledAt: t0.Add(-time.Hour)}
	}
	if err := s.Put(ctx, id, refundRec(500, "re_1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, id, refundRec(300, "re_2")); err != nil {
		t.Fatal(err)
	}
	recs, err := s.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	again := &v1alpha1.Refund{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "five", UID: "uid-3"},
		Spec:       v1alpha1.RefundSpec{PaymentRef: v1alpha1.LocalObjectReference{Name: "order"}, Amount: &v1alpha1.Amount{Value: 500, Currency: "USD"}},
	}
	out, adopted := payment.AdoptRefund(again, recs, t0)
	if !adopted || out.Status.ProviderRefundID != "re_1" {
		t.Errorf("Refund five asking 500, applied again after five(500, re_1) and five(300, re_2) settled and were deleted, is not adopted (adopted %v, refund id %q): it would refund 500 a second time; the ledger holds %+v",
			adopted, out.Status.ProviderRefundID, recs)
	}
}
