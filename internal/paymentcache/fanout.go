package paymentcache

import (
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
)

// fanout is the one handler the thin cache registers with its informer,
// before the informer starts, and hands each change on to every handler
// subscribed to it (the gauges' count, each Source) in turn.
//
// Each handler registered with an informer gets its own listener, whose
// buffer grows to hold what the handler has not taken yet and never
// shrinks. A Source starts once the cache has listed every Payment, and an
// informer hands a handler added then every payment it holds at once: with
// a handler per Source, each buffer grew to the number of payments held
// (2 MiB at 100 000) and stayed so. Registered before the first list,
// the one listener is handed the payments as fast as they are decoded, and
// a Source is handed the payments already held by subscribe, in its own
// goroutine, without a buffer. The handlers run in turn on the one
// listener's goroutine, so none may block: a Source's handler judges an
// entry and enqueues, reading only caches.
type fanout struct {
	mu   sync.Mutex
	subs []toolscache.ResourceEventHandler
}

func (f *fanout) OnAdd(obj any, initial bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.subs {
		h.OnAdd(obj, initial)
	}
}

func (f *fanout) OnUpdate(old, cur any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.subs {
		h.OnUpdate(old, cur)
	}
}

func (f *fanout) OnDelete(obj any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.subs {
		h.OnDelete(obj)
	}
}

// subscribe hands h every object held (from held, once the informer has
// synced) as added, then every change after, as an informer does a handler
// added late. A change the store held before it reached the fanout reaches
// h after h was handed the object as added: h may hear of a change twice,
// never miss one.
func (f *fanout) subscribe(h toolscache.ResourceEventHandler, held func() []any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range held() {
		h.OnAdd(o, true)
	}
	f.subs = append(f.subs, h)
}
