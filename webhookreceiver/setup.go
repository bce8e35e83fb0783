package webhookreceiver

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/paymentcache"
)

// EventSource is the name the receiver's Kubernetes Events are reported by.
const EventSource = "paywarden-receiver"

// SetupWithManager builds a Server on mgr and adds it as a runnable: reads go
// through mgr's cache (with the inbox's Payment indexes), writes through mgr's
// client, re-reads through its API reader, and /readyz waits for the cache.
// Fields of opts that are set win over mgr's. opts.BundleNamespace is
// required, and mgr's cache must be built with CacheOptions for it (the
// receiver's RBAC allows no other Secrets). Call it before mgr.Start.
//
// With mgr built from ManagerOptions, SetupWithManager and mgr.Start need no
// API server: the receiver serves /healthz at once and answers webhooks 503
// with Retry-After until its caches have synced. With a plain manager the
// indexes below need discovery, and mgr starts the receiver only after its
// caches have synced.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) (*Server, error) {
	if err := inbox.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	c := mgr.GetCache()
	// Informers are created now, before the manager starts its cache, so the
	// first request after the sync does not wait for a cold Secret list (only
	// the bundles: see CacheOptions). The
	// receiver never reads WebhookEvents from the cache: it only creates them
	// and re-reads them through the API reader, so it keeps no copy of the inbox.
	for _, obj := range []client.Object{&v1alpha1.PaymentProvider{}, &v1alpha1.Payment{}, &v1alpha1.Refund{}, &corev1.Secret{}} {
		if _, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return nil, fmt.Errorf("webhookreceiver: informer for %T: %w", obj, err)
		}
	}
	if opts.Client == nil {
		opts.Client = mgr.GetClient()
	}
	if opts.APIReader == nil {
		opts.APIReader = mgr.GetAPIReader()
	}
	// The cache holds open Payments only (CacheOptions); a late event of a
	// closed one is found through the thin cache of every Payment
	// (internal/paymentcache) and read from the API server.
	thin, err := paymentcache.New(mgr, paymentcache.Options{Namespaces: opts.Namespaces, Indexes: inbox.PaymentIndexes()})
	if err != nil {
		return nil, fmt.Errorf("webhookreceiver: %w", err)
	}
	// A plain runnable, not one of the manager's caches: the receiver
	// starts while the API server is unreachable and waits for its caches
	// itself (Ready).
	if err := mgr.Add(manager.RunnableFunc(thin.Start)); err != nil {
		return nil, fmt.Errorf("webhookreceiver: add the thin payment cache: %w", err)
	}
	if opts.Reader == nil {
		opts.Reader = paymentcache.Reader{Reader: c, Thin: thin, API: opts.APIReader, Lookups: slices.Collect(maps.Keys(inbox.PaymentIndexes()))}
	}
	if opts.Recorder == nil {
		opts.Recorder = mgr.GetEventRecorder(EventSource)
	}
	if opts.Ready == nil {
		opts.Ready = c.WaitForCacheSync
		if ec, ok := c.(*earlyStartCache); ok {
			opts.Ready = ec.synced
		}
	}
	ready := opts.Ready
	opts.Ready = func(ctx context.Context) bool { return ready(ctx) && thin.WaitForCacheSync(ctx) }
	if opts.Logger.GetSink() == nil {
		opts.Logger = mgr.GetLogger().WithName("webhooks")
	}
	s, err := New(opts)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(s); err != nil {
		return nil, fmt.Errorf("webhookreceiver: add to manager: %w", err)
	}
	return s, nil
}

// ManagerOptions sets the options of the receiver's manager that let it start
// while the API server is unreachable, so providers get 503 and Retry-After
// (and redeliver) rather than connection refused from a crash-looping pod:
//
//   - MapperProvider maps the kinds the receiver uses without discovery
//     (NewRESTMapper); registering its field indexes would otherwise ask the
//     API server for its groups and fail.
//   - NewCache reports the cache synced to the manager at once
//     (NewEarlyStartCache). The manager starts the receiver only after its
//     cache has synced, and before that cannot even be stopped; the receiver
//     waits for the real sync itself and answers 503 until then.
func ManagerOptions(o ctrl.Options) ctrl.Options {
	o.MapperProvider = NewRESTMapper
	o.NewCache = NewEarlyStartCache
	return o
}

// NewRESTMapper is a manager's MapperProvider that knows the kinds the
// receiver reads and writes without asking the API server, and resolves any
// other kind through controller-runtime's lazy discovery mapper.
func NewRESTMapper(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	known := meta.NewDefaultRESTMapper(nil)
	for _, k := range []struct {
		gv               schema.GroupVersion
		kind, res, singl string
	}{
		{v1alpha1.GroupVersion, "PaymentProvider", "paymentproviders", "paymentprovider"},
		{v1alpha1.GroupVersion, "Payment", "payments", "payment"},
		{v1alpha1.GroupVersion, "WebhookEvent", "webhookevents", "webhookevent"},
		{v1alpha1.GroupVersion, "Refund", "refunds", "refund"},
		{corev1.SchemeGroupVersion, "Secret", "secrets", "secret"},
	} {
		known.AddSpecific(k.gv.WithKind(k.kind), k.gv.WithResource(k.res), k.gv.WithResource(k.singl), meta.RESTScopeNamespace)
	}
	return fallbackMapper{first: known, then: dynamic}, nil
}

// fallbackMapper asks then only for what first does not know.
type fallbackMapper struct{ first, then meta.RESTMapper }

func (m fallbackMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	k, err := m.first.KindFor(r)
	if meta.IsNoMatchError(err) {
		return m.then.KindFor(r)
	}
	return k, err
}

func (m fallbackMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	k, err := m.first.KindsFor(r)
	if meta.IsNoMatchError(err) {
		return m.then.KindsFor(r)
	}
	return k, err
}

func (m fallbackMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	res, err := m.first.ResourceFor(r)
	if meta.IsNoMatchError(err) {
		return m.then.ResourceFor(r)
	}
	return res, err
}

func (m fallbackMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	res, err := m.first.ResourcesFor(r)
	if meta.IsNoMatchError(err) {
		return m.then.ResourcesFor(r)
	}
	return res, err
}

func (m fallbackMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	mp, err := m.first.RESTMapping(gk, versions...)
	if meta.IsNoMatchError(err) {
		return m.then.RESTMapping(gk, versions...)
	}
	return mp, err
}

func (m fallbackMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	mp, err := m.first.RESTMappings(gk, versions...)
	if meta.IsNoMatchError(err) {
		return m.then.RESTMappings(gk, versions...)
	}
	return mp, err
}

func (m fallbackMapper) ResourceSingularizer(resource string) (string, error) {
	s, err := m.first.ResourceSingularizer(resource)
	if err != nil {
		return m.then.ResourceSingularizer(resource)
	}
	return s, err
}

// NewEarlyStartCache is a manager's NewCache: controller-runtime's cache,
// except that WaitForCacheSync, which the manager alone calls, returns at
// once. SetupWithManager makes the receiver wait for the real sync.
func NewEarlyStartCache(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
	c, err := cache.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return &earlyStartCache{Cache: c}, nil
}

type earlyStartCache struct{ cache.Cache }

// WaitForCacheSync lets the manager start its runnables and stop them again
// while the API server is unreachable.
func (c *earlyStartCache) WaitForCacheSync(context.Context) bool { return true }

func (c *earlyStartCache) synced(ctx context.Context) bool { return c.Cache.WaitForCacheSync(ctx) }
