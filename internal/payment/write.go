package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// MaxWriteAttempts bounds how often UpdateStatus re-reads and retries after
// write conflicts before giving up with ErrTooManyConflicts.
const MaxWriteAttempts = 8

// ErrTooManyConflicts means every write attempt lost an optimistic-concurrency
// race; the caller should retry later (nothing was written).
var ErrTooManyConflicts = errors.New("status write kept conflicting")

// Mutate changes a payment's status in place, normally by running Apply on it.
// It is called again on freshly read state after every conflict, so it must
// decide from the payment it is given, never from what it saw before.
type Mutate func(p *v1alpha1.Payment) error

// Writer stores payment status with optimistic concurrency. Every writer of
// payment status (reconciler, webhook receiver, inbox processor) uses it.
type Writer struct {
	// Client writes the status subresource.
	Client client.Client
	// Reader re-reads a payment after a conflict. It should read from the API
	// server (manager.GetAPIReader), not a cache that may still be stale.
	Reader client.Reader
}

// UpdateStatus runs mutate on p and writes the status when it changed, using
// p's resourceVersion as the precondition. On a conflict it re-reads the
// payment and runs mutate again on the fresh state. It reports whether a
// write happened; p holds the stored object afterwards. An unchanged status
// is never written, so settled payments cost nothing on resync.
func (w Writer) UpdateStatus(ctx context.Context, p *v1alpha1.Payment, mutate Mutate) (bool, error) {
	key := client.ObjectKeyFromObject(p)
	for attempt := 1; ; attempt++ {
		before := p.Status.DeepCopy()
		if err := mutate(p); err != nil {
			p.Status = *before
			return false, err
		}
		if equality.Semantic.DeepEqual(before, &p.Status) {
			return false, nil
		}
		err := w.Client.Status().Update(ctx, p)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsConflict(err) {
			p.Status = *before
			return false, fmt.Errorf("write status of payment %s: %w", key, err)
		}
		if attempt >= MaxWriteAttempts {
			return false, fmt.Errorf("payment %s: %w after %d attempts", key, ErrTooManyConflicts, attempt)
		}
		// The fresh read comes from the API server, so the next attempt starts
		// from the state that won the race; no backoff is needed.
		fresh := &v1alpha1.Payment{}
		if err := w.Reader.Get(ctx, key, fresh); err != nil {
			return false, fmt.Errorf("re-read payment %s after conflict: %w", key, err)
		}
		*p = *fresh
	}
}

// ApplyObservation runs the state machine for one observation and stores the
// result through UpdateStatus. It returns the state machine's result for the
// state that was finally written (or found unchanged).
func (w Writer) ApplyObservation(ctx context.Context, p *v1alpha1.Payment, obs Observation, now func() time.Time) (Result, bool, error) {
	var res Result
	wrote, err := w.UpdateStatus(ctx, p, func(p *v1alpha1.Payment) error {
		res = Apply(p, obs, now())
		p.Status = res.Status
		return nil
	})
	return res, wrote, err
}
