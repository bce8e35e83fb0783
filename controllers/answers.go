package controllers

import (
	"sync"
	"time"
)

// maxUnstoredAge bounds how long an answer whose status write failed is kept
// to be stored again instead of asking the provider once more.
const maxUnstoredAge = 10 * time.Minute

// answer is a provider's answer to one call, with when it came.
type answer interface{ answeredAt() time.Time }

// unstoredAnswers keeps answers whose status write failed (the API server
// was away, say), per object UID, so the retry stores them instead of
// calling the provider again (SPEC §11.2). Payments and Refunds keep their
// own.
type unstoredAnswers[T answer] struct {
	mu sync.Mutex
	m  map[string]T
}

func (a *unstoredAnswers[T]) put(uid string, u T) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]T{}
	}
	for k, v := range a.m {
		if u.answeredAt().Sub(v.answeredAt()) > maxUnstoredAge {
			delete(a.m, k)
		}
	}
	a.m[uid] = u
}

func (a *unstoredAnswers[T]) get(uid string, now time.Time) (T, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.m[uid]
	if ok && now.Sub(u.answeredAt()) > maxUnstoredAge {
		delete(a.m, uid)
		var zero T
		return zero, false
	}
	return u, ok
}

func (a *unstoredAnswers[T]) drop(uid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, uid)
}
