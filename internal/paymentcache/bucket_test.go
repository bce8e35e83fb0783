package paymentcache

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Keys that share a bucket are told apart by the entries' own keys: a
// look-up finds the payment of its key and no other of the bucket, nor the
// same key of another index, and a payment is in each bucket of its keys
// once.
func TestALookupKeepsOnlyItsKeyOfABucket(t *testing.T) {
	c := &Cache{buckets: DefaultBuckets}
	seen := map[string]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		ref := fmt.Sprintf("order-%d", i)
		if other, ok := seen[c.bucket(tagged(0, ref))]; ok {
			a, b = other, ref
		}
		seen[c.bucket(tagged(0, ref))] = ref
	}
	es := []Entry{
		*entryWith("shop", "pa", tagged(0, a), tagged(1, "id-a")),
		*entryWith("shop", "pb", tagged(0, b)),
	}
	got := withKey(append([]Entry(nil), es...), 0, b)
	if len(got) != 1 || got[0].name != "pb" {
		t.Fatalf("look-up of %q in a bucket shared with %q = %+v, want pb only", b, a, got)
	}
	if got := withKey(append([]Entry(nil), es...), 1, b); len(got) != 0 {
		t.Fatalf("look-up of %q in another index = %+v, want none", b, got)
	}
	if bs := c.bucketsOf(&es[0]); len(bs) != 2 || bs[0] != "shop/"+c.bucket(tagged(0, a)) || bs[1] != "shop/"+c.bucket(tagged(1, "id-a")) {
		t.Fatalf("buckets = %v, want those of %q and id-a in its namespace", bs, a)
	}
	twice := entryWith("shop", "", tagged(0, a), tagged(0, b))
	if bs := c.bucketsOf(twice); len(bs) != 1 {
		t.Fatalf("buckets of two keys in one bucket = %v, want it once", bs)
	}
}

// A list of the thin cache by labels or by a field it has no index for, or
// of a namespace it does not hold, is refused: an entry keeps neither, and an
// empty answer would read as no payment.
func TestAListByWhatAnEntryDoesNotKeepIsRefused(t *testing.T) {
	c := &Cache{buckets: DefaultBuckets}
	for _, opt := range []client.ListOption{
		client.MatchingLabels{"team": "x"},
		client.MatchingFields{"spec.amount": "5"},
	} {
		var l v1alpha1.PaymentList
		if err := c.List(context.Background(), &l, client.InNamespace("shop"), opt); err == nil {
			t.Errorf("list with %#v: no error", opt)
		}
	}
	var l EntryList
	if err := c.List(context.Background(), &l, client.InNamespace("shop")); err != nil || len(l.Items) != 0 {
		t.Errorf("list of an empty cache = %d items, %v", len(l.Items), err)
	}
	// Nor a namespace the cache does not hold: none there is not none.
	c.namespaces = []string{"shop"}
	if err := c.List(context.Background(), &l, client.InNamespace("kube-system")); err == nil {
		t.Error("list of a namespace the cache does not hold: no error")
	}
}
