package payment_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// What stale news does and says (SPEC §2.1): a status query reports the
// present, so its raw status is shown even when it changes nothing; a
// webhook that changes nothing may be old, and does not replace the raw
// status shown; the reason says why it changed nothing.
func TestStaleNews(t *testing.T) {
	processing := func() *v1alpha1.Payment {
		p := buildPayment(t, givenProcessing)
		p.Status.ProviderStatus = "processing"
		return p
	}
	approvedCapturing := func() *v1alpha1.Payment {
		p := buildPayment(t, andThen(givenPending, obsWebhook(payment.ObservedApproved, "evt-ok")))
		p.Status.AmountToCapture = &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}
		p.Status.ProviderStatus = "processing"
		return p
	}
	approvedOnly := func() *v1alpha1.Payment {
		p := buildPayment(t, andThen(givenPending, obsWebhook(payment.ObservedApproved, "evt-ok")))
		p.Status.ProviderStatus = "APPROVED"
		return p
	}
	for _, tc := range []struct {
		name   string
		p      *v1alpha1.Payment
		obs    payment.Observation
		shown  string
		reason string
	}{
		{"a webhook repeating the phase", processing(), obsWebhook(payment.ObservedProcessing, "evt-old", withRaw("older")), "processing", "already Processing"},
		{"a query repeating the phase", processing(), obsQuery(payment.ObservedProcessing, withRaw("processing_now")), "processing_now", "already Processing"},
		{"processing after Unknown", buildPayment(t, givenUnknown(v1alpha1.ReasonRetriesExhausted)), obsQuery(payment.ObservedProcessing, withRaw("x")), "", "does not take a payment out of Unknown"},
		{"an approval while the capture is under way", approvedCapturing(), obsWebhook(payment.ObservedApproved, "evt-ok-again", withRaw("APPROVED")), "processing", "the capture is already under way"},
		{"an authorization again by webhook", authorizedShown(t), obsWebhook(payment.ObservedAuthorized, "evt-auth-again", withRaw("older")), "requires_capture", "already Authorized"},
		{"a failure again by query", failedShown(t), obsQuery(payment.ObservedFailed, withRaw("failed_now")), "failed_now", "already Failed"},
		{"a failure again by webhook", failedShown(t), obsWebhook(payment.ObservedFailed, "evt-failed-again", withRaw("older")), "failed", "already Failed"},
		{"an expiry after a failure", failedShown(t), obsQuery(payment.ObservedExpired, withRaw("expired")), "failed", "already Failed"},
		{"an approval again", approvedOnly(), obsWebhook(payment.ObservedApproved, "evt-ok-again", withRaw("APPROVED_AGAIN")), "APPROVED", "already approved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := payment.Apply(tc.p, tc.obs, seqStart.Add(time.Hour))
			if res.Decision != payment.Stale || !strings.Contains(res.Reason, tc.reason) {
				t.Fatalf("%s (%s), want Stale: %s", res.Decision, res.Reason, tc.reason)
			}
			if tc.shown != "" && res.Status.ProviderStatus != tc.shown {
				t.Errorf("provider status shown %q, want %q", res.Status.ProviderStatus, tc.shown)
			}
		})
	}
}

func authorizedShown(t *testing.T) *v1alpha1.Payment {
	p := buildPayment(t, andThen(givenPending, obsWebhook(payment.ObservedAuthorized, "evt-auth")))
	p.Status.ProviderStatus = "requires_capture"
	return p
}

func failedShown(t *testing.T) *v1alpha1.Payment {
	p := buildPayment(t, givenFailed)
	p.Status.ProviderStatus = "failed"
	return p
}

// TestAnAuthorizationUsesTheApproval: the payer's approval is used up by
// the authorization it led to, so nothing asks to authorize again.
func TestAnAuthorizationUsesTheApproval(t *testing.T) {
	p := buildPayment(t, andThen(givenPending, obsWebhook(payment.ObservedApproved, "evt-ok")))
	if !p.Status.PayerApproved {
		t.Fatal("approval not recorded")
	}
	res := payment.Apply(p, obsWebhook(payment.ObservedAuthorized, "evt-auth"), seqStart.Add(time.Hour))
	if res.Status.Phase != v1alpha1.PhaseAuthorized || res.Status.PayerApproved {
		t.Errorf("phase %s payerApproved %v, want Authorized with the approval used up", res.Status.Phase, res.Status.PayerApproved)
	}
}

// TestAWrongAmountReplacesAnotherReview: a success of another amount than
// asked takes a payment under review for something else (no answer for
// long) into review for the amount.
func TestAWrongAmountReplacesAnotherReview(t *testing.T) {
	p := buildPayment(t, givenUnknown(v1alpha1.ReasonRetriesExhausted))
	res := payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-short", withAmount(999, orderCurrency)), seqStart.Add(time.Hour))
	got := p.DeepCopy()
	got.Status = res.Status
	if res.Decision != payment.Applied || review(got) != v1alpha1.ReasonAmountMismatch {
		t.Errorf("%s (%s), review %q; want Applied, AmountMismatch", res.Decision, res.Reason, review(got))
	}
}

// TestADisputeOpenedAfterItEnded: the opening of a dispute that already
// ended, won or lost, is older news (events come in any order): the
// dispute stays ended.
func TestADisputeOpenedAfterItEnded(t *testing.T) {
	for _, outcome := range []string{provider.DisputeWon, provider.DisputeLost} {
		p := buildPayment(t, andThen(givenSucceeded, obsWebhook(payment.ObservedDispute, "evt-dispute-1"),
			obsWebhook(payment.ObservedDispute, "evt-dispute-closed", func(o *payment.Observation) { o.Dispute = outcome })))
		before := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionDisputed)
		if before == nil || before.Status != metav1.ConditionFalse {
			t.Fatalf("%s: the dispute did not end: %+v", outcome, before)
		}
		res := payment.Apply(p, obsWebhook(payment.ObservedDispute, "evt-dispute-1-redelivered-as-new"), seqStart.Add(time.Hour))
		c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionDisputed)
		if res.Decision != payment.Stale || c == nil || c.Status != metav1.ConditionFalse || c.Reason != before.Reason {
			t.Errorf("%s: %s (%s), condition %+v; want Stale, still ended", outcome, res.Decision, res.Reason, c)
		}
	}
}

// TestAnUnknownAnswer: the provider not knowing the outcome yet changes no
// phase; a query's raw status is shown while the payment waits for the
// provider, a webhook's never replaces one shown, and a settled or parked
// payment shows what settled or parked it.
func TestAnUnknownAnswer(t *testing.T) {
	shown := func(given []payment.Observation, raw string) *v1alpha1.Payment {
		p := buildPayment(t, given)
		p.Status.ProviderStatus = raw
		return p
	}
	for _, tc := range []struct {
		name  string
		p     *v1alpha1.Payment
		obs   payment.Observation
		shown string
	}{
		{"a query while pending", shown(givenPending, "pending"), obsQuery(payment.ObservedUnknown, withRaw("requires_action")), "requires_action"},
		{"a webhook while pending", shown(givenPending, "pending"), obsWebhook(payment.ObservedUnknown, "evt-odd", withRaw("older")), "pending"},
		{"a query when settled", shown(givenSucceeded, "succeeded"), obsQuery(payment.ObservedUnknown, withRaw("requires_action")), "succeeded"},
		{"a query when parked", shown(givenUnknown(v1alpha1.ReasonRetriesExhausted), "processing"), obsQuery(payment.ObservedUnknown, withRaw("requires_action")), "processing"},
	} {
		res := payment.Apply(tc.p, tc.obs, seqStart.Add(time.Hour))
		if res.Decision != payment.Ignored || res.Status.Phase != tc.p.Status.Phase || res.Status.ProviderStatus != tc.shown {
			t.Errorf("%s: %s, phase %s, shown %q; want Ignored, the phase kept, %q shown", tc.name, res.Decision, res.Status.Phase, res.Status.ProviderStatus, tc.shown)
		}
	}
}

// TestAResolveThatKeepsThePhase: an operator may resolve a payment under
// review to the phase it has (the review cleared, nothing else moves), but
// not to another phase with refunds, nor a payment nobody reviews.
func TestAResolveThatKeepsThePhase(t *testing.T) {
	lost := func() *v1alpha1.Payment {
		return buildPayment(t, andThen(givenPartiallyRefunded, obsWebhook(payment.ObservedDispute, "evt-dispute-1"),
			obsWebhook(payment.ObservedDispute, "evt-dispute-closed", func(o *payment.Observation) { o.Dispute = provider.DisputeLost })))
	}
	resolve := func(to string) payment.Observation {
		return payment.Observation{Source: v1alpha1.SourceManual, Observed: payment.Observed(to), Reason: "checked the dashboard"}
	}
	if p := lost(); review(p) != v1alpha1.ReasonDisputeLost {
		t.Fatalf("fixture: review %q", review(p))
	}
	for _, tc := range []struct {
		name string
		p    *v1alpha1.Payment
		to   string
		want payment.Decision
	}{
		{"its own phase, under review", lost(), string(v1alpha1.PhasePartiallyRefunded), payment.Applied},
		{"another phase with refunds, under review", lost(), string(v1alpha1.PhaseRefunded), payment.Ignored},
		{"its own phase, no review", buildPayment(t, andThen(givenPending, obsWebhook(payment.ObservedAuthorized, "evt-auth"))), string(v1alpha1.PhaseAuthorized), payment.Ignored},
	} {
		res := payment.Apply(tc.p, resolve(tc.to), seqStart.Add(time.Hour))
		got := tc.p.DeepCopy()
		got.Status = res.Status
		if res.Decision != tc.want || res.Status.Phase != tc.p.Status.Phase {
			t.Errorf("%s: %s (%s) to %s; want %s, the phase kept", tc.name, res.Decision, res.Reason, res.Status.Phase, tc.want)
		}
		if tc.want == payment.Applied && review(got) != "" {
			t.Errorf("%s: review %q left", tc.name, review(got))
		}
	}
}

// TestAChangeShowsItsRawStatus: an applied change shows the provider's raw
// status that brought it, webhook or query.
func TestAChangeShowsItsRawStatus(t *testing.T) {
	p := buildPayment(t, givenPending)
	p.Status.ProviderStatus = "pending"
	res := payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid(), withRaw("succeeded")), seqStart.Add(time.Hour))
	if res.Status.Phase != v1alpha1.PhaseSucceeded || res.Status.ProviderStatus != "succeeded" {
		t.Errorf("phase %s shown %q, want Succeeded showing succeeded", res.Status.Phase, res.Status.ProviderStatus)
	}
}

// TestAPhaseEventSaysWhy: the Event of a phase change names the change and
// its channel, and its reason when there is one; a failure is a Warning, a
// success is not.
func TestAPhaseEventSaysWhy(t *testing.T) {
	p := buildPayment(t, givenPending)
	paid := payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()), seqStart.Add(time.Hour))
	if e := eventOf(paid.Events, string(v1alpha1.PhaseSucceeded)); e == nil || e.Warning || e.Message != "Pending -> Succeeded via Webhook" {
		t.Errorf("success: %+v", paid.Events)
	}
	declined := payment.Apply(p, obsWebhook(payment.ObservedFailed, "evt-failed", withFailure("card_declined", "")), seqStart.Add(time.Hour))
	if e := eventOf(declined.Events, string(v1alpha1.PhaseFailed)); e == nil || !e.Warning || e.Message != "Pending -> Failed via Webhook: card_declined" {
		t.Errorf("failure: %+v", declined.Events)
	}
}

// TestWaitingFor: the waitingFor column in a word: a review (only one
// that is on), nothing once settled, the operation in progress, the
// merchant's capture of an authorized Manual payment or of an approved one,
// the payer at their link.
func TestWaitingFor(t *testing.T) {
	manual := v1alpha1.PaymentSpec{CaptureMethod: v1alpha1.CaptureManual, Amount: v1alpha1.Amount{Value: orderValue, Currency: orderCurrency}}
	automatic := v1alpha1.PaymentSpec{CaptureMethod: v1alpha1.CaptureAutomatic, Amount: manual.Amount}
	review := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionNeedsReview, Status: s, Reason: v1alpha1.ReasonRetriesExhausted}}
	}
	link := &v1alpha1.CustomerAction{URL: "https://pay.example/1"}
	for _, tc := range []struct {
		name string
		spec v1alpha1.PaymentSpec
		st   v1alpha1.PaymentStatus
		want string
	}{
		{"under review", automatic, v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseUnknown, Conditions: review(metav1.ConditionTrue)}, "Review:" + v1alpha1.ReasonRetriesExhausted},
		{"a review that is off", automatic, v1alpha1.PaymentStatus{Phase: v1alpha1.PhasePending, Conditions: review(metav1.ConditionFalse)}, ""},
		{"settled", automatic, v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseSucceeded, PayerApproved: true}, ""},
		{"an operation", manual, v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseAuthorized, Operation: &v1alpha1.Operation{Kind: v1alpha1.OperationCapture}}, string(v1alpha1.OperationCapture)},
		{"authorized, Manual", manual, v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseAuthorized}, "Capture"},
		{"authorized, Automatic", automatic, v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseAuthorized}, ""},
		{"pending, Manual", manual, v1alpha1.PaymentStatus{Phase: v1alpha1.PhasePending}, ""},
		{"approved", automatic, v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseProcessing, PayerApproved: true}, "Capture"},
		{"the payer's link", automatic, v1alpha1.PaymentStatus{Phase: v1alpha1.PhasePending, CustomerAction: link}, "Payer"},
	} {
		if got := payment.WaitingFor(&tc.spec, &tc.st); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestACheckoutTakesOnlyItsOwnPayment: a Stripe Checkout payment known by
// its session only takes the first PaymentIntent reported for its session,
// never one reported for another session (an earlier attempt's of the same
// order).
func TestACheckoutTakesOnlyItsOwnPayment(t *testing.T) {
	p := buildPayment(t, []payment.Observation{obsCreated(payment.ObservedPending, withProviderID("cs_1"), withCheckout("cs_1"))})
	other := payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-other", withPaid(), withProviderID("pi_9"), withCheckout("cs_0")), seqStart.Add(time.Hour))
	if other.Status.ProviderPaymentID != "cs_1" || other.Status.Phase == v1alpha1.PhaseSucceeded {
		t.Errorf("another session's payment: id %q phase %s, want cs_1 kept, not Succeeded", other.Status.ProviderPaymentID, other.Status.Phase)
	}
	own := payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-own", withPaid(), withProviderID("pi_1"), withCheckout("cs_1")), seqStart.Add(time.Hour))
	if own.Status.ProviderPaymentID != "pi_1" || own.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("its own session's payment: id %q phase %s, want pi_1 Succeeded", own.Status.ProviderPaymentID, own.Status.Phase)
	}
}
