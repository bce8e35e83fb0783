package controllers

import (
	"sync"
	"time"
)

// maxUnstoredAge bounds how long an answer whose status write failed is kept
// to be stored again instead of asking the provider once more.
const maxUnstoredAge = 10 * time.Minute

// answer is a provider's answer to the call of one plan step (S: a
// payment.Step or payment.RefundStep; C: the kind's call result), with when
// it came: what the kind's core decides on.
type answer[S step, C any] struct {
	step S
	call C
	at   time.Time
}

// unstoredAnswers keeps answers whose status write failed (the API server
// was away, say), per object UID, so the retry stores them instead of
// calling the provider again (SPEC §11.2). Payments and Refunds keep their
// own.
type unstoredAnswers[S step, C any] struct {
	mu sync.Mutex
	m  map[string]answer[S, C]
}

func (a *unstoredAnswers[S, C]) put(uid string, u answer[S, C]) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]answer[S, C]{}
	}
	for k, v := range a.m {
		if u.at.Sub(v.at) > maxUnstoredAge {
			delete(a.m, k)
		}
	}
	a.m[uid] = u
}

func (a *unstoredAnswers[S, C]) get(uid string, now time.Time) (answer[S, C], bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	u, ok := a.m[uid]
	if ok && now.Sub(u.at) > maxUnstoredAge {
		delete(a.m, uid)
		return answer[S, C]{}, false
	}
	return u, ok
}

func (a *unstoredAnswers[S, C]) drop(uid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, uid)
}
