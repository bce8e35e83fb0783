package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/metrics"
)

// IndexPaymentScheduled indexes the Payments that wait for a status query
// (not final, query.nextTime set) by their provider's name. Final payments,
// the bulk of a long-running cluster, are not in it, so a sweep reads only
// the payments that can be overdue.
const IndexPaymentScheduled = "sweep.scheduledByProvider"

// defaultSweepBuffer is how many overdue payments can wait for the payment
// controller to pick them up before a sweep drops the rest (the next sweep
// finds them again).
const defaultSweepBuffer = 1024

// Sweep is the safety net for lost requeues (seed 000, SPEC §7): every
// sweep.interval it looks at each provider's payments that wait for a status
// query, and hands the ones whose query.nextTime lies more than
// sweep.overdueAfter in the past to the payment controller through Source.
// It reads only the informer cache (through IndexPaymentScheduled, without
// copying objects), so a tick costs no API calls.
//
// Overdue payments are also counted in paywarden_payments_overdue and
// reported in one Warning Event per provider and sweep (the count and the
// longest-waiting names): a lost requeue is a bug (or a provider outage long
// enough to defer queries past overdueAfter), and someone should know.
type Sweep struct {
	// Client reads Payments and PaymentProviders: the manager's cached client.
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// Buffer is the capacity of the channel behind Source (default 1024).
	Buffer int

	once sync.Once
	ch   chan event.TypedGenericEvent[*v1alpha1.Payment]
	src  source.Source

	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments;paymentproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (s *Sweep) init() {
	s.once.Do(func() {
		n := s.Buffer
		if n <= 0 {
			n = defaultSweepBuffer
		}
		s.ch = make(chan event.TypedGenericEvent[*v1alpha1.Payment], n)
		s.src = source.Channel(s.ch, &handler.TypedEnqueueRequestForObject[*v1alpha1.Payment]{})
		s.last = map[types.NamespacedName]time.Time{}
		if s.Clock == nil {
			s.Clock = clock.RealClock{}
		}
	})
}

// Source is where overdue payments come out: the payment controller watches
// it (builder.WatchesRawSource(sweep.Source())) and reconciles each payment
// it yields. Every call returns the same source.
func (s *Sweep) Source() source.Source {
	s.init()
	return s.src
}

// SetupWithManager registers the index and the per-provider sweep timer.
func (s *Sweep) SetupWithManager(mgr ctrl.Manager) error {
	s.init()
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Payment{}, IndexPaymentScheduled, scheduledKeys); err != nil {
		return fmt.Errorf("index scheduled payments: %w", err)
	}
	// Only spec changes (and creation) start a sweep early; status writes on
	// the provider (circuit, backfill cursor) would otherwise sweep on every
	// page the backfill writes.
	return ctrl.NewControllerManagedBy(mgr).
		Named("paymentprovider-sweep").
		For(&v1alpha1.PaymentProvider{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(s)
}

func scheduledKeys(o client.Object) []string {
	p, ok := o.(*v1alpha1.Payment)
	if !ok || p.Spec.ProviderRef.Name == "" || p.Status.Phase.IsFinal() || p.Status.Query.NextTime == nil {
		return nil
	}
	return []string{p.Spec.ProviderRef.Name}
}

// Reconcile sweeps one provider's payments when its interval has passed.
func (s *Sweep) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s.init()
	prov := &v1alpha1.PaymentProvider{}
	if err := s.Client.Get(ctx, req.NamespacedName, prov); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.PaymentsOverdue.DeleteLabelValues(req.Namespace, req.Name)
			s.mu.Lock()
			delete(s.last, req.NamespacedName)
			s.mu.Unlock()
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	interval, overdueAfter := prov.Spec.SweepTiming()
	now := s.Clock.Now()
	s.mu.Lock()
	last, swept := s.last[req.NamespacedName]
	s.mu.Unlock()
	if swept && now.Sub(last) < interval {
		// Woken early (a spec change): keep the cadence.
		return ctrl.Result{RequeueAfter: interval - now.Sub(last)}, nil
	}

	overdue, err := s.sweep(ctx, prov, now.Add(-overdueAfter), now)
	if err != nil {
		return ctrl.Result{}, err
	}
	metrics.PaymentsOverdue.WithLabelValues(prov.Namespace, prov.Name).Set(float64(overdue))
	s.mu.Lock()
	s.last[req.NamespacedName] = now
	s.mu.Unlock()
	if overdue > 0 {
		log.FromContext(ctx).Info("sweep found overdue payments", "provider", req.NamespacedName.String(), "overdue", overdue, "overdueAfter", overdueAfter)
	}
	return ctrl.Result{RequeueAfter: interval}, nil
}

// overdueNamed is how many overdue payments a sweep's Event names.
const overdueNamed = 5

// sweep enqueues the provider's payments whose query was due before cutoff,
// reports them in one Warning Event on the provider, and returns how many
// there were. One Event per sweep, not one per payment: during a long
// outage every waiting payment becomes overdue at once, and an Event per
// payment per sweep would flood the API server with Events nobody reads.
func (s *Sweep) sweep(ctx context.Context, prov *v1alpha1.PaymentProvider, cutoff, now time.Time) (int, error) {
	var list v1alpha1.PaymentList
	// The objects are the cache's own: read, never modified or retained.
	if err := s.Client.List(ctx, &list, client.InNamespace(prov.Namespace),
		client.MatchingFields{IndexPaymentScheduled: prov.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return 0, fmt.Errorf("list scheduled payments of provider %s/%s: %w", prov.Namespace, prov.Name, err)
	}
	type late struct {
		name string
		due  time.Time
	}
	var overdue []late
	dropped := 0
	for i := range list.Items {
		p := &list.Items[i]
		next := p.Status.Query.NextTime
		if p.Status.Phase.IsFinal() || next == nil || !next.Time.Before(cutoff) {
			continue
		}
		overdue = append(overdue, late{name: p.Name, due: next.Time})
		if !s.enqueue(&v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID}}) {
			dropped++
		}
	}
	if len(overdue) == 0 || s.Recorder == nil {
		return len(overdue), nil
	}
	// Oldest first: the names in the Event are the ones waiting longest.
	sort.Slice(overdue, func(i, j int) bool {
		if !overdue[i].due.Equal(overdue[j].due) {
			return overdue[i].due.Before(overdue[j].due)
		}
		return overdue[i].name < overdue[j].name
	})
	names := make([]string, 0, overdueNamed)
	for _, o := range overdue[:min(len(overdue), overdueNamed)] {
		names = append(names, o.name)
	}
	named := strings.Join(names, ", ")
	if more := len(overdue) - len(names); more > 0 {
		named += fmt.Sprintf(" and %d more", more)
	}
	note := "re-enqueued for a status query"
	if dropped > 0 {
		note += fmt.Sprintf("; %d could not be enqueued (the payment controller is behind), the next sweep tries again", dropped)
	}
	if st := prov.Status.Circuit.State; st == v1alpha1.CircuitOpen || st == v1alpha1.CircuitHalfOpen {
		note += "; the provider's circuit is " + string(st) + ", so queries may be deferred again"
	}
	oldest := overdue[0].due
	s.Recorder.Eventf(prov, nil, corev1.EventTypeWarning, "Overdue", "Sweep",
		"%d payment(s) overdue for a status query, the oldest due at %s (%s ago): %s; %s",
		len(overdue), oldest.UTC().Format(time.RFC3339), now.Sub(oldest).Round(time.Second), named, note)
	return len(overdue), nil
}

// enqueue hands a payment to the source without ever blocking the sweep.
func (s *Sweep) enqueue(p *v1alpha1.Payment) bool {
	select {
	case s.ch <- event.TypedGenericEvent[*v1alpha1.Payment]{Object: p}:
		return true
	default:
		return false
	}
}
