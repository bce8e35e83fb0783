package payment_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// The payment every case in this file is about: 19.99 USD.
const (
	orderValue    = 1999
	orderCurrency = "USD"
)

var (
	// seqStart is when the given observations of a case start, one minute apart;
	// stepNow is when the observation under test arrives, well after them.
	seqStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	stepNow  = seqStart.Add(time.Hour)
)

func orderPayment() *v1alpha1.Payment {
	return &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "order-1"},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef: v1alpha1.LocalObjectReference{Name: "kukopay"},
			Amount:      v1alpha1.Amount{Value: orderValue, Currency: orderCurrency},
		},
	}
}

// Observation builders. Options change one field each so a case reads like
// the news it stands for.

type obsOpt func(*payment.Observation)

func newObservation(src v1alpha1.ObservationSource, o payment.Observed, eventID string, opts ...obsOpt) payment.Observation {
	obs := payment.Observation{Source: src, Observed: o, EventID: eventID}
	for _, opt := range opts {
		opt(&obs)
	}
	return obs
}

func obsWebhook(o payment.Observed, eventID string, opts ...obsOpt) payment.Observation {
	return newObservation(v1alpha1.SourceWebhook, o, eventID, opts...)
}

func obsBackfill(o payment.Observed, eventID string, opts ...obsOpt) payment.Observation {
	return newObservation(v1alpha1.SourceBackfill, o, eventID, opts...)
}

func obsQuery(o payment.Observed, opts ...obsOpt) payment.Observation {
	return newObservation(v1alpha1.SourceStatusQuery, o, "", opts...)
}

func obsCreated(o payment.Observed, opts ...obsOpt) payment.Observation {
	return newObservation(v1alpha1.SourceCreate, o, "", opts...)
}

func obsManual(o payment.Observed, reason string) payment.Observation {
	return newObservation(v1alpha1.SourceManual, o, "", withReason(reason))
}

func withAmount(value int64, currency string) obsOpt {
	return func(o *payment.Observation) { o.Amount = &v1alpha1.Money{Value: value, Currency: currency} }
}

// paid is a success amount equal to the spec's.
func withPaid() obsOpt { return withAmount(orderValue, orderCurrency) }

func withRefunded(value int64, currency string) obsOpt {
	return func(o *payment.Observation) { o.RefundedTotal = &v1alpha1.Money{Value: value, Currency: currency} }
}

// withLowers marks a read that found a refund taken back (RefundsUncounted).
func withLowers() obsOpt { return func(o *payment.Observation) { o.Lowers = true } }

func withFailure(code, msg string) obsOpt {
	return func(o *payment.Observation) { o.Failure = &v1alpha1.Failure{Code: code, Message: msg} }
}

func withReview(reason string) obsOpt { return func(o *payment.Observation) { o.Review = reason } }

func withLocal() obsOpt { return func(o *payment.Observation) { o.Local = true } }

func withPastExpiry() obsOpt { return func(o *payment.Observation) { o.PastExpiry = true } }

func withReason(r string) obsOpt { return func(o *payment.Observation) { o.Reason = r } }

func withRaw(s string) obsOpt { return func(o *payment.Observation) { o.Raw = s } }

func withProviderID(id string) obsOpt {
	return func(o *payment.Observation) { o.ProviderPaymentID = id }
}

func withOccurredAt(t time.Time) obsOpt { return func(o *payment.Observation) { o.OccurredAt = t } }

// Starting points, as the observations that lead there.
var (
	givenPending    = []payment.Observation{obsCreated(payment.ObservedPending, withProviderID("pay_1"))}
	givenProcessing = []payment.Observation{obsQuery(payment.ObservedProcessing)}
	givenSucceeded  = []payment.Observation{
		obsQuery(payment.ObservedProcessing),
		obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()),
	}
	givenFailed = []payment.Observation{
		obsQuery(payment.ObservedProcessing),
		obsWebhook(payment.ObservedFailed, "evt-failed", withFailure("card_declined", "insufficient funds")),
	}
	givenProviderExpired = []payment.Observation{
		obsQuery(payment.ObservedPending),
		obsWebhook(payment.ObservedExpired, "evt-expired"),
	}
	givenLocallyExpired = []payment.Observation{
		obsQuery(payment.ObservedPending),
		obsQuery(payment.ObservedExpired, withLocal()),
	}
	givenAmountMismatch = []payment.Observation{
		obsQuery(payment.ObservedProcessing),
		obsWebhook(payment.ObservedSucceeded, "evt-short", withAmount(999, orderCurrency)),
	}
	givenPartiallyRefunded = andThen(givenSucceeded, obsWebhook(payment.ObservedRefund, "evt-refund-1", withRefunded(500, orderCurrency)))
	givenRefunded          = andThen(givenSucceeded, obsWebhook(payment.ObservedRefund, "evt-refund-1", withRefunded(orderValue, orderCurrency)))
	givenConflict          = andThen(givenSucceeded, obsWebhook(payment.ObservedFailed, "evt-late-fail"))
)

func givenUnknown(reason string) []payment.Observation {
	return []payment.Observation{obsQuery(payment.ObservedProcessing), obsQuery(payment.ObservedUnknown, withReview(reason))}
}

func andThen(given []payment.Observation, more ...payment.Observation) []payment.Observation {
	return append(append([]payment.Observation(nil), given...), more...)
}

// buildPayment runs the given observations on a new payment, one minute apart.
func buildPayment(t *testing.T, given []payment.Observation) *v1alpha1.Payment {
	if t != nil {
		t.Helper()
	}
	p := orderPayment()
	for i, obs := range given {
		res := payment.Apply(p, obs, seqStart.Add(time.Duration(i)*time.Minute))
		p.Status = res.Status
	}
	return p
}

// condSummary renders the conditions as "Type=Status/Reason", sorted by type.
func condSummary(conds []metav1.Condition) []string {
	out := make([]string, 0, len(conds))
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	sort.Strings(out)
	return out
}

// eventSummary renders events as "Warning/Reason" or "Normal/Reason", in order.
func eventSummary(events []payment.Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		kind := "Normal"
		if e.Warning {
			kind = "Warning"
		}
		out = append(out, kind+"/"+e.Reason)
	}
	return out
}

func sameList(a, b []string) bool {
	return strings.Join(a, "\n") == strings.Join(b, "\n") && len(a) == len(b)
}

func historyEntry(from, to v1alpha1.PaymentPhase, src v1alpha1.ObservationSource, eventID, reason string) v1alpha1.HistoryEntry {
	return v1alpha1.HistoryEntry{From: from, To: to, Source: src, EventID: eventID, Reason: reason}
}

func phaseChange(from, to v1alpha1.PaymentPhase) *payment.Transition {
	return &payment.Transition{From: from, To: to}
}

func hasEventID(ids []string, id string) bool {
	for _, s := range ids {
		if s == id {
			return true
		}
	}
	return false
}

const (
	readySettled    = "Ready=True/Settled"
	readyInProgress = "Ready=False/InProgress"
)

func reviewing(reason string) []string {
	return []string{"NeedsReview=True/" + reason, "Ready=False/" + reason}
}

type machineCase struct {
	name    string
	given   []payment.Observation
	prepare func(*v1alpha1.PaymentStatus)
	obs     payment.Observation

	decision payment.Decision
	phase    v1alpha1.PaymentPhase
	// conds is every condition as "Type=Status/Reason", sorted by type.
	conds []string
	// history is what this observation appends; each entry's time must be stepNow.
	history []v1alpha1.HistoryEntry
	// events are "Warning/Reason" or "Normal/Reason", in order.
	events     []string
	transition *payment.Transition
	check      func(t *testing.T, before, after *v1alpha1.PaymentStatus)
}

func TestApply(t *testing.T) {
	const (
		pending    = v1alpha1.PhasePending
		processing = v1alpha1.PhaseProcessing
		succeeded  = v1alpha1.PhaseSucceeded
		failed     = v1alpha1.PhaseFailed
		expired    = v1alpha1.PhaseExpired
		unknown    = v1alpha1.PhaseUnknown
		partially  = v1alpha1.PhasePartiallyRefunded
		refundedP  = v1alpha1.PhaseRefunded

		srcCreate  = v1alpha1.SourceCreate
		srcWebhook = v1alpha1.SourceWebhook
		srcQuery   = v1alpha1.SourceStatusQuery
		srcBack    = v1alpha1.SourceBackfill
		srcManual  = v1alpha1.SourceManual
	)
	nextQuery := func(st *v1alpha1.PaymentStatus) {
		next := metav1.NewMicroTime(stepNow.Add(time.Minute))
		st.Query.NextTime = &next
		st.Query.Attempts = 6
	}

	cases := []machineCase{
		// Dedup.
		{
			name:     "same event id twice is a duplicate and changes nothing",
			given:    givenSucceeded,
			obs:      obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()),
			decision: payment.Duplicate,
			phase:    succeeded,
			conds:    []string{readySettled},
		},
		{
			name:     "the same event through backfill after its webhook is a duplicate",
			given:    givenSucceeded,
			obs:      obsBackfill(payment.ObservedSucceeded, "evt-paid", withPaid()),
			decision: payment.Duplicate,
			phase:    succeeded,
			conds:    []string{readySettled},
		},
		{
			name:     "a redelivered conflicting event is a duplicate, not a second conflict",
			given:    givenConflict,
			obs:      obsWebhook(payment.ObservedFailed, "evt-late-fail"),
			decision: payment.Duplicate,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
		},
		{
			name:     "a stale event is not remembered, so its redelivery is stale again",
			given:    andThen(givenSucceeded, obsWebhook(payment.ObservedProcessing, "evt-proc")),
			obs:      obsWebhook(payment.ObservedProcessing, "evt-proc"),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    []string{readySettled},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if hasEventID(after.RecentEventIDs, "evt-proc") {
					t.Errorf("recentEventIDs = %v, want no stale event in it", after.RecentEventIDs)
				}
			},
		},

		// Forward progress.
		{
			name:       "a new payment becomes pending and records the provider's id and status",
			obs:        obsCreated(payment.ObservedPending, withProviderID("pay_1"), withRaw("requires_payment")),
			decision:   payment.Applied,
			phase:      pending,
			conds:      []string{readyInProgress},
			history:    []v1alpha1.HistoryEntry{historyEntry("", pending, srcCreate, "", "")},
			events:     []string{"Normal/Pending"},
			transition: phaseChange("", pending),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ProviderPaymentID != "pay_1" || after.ProviderStatus != "requires_payment" {
					t.Errorf("provider id/status = %q/%q, want pay_1/requires_payment", after.ProviderPaymentID, after.ProviderStatus)
				}
				if after.AmountDisplay != "19.99 USD" {
					t.Errorf("amountDisplay = %q, want 19.99 USD", after.AmountDisplay)
				}
			},
		},
		{
			name:       "pending then processing moves forward",
			given:      givenPending,
			obs:        obsQuery(payment.ObservedProcessing),
			decision:   payment.Applied,
			phase:      processing,
			conds:      []string{readyInProgress},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, processing, srcQuery, "", "")},
			events:     []string{"Normal/Processing"},
			transition: phaseChange(pending, processing),
		},
		{
			name:       "success with the spec amount is Succeeded and Ready",
			given:      givenProcessing,
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, succeeded, srcWebhook, "evt-paid", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(processing, succeeded),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				want := &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}
				if !equality.Semantic.DeepEqual(after.AmountReceived, want) {
					t.Errorf("amountReceived = %+v, want %+v", after.AmountReceived, want)
				}
				if !sameList(after.RecentEventIDs, []string{"evt-paid"}) {
					t.Errorf("recentEventIDs = %v, want [evt-paid]", after.RecentEventIDs)
				}
			},
		},
		{
			name:       "settling clears the next query time",
			given:      givenProcessing,
			prepare:    nextQuery,
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, succeeded, srcWebhook, "evt-paid", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(processing, succeeded),
			check: func(t *testing.T, before, after *v1alpha1.PaymentStatus) {
				if after.Query.NextTime != nil {
					t.Errorf("query.nextTime = %v, want nil once settled", after.Query.NextTime)
				}
				if after.Query.Attempts != before.Query.Attempts {
					t.Errorf("query.attempts = %d, want %d kept", after.Query.Attempts, before.Query.Attempts)
				}
			},
		},
		{
			name:       "failure records the provider's failure and warns",
			given:      givenProcessing,
			obs:        obsWebhook(payment.ObservedFailed, "evt-fail", withFailure("card_declined", "insufficient funds")),
			decision:   payment.Applied,
			phase:      failed,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, failed, srcWebhook, "evt-fail", "card_declined")},
			events:     []string{"Warning/Failed"},
			transition: phaseChange(processing, failed),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				want := &v1alpha1.Failure{Code: "card_declined", Message: "insufficient funds"}
				if !equality.Semantic.DeepEqual(after.Failure, want) {
					t.Errorf("failure = %+v, want %+v", after.Failure, want)
				}
			},
		},
		{
			// Stripe: an asynchronous debit that fails goes processing →
			// requires_payment_method with last_payment_error.
			name:       "a payment method required again after processing, with a failure, is the failure",
			given:      givenProcessing,
			obs:        obsQuery(payment.ObservedPending, withFailure("insufficient_funds", "The account has insufficient funds.")),
			decision:   payment.Applied,
			phase:      failed,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, failed, srcQuery, "", "insufficient_funds")},
			events:     []string{"Warning/Failed"},
			transition: phaseChange(processing, failed),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if f := after.Failure; f == nil || f.Code != "insufficient_funds" {
					t.Errorf("failure = %+v, want insufficient_funds", f)
				}
			},
		},
		{
			name:     "pending after processing without a failure is still stale",
			given:    givenProcessing,
			obs:      obsQuery(payment.ObservedPending),
			decision: payment.Stale,
			phase:    processing,
			conds:    []string{readyInProgress},
		},
		{
			name:       "a definitive create rejection fails the payment with CreateRejected",
			obs:        obsCreated(payment.ObservedFailed, withFailure(v1alpha1.ReasonCreateRejected, "currency not enabled"), withReason(v1alpha1.ReasonCreateRejected)),
			decision:   payment.Applied,
			phase:      failed,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry("", failed, srcCreate, "", v1alpha1.ReasonCreateRejected)},
			events:     []string{"Warning/Failed"},
			transition: phaseChange("", failed),
		},
		{
			name:       "provider expiry is Expired and not a local close-out",
			given:      givenPending,
			obs:        obsWebhook(payment.ObservedExpired, "evt-exp"),
			decision:   payment.Applied,
			phase:      expired,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, expired, srcWebhook, "evt-exp", "")},
			events:     []string{"Normal/Expired"},
			transition: phaseChange(pending, expired),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ExpiredLocally {
					t.Error("expiredLocally = true for a provider expiry")
				}
			},
		},
		{
			name:       "pending may jump straight to a final phase",
			given:      givenPending,
			obs:        obsQuery(payment.ObservedSucceeded, withPaid()),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, succeeded, srcQuery, "", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(pending, succeeded),
		},
		{
			name:       "pending may jump straight to failed",
			given:      givenPending,
			obs:        obsWebhook(payment.ObservedFailed, "evt-fail"),
			decision:   payment.Applied,
			phase:      failed,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, failed, srcWebhook, "evt-fail", "")},
			events:     []string{"Warning/Failed"},
			transition: phaseChange(pending, failed),
		},
		{
			name:       "a payment never seen before may jump straight to succeeded",
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry("", succeeded, srcWebhook, "evt-paid", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange("", succeeded),
		},
		// One payment per order (SPEC §11.4): news about another provider
		// payment is a possible double charge, never a change of phase.
		{
			name:     "a success for another provider payment on a succeeded order is a duplicate-payment review",
			given:    andThen(givenPending, obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid(), withProviderID("pay_1"))),
			obs:      obsWebhook(payment.ObservedSucceeded, "evt-second", withPaid(), withProviderID("pay_other")),
			decision: payment.Conflict,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonDuplicatePayment),
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcWebhook, "evt-second", v1alpha1.ReasonDuplicatePayment+": pay_other")},
			events:   []string{"Warning/DuplicatePayment"},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				c := meta.FindStatusCondition(after.Conditions, v1alpha1.ConditionNeedsReview)
				if c == nil || !strings.Contains(c.Message, "pay_other") || !strings.Contains(c.Message, "pay_1") {
					t.Errorf("review message must name both ids: %+v", c)
				}
				if after.ProviderPaymentID != "pay_1" {
					t.Errorf("providerPaymentID = %q, want pay_1 kept", after.ProviderPaymentID)
				}
				if !hasEventID(after.RecentEventIDs, "evt-second") {
					t.Errorf("the event is not remembered, so its redelivery would raise the review again")
				}
			},
		},
		{
			name: "a third provider payment is added to the standing duplicate-payment review, never hiding the second",
			given: andThen(givenPending, obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid(), withProviderID("pay_1")),
				obsWebhook(payment.ObservedSucceeded, "evt-second", withPaid(), withProviderID("pay_other"))),
			obs:      obsWebhook(payment.ObservedFailed, "evt-third", withProviderID("pay_third"), withFailure("card_declined", "no")),
			decision: payment.Conflict,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonDuplicatePayment),
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcWebhook, "evt-third", v1alpha1.ReasonDuplicatePayment+": pay_third")},
			events:   []string{"Warning/DuplicatePayment"},
			check: func(t *testing.T, before, after *v1alpha1.PaymentStatus) {
				c := meta.FindStatusCondition(after.Conditions, v1alpha1.ConditionNeedsReview)
				for _, id := range []string{"pay_1", "pay_other", "pay_third"} {
					if c == nil || !strings.Contains(c.Message, id) {
						t.Errorf("review message must name %s: %+v", id, c)
					}
				}
				if after.Failure != nil || after.ProviderPaymentID != "pay_1" {
					t.Errorf("failure %+v, providerPaymentID %q: the third payment's failure is not this order's", after.Failure, after.ProviderPaymentID)
				}
			},
		},
		{
			name:     "a failure for another provider payment never fails the order",
			given:    givenPending,
			obs:      obsWebhook(payment.ObservedFailed, "evt-fail-b", withProviderID("pay_other"), withFailure("card_declined", "no")),
			decision: payment.Conflict,
			phase:    pending,
			conds:    reviewing(v1alpha1.ReasonDuplicatePayment),
			history:  []v1alpha1.HistoryEntry{historyEntry(pending, pending, srcWebhook, "evt-fail-b", v1alpha1.ReasonDuplicatePayment+": pay_other")},
			events:   []string{"Warning/DuplicatePayment"},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.Failure != nil {
					t.Errorf("failure recorded from another payment: %+v", after.Failure)
				}
			},
		},
		{
			name:     "a status query answer about another payment is a duplicate-payment review",
			given:    givenPending,
			obs:      obsQuery(payment.ObservedProcessing, withProviderID("pay_other")),
			decision: payment.Conflict,
			phase:    pending,
			conds:    reviewing(v1alpha1.ReasonDuplicatePayment),
			history:  []v1alpha1.HistoryEntry{historyEntry(pending, pending, srcQuery, "", v1alpha1.ReasonDuplicatePayment+": pay_other")},
			events:   []string{"Warning/DuplicatePayment"},
		},
		{
			name:       "news about the recorded payment id is applied as usual",
			given:      givenPending,
			obs:        obsQuery(payment.ObservedProcessing, withProviderID("pay_1")),
			decision:   payment.Applied,
			phase:      processing,
			conds:      []string{readyInProgress},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, processing, srcQuery, "", "")},
			events:     []string{"Normal/Processing"},
			transition: phaseChange(pending, processing),
		},

		// A non-final observation never moves a payment backwards.
		{
			name:     "processing after succeeded is stale",
			given:    givenSucceeded,
			obs:      obsQuery(payment.ObservedProcessing, withRaw("processing")),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    []string{readySettled},
			check: func(t *testing.T, before, after *v1alpha1.PaymentStatus) {
				if after.ProviderStatus != before.ProviderStatus {
					t.Errorf("providerStatus = %q, want %q: stale news is not recorded", after.ProviderStatus, before.ProviderStatus)
				}
			},
		},
		{
			name:     "pending after processing is stale",
			given:    givenProcessing,
			obs:      obsWebhook(payment.ObservedPending, "evt-pending"),
			decision: payment.Stale,
			phase:    processing,
			conds:    []string{readyInProgress},
		},
		{
			name:     "pending after failed is stale",
			given:    givenFailed,
			obs:      obsQuery(payment.ObservedPending),
			decision: payment.Stale,
			phase:    failed,
			conds:    []string{readySettled},
		},
		{
			name:     "processing after refunded is stale",
			given:    givenRefunded,
			obs:      obsBackfill(payment.ObservedProcessing, "evt-proc"),
			decision: payment.Stale,
			phase:    refundedP,
			conds:    []string{readySettled},
		},
		{
			name:     "processing again only records the provider's raw status",
			given:    givenProcessing,
			obs:      obsQuery(payment.ObservedProcessing, withRaw("processing:3ds")),
			decision: payment.Stale,
			phase:    processing,
			conds:    []string{readyInProgress},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ProviderStatus != "processing:3ds" {
					t.Errorf("providerStatus = %q, want processing:3ds", after.ProviderStatus)
				}
			},
		},
		{
			name:     "succeeded again is stale",
			given:    givenSucceeded,
			obs:      obsQuery(payment.ObservedSucceeded, withPaid(), withRaw("succeeded")),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    []string{readySettled},
		},
		{
			name:     "expired after failed is stale: the first not-paid answer stands",
			given:    givenFailed,
			obs:      obsWebhook(payment.ObservedExpired, "evt-exp"),
			decision: payment.Stale,
			phase:    failed,
			conds:    []string{readySettled},
		},

		// Amount checks.
		{
			name:       "success with mismatched amount lands in Unknown with AmountMismatch",
			given:      givenProcessing,
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-short", withAmount(999, orderCurrency)),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonAmountMismatch),
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, unknown, srcWebhook, "evt-short", v1alpha1.ReasonAmountMismatch)},
			events:     []string{"Warning/Unknown", "Warning/AmountMismatch"},
			transition: phaseChange(processing, unknown),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				want := &v1alpha1.Money{Value: 999, Currency: orderCurrency}
				if !equality.Semantic.DeepEqual(after.AmountReceived, want) {
					t.Errorf("amountReceived = %+v, want what the provider reported %+v", after.AmountReceived, want)
				}
				c := meta.FindStatusCondition(after.Conditions, v1alpha1.ConditionNeedsReview)
				if c == nil || !strings.Contains(c.Message, "9.99 USD") || !strings.Contains(c.Message, "19.99 USD") {
					t.Errorf("NeedsReview = %+v, want a message naming both amounts", c)
				}
			},
		},
		{
			name:       "success in another currency lands in Unknown with AmountMismatch",
			given:      givenProcessing,
			obs:        obsQuery(payment.ObservedSucceeded, withAmount(orderValue, "EUR")),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonAmountMismatch),
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, unknown, srcQuery, "", v1alpha1.ReasonAmountMismatch)},
			events:     []string{"Warning/Unknown", "Warning/AmountMismatch"},
			transition: phaseChange(processing, unknown),
		},
		{
			name:     "a mismatched success already under AmountMismatch review is stale",
			given:    givenAmountMismatch,
			obs:      obsQuery(payment.ObservedSucceeded, withAmount(999, orderCurrency)),
			decision: payment.Stale,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonAmountMismatch),
		},
		{
			name:     "a mismatched success after success is stale",
			given:    givenSucceeded,
			obs:      obsWebhook(payment.ObservedSucceeded, "evt-other", withAmount(1, orderCurrency)),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    []string{readySettled},
		},
		{
			name:       "a success without an amount is taken as paid",
			given:      givenProcessing,
			obs:        obsQuery(payment.ObservedSucceeded),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, succeeded, srcQuery, "", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(processing, succeeded),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.AmountReceived != nil {
					t.Errorf("amountReceived = %+v, want nil when the provider did not say", after.AmountReceived)
				}
			},
		},
		{
			name:     "a mismatched success after a failure is a conflict",
			given:    givenFailed,
			obs:      obsWebhook(payment.ObservedSucceeded, "evt-short", withAmount(999, orderCurrency)),
			decision: payment.Conflict,
			phase:    failed,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(failed, failed, srcWebhook, "evt-short", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
		},

		// Unknown leaves only on an authoritative final answer or a Manual decision.
		{
			name:       "Unknown leaves on a matching success but NeedsReview stays until an operator clears it",
			given:      givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      reviewing(v1alpha1.ReasonRetriesExhausted),
			history:    []v1alpha1.HistoryEntry{historyEntry(unknown, succeeded, srcWebhook, "evt-paid", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(unknown, succeeded),
		},
		{
			name:       "Unknown leaves on a provider failure",
			given:      givenUnknown(v1alpha1.ReasonNonRetryableQueryError),
			obs:        obsBackfill(payment.ObservedFailed, "evt-fail"),
			decision:   payment.Applied,
			phase:      failed,
			conds:      reviewing(v1alpha1.ReasonNonRetryableQueryError),
			history:    []v1alpha1.HistoryEntry{historyEntry(unknown, failed, srcBack, "evt-fail", "")},
			events:     []string{"Warning/Failed"},
			transition: phaseChange(unknown, failed),
		},
		{
			name:       "Unknown leaves on a provider expiry",
			given:      givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:        obsQuery(payment.ObservedExpired),
			decision:   payment.Applied,
			phase:      expired,
			conds:      reviewing(v1alpha1.ReasonRetriesExhausted),
			history:    []v1alpha1.HistoryEntry{historyEntry(unknown, expired, srcQuery, "", "")},
			events:     []string{"Normal/Expired"},
			transition: phaseChange(unknown, expired),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ExpiredLocally {
					t.Error("expiredLocally = true for a provider expiry")
				}
			},
		},
		{
			name:     "local close-out does not leave Unknown",
			given:    givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:      obsQuery(payment.ObservedExpired, withLocal()),
			decision: payment.Stale,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonRetriesExhausted),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ExpiredLocally {
					t.Error("expiredLocally = true, want the close-out not recorded")
				}
			},
		},
		{
			name:     "processing does not take a payment out of Unknown",
			given:    givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:      obsWebhook(payment.ObservedProcessing, "evt-proc"),
			decision: payment.Stale,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonRetriesExhausted),
		},
		{
			name:     "a refund does not take a payment out of Unknown",
			given:    givenAmountMismatch,
			obs:      obsWebhook(payment.ObservedRefund, "evt-refund", withRefunded(999, orderCurrency)),
			decision: payment.Ignored,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonAmountMismatch),
		},
		{
			name:     "the provider not knowing yet is ignored and keeps the query schedule",
			given:    givenProcessing,
			prepare:  nextQuery,
			obs:      obsQuery(payment.ObservedUnknown, withRaw("unknown")),
			decision: payment.Ignored,
			phase:    processing,
			conds:    []string{readyInProgress},
			check: func(t *testing.T, before, after *v1alpha1.PaymentStatus) {
				if !equality.Semantic.DeepEqual(before.Query, after.Query) {
					t.Errorf("query = %+v, want %+v kept", after.Query, before.Query)
				}
				if after.ProviderStatus != "unknown" {
					t.Errorf("providerStatus = %q, want unknown", after.ProviderStatus)
				}
			},
		},

		// paywarden's own reviews (Observation.Review).
		{
			name:       "retries exhausted raises RetriesExhausted",
			given:      givenProcessing,
			prepare:    nextQuery,
			obs:        obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonRetriesExhausted), withReason("6 status queries, still processing")),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonRetriesExhausted),
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, unknown, srcQuery, "", v1alpha1.ReasonRetriesExhausted)},
			events:     []string{"Warning/Unknown", "Warning/RetriesExhausted"},
			transition: phaseChange(processing, unknown),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.Query.NextTime != nil {
					t.Errorf("query.nextTime = %v, want it cleared", after.Query.NextTime)
				}
				c := meta.FindStatusCondition(after.Conditions, v1alpha1.ConditionNeedsReview)
				if c == nil || c.Message != "6 status queries, still processing" || !c.LastTransitionTime.Time.Equal(stepNow) {
					t.Errorf("NeedsReview = %+v, want the observation's reason as message, set at now", c)
				}
			},
		},
		{
			name:       "an unknown create outcome raises CreateOutcomeUnknown",
			obs:        obsCreated(payment.ObservedUnknown, withReview(v1alpha1.ReasonCreateOutcomeUnknown), withReason("idempotency key expired and no payment found by merchant reference")),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonCreateOutcomeUnknown),
			history:    []v1alpha1.HistoryEntry{historyEntry("", unknown, srcCreate, "", v1alpha1.ReasonCreateOutcomeUnknown)},
			events:     []string{"Warning/Unknown", "Warning/CreateOutcomeUnknown"},
			transition: phaseChange("", unknown),
		},
		{
			name:       "a non-retryable query error raises NonRetryableQueryError",
			given:      givenPending,
			obs:        obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonNonRetryableQueryError), withReason("404 for a payment paywarden created")),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonNonRetryableQueryError),
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, unknown, srcQuery, "", v1alpha1.ReasonNonRetryableQueryError)},
			events:     []string{"Warning/Unknown", "Warning/NonRetryableQueryError"},
			transition: phaseChange(pending, unknown),
		},
		{
			name:     "the same review reason again is stale",
			given:    givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:      obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonRetriesExhausted)),
			decision: payment.Stale,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonRetriesExhausted),
		},
		{
			name:     "a new review reason in Unknown replaces the old one without a transition",
			given:    givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:      obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonNonRetryableQueryError), withReason("404 for a payment paywarden created")),
			decision: payment.Applied,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonNonRetryableQueryError),
			history:  []v1alpha1.HistoryEntry{historyEntry(unknown, unknown, srcQuery, "", v1alpha1.ReasonNonRetryableQueryError)},
			events:   []string{"Warning/NonRetryableQueryError"},
		},
		{
			name:     "a review observation on a settled payment is stale",
			given:    givenSucceeded,
			obs:      obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonRetriesExhausted)),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    []string{readySettled},
		},

		// A reason paywarden raises itself never hides what the provider did.
		{
			name:     "retries exhausted does not replace an amount mismatch under review",
			given:    givenAmountMismatch,
			obs:      obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonRetriesExhausted)),
			decision: payment.Stale,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonAmountMismatch),
		},
		{
			name:     "provider unreachable does not replace a late success under review",
			given:    andThen(givenLocallyExpired, obsWebhook(payment.ObservedSucceeded, "evt-late", withPaid())),
			obs:      obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonProviderUnreachable)),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonLateSuccess),
		},
		{
			name:       "retries exhausted on a pending payment under duplicate-payment review parks it in Unknown and keeps the reason",
			given:      andThen(givenPending, obsWebhook(payment.ObservedSucceeded, "evt-b", withPaid(), withProviderID("pay_other"))),
			obs:        obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonRetriesExhausted)),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonDuplicatePayment),
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, unknown, srcQuery, "", v1alpha1.ReasonRetriesExhausted)},
			events:     []string{"Warning/Unknown"},
			transition: phaseChange(pending, unknown),
		},
		{
			name:     "create outcome unknown does not replace a conflicting status under review",
			given:    givenConflict,
			obs:      obsCreated(payment.ObservedUnknown, withReview(v1alpha1.ReasonCreateOutcomeUnknown)),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
		},

		// Final phases do not flip.
		{
			name:     "failed after succeeded is a conflict and needs review",
			given:    givenSucceeded,
			obs:      obsWebhook(payment.ObservedFailed, "evt-fail", withFailure("card_declined", "")),
			decision: payment.Conflict,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcWebhook, "evt-fail", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.Failure != nil {
					t.Errorf("failure = %+v, want none recorded on a kept success", after.Failure)
				}
				if !hasEventID(after.RecentEventIDs, "evt-fail") || after.LastEvent == nil || after.LastEvent.ID != "evt-fail" {
					t.Errorf("recentEventIDs = %v, lastEvent = %+v: want the conflicting event remembered", after.RecentEventIDs, after.LastEvent)
				}
			},
		},
		{
			name:     "succeeded after failed is a conflict and needs review",
			given:    givenFailed,
			obs:      obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()),
			decision: payment.Conflict,
			phase:    failed,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(failed, failed, srcWebhook, "evt-paid", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.AmountReceived != nil {
					t.Errorf("amountReceived = %+v, want none on a kept failure", after.AmountReceived)
				}
			},
		},
		{
			name:     "succeeded after a provider expiry is a conflict",
			given:    givenProviderExpired,
			obs:      obsQuery(payment.ObservedSucceeded, withPaid()),
			decision: payment.Conflict,
			phase:    expired,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(expired, expired, srcQuery, "", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
		},
		{
			name:     "expired after succeeded is a conflict",
			given:    givenSucceeded,
			obs:      obsBackfill(payment.ObservedExpired, "evt-exp"),
			decision: payment.Conflict,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcBack, "evt-exp", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
		},
		{
			name:     "failed after refunded is a conflict",
			given:    givenRefunded,
			obs:      obsWebhook(payment.ObservedFailed, "evt-fail"),
			decision: payment.Conflict,
			phase:    refundedP,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(refundedP, refundedP, srcWebhook, "evt-fail", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
		},
		{
			name:     "a repeated conflict from status queries is stale while under review",
			given:    andThen(givenSucceeded, obsQuery(payment.ObservedFailed)),
			obs:      obsQuery(payment.ObservedFailed),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
		},
		{
			name:     "another conflicting event is recorded even while under review",
			given:    givenConflict,
			obs:      obsWebhook(payment.ObservedFailed, "evt-later-fail"),
			decision: payment.Conflict,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcWebhook, "evt-later-fail", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
		},

		// Local close-out (§2.5) and late success.
		{
			name:       "unpaid close-out of a pending payment is Expired with UnpaidTimeout",
			given:      givenPending,
			obs:        obsQuery(payment.ObservedExpired, withLocal(), withRaw("pending")),
			decision:   payment.Applied,
			phase:      expired,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(pending, expired, srcQuery, "", v1alpha1.ReasonUnpaidTimeout)},
			events:     []string{"Normal/Expired"},
			transition: phaseChange(pending, expired),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if !after.ExpiredLocally {
					t.Error("expiredLocally = false for a local close-out")
				}
			},
		},
		{
			name:       "pending past expiry closes the payment out as a local Expired",
			given:      givenProcessing,
			obs:        obsQuery(payment.ObservedPending, withRaw("pending"), withPastExpiry()),
			decision:   payment.Applied,
			phase:      expired,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, expired, srcQuery, "", v1alpha1.ReasonUnpaidTimeout)},
			events:     []string{"Normal/Expired"},
			transition: phaseChange(processing, expired),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if !after.ExpiredLocally {
					t.Error("expiredLocally = false for a close-out")
				}
			},
		},
		{
			name:     "processing past expiry is not closed out: money may be moving",
			given:    givenProcessing,
			obs:      obsQuery(payment.ObservedProcessing, withPastExpiry()),
			decision: payment.Stale,
			phase:    processing,
			conds:    []string{readyInProgress},
		},
		{
			name:     "pending past expiry does not take a payment out of Unknown",
			given:    givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:      obsQuery(payment.ObservedPending, withPastExpiry()),
			decision: payment.Stale,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonRetriesExhausted),
		},
		{
			name:       "locally expired then succeeded is LateSuccess",
			given:      givenLocallyExpired,
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-late", withPaid()),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      reviewing(v1alpha1.ReasonLateSuccess),
			history:    []v1alpha1.HistoryEntry{historyEntry(expired, succeeded, srcWebhook, "evt-late", v1alpha1.ReasonLateSuccess)},
			events:     []string{"Normal/Succeeded", "Warning/LateSuccess"},
			transition: phaseChange(expired, succeeded),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ExpiredLocally {
					t.Error("expiredLocally = true after the payment succeeded")
				}
				if after.AmountReceived == nil || after.AmountReceived.Value != orderValue {
					t.Errorf("amountReceived = %+v, want the paid amount", after.AmountReceived)
				}
			},
		},
		{
			name:       "locally expired then a mismatched success lands in Unknown with AmountMismatch",
			given:      givenLocallyExpired,
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-late-short", withAmount(999, orderCurrency)),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonAmountMismatch),
			history:    []v1alpha1.HistoryEntry{historyEntry(expired, unknown, srcWebhook, "evt-late-short", v1alpha1.ReasonAmountMismatch)},
			events:     []string{"Warning/Unknown", "Warning/AmountMismatch"},
			transition: phaseChange(expired, unknown),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ExpiredLocally {
					t.Error("expiredLocally = true on a payment that is no longer Expired")
				}
			},
		},
		{
			name:     "local close-out of a succeeded payment is stale, not a conflict",
			given:    givenSucceeded,
			obs:      obsQuery(payment.ObservedExpired, withLocal()),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    []string{readySettled},
		},
		{
			name:     "local close-out after a provider failure is stale",
			given:    givenFailed,
			obs:      obsQuery(payment.ObservedExpired, withLocal()),
			decision: payment.Stale,
			phase:    failed,
			conds:    []string{readySettled},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ExpiredLocally {
					t.Error("expiredLocally = true on a failed payment")
				}
			},
		},
		{
			name:     "succeeded after an operator's expiry is a conflict, not LateSuccess",
			given:    andThen(givenProcessing, obsManual(payment.ObservedExpired, "customer abandoned the order")),
			obs:      obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()),
			decision: payment.Conflict,
			phase:    expired,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(expired, expired, srcWebhook, "evt-paid", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
		},

		// Refunds.
		{
			name:       "refund below amount is PartiallyRefunded",
			given:      givenSucceeded,
			obs:        obsWebhook(payment.ObservedRefund, "evt-refund", withRefunded(500, orderCurrency)),
			decision:   payment.Applied,
			phase:      partially,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(succeeded, partially, srcWebhook, "evt-refund", "refunded 5.00 USD")},
			events:     []string{"Normal/PartiallyRefunded"},
			transition: phaseChange(succeeded, partially),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				want := &v1alpha1.Money{Value: 500, Currency: orderCurrency}
				if !equality.Semantic.DeepEqual(after.AmountRefunded, want) {
					t.Errorf("amountRefunded = %+v, want %+v", after.AmountRefunded, want)
				}
			},
		},
		{
			name:       "refund equal to amount is Refunded",
			given:      givenSucceeded,
			obs:        obsWebhook(payment.ObservedRefund, "evt-refund", withRefunded(orderValue, orderCurrency)),
			decision:   payment.Applied,
			phase:      refundedP,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(succeeded, refundedP, srcWebhook, "evt-refund", "refunded 19.99 USD")},
			events:     []string{"Normal/Refunded"},
			transition: phaseChange(succeeded, refundedP),
		},
		{
			name:       "a refunded total completing the amount moves PartiallyRefunded to Refunded",
			given:      givenPartiallyRefunded,
			obs:        obsWebhook(payment.ObservedRefund, "evt-refund-2", withRefunded(orderValue, orderCurrency)),
			decision:   payment.Applied,
			phase:      refundedP,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(partially, refundedP, srcWebhook, "evt-refund-2", "refunded 19.99 USD")},
			events:     []string{"Normal/Refunded"},
			transition: phaseChange(partially, refundedP),
		},
		{
			name:     "a larger partial refund is applied with an event and keeps the phase",
			given:    givenPartiallyRefunded,
			obs:      obsQuery(payment.ObservedRefund, withRefunded(800, orderCurrency)),
			decision: payment.Applied,
			phase:    partially,
			conds:    []string{readySettled},
			history:  []v1alpha1.HistoryEntry{historyEntry(partially, partially, srcQuery, "", "refunded 8.00 USD")},
			events:   []string{"Normal/PartiallyRefunded"},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.AmountRefunded == nil || after.AmountRefunded.Value != 800 {
					t.Errorf("amountRefunded = %+v, want 800", after.AmountRefunded)
				}
			},
		},
		{
			name:     "a refunded total not above the recorded one is stale",
			given:    givenPartiallyRefunded,
			obs:      obsQuery(payment.ObservedRefund, withRefunded(500, orderCurrency)),
			decision: payment.Stale,
			phase:    partially,
			conds:    []string{readySettled},
		},
		{
			name:     "refund before success is ignored",
			given:    givenProcessing,
			obs:      obsWebhook(payment.ObservedRefund, "evt-refund", withRefunded(500, orderCurrency)),
			decision: payment.Ignored,
			phase:    processing,
			conds:    []string{readyInProgress},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.AmountRefunded != nil || hasEventID(after.RecentEventIDs, "evt-refund") {
					t.Errorf("amountRefunded = %+v, recentEventIDs = %v: an ignored refund must leave no trace", after.AmountRefunded, after.RecentEventIDs)
				}
			},
		},
		{
			name:     "refund after a failure is ignored",
			given:    givenFailed,
			obs:      obsWebhook(payment.ObservedRefund, "evt-refund", withRefunded(500, orderCurrency)),
			decision: payment.Ignored,
			phase:    failed,
			conds:    []string{readySettled},
		},
		{
			name:     "refund with a zero total is ignored",
			given:    givenSucceeded,
			obs:      obsWebhook(payment.ObservedRefund, "evt-refund-0", withRefunded(0, orderCurrency)),
			decision: payment.Ignored,
			phase:    succeeded,
			conds:    []string{readySettled},
		},
		{
			name:     "success without an amount does not settle an amount mismatch",
			given:    givenAmountMismatch,
			obs:      obsQuery(payment.ObservedSucceeded),
			decision: payment.Stale,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonAmountMismatch),
		},
		{
			name:       "a success for the right amount settles a payment under AmountMismatch review",
			given:      givenAmountMismatch,
			obs:        obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      reviewing(v1alpha1.ReasonAmountMismatch),
			history:    []v1alpha1.HistoryEntry{historyEntry(unknown, succeeded, srcWebhook, "evt-paid", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(unknown, succeeded),
		},
		{
			name:       "success without an amount settles a payment under review for another reason",
			given:      givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:        obsQuery(payment.ObservedSucceeded),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      reviewing(v1alpha1.ReasonRetriesExhausted),
			history:    []v1alpha1.HistoryEntry{historyEntry(unknown, succeeded, srcQuery, "", "")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(unknown, succeeded),
		},
		{
			name:       "a review raised without a reason still explains itself",
			given:      givenProcessing,
			obs:        obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonRetriesExhausted)),
			decision:   payment.Applied,
			phase:      unknown,
			conds:      reviewing(v1alpha1.ReasonRetriesExhausted),
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, unknown, srcQuery, "", v1alpha1.ReasonRetriesExhausted)},
			events:     []string{"Warning/Unknown", "Warning/RetriesExhausted"},
			transition: phaseChange(processing, unknown),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				for _, c := range after.Conditions {
					if c.Type == v1alpha1.ConditionNeedsReview && c.Message == "" {
						t.Errorf("NeedsReview has no message")
					}
				}
			},
		},
		{
			name:     "refund without a refunded total is ignored",
			given:    givenSucceeded,
			obs:      obsWebhook(payment.ObservedRefund, "evt-refund"),
			decision: payment.Ignored,
			phase:    succeeded,
			conds:    []string{readySettled},
		},
		{
			name:     "refund in another currency is a conflict",
			given:    givenSucceeded,
			obs:      obsWebhook(payment.ObservedRefund, "evt-refund", withRefunded(500, "EUR")),
			decision: payment.Conflict,
			phase:    succeeded,
			conds:    reviewing(v1alpha1.ReasonConflictingStatus),
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcWebhook, "evt-refund", v1alpha1.ReasonConflictingStatus)},
			events:   []string{"Warning/ConflictingStatus"},
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.AmountRefunded != nil {
					t.Errorf("amountRefunded = %+v, want none recorded", after.AmountRefunded)
				}
			},
		},

		// Disputes.
		{
			name:     "dispute sets Disputed and keeps phase",
			given:    givenSucceeded,
			obs:      obsWebhook(payment.ObservedDispute, "evt-dispute"),
			decision: payment.Applied,
			phase:    succeeded,
			conds:    []string{"Disputed=True/DisputeOpened", readySettled},
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcWebhook, "evt-dispute", v1alpha1.ReasonDisputeOpened)},
			events:   []string{"Warning/DisputeOpened"},
		},
		{
			name:     "dispute on a refunded payment keeps phase",
			given:    givenPartiallyRefunded,
			obs:      obsBackfill(payment.ObservedDispute, "evt-dispute"),
			decision: payment.Applied,
			phase:    partially,
			conds:    []string{"Disputed=True/DisputeOpened", readySettled},
			history:  []v1alpha1.HistoryEntry{historyEntry(partially, partially, srcBack, "evt-dispute", v1alpha1.ReasonDisputeOpened)},
			events:   []string{"Warning/DisputeOpened"},
		},
		{
			name:     "a second dispute is stale",
			given:    andThen(givenSucceeded, obsWebhook(payment.ObservedDispute, "evt-dispute-1")),
			obs:      obsWebhook(payment.ObservedDispute, "evt-dispute-2"),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    []string{"Disputed=True/DisputeOpened", readySettled},
		},

		// Dispute outcomes.
		{
			name:     "a dispute won clears Disputed and needs no review",
			given:    andThen(givenSucceeded, obsWebhook(payment.ObservedDispute, "evt-dispute")),
			obs:      withDispute(obsWebhook(payment.ObservedDispute, "evt-dispute-won"), provider.DisputeWon),
			decision: payment.Applied,
			phase:    succeeded,
			conds:    []string{"Disputed=False/DisputeWon", readySettled},
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcWebhook, "evt-dispute-won", v1alpha1.ReasonDisputeWon)},
			events:   []string{"Normal/DisputeWon"},
		},
		{
			name:     "a dispute lost asks for a review and keeps the phase",
			given:    andThen(givenSucceeded, obsWebhook(payment.ObservedDispute, "evt-dispute")),
			obs:      withDispute(obsWebhook(payment.ObservedDispute, "evt-dispute-lost"), provider.DisputeLost),
			decision: payment.Applied,
			phase:    succeeded,
			conds:    append([]string{"Disputed=False/DisputeLost"}, reviewing(v1alpha1.ReasonDisputeLost)...),
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcWebhook, "evt-dispute-lost", v1alpha1.ReasonDisputeLost)},
			events:   []string{"Warning/DisputeLost"},
		},
		{
			name:     "the outcome again is stale",
			given:    andThen(givenSucceeded, withDispute(obsWebhook(payment.ObservedDispute, "evt-dispute-lost"), provider.DisputeLost)),
			obs:      withDispute(obsBackfill(payment.ObservedDispute, "evt-dispute-lost-2"), provider.DisputeLost),
			decision: payment.Stale,
			phase:    succeeded,
			conds:    append([]string{"Disputed=False/DisputeLost"}, reviewing(v1alpha1.ReasonDisputeLost)...),
		},
		{
			name:     "a dispute outcome for a payment that took no money is ignored",
			given:    givenFailed,
			obs:      withDispute(obsWebhook(payment.ObservedDispute, "evt-dispute-lost"), provider.DisputeLost),
			decision: payment.Ignored,
			phase:    failed,
			conds:    []string{readySettled},
		},

		// Manual decisions.
		{
			name:       "manual settles Unknown and clears NeedsReview",
			given:      givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:        obsManual(payment.ObservedSucceeded, "paid by bank transfer, checked the ledger"),
			decision:   payment.Applied,
			phase:      succeeded,
			conds:      []string{"NeedsReview=False/Reviewed", readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(unknown, succeeded, srcManual, "", "ResolvedManually: paid by bank transfer, checked the ledger")},
			events:     []string{"Normal/Succeeded"},
			transition: phaseChange(unknown, succeeded),
		},
		{
			name:       "manual settles a processing payment",
			given:      givenProcessing,
			obs:        obsManual(payment.ObservedFailed, "customer cancelled by phone"),
			decision:   payment.Applied,
			phase:      failed,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, failed, srcManual, "", "ResolvedManually: customer cancelled by phone")},
			events:     []string{"Warning/Failed"},
			transition: phaseChange(processing, failed),
		},
		{
			name:       "manual expiry is not a local close-out",
			given:      givenProcessing,
			obs:        obsManual(payment.ObservedExpired, "customer abandoned the order"),
			decision:   payment.Applied,
			phase:      expired,
			conds:      []string{readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(processing, expired, srcManual, "", "ResolvedManually: customer abandoned the order")},
			events:     []string{"Normal/Expired"},
			transition: phaseChange(processing, expired),
			check: func(t *testing.T, _, after *v1alpha1.PaymentStatus) {
				if after.ExpiredLocally {
					t.Error("expiredLocally = true for an operator's decision")
				}
			},
		},
		{
			name:     "manual on a settled payment without review is ignored",
			given:    givenSucceeded,
			obs:      obsManual(payment.ObservedFailed, "oops"),
			decision: payment.Ignored,
			phase:    succeeded,
			conds:    []string{readySettled},
		},
		{
			name:       "manual resolves a conflict under review",
			given:      givenConflict,
			obs:        obsManual(payment.ObservedFailed, "provider support confirmed the reversal"),
			decision:   payment.Applied,
			phase:      failed,
			conds:      []string{"NeedsReview=False/Reviewed", readySettled},
			history:    []v1alpha1.HistoryEntry{historyEntry(succeeded, failed, srcManual, "", "ResolvedManually: provider support confirmed the reversal")},
			events:     []string{"Warning/Failed"},
			transition: phaseChange(succeeded, failed),
		},
		{
			name:     "manual confirming the phase under review clears the review with an event",
			given:    givenConflict,
			obs:      obsManual(payment.ObservedSucceeded, "the failure event was sent in error"),
			decision: payment.Applied,
			phase:    succeeded,
			conds:    []string{"NeedsReview=False/Reviewed", readySettled},
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcManual, "", "ResolvedManually: the failure event was sent in error")},
			events:   []string{"Normal/Succeeded"},
		},
		{
			name:     "manual after LateSuccess clears the review",
			given:    andThen(givenLocallyExpired, obsWebhook(payment.ObservedSucceeded, "evt-late", withPaid())),
			obs:      obsManual(payment.ObservedSucceeded, "order shipped after all"),
			decision: payment.Applied,
			phase:    succeeded,
			conds:    []string{"NeedsReview=False/Reviewed", readySettled},
			history:  []v1alpha1.HistoryEntry{historyEntry(succeeded, succeeded, srcManual, "", "ResolvedManually: order shipped after all")},
			events:   []string{"Normal/Succeeded"},
		},
		{
			name:     "manual must name a final phase",
			given:    givenUnknown(v1alpha1.ReasonRetriesExhausted),
			obs:      obsManual(payment.ObservedPending, "try again"),
			decision: payment.Ignored,
			phase:    unknown,
			conds:    reviewing(v1alpha1.ReasonRetriesExhausted),
		},

		// Anything else.
		{
			name:     "an unsupported observation is ignored",
			given:    givenProcessing,
			obs:      obsQuery(payment.Observed("Chargeback")),
			decision: payment.Ignored,
			phase:    processing,
			conds:    []string{readyInProgress},
		},
	}

	// A reason paywarden raises itself never reopens a settled payment.
	for _, settled := range []struct {
		name  string
		given []payment.Observation
		phase v1alpha1.PaymentPhase
	}{
		{"failed", givenFailed, failed},
		{"expired by the provider", givenProviderExpired, expired},
		{"expired locally", givenLocallyExpired, expired},
		{"partially refunded", givenPartiallyRefunded, partially},
		{"refunded", givenRefunded, refundedP},
	} {
		for _, reason := range []string{v1alpha1.ReasonRetriesExhausted, v1alpha1.ReasonNonRetryableQueryError, v1alpha1.ReasonCreateOutcomeUnknown, v1alpha1.ReasonProviderUnreachable} {
			cases = append(cases, machineCase{
				name:     fmt.Sprintf("a paywarden-raised %s on a %s payment is stale", reason, settled.name),
				given:    settled.given,
				obs:      obsQuery(payment.ObservedUnknown, withReview(reason)),
				decision: payment.Stale,
				phase:    settled.phase,
				conds:    []string{readySettled},
			})
		}
	}

	runMachineCases(t, cases)
}

// runMachineCases applies each case's observation to its starting point and
// checks every expectation.
func runMachineCases(t *testing.T, cases []machineCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := buildPayment(t, tc.given)
			if tc.prepare != nil {
				tc.prepare(&p.Status)
			}
			before := p.Status.DeepCopy()

			res := payment.Apply(p, tc.obs, stepNow)

			if !equality.Semantic.DeepEqual(before, &p.Status) {
				t.Fatalf("Apply changed its input:\n%s", diff.Diff(before, &p.Status))
			}
			after := &res.Status
			if res.Decision != tc.decision {
				t.Errorf("decision = %s (%s), want %s", res.Decision, res.Reason, tc.decision)
			}
			if res.Decision != payment.Applied && res.Reason == "" {
				t.Errorf("decision %s without a reason", res.Decision)
			}
			if after.Phase != tc.phase {
				t.Errorf("phase = %q, want %q", after.Phase, tc.phase)
			}
			if got := condSummary(after.Conditions); !sameList(got, tc.conds) {
				t.Errorf("conditions = %v, want %v", got, tc.conds)
			}
			if len(after.History) < len(before.History) {
				t.Fatalf("history shrank from %d to %d entries", len(before.History), len(after.History))
			}
			appended := after.History[len(before.History):]
			want := make([]v1alpha1.HistoryEntry, len(tc.history))
			for i, h := range tc.history {
				h.Time = metav1.NewTime(stepNow)
				want[i] = h
			}
			if !equality.Semantic.DeepEqual(appended, want) {
				t.Errorf("history appended:\n%s", diff.Diff(want, appended))
			}
			if got := eventSummary(res.Events); !sameList(got, tc.events) {
				t.Errorf("events = %v, want %v", got, tc.events)
			}
			for _, e := range res.Events {
				if e.Message == "" {
					t.Errorf("event %s without a message", e.Reason)
				}
			}
			if !equality.Semantic.DeepEqual(res.Transition, tc.transition) {
				t.Errorf("transition = %+v, want %+v", res.Transition, tc.transition)
			}
			if res.Decision == payment.Duplicate && !equality.Semantic.DeepEqual(before, after) {
				t.Errorf("a duplicate changed the status:\n%s", diff.Diff(before, after))
			}
			if tc.check != nil {
				tc.check(t, before, after)
			}
		})
	}
}

// TestApplyEveryChangeIsHistoryAndEvents pins SPEC §2.1: every applied change
// appends history and emits an Event, and a decision that applies nothing
// leaves history, events and the phase alone.
func TestApplyEveryChangeIsHistoryAndEvents(t *testing.T) {
	seqs := map[string][]payment.Observation{
		"happy path":      andThen(givenPending, obsQuery(payment.ObservedProcessing), obsWebhook(payment.ObservedSucceeded, "e1", withPaid())),
		"refunds":         andThen(givenSucceeded, obsQuery(payment.ObservedRefund, withRefunded(100, orderCurrency)), obsQuery(payment.ObservedRefund, withRefunded(200, orderCurrency)), obsQuery(payment.ObservedRefund, withRefunded(orderValue, orderCurrency))),
		"review and back": andThen(givenUnknown(v1alpha1.ReasonRetriesExhausted), obsQuery(payment.ObservedUnknown, withReview(v1alpha1.ReasonNonRetryableQueryError)), obsManual(payment.ObservedFailed, "checked")),
		"conflicts":       andThen(givenConflict, obsWebhook(payment.ObservedExpired, "e2"), obsManual(payment.ObservedSucceeded, "checked"), obsWebhook(payment.ObservedDispute, "e3")),
	}
	for name, seq := range seqs {
		t.Run(name, func(t *testing.T) {
			p := orderPayment()
			for i, obs := range seq {
				res := payment.Apply(p, obs, seqStart.Add(time.Duration(i)*time.Minute))
				changed := res.Decision == payment.Applied || res.Decision == payment.Conflict
				grew := len(res.Status.History) - len(p.Status.History)
				switch {
				case changed && (grew != 1 || len(res.Events) == 0):
					t.Errorf("step %d (%s %s): %s appended %d history entries and %d events, want 1 and at least 1",
						i, obs.Source, obs.Observed, res.Decision, grew, len(res.Events))
				case !changed && (grew != 0 || len(res.Events) != 0 || res.Status.Phase != p.Status.Phase):
					t.Errorf("step %d (%s %s): %s appended %d history entries, %d events and moved %q to %q, want nothing",
						i, obs.Source, obs.Observed, res.Decision, grew, len(res.Events), p.Status.Phase, res.Status.Phase)
				}
				p.Status = res.Status
			}
		})
	}
}

func TestApplyHistoryIsBounded(t *testing.T) {
	p := buildPayment(t, givenSucceeded)
	// Refunds of one cent more each time: every one is an applied change.
	const refunds = 30
	for i := 1; i <= refunds; i++ {
		obs := obsWebhook(payment.ObservedRefund, fmt.Sprintf("evt-refund-%d", i), withRefunded(int64(i), orderCurrency))
		res := payment.Apply(p, obs, stepNow.Add(time.Duration(i)*time.Second))
		if res.Decision != payment.Applied {
			t.Fatalf("refund %d: decision %s (%s), want Applied", i, res.Decision, res.Reason)
		}
		p.Status = res.Status
		if n := len(p.Status.History); n > payment.MaxHistory {
			t.Fatalf("refund %d: %d history entries, want at most %d", i, n, payment.MaxHistory)
		}
	}
	total := len(givenSucceeded) + refunds
	if got := len(p.Status.History); got != payment.MaxHistory {
		t.Fatalf("history has %d entries, want %d", got, payment.MaxHistory)
	}
	if got, want := p.Status.HistoryDropped, int32(total-payment.MaxHistory); got != want {
		t.Errorf("historyDropped = %d, want %d", got, want)
	}
	if first, last := p.Status.History[0], p.Status.History[payment.MaxHistory-1]; first.EventID != "evt-refund-11" || last.EventID != "evt-refund-30" {
		t.Errorf("history keeps %s..%s, want the newest: evt-refund-11..evt-refund-30", first.EventID, last.EventID)
	}
}

func TestApplyRecentEventIDsAreBounded(t *testing.T) {
	p := buildPayment(t, givenSucceeded)
	const refunds = 20
	var ids []string
	for i := 1; i <= refunds; i++ {
		id := fmt.Sprintf("evt-refund-%d", i)
		ids = append(ids, id)
		res := payment.Apply(p, obsWebhook(payment.ObservedRefund, id, withRefunded(int64(i), orderCurrency)), stepNow)
		p.Status = res.Status
		if n := len(p.Status.RecentEventIDs); n > payment.MaxRecentEventIDs {
			t.Fatalf("refund %d: %d recent event ids, want at most %d", i, n, payment.MaxRecentEventIDs)
		}
	}
	if want := ids[refunds-payment.MaxRecentEventIDs:]; !sameList(p.Status.RecentEventIDs, want) {
		t.Errorf("recentEventIDs = %v, want the newest %v", p.Status.RecentEventIDs, want)
	}
	if res := payment.Apply(p, obsWebhook(payment.ObservedRefund, "evt-refund-20", withRefunded(20, orderCurrency)), stepNow); res.Decision != payment.Duplicate {
		t.Errorf("a recent event again: decision %s, want Duplicate", res.Decision)
	}
	// An event that fell out of the window is no longer known by id, but the
	// state machine still does not apply it twice: the refunded total only grows.
	if res := payment.Apply(p, obsWebhook(payment.ObservedRefund, "evt-refund-1", withRefunded(1, orderCurrency)), stepNow); res.Decision != payment.Stale {
		t.Errorf("an old refund again: decision %s, want Stale", res.Decision)
	}
}

func TestApplyHistoryTimeNeverGoesBackwards(t *testing.T) {
	p := buildPayment(t, givenProcessing)
	last := p.Status.History[len(p.Status.History)-1].Time.Time

	// A writer whose clock is ten minutes behind.
	res := payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()), last.Add(-10*time.Minute))
	got := res.Status.History[len(res.Status.History)-1].Time.Time
	if !got.Equal(last) {
		t.Errorf("history time from a clock behind = %s, want %s (the previous entry's)", got, last)
	}

	// A writer whose clock is ahead keeps its own time.
	later := last.Add(10 * time.Minute)
	res = payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid()), later)
	if got := res.Status.History[len(res.Status.History)-1].Time.Time; !got.Equal(later) {
		t.Errorf("history time = %s, want now %s", got, later)
	}
}

func TestApplyReadyCondition(t *testing.T) {
	cases := []struct {
		name   string
		given  []payment.Observation
		status metav1.ConditionStatus
		reason string
	}{
		{"a new payment is not ready", givenPending, metav1.ConditionFalse, v1alpha1.ReasonInProgress},
		{"a processing payment is not ready", givenProcessing, metav1.ConditionFalse, v1alpha1.ReasonInProgress},
		{"a succeeded payment is ready", givenSucceeded, metav1.ConditionTrue, v1alpha1.ReasonSettled},
		{"a failed payment is ready", givenFailed, metav1.ConditionTrue, v1alpha1.ReasonSettled},
		{"an expired payment is ready", givenProviderExpired, metav1.ConditionTrue, v1alpha1.ReasonSettled},
		{"a locally expired payment is ready", givenLocallyExpired, metav1.ConditionTrue, v1alpha1.ReasonSettled},
		{"a partially refunded payment is ready", givenPartiallyRefunded, metav1.ConditionTrue, v1alpha1.ReasonSettled},
		{"a refunded payment is ready", givenRefunded, metav1.ConditionTrue, v1alpha1.ReasonSettled},
		{"an Unknown payment is not ready and names the review reason", givenUnknown(v1alpha1.ReasonRetriesExhausted), metav1.ConditionFalse, v1alpha1.ReasonRetriesExhausted},
		{"a settled payment under review is not ready", givenConflict, metav1.ConditionFalse, v1alpha1.ReasonConflictingStatus},
		{"a reviewed payment is ready again", andThen(givenConflict, obsManual(payment.ObservedSucceeded, "checked")), metav1.ConditionTrue, v1alpha1.ReasonSettled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := buildPayment(t, tc.given)
			c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil {
				t.Fatal("no Ready condition")
			}
			if c.Status != tc.status || c.Reason != tc.reason || c.Message == "" {
				t.Errorf("Ready = %s/%s (%q), want %s/%s with a message", c.Status, c.Reason, c.Message, tc.status, tc.reason)
			}
		})
	}

	t.Run("Ready keeps its transition time while its status holds", func(t *testing.T) {
		p := buildPayment(t, givenSucceeded)
		settledAt := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).LastTransitionTime
		res := payment.Apply(p, obsWebhook(payment.ObservedRefund, "evt-refund", withRefunded(100, orderCurrency)), stepNow)
		c := meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionReady)
		if c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&settledAt) {
			t.Errorf("Ready = %s since %s, want True since %s", c.Status, c.LastTransitionTime, settledAt)
		}
		res = payment.Apply(&v1alpha1.Payment{Spec: p.Spec, Status: res.Status}, obsWebhook(payment.ObservedFailed, "evt-fail"), stepNow)
		c = meta.FindStatusCondition(res.Status.Conditions, v1alpha1.ConditionReady)
		if c.Status != metav1.ConditionFalse || !c.LastTransitionTime.Time.Equal(stepNow) {
			t.Errorf("Ready = %s since %s, want False since %s", c.Status, c.LastTransitionTime, stepNow)
		}
	})
}

func TestApplyRecordsLastEvent(t *testing.T) {
	p := buildPayment(t, givenProcessing)
	at := seqStart.Add(30 * time.Minute)
	res := payment.Apply(p, obsWebhook(payment.ObservedSucceeded, "evt-paid", withPaid(), withRaw("payment.succeeded"), withOccurredAt(at)), stepNow)
	want := &v1alpha1.EventRef{ID: "evt-paid", Type: "payment.succeeded", Source: v1alpha1.SourceWebhook, Time: &metav1.Time{Time: at}}
	if !equality.Semantic.DeepEqual(res.Status.LastEvent, want) {
		t.Errorf("lastEvent:\n%s", diff.Diff(want, res.Status.LastEvent))
	}
	if res.Status.ProviderStatus != "payment.succeeded" {
		t.Errorf("providerStatus = %q, want payment.succeeded", res.Status.ProviderStatus)
	}

	// Stale news is not the last event.
	p.Status = res.Status
	res = payment.Apply(p, obsQuery(payment.ObservedProcessing), stepNow)
	if !equality.Semantic.DeepEqual(res.Status.LastEvent, want) {
		t.Errorf("lastEvent after stale news:\n%s", diff.Diff(want, res.Status.LastEvent))
	}
}

func TestApplyResultDoesNotAliasTheObservation(t *testing.T) {
	p := buildPayment(t, givenSucceeded)
	obs := obsWebhook(payment.ObservedRefund, "evt-refund", withRefunded(500, orderCurrency))
	res := payment.Apply(p, obs, stepNow)
	obs.RefundedTotal.Value = 1
	if res.Status.AmountRefunded.Value != 500 {
		t.Errorf("amountRefunded = %d after the caller changed its observation, want 500", res.Status.AmountRefunded.Value)
	}

	p = buildPayment(t, givenProcessing)
	obs = obsWebhook(payment.ObservedFailed, "evt-fail", withFailure("card_declined", ""))
	res = payment.Apply(p, obs, stepNow)
	obs.Failure.Code = "changed"
	if res.Status.Failure.Code != "card_declined" {
		t.Errorf("failure code = %q after the caller changed its observation, want card_declined", res.Status.Failure.Code)
	}
}

func TestApplyAmountDisplayFollowsCurrencyExponent(t *testing.T) {
	for _, tc := range []struct {
		withAmount v1alpha1.Amount
		want       string
	}{
		{v1alpha1.Amount{Value: 1999, Currency: "USD"}, "19.99 USD"},
		{v1alpha1.Amount{Value: 1999, Currency: "JPY"}, "1999 JPY"},
		{v1alpha1.Amount{Value: 1999, Currency: "KWD"}, "1.999 KWD"},
	} {
		p := orderPayment()
		p.Spec.Amount = tc.withAmount
		res := payment.Apply(p, obsCreated(payment.ObservedPending), stepNow)
		if res.Status.AmountDisplay != tc.want {
			t.Errorf("amountDisplay for %d %s = %q, want %q", tc.withAmount.Value, tc.withAmount.Currency, res.Status.AmountDisplay, tc.want)
		}
	}
}

// A webhook that only repeats what a status query already settled changes
// nothing in status (no write): an event's type is not the provider's
// status, and providerStatus keeps what the API reported.
func TestStaleEventLeavesStatusUntouched(t *testing.T) {
	p := orderPayment()
	query := payment.Observation{Source: v1alpha1.SourceStatusQuery, Observed: payment.ObservedSucceeded, ProviderPaymentID: "pay_1",
		Raw: "COMPLETED/COMPLETED", Amount: &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}}
	p.Status = payment.ApplyEvent(p, query, seqStart).Status
	if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.ProviderStatus != "COMPLETED/COMPLETED" {
		t.Fatalf("after the query: %s %q", p.Status.Phase, p.Status.ProviderStatus)
	}
	for _, src := range []v1alpha1.ObservationSource{v1alpha1.SourceWebhook, v1alpha1.SourceBackfill} {
		ev := payment.Observation{Source: src, Observed: payment.ObservedSucceeded, EventID: "WH-1", ProviderPaymentID: "pay_1",
			Raw: "PAYMENT.CAPTURE.COMPLETED", Amount: &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}}
		out := payment.ApplyEvent(p, ev, stepNow)
		if res, _ := payment.EventResult(p, out, ev); res != v1alpha1.ResultStale {
			t.Errorf("%s: result %s, want Stale", src, res)
		}
		if !equality.Semantic.DeepEqual(out.Status, p.Status) {
			t.Errorf("%s: a stale event changed status:\n%s", src, diff.Diff(p.Status, out.Status))
		}
	}
	// A status query's own answer is the provider's status: it is kept current.
	out := payment.ApplyEvent(p, payment.Observation{Source: v1alpha1.SourceStatusQuery, Observed: payment.ObservedSucceeded, ProviderPaymentID: "pay_1",
		Raw: "COMPLETED/SETTLED", Amount: &v1alpha1.Money{Value: orderValue, Currency: orderCurrency}}, stepNow)
	if out.Status.ProviderStatus != "COMPLETED/SETTLED" {
		t.Errorf("a query's answer not recorded: %q", out.Status.ProviderStatus)
	}
}

func withDispute(o payment.Observation, outcome string) payment.Observation {
	o.Dispute = outcome
	return o
}

// applyRow is one observation applied at stepNow to the payment given leads
// to, adjusted by prepare (if any), and the decision it must get.
type applyRow struct {
	name     string
	given    []payment.Observation
	prepare  func(*v1alpha1.PaymentStatus)
	obs      payment.Observation
	decision payment.Decision
}

func (r applyRow) apply(t *testing.T) payment.Result {
	t.Helper()
	p := buildPayment(t, r.given)
	if r.prepare != nil {
		r.prepare(&p.Status)
	}
	res := payment.Apply(p, r.obs, stepNow)
	if res.Decision != r.decision {
		t.Fatalf("%s (%s), want %s", res.Decision, res.Reason, r.decision)
	}
	return res
}

// TestRefundedTotalLowered: the bounds of a refunded total that goes down (a
// refund failed after it succeeded, and the provider took it back out of its
// figure).
func TestRefundedTotalLowered(t *testing.T) {
	const partially = v1alpha1.PhasePartiallyRefunded
	readAt := t0.Add(time.Hour)
	loweredAtRead := func(st *v1alpha1.PaymentStatus) { at := metav1.NewTime(readAt); st.RefundsLoweredAt = &at }
	for _, tc := range []struct {
		applyRow
		refunded int64
	}{
		{applyRow{"a lowering read that finds the recorded total is stale, not a reversal", givenPartiallyRefunded, nil, obsQuery(payment.ObservedRefund, withRefunded(500, orderCurrency), withLowers()), payment.Stale}, 500},
		{applyRow{"a refund reversed on a Refunded payment takes it back to PartiallyRefunded", givenRefunded, nil, obsQuery(payment.ObservedRefund, withRefunded(500, orderCurrency), withLowers()), payment.Applied}, 500},
		{applyRow{"a reversal down to one minor unit still counts that unit", givenPartiallyRefunded, nil, obsQuery(payment.ObservedRefund, withRefunded(1, orderCurrency), withLowers()), payment.Applied}, 1},
		// Event times have whole seconds: one of the stamp's second is older.
		{applyRow{"a refund event of the second of the read that lowered the total is stale", givenPartiallyRefunded, loweredAtRead, obsWebhook(payment.ObservedRefund, "evt-refund-2", withRefunded(800, orderCurrency), withOccurredAt(readAt)), payment.Stale}, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.apply(t)
			if a := res.Status.AmountRefunded; res.Status.Phase != partially || a == nil || a.Value != tc.refunded {
				t.Fatalf("%s refunded %+v, want %s refunded %d", res.Status.Phase, a, partially, tc.refunded)
			}
		})
	}
}
