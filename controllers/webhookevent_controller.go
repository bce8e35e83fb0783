package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paymentcache"
)

// DefaultPendingGrace is how long after receipt the inbox processor leaves a
// Pending event to the receiver that stored it. The receiver's apply budget
// is seconds; the grace is longer so the two rarely work on one event (if
// they do, the state machine's event-id dedup keeps it to one transition).
const DefaultPendingGrace = 30 * time.Second

// indexOrphanKeys indexes Orphaned WebhookEvents by the inbox keys of the
// Payment they wait for ("ref:<provider>/<merchant ref>", "id:<provider>/<id>"),
// so a Payment that appears or learns its provider id wakes exactly its orphans.
const indexOrphanKeys = "webhookevent.orphanKeys"

// indexEventProvider indexes WebhookEvents by their provider's name, so a
// provider whose spec changed (a shorter retention, say) wakes its events.
const indexEventProvider = "webhookevent.provider"

// WebhookEventReconciler is the inbox processor (SPEC §7): it applies events
// the receiver stored but did not finish (Pending, after a grace period),
// applies Orphaned events once their Payment appears, and deletes open events
// older than the provider's retention.webhookEvents. Its cache holds open
// events only (CacheOptions): finished ones are FinishedEvents' to delete.
type WebhookEventReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock

	// PendingGrace overrides DefaultPendingGrace.
	PendingGrace time.Duration
	// Gateway builds the adapters that re-parse stored payloads; share the
	// manager's. When nil, SetupWithManager creates one reading mgr's cache.
	Gateway *gateway.Gateway
	// Thin, when set, is the thin cache of every Payment
	// (internal/paymentcache): the changes of closed payments, which the
	// manager's cache does not hold, come from it.
	Thin *paymentcache.Cache
	// MaxConcurrentReconciles defaults to 4: events of different payments are
	// independent, and events of one payment are serialized by optimistic
	// concurrency on its status.
	MaxConcurrentReconciles int

	inbox *inbox.Inbox
}

// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=webhookevents,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=webhookevents/status,verbs=update
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments,verbs=get;list;watch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments/status,verbs=update
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=refunds,verbs=get;list;watch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=refunds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// closedChanges are the changes of closed payments, from the thin cache,
// mapped to the events waiting for them; none without one.
func (r *WebhookEventReconciler) closedChanges() source.Source {
	if r.Thin == nil {
		return source.Channel(make(chan event.GenericEvent), &handler.EnqueueRequestForObject{})
	}
	return r.Thin.Source(handler.TypedEnqueueRequestsFromMapFunc(r.orphansOfClosed), closedChange{})
}

// orphansOfClosed maps a closed payment's change to the Orphaned events
// waiting for it: those of its provider in its namespace whose merchant
// reference or provider id the payment is now looked up by (the thin
// cache's entry has their hashes). Nothing is read from the API server.
func (r *WebhookEventReconciler) orphansOfClosed(ctx context.Context, e *paymentcache.Entry) []reconcile.Request {
	if e.Provider() == "" {
		return nil
	}
	var l v1alpha1.WebhookEventList
	if err := r.Client.List(ctx, &l, client.InNamespace(e.GetNamespace()), client.MatchingFields{indexEventProvider: e.Provider()}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list webhook events of provider", "provider", e.Provider())
		return nil
	}
	var reqs []reconcile.Request
	for i := range l.Items {
		ev := &l.Items[i]
		if ev.Status.Result != v1alpha1.ResultOrphaned {
			continue
		}
		for _, by := range orphanLookups {
			if v := by.value(ev); v != "" && r.Thin.Has(e, by.index, inbox.Key(ev.Spec.Provider, v)) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ev)})
				break
			}
		}
	}
	return reqs
}

// SetupWithManager registers the processor's WebhookEvent index and its
// controller. The Payment indexes of inbox.SetupIndexes must be registered on
// mgr too (once per manager).
func (r *WebhookEventReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.PendingGrace <= 0 {
		r.PendingGrace = DefaultPendingGrace
	}
	if r.Gateway == nil {
		r.Gateway = &gateway.Gateway{Reader: r.Client}
	}
	if r.MaxConcurrentReconciles <= 0 {
		r.MaxConcurrentReconciles = 4
	}
	r.inbox = &inbox.Inbox{Client: r.Client, Reader: r.Client, APIReader: r.APIReader, Recorder: r.Recorder, Clock: r.Clock}

	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.WebhookEvent{}, indexOrphanKeys, orphanKeysOfEvent); err != nil {
		return fmt.Errorf("index webhook events by orphan key: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.WebhookEvent{}, indexEventProvider, func(o client.Object) []string {
		if e, ok := o.(*v1alpha1.WebhookEvent); ok && e.Spec.Provider != "" {
			return []string{e.Spec.Provider}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index webhook events by provider: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("webhookevent").
		// No generation predicate: the receiver's status writes (Pending,
		// Orphaned, done) are exactly what this controller must see.
		For(&v1alpha1.WebhookEvent{}).
		Watches(&v1alpha1.Payment{}, handler.EnqueueRequestsFromMapFunc(r.orphansOf)).
		// And a closed payment's change, which the manager's cache does not
		// hold (its closing is reported there, as its leaving).
		WatchesRawSource(r.closedChanges()).
		// A Refund that appears wakes the refund events that waited for it.
		Watches(&v1alpha1.Refund{}, handler.EnqueueRequestsFromMapFunc(r.orphansOfRefund)).
		// A provider created (back) or re-configured: its waiting events can
		// be parsed now, and a changed retention moves every expiry.
		Watches(&v1alpha1.PaymentProvider{}, handler.EnqueueRequestsFromMapFunc(r.eventsOf),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

// Reconcile is level-triggered: what to do follows from the stored result and
// the event's age alone, so a restart changes nothing.
func (r *WebhookEventReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	evt := &v1alpha1.WebhookEvent{}
	if err := r.Client.Get(ctx, req.NamespacedName, evt); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !evt.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	prov := &v1alpha1.PaymentProvider{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: evt.Namespace, Name: evt.Spec.Provider}, prov); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		prov = nil
	}

	if evt.Status.Result.IsDone() {
		// Finished (the cache's copy may lag the result's write by a
		// moment): FinishedEvents deletes it past retention.
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()
	expiresIn := payment.EventExpiresAt(evt, prov).Sub(now)
	// Past retention an Orphaned event (one no Payment matched) goes. A
	// Pending one was never applied: the provider had its 200 and delivers
	// it no more, so it is applied first (it goes once finished, or
	// Orphaned), unless its provider is gone and it can never be.
	if expiresIn <= 0 && (evt.Status.Result == v1alpha1.ResultOrphaned || prov == nil) {
		return ctrl.Result{}, r.deleteExpired(ctx, evt)
	}

	if evt.Status.Result == v1alpha1.ResultOrphaned {
		// Waiting for its Payment: orphansOf wakes it when one appears.
	} else if wait := r.PendingGrace - now.Sub(evt.Spec.ReceivedAt.Time); wait > 0 {
		if expiresIn > 0 {
			wait = min(wait, expiresIn)
		}
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if prov == nil {
		// Without its provider the payload cannot be parsed; the event waits
		// until a provider of that name appears (eventsOf) or it expires.
		log.Info("webhook event waits for its PaymentProvider", "provider", evt.Spec.Provider, "eventID", evt.Spec.EventID)
		return ctrl.Result{RequeueAfter: expiresIn}, nil
	}

	entry, err := r.Gateway.For(ctx, prov)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("event %s: %w", req.NamespacedName, err)
	}
	ev, err := inbox.Reparse(entry.Provider, evt)
	if errors.Is(err, inbox.ErrNotReparsable) {
		// Only the receiver, holding the whole body, could have applied it;
		// the payment is settled by status queries instead.
		out, ferr := r.inbox.Ignore(ctx, evt, err.Error())
		if ferr != nil {
			return ctrl.Result{}, ferr
		}
		log.Info("webhook event cannot be re-applied", "eventID", evt.Spec.EventID, "result", out.Result, "reason", err.Error())
		return untilExpiry(out.Result, expiresIn), nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	out, err := r.inbox.Apply(ctx, evt, ev)
	if err != nil {
		// Conflicts beyond the writer's retries and API errors come back with
		// the controller's backoff; the event keeps its result until then.
		return ctrl.Result{}, err
	}
	log.V(1).Info("webhook event processed", "eventID", evt.Spec.EventID, "result", out.Result, "payment", out.Payment)
	return untilExpiry(out.Result, expiresIn), nil
}

// deleteExpired deletes an event past retention. One that was waiting for
// a Payment (news about money it had not taken yet: a refund, a refund's
// failure, a dispute's outcome) says so on that Payment: the news is gone,
// and a human may need it (a dispute lost). The Payment is read first, so a
// failed read comes back (with the controller's backoff) before the event
// is gone, not after with no one told.
//
// The delete is of the version judged (a resourceVersion precondition): a
// cached copy that lags (the event applied meanwhile) conflicts and is
// judged again, rather than deleted as waiting. An event with a Payment to
// tell is read from the API server first, so a lagging copy tells no one
// (a write in the moment between that read and the delete still can: the
// Payment is told, and the delete conflicts).
func (r *WebhookEventReconciler) deleteExpired(ctx context.Context, evt *v1alpha1.WebhookEvent) error {
	log := ctrl.LoggerFrom(ctx)
	if evt.Status.Result != v1alpha1.ResultOrphaned && r.APIReader != nil {
		// Never applied, and going only because its provider is gone: that
		// is asked of the API server, not of a cache that may lag a
		// provider created again (the watch then wakes the event).
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: evt.Namespace, Name: evt.Spec.Provider}, &v1alpha1.PaymentProvider{})
		switch {
		case err == nil:
			return fmt.Errorf("expired event %s/%s is %s and its provider %s exists, though the cache does not hold it yet: judged again",
				evt.Namespace, evt.Name, evt.Status.Result, evt.Spec.Provider)
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("read the provider of expired event %s/%s: %w", evt.Namespace, evt.Name, err)
		}
	}
	waiter, err := r.expiredWaiter(ctx, evt)
	if err != nil {
		return fmt.Errorf("read the payment expired event %s/%s waited for: %w", evt.Namespace, evt.Name, err)
	}
	if waiter != nil && r.APIReader != nil {
		live := &v1alpha1.WebhookEvent{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(evt), live); err != nil {
			return client.IgnoreNotFound(err)
		}
		if live.UID != evt.UID || live.ResourceVersion != evt.ResourceVersion {
			// The cache lags: judged again (with the controller's backoff,
			// or sooner when the cache has the new version).
			return fmt.Errorf("expired event %s/%s changed since the cache's copy (resourceVersion %s, now %s): judged again",
				evt.Namespace, evt.Name, evt.ResourceVersion, live.ResourceVersion)
		}
	}
	// Told before the delete: a delete whose answer is lost is not tried
	// again (the cache shows the event gone), and a failed one tells twice,
	// which the Event's count shows, rather than not at all.
	if waiter != nil {
		log.Info("webhook event deleted past retention without being applied", "eventID", evt.Spec.EventID,
			"type", evt.Spec.Type, "payment", waiter.Name, "waited", evt.Status.Message)
		r.Recorder.Eventf(waiter, nil, corev1.EventTypeWarning, v1alpha1.ReasonWebhookEventExpired, "Expire",
			"event %s (%s) waited for this payment past the provider's retention.webhookEvents and is deleted without being applied (%s)",
			evt.Spec.EventID, evt.Spec.Type, evt.Status.Message)
	}
	uid, rv := evt.UID, evt.ResourceVersion
	if err := r.Client.Delete(ctx, evt, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete expired event %s/%s: %w", evt.Namespace, evt.Name, err)
	}
	log.V(1).Info("deleted webhook event past retention", "eventID", evt.Spec.EventID, "result", evt.Status.Result)
	return nil
}

// expiredWaiter is the Payment an Orphaned event waited for: the one named
// at receipt, else the one the event matches now (an event stored before
// its Payment knew its provider id). None when the event was not waiting,
// when that Payment is gone, or when no Payment matches (no one to tell;
// the log has it); an error when it cannot be read.
func (r *WebhookEventReconciler) expiredWaiter(ctx context.Context, evt *v1alpha1.WebhookEvent) (*v1alpha1.Payment, error) {
	if evt.Status.Result != v1alpha1.ResultOrphaned || r.Recorder == nil {
		return nil, nil
	}
	if evt.Spec.Payment == "" {
		p, err := r.inbox.PaymentOf(ctx, evt)
		if inbox.IsNoPayment(err) {
			return nil, nil
		}
		return p, err
	}
	p := &v1alpha1.Payment{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: evt.Namespace, Name: evt.Spec.Payment}, p); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return p, nil
}

// untilExpiry comes back to an event still open at its expiry, to delete
// it; a finished one leaves the cache, and FinishedEvents deletes it.
func untilExpiry(result v1alpha1.EventResult, expiresIn time.Duration) ctrl.Result {
	if result.IsDone() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: expiresIn}
}

// orphansOf maps a Payment to the Orphaned events that may be about it.
func (r *WebhookEventReconciler) orphansOf(ctx context.Context, obj client.Object) []reconcile.Request {
	p, ok := obj.(*v1alpha1.Payment)
	if !ok || p.Spec.ProviderRef.Name == "" {
		return nil
	}
	keys := []string{"ref:" + inbox.Key(p.Spec.ProviderRef.Name, p.MerchantRef())}
	for _, id := range inbox.PaymentProviderIDs(p) {
		keys = append(keys, "id:"+inbox.Key(p.Spec.ProviderRef.Name, id))
	}
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	for _, k := range keys {
		found, err := r.eventsWhere(ctx, p.Namespace, indexOrphanKeys, k)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "list orphaned webhook events", "payment", client.ObjectKeyFromObject(p))
			continue
		}
		for _, req := range found {
			if !seen[req.NamespacedName] {
				seen[req.NamespacedName] = true
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// orphansOfRefund maps a Refund to the Orphaned events waiting for it.
func (r *WebhookEventReconciler) orphansOfRefund(ctx context.Context, obj client.Object) []reconcile.Request {
	rf, ok := obj.(*v1alpha1.Refund)
	if !ok {
		return nil
	}
	// Keyed by the whole reference: an event about an earlier Refund of the
	// same name (another UID) does not wait for this one.
	reqs, err := r.eventsWhere(ctx, obj.GetNamespace(), indexOrphanKeys, "refund:"+rf.Reference())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list orphaned webhook events", "refund", client.ObjectKeyFromObject(obj))
	}
	return reqs
}

// eventsOf maps a PaymentProvider to its events.
func (r *WebhookEventReconciler) eventsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	reqs, err := r.eventsWhere(ctx, obj.GetNamespace(), indexEventProvider, obj.GetName())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list webhook events of provider", "provider", client.ObjectKeyFromObject(obj))
	}
	return reqs
}

// eventsWhere lists, as requests, the WebhookEvents in ns whose indexed
// field holds value; nil when the list fails.
func (r *WebhookEventReconciler) eventsWhere(ctx context.Context, ns, field, value string) ([]reconcile.Request, error) {
	var l v1alpha1.WebhookEventList
	if err := r.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingFields{field: value}); err != nil {
		return nil, err
	}
	reqs := make([]reconcile.Request, 0, len(l.Items))
	for _, e := range l.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&e)})
	}
	return reqs, nil
}

// orphanLookups are the look-ups of its Payment an Orphaned event waits
// for: the Payment index, the event's value for it, and the prefix of its
// keys in indexOrphanKeys.
var orphanLookups = []struct {
	index, prefix string
	value         func(*v1alpha1.WebhookEvent) string
}{
	{inbox.IndexPaymentMerchantRef, "ref:", func(e *v1alpha1.WebhookEvent) string { return e.Spec.MerchantReference }},
	{inbox.IndexPaymentProviderID, "id:", func(e *v1alpha1.WebhookEvent) string { return e.Spec.ProviderPaymentID }},
}

// orphanKeysOfEvent indexes only Orphaned events: the index stays as small as
// the set of events waiting for a Payment.
func orphanKeysOfEvent(o client.Object) []string {
	e, ok := o.(*v1alpha1.WebhookEvent)
	if !ok || e.Status.Result != v1alpha1.ResultOrphaned {
		return nil
	}
	var keys []string
	for _, by := range orphanLookups {
		if v := by.value(e); v != "" {
			keys = append(keys, by.prefix+inbox.Key(e.Spec.Provider, v))
		}
	}
	if e.Spec.RefundReference != "" {
		keys = append(keys, "refund:"+e.Spec.RefundReference)
	}
	return keys
}
