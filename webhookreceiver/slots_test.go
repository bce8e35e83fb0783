package webhookreceiver

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// The slot decision, step by step: each step acquires (or releases) one slot
// for a provider and states what it must get.
func TestSlotsShareThePoolAmongProviders(t *testing.T) {
	a := types.NamespacedName{Namespace: "shop-a", Name: "kukopay"}
	b := types.NamespacedName{Namespace: "shop-b", Name: "kukopay"}
	c := types.NamespacedName{Namespace: "shop-c", Name: "stripe"}
	type step struct {
		release bool
		prov    types.NamespacedName
		times   int
		want    string // shed reason of the last acquire, "" when taken
	}
	for _, tc := range []struct {
		name               string
		total, perProvider int
		steps              []step
	}{
		{"a provider flooding its URL holds only its share; another provider finds a slot", 8, 2, []step{
			{prov: a, times: 2},
			{prov: a, times: 1, want: shedProviderShare},
			{prov: b, times: 2},
		}},
		{"a released slot can be taken again by its provider", 8, 2, []step{
			{prov: a, times: 2},
			{release: true, prov: a, times: 1},
			{prov: a, times: 1},
			{prov: a, times: 1, want: shedProviderShare},
		}},
		{"the pool bounds all providers together", 4, 2, []step{
			{prov: a, times: 2},
			{prov: b, times: 2},
			{prov: c, times: 1, want: shedConcurrency},
			{release: true, prov: b, times: 1},
			{prov: c, times: 1},
		}},
		{"a full pool is reported as such, also to a provider at its share", 4, 2, []step{
			{prov: a, times: 2},
			{prov: b, times: 2},
			{prov: a, times: 1, want: shedConcurrency},
		}},
		{"a share above the pool is the pool", 3, 10, []step{
			{prov: a, times: 3},
			{prov: a, times: 1, want: shedConcurrency},
		}},
		{"a share below one is one", 3, 0, []step{
			{prov: a, times: 1},
			{prov: a, times: 1, want: shedProviderShare},
			{prov: b, times: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSlots(tc.total, tc.perProvider)
			for i, st := range tc.steps {
				for n := 1; n <= st.times; n++ {
					if st.release {
						s.release(st.prov)
						continue
					}
					want := ""
					if n == st.times {
						want = st.want
					}
					if got := s.acquire(st.prov); got != want {
						t.Fatalf("step %d, acquire %d of %d for %s: %q, want %q", i, n, st.times, st.prov, got, want)
					}
				}
			}
		})
	}
}

// Releasing every slot leaves nothing behind: a provider that is no longer
// sent to costs no memory.
func TestSlotsForgetProvidersWithNothingInFlight(t *testing.T) {
	s := newSlots(4, 2)
	a := types.NamespacedName{Namespace: "shop-a", Name: "kukopay"}
	for range 2 {
		if r := s.acquire(a); r != "" {
			t.Fatalf("acquire: %q", r)
		}
	}
	s.release(a)
	s.release(a)
	if s.used != 0 || len(s.held) != 0 {
		t.Fatalf("after releasing everything: %d used, %v held, want none", s.used, s.held)
	}
}
