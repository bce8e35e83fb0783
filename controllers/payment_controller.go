package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paymentcache"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// IndexPaymentProvider indexes Payments by spec.providerRef.name, so a change
// of a PaymentProvider finds its payments without a full scan.
const IndexPaymentProvider = "spec.providerRef.name"

// IndexPaymentIdempotencyKey indexes Payments that set spec.idempotencyKey by
// "<provider>/<key>" (inbox.Key), so a new Payment finds an older one using
// its key without a scan. Default keys are not indexed: they are unique by
// construction.
const IndexPaymentIdempotencyKey = "payment.idempotencyKey"

// providerRetry is how long a payment waits when its PaymentProvider is
// missing or unusable; the provider watch usually wakes it sooner.
const providerRetry = time.Minute

// minIdleRequeue is the shortest wait of a reconcile that wrote nothing: no
// path may spin on a payment without storing what it learned.
const minIdleRequeue = time.Second

// maxInlineWait is the longest a reconcile waits in line for its provider's
// token bucket before handing the payment back to the queue.
const maxInlineWait = time.Second

// PaymentReconciler drives a Payment from manifest to the provider's final
// answer (SPEC §2.2). It does I/O only: every decision — what to call, what
// an answer or an error means, when to look again, when to give up — is
// taken by internal/payment (Plan, AfterCreate, AfterLookup, AfterQuery) from
// the stored status and the clock. Everything it needs to resume is in
// status; in memory are only the providers' rate limits and circuit breakers
// (internal/gateway) and answers whose status write failed.
type PaymentReconciler struct {
	Client client.Client
	// APIReader re-reads a payment after a write conflict and before a repeated
	// create (not the cache).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Gateway   *gateway.Gateway
	// MaxConcurrentReconciles bounds parallel reconciles (default 4).
	MaxConcurrentReconciles int
	// OverdueSource, when set, delivers payments the sweep found overdue (a
	// lost requeue); see Sweep.Source.
	OverdueSource source.Source
	// Events, when set, wakes a provider's payments when its refused
	// configuration is fixed (share the PaymentProvider controller's).
	Events *ProviderEvents
	// Ledger, when set, remembers settled payments after their objects are
	// deleted, and is read before a first create (SPEC §12.1).
	Ledger Ledger
	// Thin, when set, is the thin cache of every Payment
	// (internal/paymentcache): the news of closed payments, which the
	// manager's cache does not hold, come from it.
	Thin *paymentcache.Cache

	unstored unstoredAnswers[payment.Step, payment.Call]
	marked   markedOperations
	own      ownWrites
}

// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the reconciler, its index and its watches. The
// inbox's Payment indexes (inbox.SetupIndexes) must be registered on mgr: the
// merchant-reference index finds another Payment using the same reference.
func (r *PaymentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Payment{}, IndexPaymentProvider,
		func(o client.Object) []string { return []string{o.(*v1alpha1.Payment).Spec.ProviderRef.Name} }); err != nil {
		return fmt.Errorf("index payments by provider: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Payment{}, IndexPaymentIdempotencyKey, idempotencyKeyKeys); err != nil {
		return fmt.Errorf("index payments by idempotency key: %w", err)
	}
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 4
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Payment{}, builder.WithPredicates(paymentNews{own: &r.own})).
		Watches(&v1alpha1.PaymentProvider{}, handler.EnqueueRequestsFromMapFunc(r.paymentsOfProvider),
			// Provider status writes (circuit, backfill cursor) change
			// nothing for its payments; only a spec change does.
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if r.OverdueSource != nil {
		b = b.WatchesRawSource(r.OverdueSource)
	}
	if r.Events != nil {
		b = b.WatchesRawSource(r.Events.Source(handler.EnqueueRequestsFromMapFunc(r.paymentsOfProvider)))
	}
	if r.Thin != nil {
		b = b.WatchesRawSource(r.Thin.Source(&handler.TypedEnqueueRequestForObject[*paymentcache.Entry]{}, closedNews{own: &r.own}))
	}
	// A Refund that settled (or stopped counting) or went wakes its
	// payment: the payment's own reconcile brings its refunded total to the
	// provider's figure (payment.RefundsUncounted) and lists its Refunds.
	b = b.Watches(&v1alpha1.Refund{}, handler.EnqueueRequestsFromMapFunc(paymentOfRefund), builder.WithPredicates(refundSettlesOrGoes{}))
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("payment").
		Complete(r)
}

// paymentNews lets through the Payment updates the reconciler must act on at
// once: operator annotations, a phase or provider id changed by another
// writer (the receiver), a refund's failure to read the refunded total for
// (status.refundFailureSeenAt: the inbox sets it without moving the phase),
// deletion. Status writes that only move the schedule
// — the reconciler's own, mostly — are not news: the wake-up they need was
// already returned as RequeueAfter. Without this filter every status write
// would cost a second reconcile. For the same reason the reconciler's own
// writes are never news, whatever they changed (own, when set).
type paymentNews struct {
	predicate.Funcs
	own *ownWrites
}

func (f paymentNews) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*v1alpha1.Payment)
	n, ok2 := e.ObjectNew.(*v1alpha1.Payment)
	if !ok1 || !ok2 {
		return true
	}
	if f.own != nil && f.own.take(n) {
		return false
	}
	return paymentcache.News(o) != paymentcache.News(n) || !n.DeletionTimestamp.IsZero()
}

// closedNews lets through, from the thin cache, the news of a closed payment
// (which the manager's cache does not hold) that paymentNews lets through
// of an open one: an operator's annotation, a spec change, a phase or
// provider id an event moved, its deletion (the same News); and, at start,
// every closed payment being deleted, with an operator's annotation not
// acted on yet (set while no manager ran), or tracked and settled by the
// receiver without the money-in-flight finalizer yet (wakeAtStart). A
// payment that opens or closes is not news here: it enters or leaves the
// manager's cache, which reports it.
type closedNews struct {
	predicate.TypedFuncs[*paymentcache.Entry]
	own *ownWrites
}

func (closedNews) Create(e event.TypedCreateEvent[*paymentcache.Entry]) bool {
	return e.Object.Closed() && (e.Object.Deleting() || e.Object.Wake())
}

func (f closedNews) Update(e event.TypedUpdateEvent[*paymentcache.Entry]) bool {
	o, n := e.ObjectOld, e.ObjectNew
	// Only a closed payment's own writes are taken here: the manager's
	// typed cache, which an open one is read from, may not hold this
	// version yet. (A closing write stays waited for until a reconcile
	// reads the payment at that version, or ownWriteMaxAge.)
	if !o.Closed() || !n.Closed() || f.own != nil && f.own.take(n) {
		return false
	}
	return o.News() != n.News() || n.Deleting()
}

func (closedNews) Delete(event.TypedDeleteEvent[*paymentcache.Entry]) bool   { return false }
func (closedNews) Generic(event.TypedGenericEvent[*paymentcache.Entry]) bool { return false }

// wakeAtStart is closedNews' start case, judged on each payment as the thin
// cache decodes it (paymentcache.Options.Wake).
func wakeAtStart(p *v1alpha1.Payment) bool {
	return payment.ActionsUnanswered(p) || payment.HoldTracked(p) && !held(p)
}

// closedChange lets through, from the thin cache, every change that leaves a
// payment closed, the closing write too: the manager's cache reports a
// closing as the deletion of the open copy it had, without what that write
// stored (a provider id, a final phase). Rare: a payment closes once, and a
// closed one changes only with news.
type closedChange struct {
	predicate.TypedFuncs[*paymentcache.Entry]
}

func (closedChange) Create(event.TypedCreateEvent[*paymentcache.Entry]) bool { return false }
func (closedChange) Update(e event.TypedUpdateEvent[*paymentcache.Entry]) bool {
	// A resync (the same version again) is no change.
	return e.ObjectNew.Closed() && e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
}
func (closedChange) Delete(event.TypedDeleteEvent[*paymentcache.Entry]) bool   { return false }
func (closedChange) Generic(event.TypedGenericEvent[*paymentcache.Entry]) bool { return false }

// refundSettlesOrGoes lets through the Refunds that change what their payment
// shows: one that settled or stopped being settled (its success may move the
// refunded total; payment.RefundsUncounted), one deleted (it leaves
// status.refunds), and every settled one the cache lists at start.
type refundSettlesOrGoes struct{ predicate.Funcs }

func (refundSettlesOrGoes) Create(e event.CreateEvent) bool {
	rf, ok := e.Object.(*v1alpha1.Refund)
	return ok && rf.Status.Phase.IsFinal()
}

func (refundSettlesOrGoes) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*v1alpha1.Refund)
	n, ok2 := e.ObjectNew.(*v1alpha1.Refund)
	return ok1 && ok2 && o.Status.Phase != n.Status.Phase && (o.Status.Phase.IsFinal() || n.Status.Phase.IsFinal())
}

func (refundSettlesOrGoes) Delete(event.DeleteEvent) bool   { return true }
func (refundSettlesOrGoes) Generic(event.GenericEvent) bool { return false }

func paymentOfRefund(_ context.Context, o client.Object) []reconcile.Request {
	rf, ok := o.(*v1alpha1.Refund)
	if !ok || rf.Spec.PaymentRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rf.Namespace, Name: rf.Spec.PaymentRef.Name}}}
}

func (r *PaymentReconciler) paymentsOfProvider(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.PaymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexPaymentProvider: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list payments of provider", "provider", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, p := range list.Items {
		if !p.Status.Phase.IsFinal() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
	}
	return reqs
}

// Reconcile asks the core what to do (payment.Plan), does it, and stores
// what the core makes of the result (drive). At most one provider call per
// reconcile.
func (r *PaymentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p, fresh, done, err := readCurrent(ctx, r.Client, r.APIReader, &r.own, req.NamespacedName, &v1alpha1.Payment{})
	if done || err != nil {
		return ctrl.Result{}, err
	}
	logger := log.FromContext(ctx).WithValues("payment", req.NamespacedName.String(), "provider", p.Spec.ProviderRef.Name)
	ctx = log.IntoContext(ctx, logger)
	if !p.DeletionTimestamp.IsZero() {
		if gone, err := r.finalize(ctx, p); gone || err != nil {
			return ctrl.Result{}, err
		}
		// Money may be moving: the payment is driven on until it settles.
	}

	prov, entry, perr := r.provider(ctx, p)
	if errors.Is(perr, errProviderMissing) && !p.DeletionTimestamp.IsZero() && r.providerGone(ctx, p) {
		// Deleted with its PaymentProvider (a namespace being deleted):
		// nothing can settle it any more. It goes, remembered as unsettled,
		// so that no object of its order is created again without a human.
		return ctrl.Result{}, r.abandon(ctx, p)
	}
	pol := payment.PolicyFor(&v1alpha1.PaymentProviderSpec{})
	if prov != nil {
		pol = payment.PolicyFor(&prov.Spec)
	}
	if entry != nil {
		pol = pol.WithCapabilities(&prov.Spec, entry.Caps)
	}
	x := &paymentPass{
		pass: pass{key: req.NamespacedName, uid: string(p.UID), reader: r.APIReader, clock: r.Clock, entry: entry, unusable: perr, fresh: fresh},
		r:    r, p: p, prov: prov, pol: pol,
	}
	defer func() {
		if x.admitted {
			entry.Forgo()
		}
	}()
	res, err := drive[*v1alpha1.Payment](ctx, x, &r.unstored)
	if err != nil {
		return res, err
	}
	return res, r.holdTracked(ctx, x.p)
}

// holdTracked puts the money-in-flight finalizer on a tracked payment once
// the provider answered for it and it took, or may still take, the money
// (payment.HoldTracked), whoever wrote that answer (this reconcile, the
// inbox): from then on its deletion waits for the final answer and it is
// written to the ledger when it goes.
func (r *PaymentReconciler) holdTracked(ctx context.Context, p *v1alpha1.Payment) error {
	if !payment.HoldTracked(p) || held(p) {
		return nil
	}
	if err := holdMoney(ctx, r.Client, p, nil); err != nil {
		return err
	}
	r.own.add(p, r.Clock.Now())
	return nil
}

// paymentPass is one reconcile of a payment: the payment as last read or
// stored, its provider, and what the reconcile has done so far. Its methods
// are the payment's rules in the one loop (drive).
type paymentPass struct {
	pass
	r     *PaymentReconciler
	p     *v1alpha1.Payment
	prov  *v1alpha1.PaymentProvider
	pol   payment.Policy
	facts payment.Facts // as the last plan read them
	// admitted: a token taken and not used yet (the one of the call a
	// marker announced, taken before the marker was stored); the next call
	// goes out with it.
	// marked: this reconcile stored the create marker and has made no call
	// since, so the create has not left the process.
	admitted, marked bool
}

func (x *paymentPass) object() *v1alpha1.Payment   { return x.p }
func (x *paymentPass) replace(p *v1alpha1.Payment) { x.p = p }

func (x *paymentPass) finalize(ctx context.Context) (bool, error) { return x.r.finalize(ctx, x.p) }

// plan asks the core for the next step on the payment's facts.
func (x *paymentPass) plan(ctx context.Context, now time.Time) (payment.Step, error) {
	facts, err := x.readFacts(ctx)
	if err != nil {
		return payment.Step{}, err
	}
	x.facts = facts
	return payment.Plan(x.p, x.pol, facts, now), nil
}

// readFacts are the payment's facts (PaymentReconciler.facts) with what
// this reconcile knows of its provider and its own calls.
func (x *paymentPass) readFacts(ctx context.Context) (payment.Facts, error) {
	facts, err := x.r.facts(ctx, x.p)
	if err != nil {
		return facts, err
	}
	facts.ConfigAccepted = x.entry != nil && x.entry.ConfigProblem() == ""
	facts.ProviderUnusable = x.entry == nil
	facts.FreshOperation = x.r.marked.uncalled(x.uid, x.p.Status.Operation)
	facts.FreshCreate = x.marked
	return facts, nil
}

// hold readies the write of a marker of a money-moving call: it is stored
// only with the call's token in hand and the object held.
func (x *paymentPass) hold(ctx context.Context, step payment.Step) (ctrl.Result, bool, error) {
	r, p := x.r, x.p
	if !marks(p, step.Outcome) {
		return ctrl.Result{}, false, nil
	}
	if !p.DeletionTimestamp.IsZero() && (step.Outcome.Status.CreateRequestedAt != nil && p.Status.CreateRequestedAt == nil ||
		!controllerutil.ContainsFinalizer(p, v1alpha1.FinalizerMoneyInFlight)) {
		// Deleted before its create went out (or never held): nothing
		// may start now. (An operator's cancel or capture of a deleted
		// payment that holds money still goes: it is how its money is
		// settled.)
		release(x.entry, x.uid)
		return ctrl.Result{}, true, nil
	}
	if step.Announces != payment.Nothing && !x.admitted {
		// A create waiting for the rate limit is not marked: unmarked,
		// it is known not to have left.
		if res, ok := x.takeToken(ctx, callPriority(step.Announces, false)); !ok {
			return res, true, nil
		}
	}
	// The object must outlive the call the marker announces.
	wrote := !held(p)
	if err := holdMoney(ctx, r.Client, p, nil); err != nil {
		return ctrl.Result{}, true, err
	}
	if wrote {
		r.own.add(p, r.Clock.Now())
	}
	return ctrl.Result{}, false, nil
}

// storePlan stores what the plan decided, and remembers a create or an
// operation marked by it and not called yet.
func (x *paymentPass) storePlan(ctx context.Context, now time.Time) (bool, error) {
	opBefore := x.p.Status.Operation.DeepCopy()
	announced := payment.Nothing // by the outcome stored (after a conflict, planned again)
	stored, err := x.r.store(ctx, x.p, x.facts, func(p *v1alpha1.Payment) payment.Outcome {
		if s := payment.Plan(p, x.pol, x.facts, now); s.Action == payment.Write {
			announced = s.Announces
			return s.Outcome
		}
		announced = payment.Nothing
		return payment.Outcome{Status: p.Status}
	})
	if err != nil || !stored {
		return stored, err
	}
	x.marked = x.marked || announced == payment.Create
	// An operation marked just now has not been called yet: this process
	// knows until it calls; a new one looks it up.
	if op := x.p.Status.Operation; op != nil && (opBefore == nil || markKey(opBefore) != markKey(op)) {
		x.r.marked.set(x.uid, op)
	}
	return true, nil
}

// takeToken takes the provider's token for a call of prio; without it the
// payment goes back to the queue (res).
func (x *paymentPass) takeToken(ctx context.Context, prio gateway.Priority) (ctrl.Result, bool) {
	if x.entry == nil {
		log.FromContext(ctx).Info("provider not usable; waiting", "reason", x.unusable.Error())
		return ctrl.Result{RequeueAfter: providerRetry}, false
	}
	adm := x.r.admit(ctx, x.entry, x.uid, prio)
	if !adm.OK {
		metrics.StatusQueries.WithLabelValues(x.prov.Namespace, x.prov.Name, "deferred_"+string(adm.Reason)).Inc()
		return ctrl.Result{RequeueAfter: max(adm.Wait, minIdleRequeue)}, false
	}
	x.admitted = true
	return ctrl.Result{}, true
}

// admit takes the token of step's call, unless a marker's write took it.
func (x *paymentPass) admit(ctx context.Context, step payment.Step) (ctrl.Result, bool) {
	if x.admitted {
		return ctrl.Result{}, true
	}
	prio := callPriority(step.Action, step.Scheduled)
	if step.Read != nil {
		prio = gateway.Read // a read a settled Refund asked for
	}
	return x.takeToken(ctx, prio)
}

// moot: the payment settled (a webhook) while the query waited for its
// token: nothing is asked about a settled payment.
func (x *paymentPass) moot(ctx context.Context, step payment.Step) bool {
	seen, ok := x.r.settledMeanwhile(ctx, x.p, step)
	if ok {
		x.p = seen
	}
	return ok
}

// call makes the provider call step asks for.
func (x *paymentPass) call(ctx context.Context, step payment.Step) paymentAnswer {
	r := x.r
	x.admitted, x.marked = false, false // spent on the call below
	r.marked.drop(x.uid)                // from here on a call may have gone out
	call := r.call(ctx, x.entry, x.p, step.Action)
	// Waits (Retry-After, the next step) count from the answer.
	at := r.Clock.Now()
	x.entry.Done(ctx, call.Err)
	if step.Action == payment.Query {
		metrics.StatusQueries.WithLabelValues(x.prov.Namespace, x.prov.Name, queryResult(call.Err)).Inc()
	}
	if call.Err != nil {
		log.FromContext(ctx).Info("provider "+step.Action.String()+" failed", "error", call.Err.Error(), "class", payment.Classify(call.Err).String())
	}
	return paymentAnswer{step: step, call: call, at: at}
}

// storeAnswer stores the core's decision on an answer, with the refund
// lines the last plan read (none before the first).
func (x *paymentPass) storeAnswer(ctx context.Context, u paymentAnswer) error {
	_, err := x.r.store(ctx, x.p, x.facts, func(p *v1alpha1.Payment) payment.Outcome { return decidePayment(p, x.pol, u) })
	return err
}

// provider resolves the payment's PaymentProvider and its gateway entry. The
// provider alone is returned when only the entry is unusable.
func (r *PaymentReconciler) provider(ctx context.Context, p *v1alpha1.Payment) (*v1alpha1.PaymentProvider, *gateway.Entry, error) {
	prov := &v1alpha1.PaymentProvider{}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.ProviderRef.Name}
	if err := r.Client.Get(ctx, key, prov); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("PaymentProvider %s: %w", key, errProviderMissing)
		}
		return nil, nil, err
	}
	entry, err := r.Gateway.For(ctx, prov)
	if err != nil {
		return prov, nil, err
	}
	return prov, entry, nil
}

// facts reads what Plan needs besides the payment: before a first create,
// whether an older Payment already uses the merchant reference or the
// user-set idempotency key. When that cannot be read, nothing is created.
func (r *PaymentReconciler) facts(ctx context.Context, p *v1alpha1.Payment) (payment.Facts, error) {
	var facts payment.Facts
	refunds, err := listRefunds(ctx, r.Client, p.Namespace, p.Name)
	if err != nil {
		return payment.Facts{}, err
	}
	facts.RefundsListed, facts.RefundLines = true, payment.RefundLines(refunds)
	if p.Status.Phase.TookMoney() {
		facts.SucceededRefunds, facts.ReversedRefunds = payment.SettledRefunds(refunds)
	}
	if payment.ProviderID(p) != "" || p.Status.CreateRequestedAt != nil {
		return facts, nil
	}
	var list v1alpha1.PaymentList
	if err := r.Client.List(ctx, &list, client.InNamespace(p.Namespace),
		client.MatchingFields{inbox.IndexPaymentMerchantRef: inbox.Key(p.Spec.ProviderRef.Name, p.MerchantRef())}); err != nil {
		return payment.Facts{}, fmt.Errorf("find payments sharing merchant reference %q: %w", p.MerchantRef(), err)
	}
	facts.ReferenceOwner = payment.ReferenceOwner(p, list.Items)
	if key := p.Spec.IdempotencyKey; key != "" {
		var same v1alpha1.PaymentList
		if err := r.Client.List(ctx, &same, client.InNamespace(p.Namespace),
			client.MatchingFields{IndexPaymentIdempotencyKey: inbox.Key(p.Spec.ProviderRef.Name, key)}); err != nil {
			return payment.Facts{}, fmt.Errorf("find payments sharing idempotency key %q: %w", key, err)
		}
		facts.KeyOwner = payment.KeyOwner(p, same.Items)
	}
	recs, err := paymentLedgerFacts(ctx, r.Ledger, r.Recorder, p)
	if err != nil {
		return payment.Facts{}, err
	}
	facts.Ledger = recs
	return facts, nil
}

// idempotencyKeyKeys is the index key of a Payment's user-set idempotency key.
func idempotencyKeyKeys(o client.Object) []string {
	p, ok := o.(*v1alpha1.Payment)
	if !ok || p.Spec.ProviderRef.Name == "" || p.Spec.IdempotencyKey == "" {
		return nil
	}
	return []string{inbox.Key(p.Spec.ProviderRef.Name, p.Spec.IdempotencyKey)}
}

// errProviderMissing: the payment's PaymentProvider does not exist.
var errProviderMissing = errors.New("not found")

// providerGone confirms with the API server (not a cache that may not have
// caught up) that the payment's PaymentProvider does not exist.
func (r *PaymentReconciler) providerGone(ctx context.Context, p *v1alpha1.Payment) bool {
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.ProviderRef.Name}, &v1alpha1.PaymentProvider{})
	return apierrors.IsNotFound(err)
}

// abandon lets a deleted payment whose provider is gone go without its final
// answer: recorded in the ledger as it stands, with a Warning Event.
func (r *PaymentReconciler) abandon(ctx context.Context, p *v1alpha1.Payment) error {
	why := fmt.Sprintf("deleted with its PaymentProvider %s while waiting for %s", p.Spec.ProviderRef.Name, payment.InFlight(p))
	return letGoUnsettled(ctx, r.Client, r.Ledger, r.Recorder, p, p.OrderIdentity(), payment.UnsettledRecord(p, r.Clock.Now()), why)
}

// marks reports whether out stores a marker of a money-moving call that p
// does not have yet (a create or an operation), or adopts an order's
// outcome: from then on the object is remembered in the ledger when it goes.
func marks(p *v1alpha1.Payment, out payment.Outcome) bool {
	return out.Status.CreateRequestedAt != nil && p.Status.CreateRequestedAt == nil ||
		out.Status.Operation != nil && p.Status.Operation == nil ||
		out.Status.AdoptedAt != nil && p.Status.AdoptedAt == nil
}

// finalize handles a deleted payment: one that holds no money in flight is
// remembered in the ledger and let go (true); one whose money may still be
// moving stays, says why, and is driven on (false).
func (r *PaymentReconciler) finalize(ctx context.Context, p *v1alpha1.Payment) (bool, error) {
	if !controllerutil.ContainsFinalizer(p, v1alpha1.FinalizerMoneyInFlight) {
		return true, nil
	}
	what := payment.InFlight(p)
	if what == "" {
		// Its Refunds in flight need it: they reach the provider through it.
		// Asked of the API server: a Refund marked a moment ago counts.
		refunds, err := listRefunds(ctx, r.APIReader, p.Namespace, p.Name)
		if err != nil {
			return false, err
		}
		for i := range refunds {
			if w := payment.RefundInFlight(&refunds[i]); w != "" {
				what = "its Refund " + refunds[i].Name + ": " + w
				break
			}
		}
		if name := payment.Uncounted(p, refunds); what == "" && name != "" {
			what = "its refunded total to count its Refund " + name + " (a read of the provider's figure)"
		}
	}
	if what != "" {
		deletionWaits(r.Recorder, p, what)
		return false, nil
	}
	rec, ok := payment.PaymentRecord(p, r.Clock.Now())
	if err := letGo(ctx, r.Client, r.Ledger, p, p.OrderIdentity(), rec, ok); err != nil {
		return false, err
	}
	log.FromContext(ctx).Info("deleted payment let go", "phase", p.Status.Phase, "remembered", ok && r.Ledger != nil)
	return true, nil
}

// admit waits in line for the provider's token when the wait is short, so a
// paced backlog costs one reconcile per call; a longer wait, an open circuit
// or a refused configuration hand the payment back to the queue.
func (r *PaymentReconciler) admit(ctx context.Context, e *gateway.Entry, uid string, prio gateway.Priority) gateway.Admission {
	return admitWait(ctx, r.Clock, e, uid, prio)
}

// callPriority is a call's place in its provider's line (SPEC §12.3): a
// status query on its schedule goes after every other call, each of which
// moves money or finds out whether it moved (create, its look-up,
// authorize, capture, cancel, refund, the look-up of an operation's outcome).
func callPriority(a payment.Action, scheduled bool) gateway.Priority {
	if a == payment.Query && scheduled {
		return gateway.Scheduled
	}
	return gateway.Money
}

// settledMeanwhile returns the manager's freshest copy of p (its cache) when
// that copy makes step's query moot: the payment settled while the query
// waited for its token, or while this reconcile read and planned.
func (r *PaymentReconciler) settledMeanwhile(ctx context.Context, p *v1alpha1.Payment, step payment.Step) (*v1alpha1.Payment, bool) {
	if step.Action != payment.Query {
		return nil, false
	}
	key := client.ObjectKeyFromObject(p)
	written := r.own.pending(key)
	seen := &v1alpha1.Payment{}
	if err := r.Client.Get(ctx, key, seen); err != nil || seen.UID != p.UID || written != nil && written.behind(seen.UID, seen.ResourceVersion) {
		// (A copy that may be older than this reconciler's last write is
		// no news of the payment.)
		return nil, false
	}
	return seen, payment.QueryMoot(step, seen)
}

// call makes the provider call the plan asked for.
func (r *PaymentReconciler) call(ctx context.Context, e *gateway.Entry, p *v1alpha1.Payment, action payment.Action) payment.Call {
	var (
		pp  provider.Payment
		err error
	)
	switch action {
	case payment.Create:
		pp, err = e.Provider.Create(ctx, createRequest(p))
	case payment.Lookup:
		if !e.Caps.LookupByReference {
			return payment.Call{Err: provider.Unsupported(e.Key.String(), "find")}
		}
		pp, err = e.Provider.FindByMerchantReference(ctx, p.MerchantRef())
	case payment.Query:
		pp, err = e.Provider.Get(ctx, payment.ProviderID(p))
	case payment.CallAuthorize, payment.CallCapture, payment.CallCancel:
		op := p.Status.Operation
		req := provider.ActionRequest{
			PaymentID: payment.ProviderID(p), IdempotencyKey: payment.OperationKey(p, op.Kind),
			Currency: p.Spec.Amount.Currency, Reason: op.Reason,
		}
		if op.Amount != nil {
			req.Amount = op.Amount.Value
		}
		switch action {
		case payment.CallAuthorize:
			pp, err = e.Provider.Authorize(ctx, req)
		case payment.CallCapture:
			pp, err = e.Provider.Capture(ctx, req)
		default:
			pp, err = e.Provider.Cancel(ctx, req)
		}
	}
	return payment.Call{Payment: pp, Err: err}
}

// createRequest is what the provider's create is asked for: the spec, with
// the payment's idempotency key, merchant reference and create marker's time.
func createRequest(p *v1alpha1.Payment) provider.CreateRequest {
	req := provider.CreateRequest{
		IdempotencyKey:    payment.CreateKey(p),
		MerchantReference: p.MerchantRef(),
		Description:       p.Spec.Description,
		Amount:            p.Spec.Amount.Value,
		Currency:          p.Spec.Amount.Currency,
		Metadata:          p.Spec.Metadata,
		CaptureMethod:     provider.CaptureAutomatic,
	}
	if p.Spec.CaptureMethod == v1alpha1.CaptureManual {
		req.CaptureMethod = provider.CaptureManual
	}
	if c := p.Spec.Checkout; c != nil {
		req.Checkout = &provider.Checkout{ReturnURL: c.ReturnURL, CancelURL: c.CancelURL}
	}
	if m := p.Spec.PaymentMethod; m != nil {
		req.StoredMethod = &provider.StoredMethod{Customer: m.Customer, PaymentMethod: m.PaymentMethod}
	}
	if d := p.Spec.ExpiresAfter; d != nil {
		req.ExpiresAt = p.CreationTimestamp.Add(d.Duration)
	}
	if t := p.Status.CreateRequestedAt; t != nil {
		// The adapters count every time-dependent parameter from the marker,
		// so each retry of the create sends the same request.
		req.RequestedAt = t.Time
	}
	return req
}

// store writes what decide makes of the payment and publishes the outcome.
// Every write carries the payment's list of its Refunds as facts has it.
func (r *PaymentReconciler) store(ctx context.Context, p *v1alpha1.Payment, facts payment.Facts, decide func(*v1alpha1.Payment) payment.Outcome) (bool, error) {
	out, wrote, err := payment.Store(ctx, statuswriter.Writer{Client: r.Client, APIReader: r.APIReader}, p, func(p *v1alpha1.Payment) payment.Outcome {
		return payment.WithRefundLines(decide(p), facts)
	})
	if err != nil {
		return false, err
	}
	if wrote {
		r.own.add(p, r.Clock.Now())
		payment.Record(r.Recorder, p, out)
	}
	return wrote, nil
}

// requeueAt is the wake-up for at. A reconcile that stored nothing never
// comes back in under a second.
func requeueAt(at, now time.Time, wrote bool) ctrl.Result {
	d := at.Sub(now)
	if !wrote {
		d = max(d, minIdleRequeue)
	}
	return ctrl.Result{RequeueAfter: max(d, 10*time.Millisecond)}
}

func release(e *gateway.Entry, uid string) {
	if e != nil {
		e.Release(uid)
	}
}

func queryResult(err error) string {
	switch payment.Classify(err) {
	case payment.Answered:
		return "found"
	case payment.NotFound:
		return "not_found"
	case payment.NoAnswer:
		return "error"
	case payment.ConfigProblem, payment.Unsupported:
		return "config_error"
	default:
		return "rejected"
	}
}

// paymentAnswer is a payment call's answer.
type paymentAnswer = answer[payment.Step, payment.Call]

// decidePayment is the core's decision on an answer, for the payment as it
// is now.
func decidePayment(p *v1alpha1.Payment, pol payment.Policy, u paymentAnswer) payment.Outcome {
	switch u.step.Action {
	case payment.Create:
		return payment.AfterCreate(p, pol, u.call, u.at)
	case payment.Lookup:
		return payment.AfterLookup(p, pol, u.call, u.at)
	case payment.Query:
		if u.step.Read != nil {
			return payment.AfterRefundRead(p, pol, u.call, *u.step.Read, u.at)
		}
		return payment.AfterQuery(p, pol, u.call, u.step.CloseOut, u.at)
	default:
		return payment.AfterOperation(p, pol, payment.OperationOf(u.step.Action), u.call, u.at)
	}
}

// markedOperations remembers, per payment UID, the operation marker this
// process stored and has not called since, so the call in a later reconcile
// needs no lookup first. It lives and dies with the process: after a crash
// nothing is remembered and the outcome is looked up, as it must be.
type markedOperations struct {
	mu sync.Mutex
	m  map[string]string
}

// markKey names a marker as stored: its kind and its time to the second.
func markKey(op *v1alpha1.Operation) string {
	return string(op.Kind) + "@" + op.RequestedAt.UTC().Truncate(time.Second).Format(time.RFC3339)
}

func (o *markedOperations) set(uid string, op *v1alpha1.Operation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]string{}
	}
	o.m[uid] = markKey(op)
}

// uncalled reports whether op is the marker this process stored for the
// payment and has not called since; a payment without one is forgotten.
func (o *markedOperations) uncalled(uid string, op *v1alpha1.Operation) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	k, ok := o.m[uid]
	if op == nil {
		delete(o.m, uid)
		return false
	}
	return ok && k == markKey(op)
}

func (o *markedOperations) drop(uid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, uid)
}
