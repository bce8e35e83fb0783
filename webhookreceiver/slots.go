package webhookreceiver

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// slots are the in-flight slots of requests past their first body byte,
// shared among PaymentProviders. One pool alone would let whoever posts to
// one provider's URL (the path is public) hold every slot and shed every
// tenant's deliveries; so a provider may hold at most perProvider of them,
// and the others stay free for the rest.
//
// The decision is the whole type: no I/O and no clock, so it is tested on
// its own (slots_test.go) and the handler only acquires and releases.
type slots struct {
	total, perProvider int

	mu   sync.Mutex
	used int
	held map[types.NamespacedName]int // providers holding a slot; zeros removed
}

// newSlots makes a pool of total slots, at most perProvider of them per
// provider (clamped to 1..total).
func newSlots(total, perProvider int) *slots {
	return &slots{total: total, perProvider: min(max(perProvider, 1), total), held: map[types.NamespacedName]int{}}
}

// acquire takes a slot for prov without waiting. When none may be taken it
// returns the shed reason: shedConcurrency when the pool is full (whoever
// holds it), else shedProviderShare when prov holds its share. It returns ""
// when a slot was taken; release gives it back.
func (s *slots) acquire(prov types.NamespacedName) (shedReason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.used >= s.total:
		return shedConcurrency
	case s.held[prov] >= s.perProvider:
		return shedProviderShare
	}
	s.used++
	s.held[prov]++
	return ""
}

// release gives back a slot acquire took for prov.
func (s *slots) release(prov types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used--
	if s.held[prov]--; s.held[prov] <= 0 {
		delete(s.held, prov)
	}
}
