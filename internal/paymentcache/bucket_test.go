package paymentcache

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func refKeys(o client.Object) []string {
	p, _ := asPayment(o)
	return []string{p.Spec.MerchantReference}
}

// Keys that share a bucket are told apart by the payments' own keys: a
// look-up finds the payment of its key and no other of the bucket.
func TestALookupKeepsOnlyItsKeyOfABucket(t *testing.T) {
	seen := map[string]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		ref := fmt.Sprintf("order-%d", i)
		if other, ok := seen[bucket(ref)]; ok {
			a, b = other, ref
		}
		seen[bucket(ref)] = ref
	}
	ds := []digest{
		{ObjectMeta: metav1.ObjectMeta{Name: "pa"}, Spec: digestSpec{MerchantReference: a}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pb"}, Spec: digestSpec{MerchantReference: b}},
	}
	if bucket(a) != bucket(b) {
		t.Fatal("no collision found")
	}
	got := matching(ds, refKeys, b)
	if len(got) != 1 || got[0].Name != "pb" {
		t.Fatalf("look-up of %q in a bucket shared with %q = %+v, want pb only", b, a, got)
	}
	if got := matching(ds, nil, ""); len(got) != 2 {
		t.Fatalf("a listing by no index = %d payments, want both", len(got))
	}
	if bs := buckets([]string{a, b, a}); len(bs) != 1 {
		t.Fatalf("buckets of keys in one bucket = %v, want it once", bs)
	}
}
