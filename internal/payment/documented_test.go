package payment_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// Behaviour the providers document (docs/providers.md, "Documented
// behaviour", issue 22): each rule is decided here, from the facts, by the
// pure core.

// TestCreateKeyWindowIsTheProviders: PayPal keeps a create's PayPal-Request-Id
// for 6 hours (Orders v2 API reference, "Create order", PayPal-Request-Id), so
// an unset spec.idempotencyWindow is 6h for a PayPal account: past it less the
// margin the create is no longer repeated with its key (it would make a second
// order) but looked up. A window the operator sets wins; a provider that
// documents none keeps 24h.
func TestCreateKeyWindowIsTheProviders(t *testing.T) {
	hours := func(h int) *metav1.Duration { return &metav1.Duration{Duration: time.Duration(h) * time.Hour} }
	for _, tc := range []struct {
		name   string
		spec   *metav1.Duration
		caps   provider.Capabilities
		lookup time.Duration // after the marker
	}{
		{name: "paypal, unset: 6h less 10%", caps: paypal.Capabilities(), lookup: 6 * time.Hour * 90 / 100},
		{name: "paypal, 72h enabled for the account and set", spec: hours(72), caps: paypal.Capabilities(), lookup: 72 * time.Hour * 90 / 100},
		{name: "a type that documents no window, unset: 24h less 10%", caps: provider.Capabilities{Type: "generic", LookupByReference: true}, lookup: 24 * time.Hour * 90 / 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1alpha1.PaymentProviderSpec{IdempotencyWindow: tc.spec}
			wantLookupAfter(t, payment.PolicyFor(spec).WithCapabilities(spec, tc.caps), tc.lookup)
		})
	}
}

// paypalPolicy is the policy of a PayPal account with the defaults, without
// jitter.
func paypalPolicy() payment.Policy {
	spec := &v1alpha1.PaymentProviderSpec{}
	return testPolicy().WithCapabilities(spec, paypal.Capabilities())
}

var errOrderNotFound = &provider.Error{Provider: "shop/paypal", Op: "get", Class: provider.ErrNotFound, StatusCode: 404, Code: "INVALID_RESOURCE_ID"}

// approvedOrder is a PayPal payment (created at t0, known as pay_1) whose
// payer approved it: its capture is due.
func approvedOrder(name string) *v1alpha1.Payment {
	p := lifecyclePay(name, v1alpha1.CaptureAutomatic)
	return store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedApproved, EventID: "evt-ok", ProviderPaymentID: "pay_1"}, t0.Add(10*time.Second)))
}

// withOperation marks op on p, as Plan stores it before the call.
func withOperation(p *v1alpha1.Payment, kind v1alpha1.OperationKind, at time.Time) *v1alpha1.Payment {
	cp := p.DeepCopy()
	cp.Status.Operation = &v1alpha1.Operation{Kind: kind, RequestedAt: metav1.NewTime(at), IdempotencyKey: payment.OperationKey(p, kind), Reason: "customer left"}
	if kind == v1alpha1.OperationCapture {
		cp.Status.AmountToCapture = &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}
	}
	return cp
}

// TestOrderNobodyCompletedExpiresAtTheProvider: PayPal deletes an order that
// was not completed (not approved, or approved and neither captured nor
// authorized) after about 3 hours, and answers 404 RESOURCE_NOT_FOUND for it
// (paypal.OrderLifetime cites the sources). A "not found" is that verdict —
// Expired, reason OrderExpired, no review — only when the facts leave nothing
// else: the provider's orders expire, the lifetime has passed since the order
// was asked for, and nothing was received, reserved or is being captured.
// Otherwise it stays a question for a human, as before.
func TestOrderNobodyCompletedExpiresAtTheProvider(t *testing.T) {
	pol := paypalPolicy()
	life := paypal.OrderLifetime
	tracked := func() *v1alpha1.Payment {
		p := newPay("tracked")
		p.Spec.ProviderPaymentID = "pay_1"
		return p
	}
	query := func(p *v1alpha1.Payment, pol payment.Policy, at time.Time) payment.Outcome {
		return payment.AfterQuery(p, pol, fails(errOrderNotFound), false, at)
	}
	operation := func(kind v1alpha1.OperationKind) func(*v1alpha1.Payment, payment.Policy, time.Time) payment.Outcome {
		return func(p *v1alpha1.Payment, pol payment.Policy, at time.Time) payment.Outcome {
			return payment.AfterOperation(withOperation(p, kind, at.Add(-time.Second)), pol, kind, fails(errOrderNotFound), at)
		}
	}
	// parked is a payment in Unknown under review for reason, as status
	// shows it besides that.
	parked := func(reason string, also func(*v1alpha1.PaymentStatus)) func() *v1alpha1.Payment {
		return func() *v1alpha1.Payment {
			p := created("parked")
			p.Status.Phase = v1alpha1.PhaseUnknown
			meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(t0)})
			if also != nil {
				also(&p.Status)
			}
			return p
		}
	}
	held := &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}
	for _, tc := range []struct {
		name   string
		pay    func() *v1alpha1.Payment
		pol    payment.Policy
		after  func(*v1alpha1.Payment, payment.Policy, time.Time) payment.Outcome
		at     time.Time
		phase  v1alpha1.PaymentPhase
		review string
		events []string // reasons that must be among the Events
	}{
		{name: "an order paywarden gave up on, not found once its lifetime passed: Expired, the review kept", pay: parked(v1alpha1.ReasonRetriesExhausted, nil),
			pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseExpired, review: v1alpha1.ReasonRetriesExhausted},
		{name: "an order paywarden gave up on that received money, not found: no verdict", pay: parked(v1alpha1.ReasonRetriesExhausted, func(st *v1alpha1.PaymentStatus) { st.AmountReceived = held }),
			pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonNonRetryableQueryError},
		{name: "an order paywarden gave up on that reserved money, not found: no verdict", pay: parked(v1alpha1.ReasonRetriesExhausted, func(st *v1alpha1.PaymentStatus) { st.AmountAuthorized = held }),
			pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonNonRetryableQueryError},
		{name: "an order paywarden gave up on with an authorization's end, not found: no verdict", pay: parked(v1alpha1.ReasonRetriesExhausted, func(st *v1alpha1.PaymentStatus) {
			st.AuthorizationExpiresAt = ptrTime(t0.Add(29 * 24 * time.Hour))
		}), pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonNonRetryableQueryError},
		{name: "an order paywarden gave up on during a capture, not found: no verdict", pay: parked(v1alpha1.ReasonRetriesExhausted, func(st *v1alpha1.PaymentStatus) { st.AmountToCapture = held }),
			pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonNonRetryableQueryError},
		{name: "an order a human must look at, not found: no verdict, the review kept", pay: parked(v1alpha1.ReasonAmountMismatch, nil),
			pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonAmountMismatch},
		{name: "an authorized order, its amount not known, not found: no verdict", pay: func() *v1alpha1.Payment {
			p := authorizedPay("authorized", v1alpha1.CaptureManual)
			p.Status.AmountAuthorized, p.Status.AuthorizationExpiresAt = nil, nil
			return p
		}, pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonNonRetryableQueryError},
		{name: "an order waiting for its payer, not found once its lifetime passed: Expired", pay: func() *v1alpha1.Payment { return created("waiting") },
			pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseExpired, events: []string{"Expired"}},
		{name: "an order its payer approved, not found by the automatic capture: Expired, not CaptureRefused", pay: func() *v1alpha1.Payment { return approvedOrder("late-capture") },
			pol: pol, after: operation(v1alpha1.OperationCapture), at: t0.Add(life + time.Minute), phase: v1alpha1.PhaseExpired},
		{name: "an order not found by the cancel of an abandoned checkout: Expired, no CancelRefused", pay: func() *v1alpha1.Payment { return created("abandoned") },
			pol: pol, after: operation(v1alpha1.OperationCancel), at: t0.Add(4 * time.Hour), phase: v1alpha1.PhaseExpired},
		{name: "a tracked order, not found its lifetime after its Payment was created: Expired", pay: tracked,
			pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseExpired},
		// SPEC §2.2: only an operator clears NeedsReview; the phase is settled.
		{name: "an order parked in review by an earlier not found, requeried: Expired, the review kept for the operator", pay: func() *v1alpha1.Payment {
			p := created("parked")
			p = annotate(store(p, query(p, pol, t0.Add(time.Hour))), v1alpha1.AnnotationRequery, "after-the-upgrade")
			out, _ := payment.Requery(p, t0.Add(life))
			return store(p, out)
		}, pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseExpired, review: v1alpha1.ReasonNonRetryableQueryError},

		{name: "not found before the lifetime passed is no verdict: NonRetryableQueryError", pay: func() *v1alpha1.Payment { return created("early") },
			pol: pol, after: query, at: t0.Add(life - time.Second), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonNonRetryableQueryError},
		{name: "a capture refused not found before the lifetime passed is still CaptureRefused", pay: func() *v1alpha1.Payment { return approvedOrder("early-capture") },
			pol: pol, after: operation(v1alpha1.OperationCapture), at: t0.Add(time.Hour), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonCaptureRefused},
		{name: "not found at a provider whose orders do not expire: NonRetryableQueryError", pay: func() *v1alpha1.Payment { return created("kept") },
			pol: testPolicy(), after: query, at: t0.Add(10 * life), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonNonRetryableQueryError},
		{name: "not found for an authorized order: NonRetryableQueryError", pay: func() *v1alpha1.Payment { return authorizedPay("authorized", v1alpha1.CaptureManual) },
			pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonNonRetryableQueryError},
		{name: "not found while a capture is under way: NonRetryableQueryError", pay: func() *v1alpha1.Payment {
			p := withOperation(approvedOrder("capturing"), v1alpha1.OperationCapture, t0.Add(20*time.Second))
			p.Status.Operation = nil
			return store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceCapture, Observed: payment.ObservedProcessing, ProviderPaymentID: "pay_1"}, t0.Add(21*time.Second)))
		}, pol: pol, after: query, at: t0.Add(life), phase: v1alpha1.PhaseUnknown, review: v1alpha1.ReasonNonRetryableQueryError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.after(tc.pay(), tc.pol, tc.at)
			st := out.Status
			got := &v1alpha1.Payment{Status: st}
			if st.Phase != tc.phase || review(got) != tc.review {
				t.Fatalf("phase %s review %q, want %s %q (history %s)", st.Phase, review(got), tc.phase, tc.review, dumpHistory(st.History))
			}
			if tc.phase == v1alpha1.PhaseExpired {
				if st.Failure == nil || st.Failure.Code != v1alpha1.ReasonOrderExpired || st.ExpiredLocally || st.Operation != nil || st.Query.NextTime != nil {
					t.Errorf("failure %+v expiredLocally %v operation %+v nextTime %v", st.Failure, st.ExpiredLocally, st.Operation, st.Query.NextTime)
				}
				if h := st.History[len(st.History)-1]; h.To != v1alpha1.PhaseExpired || h.Reason != v1alpha1.ReasonOrderExpired {
					t.Errorf("history %+v", h)
				}
				for _, r := range eventReasons(out) {
					if r == "CancelRefused" || r == "CaptureRefused" {
						t.Errorf("Event %s for an order that expired", r)
					}
				}
			}
			for _, want := range tc.events {
				if !slices.Contains(allEventReasons(out), want) {
					t.Errorf("Events %v, want %s", allEventReasons(out), want)
				}
			}
		})
	}
}

// TestOrderLifetimeIsTheAccounts: PayPal names 3 hours as the default time an
// order nobody completed is kept ("the default is 3 hours", paypal.OrderLifetime
// cites it), so an account whose orders live another time says so in
// spec.orderLifetime, and a "not found" is the order's expiry after that time.
// A type that keeps such payments ignores it.
func TestOrderLifetimeIsTheAccounts(t *testing.T) {
	minute := &metav1.Duration{Duration: time.Minute}
	for _, tc := range []struct {
		name  string
		spec  *metav1.Duration
		caps  provider.Capabilities
		phase v1alpha1.PaymentPhase
	}{
		{name: "paypal, 1m set: not found after 1m is Expired", spec: minute, caps: paypal.Capabilities(), phase: v1alpha1.PhaseExpired},
		{name: "paypal, unset: not found after 1m is no verdict", caps: paypal.Capabilities(), phase: v1alpha1.PhaseUnknown},
		{name: "a type that keeps its payments, 1m set: no verdict", spec: minute, caps: provider.Capabilities{Type: "kukopay"}, phase: v1alpha1.PhaseUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1alpha1.PaymentProviderSpec{OrderLifetime: tc.spec}
			pol := testPolicy().WithCapabilities(spec, tc.caps)
			out := payment.AfterQuery(created("waiting"), pol, fails(errOrderNotFound), false, t0.Add(time.Minute))
			if out.Status.Phase != tc.phase {
				t.Fatalf("phase %s, want %s (history %s)", out.Status.Phase, tc.phase, dumpHistory(out.Status.History))
			}
		})
	}
}

// allEventReasons are the reasons of every Event an outcome records: the
// state machine's and the core's own.
func allEventReasons(out payment.Outcome) []string {
	r := eventReasons(out)
	for _, res := range out.Results {
		for _, e := range res.Events {
			r = append(r, e.Reason)
		}
	}
	return r
}

// TestScenarioAbandonedPayPalCheckoutEndsExpired: a PayPal checkout its payer
// never approves is read on the schedule; when the schedule runs out before
// the order's lifetime, paywarden reads it once more after the lifetime
// instead of giving up, and PayPal's "not found" then settles it Expired —
// never RetriesExhausted or NonRetryableQueryError.
func TestScenarioAbandonedPayPalCheckoutEndsExpired(t *testing.T) {
	pol := paypalPolicy()
	p, calls := drive(t, newPay("abandoned"), pol, func(a payment.Action, _ int, now time.Time) payment.Call {
		if a == payment.Query && !now.Before(t0.Add(paypal.OrderLifetime)) {
			return fails(errOrderNotFound)
		}
		c := answer(provider.StatusPending)
		c.Payment.CustomerAction = &provider.CustomerAction{URL: "https://paypal.example/checkoutnow?token=pay_1"}
		return c
	}, t0.Add(24*time.Hour))
	if p.Status.Phase != v1alpha1.PhaseExpired || review(p) != "" || p.Status.Failure == nil || p.Status.Failure.Code != v1alpha1.ReasonOrderExpired {
		t.Fatalf("phase %s review %q failure %+v after %d calls\n%s", p.Status.Phase, review(p), p.Status.Failure, len(calls), dumpHistory(p.Status.History))
	}
	last := calls[len(calls)-1]
	if want := t0.Add(paypal.OrderLifetime + paypal.OrderLifetime/10); last.at.Before(t0.Add(paypal.OrderLifetime)) || last.at.After(want.Add(time.Second)) {
		t.Errorf("the settling read came at %s, want by %s", last.at.Sub(t0), want.Sub(t0))
	}
}

// authorizedUntil is a Manual payment (known as pay_1) whose authorization
// ends at expiry.
func authorizedUntil(name string, expiry time.Time) *v1alpha1.Payment {
	p := lifecyclePay(name, v1alpha1.CaptureManual)
	at := metav1.NewTime(expiry)
	return store(p, payment.ApplyEvent(p, payment.Observation{
		Source: v1alpha1.SourceStatusQuery, Observed: payment.ObservedAuthorized, ProviderPaymentID: "pay_1",
		Amount: &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}, AuthorizationExpiresAt: &at,
	}, t0.Add(10*time.Second)))
}

// TestVoidedAtTheAuthorizationsEndIsExpired: PayPal sends
// PAYMENT.AUTHORIZATION.VOIDED both for a merchant's void and when the
// authorization reaches the end of its validity (Payments v2 webhook events).
// A void at or after status.authorizationExpiresAt that paywarden did not ask
// for is the expiry: Expired, reason AuthorizationExpired. One before it, or
// one paywarden's cancel asked for, stays Canceled.
func TestVoidedAtTheAuthorizationsEndIsExpired(t *testing.T) {
	expiry := t0.Add(29 * 24 * time.Hour)
	voided := func(occurred time.Time) payment.Observation {
		return payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedCanceled, Raw: "PAYMENT.AUTHORIZATION.VOIDED", EventID: "evt-void", ProviderPaymentID: "pay_1", OccurredAt: occurred}
	}
	canceling := func(p *v1alpha1.Payment) *v1alpha1.Payment {
		return withOperation(p, v1alpha1.OperationCancel, expiry.Add(-time.Minute))
	}
	for _, tc := range []struct {
		name   string
		pay    func() *v1alpha1.Payment
		obs    payment.Observation
		now    time.Time
		phase  v1alpha1.PaymentPhase
		reason string // of the history entry
	}{
		{name: "voided at the expiry: Expired", pay: func() *v1alpha1.Payment { return authorizedUntil("at", expiry) },
			obs: voided(expiry), now: expiry.Add(time.Second), phase: v1alpha1.PhaseExpired, reason: v1alpha1.ReasonAuthorizationExpired},
		{name: "voided, an event without a time, received after the expiry: Expired", pay: func() *v1alpha1.Payment { return authorizedUntil("late", expiry) },
			obs: voided(time.Time{}), now: expiry.Add(time.Hour), phase: v1alpha1.PhaseExpired, reason: v1alpha1.ReasonAuthorizationExpired},
		{name: "a read of the authorization VOIDED after the expiry: Expired", pay: func() *v1alpha1.Payment { return authorizedUntil("read", expiry) },
			obs: payment.Observation{Source: v1alpha1.SourceStatusQuery, Observed: payment.ObservedCanceled, Raw: "COMPLETED/authorization:VOIDED", ProviderPaymentID: "pay_1"},
			now: expiry.Add(time.Minute), phase: v1alpha1.PhaseExpired, reason: v1alpha1.ReasonAuthorizationExpired},
		{name: "voided before the expiry (a void in PayPal's dashboard): Canceled", pay: func() *v1alpha1.Payment { return authorizedUntil("early", expiry) },
			obs: voided(expiry.Add(-time.Second)), now: expiry.Add(time.Minute), phase: v1alpha1.PhaseCanceled},
		{name: "voided at the expiry while paywarden's cancel is in flight: Canceled", pay: func() *v1alpha1.Payment { return canceling(authorizedUntil("canceling", expiry)) },
			obs: voided(expiry), now: expiry.Add(time.Second), phase: v1alpha1.PhaseCanceled},
		{name: "the cancel call's own answer after the expiry: Canceled", pay: func() *v1alpha1.Payment { return authorizedUntil("cancel-answer", expiry) },
			obs: payment.Observation{Source: v1alpha1.SourceCancel, Observed: payment.ObservedCanceled, Raw: "COMPLETED/authorization:VOIDED", ProviderPaymentID: "pay_1"},
			now: expiry.Add(time.Second), phase: v1alpha1.PhaseCanceled},
		{name: "voided, the authorization's end unknown: Canceled", pay: func() *v1alpha1.Payment { return authorizedPay("no-expiry", v1alpha1.CaptureManual) },
			obs: voided(expiry), now: expiry, phase: v1alpha1.PhaseCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := payment.Apply(tc.pay(), tc.obs, tc.now)
			if res.Decision != payment.Applied || res.Status.Phase != tc.phase {
				t.Fatalf("%s %s (%s), want %s", res.Decision, res.Status.Phase, res.Reason, tc.phase)
			}
			h := res.Status.History[len(res.Status.History)-1]
			if tc.reason != "" && h.Reason != tc.reason {
				t.Errorf("history %+v, want reason %s", h, tc.reason)
			}
			if tc.phase == v1alpha1.PhaseExpired && (res.Status.Failure == nil || res.Status.Failure.Code != v1alpha1.ReasonAuthorizationExpired) {
				t.Errorf("failure %+v", res.Status.Failure)
			}
		})
	}
}

// declined is the answer to a capture (or authorization) PayPal refused with
// INSTRUMENT_DECLINED, as the adapter reports it: the order waits for its
// payer again, at its approval link.
func declined() payment.Call {
	c := answer(provider.StatusPending)
	c.Payment.RawStatus, c.Payment.FailureCode = "PAYER_ACTION_REQUIRED/INSTRUMENT_DECLINED", "INSTRUMENT_DECLINED"
	c.Payment.CustomerAction = &provider.CustomerAction{URL: "https://paypal.example/checkoutnow?token=pay_1"}
	return c
}

// TestFundingDeclinedAtTheCaptureWaitsForThePayer: PayPal answers the capture
// of an approved order INSTRUMENT_DECLINED when the payer's funding source
// fails, and the payment is restarted so the payer can choose another ("Handle
// funding failures"). The payment goes back to Pending, waiting for the payer
// at the approval link — no CaptureRefused review — and the payer's next
// approval leads to a new capture. That capture is a new attempt, not a retry
// of the declined one: it gets its own idempotency key (<create key>/capture/2),
// fixed in its marker, because PayPal may answer a key it has seen with that
// key's first answer (the decline) again.
func TestFundingDeclinedAtTheCaptureWaitsForThePayer(t *testing.T) {
	pol := paypalPolicy()
	now := t0.Add(time.Minute)
	p := approvedOrder("declined")
	p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
	first := p.Status.Operation
	if first == nil || first.Kind != v1alpha1.OperationCapture || first.IdempotencyKey != payment.CreateKey(p)+"/capture" {
		t.Fatalf("capture marker %+v", first)
	}

	out := payment.AfterOperation(p, pol, v1alpha1.OperationCapture, declined(), now)
	p = store(p, out)
	st := p.Status
	if st.Phase != v1alpha1.PhasePending || st.WaitingFor != "Payer" || st.PayerApproved || st.Operation != nil || st.AmountToCapture != nil || review(p) != "" {
		t.Fatalf("after the decline: phase %s waitingFor %q payerApproved %v operation %+v amountToCapture %+v review %q",
			st.Phase, st.WaitingFor, st.PayerApproved, st.Operation, st.AmountToCapture, review(p))
	}
	if st.CustomerAction == nil || st.CustomerAction.URL != "https://paypal.example/checkoutnow?token=pay_1" || st.FundingDeclines != 1 {
		t.Fatalf("customerAction %+v fundingDeclines %d", st.CustomerAction, st.FundingDeclines)
	}
	if h := st.History[len(st.History)-1]; h.From != v1alpha1.PhaseProcessing || h.To != v1alpha1.PhasePending || !strings.Contains(h.Reason, "INSTRUMENT_DECLINED") {
		t.Errorf("history %+v", h)
	}
	if !slices.Contains(eventReasons(out), "CustomerActionRequired") {
		t.Errorf("Events %v: the payer's link is news", allEventReasons(out))
	}
	if st.Query.NextTime == nil || st.Query.Attempts != 0 {
		t.Errorf("schedule %+v: waiting for the payer again starts it again", st.Query)
	}
	if s := payment.Plan(p, pol, payment.Facts{}, now.Add(time.Second)); s.Action == payment.CallCapture || s.Action == payment.Write {
		t.Fatalf("before the payer approves again: %s (%s)", s.Action, s.Why)
	}

	// The payer approves again (a new CHECKOUT.ORDER.APPROVED).
	again := now.Add(5 * time.Minute)
	p = store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedApproved, EventID: "evt-ok-2", ProviderPaymentID: "pay_1"}, again))
	if p.Status.Phase != v1alpha1.PhaseProcessing || !p.Status.PayerApproved {
		t.Fatalf("the second approval: phase %s payerApproved %v", p.Status.Phase, p.Status.PayerApproved)
	}
	s := payment.Plan(p, pol, payment.Facts{}, again)
	second := s.Outcome.Status.Operation
	if s.Action != payment.Write || second == nil || second.Kind != v1alpha1.OperationCapture || second.IdempotencyKey != payment.CreateKey(p)+"/capture/2" {
		t.Fatalf("after the second approval: %s, marker %+v; want a capture marker with key %s/capture/2", s.Action, second, payment.CreateKey(p))
	}
	p = store(p, s.Outcome)
	if k := payment.OperationKey(p, v1alpha1.OperationCapture); k != second.IdempotencyKey {
		t.Fatalf("a retry of the second capture sends %q, not its marker's %q", k, second.IdempotencyKey)
	}
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, answer(provider.StatusSucceeded), again))
	if p.Status.Phase != v1alpha1.PhaseSucceeded || review(p) != "" {
		t.Fatalf("phase %s review %q", p.Status.Phase, review(p))
	}
}

// TestFundingDeclinedFoundByTheCapturesLookup: a capture whose answer was lost
// is looked up before it is repeated; a lookup that reads the order waiting
// for its payer again is the decline (the payer must approve again), not a
// capture to repeat. A read that says Pending while no capture is in flight
// is stale, as ever.
func TestFundingDeclinedFoundByTheCapturesLookup(t *testing.T) {
	pol := paypalPolicy()
	now := t0.Add(time.Minute)
	p := approvedOrder("lost")
	p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, fails(errNoAnswer), now))
	if p.Status.Operation == nil {
		t.Fatal("an unanswered capture ended its operation")
	}
	p = store(p, payment.AfterQuery(p, pol, declined(), false, now.Add(10*time.Second)))
	if st := p.Status; st.Phase != v1alpha1.PhasePending || st.Operation != nil || st.WaitingFor != "Payer" || st.FundingDeclines != 1 {
		t.Fatalf("after the lookup: phase %s operation %+v waitingFor %q fundingDeclines %d", st.Phase, st.Operation, st.WaitingFor, st.FundingDeclines)
	}

	stale := approvedOrder("stale")
	res := payment.Apply(stale, payment.Observation{Source: v1alpha1.SourceStatusQuery, Observed: payment.ObservedPending, ProviderPaymentID: "pay_1"}, now)
	if res.Decision != payment.Stale || res.Status.Phase != v1alpha1.PhaseProcessing || !res.Status.PayerApproved {
		t.Fatalf("a Pending read of an approved payment with no capture in flight: %s %s", res.Decision, res.Status.Phase)
	}
}

// TestScenarioFundingDeclinedThenApprovedAgainIsCapturedOnce: driven through
// the whole loop, a checkout whose first funding source is declined at the
// capture ends Succeeded after the payer's second approval, with exactly two
// captures (the declined one and the one that took the money) and no review.
func TestScenarioFundingDeclinedThenApprovedAgainIsCapturedOnce(t *testing.T) {
	pol := paypalPolicy()
	approvedAt, reapprovedAt := t0.Add(2*time.Minute), t0.Add(20*time.Minute)
	notApproved := &provider.Error{Provider: "shop/paypal", Op: "capture", Class: provider.ErrNonRetryable, StatusCode: 422, Code: "ORDER_NOT_APPROVED"}
	captures := 0
	p, calls := drive(t, newPay("declined-then-paid"), pol, func(a payment.Action, _ int, now time.Time) payment.Call {
		declinedOnce := captures > 0
		switch {
		case a == payment.CallCapture && !declinedOnce:
			captures++
			return declined()
		case a == payment.CallCapture && now.Before(reapprovedAt):
			return fails(notApproved) // PayPal: the payer has not approved again
		case a == payment.CallCapture:
			captures++
			return answer(provider.StatusSucceeded)
		case a == payment.Create, now.Before(approvedAt), declinedOnce && now.Before(reapprovedAt):
			return declined()
		}
		return answer(provider.StatusApproved)
	}, t0.Add(24*time.Hour))
	if p.Status.Phase != v1alpha1.PhaseSucceeded || captures != 2 || review(p) != "" {
		t.Fatalf("phase %s after %d captures and %d calls, review %q\n%s", p.Status.Phase, captures, len(calls), review(p), dumpHistory(p.Status.History))
	}
}

// fundsGuarantee is the FundsGuaranteed condition of p, if any.
func fundsGuarantee(st v1alpha1.PaymentStatus) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionFundsGuaranteed)
}

// TestFundsGuaranteedUntilTheHonorPeriodEnds: PayPal holds authorized funds
// for 29 days but guarantees them only in the 3-day honor period; after it a
// capture may be declined ("Authorization and honor period"). The payment
// shows status.fundsGuaranteedUntil next to authorizationExpiresAt, wakes at
// it, and once it passes uncaptured says so once: FundsGuaranteed=False
// (HonorPeriodEnded) and a Warning Event. A capture under way, or a payment no
// longer Authorized, gets neither.
func TestFundsGuaranteedUntilTheHonorPeriodEnds(t *testing.T) {
	pol := paypalPolicy()
	authorizedAt := t0.Add(10 * time.Second)
	honorEnds, expiry := authorizedAt.Add(paypal.HonorPeriod), authorizedAt.Add(29*24*time.Hour)
	p := lifecyclePay("held", v1alpha1.CaptureManual)
	p = store(p, payment.AfterOperation(withOperation(p, v1alpha1.OperationAuthorize, authorizedAt), pol, v1alpha1.OperationAuthorize, payment.Call{Payment: provider.Payment{
		ID: "pay_1", Status: provider.StatusAuthorized, RawStatus: "COMPLETED/authorization:CREATED", Amount: orderValue, Currency: orderCurrency,
		AuthorizationExpiresAt: expiry, FundsGuaranteedUntil: honorEnds,
	}}, authorizedAt))
	st := p.Status
	if st.Phase != v1alpha1.PhaseAuthorized || st.FundsGuaranteedUntil == nil || !st.FundsGuaranteedUntil.Time.Equal(honorEnds) || !st.AuthorizationExpiresAt.Time.Equal(expiry) {
		t.Fatalf("phase %s fundsGuaranteedUntil %v authorizationExpiresAt %v", st.Phase, st.FundsGuaranteedUntil, st.AuthorizationExpiresAt)
	}

	// Waiting for the merchant's capture, it is read at the honor period's end.
	p = store(p, payment.AfterQuery(p, pol, payment.Call{Payment: provider.Payment{
		ID: "pay_1", Status: provider.StatusAuthorized, RawStatus: "COMPLETED/authorization:CREATED", Amount: orderValue, Currency: orderCurrency,
		AuthorizationExpiresAt: expiry, FundsGuaranteedUntil: honorEnds,
	}}, false, honorEnds.Add(-10*time.Minute)))
	if next := p.Status.Query.NextTime; next == nil || next.Time.After(honorEnds.Add(time.Second)) {
		t.Fatalf("next query %v, want by the honor period's end %s", next, honorEnds)
	}
	if s := payment.Plan(p, pol, payment.Facts{}, honorEnds.Add(-time.Second)); s.Action == payment.Write {
		t.Fatalf("before the honor period's end: %s (%s)", s.Action, s.Why)
	}

	s := payment.Plan(p, pol, payment.Facts{}, honorEnds)
	c := fundsGuarantee(s.Outcome.Status)
	if s.Action != payment.Write || c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonHonorPeriodEnded || !slices.Contains(eventReasons(s.Outcome), v1alpha1.ReasonHonorPeriodEnded) {
		t.Fatalf("at the honor period's end: %s (%s), condition %+v, Events %v", s.Action, s.Why, c, eventReasons(s.Outcome))
	}
	if w := s.Outcome.Events[0]; !w.Warning || !strings.Contains(w.Message, expiry.UTC().Format(time.RFC3339)) {
		t.Errorf("Event %+v: a Warning naming the authorization's end", w)
	}
	p = store(p, s.Outcome)
	if s := payment.Plan(p, pol, payment.Facts{}, honorEnds.Add(time.Hour)); s.Action == payment.Write {
		t.Fatalf("said twice: %s (%s), Events %v", s.Action, s.Why, eventReasons(s.Outcome))
	}

	// Past the authorization's own end its expiry says more; an
	// authorization without a known end is said to be still valid.
	ended := p.DeepCopy()
	ended.Status.Conditions = nil
	if s := payment.Plan(ended, pol, payment.Facts{}, expiry.Add(time.Minute)); fundsGuarantee(s.Outcome.Status) != nil {
		t.Errorf("past the authorization's end: %s (%s), condition %+v", s.Action, s.Why, fundsGuarantee(s.Outcome.Status))
	}
	endless := ended.DeepCopy()
	endless.Status.AuthorizationExpiresAt = nil
	if s := payment.Plan(endless, pol, payment.Facts{}, honorEnds.Add(time.Minute)); fundsGuarantee(s.Outcome.Status) == nil ||
		len(s.Outcome.Events) == 0 || !strings.Contains(s.Outcome.Events[0].Message, "is still valid") {
		t.Errorf("an authorization without a known end: %s (%s), Events %+v", s.Action, s.Why, s.Outcome.Events)
	}

	// Captured after it: the condition goes with the authorization.
	p = annotate(p, v1alpha1.AnnotationCapture, "all")
	p = store(p, payment.Plan(p, pol, payment.Facts{}, honorEnds.Add(2*time.Hour)).Outcome)
	p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, answer(provider.StatusSucceeded), honorEnds.Add(2*time.Hour)))
	if p.Status.Phase != v1alpha1.PhaseSucceeded || fundsGuarantee(p.Status) != nil {
		t.Fatalf("captured: phase %s condition %+v", p.Status.Phase, fundsGuarantee(p.Status))
	}

	// A capture under way at the honor period's end is no news.
	q := lifecyclePay("capturing", v1alpha1.CaptureManual)
	q = store(q, payment.ApplyEvent(q, payment.Observation{Source: v1alpha1.SourceAuthorize, Observed: payment.ObservedAuthorized, ProviderPaymentID: "pay_1",
		Amount: &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}, FundsGuaranteedUntil: ptrTime(honorEnds)}, authorizedAt))
	q = store(q, payment.Plan(annotate(q, v1alpha1.AnnotationCapture, "all"), pol, payment.Facts{}, honorEnds.Add(-time.Minute)).Outcome)
	if s := payment.Plan(q, pol, payment.Facts{}, honorEnds); s.Action == payment.Write && fundsGuarantee(s.Outcome.Status) != nil {
		t.Fatalf("with a capture under way: %+v", fundsGuarantee(s.Outcome.Status))
	}
}

// TestApprovalReversedIsExpired: PayPal reverses the approval of an order the
// merchant did not capture in time, cancels it and refunds the payer
// (CHECKOUT.PAYMENT-APPROVAL.REVERSED, "Handle uncaptured payments"). The
// payment was approved and nothing was taken: Expired, with PayPal's reason,
// no review — also while its capture was under way, which can then no longer
// take the money.
func TestApprovalReversedIsExpired(t *testing.T) {
	reversed := payment.FromEvent(provider.Event{
		ID: "WH-REV", Type: "CHECKOUT.PAYMENT-APPROVAL.REVERSED", Status: provider.StatusExpired, Supported: true,
		PaymentID: "pay_1", MerchantReference: "shop.approved", OccurredAt: t0.Add(3 * time.Hour), FailureCode: paypal.FailureApprovalReversed,
	}, v1alpha1.ViaWebhook)
	for name, p := range map[string]*v1alpha1.Payment{
		"approved, not captured": approvedOrder("approved"),
		"its capture under way":  withOperation(approvedOrder("capturing"), v1alpha1.OperationCapture, t0.Add(time.Hour)),
		"the approval not seen":  created("unseen"),
	} {
		t.Run(name, func(t *testing.T) {
			res := payment.Apply(p, reversed, t0.Add(3*time.Hour))
			st := res.Status
			if res.Decision != payment.Applied || st.Phase != v1alpha1.PhaseExpired || st.Operation != nil || st.PayerApproved || st.ExpiredLocally {
				t.Fatalf("%s %s operation %+v payerApproved %v expiredLocally %v", res.Decision, st.Phase, st.Operation, st.PayerApproved, st.ExpiredLocally)
			}
			if st.Failure == nil || st.Failure.Code != paypal.FailureApprovalReversed || review(&v1alpha1.Payment{Status: st}) != "" {
				t.Fatalf("failure %+v review %q", st.Failure, review(&v1alpha1.Payment{Status: st}))
			}
		})
	}
}

// TestPayPalDisputeResolvedIsItsOutcome: PayPal ends a dispute with
// CUSTOMER.DISPUTE.RESOLVED and its dispute_outcome.outcome_code (Customer
// Disputes API v1). Decided as Stripe's dispute outcomes are: the seller's
// favour (or the buyer canceling) clears Disputed (DisputeWon); the buyer's
// favour, an accepted claim or a code that does not say the money stayed is
// DisputeLost with NeedsReview=DisputeLost; the paid phase is kept.
func TestPayPalDisputeResolvedIsItsOutcome(t *testing.T) {
	event := func(id, typ, outcome string) payment.Observation {
		t.Helper()
		res := `{"dispute_id":"PP-D-1","dispute_amount":{"currency_code":"USD","value":"19.99"},"disputed_transactions":[{"invoice_number":"shop.synced"}]`
		if outcome != "" {
			res += `,"status":"RESOLVED","dispute_outcome":{"outcome_code":"` + outcome + `"}`
		}
		ev, err := paypal.ParseEvent([]byte(`{"id":"` + id + `","create_time":"2026-09-21T12:00:00Z","event_type":"` + typ + `","resource":` + res + `}}`))
		if err != nil {
			t.Fatal(err)
		}
		return payment.FromEvent(ev, v1alpha1.ViaWebhook)
	}
	paid := succeededPayment()
	opened := store(paid, payment.ApplyEvent(paid, event("WH-OPEN", "CUSTOMER.DISPUTE.CREATED", ""), t0.Add(time.Hour)))
	if c := meta.FindStatusCondition(opened.Status.Conditions, v1alpha1.ConditionDisputed); c == nil || c.Reason != v1alpha1.ReasonDisputeOpened {
		t.Fatalf("the dispute opened: %+v", c)
	}
	for code, want := range map[string]string{
		paypal.OutcomeSellerFavour: v1alpha1.ReasonDisputeWon, paypal.OutcomeCanceled: v1alpha1.ReasonDisputeWon,
		paypal.OutcomeBuyerFavour: v1alpha1.ReasonDisputeLost, paypal.OutcomeAccepted: v1alpha1.ReasonDisputeLost,
		paypal.OutcomeWithPayout: v1alpha1.ReasonDisputeLost,
	} {
		t.Run(code, func(t *testing.T) {
			res := payment.Apply(opened, event("WH-"+code, "CUSTOMER.DISPUTE.RESOLVED", code), t0.Add(40*24*time.Hour))
			c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionDisputed)
			if res.Decision != payment.Applied || res.Status.Phase != v1alpha1.PhaseSucceeded || c == nil || c.Status != metav1.ConditionFalse || c.Reason != want {
				t.Fatalf("%s %s Disputed %+v; want Succeeded, Disputed=False/%s", res.Decision, res.Status.Phase, c, want)
			}
			wantReview := map[string]string{v1alpha1.ReasonDisputeWon: "", v1alpha1.ReasonDisputeLost: v1alpha1.ReasonDisputeLost}[want]
			if got := review(&v1alpha1.Payment{Status: res.Status}); got != wantReview {
				t.Fatalf("review %q, want %q", got, wantReview)
			}
		})
	}
}

// TestAScheduleThatRunsOutWaitsForTheOrdersExpiry: a PayPal payment whose
// status queries run out before its order could have been deleted is read
// once more a tenth of the order's lifetime after that (its "not found" is
// then Expired, not RetriesExhausted), but only when that read is at most two
// of the schedule's last steps away: a far shorter schedule, or one that runs
// out after that time, gives up as it says.
func TestAScheduleThatRunsOutWaitsForTheOrdersExpiry(t *testing.T) {
	pol := paypalPolicy()
	last := pol.Schedule[len(pol.Schedule)-1]
	readAt := t0.Add(paypal.OrderLifetime + paypal.OrderLifetime/10) // the marker is at t0
	for _, tc := range []struct {
		name string
		now  time.Time
		wake bool
	}{
		{"two last steps before the read", readAt.Add(-2 * last), true},
		{"a moment before the read", readAt.Add(-time.Second), true},
		{"further away than two last steps", readAt.Add(-2*last - time.Second), false},
		{"at the read", readAt, false},
		{"past the read", readAt.Add(time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := created("ran-out")
			p.Status.Query.Attempts = int32(len(pol.Schedule)) - 1
			out := payment.AfterQuery(p, pol, answer(provider.StatusPending), false, tc.now)
			st := out.Status
			got := &v1alpha1.Payment{Status: st}
			if tc.wake {
				if st.Phase != v1alpha1.PhasePending || review(got) != "" || st.Query.NextTime == nil || !st.Query.NextTime.Time.Equal(readAt) {
					t.Fatalf("phase %s review %q next %v, want Pending read again at %s", st.Phase, review(got), st.Query.NextTime, readAt)
				}
				return
			}
			if st.Phase != v1alpha1.PhaseUnknown || review(got) != v1alpha1.ReasonRetriesExhausted || st.Query.NextTime != nil {
				t.Fatalf("phase %s review %q next %v, want Unknown RetriesExhausted, nothing scheduled", st.Phase, review(got), st.Query.NextTime)
			}
		})
	}
}
