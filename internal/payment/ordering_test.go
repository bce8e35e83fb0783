package payment_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// The same facts about a payment (a call's answer, the look-up of its
// outcome, the provider's webhook, a backfilled, late or duplicated event, an
// operator's annotation) reach paywarden in any order. Each test here feeds
// one scenario's facts in every order and checks that the payment ends the
// same way (phase, reason, amounts, operation), or as SPEC says where it
// allows the order to matter.

// fact is one piece of news, fed to the payment as it stands when it
// arrives; now is its arrival time (later for a later position).
type fact struct {
	name string
	feed func(p *v1alpha1.Payment, now time.Time) *v1alpha1.Payment
}

// permutations of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{nil}
	}
	var out [][]int
	for _, rest := range permutations(n - 1) {
		for i := 0; i <= len(rest); i++ {
			perm := append(append(append([]int(nil), rest[:i]...), n-1), rest[i:]...)
			out = append(out, perm)
		}
	}
	return out
}

// everyOrder feeds facts to a fresh start() in every order, one step apart
// from base, then runs then (the next reconcile, when the scenario needs
// one; nil for none) and returns each final payment by its order.
func everyOrder(start func() *v1alpha1.Payment, base, step time.Duration, at time.Time, facts []fact, then func(*v1alpha1.Payment, time.Time) *v1alpha1.Payment) map[string]*v1alpha1.Payment {
	out := map[string]*v1alpha1.Payment{}
	for _, perm := range permutations(len(facts)) {
		p := start()
		now := at.Add(base)
		names := make([]string, 0, len(perm))
		for _, i := range perm {
			p = facts[i].feed(p, now)
			names = append(names, facts[i].name)
			now = now.Add(step)
		}
		if then != nil {
			p = then(p, now)
		}
		out[strings.Join(names, " → ")] = p
	}
	return out
}

// ending is what an order must not change.
type ending struct {
	phase              v1alpha1.PaymentPhase
	reason             string // of the last history entry (the phase's)
	received, refunded int64
	operation          bool
	review             string
	locally            bool
}

func (e ending) String() string {
	return fmt.Sprintf("%s (%q) received %d refunded %d operation %v review %q locally %v",
		e.phase, e.reason, e.received, e.refunded, e.operation, e.review, e.locally)
}

func endingOf(p *v1alpha1.Payment) ending {
	st := &p.Status
	e := ending{phase: st.Phase, operation: st.Operation != nil, review: review(p), locally: st.ExpiredLocally}
	for i := len(st.History) - 1; i >= 0; i-- {
		if h := st.History[i]; h.To == st.Phase {
			e.reason = h.Reason
			break
		}
	}
	if a := st.AmountReceived; a != nil {
		e.received = a.Value
	}
	if a := st.AmountRefunded; a != nil {
		e.refunded = a.Value
	}
	return e
}

// wantEnding checks every order ended as want.
func wantEnding(t *testing.T, got map[string]*v1alpha1.Payment, want ending) {
	t.Helper()
	wantEndings(t, got, want, endingOf)
}

// wantEndings checks that every order's object (by order) ended as want,
// its ending read by of.
func wantEndings[O any, E comparable](t *testing.T, got map[string]O, want E, of func(O) E) {
	t.Helper()
	for order, o := range got {
		if e := of(o); e != want {
			t.Errorf("%s:\n\tgot  %+v\n\twant %+v", order, e, want)
		}
	}
}

// Fact builders.

func outcomeFact(name string, f func(p *v1alpha1.Payment, now time.Time) payment.Outcome) fact {
	return fact{name, func(p *v1alpha1.Payment, now time.Time) *v1alpha1.Payment { return store(p, f(p, now)) }}
}

// eventFact is a provider event (webhook or backfill) about pay_1.
func eventFact(name string, obs payment.Observation) fact {
	obs.ProviderPaymentID = "pay_1"
	return outcomeFact(name, func(p *v1alpha1.Payment, now time.Time) payment.Outcome { return payment.ApplyEvent(p, obs, now) })
}

// answerFact is the answer to an operation's call.
func answerFact(name string, pol payment.Policy, kind v1alpha1.OperationKind, call payment.Call) fact {
	return outcomeFact(name, func(p *v1alpha1.Payment, now time.Time) payment.Outcome {
		return payment.AfterOperation(p, pol, kind, call, now)
	})
}

// lookupFact is a status query (the look-up of an operation's outcome, or a
// scheduled one; closeOut for the close-out's fresh query).
func lookupFact(name string, pol payment.Policy, call payment.Call, closeOut bool) fact {
	return outcomeFact(name, func(p *v1alpha1.Payment, now time.Time) payment.Outcome {
		return payment.AfterQuery(p, pol, call, closeOut, now)
	})
}

// annotationFact is an operator's annotation, acted on by the reconcile it
// wakes (when there is anything to act on now).
func annotationFact(name, key, value string) fact {
	return fact{name, func(p *v1alpha1.Payment, now time.Time) *v1alpha1.Payment {
		p = annotate(p, key, value)
		return actOn(p, now)
	}}
}

// actOn is a reconcile acting on the payment's annotations.
func actOn(p *v1alpha1.Payment, now time.Time) *v1alpha1.Payment {
	if out, _, ok := payment.OperatorAction(p, now); ok {
		return store(p, out)
	}
	return p
}

// paidCall is a call answered with the payment succeeded for value.
func paidCall(value int64) payment.Call {
	c := answer(provider.StatusSucceeded)
	c.Payment.Amount = value
	return c
}

func paidEvent(id string, value int64, at time.Time) payment.Observation {
	return obsWebhook(payment.ObservedSucceeded, id, withAmount(value, orderCurrency), withRaw("payment.succeeded"), withOccurredAt(at))
}

// markedFor runs the reconcile that marks p's operation (an annotation's,
// or the automatic one) and checks it did.
func markedFor(t *testing.T, p *v1alpha1.Payment, pol payment.Policy, kind v1alpha1.OperationKind, now time.Time) *v1alpha1.Payment {
	t.Helper()
	s := payment.Plan(p, pol, payment.Facts{}, now)
	if s.Action != payment.Write || s.Outcome.Status.Operation == nil || s.Outcome.Status.Operation.Kind != kind {
		t.Fatalf("fixture: %s (%s) operation %+v, want a %s marked", s.Action, s.Why, s.Outcome.Status.Operation, kind)
	}
	return store(p, s.Outcome)
}

// An operator's cancel (SPEC §11.5): the provider's canceled event, or a
// look-up of the cancel's outcome, can come before the call's answer. Each
// way the payment is Canceled for the operator's reason.
func TestOrderOperatorCancel(t *testing.T) {
	pol := testPolicy()
	start := func() *v1alpha1.Payment {
		return markedFor(t, annotate(created("op-cancel"), v1alpha1.AnnotationCancel, "out of stock"), pol, v1alpha1.OperationCancel, t0.Add(time.Minute))
	}
	canceled := obsWebhook(payment.ObservedCanceled, "evt-canceled", withRaw("payment.canceled"), withOccurredAt(t0.Add(time.Minute)))
	got := everyOrder(start, time.Minute, time.Second, t0, []fact{
		answerFact("the cancel's answer", pol, v1alpha1.OperationCancel, answer(provider.StatusCanceled)),
		eventFact("its webhook", canceled),
		eventFact("its backfilled copy", func() payment.Observation { o := canceled; o.Source = v1alpha1.SourceBackfill; return o }()),
		lookupFact("a look-up", pol, answer(provider.StatusCanceled), false),
	}, nil)
	wantEnding(t, got, ending{phase: v1alpha1.PhaseCanceled, reason: v1alpha1.ReasonCanceledByOperator + ": out of stock"})
}

// The close-out (SPEC §2.5) in every order of its cancel's answer (Canceled,
// or the provider's Expired), its events and a look-up: Expired
// (UnpaidTimeout) at the provider, never Canceled.
func TestOrderCloseOut(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Cancel: true}, true
	past := t0.Add(11 * time.Minute)
	start := func() *v1alpha1.Payment {
		p := expiresAfter(created("close-out"), 10*time.Minute)
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusPending), true, past))
		if op := p.Status.Operation; op == nil || op.Reason != v1alpha1.ReasonUnpaidTimeout {
			t.Fatalf("fixture: operation %+v, want the close-out's cancel", op)
		}
		return p
	}
	for _, answered := range []provider.Status{provider.StatusCanceled, provider.StatusExpired} {
		t.Run("answered "+string(answered), func(t *testing.T) {
			got := everyOrder(start, time.Minute, time.Second, past, []fact{
				answerFact("the cancel's answer", pol, v1alpha1.OperationCancel, answer(answered)),
				eventFact("canceled webhook", obsWebhook(payment.ObservedCanceled, "evt-canceled", withOccurredAt(past))),
				eventFact("expired webhook", obsWebhook(payment.ObservedExpired, "evt-expired", withOccurredAt(past))),
				lookupFact("a look-up", pol, answer(answered), false),
			}, nil)
			wantEnding(t, got, ending{phase: v1alpha1.PhaseExpired, reason: v1alpha1.ReasonUnpaidTimeout})
		})
	}
}

// A refused close-out (CloseOutRefused) and then the provider's own event:
// the fresh query closes it out locally, or the provider's close comes
// first. SPEC lets the first final answer stand (§2.1, final phases do not
// flip): Expired locally (UnpaidTimeout), or the provider's Expired or
// Canceled. Either way not paid, nothing received, nothing in flight.
func TestOrderRefusedCloseOutThenAnEvent(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Cancel: true}, true
	past := t0.Add(11 * time.Minute)
	start := func() *v1alpha1.Payment {
		p := expiresAfter(created("refused"), 10*time.Minute)
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusPending), true, past))
		p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, fails(errRefused), past))
		if !p.Status.CloseOutRefused || p.Status.Operation != nil {
			t.Fatalf("fixture: refused %v operation %+v", p.Status.CloseOutRefused, p.Status.Operation)
		}
		return p
	}
	for _, ev := range []payment.Observed{payment.ObservedExpired, payment.ObservedCanceled} {
		t.Run(string(ev), func(t *testing.T) {
			got := everyOrder(start, time.Second, time.Second, past, []fact{
				lookupFact("the fresh query (pending)", pol, answer(provider.StatusPending), true),
				eventFact("the provider's event", obsWebhook(ev, "evt-close", withOccurredAt(past))),
			}, nil)
			for order, p := range got {
				e := endingOf(p)
				if !e.phase.IsFinal() || e.phase.TookMoney() || e.operation || e.received != 0 || e.review != "" {
					t.Errorf("%s: %s, want not paid, settled, nothing in flight", order, e)
				}
				if e.phase == v1alpha1.PhaseExpired && e.locally && e.reason != v1alpha1.ReasonUnpaidTimeout {
					t.Errorf("%s: %s: a local close-out is UnpaidTimeout", order, e)
				}
			}
		})
	}
}

// A Manual payment's capture, full or partial (SPEC §11.5): its answer, the
// provider's event of the capture, a look-up and a late event of the
// authorization, in every order. The payment received what was captured.
func TestOrderManualCapture(t *testing.T) {
	pol := testPolicy()
	for _, captured := range []int64{1000, 600} {
		t.Run(formatMinor(captured), func(t *testing.T) {
			marked := t0.Add(time.Minute)
			start := func() *v1alpha1.Payment {
				return markedFor(t, annotate(authorizedFor(t, "capture", 1000), v1alpha1.AnnotationCapture, formatMinor(captured)), pol, v1alpha1.OperationCapture, marked)
			}
			got := everyOrder(start, time.Minute, time.Second, t0, []fact{
				answerFact("the capture's answer", pol, v1alpha1.OperationCapture, paidCall(captured)),
				eventFact("the capture's event", paidEvent("evt-captured", captured, marked.Add(2*time.Second))),
				lookupFact("a look-up", pol, paidCall(captured), false),
				eventFact("the authorization's event, late", obsWebhook(payment.ObservedAuthorized, "evt-auth", withAmount(1000, orderCurrency), withOccurredAt(t0))),
				eventFact("a capture pending event", obsWebhook(payment.ObservedProcessing, "evt-pending", withOccurredAt(marked.Add(time.Second+500*time.Millisecond)))),
			}, nil)
			wantEnding(t, got, ending{phase: v1alpha1.PhaseSucceeded, received: captured})
		})
	}
}

// A partial capture, then a refund of everything captured: the refund's
// event can come before the capture's success (the inbox keeps it Orphaned
// and applies it again once the payment changes). Refunded, 600 of 600.
func TestOrderPartialCaptureThenRefund(t *testing.T) {
	pol := testPolicy()
	marked := t0.Add(time.Minute)
	start := func() *v1alpha1.Payment {
		return markedFor(t, annotate(authorizedFor(t, "capture-refund", 1000), v1alpha1.AnnotationCapture, "600"), pol, v1alpha1.OperationCapture, marked)
	}
	refund := obsWebhook(payment.ObservedRefund, "evt-refund", withRefunded(600, orderCurrency), withProviderID("pay_1"))
	got := everyOrder(start, time.Minute, time.Second, t0, []fact{
		answerFact("the capture's answer", pol, v1alpha1.OperationCapture, paidCall(600)),
		eventFact("the capture's event", paidEvent("evt-captured", 600, marked.Add(2*time.Second))),
		eventFact("the refund's event", refund),
	}, func(p *v1alpha1.Payment, now time.Time) *v1alpha1.Payment {
		// The inbox applies an Orphaned refund event again.
		return store(p, payment.ApplyEvent(p, refund, now))
	})
	wantEnding(t, got, ending{phase: v1alpha1.PhaseRefunded, reason: "refunded " + v1alpha1.FormatAmount(600, orderCurrency), received: 600, refunded: 600})
}

// PayPal's automatic capture: approval, the capture paywarden then makes,
// its answer, the capture's event, a look-up and the approval's event
// delivered again (and backfilled), in every order.
func TestOrderAutomaticCapture(t *testing.T) {
	pol := paypalPolicy()
	approved := obsWebhook(payment.ObservedApproved, "evt-ok", withRaw("CHECKOUT.ORDER.APPROVED"), withOccurredAt(t0.Add(10*time.Second)))
	t.Run("after the capture was marked", func(t *testing.T) {
		start := func() *v1alpha1.Payment {
			return markedFor(t, approvedOrder("auto"), pol, v1alpha1.OperationCapture, t0.Add(20*time.Second))
		}
		backfilled := approved
		backfilled.Source = v1alpha1.SourceBackfill
		got := everyOrder(start, time.Minute, time.Second, t0, []fact{
			answerFact("the capture's answer", pol, v1alpha1.OperationCapture, paidCall(orderValue)),
			eventFact("PAYMENT.CAPTURE.COMPLETED", paidEvent("evt-captured", orderValue, t0.Add(30*time.Second))),
			lookupFact("a look-up", pol, paidCall(orderValue), false),
			eventFact("the approval again", approved),
			eventFact("the approval backfilled", backfilled),
		}, nil)
		wantEnding(t, got, ending{phase: v1alpha1.PhaseSucceeded, received: orderValue})
	})
	t.Run("the capture's event before the approval's", func(t *testing.T) {
		start := func() *v1alpha1.Payment { return lifecyclePay("auto-events", v1alpha1.CaptureAutomatic) }
		got := everyOrder(start, time.Minute, time.Second, t0, []fact{
			eventFact("CHECKOUT.ORDER.APPROVED", approved),
			eventFact("PAYMENT.CAPTURE.COMPLETED", paidEvent("evt-captured", orderValue, t0.Add(30*time.Second))),
		}, nil)
		wantEnding(t, got, ending{phase: v1alpha1.PhaseSucceeded, received: orderValue})
		for order, p := range got {
			if s := payment.Plan(p, pol, payment.Facts{}, t0.Add(time.Hour)); s.Action == payment.CallCapture || s.Outcome.Status.Operation != nil {
				t.Errorf("%s: %s (%s): a capture of a payment already paid", order, s.Action, s.Why)
			}
		}
	})
}

// PayPal's authorize step of a Manual payment: the authorize call's answer,
// its event and a look-up, in every order: Authorized for the amount, the
// operation ended.
func TestOrderAuthorize(t *testing.T) {
	pol := paypalPolicy()
	start := func() *v1alpha1.Payment {
		p := lifecyclePay("authorize", v1alpha1.CaptureManual)
		p = store(p, payment.ApplyEvent(p, obsWebhook(payment.ObservedApproved, "evt-ok", withProviderID("pay_1")), t0.Add(10*time.Second)))
		return markedFor(t, p, pol, v1alpha1.OperationAuthorize, t0.Add(20*time.Second))
	}
	authorized := answer(provider.StatusAuthorized)
	got := everyOrder(start, time.Minute, time.Second, t0, []fact{
		answerFact("the authorize's answer", pol, v1alpha1.OperationAuthorize, authorized),
		eventFact("its event", obsWebhook(payment.ObservedAuthorized, "evt-auth", withAmount(orderValue, orderCurrency), withOccurredAt(t0.Add(30*time.Second)))),
		lookupFact("a look-up", pol, authorized, false),
	}, nil)
	wantEnding(t, got, ending{phase: v1alpha1.PhaseAuthorized})
	for order, p := range got {
		if a := p.Status.AmountAuthorized; a == nil || a.Value != orderValue {
			t.Errorf("%s: authorized %+v, want %d", order, a, orderValue)
		}
	}
}

// A cancel racing a capture: the operator's cancel annotation while a
// capture is under way (refused: a capture is in progress, or it took the
// money), or the merchant's capture annotation while a cancel is (it waits,
// then finds the payment canceled). The money decides, whatever the order.
func TestOrderCancelRacingCapture(t *testing.T) {
	pol := testPolicy()
	t.Run("captured, the cancel annotated meanwhile", func(t *testing.T) {
		start := func() *v1alpha1.Payment {
			return markedFor(t, annotate(authorizedFor(t, "race", 1000), v1alpha1.AnnotationCapture, "all"), pol, v1alpha1.OperationCapture, t0.Add(time.Minute))
		}
		got := everyOrder(start, time.Minute, time.Second, t0, []fact{
			answerFact("the capture's answer", pol, v1alpha1.OperationCapture, paidCall(1000)),
			eventFact("the capture's event", paidEvent("evt-captured", 1000, t0.Add(time.Minute+2*time.Second))),
			annotationFact("the cancel annotation", v1alpha1.AnnotationCancel, "changed my mind"),
		}, actOn)
		wantEnding(t, got, ending{phase: v1alpha1.PhaseSucceeded, received: 1000})
	})
	t.Run("canceled, the capture annotated meanwhile", func(t *testing.T) {
		start := func() *v1alpha1.Payment {
			return markedFor(t, annotate(authorizedFor(t, "race", 1000), v1alpha1.AnnotationCancel, "out of stock"), pol, v1alpha1.OperationCancel, t0.Add(time.Minute))
		}
		got := everyOrder(start, time.Minute, time.Second, t0, []fact{
			answerFact("the cancel's answer", pol, v1alpha1.OperationCancel, answer(provider.StatusCanceled)),
			eventFact("the void's event", obsWebhook(payment.ObservedCanceled, "evt-void", withRaw("PAYMENT.AUTHORIZATION.VOIDED"), withOccurredAt(t0.Add(time.Minute+time.Second)))),
			annotationFact("the capture annotation", v1alpha1.AnnotationCapture, "all"),
		}, actOn)
		wantEnding(t, got, ending{phase: v1alpha1.PhaseCanceled, reason: v1alpha1.ReasonCanceledByOperator + ": out of stock"})
	})
	t.Run("the payer paid while the cancel was under way", func(t *testing.T) {
		start := func() *v1alpha1.Payment {
			return markedFor(t, annotate(created("race-paid"), v1alpha1.AnnotationCancel, "out of stock"), pol, v1alpha1.OperationCancel, t0.Add(time.Minute))
		}
		got := everyOrder(start, time.Minute, time.Second, t0, []fact{
			answerFact("the cancel refused", pol, v1alpha1.OperationCancel, fails(errRefused)),
			eventFact("payment.succeeded", paidEvent("evt-paid", orderValue, t0.Add(time.Minute))),
			lookupFact("a look-up", pol, paidCall(orderValue), false),
		}, nil)
		wantEnding(t, got, ending{phase: v1alpha1.PhaseSucceeded, received: orderValue})
	})
}

// An authorization voided at its end (voidedAtItsEnd), and an operator's
// cancel annotated after that, before paywarden learned of the void: the
// void is the expiry (SPEC §11.5: Expired, AuthorizationExpired), whichever
// of the void's event, the annotation, the cancel's answer (VOIDED) and a
// look-up (VOIDED) comes first. A cancel asked for after the authorization
// ended cannot be what voided it.
func TestOrderAuthorizationExpiryAndALateCancel(t *testing.T) {
	pol := testPolicy()
	expiry := t0.Add(29 * 24 * time.Hour)
	start := func() *v1alpha1.Payment { return authorizedUntil("expiry", expiry) }
	voided := obsWebhook(payment.ObservedCanceled, "evt-void", withRaw("PAYMENT.AUTHORIZATION.VOIDED"), withOccurredAt(expiry))
	canceled := answer(provider.StatusCanceled)
	got := everyOrder(start, time.Minute, time.Minute, expiry, []fact{
		eventFact("the void's event", voided),
		annotationFact("the cancel annotation", v1alpha1.AnnotationCancel, "too late"),
		answerFact("the cancel's answer", pol, v1alpha1.OperationCancel, canceled),
		lookupFact("a look-up", pol, canceled, false),
	}, nil)
	wantEnding(t, got, ending{phase: v1alpha1.PhaseExpired, reason: v1alpha1.ReasonAuthorizationExpired})
}

// The payment's refunded total from refund events (delivered late,
// duplicated, backfilled) and a read: the provider's highest cumulative
// figure, whatever the order.
func TestOrderRefundedTotal(t *testing.T) {
	pol := testPolicy()
	start := func() *v1alpha1.Payment { return succeededPayment() }
	first := obsWebhook(payment.ObservedRefund, "evt-r1", withRefunded(300, orderCurrency), withOccurredAt(t0.Add(time.Hour)))
	second := obsWebhook(payment.ObservedRefund, "evt-r2", withRefunded(500, orderCurrency), withOccurredAt(t0.Add(2*time.Hour)))
	backfilled := second
	backfilled.Source = v1alpha1.SourceBackfill
	got := everyOrder(start, 3*time.Hour, time.Second, t0, []fact{
		eventFact("refund 300", first),
		eventFact("refund 500", second),
		eventFact("refund 500 backfilled", backfilled),
		lookupFact("a read", pol, refundedAnswer(500), false),
	}, nil)
	wantEnding(t, got, ending{phase: v1alpha1.PhasePartiallyRefunded, reason: "refunded " + v1alpha1.FormatAmount(500, orderCurrency), received: orderValue, refunded: 500})
}

// Refunds.

type refundFact struct {
	name string
	feed func(r *v1alpha1.Refund, now time.Time) payment.RefundOutcome
}

// refundEveryOrder is everyOrder for a Refund.
func refundEveryOrder(start func() *v1alpha1.Refund, at time.Time, facts []refundFact) map[string]*v1alpha1.Refund {
	out := map[string]*v1alpha1.Refund{}
	for _, perm := range permutations(len(facts)) {
		r := start()
		now := at
		names := make([]string, 0, len(perm))
		for _, i := range perm {
			r.Status = facts[i].feed(r, now).Status
			names = append(names, facts[i].name)
			now = now.Add(time.Second)
		}
		out[strings.Join(names, " → ")] = r
	}
	return out
}

type refundEnding struct {
	phase    v1alpha1.RefundPhase
	id       string
	amount   int64
	review   string
	reversed bool
}

func refundEndingOf(r *v1alpha1.Refund) refundEnding {
	e := refundEnding{phase: r.Status.Phase, id: r.Status.ProviderRefundID, review: refundReview(&r.Status), reversed: payment.RefundReversed(r)}
	if a := r.Status.Amount; a != nil {
		e.amount = a.Value
	}
	return e
}

func wantRefundEnding(t *testing.T, got map[string]*v1alpha1.Refund, want refundEnding) {
	t.Helper()
	wantEndings(t, got, want, refundEndingOf)
}

func refundEventFact(name string, rf provider.Refund, eventID string, at time.Time) refundFact {
	return refundFact{name, func(r *v1alpha1.Refund, now time.Time) payment.RefundOutcome {
		obs := payment.FromRefund(rf, v1alpha1.SourceWebhook, eventID)
		obs.OccurredAt = at
		return payment.ApplyRefundEvent(r, obs, now)
	}}
}

// A Refund's webhook before its call's answer (or instead of it), and an
// event of an earlier Refund of the same name (deleted and re-created: its
// reference names the other UID), in every order.
func TestOrderRefundCall(t *testing.T) {
	pol := testPolicy()
	start := func() *v1alpha1.Refund {
		r := newRefundMarked(pol, payment.RefundFacts{Payment: paidPayment(0)})
		if r.Status.CreateRequestedAt == nil || r.Status.Amount == nil {
			t.Fatalf("fixture: refund status %+v, want marked", r.Status)
		}
		return r
	}
	own := func(status provider.RefundStatus) provider.Refund {
		r := start()
		return provider.Refund{ID: "re_1", Status: status, RawStatus: strings.ToLower(string(status)), Amount: 500, Currency: orderCurrency, Reference: r.Reference()}
	}
	earlier := start()
	earlier.UID = types.UID("uid-earlier")
	other := provider.Refund{ID: "re_0", Status: provider.RefundSucceeded, Amount: 300, Currency: orderCurrency, Reference: earlier.Reference()}
	for _, answered := range []provider.RefundStatus{provider.RefundSucceeded, provider.RefundPending} {
		t.Run("answered "+string(answered), func(t *testing.T) {
			got := refundEveryOrder(start, t0.Add(time.Second), []refundFact{
				{"the call's answer", func(r *v1alpha1.Refund, now time.Time) payment.RefundOutcome {
					return payment.AfterRefundCreate(r, pol, payment.RefundCall{Refund: own(answered)}, now)
				}},
				refundEventFact("refund.succeeded", own(provider.RefundSucceeded), "evt-re-1", t0.Add(2*time.Second)),
				refundEventFact("the earlier Refund's refund.succeeded", other, "evt-re-0", t0.Add(-time.Hour)),
			})
			wantRefundEnding(t, got, refundEnding{phase: v1alpha1.RefundSucceeded, id: "re_1", amount: 500})
		})
	}
}

// Stripe: a refund can fail after it succeeded (§12.2). Its events can be
// delivered in either order (each says when it happened), and a read finds
// it failed: the refund failed after it succeeded, its money back with the
// merchant, its payment to read the lower total. The Refund ends Failed
// either way, without a review: the success delivered late happened before
// the failure and contradicts nothing.
func TestOrderRefundFailedAfterSucceeded(t *testing.T) {
	start := func() *v1alpha1.Refund {
		r := sentRefund("stripe", 500, v1alpha1.RefundPending)
		r.Status.ProviderStatus = "pending"
		return &r
	}
	ok := provider.Refund{ID: "re_stripe", Status: provider.RefundSucceeded, RawStatus: "succeeded", Amount: 500, Currency: orderCurrency}
	failed := provider.Refund{ID: "re_stripe", Status: provider.RefundFailed, RawStatus: "failed", FailureCode: "expired_or_canceled_card"}
	got := refundEveryOrder(start, t0.Add(time.Hour), []refundFact{
		refundEventFact("refund.updated succeeded", ok, "evt-ok", t0.Add(time.Minute)),
		refundEventFact("refund.failed", failed, "evt-failed", t0.Add(10*time.Minute)),
		{"a read (failed)", func(r *v1alpha1.Refund, now time.Time) payment.RefundOutcome {
			return payment.AfterRefundQuery(r, testPolicy(), payment.RefundCall{Refund: failed}, now)
		}},
	})
	for order, r := range got {
		e := refundEndingOf(r)
		if e.phase != v1alpha1.RefundFailed || e.review != "" || !payment.RefundMayLower(r) {
			t.Errorf("%s: %+v, want Failed, no review, its payment's total to be read again", order, e)
		}
	}
}
