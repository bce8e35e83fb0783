package payment

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/metrics"
)

// Record publishes what a stored state-machine result means to the outside:
// a Kubernetes Event per change (Warning for failures, Unknown, conflicts and
// reviews) and the transitions metric. Call it only after the status write
// succeeded, so nothing is announced that was not stored.
func Record(rec events.EventRecorder, p *v1alpha1.Payment, res Result, source v1alpha1.ObservationSource) {
	if res.Transition != nil {
		metrics.Transitions.WithLabelValues(p.Spec.ProviderRef.Name, string(res.Transition.From), string(res.Transition.To), string(source)).Inc()
	}
	if rec == nil {
		return
	}
	for _, e := range res.Events {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		rec.Eventf(p, nil, typ, e.Reason, string(source), "%s", e.Message)
	}
}
