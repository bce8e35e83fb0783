package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// The create request carries the create marker's time as stored (to the second), so
// the adapters compute every time-dependent parameter from it and a retry of the
// create is the same request whenever it is sent.
func TestCreateRequestCarriesTheCreateMarkersTime(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	marked := metav1.NewTime(created.Add(3 * time.Second))
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", CreationTimestamp: metav1.NewTime(created)},
		Spec: v1alpha1.PaymentSpec{
			Amount:       v1alpha1.Amount{Value: 1000, Currency: "EUR"},
			ExpiresAfter: &metav1.Duration{Duration: 10 * time.Minute},
		},
		Status: v1alpha1.PaymentStatus{CreateRequestedAt: &marked},
	}
	req := createRequest(p)
	if !req.RequestedAt.Equal(marked.Time) {
		t.Fatalf("RequestedAt %s, want the marker %s", req.RequestedAt, marked.Time)
	}
	if !req.ExpiresAt.Equal(created.Add(10 * time.Minute)) {
		t.Fatalf("ExpiresAt %s", req.ExpiresAt)
	}
	if again := createRequest(p); !again.RequestedAt.Equal(req.RequestedAt) || !again.ExpiresAt.Equal(req.ExpiresAt) {
		t.Fatalf("two requests of one payment differ: %+v, %+v", req, again)
	}
}
