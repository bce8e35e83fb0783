package payment

import (
	"context"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// Store runs decide on p and writes the status it returns through the one
// status writer: optimistic concurrency, and after a conflict decide runs
// again on the payment as freshly read from the API server. It returns the
// outcome that was stored (or found unchanged) and whether a write happened;
// p holds the stored payment afterwards. PaymentStatus is written nowhere
// else.
func Store(ctx context.Context, w statuswriter.Writer, p *v1alpha1.Payment, decide func(p *v1alpha1.Payment) Outcome) (Outcome, bool, error) {
	var out Outcome
	wrote, err := statuswriter.Update(ctx, w, p, func(p *v1alpha1.Payment) error {
		out = decide(p)
		p.Status = out.Status
		return nil
	})
	return out, wrote, err
}

// StoreRefund is Store for a Refund: decide runs inside the one status
// writer, again on fresh state after a conflict. RefundStatus is written
// nowhere else.
func StoreRefund(ctx context.Context, w statuswriter.Writer, r *v1alpha1.Refund, decide func(r *v1alpha1.Refund) RefundOutcome) (RefundOutcome, bool, error) {
	var out RefundOutcome
	wrote, err := statuswriter.Update(ctx, w, r, func(r *v1alpha1.Refund) error {
		out = decide(r)
		r.Status = out.Status
		return nil
	})
	return out, wrote, err
}
