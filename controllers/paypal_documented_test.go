package controllers_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// PayPal behaviour as PayPal documents it and paysim models it
// (docs/providers.md, "Documented behaviour"), end to end through the
// manager.

// shiftedClock is the wall clock moved by a shift the test sets: a manager
// and paysim that share one are hours later together, while requeues and
// timeouts still run in real time.
type shiftedClock struct{ shift atomic.Int64 }

func (c *shiftedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.shift.Load())) }
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *shiftedClock) Add(d time.Duration)             { c.shift.Add(int64(d)) }

// heldSchedule sees a payer's approval within a second, then reads the
// payment once an hour (a Manual payment waiting for its capture).
var heldSchedule = []string{"200ms", "200ms", "200ms", "200ms", "200ms", "1h"}

// TestPayPalOrderNobodyCompletedEndsExpired: PayPal deletes an order that
// nobody completed after about 3 hours (paypal.OrderLifetime) and answers
// 404 for it. A payment whose payer never approved is then Expired
// (OrderExpired) on its next read, and one an operator cancels after that is
// Expired too, without a CancelRefused: neither needs review.
func TestPayPalOrderNobodyCompletedEndsExpired(t *testing.T) {
	t.Parallel()
	clk := &shiftedClock{}
	s, prov := startPayPal(t, paysim.Options{Now: clk.Now}, "expiry", []string{"200ms", "1h"})
	ns := prov.Namespace
	opts := fixture.Run(controllers.ControllerPayment)
	opts.Clock = clk
	m := fixture.StartManager(t, env, ns, opts)
	abandoned := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: "abandoned", Provider: prov.Name}})
	canceled := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: "canceled", Provider: prov.Name}})
	for _, p := range []*v1alpha1.Payment{abandoned, canceled} {
		fixture.WaitPayment(t, env.Client, p, "to wait for its payer on the 1h step", func(p *v1alpha1.Payment) bool {
			return p.Status.CustomerAction != nil && p.Status.Query.Attempts == 1
		})
	}
	m.Stop()

	// Three hours and a bit later, for paysim and for a new manager.
	clk.Add(paypal.OrderLifetime + time.Minute)
	fixture.Annotate(t, env.Client, canceled, v1alpha1.AnnotationCancel, "the customer left")
	fixture.Annotate(t, env.Client, abandoned, v1alpha1.AnnotationRequery, "now")
	m = fixture.StartManager(t, env, ns, opts)
	for _, p := range []*v1alpha1.Payment{abandoned, canceled} {
		got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseExpired, fixture.Timeout)
		if got.Status.Failure == nil || got.Status.Failure.Code != v1alpha1.ReasonOrderExpired || got.Status.ExpiredLocally {
			t.Errorf("%s: failure %+v expiredLocally %v", p.Name, got.Status.Failure, got.Status.ExpiredLocally)
		}
		wantHistoryTo(t, got, v1alpha1.PhaseExpired, map[string]v1alpha1.ObservationSource{"abandoned": v1alpha1.SourceStatusQuery, "canceled": v1alpha1.SourceCancel}[p.Name], v1alpha1.ReasonOrderExpired)
		wantNoReview(t, got)
	}
	for _, reason := range []string{"CancelRefused", "CaptureRefused"} {
		if evs := m.Events.About(canceled.Name, reason); len(evs) > 0 {
			t.Errorf("%s Events for an order that expired: %+v", reason, evs)
		}
	}
	if n := s.Counters().OrdersExpired; n != 2 {
		t.Errorf("paysim expired %d orders, want 2", n)
	}
}

// simEventOf waits for paysim's event typ about the provider payment id.
func simEventOf(t *testing.T, s *fixture.Sim, typ, id string) paysim.EventRecord {
	t.Helper()
	var found paysim.EventRecord
	fixture.Eventually(t, 10*time.Second, typ+" of "+id, func() bool {
		for _, e := range s.Events(paysim.PayPal) {
			if e.PaymentID == id && e.Type == typ {
				found = e
				return true
			}
		}
		return false
	})
	return found
}

// TestPayPalAuthorizationVoidedAtItsEndIsExpired: PayPal sends
// PAYMENT.AUTHORIZATION.VOIDED when an authorization reaches the end of its
// validity (Payments v2 webhook events), as for a void. Received for a Manual
// payment nobody canceled, at its authorizationExpiresAt, it makes the
// payment Expired with reason AuthorizationExpired, not Canceled.
func TestPayPalAuthorizationVoidedAtItsEndIsExpired(t *testing.T) {
	t.Parallel()
	clk := &shiftedClock{}
	s, prov := startPayPal(t, paysim.Options{Now: clk.Now}, "voided", heldSchedule)
	ns := prov.Namespace
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment, controllers.ControllerInbox))
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{
		Payment: fixture.Payment{Namespace: ns, Name: "held", Provider: prov.Name}, CaptureMethod: v1alpha1.CaptureManual,
	})
	id := approve(t, s, v1alpha1.ProviderPayPal, p)
	authorized := awaitAuthorized(t, p)

	// The end of the authorization's validity, for paysim: a read of the
	// order applies it, and PayPal's VOIDED is recorded.
	clk.Add(authorized.Status.AuthorizationExpiresAt.Sub(clk.Now()) + time.Second)
	if v, _ := s.Payment(paysim.PayPal, id); v.State != "expired" {
		t.Fatalf("paysim's authorization did not expire: %+v", v)
	}
	// The manager's own read of the order, due at the authorization's end
	// on the same clock, may see the VOIDED order first; the webhook is then
	// news it already has. Either way the payment must end Expired for the
	// same reason.
	via := v1alpha1.SourceWebhook
	out := fixture.ApplyWebhook(t, m, prov, simEventOf(t, s, "PAYMENT.AUTHORIZATION.VOIDED", id))
	switch {
	case out.Result == v1alpha1.ResultApplied:
	case out.Result == v1alpha1.ResultStale && fixture.GetPayment(t, env.Client, p).Status.Phase == v1alpha1.PhaseExpired:
		via = v1alpha1.SourceStatusQuery
	default:
		t.Fatalf("the VOIDED webhook: %+v", out)
	}
	got := fixture.WaitPayment(t, env.Client, p, "to be settled", func(p *v1alpha1.Payment) bool { return p.Status.Phase.IsFinal() })
	if got.Status.Phase != v1alpha1.PhaseExpired {
		t.Fatalf("phase %s, want Expired (history %+v)", got.Status.Phase, got.Status.History)
	}
	wantHistoryTo(t, got, v1alpha1.PhaseExpired, via, v1alpha1.ReasonAuthorizationExpired)
	wantNoReview(t, got)
}

// TestPayPalInstrumentDeclinedWaitsForThePayerAgain: PayPal refuses the
// capture of an approved order INSTRUMENT_DECLINED when the payer's funding
// source fails, and the payment is restarted so the payer can choose another
// ("Handle funding failures"). The payment goes back to waiting for the payer
// (its link in status.customerAction, no review); when the payer approves
// again, the manager captures again with a key of its own, and the money is
// taken once.
func TestPayPalInstrumentDeclinedWaitsForThePayerAgain(t *testing.T) {
	t.Parallel()
	s := fixture.StartSim(t, paysim.Options{})
	if err := s.Script(paysim.Rule{Provider: paysim.PayPal, Script: paysim.Script{Outcome: paysim.OutcomeAbandon, CaptureOutcome: paysim.OutcomeInstrumentDeclined}}); err != nil {
		t.Fatal(err)
	}
	ns := fixture.Namespace(t, env.Client, "declined")
	prov := fixture.CreatePayPalProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "paypal", Sim: s, Schedule: payerSchedule})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{
		Payment: fixture.Payment{Namespace: ns, Name: "second-card", Provider: prov.Name}, ReturnURL: "https://shop.example/return",
	})
	// The link is read while the payment waits for its payer, before the
	// approval: once approved, the capture in flight clears it.
	waiting := awaitPayer(t, p)
	id, link := waiting.Status.ProviderPaymentID, waiting.Status.CustomerAction
	if err := s.Approve(paysim.PayPal, id); err != nil {
		t.Fatalf("the payer approves: %v", err)
	}

	back := fixture.WaitPayment(t, env.Client, p, "to wait for its payer again after the decline", func(p *v1alpha1.Payment) bool {
		return p.Status.FundingDeclines == 1 && p.Status.WaitingFor == "Payer"
	})
	if back.Status.Phase != v1alpha1.PhasePending || back.Status.CustomerAction == nil || back.Status.CustomerAction.URL != link.URL || back.Status.Operation != nil {
		t.Fatalf("after the decline: phase %s customerAction %+v operation %+v; want Pending at %s", back.Status.Phase, back.Status.CustomerAction, back.Status.Operation, link.URL)
	}
	wantNoReview(t, back)
	wantHistoryTo(t, back, v1alpha1.PhasePending, v1alpha1.SourceCapture, "the provider declined the payer's funding source (INSTRUMENT_DECLINED)")

	if err := s.Approve(paysim.PayPal, id); err != nil {
		t.Fatalf("the payer approves again: %v", err)
	}
	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
	wantNoReview(t, got)
	c := s.Counters()
	first, second := fixture.CaptureKey(v1alpha1.ProviderPayPal, got), fixture.CaptureKey(v1alpha1.ProviderPayPal, got)+"/2"
	if c.CapturesByPayment[id] != 1 || c.InstrumentDeclines != 1 || c.ActionsByKey[first] != 1 || c.ActionsByKey[second] != 1 {
		t.Errorf("captures taking effect %d, declines %d, calls with %s: %d, with %s: %d; want 1, 1, 1, 1",
			c.CapturesByPayment[id], c.InstrumentDeclines, first, c.ActionsByKey[first], second, c.ActionsByKey[second])
	}
	if n := len(m.Events.About(p.Name, "CustomerActionRequired")); n != 2 {
		t.Errorf("%d CustomerActionRequired Events, want 2 (the first link, and again after the decline)", n)
	}
}

// TestPayPalFundsGuaranteedForTheHonorPeriod: a PayPal authorization is valid
// for 29 days but its funds are guaranteed only for the first 3 ("Authorization
// and honor period"). The payment shows both dates, and when the honor period
// passes uncaptured it says so: FundsGuaranteed=False (HonorPeriodEnded) and a
// Warning Event naming the authorization's end.
func TestPayPalFundsGuaranteedForTheHonorPeriod(t *testing.T) {
	t.Parallel()
	clk := &shiftedClock{}
	s, prov := startPayPal(t, paysim.Options{Now: clk.Now}, "honor", heldSchedule)
	ns := prov.Namespace
	opts := fixture.Run(controllers.ControllerPayment)
	opts.Clock = clk
	m := fixture.StartManager(t, env, ns, opts)
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{
		Payment: fixture.Payment{Namespace: ns, Name: "ship-later", Provider: prov.Name}, CaptureMethod: v1alpha1.CaptureManual,
	})
	approve(t, s, v1alpha1.ProviderPayPal, p)
	got := awaitAuthorized(t, p)
	until, expires := got.Status.FundsGuaranteedUntil, got.Status.AuthorizationExpiresAt
	if until == nil || expires == nil || expires.Sub(until.Time) != 26*24*time.Hour {
		t.Fatalf("fundsGuaranteedUntil %v, authorizationExpiresAt %v: want the 3-day honor period of a 29-day authorization", until, expires)
	}
	if len(m.Events.About(p.Name, v1alpha1.ReasonHonorPeriodEnded)) > 0 {
		t.Fatal("HonorPeriodEnded inside the honor period")
	}
	m.Stop()

	// Day 4, for paysim and a new manager (whose first reconcile reads it).
	clk.Add(until.Sub(clk.Now()) + time.Minute)
	m = fixture.StartManager(t, env, ns, opts)
	ev := m.Events.Wait(t, corev1.EventTypeWarning, v1alpha1.ReasonHonorPeriodEnded)
	if !strings.Contains(ev.Message, expires.UTC().Format(time.RFC3339)) {
		t.Errorf("Event %+v: want it to name the authorization's end %s", ev, expires)
	}
	got = fixture.WaitPayment(t, env.Client, p, "to show the lapsed guarantee", func(p *v1alpha1.Payment) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionFundsGuaranteed)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonHonorPeriodEnded
	})
	if got.Status.Phase != v1alpha1.PhaseAuthorized || got.Status.WaitingFor != "Capture" {
		t.Errorf("phase %s waitingFor %q: still Authorized, waiting for the capture", got.Status.Phase, got.Status.WaitingFor)
	}
	wantNoReview(t, got)
}

// TestPayPalApprovalReversedEndsExpired: an approved PayPal order the
// merchant did not capture in time is reversed by PayPal
// (CHECKOUT.PAYMENT-APPROVAL.REVERSED: the order canceled, the payer
// refunded). The webhook settles its payment Expired with PayPal's reason, no
// review.
func TestPayPalApprovalReversedEndsExpired(t *testing.T) {
	t.Parallel()
	s, prov := startPayPal(t, paysim.Options{}, "reversed", heldSchedule)
	ns := prov.Namespace
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment, controllers.ControllerInbox))
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{
		Payment: fixture.Payment{Namespace: ns, Name: "reversed", Provider: prov.Name}, CaptureMethod: v1alpha1.CaptureManual,
	})
	id := awaitPayer(t, p).Status.ProviderPaymentID
	m.Stop() // no authorization of the approved order: it waits, as an APM order the merchant does not capture in time
	if err := s.Approve(paysim.PayPal, id); err != nil {
		t.Fatal(err)
	}
	if err := s.ReverseApproval(paysim.PayPal, id); err != nil {
		t.Fatal(err)
	}
	m = fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerInbox))
	if out := fixture.ApplyWebhook(t, m, prov, simEventOf(t, s, "CHECKOUT.PAYMENT-APPROVAL.REVERSED", id)); out.Result != v1alpha1.ResultApplied {
		t.Fatalf("the reversal: %+v", out)
	}
	got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseExpired, fixture.Timeout)
	wantHistoryTo(t, got, v1alpha1.PhaseExpired, v1alpha1.SourceWebhook, paypal.FailureApprovalReversed)
	wantNoReview(t, got)
}

// TestPayPalBackfillRecoversLostWebhooks: PayPal lists its webhook events
// (Webhooks Management API v1, "List event notifications"), so captures and
// refunds whose webhooks were all lost are recovered by the backfill alone
// (the one status query of a tracked order sees it unpaid, the next is an
// hour away): the captured payments settle Succeeded, the refunded one —
// final, no longer queried — ends with PayPal's refunded total, each event
// applied once.
func TestPayPalBackfillRecoversLostWebhooks(t *testing.T) {
	t.Parallel()
	s := fixture.StartSim(t, paysim.Options{Faults: paysim.Faults{DropRate: 1}, DefaultScript: &paysim.Script{Outcome: paysim.OutcomePending}})
	if err := s.SetWebhookTarget(paysim.PayPal, "http://receiver.invalid/webhooks"); err != nil {
		t.Fatal(err)
	}
	ns := fixture.Namespace(t, env.Client, "ppbackfill")
	prov := fixture.CreatePayPalProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "paypal", Sim: s, Quiet: true,
		Spec: func(spec *v1alpha1.PaymentProviderSpec) {
			spec.Backfill = v1alpha1.BackfillConfig{Enabled: true, Interval: fixture.Duration("200ms")}
		}})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment, controllers.ControllerInbox, controllers.ControllerBackfill))

	// Orders paid at PayPal once their first status query saw them unpaid
	// (PAYMENT.CAPTURE.COMPLETED lost).
	captured := fixture.TrackedPayment(t, env.Client, s, prov, "captured", paysim.OutcomePending)
	refunded := fixture.TrackedPayment(t, env.Client, s, prov, "refunded", paysim.OutcomePending)
	for _, p := range []*v1alpha1.Payment{captured, refunded} {
		fixture.WaitPayment(t, env.Client, p, "to be read unpaid", func(p *v1alpha1.Payment) bool { return p.Status.Query.Attempts == 1 })
		if err := s.SetOutcome(paysim.PayPal, p.Spec.ProviderPaymentID, paysim.Script{Outcome: paysim.OutcomeSucceed}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*v1alpha1.Payment{captured, refunded} {
		fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
	}
	// Refunded at PayPal in two steps (PAYMENT.CAPTURE.REFUNDED lost twice).
	id := refunded.Spec.ProviderPaymentID
	if err := s.Refund(paysim.PayPal, id, 500); err != nil {
		t.Fatal(err)
	}
	got := fixture.WaitPayment(t, env.Client, refunded, "to read the first refund", func(p *v1alpha1.Payment) bool {
		return p.Status.Phase == v1alpha1.PhasePartiallyRefunded
	})
	if a := got.Status.AmountRefunded; a == nil || a.Value != 500 {
		t.Fatalf("refunded %+v after PayPal refunded 5.00", a)
	}
	if err := s.Refund(paysim.PayPal, id, 0); err != nil {
		t.Fatal(err)
	}
	got = fixture.WaitPhase(t, env.Client, refunded, v1alpha1.PhaseRefunded, fixture.Timeout)
	if a := got.Status.AmountRefunded; a == nil || a.Value != 1999 || a.Currency != "USD" {
		t.Fatalf("refunded %+v after PayPal refunded all 19.99 USD", a)
	}
	m.Stop()

	c := s.Counters()
	if w := c.WebhooksByProvider[paysim.PayPal]; w.Delivered != 0 || w.Dropped != 4 {
		t.Errorf("deliveries %+v; want all 4 events lost", w)
	}
	stored := map[string]v1alpha1.WebhookEvent{}
	for _, e := range fixture.WebhookEvents(t, env.Client, ns) {
		stored[e.Spec.EventID] = e
	}
	for _, ev := range s.Events(paysim.PayPal) {
		e, ok := stored[ev.ID]
		if !ok || e.Spec.Via != v1alpha1.ViaBackfill {
			t.Errorf("event %s (%s): stored %v via %q; want it read by the backfill", ev.ID, ev.Type, ok, e.Spec.Via)
		}
		p := map[string]*v1alpha1.Payment{captured.Spec.ProviderPaymentID: captured, id: refunded}[ev.PaymentID]
		if h := fixture.HistoryOf(fixture.GetPayment(t, env.Client, p), ev.ID); len(h) != 1 || h[0].Source != v1alpha1.SourceBackfill {
			t.Errorf("%s by event %s (%s): %s; want one transition from Backfill", p.Name, ev.ID, ev.Type, fixture.Dump(h))
		}
	}
	for _, p := range []*v1alpha1.Payment{captured, refunded} {
		if q := c.QueriesByPayment[p.Spec.ProviderPaymentID]; q != 1 {
			t.Errorf("%s was queried %d times; want once, before it was paid: the backfill alone must settle it", p.Name, q)
		}
	}
}
