package payment_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// Partial captures (SPEC §11.5): what the payment received is what was
// captured, and every later rule measures against that.

// partlyCaptured is a Manual payment of 1000 minor units, authorized for all
// of it, whose merchant captured part of it (amount); the
// capture is under way (Processing) at the provider.
func partlyCaptured(t *testing.T, amount int64) *v1alpha1.Payment {
	t.Helper()
	pol := testPolicy()
	p := newPay("partial")
	p.Spec.Amount.Value = 1000
	p.Spec.CaptureMethod = v1alpha1.CaptureManual
	p = store(p, planned(p, pol, t0).Outcome)
	p = store(p, payment.AfterCreate(p, pol, payment.Call{Payment: provider.Payment{ID: "pay_1", Status: provider.StatusAuthorized, Amount: 1000, Currency: orderCurrency}}, t0))
	if p.Status.Phase != v1alpha1.PhaseAuthorized {
		t.Fatalf("fixture: phase %s, want Authorized", p.Status.Phase)
	}
	p = annotate(p, v1alpha1.AnnotationCapture, formatMinor(amount))
	s := payment.Plan(p, pol, payment.Facts{}, t0.Add(time.Minute))
	if s.Action != payment.Write || s.Outcome.Status.AmountToCapture == nil || s.Outcome.Status.AmountToCapture.Value != amount {
		t.Fatalf("fixture: capture step %s %+v", s.Action, s.Outcome.Status.AmountToCapture)
	}
	p = store(p, s.Outcome)
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, payment.Call{Payment: provider.Payment{ID: "pay_1", Status: provider.StatusProcessing}}, t0.Add(time.Minute)))
	if p.Status.Phase != v1alpha1.PhaseProcessing || p.Status.Operation != nil {
		t.Fatalf("fixture: after the capture call phase %s operation %+v", p.Status.Phase, p.Status.Operation)
	}
	return p
}

func formatMinor(v int64) string { return strconv.FormatInt(v, 10) }

func TestAuthorizedAfterTheCaptureStartedIsStale(t *testing.T) {
	for name, obs := range map[string]payment.Observation{
		"a late authorization webhook": obsWebhook(payment.ObservedAuthorized, "evt-auth-late", withAmount(1000, orderCurrency), withProviderID("pay_1")),
		"a status query that lags":     obsQuery(payment.ObservedAuthorized, withAmount(1000, orderCurrency), withProviderID("pay_1")),
	} {
		t.Run(name, func(t *testing.T) {
			p := partlyCaptured(t, 600)
			res := payment.Apply(p, obs, t0.Add(2*time.Minute))
			if res.Decision != payment.Stale || res.Status.Phase != v1alpha1.PhaseProcessing || res.Transition != nil {
				t.Fatalf("decision %s (%s) phase %s: an authorization after the capture started must not take the payment back", res.Decision, res.Reason, res.Status.Phase)
			}
			p.Status = res.Status
			// And nothing asks for a second capture.
			if s := payment.Plan(p, testPolicy(), payment.Facts{}, t0.Add(2*time.Minute)); s.Action == payment.CallCapture || (s.Action == payment.Write && s.Outcome.Status.Operation != nil) {
				t.Fatalf("a second capture planned: %s (%s)", s.Action, s.Why)
			}
		})
	}
}

// TestRefundsOfAPartialCaptureMeasureAgainstWhatWasReceived: 600 of an
// authorized 1000 captured, 600 refunded is everything: Refunded, not
// PartiallyRefunded for ever.
func TestRefundsOfAPartialCaptureMeasureAgainstWhatWasReceived(t *testing.T) {
	p := partlyCaptured(t, 600)
	now := t0.Add(2 * time.Minute)
	res := payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-captured", withAmount(600, orderCurrency), withProviderID("pay_1")), now)
	if res.Status.Phase != v1alpha1.PhaseSucceeded || res.Status.AmountReceived == nil || res.Status.AmountReceived.Value != 600 {
		t.Fatalf("captured: phase %s received %+v", res.Status.Phase, res.Status.AmountReceived)
	}
	p.Status = res.Status
	for _, step := range []struct {
		total int64
		phase v1alpha1.PaymentPhase
	}{
		{200, v1alpha1.PhasePartiallyRefunded},
		{599, v1alpha1.PhasePartiallyRefunded},
		{600, v1alpha1.PhaseRefunded},
	} {
		now = now.Add(time.Minute)
		res := payment.Apply(p, obsWebhook(payment.ObservedRefund, "evt-refund-"+formatMinor(step.total), withRefunded(step.total, orderCurrency), withProviderID("pay_1")), now)
		if res.Decision != payment.Applied || res.Status.Phase != step.phase {
			t.Fatalf("refunded %d of 600 received: %s (%s) phase %s, want %s", step.total, res.Decision, res.Reason, res.Status.Phase, step.phase)
		}
		p.Status = res.Status
	}
}

// TestOperatorActionNamesItsRefusal: the dry run kubectl paywarden makes
// before it writes an annotation gives the manager's own refusal, and
// nothing for an annotation the manager would act on.
func TestOperatorActionNamesItsRefusal(t *testing.T) {
	pol := testPolicy()
	authorized := func() *v1alpha1.Payment {
		p := newPay("authorized")
		p.Spec.Amount.Value = 4500
		p.Spec.CaptureMethod = v1alpha1.CaptureManual
		p = store(p, planned(p, pol, t0).Outcome)
		return store(p, payment.AfterCreate(p, pol, payment.Call{Payment: provider.Payment{ID: "pay_1", Status: provider.StatusAuthorized, Amount: 4500, Currency: orderCurrency}}, t0))
	}
	for _, tt := range []struct {
		name, key, value, refusal string
	}{
		{"a capture within the authorization is acted on", v1alpha1.AnnotationCapture, "3000", ""},
		{"a capture above the authorization is refused", v1alpha1.AnnotationCapture, "5000", "CaptureRefused"},
		{"a capture in major units is refused", v1alpha1.AnnotationCapture, "30.00", "CaptureRefused"},
		{"a cancel of an authorization is acted on", v1alpha1.AnnotationCancel, "out of stock", ""},
		{"a resolve of an open payment is acted on", v1alpha1.AnnotationResolve, "Failed", ""},
		{"a resolve to a phase no operator may set is refused", v1alpha1.AnnotationResolve, "Pending", "ResolveIgnored"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, why, ok := payment.OperatorAction(annotate(authorized(), tt.key, tt.value), t0.Add(time.Minute))
			if !ok {
				t.Fatalf("no action for %s=%s", tt.key, tt.value)
			}
			e, refused := out.Refusal()
			if got := map[bool]string{true: e.Reason}[refused]; got != tt.refusal {
				t.Errorf("%s: refusal %q (%s), want %q", why, got, e.Message, tt.refusal)
			}
		})
	}
}

// TestAmountColumnShowsWhatWasTaken: the Amount column of a payment that
// took less than it ordered says so; one that took what it ordered shows the
// order alone.
func TestAmountColumnShowsWhatWasTaken(t *testing.T) {
	for _, tt := range []struct {
		name     string
		received v1alpha1.Money
		want     string
	}{
		{"a partial capture", v1alpha1.Money{Value: 600, Currency: orderCurrency}, "6.00 of 10.00 USD"},
		{"a full capture", v1alpha1.Money{Value: 1000, Currency: orderCurrency}, "10.00 USD"},
		{"another currency under review", v1alpha1.Money{Value: 1000, Currency: "EUR"}, "10.00 EUR of 10.00 USD"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := partlyCaptured(t, 600)
			res := payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-captured", withAmount(tt.received.Value, tt.received.Currency), withProviderID("pay_1")), t0.Add(2*time.Minute))
			if res.Status.AmountDisplay != tt.want {
				t.Errorf("amountDisplay %q (phase %s), want %q", res.Status.AmountDisplay, res.Status.Phase, tt.want)
			}
		})
	}
}

// TestProcessingFromBeforeTheCaptureIsNotTheCapture: a Stripe payment
// authorized for manual capture went through processing before
// requires_capture, and its payment_intent.processing event can be delivered
// after the merchant's capture was marked (Stripe, "Webhooks": events are not
// delivered in order). That event is news of the authorization, not of the
// capture: taken for "capture in progress", the capture would count as sent
// and every later requires_capture as stale, until the payment ran out of
// queries with nothing captured. Only news from after the capture was asked
// (or a query, which reports the present) is the capture under way.
func TestProcessingFromBeforeTheCaptureIsNotTheCapture(t *testing.T) {
	pol := testPolicy()
	marked := func(t *testing.T) *v1alpha1.Payment {
		t.Helper()
		p := newPay("late-processing")
		p.Spec.Amount.Value = 1000
		p.Spec.CaptureMethod = v1alpha1.CaptureManual
		p = store(p, planned(p, pol, t0).Outcome)
		p = store(p, payment.AfterCreate(p, pol, payment.Call{Payment: provider.Payment{ID: "pay_1", Status: provider.StatusAuthorized, Amount: 1000, Currency: orderCurrency}}, t0))
		p = annotate(p, v1alpha1.AnnotationCapture, payment.CaptureAll)
		s := payment.Plan(p, pol, payment.Facts{}, t0.Add(time.Minute))
		if s.Action != payment.Write || s.Outcome.Status.Operation == nil {
			t.Fatalf("fixture: capture marker step %s (%s)", s.Action, s.Why)
		}
		return store(p, s.Outcome)
	}
	for _, c := range []struct {
		name     string
		obs      payment.Observation
		underWay bool
	}{
		{"an event from before the capture was asked", obsWebhook(payment.ObservedProcessing, "evt-processing-early", withProviderID("pay_1"), withOccurredAt(t0.Add(30*time.Second))), false},
		{"an event from the second the capture was asked", obsWebhook(payment.ObservedProcessing, "evt-processing-same", withProviderID("pay_1"), withOccurredAt(t0.Add(time.Minute))), false},
		{"an event from after the capture was asked", obsWebhook(payment.ObservedProcessing, "evt-processing-late", withProviderID("pay_1"), withOccurredAt(t0.Add(time.Minute+2*time.Second))), true},
		{"a status query", obsQuery(payment.ObservedProcessing, withProviderID("pay_1")), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := marked(t)
			now := t0.Add(2 * time.Minute)
			res := payment.Apply(p, c.obs, now)
			if c.underWay {
				if res.Status.Phase != v1alpha1.PhaseProcessing {
					t.Fatalf("phase %s (%s %s), want Processing: the capture is under way", res.Status.Phase, res.Decision, res.Reason)
				}
				return
			}
			if res.Decision != payment.Stale || res.Status.Phase != v1alpha1.PhaseAuthorized || res.Status.Operation == nil {
				t.Fatalf("decision %s (%s) phase %s operation %+v: news from before the capture must leave the capture to be done", res.Decision, res.Reason, res.Status.Phase, res.Status.Operation)
			}
			p.Status = res.Status
			s := payment.Plan(p, pol, payment.Facts{}, now)
			if s.Action != payment.CallCapture && s.Action != payment.Query {
				t.Fatalf("after the early event: %s (%s), want the capture sent or looked up", s.Action, s.Why)
			}
		})
	}
}
