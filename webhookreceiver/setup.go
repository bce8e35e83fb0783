package webhookreceiver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/inbox"
)

// EventSource is the name the receiver's Kubernetes Events are reported by.
const EventSource = "paywarden-receiver"

// SetupWithManager builds a Server on mgr and adds it as a runnable: reads go
// through mgr's cache (with the inbox's Payment indexes), writes through mgr's
// client, re-reads through its API reader, and /readyz waits for the cache.
// Fields of opts that are set win over mgr's. opts.BundleNamespace is
// required, and mgr's cache must be built with CacheOptions for it (the
// receiver's RBAC allows no other Secrets). Call it before mgr.Start.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts Options) (*Server, error) {
	if err := inbox.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	c := mgr.GetCache()
	// Informers are created now so the manager syncs them before the server
	// starts; a first request must not wait for a cold Secret list (only the
	// bundles: see CacheOptions). The
	// receiver never reads WebhookEvents from the cache: it only creates them
	// and re-reads them through the API reader, so it keeps no copy of the inbox.
	for _, obj := range []client.Object{&v1alpha1.PaymentProvider{}, &v1alpha1.Payment{}, &corev1.Secret{}} {
		if _, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err != nil {
			return nil, fmt.Errorf("webhookreceiver: informer for %T: %w", obj, err)
		}
	}
	if opts.Client == nil {
		opts.Client = mgr.GetClient()
	}
	if opts.Reader == nil {
		opts.Reader = c
	}
	if opts.APIReader == nil {
		opts.APIReader = mgr.GetAPIReader()
	}
	if opts.Recorder == nil {
		opts.Recorder = mgr.GetEventRecorder(EventSource)
	}
	if opts.Ready == nil {
		opts.Ready = c.WaitForCacheSync
	}
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
