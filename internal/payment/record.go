package payment

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/metrics"
)

// Record publishes what a stored outcome means to the outside: a Kubernetes
// Event per change (Warning for failures, Unknown, conflicts and reviews) and
// the transitions metric. Call it only after the status write succeeded, so
// nothing is announced that was not stored.
func Record(rec events.EventRecorder, p *v1alpha1.Payment, out Outcome) {
	for _, res := range out.Results {
		if res.Transition != nil {
			metrics.Transitions.WithLabelValues(p.Namespace, p.Spec.ProviderRef.Name, string(res.Transition.From), string(res.Transition.To), string(res.Source)).Inc()
		}
	}
	if rec == nil {
		return
	}
	emit := func(e Event, action string) {
		rec.Eventf(p, nil, e.EventType(), e.Reason, action, "%s", e.Message)
	}
	for _, res := range out.Results {
		for _, e := range res.Events {
			emit(e, string(res.Source))
		}
	}
	for _, e := range out.Events {
		emit(e, string(v1alpha1.SourceManual))
	}
}

// RecordRefund publishes a stored refund outcome: an Event per change on the
// Refund (and, for a settled refund, on its Payment, so `kubectl describe
// payment` lists it) and the refund transitions metric.
func RecordRefund(rec events.EventRecorder, r *v1alpha1.Refund, p *v1alpha1.Payment, out RefundOutcome) {
	for _, res := range out.Results {
		if res.Transition != nil {
			metrics.RefundTransitions.WithLabelValues(r.Namespace, string(res.Transition.From), string(res.Transition.To), string(res.Source)).Inc()
		}
	}
	if rec == nil {
		return
	}
	emit := func(obj runtime.Object, e Event, action string) {
		rec.Eventf(obj, nil, e.EventType(), e.Reason, action, "%s", e.Message)
	}
	for _, res := range out.Results {
		for _, e := range res.Events {
			emit(r, e, string(res.Source))
			if p != nil && res.Transition != nil {
				emit(p, Event{Warning: e.Warning, Reason: e.Reason, Message: "Refund " + r.Name + ": " + e.Message}, string(res.Source))
			}
		}
	}
	for _, e := range out.Events {
		emit(r, e, string(v1alpha1.SourceManual))
	}
}

// EventType is the Kubernetes Event type of e.
func (e Event) EventType() string {
	if e.Warning {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}
