package webhookreceiver

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
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
			s := newSlots(tc.total, tc.perProvider, 1<<30, 1<<30)
			for i, st := range tc.steps {
				for n := 1; n <= st.times; n++ {
					if st.release {
						s.release(st.prov, 1)
						continue
					}
					want := ""
					if n == st.times {
						want = st.want
					}
					if got := s.acquire(st.prov, 1); got != want {
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
	s := newSlots(4, 2, 1<<20, 1<<19)
	a := types.NamespacedName{Namespace: "shop-a", Name: "kukopay"}
	for range 2 {
		if r := s.acquire(a, 1000); r != "" {
			t.Fatalf("acquire: %q", r)
		}
	}
	s.release(a, 1000)
	s.release(a, 1000)
	if s.used != 0 || len(s.held) != 0 {
		t.Fatalf("after releasing everything: %d used, %v held, want none", s.used, s.held)
	}
}

// The byte budget, step by step: each acquire reserves the bytes its body
// can take; the pool of bytes bounds all providers together, a provider its
// share, and a body larger than a share takes the whole share (its provider
// reads one such body at a time, and it never waits for ever).
func TestSlotsBoundTheBodyBytesInFlight(t *testing.T) {
	a := types.NamespacedName{Namespace: "shop-a", Name: "kukopay"}
	b := types.NamespacedName{Namespace: "shop-b", Name: "kukopay"}
	c := types.NamespacedName{Namespace: "shop-c", Name: "stripe"}
	const mib = 1 << 20
	s := newSlots(256, 64, 64*mib, 16*mib)
	steps := []struct {
		release bool
		prov    types.NamespacedName
		n       int64
		want    string
	}{
		{prov: a, n: 8 * mib},
		{prov: a, n: 8 * mib},
		{prov: a, n: 1, want: shedProviderShare}, // a holds its 16 MiB share
		{prov: b, n: 16 * mib},
		{prov: c, n: 16 * mib},
		{prov: types.NamespacedName{Namespace: "shop-d", Name: "x"}, n: 16 * mib},
		{prov: types.NamespacedName{Namespace: "shop-e", Name: "x"}, n: 1, want: shedBodyBytes}, // 64 MiB held
		{release: true, prov: b, n: 16 * mib},
		{prov: types.NamespacedName{Namespace: "shop-e", Name: "x"}, n: 32 * mib}, // over a share: takes the share
		{prov: a, n: 1, want: shedBodyBytes},                                      // 64 MiB held again
		{release: true, prov: types.NamespacedName{Namespace: "shop-e", Name: "x"}, n: 32 * mib},
		{release: true, prov: a, n: 8 * mib},
		{prov: a, n: 8*mib + 1, want: shedProviderShare}, // the pool has room, a's share has not
		{prov: a, n: 8 * mib},
	}
	for i, st := range steps {
		if st.release {
			s.release(st.prov, st.n)
			continue
		}
		if got := s.acquire(st.prov, st.n); got != st.want {
			t.Fatalf("step %d: acquire %d bytes for %s: %q, want %q", i, st.n, st.prov, got, st.want)
		}
	}
	if s.usedBytes != 48*mib || len(s.held) != 3 {
		t.Errorf("%d bytes held by %d providers, want %d by 3", s.usedBytes, len(s.held), 48*mib)
	}
}

// A body of unknown length (chunked) reserves twice the provider's limit,
// what a buffer doubling while it reads may reach; a declared length is read
// into a buffer of its size.
func TestBodyReservation(t *testing.T) {
	for _, tc := range []struct{ length, limit, want int64 }{
		{1000, 1 << 20, 1000 + bytes.MinRead},
		{-1, 1 << 20, 2 << 20},
		{0, 1 << 20, 2 << 20},
	} {
		if got := bodyReservation(tc.length, tc.limit); got != tc.want {
			t.Errorf("bodyReservation(%d, %d) = %d, want %d", tc.length, tc.limit, got, tc.want)
		}
	}
}

// TestReadBodyStaysWithinItsReservation: the bytes a request reserves of
// --max-body-bytes-in-flight bound the buffer its body is read into, whatever
// it declares and sends. A declared length sizes one buffer of the reservation
// (16 MiB declared and one byte sent holds the 16 MiB reserved for it, never
// more); a body of unknown length doubles its buffer to at most twice the
// limit (bytes.Buffer rounded its growth up past that: 2304 bytes for a
// 1000-byte limit).
func TestReadBodyStaysWithinItsReservation(t *testing.T) {
	for _, tc := range []struct {
		name          string
		limit, length int64 // length -1: not declared
		sent          int
	}{
		{"16 MiB declared, one byte sent", 16 << 20, 16 << 20, 1},
		{"declared and sent in full", 1 << 20, 1<<20 - 7, 1<<20 - 7},
		{"declared and sent, small", 1000, 999, 999},
		{"not declared, one byte", 1000, -1, 1},
		{"not declared, one byte under the limit", 1000, -1, 999},
		{"not declared, exactly the limit", 1000, -1, 1000},
		{"not declared, exactly the limit of 1 KiB", 1024, -1, 1024},
		{"not declared, half the limit and one byte", 1 << 20, -1, 1<<19 + 1},
		{"not declared, exactly the limit of 1 MiB", 1 << 20, -1, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sent := bytes.Repeat([]byte("x"), tc.sent)
			rec := httptest.NewRecorder()
			r := http.MaxBytesReader(rec, io.NopCloser(bytes.NewReader(sent)), tc.limit)
			first, err := firstByte(r)
			if err != nil {
				t.Fatal(err)
			}
			reserve := bodyReservation(tc.length, tc.limit)
			body, err := readBody(first, r, tc.length, reserve)
			if err != nil || !bytes.Equal(body, sent) {
				t.Fatalf("read %d bytes of %d: %v", len(body), len(sent), err)
			}
			if int64(cap(body)) > reserve {
				t.Errorf("buffer of %d bytes for a reservation of %d", cap(body), reserve)
			}
		})
	}
}
