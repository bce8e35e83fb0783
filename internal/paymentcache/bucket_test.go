package paymentcache

import (
	"fmt"
	"testing"
)

// Keys that share a bucket are told apart by the entries' own keys: a
// look-up finds the payment of its key and no other of the bucket, and an
// index's buckets are its own keys' only.
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
		{name: "pa", namespace: "shop", keys: []uint64{tagged(0, a), tagged(1, "id-a")}},
		{name: "pb", namespace: "shop", keys: []uint64{tagged(0, b)}},
	}
	got := withKey(append([]Entry(nil), es...), 0, b)
	if len(got) != 1 || got[0].name != "pb" {
		t.Fatalf("look-up of %q in a bucket shared with %q = %+v, want pb only", b, a, got)
	}
	if got := withKey(append([]Entry(nil), es...), 1, b); len(got) != 0 {
		t.Fatalf("look-up of %q in another index = %+v, want none", b, got)
	}
	if bs := c.bucketsOf(&es[0], 0); len(bs) != 1 || bs[0] != "shop/"+c.bucket(tagged(0, a)) {
		t.Fatalf("buckets of index 0 = %v, want the one of %q in its namespace", bs, a)
	}
	if bs := c.bucketsOf(&es[0], 1); len(bs) != 1 || bs[0] != "shop/"+c.bucket(tagged(1, "id-a")) {
		t.Fatalf("buckets of index 1 = %v, want the one of id-a", bs)
	}
	twice := Entry{namespace: "shop", keys: []uint64{tagged(0, a), tagged(0, b)}}
	if bs := c.bucketsOf(&twice, 0); len(bs) != 1 {
		t.Fatalf("buckets of two keys in one bucket = %v, want it once", bs)
	}
}
