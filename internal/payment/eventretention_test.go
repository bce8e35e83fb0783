package payment_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

func TestEventExpiresAt(t *testing.T) {
	created := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	evt := &v1alpha1.WebhookEvent{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
		// A receiver replica with a clock a day behind: not what counts.
		Spec: v1alpha1.WebhookEventSpec{ReceivedAt: metav1.NewTime(created.Add(-24 * time.Hour))},
	}
	kept := &v1alpha1.PaymentProvider{}
	kept.Spec.Retention.WebhookEvents = &metav1.Duration{Duration: 3 * time.Hour}
	for _, c := range []struct {
		name string
		prov *v1alpha1.PaymentProvider
		want time.Time
	}{
		{"the provider's retention, from the API server's creation time", kept, created.Add(3 * time.Hour)},
		{"a provider without a retention: the default", &v1alpha1.PaymentProvider{}, created.Add(v1alpha1.DefaultWebhookRetention)},
		{"the provider is gone: the default", nil, created.Add(v1alpha1.DefaultWebhookRetention)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := payment.EventExpiresAt(evt, c.prov); !got.Equal(c.want) {
				t.Errorf("expires at %s, want %s", got, c.want)
			}
		})
	}
}
