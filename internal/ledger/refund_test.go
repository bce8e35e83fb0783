package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// A GitOps history of one Refund manifest "five" of a payment of 1999.
// Commit A asks 500: it is refunded, and the object is replaced when commit
// B changes the (immutable) amount to 300: the 500 Refund is let go (ledger: five 500
// Succeeded); the 300 one asks another amount, so it is a new refund
// (AdoptRefund: false) and is refunded too, then deleted (ledger: five 300
// Succeeded). Commit B is reverted: "five" asking 500 is applied again. By
// the rule (docs/state-machine.md: a Refund deleted and created again under
// the same name is another refund "unless it asks the same amount and the
// ledger remembers the first one settled: then it adopts that outcome") it
// is the first refund again and must adopt it. Were the record of the same
// kind and name replaced, the ledger would have forgotten the 500 refund,
// AdoptRefund would see only the 300 one and the 500 would be sent again:
// the payment's room (1999-800) lets it through, and 500 is refunded twice.
func TestARevertedRefundIsAdoptedNotRefundedAgain(t *testing.T) {
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

// The ledger keeps a record per object (payment.LedgerRecord.Replaces): one
// per Payment name, one per amount a Refund name asked. The same object
// remembered again replaces its own record, so re-applies and re-deletes do
// not grow the ledger; records that moved money are never dropped for other
// records of the identity; entries written by the previous release (one
// record per name) are read and kept beside new ones.
func TestEachObjectOfAnIdentityIsKept(t *testing.T) {
	refund := func(asked int64, phase, id string) payment.LedgerRecord {
		return payment.LedgerRecord{Kind: payment.LedgerRefund, Name: "five", Phase: phase, ProviderID: id,
			Asked: asked, Amount: asked, Currency: "USD", SettledAt: t0.Add(-time.Hour)}
	}
	pay := func(asked int64, phase, id string) payment.LedgerRecord {
		r := rec("order-1", phase)
		r.Asked, r.ProviderID = asked, id
		return r
	}
	for _, tt := range []struct {
		name   string
		stored string // the identity's entry before, as written by the previous release
		puts   []payment.LedgerRecord
		want   []string // provider ids kept, oldest first
	}{
		{name: "a refund remembered again replaces its record",
			puts: []payment.LedgerRecord{refund(500, "Succeeded", "re_1"), refund(500, "Succeeded", "re_1")}, want: []string{"re_1"}},
		{name: "a refund of the name asking another amount is kept beside it",
			puts: []payment.LedgerRecord{refund(500, "Succeeded", "re_1"), refund(300, "Succeeded", "re_2")}, want: []string{"re_1", "re_2"}},
		{name: "a reverted amount, remembered again, replaces only its own record",
			puts: []payment.LedgerRecord{refund(500, "Succeeded", "re_1"), refund(300, "Succeeded", "re_2"), refund(500, "Succeeded", "re_1")},
			want: []string{"re_2", "re_1"}},
		{name: "a GitOps tool flipping a refund between two amounts keeps two records",
			puts: []payment.LedgerRecord{refund(500, "Succeeded", "re_1"), refund(300, "Succeeded", "re_2"), refund(500, "Succeeded", "re_1"),
				refund(300, "Succeeded", "re_2"), refund(500, "Succeeded", "re_1"), refund(300, "Succeeded", "re_2")},
			want: []string{"re_1", "re_2"}},
		{name: "every refund that moved money is kept, past the bound of records per identity",
			puts: []payment.LedgerRecord{refund(100, "Succeeded", "re_1"), refund(200, "Succeeded", "re_2"), refund(300, "Succeeded", "re_3"),
				refund(400, "Succeeded", "re_4"), refund(500, "Succeeded", "re_5")},
			want: []string{"re_1", "re_2", "re_3", "re_4", "re_5"}},
		{name: "past the bound, refunds that failed go first, the oldest of them first",
			puts: []payment.LedgerRecord{refund(100, "Failed", "re_1"), refund(200, "Succeeded", "re_2"), refund(300, "Failed", "re_3"),
				refund(400, "Failed", "re_4"), refund(500, "Failed", "re_5"), refund(600, "Succeeded", "re_6")},
			want: []string{"re_2", "re_4", "re_5", "re_6"}},
		{name: "a payment's record is its attempt: the same name replaces it",
			puts: []payment.LedgerRecord{pay(1999, "Succeeded", "pay_1"), pay(1999, "PartiallyRefunded", "pay_1")}, want: []string{"pay_1"}},
		{name: "a later attempt of the name that took no money is kept beside the one that did",
			puts: []payment.LedgerRecord{pay(1999, "Succeeded", "pay_1"), pay(2500, "Failed", "pay_2")}, want: []string{"pay_1", "pay_2"}},
		{name: "a record written by the previous release is read and kept beside another amount",
			stored: "v1|R|five|Succeeded|re_1|500|500|0|USD|1796119200|1796122800",
			puts:   []payment.LedgerRecord{refund(300, "Succeeded", "re_2")}, want: []string{"re_1", "re_2"}},
		{name: "a record written by the previous release is replaced by the same refund",
			stored: "v1|R|five|Succeeded|re_1|500|500|0|USD|1796119200|1796122800",
			puts:   []payment.LedgerRecord{refund(500, "Succeeded", "re_1")}, want: []string{"re_1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _, c := newStore(t)
			ctx := context.Background()
			if tt.stored != "" {
				if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: "paywarden-ledger-a1b"},
					Data: map[string]string{id: tt.stored}}); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range tt.puts {
				if err := s.Put(ctx, id, r); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range got {
				ids = append(ids, r.ProviderID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.want) {
				t.Errorf("records %v, want %v", ids, tt.want)
			}
		})
	}
}
