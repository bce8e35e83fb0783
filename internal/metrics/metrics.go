// Package metrics defines paywarden's Prometheus metrics (SPEC §8). The
// manager registers them with controller-runtime's registry and the webhook
// receiver with its own; both processes count transitions the same way
// because both run the same state machine.
//
// Every per-provider metric carries the provider's namespace as well as its
// name: providers are namespaced, and two tenants' "kukopay" must not add up
// into one series.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Transitions counts applied phase changes, by every writer.
var Transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "paywarden_payment_transitions_total",
	Help: "Payment phase transitions applied, by provider (namespace, name), from and to phase, and observation source.",
}, []string{"namespace", "provider", "from", "to", "source"})

// RefundTransitions counts applied refund phase changes.
var RefundTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "paywarden_refund_transitions_total",
	Help: "Refund phase transitions applied, by namespace, from and to phase, and observation source.",
}, []string{"namespace", "from", "to", "source"})

// StatusQueries counts per-payment status queries by result (found,
// not_found, error, config_error, rejected, deferred_rate_limited,
// deferred_circuit_open, deferred_provider_config).
var StatusQueries = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "paywarden_status_queries_total",
	Help: "Status queries against providers, by provider (namespace, name) and result.",
}, []string{"namespace", "provider", "result"})

// ProviderRequestDuration measures provider API calls.
var ProviderRequestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "paywarden_provider_request_duration_seconds",
	Help:    "Duration of provider API calls, by provider (namespace, name) and operation.",
	Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
}, []string{"namespace", "provider", "op"})

// CircuitOpen is 1 while a provider's circuit breaker is open.
var CircuitOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "paywarden_circuit_open",
	Help: "1 while the provider's circuit breaker is open (or half-open), else 0, by provider (namespace, name).",
}, []string{"namespace", "provider"})

// PaymentsOverdue is set by the sweep: the payments of a provider whose status
// query is more than sweep.overdueAfter past due, as of its last sweep.
var PaymentsOverdue = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "paywarden_payments_overdue",
	Help: "Payments whose status query is more than the provider's sweep.overdueAfter past due, as of the provider's last sweep.",
}, []string{"namespace", "provider"})

// RegisterShared registers the metrics both processes update.
func RegisterShared(reg prometheus.Registerer) error {
	return register(reg, Transitions, RefundTransitions)
}

// RegisterManager registers the manager's own metrics.
func RegisterManager(reg prometheus.Registerer) error {
	return register(reg, StatusQueries, ProviderRequestDuration, CircuitOpen, PaymentsOverdue)
}

func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			if _, ok := err.(prometheus.AlreadyRegisteredError); ok {
				continue
			}
			return err
		}
	}
	return nil
}
