package controllers

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
//     reconciler's last write of the object (pending, current): one
//     requeued right after a call can run before that write reaches the
//     cache, and would ask the provider again what it was just told.
//
// Safe for concurrent use.
type ownWrites struct {
	mu   sync.Mutex
	seen map[ownWrite]time.Time
	// last is each object's latest own write whose watch event has not
	// arrived, by name: a reconcile asks before it reads the cache
	// (pending), so an event that arrives in between cannot hide a copy
	// older than the write.
	last  map[types.NamespacedName]lastWrite
	swept time.Time
}

type ownWrite struct {
	uid types.UID
	rv  string
}

// lastWrite is an object's latest own write: its object's name, UID and
// resourceVersion.
type lastWrite struct {
	key types.NamespacedName
	uid types.UID
	rv  string
	at  time.Time
}

// add remembers a write of obj, stored at its resourceVersion.
func (o *ownWrites) add(obj metav1.Object, now time.Time) {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	if uid == "" || rv == "" {
		return
	}
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen, o.last = map[ownWrite]time.Time{}, map[types.NamespacedName]lastWrite{}
	}
	o.seen[ownWrite{uid, rv}] = now
	o.last[key] = lastWrite{key: key, uid: uid, rv: rv, at: now}
	if now.Sub(o.swept) > time.Minute {
		o.swept = now
		for k, at := range o.seen {
			if now.Sub(at) > ownWriteMaxAge {
				delete(o.seen, k)
			}
		}
		for k, w := range o.last {
			if now.Sub(w.at) > ownWriteMaxAge {
				delete(o.last, k)
			}
		}
	}
}

// take reports whether obj's resourceVersion is one of the reconciler's own
// writes, and forgets it: a resourceVersion is delivered once. A watch
// event calls it once the cache holds that version.
func (o *ownWrites) take(obj metav1.Object) bool {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	o.mu.Lock()
	defer o.mu.Unlock()
	k := ownWrite{uid, rv}
	_, ok := o.seen[k]
	delete(o.seen, k)
	if w, ok := o.last[key]; ok && w.uid == uid && w.rv == rv {
		delete(o.last, key)
	}
	return ok
}

// pending returns the last own write of the object key names whose watch
// event has not arrived; nil: none.
func (o *ownWrites) pending(key types.NamespacedName) *lastWrite {
	o.mu.Lock()
	defer o.mu.Unlock()
	if w, ok := o.last[key]; ok {
		return &w
	}
	return nil
}

// behind reports whether a copy at resourceVersion rv of the object w
// names may be older than w: the same object, another version.
func (w lastWrite) behind(uid types.UID, rv string) bool {
	return w.uid == uid && w.rv != rv
}

// caughtUp forgets w: the API server has nothing newer than the cache, or
// the object is gone. A later write of the object stays remembered.
func (o *ownWrites) caughtUp(w lastWrite) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.last[w.key]; ok && cur.uid == w.uid && cur.rv == w.rv {
		delete(o.last, w.key)
	}
}
