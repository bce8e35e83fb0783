package inbox

import "sync"

// RecentEvents remembers the inbox records this process stored or found
// already stored, so a provider's repeated delivery of a recent event is
// acknowledged as a duplicate without asking the API server again. It is a
// cache in front of the real dedup (the deterministic record name): a
// forgotten entry costs one create answered 409, never a second record.
// Bounded; the oldest entries are forgotten first. Safe for concurrent use.
type RecentEvents struct {
	mu    sync.Mutex
	size  int
	keys  map[string]struct{}
	order []string
	next  int
}

// NewRecentEvents remembers up to size records (size <= 0 remembers none).
func NewRecentEvents(size int) *RecentEvents {
	return &RecentEvents{size: size, keys: map[string]struct{}{}}
}

// Seen reports whether key was added and not yet forgotten.
func (r *RecentEvents) Seen(key string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.keys[key]
	return ok
}

// Add remembers key, forgetting the oldest when full.
func (r *RecentEvents) Add(key string) {
	if r == nil || r.size <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.keys[key]; ok {
		return
	}
	if len(r.order) < r.size {
		r.order = append(r.order, key)
	} else {
		delete(r.keys, r.order[r.next])
		r.order[r.next] = key
		r.next = (r.next + 1) % r.size
	}
	r.keys[key] = struct{}{}
}
