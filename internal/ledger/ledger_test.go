package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/paywarden/paywarden/internal/payment"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newStore(t *testing.T) (*Store, *clocktesting.FakeClock, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	clk := clocktesting.NewFakeClock(t0)
	return &Store{Client: c, Reader: c, Namespace: "paywarden-system", Clock: clk}, clk, c
}

func rec(name, phase string) payment.LedgerRecord {
	return payment.LedgerRecord{Kind: payment.LedgerPayment, Name: name, Phase: phase, ProviderID: "pay_" + name, Asked: 1999, Amount: 1999, Currency: "USD", SettledAt: t0.Add(-72 * time.Hour)}
}

const id = "a1b2c3d4e5f60718293a4b5c6d7e8f90"

func TestPutAndGet(t *testing.T) {
	s, _, c := newStore(t)
	ctx := context.Background()
	if got, err := s.Get(ctx, id); err != nil || got != nil {
		t.Fatalf("empty ledger: %v, %v", got, err)
	}
	if err := s.Put(ctx, id, rec("order-1", "Succeeded")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, id, rec("order-1", "PartiallyRefunded")); err != nil { // the same object again: replaced
		t.Fatal(err)
	}
	got, err := s.Get(ctx, id)
	if err != nil || len(got) != 1 || got[0].Phase != "PartiallyRefunded" || !got[0].RecordedAt.Equal(t0) {
		t.Fatalf("got %+v, %v", got, err)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "paywarden-system", Name: "paywarden-ledger-a1b"}, cm); err != nil {
		t.Fatalf("shard paywarden-ledger-a1b: %v", err)
	}
}

// Records are forgotten by when they were written (their object let go),
// not by when the payment settled: a payment kept for months is remembered
// for the whole retention after it goes.
func TestRetentionCountsFromTheRecord(t *testing.T) {
	s, clk, _ := newStore(t)
	ctx := context.Background()
	old := rec("order-1", "Succeeded")
	old.SettledAt = t0.Add(-90 * 24 * time.Hour)
	if err := s.Put(ctx, id, old); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, id); len(got) != 1 {
		t.Fatalf("a record of a payment settled 90 days ago was dropped when written: %+v", got)
	}
	clk.Step(DefaultRetention + time.Hour)
	// Any write to the shard prunes it.
	if err := s.Put(ctx, id[:len(id)-1]+"1", rec("other", "Failed")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, id); len(got) != 0 {
		t.Errorf("a record past retention is kept: %+v", got)
	}
}

// The attempt that took the order's money is never dropped for other
// attempts' records, however many came after it; an order keeps four
// records: the paid one and the latest others.
func TestThePaidAttemptIsKept(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, id, rec("paid", "Succeeded")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if err := s.Put(ctx, id, rec(fmt.Sprintf("try-%d", i), "Failed")); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.Get(ctx, id)
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	if fmt.Sprint(names) != "[paid try-4 try-5 try-6]" {
		t.Errorf("records of %v, want the paid attempt and the three latest others [paid try-4 try-5 try-6]", names)
	}
}

// Over its budget, a shard drops orders that moved no money first.
func TestBudgetDropsUnpaidOrdersFirst(t *testing.T) {
	s, clk, _ := newStore(t)
	data := map[string]string{}
	n := 0
	for size := 0; size < MaxShardBytes+4096; n++ {
		r := rec(fmt.Sprintf("order-%d", n), "Failed")
		if n%2 == 0 {
			r.Phase = "Succeeded"
		}
		r.RecordedAt = clk.Now()
		k := fmt.Sprintf("a1b%029d", n)
		data[k] = encodeAll([]payment.LedgerRecord{r})
		size += len(k) + len(data[k])
	}
	before := len(data)
	s.prune(data)
	// Only what brings the shard under its budget goes.
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if entry := len("a1b00000000000000000000000000000") + len(data["a1b00000000000000000000000000000"]); size > MaxShardBytes || size <= MaxShardBytes-2*entry {
		t.Errorf("%d of %d orders kept, %d bytes: want just under the budget of %d", len(data), before, size, MaxShardBytes)
	}
	for k, v := range data {
		recs, _ := decodeAll(v)
		if len(recs) == 1 && !recs[0].TookMoney() && len(data) < n {
			// some unpaid may stay only if every paid one stayed
			for i := 0; i < n; i += 2 {
				if _, ok := data[fmt.Sprintf("a1b%029d", i)]; !ok {
					t.Fatalf("paid order %d dropped while unpaid %s kept", i, k)
				}
			}
		}
	}
	if len(data) >= n {
		t.Errorf("nothing dropped over the budget")
	}
}
