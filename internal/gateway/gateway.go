// Package gateway is the manager's way out to providers: it builds the adapter
// for a PaymentProvider from its spec and credentials Secret, and puts every
// call to one provider behind that provider's shared token bucket and circuit
// breaker, with a duration metric per operation. Adapters decide what an answer
// means; the gateway decides whether a call may go out at all.
package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
)

// Gateway caches one Entry per PaymentProvider. Safe for concurrent use.
type Gateway struct {
	// Reader reads credentials Secrets (the manager's cached client).
	Reader client.Reader
	// HTTPClient, when set, is used by every adapter (tests record traffic).
	HTTPClient *http.Client

	mu      sync.Mutex
	entries map[types.NamespacedName]*Entry
}

// Entry is one provider's adapter with its shared limits.
type Entry struct {
	Name     string // "<namespace>/<name>"
	Provider provider.Provider
	Limiter  *rate.Limiter
	Breaker  *Breaker
	version  string
}

// For returns the entry of prov, rebuilding the adapter when the provider or
// its credentials changed. Limiter and breaker state survive a rebuild: a
// config change must not reset an open circuit or refill the bucket.
func (g *Gateway) For(ctx context.Context, prov *v1alpha1.PaymentProvider) (*Entry, error) {
	key := types.NamespacedName{Namespace: prov.Namespace, Name: prov.Name}
	secret := &corev1.Secret{}
	ref := types.NamespacedName{Namespace: prov.Namespace, Name: prov.Spec.CredentialsSecretRef.Name}
	if err := g.Reader.Get(ctx, ref, secret); err != nil {
		return nil, fmt.Errorf("provider %s: read credentials Secret %s: %w", key, ref.Name, err)
	}
	// Generation, not resourceVersion: status writes (circuit state, backfill
	// cursor) must not rebuild the adapter and drop its cached OAuth token.
	version := fmt.Sprintf("%d/%s", prov.Generation, secret.ResourceVersion)

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.entries == nil {
		g.entries = map[types.NamespacedName]*Entry{}
	}
	e := g.entries[key]
	if e != nil && e.version == version {
		return e, nil
	}
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
	// An Entry is never changed once handed out (callers use it without the
	// lock); a rebuild makes a new one that carries over the limiter and
	// breaker state.
	next := &Entry{Name: key.String(), Provider: instrumented{Provider: adapter, name: prov.Name}, version: version}
	if e == nil {
		next.Limiter = rate.NewLimiter(rate.Limit(qps), int(burst))
		next.Breaker = NewBreaker(failures, openFor)
	} else {
		next.Limiter, next.Breaker = e.Limiter, e.Breaker
		next.Limiter.SetLimit(rate.Limit(qps))
		next.Limiter.SetBurst(int(burst))
		next.Breaker.Configure(failures, openFor)
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

// Admit asks the provider's circuit breaker and token bucket whether a call may
// go out now. When it may not, wait says how long to defer: the caller
// requeues without consuming a schedule attempt. A token is taken only when
// the call is admitted, so deferred payments do not drain the bucket.
func (e *Entry) Admit(now time.Time) (ok bool, wait time.Duration, reason string) {
	if ok, retryAt := e.Breaker.Allow(now); !ok {
		return false, retryAt.Sub(now), "circuit_open"
	}
	r := e.Limiter.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second, "rate_limited"
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		// If the circuit let this call through as its probe, hand the slot back.
		e.Breaker.Release()
		return false, d, "rate_limited"
	}
	return true, 0, ""
}

// instrumented measures every provider API call.
type instrumented struct {
	provider.Provider
	name string
}

func (i instrumented) observe(op string, start time.Time) {
	metrics.ProviderRequestDuration.WithLabelValues(i.name, op).Observe(time.Since(start).Seconds())
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

func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
