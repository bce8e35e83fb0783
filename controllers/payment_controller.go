package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// IndexPaymentProvider indexes Payments by spec.providerRef.name, so a change
// of a PaymentProvider finds its payments without a full scan.
const IndexPaymentProvider = "spec.providerRef.name"

// providerRetry is how long a payment waits when its PaymentProvider is
// missing or unusable; the provider watch usually wakes it sooner.
const providerRetry = time.Minute

// PaymentReconciler drives a Payment from manifest to the provider's final
// answer (SPEC §2.2): it creates the payment at the provider without ever
// double-charging, then queries its status on the provider's backoff schedule.
// Everything it needs to resume is in status; nothing lives in memory except
// the per-provider rate limit and circuit breaker.
type PaymentReconciler struct {
	Client client.Client
	// APIReader re-reads a payment after a write conflict (not the cache).
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
}

// SetupWithManager registers the reconciler, its index and its watches.
func (r *PaymentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.Payment{}, IndexPaymentProvider,
		func(o client.Object) []string { return []string{o.(*v1alpha1.Payment).Spec.ProviderRef.Name} }); err != nil {
		return fmt.Errorf("index payments by provider: %w", err)
	}
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 4
	}
	// No GenerationChangedPredicate: the reconciler must see status changes
	// written by the webhook receiver, and annotation changes (operator
	// actions), neither of which moves the generation.
	// Provider status writes (circuit, backfill cursor) change nothing for
	// its payments; only a spec change does.
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Payment{}).
		Watches(&v1alpha1.PaymentProvider{}, handler.EnqueueRequestsFromMapFunc(r.paymentsOfProvider),
			builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if r.OverdueSource != nil {
		b = b.WatchesRawSource(r.OverdueSource)
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Named("payment").
		Complete(r)
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

// Reconcile reads like the state diagram: operator actions first, then a
// switch on the stored phase.
func (r *PaymentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1alpha1.Payment{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("payment", req.NamespacedName.String(), "provider", p.Spec.ProviderRef.Name))

	if err := r.operatorActions(ctx, p); err != nil {
		return ctrl.Result{}, err
	}

	switch phase := p.Status.Phase; {
	case phase.IsFinal():
		// Settled: only webhooks, backfill or an operator move it now.
		return ctrl.Result{}, nil
	case phase == v1alpha1.PhaseUnknown && p.Status.Query.NextTime == nil:
		// Waiting for a human (or a late authoritative event).
		return ctrl.Result{}, nil
	}

	prov, entry, err := r.provider(ctx, p)
	if err != nil {
		log.FromContext(ctx).Info("provider not usable; waiting", "reason", err.Error())
		return ctrl.Result{RequeueAfter: providerRetry}, nil
	}
	if p.Status.ProviderPaymentID == "" && p.Spec.ProviderPaymentID == "" {
		return r.create(ctx, p, prov, entry)
	}
	return r.query(ctx, p, prov, entry)
}

// provider resolves the payment's PaymentProvider and its gateway entry.
func (r *PaymentReconciler) provider(ctx context.Context, p *v1alpha1.Payment) (*v1alpha1.PaymentProvider, *gateway.Entry, error) {
	prov := &v1alpha1.PaymentProvider{}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.ProviderRef.Name}
	if err := r.Client.Get(ctx, key, prov); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("PaymentProvider %s not found", key)
		}
		return nil, nil, err
	}
	entry, err := r.Gateway.For(ctx, prov)
	if err != nil {
		return nil, nil, err
	}
	return prov, entry, nil
}

// operatorActions applies the resolve and requery annotations (SPEC §2.4),
// each value once; the value acted on is remembered in status.actions.
func (r *PaymentReconciler) operatorActions(ctx context.Context, p *v1alpha1.Payment) error {
	now := r.Clock.Now()
	w := r.writer()
	if v := resolveAction(p); v != "" && v != p.Status.Actions.Resolve {
		var res payment.Result
		wrote, err := w.UpdateStatus(ctx, p, func(p *v1alpha1.Payment) error {
			if resolveAction(p) == p.Status.Actions.Resolve {
				return nil // another writer already acted on it
			}
			res = payment.Apply(p, payment.Observation{
				Source:   v1alpha1.SourceManual,
				Observed: payment.Observed(p.Annotations[v1alpha1.AnnotationResolve]),
				Reason:   p.Annotations[v1alpha1.AnnotationResolveReason],
			}, now)
			p.Status = res.Status
			p.Status.Actions.Resolve = resolveAction(p)
			return nil
		})
		if err != nil {
			return err
		}
		if wrote {
			r.record(p, res, v1alpha1.SourceManual)
			if res.Decision != payment.Applied {
				r.Recorder.Eventf(p, nil, "Warning", "ResolveIgnored", "Resolve", "resolve %q not applied: %s", p.Annotations[v1alpha1.AnnotationResolve], res.Reason)
			}
		}
	}
	if v := p.Annotations[v1alpha1.AnnotationRequery]; v != "" && v != p.Status.Actions.Requery {
		final := false
		wrote, err := w.UpdateStatus(ctx, p, func(p *v1alpha1.Payment) error {
			if p.Annotations[v1alpha1.AnnotationRequery] == p.Status.Actions.Requery {
				return nil
			}
			if final = p.Status.Phase.IsFinal(); final {
				p.Status.Actions.Requery = v
				return nil
			}
			payment.Requery(&p.Status, v, now)
			return nil
		})
		if err != nil {
			return err
		}
		if wrote {
			if final {
				r.Recorder.Eventf(p, nil, "Normal", "RequeryIgnored", "Requery", "payment is already %s; nothing to query", p.Status.Phase)
			} else {
				r.Recorder.Eventf(p, nil, "Normal", "Requery", "Requery", "status-query schedule restarted by an operator")
			}
		}
	}
	return nil
}

func resolveAction(p *v1alpha1.Payment) string {
	v := p.Annotations[v1alpha1.AnnotationResolve]
	if v == "" {
		return ""
	}
	return v + ": " + p.Annotations[v1alpha1.AnnotationResolveReason]
}

// create creates the payment at the provider without double charges (SPEC
// §2.3): the createRequestedAt marker is stored before the call, every retry
// uses the same idempotency key, and past the provider's key window the
// payment is looked up by merchant reference instead of created again.
func (r *PaymentReconciler) create(ctx context.Context, p *v1alpha1.Payment, prov *v1alpha1.PaymentProvider, e *gateway.Entry) (ctrl.Result, error) {
	now := r.Clock.Now()
	if next := p.Status.Query.NextTime; next != nil && now.Before(next.Time) {
		return ctrl.Result{RequeueAfter: next.Sub(now)}, nil // a failed create waits for its retry time
	}
	if ok, wait, reason := e.Admit(now); !ok {
		metrics.StatusQueries.WithLabelValues(prov.Name, "deferred_"+reason).Inc()
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if p.Status.CreateRequestedAt == nil {
		// The marker goes first: once it is stored, any later reconcile knows
		// a create may have happened and resolves it instead of guessing.
		err := r.observe(ctx, p, v1alpha1.SourceCreate, now, func(p *v1alpha1.Payment, apply func(payment.Observation)) {
			if p.Status.CreateRequestedAt != nil {
				return
			}
			apply(payment.Observation{Source: v1alpha1.SourceCreate, Observed: payment.ObservedPending})
			t := metav1.NewTime(now)
			p.Status.CreateRequestedAt = &t
			p.Status.ObservedGeneration = p.Generation
		})
		if err != nil {
			e.Breaker.Release()
			return ctrl.Result{}, err
		}
		if p.Status.ProviderPaymentID != "" {
			// A conflict's re-read showed the create already recorded.
			e.Breaker.Release()
			return r.requeue(p), nil
		}
	} else {
		// A create may already have gone out (a crash, a timeout, or only a
		// cache that has not caught up with our last write). Make sure from the
		// API server before calling the provider again.
		fresh := &v1alpha1.Payment{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
			e.Breaker.Release()
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if fresh.Status.ProviderPaymentID != "" {
			e.Breaker.Release()
			return r.requeue(fresh), nil
		}
		*p = *fresh
	}

	var (
		found provider.Payment
		err   error
		op    string
	)
	if now.Sub(p.Status.CreateRequestedAt.Time) > prov.Spec.KeyWindow() {
		// The provider no longer replays the first answer for this key; a new
		// create could charge twice. Look for what the first call made.
		op = "find"
		found, err = e.Provider.FindByMerchantReference(ctx, p.MerchantRef())
	} else {
		op = "create"
		found, err = e.Provider.Create(ctx, provider.CreateRequest{
			IdempotencyKey:    p.IdempotencyKey(),
			MerchantReference: p.MerchantRef(),
			Description:       p.Spec.Description,
			Amount:            p.Spec.Amount.Value,
			Currency:          p.Spec.Amount.Currency,
			Metadata:          p.Spec.Metadata,
		})
	}
	r.breakerRecord(ctx, prov, e, err)
	schedule, jitter := prov.Spec.QuerySchedule(), prov.Spec.JitterPercent()

	werr := r.observe(ctx, p, v1alpha1.SourceCreate, now, func(p *v1alpha1.Payment, apply func(payment.Observation)) {
		if p.Status.ProviderPaymentID != "" {
			return
		}
		switch {
		case err == nil:
			for _, obs := range observations(found, v1alpha1.SourceCreate) {
				apply(obs)
			}
			first, _ := payment.Delay(schedule, jitter, 0, string(p.UID))
			if !p.Status.Phase.IsFinal() && p.Status.Phase != v1alpha1.PhaseUnknown {
				payment.StartSchedule(&p.Status, first, now)
			}
		case op == "find" && (errors.Is(err, provider.ErrNotFound) || errors.Is(err, provider.ErrUnsupported)):
			apply(payment.Observation{
				Source: v1alpha1.SourceCreate, Observed: payment.ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown,
				Reason: fmt.Sprintf("create requested at %s is past the provider's %s idempotency window and no payment with merchant reference %q was found (%v); a new create could charge twice",
					p.Status.CreateRequestedAt.Format(time.RFC3339), prov.Spec.KeyWindow(), p.MerchantRef(), err),
			})
		case errors.Is(err, provider.ErrRetryable):
			// A timeout or 5xx says nothing about the payment: stay Pending and
			// retry with the same key.
			ra, _ := provider.RetryAfter(err)
			payment.RecordCreateError(&p.Status, schedule, payment.QueryOutcome{Err: err.Error(), RetryAfter: ra}, now)
		default:
			apply(payment.Observation{
				Source: v1alpha1.SourceCreate, Observed: payment.ObservedFailed,
				Failure: &v1alpha1.Failure{Code: v1alpha1.ReasonCreateRejected, Message: err.Error()},
				Reason:  v1alpha1.ReasonCreateRejected,
			})
		}
	})
	if werr != nil {
		return ctrl.Result{}, werr
	}
	if err != nil {
		log.FromContext(ctx).Info("provider "+op+" failed", "error", err.Error())
	}
	return r.requeue(p), nil
}

// query asks the provider for the payment's status when the schedule says it
// is due (SPEC §2.2 steps 3–5), and closes out an unpaid payment after
// spec.expiresAfter (SPEC §2.5).
func (r *PaymentReconciler) query(ctx context.Context, p *v1alpha1.Payment, prov *v1alpha1.PaymentProvider, e *gateway.Entry) (ctrl.Result, error) {
	now := r.Clock.Now()
	closeOut, freshQueryDue := r.expiry(p, now)
	if next := p.Status.Query.NextTime; next != nil && now.Before(next.Time) && !freshQueryDue {
		return r.requeue(p), nil
	}
	if ok, wait, reason := e.Admit(now); !ok {
		// Deferred calls do not consume schedule attempts: a provider outage
		// or a backlog must not push payments into Unknown.
		metrics.StatusQueries.WithLabelValues(prov.Name, "deferred_"+reason).Inc()
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	id := p.Status.ProviderPaymentID
	if id == "" {
		id = p.Spec.ProviderPaymentID
	}
	found, err := e.Provider.Get(ctx, id)
	r.breakerRecord(ctx, prov, e, err)
	metrics.StatusQueries.WithLabelValues(prov.Name, queryResult(err)).Inc()
	schedule, jitter := prov.Spec.QuerySchedule(), prov.Spec.JitterPercent()

	werr := r.observe(ctx, p, v1alpha1.SourceStatusQuery, now, func(p *v1alpha1.Payment, apply func(payment.Observation)) {
		p.Status.ObservedGeneration = p.Generation
		if p.Status.ProviderPaymentID == "" {
			p.Status.ProviderPaymentID = id
		}
		out := payment.QueryOutcome{}
		if err != nil {
			out.Err = err.Error()
			out.RetryAfter, _ = provider.RetryAfter(err)
		}
		more := payment.ScheduleNext(&p.Status, schedule, jitter, string(p.UID), out, now)
		switch {
		case err == nil:
			for _, o := range observations(found, v1alpha1.SourceStatusQuery) {
				o.PastExpiry = closeOut
				apply(o)
			}
		case !errors.Is(err, provider.ErrRetryable):
			apply(payment.Observation{
				Source: v1alpha1.SourceStatusQuery, Observed: payment.ObservedUnknown,
				Review: v1alpha1.ReasonNonRetryableQueryError, Reason: err.Error(),
			})
			// Asking again cannot help; an operator's requery restarts it.
			p.Status.Query.NextTime = nil
			return
		}
		if !more && !p.Status.Phase.IsFinal() {
			apply(payment.Observation{
				Source: v1alpha1.SourceStatusQuery, Observed: payment.ObservedUnknown, Review: v1alpha1.ReasonRetriesExhausted,
				Reason: fmt.Sprintf("no final answer after %d status queries (last error: %s)", p.Status.Query.Attempts, orNone(p.Status.Query.LastError)),
			})
		}
	})
	if werr != nil {
		return ctrl.Result{}, werr
	}
	if err != nil {
		log.FromContext(ctx).Info("status query failed", "error", err.Error(), "attempts", p.Status.Query.Attempts)
	}
	return r.requeue(p), nil
}

// expiry reports whether the payment is past spec.expiresAfter while unpaid,
// and whether the one fresh query of the close-out (SPEC §2.5) is still due.
func (r *PaymentReconciler) expiry(p *v1alpha1.Payment, now time.Time) (closeOut, freshQueryDue bool) {
	at, ok := expiresAt(p)
	if !ok || now.Before(at) {
		return false, false
	}
	last := p.Status.Query.LastTime
	return true, last == nil || last.Time.Before(at)
}

func expiresAt(p *v1alpha1.Payment) (time.Time, bool) {
	if p.Spec.ExpiresAfter == nil {
		return time.Time{}, false
	}
	switch p.Status.Phase {
	case "", v1alpha1.PhasePending, v1alpha1.PhaseProcessing:
		return p.CreationTimestamp.Add(p.Spec.ExpiresAfter.Duration), true
	}
	return time.Time{}, false
}

// requeue computes the next wake-up from stored status alone, so a restart
// resumes exactly where the schedule was.
func (r *PaymentReconciler) requeue(p *v1alpha1.Payment) ctrl.Result {
	next := p.Status.Query.NextTime
	if next == nil || p.Status.Phase.IsFinal() {
		return ctrl.Result{}
	}
	wake := next.Time
	if at, ok := expiresAt(p); ok && at.Before(wake) {
		if last := p.Status.Query.LastTime; last == nil || last.Time.Before(at) {
			wake = at
		}
	}
	d := wake.Sub(r.Clock.Now())
	if d < 10*time.Millisecond {
		d = 10 * time.Millisecond
	}
	return ctrl.Result{RequeueAfter: d}
}

// breakerRecord feeds a call's outcome to the circuit breaker and mirrors a
// state change onto the PaymentProvider (Degraded condition, circuit status).
func (r *PaymentReconciler) breakerRecord(ctx context.Context, prov *v1alpha1.PaymentProvider, e *gateway.Entry, err error) {
	now := r.Clock.Now()
	if !e.Breaker.Record(err, now) {
		return
	}
	st := e.Breaker.Status()
	open := 0.0
	if st.State != v1alpha1.CircuitClosed {
		open = 1
	}
	metrics.CircuitOpen.WithLabelValues(prov.Name).Set(open)
	if perr := PublishCircuit(ctx, r.Client, client.ObjectKeyFromObject(prov), st, now); perr != nil {
		log.FromContext(ctx).Error(perr, "publish circuit state", "state", st.State)
	}
	if st.State == v1alpha1.CircuitOpen {
		r.Recorder.Eventf(prov, nil, "Warning", "CircuitOpen", "Query", "circuit opened after %d consecutive failures: %v", st.ConsecutiveFailures, err)
	} else if st.State == v1alpha1.CircuitClosed {
		r.Recorder.Eventf(prov, nil, "Normal", "CircuitClosed", "Query", "provider answers again; circuit closed")
	}
}

// PublishCircuit writes the circuit state and the Degraded condition onto a
// PaymentProvider's status, re-reading on conflict.
func PublishCircuit(ctx context.Context, c client.Client, key types.NamespacedName, st v1alpha1.CircuitStatus, now time.Time) error {
	for attempt := 0; attempt < 5; attempt++ {
		prov := &v1alpha1.PaymentProvider{}
		if err := c.Get(ctx, key, prov); err != nil {
			return err
		}
		prov.Status.Circuit = st
		cond := metav1.Condition{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "CircuitClosed",
			Message: "provider answers normally", LastTransitionTime: metav1.NewTime(now), ObservedGeneration: prov.Generation}
		if st.State != v1alpha1.CircuitClosed {
			cond.Status, cond.Reason = metav1.ConditionTrue, "Circuit"+string(st.State)
			cond.Message = fmt.Sprintf("circuit breaker %s after %d consecutive failures; status queries are deferred without consuming attempts", st.State, st.ConsecutiveFailures)
		}
		meta.SetStatusCondition(&prov.Status.Conditions, cond)
		err := c.Status().Update(ctx, prov)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("provider %s: status kept conflicting", key)
}

// observe stores what one provider call taught: mutate feeds observations to
// apply (the state machine, in order) and may update the schedule; it runs
// again on fresh state after a write conflict. Events and metrics follow only
// a successful write.
func (r *PaymentReconciler) observe(ctx context.Context, p *v1alpha1.Payment, source v1alpha1.ObservationSource, now time.Time,
	mutate func(p *v1alpha1.Payment, apply func(payment.Observation))) error {
	var results []payment.Result
	_, err := r.writer().UpdateStatus(ctx, p, func(p *v1alpha1.Payment) error {
		results = results[:0]
		mutate(p, func(obs payment.Observation) {
			res := payment.Apply(p, obs, now)
			p.Status = res.Status
			results = append(results, res)
		})
		return nil
	})
	if err != nil {
		return err
	}
	for _, res := range results {
		r.record(p, res, source)
	}
	return nil
}

func (r *PaymentReconciler) writer() payment.Writer {
	return payment.Writer{Client: r.Client, Reader: r.APIReader}
}

func (r *PaymentReconciler) record(p *v1alpha1.Payment, res payment.Result, source v1alpha1.ObservationSource) {
	payment.Record(r.Recorder, p, res, source)
}

// observations turns the provider's view of a payment into observations for
// the state machine. A refunded payment is reported as its success followed by
// the refund, so a payment whose success was never seen still settles.
func observations(pp provider.Payment, source v1alpha1.ObservationSource) []payment.Observation {
	obs := payment.Observation{
		Source: source, Observed: payment.Observed(pp.Status), Raw: pp.RawStatus, ProviderPaymentID: pp.ID,
	}
	if pp.FailureCode != "" || pp.FailureMessage != "" {
		obs.Failure = &v1alpha1.Failure{Code: pp.FailureCode, Message: pp.FailureMessage}
	}
	paid := func() *v1alpha1.Money {
		if pp.Currency == "" {
			return nil
		}
		return &v1alpha1.Money{Value: pp.Amount, Currency: pp.Currency}
	}
	switch pp.Status {
	case provider.StatusSucceeded:
		obs.Amount = paid()
	case provider.StatusRefund:
		success := obs
		success.Observed, success.Amount = payment.ObservedSucceeded, paid()
		obs.RefundedTotal = &v1alpha1.Money{Value: pp.RefundedTotal, Currency: pp.Currency}
		return []payment.Observation{success, obs}
	}
	return []payment.Observation{obs}
}

func queryResult(err error) string {
	switch {
	case err == nil:
		return "found"
	case errors.Is(err, provider.ErrNotFound):
		return "not_found"
	case errors.Is(err, provider.ErrRetryable):
		return "error"
	default:
		return "rejected"
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
