package webhookreceiver

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// slots are the in-flight slots of requests past their first body byte,
// shared among PaymentProviders, and the body bytes those requests may hold
// in memory. One pool alone would let whoever posts to one provider's URL
// (the path is public) hold every slot and shed every tenant's deliveries;
// so a provider may hold at most perProvider of them, and the others stay
// free for the rest. Bytes are bounded the same way: a provider's
// maxBodyBytes may be 16 MiB, and a pool of 256 such bodies would outgrow
// any memory limit; a request reserves the bytes its body can take before
// it is read, within bytes (perProviderBytes per provider).
//
// The decision is the whole type: no I/O and no clock, so it is tested on
// its own (slots_test.go) and the handler only acquires and releases.
type slots struct {
	total, perProvider      int
	bytes, perProviderBytes int64

	mu        sync.Mutex
	used      int
	usedBytes int64
	held      map[types.NamespacedName]holding // providers holding a slot; zeros removed
}

// holding is what one provider holds: slots and body bytes.
type holding struct {
	slots int
	bytes int64
}

// newSlots makes a pool of total slots and bytes body bytes, at most
// perProvider slots and perProviderBytes bytes of them per provider (clamped
// to 1..total and 1..bytes).
func newSlots(total, perProvider int, bytes, perProviderBytes int64) *slots {
	return &slots{
		total: total, perProvider: min(max(perProvider, 1), total),
		bytes: bytes, perProviderBytes: min(max(perProviderBytes, 1), bytes),
		held: map[types.NamespacedName]holding{},
	}
}

// acquire takes a slot and n body bytes for prov without waiting. A
// reservation larger than a provider's share of bytes is taken as its whole
// share: such a provider reads one body at a time. When none may be taken
// it returns the shed reason: shedConcurrency when the pool of slots is full,
// shedBodyBytes when the pool of bytes is (whoever holds them), else
// shedProviderShare when prov holds its share of either. It returns "" when
// they were taken; release gives them back, with the n acquire was given.
func (s *slots) acquire(prov types.NamespacedName, n int64) (shedReason string) {
	n = s.reservation(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.held[prov]
	switch {
	case s.used >= s.total:
		return shedConcurrency
	case s.usedBytes+n > s.bytes:
		return shedBodyBytes
	case h.slots >= s.perProvider || h.bytes+n > s.perProviderBytes:
		return shedProviderShare
	}
	s.used++
	s.usedBytes += n
	s.held[prov] = holding{slots: h.slots + 1, bytes: h.bytes + n}
	return ""
}

// reservation is what acquire takes for a body of at most n bytes.
func (s *slots) reservation(n int64) int64 {
	return min(max(n, 0), s.perProviderBytes)
}

// release gives back a slot and the n bytes acquire took for prov.
func (s *slots) release(prov types.NamespacedName, n int64) {
	n = s.reservation(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	s.usedBytes -= n
	h := s.held[prov]
	h.slots--
	h.bytes -= n
	if h.slots <= 0 {
		delete(s.held, prov)
		return
	}
	s.held[prov] = h
}
