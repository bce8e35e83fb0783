package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Results of a webhook request, the values of the result label of
// paywarden_webhooks_total (SPEC §8). NotFound and MethodNotAllowed are not in
// the SPEC's list; they are counted so a provider pointed at a wrong URL shows
// up on a dashboard instead of only in the provider's own console.
const (
	WebhookAccepted         = "accepted"
	WebhookDuplicate        = "duplicate"
	WebhookIgnored          = "ignored"
	WebhookInvalidSignature = "invalid_signature"
	WebhookTooLarge         = "too_large"
	WebhookMalformed        = "malformed"
	WebhookUnavailable      = "unavailable"
	WebhookNotFound         = "not_found"
	WebhookMethodNotAllowed = "method_not_allowed"
)

// Webhooks counts webhook requests by provider (namespace, name) and result.
// For not_found both are empty: they came from the URL, and a scanner must
// not be able to create a time series per path it tries.
var Webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "paywarden_webhooks_total",
	Help: "Webhook requests received, by provider (namespace, name) and result (accepted, duplicate, ignored, invalid_signature, too_large, malformed, unavailable, not_found, method_not_allowed).",
}, []string{"namespace", "provider", "result"})

// WebhookAckDuration measures the time from the start of a webhook request to
// the answer, by result. The SPEC's budget is p99 < 100 ms at normal load.
var WebhookAckDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "paywarden_webhook_ack_duration_seconds",
	Help:    "Time to answer a webhook request, by result.",
	Buckets: []float64{.0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
}, []string{"result"})

// RegisterWebhook registers the webhook receiver's metrics and the shared ones
// (the receiver applies events through the state machine, so it counts
// transitions too).
func RegisterWebhook(reg prometheus.Registerer) error {
	if err := RegisterShared(reg); err != nil {
		return err
	}
	return register(reg, Webhooks, WebhookAckDuration)
}
