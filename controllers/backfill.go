package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// DefaultBackfillApplyBudget bounds applying one backfilled event right after
// storing it; what does not finish in time stays Pending for the inbox processor.
const DefaultBackfillApplyBudget = 5 * time.Second

// maxAdmitWait is the longest a run waits in line for the provider's token
// bucket; a longer wait (an open circuit) ends the run until then.
const maxAdmitWait = 5 * time.Second

// Backfill replays provider events from the events API (kukopay, generic,
// stripe, paypal; SPEC §3, §5): every spec.backfill.interval it pages through
// the events since status.backfill.cursor minus overlap (never further back
// than maxLookback, nor than the provider keeps events), stores each one
// through the inbox as a WebhookEvent with via=Backfill (the deterministic name
// makes it dedup against the webhook copy) and lets the inbox apply it through
// the state machine. Where a run reads and what a stored page lets it write are
// decided by payment.PlanBackfill and payment.AfterBackfillPage: the cursor
// never passes a page that is not durably stored, and at a provider that lists
// newest first (stripe, paypal) it moves only after the run's last page, the
// unfinished run being kept in status.backfill.progress and resumed, so a
// failed page is neither skipped nor the whole window read again.
//
// A PaymentProvider annotated backfill-from=<RFC 3339> gets a one-off replay
// from that time (not bounded by maxLookback: the operator asked for it).
//
// Calls go through the provider's shared token bucket and circuit breaker.
type Backfill struct {
	// Client stores WebhookEvents and writes status; the manager's client.
	Client client.Client
	// Reader finds Payments through the inbox indexes (inbox.SetupIndexes);
	// default Client. Use the manager's cached client.
	Reader client.Reader
	// APIReader re-reads after write conflicts (not the cache).
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Gateway   *gateway.Gateway
	// ApplyBudget overrides DefaultBackfillApplyBudget.
	ApplyBudget time.Duration
	// MaxConcurrentReconciles bounds providers backfilled in parallel (default 2).
	MaxConcurrentReconciles int

	once  sync.Once
	inbox *inbox.Inbox
}

// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders/status,verbs=update
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=webhookevents,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=webhookevents/status,verbs=update
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments,verbs=get;list;watch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments/status,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

func (r *Backfill) init() {
	r.once.Do(func() {
		if r.Clock == nil {
			r.Clock = clock.RealClock{}
		}
		if r.Reader == nil {
			r.Reader = r.Client
		}
		if r.ApplyBudget <= 0 {
			r.ApplyBudget = DefaultBackfillApplyBudget
		}
		if r.Gateway == nil {
			r.Gateway = &gateway.Gateway{Reader: r.Reader}
		}
		r.inbox = &inbox.Inbox{Client: r.Client, Reader: r.Reader, APIReader: r.APIReader, Recorder: r.Recorder, Clock: r.Clock}
	})
}

// SetupWithManager registers the backfill controller. The inbox's Payment
// indexes (inbox.SetupIndexes) must be registered on mgr, once per manager.
func (r *Backfill) SetupWithManager(mgr ctrl.Manager) error {
	r.init()
	workers := r.MaxConcurrentReconciles
	if workers <= 0 {
		workers = 2
	}
	// Spec and annotation changes start a run early; status writes (our own
	// cursor, the circuit) do not. The interval is kept by RequeueAfter from
	// status.backfill.lastRunTime, so a restart keeps the cadence.
	return ctrl.NewControllerManagedBy(mgr).
		Named("paymentprovider-backfill").
		For(&v1alpha1.PaymentProvider{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// backfillRun is one pass over the events API: where it reads (decided by
// payment.PlanBackfill) and what it did.
type backfillRun struct {
	payment.BackfillRun

	read, stored, skipped int
	// unsaved counts events read but not yet added to status.eventsSeen.
	unsaved int64
}

// Reconcile runs the provider's backfill when it is due or requested:
// payment.StartBackfill decides whether it runs, attempt runs the window
// payment.PlanBackfill chooses, payment.EndBackfill decides what the end means
// and finish writes it.
func (r *Backfill) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.init()
	logger := log.FromContext(ctx).WithValues("provider", req.NamespacedName.String())
	ctx = log.IntoContext(ctx, logger)
	prov := &v1alpha1.PaymentProvider{}
	if err := r.Client.Get(ctx, req.NamespacedName, prov); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !prov.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()
	st := prov.Status.Backfill
	start := payment.StartBackfill(prov, now)
	if err := r.settleOneOff(ctx, prov, start.MarkDone, start.Event); err != nil {
		return ctrl.Result{}, err
	}
	if !start.Run() {
		return ctrl.Result{RequeueAfter: start.RequeueAfter}, nil
	}
	run, out := r.attempt(ctx, prov, st, start, now)
	end := payment.EndBackfill(prov, start, run.BackfillRun, out, r.Clock.Now())
	return r.finish(ctx, prov, run, out, end)
}

// attempt reaches the provider and, when it has an events API, runs the
// window payment.PlanBackfill chooses from st, the status the reconcile
// started with.
func (r *Backfill) attempt(ctx context.Context, prov *v1alpha1.PaymentProvider, st v1alpha1.BackfillStatus, start payment.BackfillStart, now time.Time) (*backfillRun, payment.BackfillOutcome) {
	run := &backfillRun{}
	out := payment.BackfillOutcome{Retry: providerRetry}
	entry, err := r.Gateway.For(ctx, prov)
	if err != nil {
		out.Result, out.Err = payment.BackfillUnavailable, err
		return run, out
	}
	if !entry.Caps.EventsAPI {
		out.Result = payment.BackfillUnsupported
		return run, out
	}
	run.BackfillRun = payment.PlanBackfill(st, payment.BackfillTimingFor(&prov.Spec), entry.Caps, start.Due, start.OneOff, start.From, now)
	err = r.run(ctx, prov, entry, run)
	out.Read, out.Stored, out.Skipped, out.Err, out.Retention = run.read, run.stored, run.skipped, err, entry.Caps.EventsRetention
	var deferred *deferredError
	switch {
	case errors.As(err, &deferred):
		out.Result, out.DeferReason, out.Wait = payment.BackfillDeferred, string(deferred.reason), deferred.wait
	case errors.Is(err, errListEvents):
		out.Result = payment.BackfillListFailed
	case err != nil:
		out.Result = payment.BackfillStoreFailed
	}
	return run, out
}

// finish writes what payment.EndBackfill decided: the Backfill condition
// (with a completed run's counts), then a one-off's Event and done mark.
func (r *Backfill) finish(ctx context.Context, prov *v1alpha1.PaymentProvider, run *backfillRun, out payment.BackfillOutcome, end payment.BackfillEnd) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	switch out.Result {
	case payment.BackfillCompleted:
		if err := r.storeRun(ctx, prov, run, end); err != nil {
			return ctrl.Result{}, err
		}
		logger.V(1).Info("backfill run complete", "since", run.Since, "read", run.read, "stored", run.stored, "resumed", run.Resumed)
	case payment.BackfillStoreFailed:
		// The cursor did not move past the page, so the error's retry
		// re-reads it; the condition only reports it.
		if err := r.setCondition(ctx, prov, end.Status, end.Reason, end.Message); err != nil {
			logger.Error(err, "record backfill failure")
		}
		return ctrl.Result{}, out.Err
	default:
		if err := r.setCondition(ctx, prov, end.Status, end.Reason, end.Message); err != nil {
			return ctrl.Result{}, err
		}
		if out.Result == payment.BackfillListFailed {
			logger.Info("backfill: listing events failed", "error", out.Err.Error())
		}
	}
	if err := r.settleOneOff(ctx, prov, end.MarkDone, end.Event); err != nil {
		return ctrl.Result{}, err
	}
	if out.Result == payment.BackfillUnsupported {
		logger.V(1).Info("backfill skipped: provider type has no events API", "type", prov.Spec.Type)
	}
	return ctrl.Result{RequeueAfter: end.RequeueAfter}, nil
}

// storeRun writes a completed run: the events it read, lastRunTime for a
// periodic run and the Backfill condition with the cursor it leaves.
func (r *Backfill) storeRun(ctx context.Context, prov *v1alpha1.PaymentProvider, run *backfillRun, end payment.BackfillEnd) error {
	finished := metav1.NewTime(r.Clock.Now())
	_, err := statuswriter.Update(ctx, statuswriter.Writer{Client: r.Client, APIReader: r.APIReader}, prov, func(p *v1alpha1.PaymentProvider) error {
		p.Status.Backfill.EventsSeen += run.unsaved
		if run.Regular {
			p.Status.Backfill.LastRunTime = &finished
		}
		setBackfillCondition(p, end.Status, end.Reason, end.SyncedMessage(p.Status.Backfill), finished)
		return nil
	})
	return err
}

// settleOneOff records the Event of a backfill-from value, then the value as
// acted on ("" = nothing to settle).
func (r *Backfill) settleOneOff(ctx context.Context, prov *v1alpha1.PaymentProvider, value string, ev payment.Event) error {
	if value == "" {
		return nil
	}
	r.event(prov, ev.EventType(), ev.Reason, ev.Message)
	return r.markOneOffDone(ctx, prov, value)
}

var errListEvents = errors.New("list events")

// deferredError ends a run while the provider may not be called (circuit
// open, or a long wait for the token bucket).
type deferredError struct {
	wait   time.Duration
	reason gateway.Deferral
}

func (e *deferredError) Error() string {
	return fmt.Sprintf("provider call deferred for %s (%s)", e.wait, e.reason)
}

// run pages through the events since run.Since, from run.PageCursor. Each
// page is stored in the inbox in full before the status says so.
func (r *Backfill) run(ctx context.Context, prov *v1alpha1.PaymentProvider, e *gateway.Entry, run *backfillRun) error {
	adapter := e.Provider
	pageCursor := run.PageCursor
	for {
		if err := r.admit(ctx, e); err != nil {
			return err
		}
		page, err := adapter.ListEvents(ctx, run.Since, pageCursor)
		e.Done(ctx, err)
		if err != nil {
			if _, write := payment.AfterBackfillListError(prov.Status.Backfill, err); write {
				if _, werr := statuswriter.Update(ctx, statuswriter.Writer{Client: r.Client, APIReader: r.APIReader}, prov, func(p *v1alpha1.PaymentProvider) error {
					p.Status.Backfill, _ = payment.AfterBackfillListError(p.Status.Backfill, err)
					return nil
				}); werr != nil {
					return werr
				}
			}
			return fmt.Errorf("%w of provider %s/%s: %w", errListEvents, prov.Namespace, prov.Name, err)
		}
		var newest time.Time
		stored := 0
		for _, u := range page.Unreadable {
			// Not an event paywarden can read: skipped, as an unstorable one
			// is, or it would stop the backfill at it for good.
			run.skipped++
			log.FromContext(ctx).Error(u.Err, "backfill: listed event cannot be read; skipped", "eventID", u.ID)
			r.event(prov, corev1.EventTypeWarning, "BackfillEventSkipped", fmt.Sprintf("event %q listed by the provider cannot be read; skipped: %v", u.ID, u.Err))
		}
		for _, ev := range page.Events {
			if r.inInbox(ctx, prov, ev) {
				// Re-read through the overlap: already stored, nothing to do.
			} else {
				out, err := r.inbox.Receive(ctx, prov, ev, v1alpha1.ViaBackfill, "", r.ApplyBudget)
				switch {
				case errors.Is(err, inbox.ErrInvalidEvent):
					// It can never be stored; stopping here would stop the
					// backfill for good.
					run.skipped++
					log.FromContext(ctx).Error(err, "backfill: event cannot be stored; skipped", "eventID", ev.ID)
					r.event(prov, corev1.EventTypeWarning, "BackfillEventSkipped", err.Error())
				case err != nil:
					return fmt.Errorf("backfill provider %s/%s: %w", prov.Namespace, prov.Name, err)
				case out.Stored:
					stored++
				}
			}
			if ev.OccurredAt.After(newest) {
				newest = ev.OccurredAt
			}
		}
		read := len(page.Events) + len(page.Unreadable)
		run.read += read
		run.stored += stored
		run.unsaved += int64(read)
		// The page is durable: only now may the status say so. A page that
		// changes nothing (the overlap, re-read) is counted with the next
		// write instead of costing one of its own.
		done := payment.BackfillPage{Newest: newest, NextCursor: page.NextCursor, Last: !page.HasMore || page.NextCursor == ""}
		if _, write := payment.AfterBackfillPage(prov.Status.Backfill, run.BackfillRun, done); write {
			if _, err := statuswriter.Update(ctx, statuswriter.Writer{Client: r.Client, APIReader: r.APIReader}, prov, func(p *v1alpha1.PaymentProvider) error {
				next, _ := payment.AfterBackfillPage(p.Status.Backfill, run.BackfillRun, done)
				next.EventsSeen += run.unsaved
				p.Status.Backfill = next
				return nil
			}); err != nil {
				return err
			}
			run.unsaved = 0
		}
		if done.Last {
			return nil
		}
		pageCursor = page.NextCursor
	}
}

// inInbox reports whether the event's WebhookEvent is already in the cache,
// so re-reading the overlap costs no API call. A miss is not proof: the
// cache holds open events only (a finished one costs the create that finds
// it), and the inbox's create is the dedup.
func (r *Backfill) inInbox(ctx context.Context, prov *v1alpha1.PaymentProvider, ev provider.Event) bool {
	if ev.ID == "" {
		return false
	}
	key := types.NamespacedName{Namespace: prov.Namespace, Name: v1alpha1.WebhookEventName(prov.Name, ev.ID)}
	existing := &v1alpha1.WebhookEvent{}
	if err := r.Reader.Get(ctx, key, existing); err != nil {
		return false
	}
	return existing.Spec.EventID == ev.ID
}

// admit waits for the provider's token bucket (shared with status queries,
// which an events page goes ahead of: it stands for webhooks, and may settle
// many payments at once); an open circuit or a long wait ends the run with a
// deferredError. The run holds its place in line under a key of its own, as a
// payment does: a run deferred for a long wait comes back at that wait and
// takes the token held for it.
func (r *Backfill) admit(ctx context.Context, e *gateway.Entry) error {
	key := "backfill/" + e.Key.String()
	for {
		adm := e.Admit(key, gateway.Read, r.Clock.Now())
		if adm.OK {
			return nil
		}
		if adm.Reason != gateway.DeferRateLimited || adm.Wait > maxAdmitWait {
			return &deferredError{wait: adm.Wait, reason: adm.Reason}
		}
		t := time.NewTimer(adm.Wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (r *Backfill) setCondition(ctx context.Context, prov *v1alpha1.PaymentProvider, status metav1.ConditionStatus, reason, msg string) error {
	now := metav1.NewTime(r.Clock.Now())
	_, err := statuswriter.Update(ctx, statuswriter.Writer{Client: r.Client, APIReader: r.APIReader}, prov, func(p *v1alpha1.PaymentProvider) error {
		setBackfillCondition(p, status, reason, msg, now)
		return nil
	})
	return err
}

func setBackfillCondition(p *v1alpha1.PaymentProvider, status metav1.ConditionStatus, reason, msg string, now metav1.Time) {
	if len(msg) > 32000 {
		msg = msg[:32000]
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionBackfill, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: p.Generation, LastTransitionTime: now,
	})
}

// markOneOffDone records the backfill-from value acted on. The JSON patch
// tests that backfill-from still holds that value, so a value an operator
// set meanwhile is not marked done without running.
func (r *Backfill) markOneOffDone(ctx context.Context, prov *v1alpha1.PaymentProvider, value string) error {
	esc := func(k string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(k) }
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/annotations/" + esc(v1alpha1.AnnotationBackfillFrom), "value": value},
		{"op": "add", "path": "/metadata/annotations/" + esc(v1alpha1.AnnotationBackfillFromDone), "value": value},
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	err = r.Client.Patch(ctx, prov, client.RawPatch(types.JSONPatchType, body))
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) {
		// Gone, or the value changed under us: the next reconcile sees the
		// new value and acts on it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("record %s on provider %s/%s: %w", v1alpha1.AnnotationBackfillFromDone, prov.Namespace, prov.Name, err)
	}
	return nil
}

func (r *Backfill) event(prov *v1alpha1.PaymentProvider, typ, reason, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(prov, nil, typ, reason, "Backfill", "%s", msg)
	}
}
