package controllers_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/paysim"
)

// TestSweepReenqueuesPaymentsWhoseRequeueWasLost: payments whose status query
// is long overdue and that nothing will reconcile (their requeue was lost) are
// found by the sweep, counted, reported in one Event on the provider, and
// handed to the payment controller, which settles them; then the metric
// drops to zero.
//
// The payment controller here is fed only by the sweep's source (no watches,
// no requeues of its own), and holds each request until the test has seen the
// metric, so what it reconciles was enqueued by the sweep.
func TestSweepReenqueuesPaymentsWhoseRequeueWasLost(t *testing.T) {
	t.Parallel()
	s := fixture.StartSim(t, paysim.Options{})
	ns := fixture.Namespace(t, env.Client, "pay")

	var mu sync.Mutex
	var consumed []string
	release := make(chan struct{})
	o := fixture.Run(controllers.ControllerSweep)
	o.Before = func(mgr ctrl.Manager, w *controllers.Wiring) error {
		// The only consumer of the sweep's source: a controller fed by
		// nothing else, so whatever it sees came from the sweep.
		return ctrl.NewControllerManagedBy(mgr).Named("sweep-consumer").
			WatchesRawSource(w.Sweep.Source()).WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				mu.Lock()
				consumed = append(consumed, req.Name)
				mu.Unlock()
				select {
				case <-release:
				case <-ctx.Done():
					return reconcile.Result{}, nil
				}
				return w.Payments.Reconcile(ctx, req)
			}))
	}
	m := fixture.StartManager(t, env, ns, o)
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "shop", Sim: s, Quiet: true, Spec: func(spec *v1alpha1.PaymentProviderSpec) {
		spec.Sweep = v1alpha1.SweepConfig{Interval: fixture.Duration("200ms"), OverdueAfter: fixture.Duration("1s")}
	}})

	now := time.Now()
	at := func(d time.Duration) *metav1.MicroTime { t := metav1.NewMicroTime(now.Add(d)); return &t }
	cases := []struct {
		name        string
		phase       v1alpha1.PaymentPhase
		next        *metav1.MicroTime
		wantOverdue bool
	}{
		{name: "lost-requeue", phase: v1alpha1.PhaseProcessing, next: at(-time.Hour), wantOverdue: true},
		{name: "unknown-still-scheduled", phase: v1alpha1.PhaseUnknown, next: at(-30 * time.Minute), wantOverdue: true},
		{name: "due-later", phase: v1alpha1.PhaseProcessing, next: at(time.Hour)},
		{name: "late-within-grace", phase: v1alpha1.PhasePending, next: at(30 * time.Second)},
		{name: "unknown-waiting-for-a-human", phase: v1alpha1.PhaseUnknown},
		{name: "settled", phase: v1alpha1.PhaseSucceeded, next: at(-time.Hour)},
	}
	ids := map[string]string{}
	for _, tc := range cases {
		p := fixture.TrackedPayment(t, env.Client, s, prov, tc.name, paysim.OutcomeSucceed)
		ids[tc.name] = p.Spec.ProviderPaymentID
		fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
			st.Phase, st.ProviderPaymentID = tc.phase, p.Spec.ProviderPaymentID
			st.Query = v1alpha1.QueryStatus{Attempts: 1, NextTime: tc.next}
		})
	}

	fixture.Eventually(t, 10*time.Second, "the sweep to count 2 overdue payments", func() bool { return overdue(t, ns, prov.Name) == 2 })
	// One Warning Event per provider and sweep, naming the count and the
	// payments (oldest first), instead of one per payment.
	// A sweep may have run between the test's two status writes and named
	// only the first; the sweep that counted both names both.
	fixture.Eventually(t, 5*time.Second, "an Overdue Warning naming 2 payments, oldest first", func() (bool, string) {
		events := m.Events.About(prov.Name, "Overdue")
		for _, e := range events {
			if e.Type == corev1.EventTypeWarning && strings.HasPrefix(e.Message, "2 payment(s) overdue") &&
				strings.Contains(e.Message, "lost-requeue, unknown-still-scheduled") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %+v", events)
	})
	for _, tc := range cases {
		if got := m.Events.About(tc.name, "Overdue"); len(got) > 0 {
			t.Errorf("%s got its own Overdue Event %q; the sweep reports per provider", tc.name, got[0].Message)
		}
	}
	fixture.Eventually(t, 10*time.Second, "the payment controller to receive both", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(consumed) >= 2
	})

	close(release)
	for _, tc := range cases {
		if tc.wantOverdue {
			fixture.WaitPhase(t, env.Client, &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}}, v1alpha1.PhaseSucceeded, 10*time.Second)
		}
	}
	fixture.Eventually(t, 10*time.Second, "the overdue metric to drop to zero", func() bool { return overdue(t, ns, prov.Name) == 0 })

	mu.Lock()
	got := map[string]bool{}
	for _, name := range consumed {
		got[name] = true
	}
	mu.Unlock()
	var names []string
	for name := range got {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) != 2 || !got["lost-requeue"] || !got["unknown-still-scheduled"] {
		t.Errorf("the sweep enqueued %v, want exactly lost-requeue and unknown-still-scheduled", names)
	}
	queries := s.Counters().QueriesByPayment
	for _, tc := range cases {
		if q := queries[ids[tc.name]]; !tc.wantOverdue && q != 0 {
			t.Errorf("%s was queried %d times; only overdue payments may be", tc.name, q)
		}
	}
}

// During a long outage every waiting payment becomes overdue at once: the
// sweep reports them in one Event per provider and sweep, naming the
// longest-waiting few, not one Event per payment.
func TestSweepReportsManyOverduePaymentsInOneEvent(t *testing.T) {
	t.Parallel()
	s := fixture.StartSim(t, paysim.Options{})
	ns := fixture.Namespace(t, env.Client, "pay")
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerSweep))
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "shop", Sim: s, Quiet: true, Spec: func(spec *v1alpha1.PaymentProviderSpec) {
		spec.Sweep = v1alpha1.SweepConfig{Interval: fixture.Duration("300ms"), OverdueAfter: fixture.Duration("1s")}
	}})
	now := time.Now()
	for i := range 12 {
		p := fixture.TrackedPayment(t, env.Client, s, prov, fmt.Sprintf("late-%02d", i), paysim.OutcomeProcessing)
		next := metav1.NewMicroTime(now.Add(-time.Hour + time.Duration(i)*time.Minute))
		fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
			st.Phase, st.ProviderPaymentID = v1alpha1.PhaseProcessing, p.Spec.ProviderPaymentID
			st.Query = v1alpha1.QueryStatus{Attempts: 1, NextTime: &next}
		})
	}
	fixture.Eventually(t, 10*time.Second, "the sweep to count 12 overdue payments", func() bool { return overdue(t, ns, prov.Name) == 12 })
	var last fixture.Event
	fixture.Eventually(t, 10*time.Second, "an Overdue Event naming 12 payments", func() bool {
		events := m.Events.About(prov.Name, "Overdue")
		if len(events) == 0 {
			return false
		}
		last = events[len(events)-1]
		return strings.HasPrefix(last.Message, "12 payment(s) overdue")
	})
	if !strings.Contains(last.Message, "late-00, late-01, late-02, late-03, late-04 and 7 more") {
		t.Errorf("Event %q does not name the five longest-waiting payments and the rest as a count", last.Message)
	}
	for i := range 12 {
		if got := m.Events.About(fmt.Sprintf("late-%02d", i), "Overdue"); len(got) > 0 {
			t.Fatalf("late-%02d got its own Overdue Event", i)
		}
	}
}

// overdue reads paywarden_payments_overdue for one provider.
func overdue(t *testing.T, ns, prov string) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := metrics.PaymentsOverdue.WithLabelValues(ns, prov).Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
