package webhookreceiver

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons of paywarden_webhooks_shed_total: requests answered 503 before any
// work because a bound was reached. Their paywarden_webhooks_total result is
// "unavailable".
const (
	shedNotReady      = "not_ready"      // caches not synced yet
	shedConcurrency   = "concurrency"    // --max-concurrent-requests reached
	shedProviderShare = "provider_share" // the provider holds its share of --max-concurrent-requests or --max-body-bytes-in-flight
	shedBodyBytes     = "body_bytes"     // --max-body-bytes-in-flight reached
	shedVerifyRate    = "verify_rate"    // provider's verification bucket empty
)

// Outcomes of paywarden_webhook_verify_api_total.
const (
	verifyCalled      = "called"
	verifyCached      = "cached"
	verifyRateLimited = "rate_limited"
)

var (
	inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paywarden_webhook_requests_in_flight",
		Help: "Webhook requests past their first body byte (bounded by --max-concurrent-requests).",
	})
	shed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paywarden_webhooks_shed_total",
		Help: "Webhook requests answered 503 because a receiver bound was reached, by reason (not_ready, concurrency, provider_share, verify_rate).",
	}, []string{"reason"})
	verifyAPI = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paywarden_webhook_verify_api_total",
		Help: "Signature verifications that need the provider's API, by provider and outcome (called, cached, rate_limited).",
	}, []string{"provider", "outcome"})
)

// RegisterMetrics registers the receiver's own metrics with reg (alongside
// metrics.RegisterWebhook).
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{inFlight, shed, verifyAPI} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}
