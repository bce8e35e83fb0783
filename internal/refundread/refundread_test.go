package refundread_test

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/refundread"
)

// marked is a Refund whose marker is only in its annotation.
func marked(t *testing.T, name string) *v1alpha1.Refund {
	t.Helper()
	at := metav1.NewTime(time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC))
	v, err := payment.RefundMarkerAnnotation(v1alpha1.RefundStatus{Phase: v1alpha1.RefundPending, CreateRequestedAt: &at, IdempotencyKey: "key-" + name})
	if err != nil {
		t.Fatal(err)
	}
	rf := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
	rf.UID = types.UID("uid-" + name)
	rf.Annotations = map[string]string{v1alpha1.AnnotationRefundMarker: v, v1alpha1.AnnotationMoneyUID: string(rf.UID)}
	return rf
}

func isFolded(rf *v1alpha1.Refund) bool {
	return rf.Status.CreateRequestedAt != nil && rf.Status.IdempotencyKey == "key-"+rf.Name
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Every read of a Refund through the Reader, one by name or a list, has
// its marker folded in; other objects are left alone.
func TestReaderFoldsTheMarker(t *testing.T) {
	ctx := context.Background()
	a, b := marked(t, "a"), marked(t, "b")
	c := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(a, b, &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "order"}}).Build()
	r := refundread.Reader{Reader: c}

	got := &v1alpha1.Refund{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(a), got); err != nil || !isFolded(got) {
		t.Errorf("Get: err %v, status %+v; want the marker folded in", err, got.Status)
	}
	var l v1alpha1.RefundList
	if err := r.List(ctx, &l, client.InNamespace("shop")); err != nil || len(l.Items) != 2 || !isFolded(&l.Items[0]) || !isFolded(&l.Items[1]) {
		t.Errorf("List: err %v, %d items %+v; want both folded", err, len(l.Items), l.Items)
	}
	if err := r.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "order"}, &v1alpha1.Payment{}); err != nil {
		t.Errorf("Get of a Payment: %v", err)
	}
}

// An error of the read underneath is returned as it is, nothing folded.
func TestReaderReturnsErrors(t *testing.T) {
	boom := errors.New("injected")
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme(t)).Build(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return boom
		},
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return boom },
	})
	r := refundread.Reader{Reader: c}
	if err := r.Get(context.Background(), client.ObjectKey{Name: "a"}, &v1alpha1.Refund{}); !errors.Is(err, boom) {
		t.Errorf("Get: %v, want the injected error", err)
	}
	if err := r.List(context.Background(), &v1alpha1.RefundList{}); !errors.Is(err, boom) {
		t.Errorf("List: %v, want the injected error", err)
	}
}

// The cache's transform runs the transform before it, then folds.
func TestTransformFoldsAfterTheOneBefore(t *testing.T) {
	rf := marked(t, "a")
	rf.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	strip := func(in any) (any, error) { in.(client.Object).SetManagedFields(nil); return in, nil }
	out, err := refundread.Transform(strip)(rf)
	got := out.(*v1alpha1.Refund)
	if err != nil || !isFolded(got) || got.ManagedFields != nil {
		t.Errorf("transform: err %v, status %+v, managed fields %v; want folded and stripped", err, got.Status, got.ManagedFields)
	}
	boom := errors.New("injected")
	if _, err := refundread.Transform(func(in any) (any, error) { return in, boom })(marked(t, "b")); !errors.Is(err, boom) {
		t.Errorf("transform: %v, want the error of the one before", err)
	}
	if out, err := refundread.Transform(nil)(marked(t, "c")); err != nil || !isFolded(out.(*v1alpha1.Refund)) {
		t.Errorf("transform without one before: err %v, %+v", err, out)
	}
}
