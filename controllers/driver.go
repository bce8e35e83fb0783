package controllers

import (
	"context"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/payment"
)

// The one plan → call → store loop every kind that moves money runs
// (Payments, Refunds), in the manner of crossplane-runtime's managed
// reconciler: drive owns the loop and the rules every kind shares — an
// answer whose write failed is stored before anything else, a create or
// look-up is decided on the object as the API server has it, at most one
// provider call per reconcile, a reconcile that stored nothing never comes
// back in under a second — and each kind brings only its own rules, as the
// methods of one pass (kind).

// step is a kind's plan step (payment.Step, payment.RefundStep).
type step interface {
	Next() (payment.Action, time.Time)
}

// kind is one reconcile of one object of a kind: the object T, its plan
// step S and what its provider call returns C.
type kind[T client.Object, S step, C any] interface {
	// state is what the reconcile has done so far (pass).
	state() *pass
	// object is the object as last read or stored; replace takes a newer
	// copy of it.
	object() T
	replace(T)
	// plan reads what the kind's plan needs besides the object and asks
	// the core for the next step.
	plan(ctx context.Context, now time.Time) (S, error)
	// finalize handles the deleted object once nothing is to be done:
	// let go, or say again what it waits for.
	finalize(ctx context.Context) (gone bool, err error)
	// hold readies the object for the write of s; done: the reconcile
	// ends with res (nothing may start now, or no token for the call a
	// marker announces).
	hold(ctx context.Context, s S) (res ctrl.Result, done bool, err error)
	// storePlan stores the write the plan asks for, planned again on the
	// object as stored; stored: a write happened.
	storePlan(ctx context.Context, now time.Time) (stored bool, err error)
	// admit takes the provider's token for s's call; without it the
	// reconcile ends with res.
	admit(ctx context.Context, s S) (res ctrl.Result, ok bool)
	// moot reports that s's call is no longer needed (the object was seen
	// settled meanwhile); the loop plans again.
	moot(ctx context.Context, s S) bool
	// call makes s's provider call and returns its answer.
	call(ctx context.Context, s S) answer[S, C]
	// storeAnswer stores the core's decision on an answer.
	storeAnswer(ctx context.Context, u answer[S, C]) error
}

// pass is what one reconcile knows and has done, whatever the kind.
type pass struct {
	key    types.NamespacedName
	uid    string
	reader client.Reader // the API server, not the cache
	clock  clock.PassiveClock
	// entry is the provider's gateway entry; nil when it cannot be called.
	entry *gateway.Entry
	// unusable, when set, is why entry is nil, said when a call waits for it.
	unusable error
	// keptIsWrite: storing an answer kept from an earlier reconcile counts
	// as this reconcile's write (a Refund's does, a Payment's does not).
	keptIsWrite bool
	// wrote: this reconcile stored something. called: it made its provider
	// call. fresh: it read the object from the API server before a create
	// or look-up.
	wrote, called, fresh bool
}

func (x *pass) state() *pass { return x }

// drive runs one reconcile: the answer kept from an earlier one first, then
// the kind's plan, step after step, until it has nothing to do now.
func drive[T client.Object, S step, C any](ctx context.Context, k kind[T, S, C], kept *unstoredAnswers[S, C]) (ctrl.Result, error) {
	if done, err := storeKept(ctx, k, kept); done || err != nil {
		return ctrl.Result{}, err
	}
	x := k.state()
	for {
		now := x.clock.Now()
		s, err := k.plan(ctx, now)
		if err != nil {
			return ctrl.Result{}, err
		}
		var (
			res  ctrl.Result
			done bool
		)
		switch action, at := s.Next(); action {
		case payment.Nothing:
			release(x.entry, x.uid)
			if !k.object().GetDeletionTimestamp().IsZero() {
				// Deleted and now settled (or waiting for a human): let it go,
				// or say again what it waits for.
				_, err := k.finalize(ctx)
				return ctrl.Result{}, err
			}
			return ctrl.Result{}, nil
		case payment.Wait:
			release(x.entry, x.uid)
			return requeueAt(at, now, x.wrote), nil
		case payment.Write:
			res, done, err = write(ctx, k, s, now)
		default:
			res, done, err = callDue(ctx, k, s, kept, now)
		}
		if done || err != nil {
			return res, err
		}
	}
}

// storeKept stores an answer whose write failed before anything else: the
// provider is not asked again for what it already said. done: the
// reconcile has nothing more to do (the object was replaced).
func storeKept[T client.Object, S step, C any](ctx context.Context, k kind[T, S, C], kept *unstoredAnswers[S, C]) (done bool, err error) {
	x := k.state()
	u, ok := kept.get(x.uid, x.clock.Now())
	if !ok {
		return false, nil
	}
	// Decided on the object as the API server has it: the cache may not
	// hold the marker stored before the call yet.
	if err := x.reader.Get(ctx, x.key, k.object()); err != nil {
		return true, client.IgnoreNotFound(err)
	}
	if string(k.object().GetUID()) != x.uid {
		kept.drop(x.uid)
		return true, nil // replaced: the new object gets its own reconcile
	}
	if err := k.storeAnswer(ctx, u); err != nil {
		return true, err
	}
	kept.drop(x.uid)
	if x.keptIsWrite {
		x.wrote = true
	}
	return false, nil
}

// write stores what the plan decided.
func write[T client.Object, S step, C any](ctx context.Context, k kind[T, S, C], s S, now time.Time) (ctrl.Result, bool, error) {
	x := k.state()
	if res, done, err := k.hold(ctx, s); done || err != nil {
		return res, true, err
	}
	stored, err := k.storePlan(ctx, now)
	if err != nil {
		return ctrl.Result{}, true, err
	}
	if !stored {
		// The plan wanted a write that the fresh state no longer needs;
		// planning again on it cannot loop.
		return requeueAt(now.Add(minIdleRequeue), now, x.wrote), true, nil
	}
	x.wrote = true
	return ctrl.Result{}, false, nil
}

// callDue makes the provider call the plan asked for, at most one per
// reconcile, and stores the core's decision on its answer; an answer whose
// write fails is kept for the next reconcile.
func callDue[T client.Object, S step, C any](ctx context.Context, k kind[T, S, C], s S, kept *unstoredAnswers[S, C], now time.Time) (ctrl.Result, bool, error) {
	x := k.state()
	if x.called {
		return requeueAt(now, now, x.wrote), true, nil
	}
	if x.entry == nil {
		if x.unusable != nil {
			log.FromContext(ctx).Info("provider not usable; waiting", "reason", x.unusable.Error())
		}
		return ctrl.Result{RequeueAfter: providerRetry}, true, nil
	}
	if action, _ := s.Next(); (action == payment.Create || action == payment.Lookup) && !x.wrote && !x.fresh {
		// A create may already have gone out, or been recorded by a write
		// the cache has not caught up with: decide from the API server.
		if again, done, err := readFresh(ctx, k); again || done || err != nil {
			return ctrl.Result{}, done, err
		}
	}
	if res, ok := k.admit(ctx, s); !ok {
		return res, true, nil
	}
	if k.moot(ctx, s) {
		return ctrl.Result{}, false, nil
	}
	u := k.call(ctx, s)
	x.called = true
	if err := k.storeAnswer(ctx, u); err != nil {
		// Keep the answer: the next attempt (after the controller's
		// per-object backoff) stores it without calling again.
		kept.put(x.uid, u)
		return ctrl.Result{}, true, err
	}
	x.wrote = true
	return ctrl.Result{}, false, nil
}

// readFresh reads the object from the API server. done: it was deleted, or
// created again under the same name (the new object gets its own
// reconcile). again: the API server has a newer copy, which the kind takes:
// plan again on it.
func readFresh[T client.Object, S step, C any](ctx context.Context, k kind[T, S, C]) (again, done bool, err error) {
	x := k.state()
	x.fresh = true
	obj := k.object()
	latest, err := readLatest(ctx, x.reader, x.key, obj)
	if err != nil {
		return false, true, client.IgnoreNotFound(err)
	}
	if latest.GetUID() != obj.GetUID() {
		return false, true, nil
	}
	if latest.GetResourceVersion() != obj.GetResourceVersion() {
		k.replace(latest)
		return true, false, nil
	}
	return false, false, nil
}

// readLatest reads the object key names from reader (the API server) into
// a new object of cached's type.
func readLatest[T client.Object](ctx context.Context, reader client.Reader, key types.NamespacedName, cached T) (T, error) {
	latest := reflect.New(reflect.TypeOf(cached).Elem()).Interface().(T)
	return latest, reader.Get(ctx, key, latest)
}

// readCurrent reads the object key names into obj as a reconcile starts
// from it: the cache's copy, or the API server's (reader) while that copy
// may be older than the reconciler's own last write of it (current). The
// write waited for is asked before the cache is read: its watch event,
// arriving in between, cannot hide an older copy. done: there is nothing
// to reconcile (not found, or read on a deleted object's copy: its
// successor gets its own reconcile).
func readCurrent[T client.Object](ctx context.Context, cache, reader client.Reader, own *ownWrites, key types.NamespacedName, obj T) (_ T, fresh, done bool, err error) {
	written := own.pending(key)
	if err := cache.Get(ctx, key, obj); err != nil {
		return obj, false, true, client.IgnoreNotFound(err)
	}
	return current(ctx, reader, own, written, key, obj)
}

// current is the copy of an object a reconcile starts from: the cached
// one, unless it may be older than w, the reconciler's last write of the
// object not delivered to the cache yet (ownWrites.pending, asked before
// the cache was read; nil: none), then the API server's. A reconcile
// requeued right after a write (the next call of a step, at most one per
// reconcile) can run before that write reaches the cache; planned on the
// older copy, it would ask the provider again what it was just told, or
// take a settled object for an open one. Costs one read, only while the
// cache lags. fresh: the copy is the API server's. done: the object is
// gone, or another object has its name (it gets its own reconcile): the
// reconcile ends.
func current[T client.Object](ctx context.Context, reader client.Reader, own *ownWrites, w *lastWrite, key types.NamespacedName, cached T) (obj T, fresh, done bool, err error) {
	if w == nil || !w.behind(cached.GetUID(), cached.GetResourceVersion()) {
		if w != nil && w.uid == cached.GetUID() {
			own.caughtUp(*w) // the cache holds the write (its event may not come: a closing write)
		}
		return cached, false, false, nil
	}
	latest, err := readLatest(ctx, reader, key, cached)
	switch {
	case apierrors.IsNotFound(err):
		own.caughtUp(*w)
		return cached, false, true, nil
	case err != nil:
		return cached, false, false, err
	case latest.GetUID() != cached.GetUID():
		own.caughtUp(*w)
		return cached, false, true, nil
	case latest.GetResourceVersion() == cached.GetResourceVersion():
		// The cache holds the newest copy (written by someone else after
		// this reconciler).
		own.caughtUp(*w)
	}
	return latest, true, false, nil
}
