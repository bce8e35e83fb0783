// Package gateway is the manager's way out to providers: it builds the adapter
// for a PaymentProvider from its spec and credentials Secret, and puts every
// call to one provider behind that provider's shared token bucket (served by
// priority: see Priority), circuit breaker and configuration check, with a
// duration metric per operation.
// Adapters decide what an answer means; the gateway decides whether a call
// may go out at all, and publishes the provider's health (status.circuit, the
// Degraded condition, the circuit metric and Events) when it changes.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// DefaultConfigProbe is how long calls to a provider wait after it refused
// paywarden's configuration (credentials, routes) before one probe call is
// let through. A changed PaymentProvider or credentials Secret ends the wait
// at once.
const DefaultConfigProbe = time.Minute

// Gateway caches one Entry per PaymentProvider. Safe for concurrent use.
type Gateway struct {
	// Reader reads credentials Secrets.
	Reader client.Reader
	// HTTPClient, when set, is used by every adapter (tests record traffic).
	HTTPClient *http.Client

	// Status, when its Client is set, publishes circuit changes onto the
	// PaymentProvider (status.circuit and the Degraded condition). Only the
	// manager publishes; the receiver's gateway leaves it empty.
	Status statuswriter.Writer
	// Recorder receives the CircuitOpen/CircuitClosed Events; may be nil.
	Recorder events.EventRecorder
	// Clock defaults to real time.
	Clock clock.PassiveClock
	// ConfigProbe overrides DefaultConfigProbe.
	ConfigProbe time.Duration
	// Notify, when set, is called with a provider's key whenever its
	// configuration problem appears or clears, so the PaymentProvider
	// controller can report it (Ready=False) without polling. It must not block.
	Notify func(types.NamespacedName)

	mu      sync.Mutex
	entries map[types.NamespacedName]*Entry
}

// Entry is one provider's adapter with its shared limits. An Entry is never
// changed once handed out except through its own methods; a config change
// makes a new one that carries over the limiter and breaker state (a config
// change must not reset an open circuit or refill the bucket), but not a
// configuration problem, which the new config may have fixed.
type Entry struct {
	Key      types.NamespacedName
	Provider provider.Provider
	Caps     provider.Capabilities
	// RemoteVerifier is the adapter when its VerifyWebhook asks the
	// provider's API, else nil: Provider measures API calls and so hides
	// what else the adapter implements.
	RemoteVerifier provider.RemoteVerifier
	Limiter        *rate.Limiter
	Breaker        *Breaker

	gw      *Gateway
	version string
	held    *reservations
	config  configState
}

// Deferral says why a call may not go out now.
type Deferral string

// Reasons a call is deferred; they are the suffix of the
// paywarden_status_queries_total result "deferred_<reason>".
const (
	DeferCircuitOpen Deferral = "circuit_open"
	DeferRateLimited Deferral = "rate_limited"
	DeferConfig      Deferral = "provider_config"
)

// Admission is the gateway's answer to "may this call go out now?".
type Admission struct {
	OK bool
	// Wait is how long to defer when not OK; the deferral consumes no
	// schedule attempt.
	Wait   time.Duration
	Reason Deferral
}

func (g *Gateway) now() time.Time {
	if g.Clock == nil {
		return time.Now()
	}
	return g.Clock.Now()
}

// For returns the entry of prov, rebuilding the adapter when the provider or
// its credentials changed.
func (g *Gateway) For(ctx context.Context, prov *v1alpha1.PaymentProvider) (*Entry, error) {
	key := types.NamespacedName{Namespace: prov.Namespace, Name: prov.Name}
	caps, ok := providers.Lookup(string(prov.Spec.Type))
	if !ok {
		return nil, fmt.Errorf("provider %s: unknown provider type %q (supported: %s)", key, prov.Spec.Type, strings.Join(providers.Types(), ", "))
	}
	secret := &corev1.Secret{}
	ref := types.NamespacedName{Namespace: prov.Namespace, Name: prov.Spec.CredentialsSecretRef.Name}
	if err := g.Reader.Get(ctx, ref, secret); err != nil {
		return nil, fmt.Errorf("provider %s: read credentials Secret %s: %w", key, ref.Name, err)
	}
	// Generation, not resourceVersion: status writes (circuit state, backfill
	// cursor) must not rebuild the adapter and drop its cached OAuth token.
	version := fmt.Sprintf("%d/%s", prov.Generation, secret.ResourceVersion)

	g.mu.Lock()
	e := g.entries[key]
	if e != nil && e.version == version {
		g.mu.Unlock()
		return e, nil
	}
	g.mu.Unlock()

	cfg := provider.Config{
		Name:        key.String(),
		APIURL:      strings.TrimSuffix(prov.Spec.APIURL, "/"),
		Credentials: secret.Data,
		WebhookID:   prov.Spec.Webhook.PayPalWebhookID,
		Timeout:     prov.Spec.QueryTimeout(),
		HTTPClient:  g.HTTPClient,
	}
	adapter, err := providers.New(string(prov.Spec.Type), cfg)
	if err != nil {
		return nil, err
	}
	qps, burst := prov.Spec.RateLimit()
	failures, openFor := prov.Spec.CircuitTiming()

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.entries == nil {
		g.entries = map[types.NamespacedName]*Entry{}
	}
	e = g.entries[key]
	if e != nil && e.version == version {
		return e, nil // built concurrently
	}
	next := &Entry{
		Key: key, Provider: instrumented{Provider: adapter, key: key}, Caps: caps,
		gw: g, version: version,
	}
	next.RemoteVerifier, _ = adapter.(provider.RemoteVerifier)
	if e == nil {
		next.Limiter = rate.NewLimiter(rate.Limit(qps), int(burst))
		next.Breaker = NewBreaker(failures, openFor)
		next.held = newReservations()
	} else {
		next.Limiter, next.Breaker, next.held = e.Limiter, e.Breaker, e.held
		next.Limiter.SetLimit(rate.Limit(qps))
		next.Limiter.SetBurst(int(burst))
		next.Breaker.Configure(failures, openFor)
		if e.config.problem() != "" && g.Notify != nil {
			// The new configuration may have fixed it: let the provider
			// controller re-check.
			defer g.Notify(key)
		}
	}
	g.entries[key] = next
	return next, nil
}

// Forget drops a deleted provider's entry.
func (g *Gateway) Forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.entries, key)
}

// ConfigProblem reports the configuration problem this entry's calls ran
// into (the provider answered 401/403, a redirect, a missing route); empty
// when there is none. A new entry (changed spec or credentials) starts
// without one.
func (e *Entry) ConfigProblem() string {
	return e.config.problem()
}

// Admit asks whether a call for key (a payment's or refund's UID; "" for a
// call nobody comes back for) of priority prio may go out now: not while the
// provider refuses paywarden's configuration (but for one probe now and
// then), not while its circuit is open, and only with a token from its bucket.
//
// A call held back by the bucket keeps its place: the token is reserved for
// it, and when it comes back at the returned Wait its call goes out. So a
// backlog costs about one reconcile per call, oldest first, instead of every
// waiting payment spinning for the next free token. A call never waits
// behind one of lower priority (see Priority).
func (e *Entry) Admit(key string, prio Priority, now time.Time) Admission {
	if wait, deferred := e.config.admit(now, e.gw.configProbe()); deferred {
		return Admission{Wait: wait, Reason: DeferConfig}
	}
	if ok, retryAt := e.Breaker.Allow(now); !ok {
		return Admission{Wait: retryAt.Sub(now), Reason: DeferCircuitOpen}
	}
	wait, ok := e.held.take(e.Limiter, key, prio, now)
	if ok {
		return Admission{OK: true}
	}
	// If the circuit or the configuration check let this call through as
	// its probe, hand the slot back.
	e.unprobe()
	return Admission{Wait: wait, Reason: DeferRateLimited}
}

// Forgo returns an admitted call that will not go out after all (the payment
// settled meanwhile, the write before it failed): its token is spent, but a
// half-open circuit or a refused configuration may let another probe through.
func (e *Entry) Forgo() {
	e.unprobe()
}

func (e *Entry) unprobe() {
	e.Breaker.Release()
	e.config.unprobe()
}

// Release gives back what Admit held for key when no call will go out for it
// (the payment was settled meanwhile).
func (e *Entry) Release(key string) {
	e.held.release(key, e.gw.now())
}

// Done records the outcome of an admitted call: the circuit breaker counts
// outages, and a refused configuration holds back further calls until it is
// fixed. State changes are published (metric, PaymentProvider status, Events).
func (e *Entry) Done(ctx context.Context, err error) {
	now := e.gw.now()
	configChanged := e.config.record(err, now, e.gw.configProbe())
	if configChanged && e.gw.Notify != nil {
		e.gw.Notify(e.Key)
	}
	if !e.Breaker.Record(err, now) {
		return
	}
	e.gw.publishCircuit(ctx, e.Key, e.Breaker.Status(), err, now)
}

func (g *Gateway) configProbe() time.Duration {
	if g.ConfigProbe > 0 {
		return g.ConfigProbe
	}
	return DefaultConfigProbe
}

// publishCircuit mirrors a breaker state change: the metric, the provider's
// status.circuit and Degraded condition, and an Event.
func (g *Gateway) publishCircuit(ctx context.Context, key types.NamespacedName, st v1alpha1.CircuitStatus, cause error, now time.Time) {
	open := 0.0
	if st.State != v1alpha1.CircuitClosed {
		open = 1
	}
	metrics.CircuitOpen.WithLabelValues(key.Namespace, key.Name).Set(open)
	if g.Status.Client == nil {
		return
	}
	prov := &v1alpha1.PaymentProvider{}
	if err := g.Status.Client.Get(ctx, key, prov); err != nil {
		log.FromContext(ctx).Error(err, "publish circuit state: read provider", "provider", key.String())
		return
	}
	_, err := statuswriter.Update(ctx, g.Status, prov, func(p *v1alpha1.PaymentProvider) error {
		p.Status.Circuit = st
		cond := metav1.Condition{
			Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "CircuitClosed",
			Message: "provider answers normally", LastTransitionTime: metav1.NewTime(now), ObservedGeneration: p.Generation,
		}
		if st.State != v1alpha1.CircuitClosed {
			cond.Status, cond.Reason = metav1.ConditionTrue, "Circuit"+string(st.State)
			cond.Message = fmt.Sprintf("circuit breaker %s after %d consecutive failures; calls are deferred without consuming schedule attempts", st.State, st.ConsecutiveFailures)
		}
		meta.SetStatusCondition(&p.Status.Conditions, cond)
		return nil
	})
	if err != nil {
		log.FromContext(ctx).Error(err, "publish circuit state", "provider", key.String(), "state", st.State)
	}
	if g.Recorder == nil {
		return
	}
	switch st.State {
	case v1alpha1.CircuitOpen:
		g.Recorder.Eventf(prov, nil, corev1.EventTypeWarning, "CircuitOpen", "Call", "circuit opened after %d consecutive failures: %v", st.ConsecutiveFailures, cause)
	case v1alpha1.CircuitClosed:
		g.Recorder.Eventf(prov, nil, corev1.EventTypeNormal, "CircuitClosed", "Call", "provider answers again; circuit closed")
	}
}

// configState holds back calls to a provider that refused paywarden's
// configuration, but for one probe per probe interval.
type configState struct {
	mu      sync.Mutex
	err     string
	probeAt time.Time
	probing bool
}

func (c *configState) problem() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *configState) admit(now time.Time, probe time.Duration) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.err == "":
		return 0, false
	case now.Before(c.probeAt) || c.probing:
		if c.probing {
			return probe, true
		}
		return c.probeAt.Sub(now), true
	}
	c.probing = true
	c.probeAt = now.Add(probe)
	return 0, false
}

// unprobe hands back a probe that did not go out: the next call probes.
func (c *configState) unprobe() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.probing {
		c.probing, c.probeAt = false, time.Time{}
	}
}

// record feeds a call's outcome; it reports whether the problem appeared or
// cleared.
func (c *configState) record(err error, now time.Time, probe time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.probing = false
	switch {
	case errors.Is(err, provider.ErrProviderConfig):
		first := c.err == ""
		c.err = err.Error()
		if first {
			c.probeAt = now.Add(probe)
		}
		return first
	case err == nil || !errors.Is(err, provider.ErrRetryable):
		// Any answer shows the configuration works again.
		cleared := c.err != ""
		c.err = ""
		return cleared
	}
	return false
}

// instrumented measures every provider API call.
type instrumented struct {
	provider.Provider
	key types.NamespacedName
}

func (i instrumented) observe(op string, start time.Time) {
	metrics.ProviderRequestDuration.WithLabelValues(i.key.Namespace, i.key.Name, op).Observe(time.Since(start).Seconds())
}

func (i instrumented) Create(ctx context.Context, req provider.CreateRequest) (provider.Payment, error) {
	defer i.observe("create", time.Now())
	return i.Provider.Create(ctx, req)
}

func (i instrumented) Get(ctx context.Context, id string) (provider.Payment, error) {
	defer i.observe("get", time.Now())
	return i.Provider.Get(ctx, id)
}

func (i instrumented) FindByMerchantReference(ctx context.Context, ref string) (provider.Payment, error) {
	defer i.observe("find", time.Now())
	return i.Provider.FindByMerchantReference(ctx, ref)
}

func (i instrumented) ListEvents(ctx context.Context, since time.Time, cursor string) (provider.EventPage, error) {
	defer i.observe("list_events", time.Now())
	return i.Provider.ListEvents(ctx, since, cursor)
}

func (i instrumented) Authorize(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	defer i.observe("authorize", time.Now())
	return i.Provider.Authorize(ctx, req)
}

func (i instrumented) Capture(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	defer i.observe("capture", time.Now())
	return i.Provider.Capture(ctx, req)
}

func (i instrumented) Cancel(ctx context.Context, req provider.ActionRequest) (provider.Payment, error) {
	defer i.observe("cancel", time.Now())
	return i.Provider.Cancel(ctx, req)
}

func (i instrumented) CreateRefund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	defer i.observe("create_refund", time.Now())
	return i.Provider.CreateRefund(ctx, req)
}

func (i instrumented) GetRefund(ctx context.Context, paymentID, refundID string) (provider.Refund, error) {
	defer i.observe("get_refund", time.Now())
	return i.Provider.GetRefund(ctx, paymentID, refundID)
}

func (i instrumented) FindRefund(ctx context.Context, paymentID, reference string) (provider.Refund, error) {
	defer i.observe("find_refund", time.Now())
	return i.Provider.FindRefund(ctx, paymentID, reference)
}

func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

// ReleaseEverywhere gives back what any provider's entry holds for key: for
// a caller that knows no call will go out for key but not which provider it
// would have called (a Refund at rest, whose payment is not read).
func (g *Gateway) ReleaseEverywhere(key string) {
	g.mu.Lock()
	entries := make([]*Entry, 0, len(g.entries))
	for _, e := range g.entries {
		entries = append(entries, e)
	}
	g.mu.Unlock()
	for _, e := range entries {
		e.Release(key)
	}
}
