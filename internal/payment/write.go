package payment

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// Store runs decide on obj (a Payment or a Refund) and writes the status of
// the outcome it returns through the one status writer: optimistic
// concurrency, and after a conflict decide runs again on the object as
// freshly read from the API server. It returns the outcome that was stored
// (or found unchanged) and whether a write happened; obj holds the stored
// object afterwards. PaymentStatus and RefundStatus are written nowhere
// else.
func Store[T client.Object, O interface{ StoreIn(T) }](ctx context.Context, w statuswriter.Writer, obj T, decide func(T) O) (O, bool, error) {
	var out O
	wrote, err := statuswriter.Update(ctx, w, obj, func(obj T) error {
		out = decide(obj)
		out.StoreIn(obj)
		return nil
	})
	return out, wrote, err
}

// StoreRefund is Store for a Refund.
func StoreRefund(ctx context.Context, w statuswriter.Writer, r *v1alpha1.Refund, decide func(r *v1alpha1.Refund) RefundOutcome) (RefundOutcome, bool, error) {
	return Store(ctx, w, r, decide)
}

// StoreIn stores the outcome's status with status.closed as Closable says of
// it: every status write of a Payment keeps the mark true.
func (o Outcome) StoreIn(p *v1alpha1.Payment) {
	p.Status = o.Status
	p.Status.Closed = Closable(p)
}
func (o RefundOutcome) StoreIn(r *v1alpha1.Refund) { r.Status = o.Status }

// Next is what a Step asks of the loop that drives it: its action and, for
// Wait, when to look again.
func (s Step) Next() (Action, time.Time) { return s.Action, s.At }

// Next is Step.Next for a RefundStep.
func (s RefundStep) Next() (Action, time.Time) { return s.Action, s.At }
