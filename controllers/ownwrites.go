package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ownWriteMaxAge bounds how long the reconciler remembers one of its writes
// whose watch event it has not seen (the event was lost in a relist, the
// payment was deleted): long enough for any watch to deliver it.
const ownWriteMaxAge = 10 * time.Minute

// ownWrites remembers the resourceVersions of a reconciler's own writes
// until their watch events arrive. Two uses:
//   - the payment controller's events of its own writes do not wake the
//     payment a second time: the reconcile that wrote already planned what
//     comes next and returned it as RequeueAfter. Under a backlog this is
//     the difference between one reconcile per provider call and three (the
//     create marker and the provider's answer each moved the phase or the
//     provider id, and each write came back as news);
//   - a reconcile does not plan on a cached copy older than the
//     reconciler's last write of the object (behind, current): one
//     requeued right after a call can run before that write reaches the
//     cache, and would ask the provider again what it was just told.
//
// Safe for concurrent use.
type ownWrites struct {
	mu   sync.Mutex
	seen map[ownWrite]time.Time
	// last is each object's latest own write whose watch event has not
	// arrived.
	last  map[types.UID]lastWrite
	swept time.Time
}

type ownWrite struct {
	uid types.UID
	rv  string
}

type lastWrite struct {
	rv string
	at time.Time
}

// add remembers a write stored at resourceVersion rv.
func (o *ownWrites) add(uid types.UID, rv string, now time.Time) {
	if uid == "" || rv == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen, o.last = map[ownWrite]time.Time{}, map[types.UID]lastWrite{}
	}
	o.seen[ownWrite{uid, rv}] = now
	o.last[uid] = lastWrite{rv: rv, at: now}
	if now.Sub(o.swept) > time.Minute {
		o.swept = now
		for k, at := range o.seen {
			if now.Sub(at) > ownWriteMaxAge {
				delete(o.seen, k)
			}
		}
		for uid, w := range o.last {
			if now.Sub(w.at) > ownWriteMaxAge {
				delete(o.last, uid)
			}
		}
	}
}

// take reports whether rv is one of the reconciler's own writes, and
// forgets it: a resourceVersion is delivered once.
func (o *ownWrites) take(uid types.UID, rv string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := ownWrite{uid, rv}
	_, ok := o.seen[k]
	delete(o.seen, k)
	if w, ok := o.last[uid]; ok && w.rv == rv {
		delete(o.last, uid)
	}
	return ok
}

// behind reports whether a copy of object uid at resourceVersion rv may be
// older than the reconciler's last write of it: that write's watch event
// has not arrived, and rv is not the write's.
func (o *ownWrites) behind(uid types.UID, rv string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	w, ok := o.last[uid]
	return ok && w.rv != rv
}

// caughtUp forgets the last write of uid: the API server has nothing newer
// than the cache.
func (o *ownWrites) caughtUp(uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.last, uid)
}
