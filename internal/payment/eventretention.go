package payment

import (
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// EventExpiresAt is when a WebhookEvent is past its provider's
// retention.webhookEvents and may be deleted; prov is nil when the provider
// is gone, and the default retention applies. The clock starts at the API
// server's creation time, not at receivedAt: retention must not depend on
// the clock of whichever receiver replica stored the event.
func EventExpiresAt(evt *v1alpha1.WebhookEvent, prov *v1alpha1.PaymentProvider) time.Time {
	retention := v1alpha1.DefaultWebhookRetention
	if prov != nil {
		retention = prov.Spec.WebhookEventRetention()
	}
	return evt.CreationTimestamp.Add(retention)
}
