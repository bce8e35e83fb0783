// Package statuswriter is the one way paywarden writes the status subresource
// of any of its kinds (Payment, PaymentProvider, WebhookEvent): optimistic
// concurrency on the object's resourceVersion, a re-read from the API server
// after a 409 (never from a cache that may still hold the losing version), the
// caller's mutation re-run on the fresh object, and no request at all when the
// mutation changed nothing.
//
// The mutation must decide from the object it is given, never from what it
// saw before: after a conflict it runs again on state another writer stored.
// Decisions live in pure functions (internal/payment), so re-running them is
// always correct.
package statuswriter

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MaxAttempts bounds the writes of one Update; past it the caller retries later.
const MaxAttempts = 8

// ErrTooManyConflicts means every attempt lost an optimistic-concurrency race.
// Nothing was written; retry later.
var ErrTooManyConflicts = errors.New("status write kept conflicting")

// ErrReplaced means the object was deleted and created again under the same
// name while the write was in flight: the fresh read has another UID, and a
// decision made for the old object must not be stored on the new one.
var ErrReplaced = errors.New("object was replaced by a new one with the same name")

// Writer writes status for every kind.
type Writer struct {
	// Client writes the status subresource (the manager's or receiver's client).
	Client client.Client
	// APIReader re-reads after a conflict: the API server, not a cache.
	APIReader client.Reader
	// ConfirmUnchanged makes a mutation that changes nothing a decision
	// too: it is confirmed on the API server's copy, and run again on that
	// copy when it is newer than obj. Set it when obj may come from a cache
	// and "nothing to write" discards something (an event ignored as
	// stale, or as applying only after a phase the cache has not seen yet):
	// a discard writes nothing, so no conflict would ever correct it.
	ConfirmUnchanged bool
}

// Update runs mutate on obj and writes obj's status when the object changed,
// with obj's resourceVersion as the precondition. On a conflict it re-reads
// obj from the API server and runs mutate again. It reports whether a write
// happened; obj holds the stored (or unchanged) object afterwards. An error
// from mutate aborts without writing and is returned as is.
func Update[T client.Object](ctx context.Context, w Writer, obj T, mutate func(T) error) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	uid := obj.GetUID()
	kind := kindOf(obj)
	confirmed := !w.ConfirmUnchanged
	for attempt := 1; ; attempt++ {
		before := obj.DeepCopyObject()
		if err := mutate(obj); err != nil {
			restore(obj, before)
			return false, err
		}
		if equality.Semantic.DeepEqual(before, obj) {
			if confirmed {
				return false, nil
			}
			confirmed = true
			fresh := newLike(obj)
			if err := w.APIReader.Get(ctx, key, fresh); err != nil {
				return false, fmt.Errorf("confirm %s %s on the API server: %w", kind, key, err)
			}
			if uid != "" && fresh.GetUID() != uid {
				return false, fmt.Errorf("%s %s: %w", kind, key, ErrReplaced)
			}
			if fresh.GetResourceVersion() == obj.GetResourceVersion() {
				return false, nil
			}
			restore(obj, fresh)
			continue
		}
		err := w.Client.Status().Update(ctx, obj)
		if err == nil {
			return true, nil
		}
		restore(obj, before)
		if !apierrors.IsConflict(err) {
			return false, fmt.Errorf("write status of %s %s: %w", kind, key, err)
		}
		if attempt >= MaxAttempts {
			return false, fmt.Errorf("%s %s: %w after %d attempts", kind, key, ErrTooManyConflicts, attempt)
		}
		fresh := newLike(obj)
		if err := w.APIReader.Get(ctx, key, fresh); err != nil {
			return false, fmt.Errorf("re-read %s %s after a write conflict: %w", kind, key, err)
		}
		if uid != "" && fresh.GetUID() != uid {
			return false, fmt.Errorf("%s %s: %w", kind, key, ErrReplaced)
		}
		restore(obj, fresh)
		confirmed = true
	}
}

// newLike returns a new zero object of obj's concrete type.
func newLike[T client.Object](obj T) T {
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
}

// restore overwrites *obj with *from (both pointers to the same struct type).
func restore(obj client.Object, from any) {
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(from).Elem())
}

func kindOf(obj client.Object) string {
	return reflect.TypeOf(obj).Elem().Name()
}
