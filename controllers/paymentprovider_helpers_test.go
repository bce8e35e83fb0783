package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// This file holds the fixtures of the safety-net suites (provider controller,
// sweep, backfill, retention): a manager wired like the manager main with the
// controllers a test picks, an event log that keeps the object's name, and
// payments created at paysim directly and tracked in the cluster.

// eventLog is an events.EventRecorder that remembers which object each event
// was about.
type eventLog struct {
	mu     sync.Mutex
	events []recordedEvent
}

type recordedEvent struct {
	name, typ, reason, message string
}

func (l *eventLog) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	name := ""
	if o, ok := regarding.(metav1.Object); ok {
		name = o.GetName()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, recordedEvent{name: name, typ: eventtype, reason: reason, message: fmt.Sprintf(note, args...)})
}

// about returns the events with reason about the named object.
func (l *eventLog) about(name, reason string) []recordedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recordedEvent
	for _, e := range l.events {
		if e.name == name && e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func (l *eventLog) all() []recordedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]recordedEvent(nil), l.events...)
}

func (l *eventLog) withReason(reason string) []recordedEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recordedEvent
	for _, e := range l.events {
		if e.reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// netsOptions picks the controllers of a safety-net manager.
type netsOptions struct {
	payments  bool // the Payment reconciler with its own watches
	processor bool // the inbox processor
	providers bool // the PaymentProvider controller
	sweep     bool
	backfill  bool
	retention bool
	// sweepConsumer, when set, builds the only consumer of the sweep's
	// source from the manager's Payment reconciler: a controller fed by
	// nothing else, so whatever it sees came from the sweep.
	sweepConsumer func(*controllers.PaymentReconciler) reconcile.Reconciler
	// wrap wraps the manager's client for the controllers' writes.
	wrap  func(client.Client) client.Client
	clock clock.PassiveClock
	// httpClient, when set, carries every provider call (to count them).
	httpClient *http.Client
}

type netsManager struct {
	mgr      ctrl.Manager
	events   *eventLog
	gateway  *gateway.Gateway
	sweep    *controllers.Sweep
	backfill *controllers.Backfill
	payments *controllers.PaymentReconciler
	stop     func()
}

// startNets runs a manager over ns with the chosen controllers, wired as the
// manager main wires them, until the test ends.
func startNets(t *testing.T, ns string, o netsOptions) *netsManager {
	t.Helper()
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cacheFor(ns),
		Controller:             ctrlConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	writer := mgr.GetClient()
	if o.wrap != nil {
		writer = o.wrap(writer)
	}
	provEvents := &controllers.ProviderEvents{}
	n := &netsManager{mgr: mgr, events: &eventLog{}}
	n.gateway = &gateway.Gateway{
		Reader: mgr.GetClient(), Status: statuswriter.Writer{Client: writer, APIReader: mgr.GetAPIReader()},
		Recorder: n.events, Clock: o.clock, Notify: provEvents.Notify, HTTPClient: o.httpClient,
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	must(inbox.SetupIndexes(ctx, mgr.GetFieldIndexer()))
	n.payments = &controllers.PaymentReconciler{
		Client: writer, APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: n.events, Clock: o.clock, Gateway: n.gateway, Events: provEvents,
	}
	if o.payments {
		must(n.payments.SetupWithManager(mgr))
	}
	if o.processor {
		must((&controllers.WebhookEventReconciler{
			Client: writer, APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: n.events,
			Clock: o.clock, Gateway: n.gateway, PendingGrace: 200 * time.Millisecond,
		}).SetupWithManager(mgr))
	}
	if o.providers {
		must((&controllers.PaymentProviderReconciler{
			Client: writer, APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: n.events,
			Clock: o.clock, Gateway: n.gateway, Events: provEvents,
		}).SetupWithManager(mgr))
	}
	if o.sweep || o.sweepConsumer != nil {
		n.sweep = &controllers.Sweep{Client: mgr.GetClient(), Recorder: n.events, Clock: o.clock}
		must(n.sweep.SetupWithManager(mgr))
	}
	if o.sweepConsumer != nil {
		must(ctrl.NewControllerManagedBy(mgr).Named("sweep-consumer").
			WatchesRawSource(n.sweep.Source()).WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
			Complete(o.sweepConsumer(n.payments)))
	}
	n.backfill = &controllers.Backfill{
		Client: writer, Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(),
		Recorder: n.events, Clock: o.clock, Gateway: n.gateway,
	}
	if o.backfill {
		must(n.backfill.SetupWithManager(mgr))
	}
	if o.retention {
		must((&controllers.Retention{Client: writer, APIReader: mgr.GetAPIReader(), Recorder: n.events, Clock: o.clock}).SetupWithManager(mgr))
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(n.stop)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return n
}

// waitCached waits until the manager's cache holds obj at least as new as
// the given object (by resourceVersion presence).
func (n *netsManager) waitCached(t *testing.T, obj client.Object) {
	t.Helper()
	eventually(t, 10*time.Second, "cache has "+obj.GetName(), func() bool {
		fresh := obj.DeepCopyObject().(client.Object)
		return n.mgr.GetClient().Get(context.Background(), client.ObjectKeyFromObject(obj), fresh) == nil
	})
}

// netsProvider creates a PaymentProvider of type typ against the simulator,
// with its credentials Secret, after letting mutate shape the spec.
func netsProvider(t *testing.T, ns, name string, s *sim, typ v1alpha1.ProviderType, mutate func(*v1alpha1.PaymentProviderSpec)) *v1alpha1.PaymentProvider {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-credentials"},
		StringData: map[string]string{"apiKey": "sk_test", "clientID": "client", "clientSecret": "secret", "token": "tok"}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	url := "http://paysim.invalid/" + string(typ)
	if s != nil {
		url = s.URL + "/" + string(typ)
	}
	jitter := int32(0)
	p := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: typ, APIURL: url,
			CredentialsSecretRef: v1alpha1.SecretReference{Name: secret.Name},
			// One long step: no status query happens during a test, so only
			// the channel under test can settle a payment.
			StatusQuery: v1alpha1.StatusQueryConfig{Schedule: durations([]string{"1h"}), Jitter: &jitter, QPS: i32(100), Burst: i32(100)},
		},
	}
	if mutate != nil {
		mutate(&p.Spec)
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// simCreate creates a payment at the simulator through the real adapter, as
// a checkout page would, and returns the provider's id.
func simCreate(t *testing.T, s *sim, typ v1alpha1.ProviderType, ref string, outcome paysim.Outcome) string {
	t.Helper()
	adapter, err := providers.New(string(typ), provider.Config{
		Name: "test/" + string(typ), APIURL: s.URL + "/" + string(typ),
		Credentials: map[string][]byte{"apiKey": []byte("sk_test"), "token": []byte("tok"), "clientID": []byte("c"), "clientSecret": []byte("s")},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := adapter.Create(context.Background(), provider.CreateRequest{
		IdempotencyKey: "key-" + ref, MerchantReference: ref, Amount: 1999, Currency: "USD",
		Metadata: map[string]string{paysim.MetaOutcome: string(outcome), paysim.MetaAfter: "0s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return got.ID
}

// trackedPayment creates a payment at the simulator and a Payment tracking it.
func trackedPayment(t *testing.T, s *sim, prov *v1alpha1.PaymentProvider, name string, outcome paysim.Outcome) *v1alpha1.Payment {
	t.Helper()
	ref := prov.Namespace + "." + name
	id := simCreate(t, s, prov.Spec.Type, ref, outcome)
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: prov.Namespace, Name: name},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:       v1alpha1.LocalObjectReference{Name: prov.Name},
			Amount:            v1alpha1.Amount{Value: 1999, Currency: "USD"},
			MerchantReference: ref,
			ProviderPaymentID: id,
		},
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// simEventFor waits for the simulator's event about a provider payment id.
func simEventFor(t *testing.T, s *sim, typ v1alpha1.ProviderType, paymentID string) paysim.EventRecord {
	t.Helper()
	var found paysim.EventRecord
	eventually(t, 10*time.Second, "simulator event of "+paymentID, func() bool {
		for _, e := range s.Events(string(typ)) {
			if e.PaymentID == paymentID {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

func webhookEvents(t *testing.T, ns string) []v1alpha1.WebhookEvent {
	t.Helper()
	var l v1alpha1.WebhookEventList
	if err := env.Client.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func getProvider(t *testing.T, ns, name string) *v1alpha1.PaymentProvider {
	t.Helper()
	p := &v1alpha1.PaymentProvider{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// eventTransitions are the history entries a payment recorded for eventID.
func eventTransitions(p *v1alpha1.Payment, eventID string) []v1alpha1.HistoryEntry {
	var out []v1alpha1.HistoryEntry
	for _, h := range p.Status.History {
		if h.EventID == eventID {
			out = append(out, h)
		}
	}
	return out
}

// setStatus overwrites a payment's status, as if a writer had stored it.
func setStatus(t *testing.T, p *v1alpha1.Payment, mutate func(*v1alpha1.PaymentStatus)) *v1alpha1.Payment {
	t.Helper()
	ctx := context.Background()
	for {
		fresh := &v1alpha1.Payment{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
			t.Fatal(err)
		}
		mutate(&fresh.Status)
		err := env.Client.Status().Update(ctx, fresh)
		if err == nil {
			return fresh
		}
		if !strings.Contains(err.Error(), "the object has been modified") {
			t.Fatal(err)
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

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
