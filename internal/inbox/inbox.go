// Package inbox is what happens when a provider event arrives, whoever brought
// it: the webhook receiver, the events-API backfill, or the manager's inbox
// processor finishing what the receiver could not.
//
// An event is first made durable as a WebhookEvent whose name is derived from
// (provider, event id), so creating it is the dedup (AlreadyExists means a
// copy was stored before). Then the Payment it is about is resolved — only in
// the provider's namespace and only among Payments referencing that provider —
// the event is turned into a state-machine observation, applied through
// the one status writer (payment.Store) with optimistic concurrency, and the result is recorded on
// the WebhookEvent. Everything the receiver and the processor do with an event
// lives here, so they cannot disagree.
package inbox

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// Inbox stores and applies provider events. The zero value is not usable;
// Client, Reader and APIReader are required. Safe for concurrent use.
type Inbox struct {
	// Client creates WebhookEvents and writes WebhookEvent and Payment status.
	Client client.Client
	// Reader finds Payments through the indexes of SetupIndexes: a cache.
	Reader client.Reader
	// APIReader re-reads objects after a write conflict, from the API server:
	// the cache may still hold the version that lost.
	APIReader client.Reader
	// Recorder receives the Kubernetes Events of applied changes; may be nil.
	Recorder events.EventRecorder
	// Clock stamps receivedAt, appliedAt and the state machine; default real time.
	Clock clock.PassiveClock
	// Results, when set, records the result of an applied event after
	// Receive returns (the receiver's ack then costs two API writes: the
	// record and the payment). Nil records it before returning.
	Results *ResultQueue
	// Recent, when set, answers a repeated delivery of an event this process
	// stored recently as a duplicate without an API request.
	Recent *RecentEvents
}

// Outcome is what became of one event.
type Outcome struct {
	// Stored is false when the event was already in the inbox (a duplicate
	// delivery, or the webhook and backfill copies of one event).
	Stored bool
	// Result is the event's result; Pending when the apply did not finish and
	// is left to the inbox processor.
	Result v1alpha1.EventResult
	// Message explains the result.
	Message string
	// Payment is the name of the Payment the event was applied to, if any.
	Payment string
	// Event is the stored object (nil for a duplicate).
	Event *v1alpha1.WebhookEvent
}

// maxMessage is WebhookEventStatus.message's schema limit.
const maxMessage = 1024

// pendingMarkTimeout bounds the best-effort write that records why an apply
// was left Pending; it runs after the apply's own budget is spent.
const pendingMarkTimeout = time.Second

func (in *Inbox) now() time.Time {
	if in.Clock == nil {
		return time.Now()
	}
	return in.Clock.Now()
}

// Receive is the whole path of a verified, parsed event: store it, then apply
// it within budget (0 = as long as ctx allows). An error means the event was
// not stored (ErrInvalidEvent: never will be; anything else: retry later);
// once stored, a failed or slow apply is not an error but a Pending outcome
// the inbox processor finishes.
func (in *Inbox) Receive(ctx context.Context, prov *v1alpha1.PaymentProvider, ev provider.Event, via v1alpha1.EventVia, scheme string, budget time.Duration) (Outcome, error) {
	log := ctrl.LoggerFrom(ctx)
	if via == v1alpha1.ViaBackfill && !ev.Supported {
		// A listed event paywarden does not act on (a type it ignores, or a
		// copy rendered in another API version) is not stored: it would take
		// the event's name, and the webhook copy paywarden can read (Stripe
		// renders a webhook in its endpoint's API version, a listed event in
		// the account's) would be answered as a duplicate of it.
		return Outcome{Result: v1alpha1.ResultIgnored, Message: "listed event not acted on, not stored: " + notActedOn(ev)}, nil
	}
	recent := prov.Namespace + "/" + v1alpha1.WebhookEventName(prov.Name, ev.ID)
	if in.Recent.Seen(recent) {
		return Outcome{Result: v1alpha1.ResultDuplicate, Message: "event already in the inbox (stored recently)"}, nil
	}
	evt, stored, err := in.Store(ctx, prov, ev, via, scheme)
	if err != nil {
		return Outcome{}, err
	}
	if !stored {
		if len(ev.Raw) > v1alpha1.MaxStoredPayload && in.mayGiveBack(ev) {
			// A cut event's record is kept only once applied: the delivery
			// that stored it may still give it back (giveBack).
			if err := in.appliedAlready(ctx, prov, ev.ID); err != nil {
				return Outcome{}, err
			}
		}
		in.Recent.Add(recent)
		return Outcome{Result: v1alpha1.ResultDuplicate, Message: "event already in the inbox"}, nil
	}
	applyCtx := ctx
	if budget > 0 {
		var cancel context.CancelFunc
		applyCtx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
	}
	later := in.Results
	if evt.Spec.PayloadTruncated {
		// A cut payload can never be parsed again: its result is written
		// before the answer, since the processor could not derive it.
		later = nil
	}
	out, err := in.apply(applyCtx, evt, ev, later)
	if evt.Spec.PayloadTruncated && (err != nil || !out.Result.IsDone()) && in.mayGiveBack(ev) {
		return Outcome{}, in.giveBack(ctx, evt, out, err)
	}
	in.Recent.Add(recent)
	if err == nil {
		return out, nil
	}
	// The event is durable, so the provider must not retry it: the processor
	// applies it after its grace period. Saying why on the record is worth a
	// short extra write, on a context the spent budget does not cancel.
	log.Info("event stored but not applied; left to the inbox processor", "event", evt.Name, "eventID", ev.ID, "error", err.Error())
	markCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingMarkTimeout)
	defer cancel()
	msg := "not applied at receipt, left to the inbox processor: " + err.Error()
	if merr := in.setResult(markCtx, evt, v1alpha1.ResultPending, msg); merr != nil {
		log.V(1).Info("could not record the pending state", "event", evt.Name, "error", merr.Error())
	}
	return Outcome{Stored: true, Result: v1alpha1.ResultPending, Message: msg, Event: evt}, nil
}

// errTruncatedNotApplied: an event whose stored payload was cut to
// MaxStoredPayload was not applied at receipt. The inbox processor could not
// apply it later (its payload cannot be parsed again), so it is not kept:
// the receiver answers 5xx and the provider delivers it again.
var errTruncatedNotApplied = errors.New("event not applied at receipt, and its stored payload is cut short so it could not be applied later")

// GiveBackWindow bounds how long after it occurred a cut event not applied
// at receipt is given back (answered 5xx, its record deleted): long enough
// for the races that leave an event unapplied (a webhook before its
// payment's create answer, an apply out of budget), short enough that an
// event no Payment will ever match (a payment of another integration on the
// same account) is not refused for the days after which a provider disables
// a failing endpoint. Past it the event is kept as it is (acknowledged), as
// is one that says nothing of when it occurred.
const GiveBackWindow = time.Hour

func (in *Inbox) mayGiveBack(ev provider.Event) bool {
	return !ev.OccurredAt.IsZero() && in.now().Sub(ev.OccurredAt) < GiveBackWindow
}

// giveBack deletes the record of a truncated event that was not applied at
// receipt (out, err: what the apply made of it), so the provider's next
// delivery is stored and applied afresh, and says why the delivery is not
// acknowledged. A record that cannot be deleted stays (the next delivery is
// then a duplicate): the error says so.
func (in *Inbox) giveBack(ctx context.Context, evt *v1alpha1.WebhookEvent, out Outcome, applyErr error) error {
	why := string(out.Result) + ": " + out.Message
	if applyErr != nil {
		why = applyErr.Error()
	}
	delCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pendingMarkTimeout)
	defer cancel()
	uid := evt.UID
	if err := in.Client.Delete(delCtx, evt, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("%w (%s); its record %s could not be removed for the next delivery: %v", errTruncatedNotApplied, why, evt.Name, err)
	}
	return fmt.Errorf("%w (%s): not acknowledged, so the provider delivers it again", errTruncatedNotApplied, why)
}

// appliedAlready is nil when the record of event id, a cut one another
// delivery stored, has its result (it is kept); otherwise the delivery is
// not acknowledged: the record may still be given back, or was.
func (in *Inbox) appliedAlready(ctx context.Context, prov *v1alpha1.PaymentProvider, id string) error {
	evt := &v1alpha1.WebhookEvent{}
	err := in.APIReader.Get(ctx, types.NamespacedName{Namespace: prov.Namespace, Name: v1alpha1.WebhookEventName(prov.Name, id)}, evt)
	switch {
	case err == nil && evt.Status.Result.IsDone():
		return nil
	case err == nil:
		return fmt.Errorf("%w: another delivery of it is being applied (%s)", errTruncatedNotApplied, evt.Status.Result)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: another delivery of it was given back", errTruncatedNotApplied)
	}
	return fmt.Errorf("read the record of event %s: %w", id, err)
}

// Store creates the WebhookEvent for ev; stored is false when a copy of the
// event is already in the inbox. Receive calls it before applying; a caller
// that only stores (a backfill with via=Backfill, say) leaves the record
// Pending and the inbox processor applies it after its grace period.
func (in *Inbox) Store(ctx context.Context, prov *v1alpha1.PaymentProvider, ev provider.Event, via v1alpha1.EventVia, scheme string) (evt *v1alpha1.WebhookEvent, stored bool, err error) {
	evt, err = NewEvent(prov, ev, via, scheme, in.now())
	if err != nil {
		return nil, false, err
	}
	if ev.Supported {
		// Recording the match at receipt makes `kubectl get whevent` show which
		// payment an event was for; Apply resolves again, so a miss is fine.
		if p, rerr := in.resolve(ctx, evt); rerr == nil {
			evt.Spec.Payment = p.Name
		}
	}
	err = in.Client.Create(ctx, evt)
	switch {
	case err == nil:
		return evt, true, nil
	case apierrors.IsAlreadyExists(err):
		return nil, false, nil
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return nil, false, fmt.Errorf("%w: store event %s of provider %s/%s: %w", ErrInvalidEvent, ev.ID, prov.Namespace, prov.Name, err)
	default:
		return nil, false, fmt.Errorf("store event %s of provider %s/%s: %w", ev.ID, prov.Namespace, prov.Name, err)
	}
}

// Apply applies a stored event to its Payment and records the result on the
// WebhookEvent. ev is the parsed event (Reparse recovers it from the record).
// An error leaves the event as it was (Pending or Orphaned) for a retry; the
// state machine's dedup by event id makes a retry after a partial success
// harmless.
func (in *Inbox) Apply(ctx context.Context, evt *v1alpha1.WebhookEvent, ev provider.Event) (Outcome, error) {
	return in.apply(ctx, evt, ev, nil)
}

// apply is Apply, with the result recorded through later when set.
func (in *Inbox) apply(ctx context.Context, evt *v1alpha1.WebhookEvent, ev provider.Event, later *ResultQueue) (Outcome, error) {
	finish := func(result v1alpha1.EventResult, msg, paymentName string) (Outcome, error) {
		if later != nil && result.IsDone() {
			later.add(ctx, resultJob{in: in, evt: evt, result: result, msg: msg})
			return Outcome{Stored: true, Result: result, Message: msg, Payment: paymentName, Event: evt}, nil
		}
		return in.finish(ctx, evt, result, msg, paymentName)
	}
	if !ev.Supported {
		return finish(v1alpha1.ResultIgnored, notActedOn(ev), "")
	}
	p, err := in.resolve(ctx, evt)
	if errors.Is(err, errNoPayment) {
		return finish(v1alpha1.ResultOrphaned, err.Error(), "")
	}
	if err != nil {
		return Outcome{}, err
	}
	if payment.EventWaits(p) != "" && in.APIReader != nil {
		// Decided on the API server's copy, not a cache that may lag.
		fresh := &v1alpha1.Payment{}
		if err := in.APIReader.Get(ctx, client.ObjectKeyFromObject(p), fresh); err != nil {
			return Outcome{}, fmt.Errorf("re-read payment %s/%s: %w", p.Namespace, p.Name, err)
		}
		if fresh.UID == p.UID {
			p = fresh
		}
	}
	if why := payment.EventWaits(p); why != "" {
		// Its next status write wakes the event again.
		return finish(v1alpha1.ResultOrphaned, why, "")
	}
	obs := payment.FromEvent(ev, evt.Spec.Via)
	out, wrote, err := payment.Store(ctx, in.decider(), p, func(p *v1alpha1.Payment) payment.Outcome {
		return payment.ApplyEvent(p, obs, in.now())
	})
	if err != nil {
		return Outcome{}, fmt.Errorf("apply event %s to payment %s/%s: %w", ev.ID, p.Namespace, p.Name, err)
	}
	if wrote {
		// Announced only after the write: nothing is published that was not stored.
		payment.Record(in.Recorder, p, out)
	}
	result, msg := payment.EventResult(p, out, obs)
	if ev.Refund != nil {
		// A refund event is about a Refund too (when paywarden made it).
		rresult, rmsg, err := in.applyToRefund(ctx, evt, ev, p)
		if err != nil {
			return Outcome{}, err
		}
		// While the payment's share waits (it has not succeeded yet), the
		// event stays Orphaned and is applied again when it has, even when
		// its Refund settled now (that part is then a duplicate).
		result, msg = payment.RefundEventOutcome(result, msg, rresult, rmsg)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("event applied", "payment", p.Name, "eventID", ev.ID, "result", result, "phase", p.Status.Phase)
	return finish(result, msg, p.Name)
}

// applyToRefund applies a refund event to the Refund it is about: the one
// that recorded the provider's refund id, else the one whose UID
// paywarden's reference (kept at the provider) names. A reference to a
// Refund not seen yet leaves the event Orphaned until it appears. A refund
// paywarden did not make (the dashboard), or made for an earlier Refund of
// the same name (deleted and re-created: another UID), settles no Refund:
// only the payment's refunded total moves, and the message says why.
func (in *Inbox) applyToRefund(ctx context.Context, evt *v1alpha1.WebhookEvent, ev provider.Event, p *v1alpha1.Payment) (v1alpha1.EventResult, string, error) {
	rf, why, err := in.refundOf(ctx, evt, p)
	if err != nil || rf == nil {
		if why == waitingForRefund {
			return v1alpha1.ResultOrphaned, "waiting for Refund " + evt.Spec.RefundReference, err
		}
		return "", why, err
	}
	obs := payment.FromRefund(*ev.Refund, payment.FromEvent(ev, evt.Spec.Via).Source, ev.ID)
	obs.OccurredAt = ev.OccurredAt
	out, wrote, err := payment.StoreRefund(ctx, in.decider(), rf, func(rf *v1alpha1.Refund) payment.RefundOutcome {
		return payment.ApplyRefundEvent(rf, obs, in.now())
	})
	if err != nil {
		return "", "", fmt.Errorf("apply event %s to refund %s/%s: %w", ev.ID, rf.Namespace, rf.Name, err)
	}
	if wrote {
		payment.RecordRefund(in.Recorder, rf, p, out)
	}
	res, msg := payment.RefundEventResult(rf, out)
	return res, msg, nil
}

// waitingForRefund is refundOf's why when the Refund the event names is not
// seen (yet).
const waitingForRefund = "waiting"

// refundOf finds the Refund of p a refund event is about. Without one, why
// is waitingForRefund (the reference names a Refund not seen yet), a reason
// the event settles no Refund, or "" (a refund paywarden did not make).
func (in *Inbox) refundOf(ctx context.Context, evt *v1alpha1.WebhookEvent, p *v1alpha1.Payment) (rf *v1alpha1.Refund, why string, err error) {
	if id := evt.Spec.ProviderRefundID; id != "" {
		var l v1alpha1.RefundList
		if err := in.Reader.List(ctx, &l, client.InNamespace(p.Namespace), client.MatchingFields{IndexRefundProviderID: p.Name + "/" + id}); err != nil {
			return nil, "", fmt.Errorf("find refund %q: %w", id, err)
		}
		if len(l.Items) == 1 {
			return &l.Items[0], "", nil
		}
	}
	ref, ok := payment.ParseRefundReference(evt.Spec.RefundReference)
	if !ok || ref.Namespace != evt.Namespace {
		return nil, "", nil
	}
	// The reference names the Refund by UID; the name only tells an earlier
	// Refund of that name (gone) from one not seen yet.
	var l v1alpha1.RefundList
	if err := in.Reader.List(ctx, &l, client.InNamespace(p.Namespace), client.MatchingFields{IndexRefundPayment: p.Name}); err != nil {
		return nil, "", fmt.Errorf("find refund %s: %w", evt.Spec.RefundReference, err)
	}
	for i := range l.Items {
		if string(l.Items[i].UID) == ref.UID {
			return &l.Items[i], "", nil
		}
	}
	if ref.Cut {
		return nil, waitingForRefund, nil
	}
	named, err := in.refundNamed(ctx, in.Reader, ref)
	if err == nil && named != nil && named.UID != types.UID(ref.UID) {
		// Another object holds the name. Before the event is closed on it,
		// the API server says whether it is only the cache lagging behind
		// the Refund the event names.
		named, err = in.refundNamed(ctx, in.APIReader, ref)
	}
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("read refund %s: %w", evt.Spec.RefundReference, err)
	case named == nil:
		return nil, waitingForRefund, nil
	case named.UID == types.UID(ref.UID) && named.Spec.PaymentRef.Name == p.Name:
		return named, "", nil
	case named.UID == types.UID(ref.UID):
		return nil, "", nil // a reference that is not about this payment
	}
	return nil, fmt.Sprintf("refund %s was made for an earlier Refund %s (uid %s), not the current one (uid %s): it settles no Refund",
		evt.Spec.RefundReference, ref.Name, ref.UID, named.UID), nil
}

// refundNamed reads the Refund of ref's name; nil when there is none.
func (in *Inbox) refundNamed(ctx context.Context, r client.Reader, ref payment.RefundRef) (*v1alpha1.Refund, error) {
	rf := &v1alpha1.Refund{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, rf); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return rf, nil
}

// Ignore records that a stored event will not be applied, and why (e.g. its
// payload cannot be parsed again).
func (in *Inbox) Ignore(ctx context.Context, evt *v1alpha1.WebhookEvent, why string) (Outcome, error) {
	return in.finish(ctx, evt, v1alpha1.ResultIgnored, why, "")
}

// finish records result on the event and builds the outcome.
func (in *Inbox) finish(ctx context.Context, evt *v1alpha1.WebhookEvent, result v1alpha1.EventResult, msg, paymentName string) (Outcome, error) {
	if err := in.setResult(ctx, evt, result, msg); err != nil {
		return Outcome{}, err
	}
	return Outcome{Stored: true, Result: evt.Status.Result, Message: evt.Status.Message, Payment: paymentName, Event: evt}, nil
}

// setResult writes the event's result through the one status writer. When
// the event is already finished (another writer won: the receiver or the
// processor), its result stands. An unchanged Orphaned or Pending record is
// not rewritten, so re-checking an orphan costs no write.
func (in *Inbox) setResult(ctx context.Context, evt *v1alpha1.WebhookEvent, result v1alpha1.EventResult, msg string) error {
	if len(msg) > maxMessage {
		// Cut where a rune starts: a broken rune would be stored as U+FFFD,
		// and the record would then never equal the message again.
		cut := maxMessage - 3
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "..."
	}
	_, err := statuswriter.Update(ctx, in.writer(), evt, func(evt *v1alpha1.WebhookEvent) error {
		if evt.Status.Result.IsDone() || (!result.IsDone() && evt.Status.Result == result && evt.Status.Message == msg) {
			return nil
		}
		evt.Status.Result, evt.Status.Message = result, msg
		evt.Status.Attempts++
		if result.IsDone() {
			t := metav1.NewTime(in.now())
			evt.Status.AppliedAt = &t
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record result %s on event %s/%s: %w", result, evt.Namespace, evt.Name, err)
	}
	return nil
}

func (in *Inbox) writer() statuswriter.Writer {
	return statuswriter.Writer{Client: in.Client, APIReader: in.APIReader}
}

// decider is the writer of an event's decision on a Payment or Refund read
// from the cache: an event dropped (stale, applying only after a phase the
// cache has not seen yet, a duplicate) is dropped on the API server's copy,
// never on a cache that may lag behind it.
func (in *Inbox) decider() statuswriter.Writer {
	w := in.writer()
	w.ConfirmUnchanged = true
	return w
}

// errNoPayment means no Payment matches the event (yet): the event is Orphaned.
var errNoPayment = errors.New("no matching payment")

// IsNoPayment reports whether err (from PaymentOf) says that no Payment, or
// more than one, matches the event, rather than that they could not be read.
func IsNoPayment(err error) bool { return errors.Is(err, errNoPayment) }

// resolve finds the Payment an event is about: by merchant reference, else by
// the provider's payment id, and only among Payments in the provider's
// namespace that reference the provider (the index keys carry its name).
// PaymentOf is the Payment evt is about, as Apply finds it (by merchant
// reference, then provider payment id); an error when none or several
// match.
func (in *Inbox) PaymentOf(ctx context.Context, evt *v1alpha1.WebhookEvent) (*v1alpha1.Payment, error) {
	return in.resolve(ctx, evt)
}

func (in *Inbox) resolve(ctx context.Context, evt *v1alpha1.WebhookEvent) (*v1alpha1.Payment, error) {
	ns, prov := evt.Namespace, evt.Spec.Provider
	ref, id := evt.Spec.MerchantReference, evt.Spec.ProviderPaymentID
	if ref != "" {
		found, err := in.list(ctx, ns, IndexPaymentMerchantRef, Key(prov, ref))
		if err != nil {
			return nil, err
		}
		if len(found) > 1 && id != "" {
			// Merchant references are not unique by construction (they can be
			// set by hand); the provider's id tells the candidates apart.
			found = withProviderID(found, id)
		}
		switch len(found) {
		case 1:
			return &found[0], nil
		case 0:
		default:
			return nil, fmt.Errorf("%w: %d payments of provider %s share merchant reference %q", errNoPayment, len(found), prov, ref)
		}
	}
	if id != "" {
		found, err := in.list(ctx, ns, IndexPaymentProviderID, Key(prov, id))
		if err != nil {
			return nil, err
		}
		if len(found) == 1 {
			return &found[0], nil
		}
		if len(found) > 1 {
			return nil, fmt.Errorf("%w: %d payments of provider %s share provider payment id %q", errNoPayment, len(found), prov, id)
		}
	}
	return nil, fmt.Errorf("%w: no Payment of provider %s in namespace %s with merchant reference %q or provider payment id %q", errNoPayment, prov, ns, ref, id)
}

func (in *Inbox) list(ctx context.Context, ns, index, key string) ([]v1alpha1.Payment, error) {
	var l v1alpha1.PaymentList
	if err := in.Reader.List(ctx, &l, client.InNamespace(ns), client.MatchingFields{index: key}); err != nil {
		return nil, fmt.Errorf("find payment by %s %q: %w", index, key, err)
	}
	return l.Items, nil
}

func withProviderID(ps []v1alpha1.Payment, id string) []v1alpha1.Payment {
	var out []v1alpha1.Payment
	for _, p := range ps {
		for _, pid := range PaymentProviderIDs(&p) {
			if pid == id {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// notActedOn says why an event is not acted on.
func notActedOn(ev provider.Event) string {
	if ev.NotActedOn != "" {
		return ev.NotActedOn
	}
	return fmt.Sprintf("event type %q is not acted on", ev.Type)
}
