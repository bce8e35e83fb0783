package statuswriter_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// fakeWriter is a Writer over a fake API server holding stored, with the
// API reader's reads and the status writes counted; write, when set,
// answers the status writes instead of the fake.
func fakeWriter(t *testing.T, stored *v1alpha1.Payment, confirm bool, write func() error) (w statuswriter.Writer, reads, writes *int) {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(stored).WithStatusSubresource(&v1alpha1.Payment{}).Build()
	reads, writes = new(int), new(int)
	counted := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			*reads++
			return cl.Get(ctx, key, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			*writes++
			if write != nil {
				return write()
			}
			return cl.SubResource(sub).Update(ctx, obj, opts...)
		},
	})
	return statuswriter.Writer{Client: counted, APIReader: counted, ConfirmUnchanged: confirm}, reads, writes
}

func stored(uid string, phase v1alpha1.PaymentPhase) *v1alpha1.Payment {
	return &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "order", UID: k8stypes.UID(uid)}, Status: v1alpha1.PaymentStatus{Phase: phase}}
}

// toProcessing moves a payment to Processing; on one that is, it changes
// nothing.
func toProcessing(p *v1alpha1.Payment) error {
	p.Status.Phase = v1alpha1.PhaseProcessing
	return nil
}

// The rules of Update that a lost or misplaced write would break.
func TestUpdateRules(t *testing.T) {
	ctx := context.Background()

	t.Run("nothing to write is never confirmed on another object of that name", func(t *testing.T) {
		w, _, writes := fakeWriter(t, stored("new-uid", v1alpha1.PhaseProcessing), true, nil)
		cached := stored("old-uid", v1alpha1.PhaseProcessing)
		calls := 0
		_, err := statuswriter.Update(ctx, w, cached, func(p *v1alpha1.Payment) error { calls++; return toProcessing(p) })
		if !errors.Is(err, statuswriter.ErrReplaced) || calls != 1 || *writes != 0 {
			t.Errorf("err %v after %d decisions and %d writes; want ErrReplaced, the old object's decision never run on the new one", err, calls, *writes)
		}
	})

	t.Run("after a conflict the copy is the API server's: nothing to write needs no second read", func(t *testing.T) {
		w, reads, writes := fakeWriter(t, stored("uid", v1alpha1.PhaseProcessing), true, nil)
		cached := stored("uid", "")
		cached.ResourceVersion = "1" // older than the stored one
		wrote, err := statuswriter.Update(ctx, w, cached, toProcessing)
		if wrote || err != nil || *writes != 1 || *reads != 1 {
			t.Errorf("wrote %v, err %v, %d writes, %d reads; want the conflict's one re-read and nothing more", wrote, err, *writes, *reads)
		}
	})

	t.Run("a decision that fails leaves the object as it was", func(t *testing.T) {
		w, _, writes := fakeWriter(t, stored("uid", ""), false, nil)
		p := stored("uid", "")
		before := p.DeepCopy()
		boom := errors.New("boom")
		_, err := statuswriter.Update(ctx, w, p, func(p *v1alpha1.Payment) error { p.Status.Phase = v1alpha1.PhaseFailed; return boom })
		if !errors.Is(err, boom) || *writes != 0 || !equality.Semantic.DeepEqual(p, before) {
			t.Errorf("err %v, %d writes, object %s; want the error, nothing written, the object unchanged", err, *writes, p.Status.Phase)
		}
	})

	t.Run("a write that fails leaves the object as it was", func(t *testing.T) {
		w, _, _ := fakeWriter(t, stored("uid", ""), false, func() error {
			return apierrors.NewInternalError(errors.New("etcd is away"))
		})
		p := stored("uid", "")
		before := p.DeepCopy()
		if _, err := statuswriter.Update(ctx, w, p, toProcessing); err == nil || !equality.Semantic.DeepEqual(p, before) {
			t.Errorf("err %v, object %s; want the error and the object as it was stored", err, p.Status.Phase)
		}
	})

	t.Run("a stale copy with nothing to write is confirmed with one read: the fresh copy's decision needs no second", func(t *testing.T) {
		w, reads, writes := fakeWriter(t, stored("uid", v1alpha1.PhaseProcessing), true, nil)
		cached := stored("uid", v1alpha1.PhaseProcessing)
		cached.ResourceVersion = "1" // older than the stored one
		calls := 0
		wrote, err := statuswriter.Update(ctx, w, cached, func(p *v1alpha1.Payment) error { calls++; return toProcessing(p) })
		if wrote || err != nil || *writes != 0 || *reads != 1 || calls != 2 {
			t.Errorf("wrote %v, err %v, %d writes, %d reads, %d decisions; want one read and the decision run again on its copy", wrote, err, *writes, *reads, calls)
		}
	})

	t.Run("a write that conflicts seven times in a row still lands", func(t *testing.T) {
		conflicts := 0
		w, _, writes := fakeWriter(t, stored("uid", ""), false, func() error {
			if conflicts < 7 {
				conflicts++
				return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "payments"}, "order", errors.New("changed"))
			}
			return nil
		})
		if wrote, err := statuswriter.Update(ctx, w, stored("uid", ""), toProcessing); !wrote || err != nil || *writes != 8 {
			t.Errorf("wrote %v, err %v after %d writes; want written on the 8th", wrote, err, *writes)
		}
	})

	t.Run("a write that keeps conflicting is tried MaxAttempts times", func(t *testing.T) {
		w, _, writes := fakeWriter(t, stored("uid", ""), false, func() error {
			return apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "payments"}, "order", errors.New("changed"))
		})
		_, err := statuswriter.Update(ctx, w, stored("uid", ""), toProcessing)
		if !errors.Is(err, statuswriter.ErrTooManyConflicts) || *writes != statuswriter.MaxAttempts {
			t.Errorf("err %v after %d writes; want ErrTooManyConflicts after %d", err, *writes, statuswriter.MaxAttempts)
		}
	})
}
