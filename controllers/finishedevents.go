package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// DefaultFinishedEventsEvery is how often FinishedEvents reads the finished
// WebhookEvents: an event outlives its retention by at most this much.
const DefaultFinishedEventsEvery = time.Hour

// finishedEventsPage is how many events one list of a pass reads.
const finishedEventsPage = 500

// OpenWebhookEvents selects the WebhookEvents something will still be done
// with: no result yet, Pending or Orphaned. The manager's cache holds only
// those (CacheOptions); when an event's result is recorded the API server
// drops it from the watch, and the cache with it.
func OpenWebhookEvents() fields.Selector {
	sel := make([]fields.Selector, 0, len(v1alpha1.FinishedResults))
	for _, r := range v1alpha1.FinishedResults {
		sel = append(sel, fields.OneTermNotEqualSelector(v1alpha1.FieldResult, string(r)))
	}
	return fields.AndSelectors(sel...)
}

// FinishedEvents deletes finished WebhookEvents (Applied, Ignored, ...: never
// acted on again) past their provider's retention.webhookEvents. They are
// not in the manager's cache, so it reads them from the API server, one
// result and one page at a time, every Every; it deletes the expired ones,
// conditional on the UID it read, and counts the others for the
// paywarden_webhook_events gauge. Open events past retention are deleted by
// the inbox processor, which has them in its cache.
//
// It runs on the elected leader only, like the controllers.
type FinishedEvents struct {
	// APIReader lists finished events (never the cache: it does not hold them).
	APIReader client.Reader
	// Client reads PaymentProviders from the cache and deletes events.
	Client client.Client
	Clock  clock.PassiveClock
	// Every is the time between passes; default DefaultFinishedEventsEvery.
	Every time.Duration
	// Namespaces, when set, are the only namespaces read (those the
	// manager's cache watches); default all.
	Namespaces []string

	mu     sync.Mutex
	counts map[inboxKey]int
}

// inboxKey counts WebhookEvents by namespace, provider and result.
type inboxKey struct{ ns, provider, result string }

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (f *FinishedEvents) NeedLeaderElection() bool { return true }

// Start runs a pass at once, then one every Every, until ctx ends. A failed
// pass is logged and the next one starts over.
func (f *FinishedEvents) Start(ctx context.Context) error {
	every := f.Every
	if every <= 0 {
		every = DefaultFinishedEventsEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if deleted, err := f.Pass(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "finished webhook events: pass incomplete", "deleted", deleted)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pass reads every finished event once, deletes those past retention and
// counts the rest; it returns how many it deleted. The counts are replaced
// only by a complete pass.
func (f *FinishedEvents) Pass(ctx context.Context) (int, error) {
	now := f.now()
	counts := map[inboxKey]int{}
	providers := map[types.NamespacedName]*v1alpha1.PaymentProvider{}
	deleted := 0
	var errs []error
	namespaces := f.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		for _, result := range v1alpha1.FinishedResults {
			n, err := f.passOver(ctx, ns, result, now, counts, providers)
			deleted += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return deleted, errors.Join(errs...)
	}
	f.mu.Lock()
	f.counts = counts
	f.mu.Unlock()
	return deleted, nil
}

// passOver reads ns's events with result, page by page, deleting those past
// retention and counting the others.
func (f *FinishedEvents) passOver(ctx context.Context, ns string, result v1alpha1.EventResult, now time.Time,
	counts map[inboxKey]int, providers map[types.NamespacedName]*v1alpha1.PaymentProvider) (int, error) {
	deleted := 0
	var errs []error
	cont := ""
	for {
		var l v1alpha1.WebhookEventList
		if err := f.APIReader.List(ctx, &l, client.InNamespace(ns), client.MatchingFields{v1alpha1.FieldResult: string(result)},
			client.Limit(finishedEventsPage), client.Continue(cont)); err != nil {
			return deleted, errors.Join(append(errs, fmt.Errorf("list %s webhook events: %w", result, err))...)
		}
		for i := range l.Items {
			e := &l.Items[i]
			prov, err := f.provider(ctx, providers, e)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if now.Before(payment.EventExpiresAt(e, prov)) {
				counts[inboxKey{e.Namespace, e.Spec.Provider, string(result)}]++
				continue
			}
			uid := e.UID
			if err := f.Client.Delete(ctx, e, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete expired event %s/%s: %w", e.Namespace, e.Name, err))
				continue
			}
			deleted++
			log.FromContext(ctx).V(1).Info("deleted webhook event past retention", "event", e.Namespace+"/"+e.Name,
				"eventID", e.Spec.EventID, "result", result)
		}
		if cont = l.Continue; cont == "" {
			return deleted, errors.Join(errs...)
		}
	}
}

// provider is e's PaymentProvider from the cache, read once a pass; nil when
// it is gone.
func (f *FinishedEvents) provider(ctx context.Context, seen map[types.NamespacedName]*v1alpha1.PaymentProvider, e *v1alpha1.WebhookEvent) (*v1alpha1.PaymentProvider, error) {
	key := types.NamespacedName{Namespace: e.Namespace, Name: e.Spec.Provider}
	if p, ok := seen[key]; ok {
		return p, nil
	}
	p := &v1alpha1.PaymentProvider{}
	if err := f.Client.Get(ctx, key, p); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read PaymentProvider %s: %w", key, err)
		}
		p = nil
	}
	seen[key] = p
	return p, nil
}

// finishedCounts are the finished events the last complete pass kept.
func (f *FinishedEvents) finishedCounts() map[inboxKey]int {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.counts)
}

func (f *FinishedEvents) now() time.Time {
	if f.Clock == nil {
		return time.Now()
	}
	return f.Clock.Now()
}
