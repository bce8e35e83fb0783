package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paymentcache"
)

// IndexPaymentFinal indexes final Payments by their provider's name, so a
// change of a provider's retention finds the payments it applies to.
const IndexPaymentFinal = "retention.finalByProvider"

// Retention deletes final Payments retention.finalPayments after they settled
// (SPEC §3), measured from their last history entry: a refund or a dispute
// restarts the clock. A payment that payment.RetentionHold or RefundsHold
// keeps (under review, its dispute open, a Refund in flight, under review or
// not counted yet) is never deleted, and
// the delete is conditional on the version that was judged, so a payment that
// changed meanwhile (say, a late conflicting webhook put it under review) is
// judged again instead. WebhookEvents are not its business: the inbox
// processor (WebhookEventReconciler) deletes them after retention.webhookEvents.
//
// A final payment waits on its own expiry with RequeueAfter only for the
// last stretch, payment.RetentionWait within Horizon; further off it waits
// in no queue, and a scan of the cache every Horizon/4 (Start) hands it back
// once its end is within the horizon. The queue holds the payments that go
// within the hour, not every payment retention keeps.
type Retention struct {
	// Client reads through the cache and deletes.
	Client client.Client
	// Thin, when set, is the thin cache of every Payment
	// (internal/paymentcache): the scan and a provider's change find closed
	// payments through it, which Client's cache of open work does not hold.
	// Default Client.
	Thin *paymentcache.Cache
	// APIReader re-reads a payment whose delete lost a race (not the cache).
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	// Ledger, when set, remembers a payment that holds no finalizer (settled
	// before paywarden put finalizers on payments) before it is deleted; one
	// with the finalizer is remembered by the payment reconciler.
	Ledger Ledger
	// Horizon overrides payment.RetentionHorizon.
	Horizon time.Duration

	// wake carries the scan's payments to the controller's queue.
	wake chan event.GenericEvent
	// listening is closed once the controller hears closed payments'
	// changes: the scan at start waits for it, so a payment that closes
	// before is in the scan and one that closes after is heard.
	listening chan struct{}
}

// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=refunds,verbs=get;list;watch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the index and the controller.
func (r *Retention) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Payment{}, IndexPaymentFinal, finalKeys); err != nil {
		return fmt.Errorf("index final payments: %w", err)
	}
	r.wake = make(chan event.GenericEvent)
	r.listening = make(chan struct{})
	final := predicate.NewPredicateFuncs(func(o client.Object) bool {
		p, ok := o.(*v1alpha1.Payment)
		return ok && p.Status.Phase.IsFinal()
	})
	err := ctrl.NewControllerManagedBy(mgr).
		Named("payment-retention").
		For(&v1alpha1.Payment{}, builder.WithPredicates(final)).
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{})).
		// A payment's closing (the manager's cache reports it as the
		// deletion of the open copy), and a closed payment's change (a
		// Refund counted, say), may release it.
		WatchesRawSource(r.closedChanges()).
		Watches(&v1alpha1.PaymentProvider{}, handler.EnqueueRequestsFromMapFunc(r.finalPaymentsOf),
			// A spec change, not the provider's arrival in the cache at
			// start: the scan at start hands back what is due then, without
			// reading every kept payment from the API server.
			builder.WithPredicates(predicate.GenerationChangedPredicate{}, specChanged{})).
		// A Refund that settles, or whose review is resolved, may release
		// its payment.
		Watches(&v1alpha1.Refund{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.(*v1alpha1.Refund).Spec.PaymentRef.Name}}}
		}), builder.WithPredicates(predicate.Funcs{
			// Not the Refunds the cache lists at start: the scan at start
			// hands back what is due.
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, cur := e.ObjectOld.(*v1alpha1.Refund), e.ObjectNew.(*v1alpha1.Refund)
				return old.Status.Phase != cur.Status.Phase ||
					meta.IsStatusConditionTrue(old.Status.Conditions, v1alpha1.ConditionNeedsReview) != meta.IsStatusConditionTrue(cur.Status.Conditions, v1alpha1.ConditionNeedsReview)
			}})).
		Complete(r)
	if err != nil {
		return err
	}
	// The scan, beside the controller that reads its channel.
	return mgr.Add(r)
}

// specChanged lets through updates only (GenerationChangedPredicate tells
// which).
type specChanged struct{ predicate.Funcs }

func (specChanged) Create(event.CreateEvent) bool   { return false }
func (specChanged) Delete(event.DeleteEvent) bool   { return false }
func (specChanged) Generic(event.GenericEvent) bool { return false }

// closedChanges are the changes of closed payments, from the thin cache;
// none without one.
func (r *Retention) closedChanges() source.Source {
	listening := r.listening
	if r.Thin == nil {
		close(listening)
		return source.Channel(make(chan event.GenericEvent), &handler.EnqueueRequestForObject{})
	}
	src := r.Thin.Source(handler.TypedEnqueueRequestsFromMapFunc(r.dueOf), closedChange{})
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		err := src.Start(ctx, q)
		if err == nil {
			close(listening)
		}
		return err
	})
}

// dueOf hands a closed payment that changed to the queue when its retention
// ends within the horizon, or has ended, and nothing it shows holds it:
// judged on the thin cache's entry, so a closing does not read the payment
// from the API server for a retention days away (the scan hands it back
// then).
func (r *Retention) dueOf(ctx context.Context, e *paymentcache.Entry) []reconcile.Request {
	req := []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(e)}}
	if e.RetentionHeld() {
		return nil
	}
	prov := &v1alpha1.PaymentProvider{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: e.GetNamespace(), Name: e.Provider()}, prov); err != nil {
		return req // judged on the whole payment: the reconcile says what is missing
	}
	if !payment.RetentionScanHandsBack(payment.RetentionLeftSince(e.RetentionSince(), prov.Spec.FinalPaymentRetention(), r.Clock.Now()), r.horizon(), true) {
		return nil
	}
	return req
}

// finals are the final payments of the providers given (each by namespace
// and name), by provider: from the thin cache of every Payment when there
// is one (its entries read in place, all of them once, however many
// namespaces), else from Client's cache, a provider at a time.
func (r *Retention) finals(ctx context.Context, provs ...types.NamespacedName) (map[types.NamespacedName][]*paymentcache.Entry, error) {
	out := map[types.NamespacedName][]*paymentcache.Entry{}
	if len(provs) == 0 {
		return out, nil
	}
	if r.Thin == nil {
		for _, prov := range provs {
			var list v1alpha1.PaymentList
			if err := r.Client.List(ctx, &list, client.InNamespace(prov.Namespace), client.MatchingFields{IndexPaymentFinal: prov.Name}, client.UnsafeDisableDeepCopy); err != nil {
				return nil, err
			}
			for i := range list.Items {
				out[prov] = append(out[prov], paymentcache.EntryOf(&list.Items[i]))
			}
		}
		return out, nil
	}
	ns, want := "", make(map[types.NamespacedName]bool, len(provs))
	for _, prov := range provs {
		want[prov] = true
	}
	if len(provs) == 1 {
		ns = provs[0].Namespace
	}
	for _, e := range r.Thin.InNamespace(ns) {
		prov := types.NamespacedName{Namespace: e.GetNamespace(), Name: e.Provider()}
		if e.Phase().IsFinal() && want[prov] {
			out[prov] = append(out[prov], e)
		}
	}
	return out, nil
}

func finalKeys(o client.Object) []string {
	p, ok := o.(*v1alpha1.Payment)
	if !ok || p.Spec.ProviderRef.Name == "" || !p.Status.Phase.IsFinal() {
		return nil
	}
	return []string{p.Spec.ProviderRef.Name}
}

// finalPaymentsOf wakes a provider's final payments when its spec changes
// (retention.finalPayments set, shortened or removed).
func (r *Retention) finalPaymentsOf(ctx context.Context, o client.Object) []reconcile.Request {
	prov := client.ObjectKeyFromObject(o)
	finals, err := r.finals(ctx, prov)
	if err != nil {
		log.FromContext(ctx).Error(err, "list final payments of provider", "provider", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(finals[prov]))
	for _, e := range finals[prov] {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e)})
	}
	return reqs
}

// Reconcile deletes the payment when it is past its provider's retention, or
// waits for that moment.
func (r *Retention) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1alpha1.Payment{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	for attempt := 0; ; attempt++ {
		wait, expired, err := r.judge(ctx, p)
		if err != nil || !expired {
			return ctrl.Result{RequeueAfter: wait}, err
		}
		if err := r.remember(ctx, p); err != nil {
			return ctrl.Result{}, err
		}
		uid, rv := p.UID, p.ResourceVersion
		err = r.Client.Delete(ctx, p, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case err == nil:
			log.FromContext(ctx).Info("deleted payment past retention", "payment", req.NamespacedName.String(),
				"phase", p.Status.Phase, "settledAt", payment.RetentionSince(p).UTC().Format(time.RFC3339))
			if r.Recorder != nil {
				r.Recorder.Eventf(p, nil, corev1.EventTypeNormal, "RetentionExpired", "Delete",
					"deleted: %s since %s, past the provider's retention.finalPayments", p.Status.Phase, payment.RetentionSince(p).UTC().Format(time.RFC3339))
			}
			return ctrl.Result{}, nil
		case apierrors.IsNotFound(err):
			return ctrl.Result{}, nil
		case apierrors.IsConflict(err) && attempt == 0:
			// Judged on a version that is no longer current: judge the
			// current one (from the API server, the cache may lag).
			if err := r.APIReader.Get(ctx, req.NamespacedName, p); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
		default:
			return ctrl.Result{}, fmt.Errorf("delete payment %s past retention: %w", req.NamespacedName, err)
		}
	}
}

// remember writes a payment that holds no money-in-flight finalizer to the
// ledger before it is deleted, when payment.RetentionRemembers it.
func (r *Retention) remember(ctx context.Context, p *v1alpha1.Payment) error {
	if r.Ledger == nil || controllerutil.ContainsFinalizer(p, v1alpha1.FinalizerMoneyInFlight) || !payment.RetentionRemembers(p) {
		return nil
	}
	rec, ok := payment.PaymentRecord(p, r.Clock.Now())
	if !ok {
		return nil
	}
	if err := r.Ledger.Put(ctx, p.OrderIdentity(), rec); err != nil {
		return fmt.Errorf("remember payment %s/%s in the ledger before retention deletes it: %w", p.Namespace, p.Name, err)
	}
	return nil
}

// judge says whether p may be deleted now, or how long until it may.
func (r *Retention) judge(ctx context.Context, p *v1alpha1.Payment) (wait time.Duration, expired bool, err error) {
	if payment.RetentionHold(p) != "" {
		// Whatever clears the hold (a review resolved, a dispute closed) is
		// an update that brings the payment back here.
		return 0, false, nil
	}
	prov := &v1alpha1.PaymentProvider{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.ProviderRef.Name}, prov); err != nil {
		// Without its provider there is no retention to apply: keep it.
		return 0, false, client.IgnoreNotFound(err)
	}
	left := payment.RetentionLeft(p, prov.Spec.FinalPaymentRetention(), r.Clock.Now())
	if left > 0 {
		// Zero beyond the horizon: the scan brings it back.
		return payment.RetentionWait(left, r.horizon()), false, nil
	}
	// A Refund in flight, under review or not counted yet keeps its payment
	// (and itself: it is owned by the payment); its settling, its review
	// resolved or the read that counts it brings the payment back here.
	// Asked of the API server, not the cache: a Refund applied a moment ago
	// must not be deleted with its payment before anyone saw it.
	refunds, err := listRefunds(ctx, r.APIReader, p.Namespace, p.Name)
	if err != nil {
		return 0, false, err
	}
	return 0, payment.RefundsHold(p, refunds) == "", nil
}

func (r *Retention) horizon() time.Duration {
	if r.Horizon > 0 {
		return r.Horizon
	}
	return payment.RetentionHorizon
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: the scan
// runs beside the controller it feeds.
func (r *Retention) NeedLeaderElection() bool { return true }

// Start runs the retention scan at once and then every Horizon/4 until ctx
// ends. A failed scan is logged; the next one reads everything again. A
// payment already waiting in its last hour is handed back too, and judged
// again at once. The scan at start hands back the payments past their end
// too (payment.RetentionScanHandsBack): nothing else brings a closed one.
// It runs once the controller hears closed payments' changes: a payment
// that closes before is in it, one that closes after is heard.
func (r *Retention) Start(ctx context.Context) error {
	if r.listening != nil {
		select {
		case <-r.listening:
		case <-ctx.Done():
			return nil
		}
	}
	t := time.NewTicker(max(r.horizon()/4, time.Millisecond))
	defer t.Stop()
	for atStart := true; ; atStart = false {
		if err := r.scan(ctx, atStart); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "retention scan incomplete")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// scan reads the cache's final payments of every provider (the thin cache's
// entries once) and hands those payment.RetentionWait gives a wait, and
// that nothing holds, to the controller.
func (r *Retention) scan(ctx context.Context, atStart bool) error {
	var provs v1alpha1.PaymentProviderList
	if err := r.Client.List(ctx, &provs, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list payment providers: %w", err)
	}
	now := r.Clock.Now()
	keys := make([]types.NamespacedName, len(provs.Items))
	for i := range provs.Items {
		keys[i] = client.ObjectKeyFromObject(&provs.Items[i])
	}
	finals, err := r.finals(ctx, keys...)
	if err != nil {
		return fmt.Errorf("list final payments: %w", err)
	}
	for i := range provs.Items {
		prov := &provs.Items[i]
		for _, e := range finals[keys[i]] {
			if e.RetentionHeld() ||
				!payment.RetentionScanHandsBack(payment.RetentionLeftSince(e.RetentionSince(), prov.Spec.FinalPaymentRetention(), now), r.horizon(), atStart) {
				continue
			}
			select {
			case r.wake <- event.GenericEvent{Object: &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: e.GetNamespace(), Name: e.GetName()}}}:
			case <-ctx.Done():
				return nil
			}
		}
	}
	return nil
}
