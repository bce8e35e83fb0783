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

// ownWrites remembers the resourceVersions of the reconciler's own status
// writes until their watch events arrive, so those events do not wake the
// payment a second time: the reconcile that wrote already planned what comes
// next and returned it as RequeueAfter. Under a backlog this is the
// difference between one reconcile per provider call and three (the create
// marker and the provider's answer each moved the phase or the provider id,
// and each write came back as news). Safe for concurrent use.
type ownWrites struct {
	mu    sync.Mutex
	seen  map[ownWrite]time.Time
	swept time.Time
}

type ownWrite struct {
	uid types.UID
	rv  string
}

// add remembers a write stored at resourceVersion rv.
func (o *ownWrites) add(uid types.UID, rv string, now time.Time) {
	if uid == "" || rv == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[ownWrite]time.Time{}
	}
	o.seen[ownWrite{uid, rv}] = now
	if now.Sub(o.swept) > time.Minute {
		o.swept = now
		for k, at := range o.seen {
			if now.Sub(at) > ownWriteMaxAge {
				delete(o.seen, k)
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
	return ok
}
