package ledger

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
		data[k] = entry{recs: []payment.LedgerRecord{r}}.encode()
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
		e, _ := decode(v)
		recs := e.recs
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

// A write that loses a race with another writer (the shard was created, or
// changed, meanwhile) reads the shard again and keeps both records; a read
// that fails for another reason fails the write.
func TestPutRetriesOnConflicts(t *testing.T) {
	ctx := context.Background()
	other := id[:len(id)-1] + "1"
	newStoreWith := func(t *testing.T, funcs interceptor.Funcs) (*Store, client.Client) {
		t.Helper()
		scheme := runtime.NewScheme()
		if err := corev1.AddToScheme(scheme); err != nil {
			t.Fatal(err)
		}
		c := fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(funcs).Build()
		return &Store{Client: c, Reader: c, Namespace: "paywarden-system", Clock: clocktesting.NewFakeClock(t0)}, c
	}
	t.Run("created meanwhile", func(t *testing.T) {
		raced := false
		s, _ := newStoreWith(t, interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if !raced {
				raced = true
				// Another writer creates the shard first, with its record.
				theirs := &Store{Client: c, Reader: c, Namespace: "paywarden-system", Clock: clocktesting.NewFakeClock(t0)}
				if err := theirs.Put(ctx, other, rec("theirs", "Succeeded")); err != nil {
					return err
				}
				return apierrors.NewAlreadyExists(corev1.Resource("configmaps"), obj.GetName())
			}
			return c.Create(ctx, obj, opts...)
		}})
		if err := s.Put(ctx, id, rec("mine", "Succeeded")); err != nil {
			t.Fatal(err)
		}
		mine, _ := s.Get(ctx, id)
		theirs, _ := s.Get(ctx, other)
		if len(mine) != 1 || len(theirs) != 1 {
			t.Fatalf("mine %+v theirs %+v, want both kept", mine, theirs)
		}
	})
	t.Run("changed meanwhile", func(t *testing.T) {
		conflicts := 0
		s, _ := newStoreWith(t, interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if conflicts == 0 {
				conflicts++
				return apierrors.NewConflict(corev1.Resource("configmaps"), obj.GetName(), fmt.Errorf("the object has been modified"))
			}
			return c.Update(ctx, obj, opts...)
		}})
		if err := s.Put(ctx, other, rec("first", "Succeeded")); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, id, rec("mine", "Succeeded")); err != nil {
			t.Fatalf("a conflict was not retried: %v", err)
		}
		if got, _ := s.Get(ctx, id); len(got) != 1 || conflicts != 1 {
			t.Fatalf("got %+v after %d conflicts", got, conflicts)
		}
	})
	t.Run("unreadable shard", func(t *testing.T) {
		s, c := newStoreWith(t, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return apierrors.NewServiceUnavailable("etcd is down")
		}})
		if err := s.Put(ctx, id, rec("mine", "Succeeded")); err == nil || !strings.Contains(err.Error(), "read ledger shard") {
			t.Fatalf("write after a failed read of the shard: %v, want the read's error", err)
		}
		list := &corev1.ConfigMapList{}
		if err := c.List(ctx, list); err != nil || len(list.Items) != 0 {
			t.Fatalf("shards %d (%v), want none written blind", len(list.Items), err)
		}
	})
}

// Identities: an unknown one in an existing shard has no records; a payment
// and a refund record of the same name are two records; a shard's name is
// lower case whatever the identity; a too short identity is an error.
func TestIdentities(t *testing.T) {
	s, _, c := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, id, rec("order-1", "Succeeded")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, id[:len(id)-1]+"1"); err != nil || got != nil {
		t.Fatalf("an unknown identity in an existing shard: %+v, %v", got, err)
	}
	refund := rec("order-1", "Succeeded")
	refund.Kind = payment.LedgerRefund
	if err := s.Put(ctx, id, refund); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, id); len(got) != 2 {
		t.Fatalf("records %+v, want the payment's and the refund's", got)
	}
	if err := s.Put(ctx, "F00DBEEF", rec("upper", "Failed")); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "paywarden-system", Name: "paywarden-ledger-f00"}, &corev1.ConfigMap{}); err != nil {
		t.Fatalf("shard paywarden-ledger-f00: %v", err)
	}
	if _, err := s.Get(ctx, "ab"); err == nil {
		t.Error("a two-character identity was read")
	}
}

// shard builds prune's input: one unpaid or paid record per identity key,
// recorded at the given times.
func shard(recs map[string]payment.LedgerRecord) map[string]string {
	data := map[string]string{}
	for k, r := range recs {
		data[k] = entry{recs: []payment.LedgerRecord{r}}.encode()
	}
	return data
}

func shardSize(data map[string]string) int {
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	return size
}

// A record is kept for less than the retention (records keep whole
// seconds): one exactly as old goes.
func TestRetentionBoundary(t *testing.T) {
	s, clk, _ := newStore(t)
	at := func(age time.Duration) payment.LedgerRecord {
		r := rec("order", "Succeeded")
		r.RecordedAt = clk.Now().Add(-age)
		return r
	}
	data := shard(map[string]payment.LedgerRecord{"a1b-kept": at(DefaultRetention - time.Second), "a1b-gone": at(DefaultRetention)})
	s.prune(data)
	if _, ok := data["a1b-kept"]; !ok {
		t.Error("a record just inside the retention was dropped")
	}
	if _, ok := data["a1b-gone"]; ok {
		t.Error("a record exactly as old as the retention was kept")
	}
}

// Over its budget, a shard drops the oldest unpaid orders first; an order
// with any paid record counts as paid, whatever came after it, and one is as
// new as its latest record; a shard
// exactly at its budget keeps everything.
func TestBudgetOrder(t *testing.T) {
	s, clk, _ := newStore(t)
	// Unpaid orders, each an hour newer than the last, and one order that
	// took the money and then saw a failed attempt, older than all.
	recs := map[string]payment.LedgerRecord{}
	n := 0
	for size := 0; size < MaxShardBytes+1024; n++ {
		r := rec(fmt.Sprintf("order-%d", n), "Failed")
		r.RecordedAt = clk.Now().Add(-time.Duration(10000-n) * time.Hour / 1000)
		k := fmt.Sprintf("a1b%029d", n)
		recs[k] = r
		size += len(k) + len(entry{recs: []payment.LedgerRecord{r}}.encode())
	}
	data := shard(recs)
	paid, retry := rec("paid", "Succeeded"), rec("retry", "Failed")
	paid.RecordedAt, retry.RecordedAt = clk.Now().Add(-20*time.Hour), clk.Now().Add(-19*time.Hour)
	data["a1b-mixed"] = entry{recs: []payment.LedgerRecord{paid, retry}}.encode()
	// An unpaid order first tried long ago and again just now is as new as
	// its latest record.
	first, again := rec("first", "Failed"), rec("again", "Failed")
	first.RecordedAt, again.RecordedAt = clk.Now().Add(-100*time.Hour), clk.Now()
	data["a1b-revisited"] = entry{recs: []payment.LedgerRecord{first, again}}.encode()
	s.prune(data)
	if _, ok := data["a1b-revisited"]; !ok {
		t.Error("an order recorded again just now was dropped as old")
	}
	if _, ok := data["a1b-mixed"]; !ok {
		t.Error("an order whose money was taken was dropped for unpaid ones (a later failed attempt made it look unpaid)")
	}
	if _, ok := data[fmt.Sprintf("a1b%029d", n-1)]; !ok {
		t.Error("the newest unpaid order was dropped")
	}
	if _, ok := data[fmt.Sprintf("a1b%029d", 0)]; ok {
		t.Error("the oldest unpaid order was kept")
	}

	t.Run("exactly at the budget", func(t *testing.T) {
		data := shard(recs)
		for k := range data {
			if shardSize(data) <= MaxShardBytes-1024 {
				break
			}
			delete(data, k)
		}
		// Fill the rest with one record whose name takes up the difference.
		r := rec("", "Failed")
		r.RecordedAt = clk.Now()
		for name := "x"; ; name += "x" {
			r.Name = name
			data["a1b-filler"] = entry{recs: []payment.LedgerRecord{r}}.encode()
			if size := shardSize(data); size >= MaxShardBytes {
				if size > MaxShardBytes {
					t.Fatalf("filler overshoots the budget: %d bytes", size)
				}
				break
			}
		}
		before := len(data)
		s.prune(data)
		if len(data) != before {
			t.Errorf("%d of %d orders kept at exactly the budget, want all", len(data), before)
		}
	})
}

// A line the manager cannot read (a record of a later format after a
// rollback, a line edited by hand) may be the record that an order took its
// money: it is never dropped, neither by a write of its own identity nor by
// the pruning a write of another identity in the shard does, and a read of
// its identity is an error naming it, so the object waits instead of moving
// the money again.
func TestAnUnreadableRecordIsKept(t *testing.T) {
	s, clk, c := newStore(t)
	ctx := context.Background()
	if err := s.Put(ctx, id, rec("order-1", "Succeeded")); err != nil {
		t.Fatal(err)
	}
	const later = "v2|P|order-0|Succeeded|pay_0|1999|1999|0|USD|1764651000|1764910200|x"
	key := client.ObjectKey{Namespace: "paywarden-system", Name: "paywarden-ledger-a1b"}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	other := "a1bffffffffffffffffffffffffffff0"
	cm.Data[id] = later + "\n" + cm.Data[id]
	cm.Data[other] = later
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}

	clk.Step(DefaultRetention + time.Hour) // past every readable record's retention
	if err := s.Put(ctx, id, rec("order-2", "Failed")); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{id, other} {
		if !strings.Contains(cm.Data[k], later) {
			t.Errorf("identity %s: %q, the unreadable line dropped", k, cm.Data[k])
		}
	}
	if strings.Contains(cm.Data[id], "order-1") || !strings.Contains(cm.Data[id], "order-2") {
		t.Errorf("identity %s: %q; want the old readable record gone by retention, the new one written", id, cm.Data[id])
	}
	for _, k := range []string{id, other} {
		if got, err := s.Get(ctx, k); err == nil || !strings.Contains(err.Error(), "want v1") || got != nil {
			t.Errorf("read of %s: %+v, %v; want an error naming the unreadable line", k, got, err)
		}
	}
}
