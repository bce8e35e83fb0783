// Package refundread reads Refunds as paywarden decides on them: with the
// marker of a first refund call, written in the Refund's annotation by the
// patch that holds it, folded into the status until the status has it
// (payment.FoldRefundMarker). Every process that reads Refunds (the manager,
// the receiver, the console) reads them through it: the cache's transform
// (Transform) and the API reader (Reader).
package refundread

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// Fold folds the marker into obj when it is a Refund or a list of them.
func Fold(obj any) {
	switch o := obj.(type) {
	case *v1alpha1.Refund:
		payment.FoldRefundMarker(o)
	case *v1alpha1.RefundList:
		for i := range o.Items {
			payment.FoldRefundMarker(&o.Items[i])
		}
	}
}

// Transform is a cache transform that folds the marker into each Refund
// after next (nil: none) has run.
func Transform(next toolscache.TransformFunc) toolscache.TransformFunc {
	return func(in any) (any, error) {
		if next != nil {
			var err error
			if in, err = next(in); err != nil {
				return in, err
			}
		}
		Fold(in)
		return in, nil
	}
}

// Reader reads through its Reader and folds the marker into the Refunds it
// returns.
type Reader struct{ client.Reader }

// Get reads key into obj.
func (r Reader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	Fold(obj)
	return nil
}

// List lists into list.
func (r Reader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	Fold(list)
	return nil
}
