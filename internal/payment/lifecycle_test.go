package payment_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// The checkout lifecycle (SPEC §11.5): approval, authorization, capture,
// cancel, the payer's link.

func withCustomerAction(url string) obsOpt {
	return func(o *payment.Observation) { o.CustomerAction = &v1alpha1.CustomerAction{URL: url} }
}

func withCheckout(id string) obsOpt { return func(o *payment.Observation) { o.CheckoutID = id } }

func withAuthExpiry(t time.Time) obsOpt {
	return func(o *payment.Observation) { mt := metav1.NewTime(t); o.AuthorizationExpiresAt = &mt }
}

var (
	givenAuthorized = andThen(givenPending, obsWebhook(payment.ObservedAuthorized, "evt-auth", withPaid(), withProviderID("pay_1")))
	givenApproved   = andThen(givenPending, obsWebhook(payment.ObservedApproved, "evt-approved", withProviderID("pay_1")))
)

func TestApplyCheckoutLifecycle(t *testing.T) {
	const (
		pending    = v1alpha1.PhasePending
		processing = v1alpha1.PhaseProcessing
		authorized = v1alpha1.PhaseAuthorized
		succeeded  = v1alpha1.PhaseSucceeded
		expired    = v1alpha1.PhaseExpired
		canceled   = v1alpha1.PhaseCanceled
		unknown    = v1alpha1.PhaseUnknown
		srcWebhook = v1alpha1.SourceWebhook
		srcQuery   = v1alpha1.SourceStatusQuery
	)
	expiry := stepNow.Add(72 * time.Hour)
	capturing := func(value int64) func(*v1alpha1.PaymentStatus) {
		return func(st *v1alpha1.PaymentStatus) {
			st.AmountToCapture = &v1alpha1.Money{Value: value, Currency: orderCurrency}
		}
	}
	// capturingMarked: the capture was marked at stepNow, as Plan marks it.
	capturingMarked := func(value int64) func(*v1alpha1.PaymentStatus) {
		return func(st *v1alpha1.PaymentStatus) {
			capturing(value)(st)
			st.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCapture, RequestedAt: metav1.NewTime(stepNow)}
		}
	}
	runMachineCases(t, []machineCase{
		{
			name:     "a processing event from before the capture was marked is not the capture under way",
			given:    givenAuthorized,
			prepare:  capturingMarked(orderValue),
			obs:      obsWebhook(payment.ObservedProcessing, "evt-processing-early", withProviderID("pay_1"), withOccurredAt(stepNow.Add(-time.Second))),
			decision: payment.Stale,
			phase:    authorized,
			conds:    []string{readyInProgress},
		},
		{
			name:     "a processing event from before the capture of an approved payment was marked leaves the approval to be used",
			given:    givenApproved,
			prepare:  capturingMarked(orderValue),
			obs:      obsWebhook(payment.ObservedProcessing, "evt-processing-early", withProviderID("pay_1"), withOccurredAt(stepNow.Add(-time.Second))),
			decision: payment.Stale,
			phase:    processing,
			conds:    []string{readyInProgress},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if !after.PayerApproved || after.Operation == nil {
					t.Errorf("payerApproved %v operation %+v: the capture would count as sent", after.PayerApproved, after.Operation)
				}
			},
		},
		{
			name:       "the payer's approval moves a pending payment to Processing and asks for the merchant's call",
			given:      givenPending,
			obs:        obsWebhook(payment.ObservedApproved, "evt-approved", withProviderID("pay_1")),
			decision:   payment.Applied,
			phase:      processing,
			conds:      []string{readyInProgress},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, processing, srcWebhook, "evt-approved", "approved by the payer")},
			events:     []string{"Normal/Processing"},
			transition: phaseChange(pending, processing),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if !after.PayerApproved || after.WaitingFor != "Capture" {
					t.Errorf("payerApproved %v waitingFor %q", after.PayerApproved, after.WaitingFor)
				}
			},
		},
		{
			name:     "a second approval is stale",
			given:    givenApproved,
			obs:      obsQuery(payment.ObservedApproved, withProviderID("pay_1")),
			decision: payment.Stale,
			phase:    processing,
			conds:    []string{readyInProgress},
		},
		{
			name:       "an authorization reserves the money: Authorized with its amount and expiry",
			given:      givenApproved,
			obs:        obsWebhook(payment.ObservedAuthorized, "evt-auth", withPaid(), withProviderID("pay_1"), withAuthExpiry(expiry)),
			decision:   payment.Applied,
			phase:      authorized,
			conds:      []string{readyInProgress},
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, authorized, srcWebhook, "evt-auth", "")},
			events:     []string{"Normal/Authorized"},
			transition: phaseChange(processing, authorized),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.AmountAuthorized == nil || after.AmountAuthorized.Value != orderValue || after.AuthorizationExpiresAt == nil || !after.AuthorizationExpiresAt.Time.Equal(expiry) {
					t.Errorf("authorization %+v until %v", after.AmountAuthorized, after.AuthorizationExpiresAt)
				}
				if after.PayerApproved {
					t.Error("payerApproved kept once authorized")
				}
			},
		},
		{
			name:       "an authorization for another amount needs review",
			given:      givenPending,
			obs:        obsWebhook(payment.ObservedAuthorized, "evt-auth", withAmount(999, orderCurrency), withProviderID("pay_1")),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonAmountMismatch),
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, unknown, srcWebhook, "evt-auth", v1alpha1.ReasonAmountMismatch)},
			events:     []string{"Warning/Unknown", "Warning/AmountMismatch"},
			transition: phaseChange(pending, unknown),
		},
		{
			name:     "an authorization after success is stale",
			given:    givenSucceeded,
			obs:      obsWebhook(payment.ObservedAuthorized, "evt-auth-late", withPaid()),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    []string{readySettled},
		},
		{
			name:     "processing after Authorized without a capture is stale",
			given:    givenAuthorized,
			obs:      obsQuery(payment.ObservedProcessing, withProviderID("pay_1")),
			decision: payment.Stale,
			phase:    authorized,
			conds:    []string{readyInProgress},
		},
		{
			name:       "processing after Authorized is the capture under way once one was asked for",
			given:      givenAuthorized,
			prepare:    capturing(orderValue),
			obs:        obsQuery(payment.ObservedProcessing, withProviderID("pay_1")),
			decision:   payment.Applied,
			phase:      processing,
			conds:      []string{readyInProgress},
			history:    []v1alpha1.HistoryEntry{historyEntry(authorized, processing, srcQuery, "", "capture in progress")},
			events:     []string{"Normal/Processing"},
			transition: phaseChange(authorized, processing),
		},
		{
			name:     "processing after the approval is the capture under way once one was asked for: the approval is used up",
			given:    givenApproved,
			prepare:  capturing(orderValue),
			obs:      obsQuery(payment.ObservedProcessing, withProviderID("pay_1")),
			decision: payment.Applied,
			phase:    processing,
			conds:    []string{readyInProgress},
			history:  []v1alpha1.HistoryEntry{historyEntry(processing, processing, srcQuery, "", "capture in progress")},
			events:   []string{"Normal/Processing"},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.PayerApproved || after.WaitingFor == "Capture" {
					t.Errorf("payerApproved %v waitingFor %q: a second capture would be asked for", after.PayerApproved, after.WaitingFor)
				}
			},
		},
		{
			name:     "processing after the approval before any capture was asked for is stale",
			given:    givenApproved,
			obs:      obsQuery(payment.ObservedProcessing, withProviderID("pay_1")),
			decision: payment.Stale,
			phase:    processing,
			conds:    []string{readyInProgress},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if !after.PayerApproved {
					t.Error("the approval was dropped before any capture")
				}
			},
		},
		{
			name:  "a late approval of a payment whose capture is under way is stale",
			given: andThen(givenApproved, obsQuery(payment.ObservedProcessing, withProviderID("pay_1"))),
			prepare: func(st *v1alpha1.PaymentStatus) {
				st.AmountToCapture = &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}
				st.PayerApproved = false
			},
			obs:      obsWebhook(payment.ObservedApproved, "evt-approved-late", withProviderID("pay_1")),
			decision: payment.Stale,
			phase:    processing,
			conds:    []string{readyInProgress},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.PayerApproved {
					t.Error("a late approval asks for a second capture")
				}
			},
		},
		{
			name:       "a partial capture succeeds for the captured amount",
			given:      givenAuthorized,
			prepare:    capturing(1500),
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-captured", withAmount(1500, orderCurrency), withProviderID("pay_1")),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(authorized, succeeded, srcWebhook, "evt-captured", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(authorized, succeeded),
		},
		{
			name:       "a capture of another amount than asked for needs review",
			given:      givenAuthorized,
			prepare:    capturing(1500),
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-captured", withPaid(), withProviderID("pay_1")),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonAmountMismatch),
			history:    []v1alpha1.HistoryEntry{historyEntry(authorized, unknown, srcWebhook, "evt-captured", v1alpha1.ReasonAmountMismatch)},
			events:     []string{"Warning/Unknown", "Warning/AmountMismatch"},
			transition: phaseChange(authorized, unknown),
		},
		{
			name:       "an authorization that expires uncaptured ends Expired with AuthorizationExpired",
			given:      givenAuthorized,
			obs:        obsQuery(payment.ObservedExpired, withProviderID("pay_1"), withFailure(v1alpha1.ReasonAuthorizationExpired, "")),
			decision:   payment.Applied,
			phase:      expired,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(authorized, expired, srcQuery, "", v1alpha1.ReasonAuthorizationExpired)},
			events:     []string{"Normal/Expired"},
			transition: phaseChange(authorized, expired),
		},
		{
			name:       "a voided authorization is Canceled, final",
			given:      givenAuthorized,
			obs:        obsWebhook(payment.ObservedCanceled, "evt-void", withProviderID("pay_1")),
			decision:   payment.Applied,
			phase:      canceled,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(authorized, canceled, srcWebhook, "evt-void", "")},
			events:     []string{"Normal/Canceled"},
			transition: phaseChange(authorized, canceled),
		},
		{
			name:     "a cancel reported for a payment that took money is a conflict",
			given:    givenSucceeded,
			obs:      obsWebhook(payment.ObservedCanceled, "evt-void-late"),
			decision: payment.Conflict,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcWebhook, "evt-void-late", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
		},
		{
			name:     "a failure after Canceled is stale: the first not-paid answer stands",
			given:    andThen(givenAuthorized, obsWebhook(payment.ObservedCanceled, "evt-void")),
			obs:      obsWebhook(payment.ObservedFailed, "evt-failed"),
			decision: payment.Stale,
			phase:    canceled,
			conds:    []string{readySettled},
		},
		{
			name:     "the payer's link is recorded while the payment waits for the payer",
			given:    givenPending,
			obs:      obsQuery(payment.ObservedPending, withProviderID("pay_1"), withCustomerAction("https://pay.example.com/checkout/1")),
			decision: payment.Stale,
			phase:    pending,
			conds:    []string{readyInProgress},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.CustomerAction == nil || after.CustomerAction.URL != "https://pay.example.com/checkout/1" || after.WaitingFor != "Payer" {
					t.Errorf("customerAction %+v waitingFor %q", after.CustomerAction, after.WaitingFor)
				}
			},
		},
		{
			name:       "the payer's link is cleared once the payer is done",
			given:      andThen(givenPending, obsQuery(payment.ObservedPending, withCustomerAction("https://pay.example.com/checkout/1"))),
			obs:        obsQuery(payment.ObservedProcessing, withProviderID("pay_1")),
			decision:   payment.Applied,
			phase:      processing,
			conds:      []string{readyInProgress},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, processing, srcQuery, "", "")},
			events:     []string{"Normal/Processing"},
			transition: phaseChange(pending, processing),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.CustomerAction != nil || after.WaitingFor != "" {
					t.Errorf("customerAction %+v waitingFor %q kept", after.CustomerAction, after.WaitingFor)
				}
			},
		},
		{
			name: "a checkout's payment id replaces the checkout id, which is kept",
			given: []payment.Observation{
				obsCreated(payment.ObservedPending, withProviderID("cs_1")),
			},
			obs:        obsWebhook(payment.ObservedProcessing, "evt-pi", withProviderID("pi_1"), withCheckout("cs_1")),
			decision:   payment.Applied,
			phase:      processing,
			conds:      []string{readyInProgress},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, processing, srcWebhook, "evt-pi", "")},
			events:     []string{"Normal/Processing"},
			transition: phaseChange(pending, processing),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ProviderPaymentID != "pi_1" || after.CheckoutID != "cs_1" {
					t.Errorf("ids %q/%q, want pi_1 and checkout cs_1", after.ProviderPaymentID, after.CheckoutID)
				}
			},
		},
		{
			name:       "a checkout's payment reported without the checkout id is its own payment, not a second one",
			given:      []payment.Observation{obsCreated(payment.ObservedPending, withProviderID("cs_1"), withCheckout("cs_1"))},
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-pi-paid", withPaid(), withProviderID("pi_1")),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, succeeded, srcWebhook, "evt-pi-paid", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(pending, succeeded),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ProviderPaymentID != "pi_1" || after.CheckoutID != "cs_1" {
					t.Errorf("ids %q/%q", after.ProviderPaymentID, after.CheckoutID)
				}
			},
		},
		{
			name:     "once the checkout's payment is known, another payment id is a second payment",
			given:    []payment.Observation{obsCreated(payment.ObservedPending, withProviderID("cs_1"), withCheckout("cs_1")), obsQuery(payment.ObservedProcessing, withProviderID("pi_1"), withCheckout("cs_1"))},
			obs:      obsWebhook(payment.ObservedSucceeded, "evt-pi2", withPaid(), withProviderID("pi_2")),
			decision: payment.Conflict,
			phase:    processing,
			conds:    reviewing(v1alpha1.ReasonDuplicatePayment),
			history:  []v1alpha1.HistoryEntry{historyEntry(processing, processing, srcWebhook, "evt-pi2", v1alpha1.ReasonDuplicatePayment+": pi_2")},
			events:   []string{"Warning/DuplicatePayment"},
		},
		{
			name:     "an event naming the payment by its checkout id is about the same payment",
			given:    andThen([]payment.Observation{obsCreated(payment.ObservedPending, withProviderID("cs_1"))}, obsWebhook(payment.ObservedProcessing, "evt-pi", withProviderID("pi_1"), withCheckout("cs_1"))),
			obs:      obsWebhook(payment.ObservedProcessing, "evt-cs", withProviderID("cs_1")),
			decision: payment.Stale,
			phase:    processing,
			conds:    []string{readyInProgress},
		},
		{
			name:     "a manual resolve may cancel",
			given:    givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:      obsManual(payment.ObservedCanceled, "voided in the dashboard"),
			decision: payment.Applied,
			phase:    canceled,
			conds:    []string{"NeedsReview=False/" + v1alpha1.ReasonReviewed, readySettled},
			history: []v1alpha1.HistoryEntry{historyEntry(unknown, canceled, v1alpha1.SourceManual, "",
				v1alpha1.ReasonResolved+": voided in the dashboard")},
			events:     []string{"Normal/Canceled"},
			transition: phaseChange(unknown, canceled),
		},
	})
}

// lifecyclePay is a payment the provider knows as pay_1.
func lifecyclePay(name string, capture v1alpha1.CaptureMethod) *v1alpha1.Payment {
	p := created(name)
	p.Spec.CaptureMethod = capture
	return p
}

func authorizedPay(name string, capture v1alpha1.CaptureMethod) *v1alpha1.Payment {
	p := lifecyclePay(name, capture)
	return store(p, payment.ApplyEvent(p, payment.Observation{
		Source: v1alpha1.SourceWebhook, Observed: payment.ObservedAuthorized, EventID: "evt-auth", ProviderPaymentID: "pay_1",
		Amount: &v1alpha1.Money{Value: orderValue, Currency: orderCurrency},
	}, t0.Add(10*time.Second)))
}

func annotate(p *v1alpha1.Payment, key, value string) *v1alpha1.Payment {
	cp := p.DeepCopy()
	if cp.Annotations == nil {
		cp.Annotations = map[string]string{}
	}
	cp.Annotations[key] = value
	return cp
}

func eventReasons(out payment.Outcome) []string {
	var r []string
	for _, e := range out.Events {
		r = append(r, e.Reason)
	}
	return r
}

func TestPlanOperations(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle = provider.Lifecycle{ManualCapture: true, PartialCapture: true, Cancel: true, AuthorizeStep: true, Checkout: true}
	pol.LifecycleKnown = true
	now := t0.Add(time.Minute)
	fresh := payment.Facts{FreshOperation: true}
	approved := func(name string, capture v1alpha1.CaptureMethod) *v1alpha1.Payment {
		p := lifecyclePay(name, capture)
		return store(p, payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedApproved, EventID: "evt-ok", ProviderPaymentID: "pay_1"}, t0.Add(10*time.Second)))
	}

	t.Run("an approved payment with automatic capture stores the capture, then captures", func(t *testing.T) {
		p := approved("auto", v1alpha1.CaptureAutomatic)
		s := payment.Plan(p, pol, payment.Facts{}, now)
		if s.Action != payment.Write || s.Outcome.Status.Operation == nil || s.Outcome.Status.Operation.Kind != v1alpha1.OperationCapture {
			t.Fatalf("step %s %+v", s.Action, s.Outcome.Status.Operation)
		}
		p = store(p, s.Outcome)
		if s := payment.Plan(p, pol, fresh, now); s.Action != payment.CallCapture {
			t.Fatalf("after the marker: %s (%s), want the capture call", s.Action, s.Why)
		}
	})
	t.Run("after a crash, a query in the marker's own stored second is no lookup", func(t *testing.T) {
		// The query that learned the approval answered at .600; the capture
		// marker was written at .700 of the same second and stored (as the
		// API server keeps it) to the second. A new manager cannot tell
		// which came first, so the query does not count as the lookup.
		queried := t0.Add(30*time.Second + 600*time.Millisecond)
		p := approved("same-second", v1alpha1.CaptureAutomatic)
		p.Status.Query.LastTime = micro(queried)
		s := payment.Plan(p, pol, payment.Facts{}, queried.Add(100*time.Millisecond))
		if s.Action != payment.Write || s.Outcome.Status.Operation == nil {
			t.Fatalf("step %s (%s), want the capture marker", s.Action, s.Why)
		}
		p = storedByTheAPIServer(t, store(p, s.Outcome))
		if got := p.Status.Operation.RequestedAt.Time; !got.Equal(t0.Add(30 * time.Second)) {
			t.Fatalf("marker stored as %s", got)
		}
		restarted := queried.Add(200 * time.Millisecond) // still in the marker's second
		if s := payment.Plan(p, pol, payment.Facts{}, restarted); s.Action != payment.Wait || !s.At.Equal(t0.Add(31*time.Second)) {
			t.Fatalf("in the marker's second: %s at %s (%s), want a wait for the next second", s.Action, s.At, s.Why)
		}
		later := t0.Add(31*time.Second + 200*time.Millisecond)
		if s := payment.Plan(p, pol, payment.Facts{}, later); s.Action != payment.Query {
			t.Fatalf("after the marker's second: %s (%s), want the lookup", s.Action, s.Why)
		}
		p.Status.Query.LastTime = micro(later)
		markedAgainThenCalled(t, p, pol, later.Add(time.Second), payment.CallCapture)
	})
	t.Run("an approved payment with manual capture is authorized first where the provider needs it", func(t *testing.T) {
		p := approved("manual", v1alpha1.CaptureManual)
		s := payment.Plan(p, pol, payment.Facts{}, now)
		if s.Action != payment.Write || s.Outcome.Status.Operation == nil || s.Outcome.Status.Operation.Kind != v1alpha1.OperationAuthorize {
			t.Fatalf("step %s %+v", s.Action, s.Outcome.Status.Operation)
		}
	})
	t.Run("an authorized manual payment waits for the capture annotation", func(t *testing.T) {
		p := authorizedPay("waiting", v1alpha1.CaptureManual)
		if s := payment.Plan(p, pol, payment.Facts{}, now); s.Action != payment.Wait && s.Action != payment.Query {
			t.Fatalf("step %s (%s)", s.Action, s.Why)
		}
		if p.Status.WaitingFor != "Capture" {
			t.Errorf("waitingFor %q", p.Status.WaitingFor)
		}
	})
	t.Run("the capture annotation with an amount is a partial capture, acted on once", func(t *testing.T) {
		p := annotate(authorizedPay("partial", v1alpha1.CaptureManual), v1alpha1.AnnotationCapture, "1500")
		s := payment.Plan(p, pol, payment.Facts{}, now)
		op := s.Outcome.Status.Operation
		if s.Action != payment.Write || op == nil || op.Kind != v1alpha1.OperationCapture || op.Amount == nil || op.Amount.Value != 1500 || s.Outcome.Status.Actions.Capture != "1500" {
			t.Fatalf("step %s operation %+v actions %+v", s.Action, op, s.Outcome.Status.Actions)
		}
		p = store(p, s.Outcome)
		out := payment.AfterOperation(p, pol, v1alpha1.OperationCapture, payment.Call{Payment: provider.Payment{ID: "pay_1", Status: provider.StatusSucceeded, Amount: 1500, Currency: orderCurrency}}, now)
		p = store(p, out)
		if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.Operation != nil || review(p) != "" {
			t.Fatalf("after the capture: phase %s op %+v review %q", p.Status.Phase, p.Status.Operation, review(p))
		}
		if s := payment.Plan(p, pol, payment.Facts{}, now); s.Action != payment.Nothing {
			t.Errorf("the annotation acted on twice: %s", s.Action)
		}
	})
	t.Run("a capture above the authorized amount is refused with a Warning, nothing called", func(t *testing.T) {
		p := annotate(authorizedPay("too-much", v1alpha1.CaptureManual), v1alpha1.AnnotationCapture, "5000")
		s := payment.Plan(p, pol, payment.Facts{}, now)
		if s.Action != payment.Write || s.Outcome.Status.Operation != nil || strings.Join(eventReasons(s.Outcome), ",") != "CaptureRefused" {
			t.Fatalf("step %s op %+v events %v", s.Action, s.Outcome.Status.Operation, eventReasons(s.Outcome))
		}
	})
	t.Run("a capture annotation set early waits for the authorization", func(t *testing.T) {
		p := annotate(lifecyclePay("early", v1alpha1.CaptureManual), v1alpha1.AnnotationCapture, "all")
		s := payment.Plan(p, pol, payment.Facts{}, now)
		if s.Action == payment.Write && s.Outcome.Status.Actions.Capture != "" {
			t.Fatalf("acted on before the payment was authorized: %+v", s.Outcome.Status.Actions)
		}
	})
	t.Run("a crash between the capture marker and the call looks the outcome up first", func(t *testing.T) {
		p := annotate(authorizedPay("crash", v1alpha1.CaptureManual), v1alpha1.AnnotationCapture, "all")
		p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
		s := payment.Plan(p, pol, payment.Facts{}, now.Add(time.Second)) // a new reconcile: not fresh
		if s.Action != payment.Query {
			t.Fatalf("step %s (%s), want a lookup before any capture", s.Action, s.Why)
		}
		// The lookup says the capture happened: nothing is repeated.
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusSucceeded), false, now.Add(time.Second)))
		if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.Operation != nil {
			t.Fatalf("phase %s op %+v", p.Status.Phase, p.Status.Operation)
		}
	})
	t.Run("a crash before an automatic capture's call: the lookup finds the order still approved, so it is captured", func(t *testing.T) {
		// An approved payment is Processing before any capture: only the
		// provider's answer to the lookup says whether the capture happened.
		p := approved("auto-crash", v1alpha1.CaptureAutomatic)
		p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
		if s := payment.Plan(p, pol, payment.Facts{}, now.Add(time.Second)); s.Action != payment.Query {
			t.Fatalf("step %s (%s), want a lookup before any capture", s.Action, s.Why)
		}
		attempts := p.Status.Query.Attempts
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusApproved), false, now.Add(time.Second)))
		if op := p.Status.Operation; op == nil || op.Kind != v1alpha1.OperationCapture || p.Status.Query.Attempts != attempts {
			t.Fatalf("after the lookup: operation %+v, attempts %d (were %d); want the capture still due, no attempt consumed", op, p.Status.Query.Attempts, attempts)
		}
		markedAgainThenCalled(t, p, pol, now.Add(time.Second+payment.MinWait), payment.CallCapture)
	})
	t.Run("a lookup that got no answer is no lookup: the capture waits for one that is answered", func(t *testing.T) {
		// A new leader after a crash between the capture marker and the
		// call: its lookup gets no answer (a timeout, a 500), which still
		// moves query.lastTime. The capture may have taken effect: it is
		// looked up again, not repeated.
		p := annotate(authorizedPay("unanswered", v1alpha1.CaptureManual), v1alpha1.AnnotationCapture, "all")
		p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
		at := now.Add(2 * time.Second)
		if s := payment.Plan(p, pol, payment.Facts{}, at); s.Action != payment.Query {
			t.Fatalf("step %s (%s), want the lookup", s.Action, s.Why)
		}
		p = store(p, payment.AfterQuery(p, pol, fails(errTimeout), false, at))
		retry := p.Status.Operation.RetryAt.Time
		if s := payment.Plan(p, pol, payment.Facts{}, retry); s.Action != payment.Query {
			t.Fatalf("after a lookup without an answer: %s (%s), want the lookup again, not the capture", s.Action, s.Why)
		}
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusAuthorized), false, retry))
		markedAgainThenCalled(t, p, pol, retry.Add(payment.MinWait), payment.CallCapture)
	})
	t.Run("a capture whose answer was lost is looked up, then repeated with the same key", func(t *testing.T) {
		p := annotate(authorizedPay("lost", v1alpha1.CaptureManual), v1alpha1.AnnotationCapture, "all")
		p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
		p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, fails(errTimeout), now))
		if p.Status.Operation == nil || p.Status.Operation.LastAttemptAt == nil || p.Status.Phase != v1alpha1.PhaseAuthorized {
			t.Fatalf("after a lost answer: %+v", p.Status)
		}
		later := p.Status.Operation.RetryAt.Time
		if s := payment.Plan(p, pol, payment.Facts{}, later); s.Action != payment.Query {
			t.Fatalf("step %s, want the lookup", s.Action)
		}
		authorizedStill := answer(provider.StatusAuthorized)
		p = store(p, payment.AfterQuery(p, pol, authorizedStill, false, later))
		markedAgainThenCalled(t, p, pol, later.Add(payment.MinWait), payment.CallCapture)
	})
	t.Run("cancel of an authorized payment voids it", func(t *testing.T) {
		p := annotate(authorizedPay("void", v1alpha1.CaptureManual), v1alpha1.AnnotationCancel, "customer changed their mind")
		s := payment.Plan(p, pol, payment.Facts{}, now)
		if s.Action != payment.Write || s.Outcome.Status.Operation == nil || s.Outcome.Status.Operation.Kind != v1alpha1.OperationCancel {
			t.Fatalf("step %s %+v", s.Action, s.Outcome.Status.Operation)
		}
		p = store(p, s.Outcome)
		if s := payment.Plan(p, pol, fresh, now); s.Action != payment.CallCancel {
			t.Fatalf("step %s", s.Action)
		}
		p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCancel, answer(provider.StatusCanceled), now))
		if p.Status.Phase != v1alpha1.PhaseCanceled || !strings.Contains(p.Status.History[len(p.Status.History)-1].Reason, "customer changed their mind") {
			t.Fatalf("phase %s history %+v", p.Status.Phase, p.Status.History)
		}
	})
	t.Run("cancel of a payment that took money is refused, pointing at a Refund", func(t *testing.T) {
		p := created("paid")
		p = store(p, payment.AfterQuery(p, pol, answer(provider.StatusSucceeded), false, now))
		p = annotate(p, v1alpha1.AnnotationCancel, "too late")
		s := payment.Plan(p, pol, payment.Facts{}, now)
		if s.Action != payment.Write || s.Outcome.Status.Phase != v1alpha1.PhaseSucceeded || s.Outcome.Status.Actions.Cancel != "too late" {
			t.Fatalf("step %s %+v", s.Action, s.Outcome.Status)
		}
		if len(s.Outcome.Events) != 1 || !s.Outcome.Events[0].Warning || !strings.Contains(s.Outcome.Events[0].Message, "Refund") {
			t.Errorf("events %+v, want one Warning naming the refund path", s.Outcome.Events)
		}
	})
	t.Run("cancel of a payment never sent to the provider cancels it locally", func(t *testing.T) {
		p := annotate(newPay("never-sent"), v1alpha1.AnnotationCancel, "order dropped")
		s := payment.Plan(p, pol, payment.Facts{}, now)
		if s.Action != payment.Write || s.Outcome.Status.Phase != v1alpha1.PhaseCanceled || s.Outcome.Status.CreateRequestedAt != nil {
			t.Fatalf("step %s %+v", s.Action, s.Outcome.Status)
		}
	})
	t.Run("a refused automatic capture needs a human", func(t *testing.T) {
		p := approved("refused", v1alpha1.CaptureAutomatic)
		p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
		p = store(p, payment.AfterOperation(p, pol, v1alpha1.OperationCapture, fails(errRefused), now))
		if p.Status.Phase != v1alpha1.PhaseUnknown || review(p) != v1alpha1.ReasonCaptureRefused || p.Status.Operation != nil {
			t.Fatalf("phase %s review %q op %+v", p.Status.Phase, review(p), p.Status.Operation)
		}
		if s := payment.Plan(p, pol, payment.Facts{}, now.Add(time.Hour)); s.Action != payment.Nothing {
			t.Errorf("a refused capture is tried again: %s", s.Action)
		}
	})
	t.Run("a refused cancel is the operator's to read, not a review", func(t *testing.T) {
		p := annotate(authorizedFor(t, "cancel-refused", 1000), v1alpha1.AnnotationCancel, "order dropped")
		p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
		if op := p.Status.Operation; op == nil || op.Kind != v1alpha1.OperationCancel {
			t.Fatalf("operation %+v, want the cancel marked", op)
		}
		out := payment.AfterOperation(p, pol, v1alpha1.OperationCancel, fails(errRefused), now)
		p = store(p, out)
		if p.Status.Phase != v1alpha1.PhaseAuthorized || review(p) != "" || p.Status.Operation != nil {
			t.Fatalf("phase %s review %q op %+v, want Authorized as it was", p.Status.Phase, review(p), p.Status.Operation)
		}
		if r := eventReasons(out); !slices.Contains(r, "CancelRefused") {
			t.Errorf("events %v, want CancelRefused", r)
		}
	})
	t.Run("manual capture at a provider type without it fails before anything is sent", func(t *testing.T) {
		noManual := pol
		noManual.Lifecycle.ManualCapture = false
		p := newPay("unsupported")
		p.Spec.CaptureMethod = v1alpha1.CaptureManual
		s := payment.Plan(p, noManual, payment.Facts{}, now)
		if s.Action != payment.Write || s.Outcome.Status.Phase != v1alpha1.PhaseFailed || s.Outcome.Status.CreateRequestedAt != nil {
			t.Fatalf("step %s %+v", s.Action, s.Outcome.Status)
		}
	})
	t.Run("the payer's link is announced once", func(t *testing.T) {
		p := created("link")
		call := answer(provider.StatusPending)
		call.Payment.CustomerAction = &provider.CustomerAction{URL: "https://pay.example.com/a"}
		out := payment.AfterQuery(p, pol, call, false, now)
		if strings.Join(eventReasons(out), ",") != "CustomerActionRequired" || out.Events[0].Warning || !strings.Contains(out.Events[0].Message, "https://pay.example.com/a") {
			t.Fatalf("events %+v, want a Normal CustomerActionRequired with the link", out.Events)
		}
		p = store(p, out)
		if again := payment.AfterQuery(p, pol, call, false, now.Add(time.Minute)); len(again.Events) != 0 {
			t.Errorf("announced again: %v", eventReasons(again))
		}
	})
}

// TestScenarioApprovedThenCapturedOnce: a PayPal-like checkout approved by
// the payer is captured exactly once, whichever channel brings the approval.
func TestScenarioApprovedThenCapturedOnce(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle = provider.Lifecycle{Checkout: true, ManualCapture: true, AuthorizeStep: true, Cancel: true}
	pol.LifecycleKnown = true
	approvedAt := t0.Add(2 * time.Minute)
	captures := 0
	p, calls := drive(t, newPay("checkout"), pol, func(a payment.Action, _ int, now time.Time) payment.Call {
		switch {
		case a == payment.Create:
			c := answer(provider.StatusPending)
			c.Payment.CustomerAction = &provider.CustomerAction{URL: "https://paypal.example/approve"}
			return c
		case a == payment.CallCapture:
			captures++
			return answer(provider.StatusSucceeded)
		case now.Before(approvedAt):
			return answer(provider.StatusPending)
		}
		return answer(provider.StatusApproved)
	}, t0.Add(24*time.Hour))
	if p.Status.Phase != v1alpha1.PhaseSucceeded || captures != 1 {
		t.Fatalf("phase %s after %d captures and %d calls", p.Status.Phase, captures, len(calls))
	}
}

// TestScenarioApprovedThenCapturePendingIsCapturedOnce: a capture the
// provider holds as pending (PayPal's PENDING capture, for days) is the
// capture under way, not a reason to capture again; neither is the approval
// arriving again afterwards.
func TestScenarioApprovedThenCapturePendingIsCapturedOnce(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle = provider.Lifecycle{Checkout: true, ManualCapture: true, AuthorizeStep: true, Cancel: true}
	pol.LifecycleKnown = true
	approvedAt := t0.Add(2 * time.Minute)
	var capturedAt time.Time
	captures := 0
	p, calls := drive(t, newPay("checkout"), pol, func(a payment.Action, _ int, now time.Time) payment.Call {
		switch {
		case a == payment.Create:
			return answer(provider.StatusPending)
		case a == payment.CallCapture:
			captures++
			if capturedAt.IsZero() {
				capturedAt = now
			}
			return answer(provider.StatusProcessing)
		case now.Before(approvedAt):
			return answer(provider.StatusPending)
		case capturedAt.IsZero():
			return answer(provider.StatusApproved)
		case now.Before(capturedAt.Add(3 * 24 * time.Hour)):
			return answer(provider.StatusProcessing)
		}
		return answer(provider.StatusSucceeded)
	}, t0.Add(30*24*time.Hour))
	if captures != 1 {
		t.Fatalf("%d captures in %d calls, want 1", captures, len(calls))
	}
	if p.Status.Phase == v1alpha1.PhaseProcessing && p.Status.PayerApproved {
		t.Errorf("still waiting for a capture after it was made: %+v", p.Status)
	}
}

// storedByTheAPIServer round-trips p through JSON, as the API server stores
// it: metav1.Time to the second, MicroTime to the microsecond.
func storedByTheAPIServer(t *testing.T, p *v1alpha1.Payment) *v1alpha1.Payment {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	out := &v1alpha1.Payment{}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// markedAgainThenCalled: after a lookup that found the operation not done,
// the call is repeated only behind a new marker, so a crash right after it
// is looked up again rather than called a third time.
func markedAgainThenCalled(t *testing.T, p *v1alpha1.Payment, pol payment.Policy, at time.Time, call payment.Action) {
	t.Helper()
	s := payment.Plan(p, pol, payment.Facts{}, at)
	op := s.Outcome.Status.Operation
	if s.Action != payment.Write || op == nil || !op.RequestedAt.Time.Equal(at) || op.RetryAt != nil {
		t.Fatalf("after the lookup: %s (%s) operation %+v; want the operation marked again at %s", s.Action, s.Why, op, at)
	}
	p = storedByTheAPIServer(t, store(p, s.Outcome))
	if s := payment.Plan(p, pol, payment.Facts{FreshOperation: true}, at); s.Action != call {
		t.Fatalf("after the new marker: %s (%s), want %s with the same key", s.Action, s.Why, call)
	}
	next := at.Truncate(time.Second).Add(time.Second)
	if s := payment.Plan(p, pol, payment.Facts{}, next); s.Action != payment.Query {
		t.Fatalf("a crash after the new marker: %s (%s), want another lookup", s.Action, s.Why)
	}
}

// createLost is a payment whose create was sent at t0 and got no answer
// (the retry with the same key due at t0+30s), with flow applied to its spec
// and a cancel annotated before anything else was heard.
func createLost(t *testing.T, name string, pol payment.Policy, flow func(*v1alpha1.PaymentSpec)) *v1alpha1.Payment {
	t.Helper()
	p := newPay(name)
	flow(&p.Spec)
	p = store(p, planned(p, pol, t0).Outcome)
	p = store(p, payment.AfterCreate(p, pol, fails(errTimeout), t0))
	if p.Status.CreateRequestedAt == nil || payment.ProviderID(p) != "" {
		t.Fatalf("not a lost create: %+v", p.Status)
	}
	return annotate(p, v1alpha1.AnnotationCancel, "order withdrawn")
}

var (
	checkoutFlow = func(s *v1alpha1.PaymentSpec) {
		s.Checkout = &v1alpha1.CheckoutSpec{ReturnURL: "https://shop.example.com/done"}
	}
	authorizeFlow = func(s *v1alpha1.PaymentSpec) {
		s.PaymentMethod = &v1alpha1.PaymentMethodRef{Customer: "cus_1", PaymentMethod: "pm_1"}
		s.CaptureMethod = v1alpha1.CaptureManual
	}
	chargeFlow = func(s *v1alpha1.PaymentSpec) {
		s.PaymentMethod = &v1alpha1.PaymentMethodRef{Customer: "cus_1", PaymentMethod: "pm_1"}
		s.CaptureMethod = v1alpha1.CaptureAutomatic
	}
)

// TestCancelAnnotatedWhileTheCreateIsUnknownIsNotSentLocally pins the guard
// of cancelAction: a create marker without an answer means the create may
// have reached the provider (and, for a charge, taken the money), so the
// cancel is an operation to carry out there, never a local "Canceled (never
// sent to the provider)".
func TestCancelAnnotatedWhileTheCreateIsUnknownIsNotSentLocally(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle = provider.Lifecycle{Checkout: true, StoredMethod: true, ManualCapture: true, Cancel: true}
	pol.LifecycleKnown = true
	for name, flow := range map[string]func(*v1alpha1.PaymentSpec){"checkout": checkoutFlow, "charge": chargeFlow} {
		t.Run(name, func(t *testing.T) {
			p := createLost(t, "lost-"+name, pol, flow)
			s := payment.Plan(p, pol, payment.Facts{}, t0.Add(time.Second))
			st := s.Outcome.Status
			if s.Action != payment.Write || st.Phase == v1alpha1.PhaseCanceled || st.Operation == nil || st.Operation.Kind != v1alpha1.OperationCancel || st.CreateRequestedAt == nil {
				t.Fatalf("step %s: phase %s operation %+v marker %v; want the cancel stored as an operation, the payment not canceled locally", s.Action, st.Phase, st.Operation, st.CreateRequestedAt)
			}
			p = store(p, s.Outcome)
			if s := payment.Plan(p, pol, payment.Facts{}, t0.Add(time.Minute)); s.Action != payment.Create && s.Action != payment.Lookup {
				t.Fatalf("then %s (%s), want the payment found at the provider first", s.Action, s.Why)
			}
		})
	}
}

// TestCancelWhileTheCreateIsUnknown: a cancel asked while the create's
// outcome is unknown finds the payment before cancelling it. A create that
// takes no money (a checkout, an authorization) is repeated with its key:
// the provider replays its first answer, or creates a payment nobody can
// pay, and the cancel then cancels it. A charge's create is never repeated
// (it would take the money being withdrawn): the charge is looked up by
// merchant reference on the schedule until the key window ends; "not found"
// is a verdict only after that.
func TestCancelWhileTheCreateIsUnknown(t *testing.T) {
	full := provider.Lifecycle{Checkout: true, StoredMethod: true, ManualCapture: true, PartialCapture: true, Cancel: true}
	paypal := provider.Lifecycle{Checkout: true, ManualCapture: true, PartialCapture: true, AuthorizeStep: true, Cancel: true}
	base := testPolicy()
	lookupAfter := base.LookupAfter()
	foundAt := t0.Add(10 * time.Minute)
	for _, tc := range []struct {
		name      string
		lifecycle provider.Lifecycle
		flow      func(*v1alpha1.PaymentSpec)
		// created is what a (repeated) create answers; lookup what a
		// lookup by merchant reference answers at now.
		created provider.Status
		lookup  func(now time.Time) payment.Call
		phase   v1alpha1.PaymentPhase
		review  string
		creates int
		// lookups: at least min, at most max.
		minLookups, maxLookups int
		cancels                int
	}{
		{
			name: "a checkout is created again with its key, then canceled", lifecycle: full, flow: checkoutFlow,
			created: provider.StatusPending, lookup: func(time.Time) payment.Call { return fails(errNotFound) },
			phase: v1alpha1.PhaseCanceled, creates: 1, cancels: 1,
		},
		{
			name: "a PayPal checkout (no lookup) is created again with its key, then canceled", lifecycle: paypal, flow: checkoutFlow,
			created: provider.StatusPending, lookup: func(time.Time) payment.Call { return fails(errUnsupported) },
			phase: v1alpha1.PhaseCanceled, creates: 1, cancels: 1,
		},
		{
			name: "a PayPal authorize-flow checkout is created again with its key, then canceled", lifecycle: paypal,
			flow:    func(s *v1alpha1.PaymentSpec) { checkoutFlow(s); s.CaptureMethod = v1alpha1.CaptureManual },
			created: provider.StatusPending, lookup: func(time.Time) payment.Call { return fails(errUnsupported) },
			phase: v1alpha1.PhaseCanceled, creates: 1, cancels: 1,
		},
		{
			name: "a manual-capture charge of a stored method is created again with its key, then voided", lifecycle: full, flow: authorizeFlow,
			created: provider.StatusAuthorized, lookup: func(time.Time) payment.Call { return fails(errNotFound) },
			phase: v1alpha1.PhaseCanceled, creates: 1, cancels: 1,
		},
		{
			name: "a charge is never created again: looked up until found (search lag), then canceled", lifecycle: full, flow: chargeFlow,
			lookup: func(now time.Time) payment.Call {
				if now.Before(foundAt) {
					return fails(errNotFound)
				}
				return answer(provider.StatusProcessing)
			},
			phase: v1alpha1.PhaseCanceled, minLookups: 3, maxLookups: 6, cancels: 1,
		},
		{
			name: "a charge found paid is not canceled", lifecycle: full, flow: chargeFlow,
			lookup: func(time.Time) payment.Call { return answer(provider.StatusSucceeded) },
			phase:  v1alpha1.PhaseSucceeded, minLookups: 1, maxLookups: 1,
		},
		{
			name: "a charge never found: looked up on the schedule until the key window ends, then CreateOutcomeUnknown", lifecycle: full, flow: chargeFlow,
			lookup: func(time.Time) payment.Call { return fails(errNotFound) },
			phase:  v1alpha1.PhaseUnknown, review: v1alpha1.ReasonCreateOutcomeUnknown, minLookups: 10, maxLookups: 40,
		},
		{
			name: "a charge at a provider that cannot look up: CreateOutcomeUnknown, never created again", lifecycle: full, flow: chargeFlow,
			lookup: func(time.Time) payment.Call { return fails(errUnsupported) },
			phase:  v1alpha1.PhaseUnknown, review: v1alpha1.ReasonCreateOutcomeUnknown, minLookups: 1, maxLookups: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pol := base
			pol.Lifecycle, pol.LifecycleKnown = tc.lifecycle, true
			p := createLost(t, "cancel", pol, tc.flow)
			var lookups []time.Time
			p, calls := drive(t, p, pol, func(a payment.Action, _ int, now time.Time) payment.Call {
				switch a {
				case payment.Create:
					if tc.created == "" {
						t.Fatalf("a charge's create repeated at %s after a cancel", now)
					}
					return answer(tc.created)
				case payment.Lookup:
					lookups = append(lookups, now)
					return tc.lookup(now)
				case payment.CallCancel:
					return answer(provider.StatusCanceled)
				}
				return answer(provider.StatusPending)
			}, t0.Add(2*base.KeyWindow))
			if p.Status.Phase != tc.phase || review(p) != tc.review {
				t.Fatalf("phase %s review %q, want %s %q; history %s", p.Status.Phase, review(p), tc.phase, tc.review, dumpHistory(p.Status.History))
			}
			if n := count(calls, payment.Create); n != tc.creates {
				t.Errorf("%d creates, want %d", n, tc.creates)
			}
			if n := count(calls, payment.CallCancel); n != tc.cancels {
				t.Errorf("%d cancels, want %d", n, tc.cancels)
			}
			if n := len(lookups); n < tc.minLookups || n > tc.maxLookups {
				t.Errorf("%d lookups (%v), want %d to %d", n, lookups, tc.minLookups, tc.maxLookups)
			}
			if tc.review != "" && tc.maxLookups > 1 {
				if last := lookups[len(lookups)-1]; !last.Equal(t0.Add(lookupAfter)) {
					t.Errorf("parked after a lookup at %s, want it at the key window's end %s", last, t0.Add(lookupAfter))
				}
			}
		})
	}
}

// TestCancelOfAChargeFoundPaidIsRefused: the lookup of a canceled charge
// finds it paid: the cancel is refused with a Warning naming the Refund path.
func TestCancelOfAChargeFoundPaidIsRefused(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle = provider.Lifecycle{StoredMethod: true, Cancel: true}
	pol.LifecycleKnown = true
	p := createLost(t, "paid", pol, chargeFlow)
	p = store(p, payment.Plan(p, pol, payment.Facts{}, t0).Outcome)
	out := payment.AfterLookup(p, pol, answer(provider.StatusSucceeded), t0.Add(time.Minute))
	if out.Status.Phase != v1alpha1.PhaseSucceeded || out.Status.Operation != nil {
		t.Fatalf("phase %s operation %+v", out.Status.Phase, out.Status.Operation)
	}
	if e := eventOf(out.Events, "CancelRefused"); e == nil || !e.Warning || !strings.Contains(e.Message, "create a Refund") {
		t.Errorf("events %+v, want a Warning CancelRefused pointing to a Refund", out.Events)
	}
}

// TestPayerApprovalAndTheCapture: the payer's approval asks for the
// merchant's capture exactly once; only the answer to that call may send the
// payer back (fundingDeclined), never a status query of its own, and never
// while a capture is under way.
func TestPayerApprovalAndTheCapture(t *testing.T) {
	captureUnderWay := func(st *v1alpha1.PaymentStatus) {
		st.AmountToCapture = &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}
		st.PayerApproved = false
	}
	sentBack := func(o *payment.Observation) { o.PayerMustApproveAgain = true }
	processingSeen := andThen(givenPending, obsQuery(payment.ObservedProcessing, withProviderID("pay_1")))
	for _, tc := range []struct {
		applyRow
		approved, capturing bool
	}{
		{applyRow{"an approval after a processing report, before any capture, is the payer's approval", processingSeen, nil, obsWebhook(payment.ObservedApproved, "evt-approved", withProviderID("pay_1")), payment.Applied}, true, false},
		{applyRow{"a status query's pending with a failure leaves an approved payment's approval standing", givenApproved, nil, obsQuery(payment.ObservedPending, withFailure("INSTRUMENT_DECLINED", ""), withProviderID("pay_1")), payment.Stale}, true, false},
		{applyRow{"the payer sent back does not apply to a payment whose capture is under way", processingSeen, captureUnderWay, obsQuery(payment.ObservedPending, withProviderID("pay_1"), sentBack), payment.Stale}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.apply(t).Status
			if st.Phase != v1alpha1.PhaseProcessing || st.PayerApproved != tc.approved || (st.AmountToCapture != nil) != tc.capturing || st.Failure != nil || st.FundingDeclines != 0 {
				t.Fatalf("%s approved %v capturing %+v failure %+v declines %d, want Processing approved %v capturing %v",
					st.Phase, st.PayerApproved, st.AmountToCapture, st.Failure, st.FundingDeclines, tc.approved, tc.capturing)
			}
		})
	}
}
