package controllers

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paymentcache"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// RefundReconciler drives a Refund to the provider's final answer (SPEC
// §11.7): I/O only, around payment.PlanRefund and the After* functions. It
// makes each Refund owned by its Payment (garbage-collected with it) and
// writes nothing else of the Payment: the Payment's own reconcile lists its
// Refunds (status.refunds) and reads the provider's cumulative refunded
// figure once a Refund settles.
type RefundReconciler struct {
	// Ledger, when set, remembers settled Refunds after their objects are
	// deleted, and is read before a refund is sent (SPEC §12.1).
	Ledger Ledger
	// Thin, when set, is the thin cache of every Payment
	// (internal/paymentcache): the changes of closed payments, which the
	// manager's cache does not hold, come from it.
	Thin      *paymentcache.Cache
	Client    client.Client
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Gateway   *gateway.Gateway
	// MaxConcurrentReconciles bounds parallel reconciles (default 2).
	MaxConcurrentReconciles int

	// admission serializes, per payment, the decision and marker of each
	// Refund not yet sent: two Refunds of one payment reconciled together
	// never both see the other as not sent.
	admission keyedLocks
	unstored  unstoredAnswers[payment.RefundStep, payment.RefundCall]
	// own: the reconciler's writes of each Refund, until the cache has
	// them (a reconcile never starts from an older copy: current).
	own ownWrites
}

// refundAnswer is a refund call's answer.
type refundAnswer = answer[payment.RefundStep, payment.RefundCall]

// decideRefund is the core's decision on an answer, for the Refund as it is
// now.
func decideRefund(rf *v1alpha1.Refund, pol payment.Policy, u refundAnswer) payment.RefundOutcome {
	switch u.step.Action {
	case payment.Create:
		return payment.AfterRefundCreate(rf, pol, u.call, u.at)
	case payment.Lookup:
		return payment.AfterRefundLookup(rf, pol, u.call, u.at)
	default:
		return payment.AfterRefundQuery(rf, pol, u.call, u.at)
	}
}

// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=refunds,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=refunds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments,verbs=get;list;watch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the controller. The inbox's indexes
// (inbox.SetupIndexes, which index Refunds too) must be registered on mgr.
func (r *RefundReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 2
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.Thin != nil {
		// A closed payment's change (news the manager's cache does not
		// hold) may move its Refunds' allowance too.
		b = b.WatchesRawSource(r.Thin.Source(handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, e *paymentcache.Entry) []reconcile.Request {
			return r.refundsOfPayment(ctx, e)
		}), closedChange{}))
	}
	return b.
		Named("refund").
		For(&v1alpha1.Refund{}, builder.WithPredicates(refundNews{own: &r.own})).
		// A payment whose change may move its Refunds' allowance (it took
		// its money, ended, was reviewed or resolved, learned a new
		// refunded total) may let its waiting Refunds go, and one that
		// counted a deleted Refund lets it go.
		Watches(&v1alpha1.Payment{}, handler.EnqueueRequestsFromMapFunc(r.refundsOfPayment),
			builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
				return payment.AllowanceMoved(e.ObjectOld.(*v1alpha1.Payment), e.ObjectNew.(*v1alpha1.Payment))
			}})).
		// A Refund that is decided, settles or goes away may let the other
		// Refunds of its payment go: they wait for an earlier Refund to be
		// decided or, while the provider's refunded total may already count
		// it, to settle.
		Watches(&v1alpha1.Refund{}, handler.EnqueueRequestsFromMapFunc(r.waitingSiblings),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false },
				UpdateFunc: func(e event.UpdateEvent) bool {
					o, n := e.ObjectOld.(*v1alpha1.Refund), e.ObjectNew.(*v1alpha1.Refund)
					return o.Status.Phase != n.Status.Phase || (o.Status.CreateRequestedAt == nil) != (n.Status.CreateRequestedAt == nil) ||
						!payment.SameMoney(o.Status.Amount, n.Status.Amount)
				},
			})).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// waitingSiblings are the other Refunds of o's payment that have not been
// sent: the ones that may be waiting for o.
func (r *RefundReconciler) waitingSiblings(ctx context.Context, o client.Object) []reconcile.Request {
	rf, ok := o.(*v1alpha1.Refund)
	if !ok {
		return nil
	}
	refunds, err := listRefunds(ctx, r.Client, rf.Namespace, rf.Spec.PaymentRef.Name)
	if err != nil {
		log.FromContext(ctx).Error(err, "list refunds of payment", "payment", rf.Spec.PaymentRef.Name)
		return nil
	}
	var reqs []reconcile.Request
	for i := range refunds {
		s := &refunds[i]
		if s.UID != rf.UID && !s.Status.Phase.IsFinal() && s.Status.CreateRequestedAt == nil && s.Status.ProviderRefundID == "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
		}
	}
	return reqs
}

// refundNews: like paymentNews, a Refund's own schedule writes are not news.
// It tells own (when set) that the cache holds the version delivered.
type refundNews struct {
	predicate.Funcs
	own *ownWrites
}

func (f refundNews) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*v1alpha1.Refund)
	n, ok2 := e.ObjectNew.(*v1alpha1.Refund)
	if !ok1 || !ok2 {
		return true
	}
	if f.own != nil {
		f.own.take(n)
	}
	return o.Generation != n.Generation || !maps.Equal(o.Annotations, n.Annotations) ||
		o.Status.Phase != n.Status.Phase || o.Status.ProviderRefundID != n.Status.ProviderRefundID || !n.DeletionTimestamp.IsZero()
}

func (r *RefundReconciler) refundsOfPayment(ctx context.Context, o client.Object) []reconcile.Request {
	refunds, err := listRefunds(ctx, r.Client, o.GetNamespace(), o.GetName())
	if err != nil {
		log.FromContext(ctx).Error(err, "list refunds of payment", "payment", o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range refunds {
		// A deleted one may be waiting for the payment to count it.
		if !refunds[i].Status.Phase.IsFinal() || !refunds[i].DeletionTimestamp.IsZero() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&refunds[i])})
		}
	}
	return reqs
}

func listRefunds(ctx context.Context, c client.Reader, ns, paymentName string) ([]v1alpha1.Refund, error) {
	var l v1alpha1.RefundList
	if err := c.List(ctx, &l, client.InNamespace(ns), client.MatchingFields{inbox.IndexRefundPayment: paymentName}); err != nil {
		return nil, fmt.Errorf("list refunds of payment %s/%s: %w", ns, paymentName, err)
	}
	return l.Items, nil
}

// Reconcile asks the core what to do for the Refund, does it, and stores
// what the core makes of the result. At most one provider call per reconcile.
func (r *RefundReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rf, fresh, done, err := readCurrent(ctx, r.Client, r.APIReader, &r.own, req.NamespacedName, &v1alpha1.Refund{})
	if done || err != nil {
		return ctrl.Result{}, err
	}
	if _, kept := r.unstored.get(string(rf.UID), r.Clock.Now()); !kept && payment.RefundAtRest(rf, r.Clock.Now()) {
		// Settled and owned, nothing to do: its payment (once closed, a
		// read of the API server) and provider are not read.
		if r.Gateway != nil {
			r.Gateway.ReleaseEverywhere(string(rf.UID))
		}
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx).WithValues("refund", req.NamespacedName.String(), "payment", rf.Spec.PaymentRef.Name)
	ctx = log.IntoContext(ctx, logger)
	p := &v1alpha1.Payment{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: rf.Namespace, Name: rf.Spec.PaymentRef.Name}, p); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		p = nil
	}
	if !rf.DeletionTimestamp.IsZero() {
		if gone, err := r.finalize(ctx, rf, p); gone || err != nil {
			return ctrl.Result{}, err
		}
		// Money may be moving: the refund is driven on until it settles.
	}
	x := &refundPass{
		pass: pass{key: req.NamespacedName, uid: string(rf.UID), reader: r.APIReader, clock: r.Clock, keptIsWrite: true, fresh: fresh},
		r:    r, rf: rf, p: p, decided: func() {},
	}
	defer func() { x.decided() }()
	if err := x.readSiblings(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if providerGone := x.readProvider(ctx); providerGone && !rf.DeletionTimestamp.IsZero() && r.confirmGone(ctx, rf, p) {
		// Deleted with its payment or provider gone (a namespace being
		// deleted): nothing can settle it any more. It goes, remembered as
		// unsettled, so that a Refund of the same name waits for a human.
		return ctrl.Result{}, r.abandon(ctx, rf)
	}
	res, err := drive[*v1alpha1.Refund](ctx, x, &r.unstored)
	if err != nil {
		return res, err
	}
	// Owned by its Payment in the patch that holds it before its marker
	// (hold), or else now.
	if x.owes() {
		if err := r.ownBy(ctx, x.rf, x.p); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	return res, nil
}

// owes reports whether the Refund still lacks its Payment's owner
// reference (and is not being deleted).
func (x *refundPass) owes() bool {
	return x.p != nil && x.rf.DeletionTimestamp.IsZero() && !metav1.IsControlledBy(x.rf, x.p) && !ownedBy(x.rf, x.p)
}

// refundPass is one reconcile of a Refund: the Refund as last read or
// stored, its payment (nil when gone), the other Refunds of the payment, its
// provider, and what the reconcile has done so far.
type refundPass struct {
	pass
	r        *RefundReconciler
	rf       *v1alpha1.Refund
	p        *v1alpha1.Payment
	siblings []v1alpha1.Refund
	pol      payment.Policy
	facts    payment.RefundFacts // as the last plan read them
	// decided releases the payment's admission lock, held while this
	// Refund decides how much it may take.
	decided func()
}

func (x *refundPass) object() *v1alpha1.Refund    { return x.rf }
func (x *refundPass) replace(rf *v1alpha1.Refund) { x.rf = rf }

func (x *refundPass) finalize(ctx context.Context) (bool, error) { return x.r.finalize(ctx, x.rf, x.p) }

// plan asks the core for the next step on the Refund's facts.
func (x *refundPass) plan(ctx context.Context, now time.Time) (payment.RefundStep, error) {
	facts := payment.RefundFacts{Payment: x.p, Siblings: x.siblings, ConfigAccepted: x.entry != nil && x.entry.ConfigProblem() == ""}
	recs, err := x.r.ledgerFacts(ctx, x.rf, x.p)
	if err != nil {
		return payment.RefundStep{}, err
	}
	facts.Ledger = recs
	x.facts = facts
	return payment.PlanRefund(x.rf, x.pol, facts, now), nil
}

// readSiblings reads the other Refunds of the payment. Deciding how much
// this Refund may take is one decision per payment at a time, on the other
// Refunds as the API server has them (the cache may not hold a marker stored
// a moment ago).
func (x *refundPass) readSiblings(ctx context.Context) error {
	if x.p == nil {
		return nil
	}
	reader := client.Reader(x.r.Client)
	if st := &x.rf.Status; st.CreateRequestedAt == nil && st.ProviderRefundID == "" && !st.Phase.IsFinal() {
		x.decided = x.r.admission.lock(string(x.p.UID))
		reader = x.r.APIReader
	}
	all, err := listRefunds(ctx, reader, x.rf.Namespace, x.p.Name)
	if err != nil {
		return err
	}
	for _, s := range all {
		if s.UID != x.rf.UID {
			x.siblings = append(x.siblings, s)
		}
	}
	return nil
}

// readProvider resolves the payment's provider, its policy and gateway
// entry, and reports whether the payment or its provider is gone.
func (x *refundPass) readProvider(ctx context.Context) (gone bool) {
	x.pol = payment.PolicyFor(&v1alpha1.PaymentProviderSpec{})
	if x.p == nil {
		return true
	}
	prov := &v1alpha1.PaymentProvider{}
	err := x.r.Client.Get(ctx, types.NamespacedName{Namespace: x.p.Namespace, Name: x.p.Spec.ProviderRef.Name}, prov)
	if err != nil {
		return apierrors.IsNotFound(err)
	}
	x.pol = payment.PolicyFor(&prov.Spec)
	if x.entry, err = x.r.Gateway.For(ctx, prov); err == nil {
		x.pol.Lifecycle, x.pol.LifecycleKnown = x.entry.Caps.Lifecycle, true
	} else {
		log.FromContext(ctx).Info("provider not usable; waiting", "reason", err.Error())
	}
	return false
}

// hold readies the write of a marker: only on a Refund held.
func (x *refundPass) hold(ctx context.Context, step payment.RefundStep) (ctrl.Result, bool, error) {
	rf, p := x.rf, x.p
	if !(step.Outcome.Status.CreateRequestedAt != nil && rf.Status.CreateRequestedAt == nil ||
		step.Outcome.Status.AdoptedAt != nil && rf.Status.AdoptedAt == nil) {
		return ctrl.Result{}, false, nil
	}
	if step.Outcome.Status.CreateRequestedAt != nil && (!rf.DeletionTimestamp.IsZero() || p != nil && !p.DeletionTimestamp.IsZero()) ||
		!rf.DeletionTimestamp.IsZero() && !controllerutil.ContainsFinalizer(rf, v1alpha1.FinalizerMoneyInFlight) {
		// Deleted (or its payment is) before anything went out:
		// nothing may start now.
		release(x.entry, x.uid)
		return ctrl.Result{}, true, nil
	}
	// The Refund must outlive the call its marker announces, and
	// remember its order when its Payment is gone. A Refund not owned by
	// its Payment yet is owned in the same patch.
	var own []func() error
	if x.owes() {
		own = append(own, func() error { return x.r.setOwner(rf, p) })
	}
	if err := x.r.holdMoney(ctx, rf, p, own...); err != nil {
		return ctrl.Result{}, true, err
	}
	return ctrl.Result{}, false, nil
}

// storePlan stores what the plan decided.
func (x *refundPass) storePlan(ctx context.Context, now time.Time) (bool, error) {
	stored, err := x.r.store(ctx, x.rf, x.p, func(rf *v1alpha1.Refund) payment.RefundOutcome {
		if s := payment.PlanRefund(rf, x.pol, x.facts, now); s.Action == payment.Write {
			return s.Outcome
		}
		return payment.RefundOutcome{Status: rf.Status}
	})
	if err != nil || !stored {
		return stored, err
	}
	if x.rf.Status.CreateRequestedAt != nil || x.rf.Status.Phase.IsFinal() {
		// Decided and stored: the next Refund of the payment may decide.
		x.decided()
		x.decided = func() {}
	}
	return true, nil
}

// admit takes the provider's token for step's call.
func (x *refundPass) admit(ctx context.Context, step payment.RefundStep) (ctrl.Result, bool) {
	adm := admitWait(ctx, x.r.Clock, x.entry, x.uid, callPriority(step.Action, step.Scheduled))
	if !adm.OK {
		return ctrl.Result{RequeueAfter: max(adm.Wait, minIdleRequeue)}, false
	}
	return ctrl.Result{}, true
}

// moot: a Refund's call is never made moot between its plan and the call.
func (x *refundPass) moot(context.Context, payment.RefundStep) bool { return false }

// call makes the refund call step asks for.
func (x *refundPass) call(ctx context.Context, step payment.RefundStep) refundAnswer {
	call := x.r.call(ctx, x.entry, x.rf, x.p, step.Action)
	at := x.r.Clock.Now()
	x.entry.Done(ctx, call.Err)
	if call.Err != nil {
		log.FromContext(ctx).Info("provider refund "+step.Action.String()+" failed", "error", call.Err.Error(), "class", payment.Classify(call.Err).String())
	}
	return refundAnswer{step: step, call: call, at: at}
}

// storeAnswer stores the core's decision on an answer.
func (x *refundPass) storeAnswer(ctx context.Context, u refundAnswer) error {
	_, err := x.r.store(ctx, x.rf, x.p, func(rf *v1alpha1.Refund) payment.RefundOutcome { return decideRefund(rf, x.pol, u) })
	return err
}

// ledgerFacts reads the ledger's records of a Refund of the same name of
// the same order, before this one is sent.
func (r *RefundReconciler) ledgerFacts(ctx context.Context, rf *v1alpha1.Refund, p *v1alpha1.Payment) ([]payment.LedgerRecord, error) {
	st := &rf.Status
	if r.Ledger == nil || p == nil || st.CreateRequestedAt != nil || st.ProviderRefundID != "" || st.Phase.IsFinal() {
		return nil, nil
	}
	return readLedger(ctx, r.Ledger, r.Recorder, rf, v1alpha1.RefundIdentity(p, rf.Name), "refund "+rf.Name)
}

// holdMoney puts the money-in-flight finalizer on the Refund, with the
// ledger identity it will be remembered under (its Payment may be gone by
// the time it is let go).
func (r *RefundReconciler) holdMoney(ctx context.Context, rf *v1alpha1.Refund, p *v1alpha1.Payment, also ...func() error) error {
	wrote := !held(rf)
	if err := holdMoney(ctx, r.Client, rf, ledgerIdentity(rf, p), also...); err != nil {
		return err
	}
	if wrote {
		r.own.add(rf, r.Clock.Now())
	}
	return nil
}

// ledgerIdentity is the annotation that remembers rf's order (its payment's)
// when its Payment is gone.
func ledgerIdentity(rf *v1alpha1.Refund, p *v1alpha1.Payment) map[string]string {
	if p == nil || rf.Annotations[v1alpha1.AnnotationLedgerIdentity] != "" {
		return nil
	}
	return map[string]string{v1alpha1.AnnotationLedgerIdentity: v1alpha1.RefundIdentity(p, rf.Name)}
}

// ownBy makes rf owned by its Payment: deleted with it, and never left
// behind. It is held (holdMoney) only right before its marker: a Refund that
// never sends anything carries no money-uid, so a copy of it applied again
// is not taken for a restored one that sent its refund. A Refund held in
// this reconcile was owned in that patch.
func (r *RefundReconciler) ownBy(ctx context.Context, rf *v1alpha1.Refund, p *v1alpha1.Payment) error {
	base := rf.DeepCopy()
	if err := r.setOwner(rf, p); err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, rf, client.MergeFrom(base)); err != nil {
		return err
	}
	r.own.add(rf, r.Clock.Now())
	return nil
}

// setOwner makes p rf's owner, in memory.
func (r *RefundReconciler) setOwner(rf *v1alpha1.Refund, p *v1alpha1.Payment) error {
	return controllerutil.SetOwnerReference(p, rf, r.Scheme, controllerutil.WithBlockOwnerDeletion(true))
}

// confirmGone confirms with the API server (not a cache that may not have
// caught up) that the Refund's payment, or its provider, does not exist.
func (r *RefundReconciler) confirmGone(ctx context.Context, rf *v1alpha1.Refund, p *v1alpha1.Payment) bool {
	if p == nil {
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: rf.Namespace, Name: rf.Spec.PaymentRef.Name}, &v1alpha1.Payment{})
		return apierrors.IsNotFound(err)
	}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.ProviderRef.Name}, &v1alpha1.PaymentProvider{})
	return apierrors.IsNotFound(err)
}

// abandon lets a deleted Refund whose payment or provider is gone go
// without its final answer: recorded in the ledger as it stands, with a
// Warning Event.
func (r *RefundReconciler) abandon(ctx context.Context, rf *v1alpha1.Refund) error {
	why := "deleted with its payment or provider gone while waiting for " + payment.RefundInFlight(rf)
	return letGoUnsettled(ctx, r.Client, r.Ledger, r.Recorder, rf, rf.Annotations[v1alpha1.AnnotationLedgerIdentity], payment.UnsettledRefundRecord(rf, r.Clock.Now()), why)
}

// finalize handles a deleted Refund: settled (or never sent), it is
// remembered in the ledger and let go (true); in flight, or settled but not
// yet counted in the refunded total of its payment p (nil when gone), it
// stays, says why, and is driven on (false).
func (r *RefundReconciler) finalize(ctx context.Context, rf *v1alpha1.Refund, p *v1alpha1.Payment) (bool, error) {
	if !controllerutil.ContainsFinalizer(rf, v1alpha1.FinalizerMoneyInFlight) {
		return true, nil
	}
	what := payment.RefundInFlight(rf)
	if what == "" && p != nil && payment.Uncounted(p, []v1alpha1.Refund{*rf}) != "" {
		what = "its payment " + p.Name + " to count it in its refunded total (a read of the provider's figure)"
	}
	if what != "" {
		deletionWaits(r.Recorder, rf, what)
		return false, nil
	}
	rec, ok := payment.RefundRecord(rf, r.Clock.Now())
	id := rf.Annotations[v1alpha1.AnnotationLedgerIdentity]
	if err := letGo(ctx, r.Client, r.Ledger, rf, id, rec, ok && id != ""); err != nil {
		return false, err
	}
	return true, nil
}

func ownedBy(o, owner metav1.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// call makes the refund call the plan asked for. p is the Payment refunded
// (there is no provider to call without it); the default key derives from it.
func (r *RefundReconciler) call(ctx context.Context, e *gateway.Entry, rf *v1alpha1.Refund, p *v1alpha1.Payment, action payment.Action) payment.RefundCall {
	st := &rf.Status
	var (
		got provider.Refund
		err error
	)
	switch action {
	case payment.Create:
		capture, ref := payment.RefundCallNames(p, rf)
		got, err = e.Provider.CreateRefund(ctx, provider.RefundRequest{
			PaymentID: st.ProviderPaymentID, IdempotencyKey: payment.RefundCallKey(p, rf), Reference: rf.Reference(),
			Amount: st.Amount.Value, Currency: st.Amount.Currency, Reason: rf.Spec.Reason,
			MerchantReference: ref, CaptureID: capture,
		})
	case payment.Lookup:
		if !e.Caps.Lifecycle.RefundLookup {
			return payment.RefundCall{Err: provider.Unsupported(e.Key.String(), "find refund")}
		}
		got, err = e.Provider.FindRefund(ctx, st.ProviderPaymentID, rf.Reference())
	default:
		got, err = e.Provider.GetRefund(ctx, st.ProviderPaymentID, st.ProviderRefundID)
	}
	return payment.RefundCall{Refund: got, Err: err}
}

// store writes what decide makes of the Refund and publishes the outcome.
func (r *RefundReconciler) store(ctx context.Context, rf *v1alpha1.Refund, p *v1alpha1.Payment, decide func(*v1alpha1.Refund) payment.RefundOutcome) (bool, error) {
	out, wrote, err := payment.StoreRefund(ctx, statuswriter.Writer{Client: r.Client, APIReader: r.APIReader}, rf, decide)
	if err != nil {
		return false, err
	}
	if wrote {
		r.own.add(rf, r.Clock.Now())
		payment.RecordRefund(r.Recorder, rf, p, out)
	}
	return wrote, nil
}

// admitWait is the reconcilers' way through the gateway: a short wait for
// the token inline, a longer one handed back to the queue.
func admitWait(ctx context.Context, clk clock.PassiveClock, e *gateway.Entry, uid string, prio gateway.Priority) gateway.Admission {
	for {
		adm := e.Admit(uid, prio, clk.Now())
		if adm.OK || adm.Reason != gateway.DeferRateLimited || adm.Wait >= maxInlineWait {
			return adm
		}
		t := time.NewTimer(adm.Wait)
		select {
		case <-ctx.Done():
			t.Stop()
			e.Release(uid)
			return gateway.Admission{Wait: minIdleRequeue, Reason: gateway.DeferRateLimited}
		case <-t.C:
		}
	}
}

// keyedLocks is a mutex per key, kept only while someone holds or waits.
type keyedLocks struct {
	mu sync.Mutex
	m  map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

// lock takes key's mutex and returns its release.
func (k *keyedLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedLock{}
	}
	l := k.m[key]
	if l == nil {
		l = &keyedLock{}
		k.m[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
