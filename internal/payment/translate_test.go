package payment_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

func TestFromEvent(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name string
		ev   provider.Event
		via  v1alpha1.EventVia
		want payment.Observation
	}{
		{
			name: "success carries the received amount for the mismatch check",
			ev:   provider.Event{ID: "e1", Type: "payment.succeeded", Status: provider.StatusSucceeded, PaymentID: "p", Amount: 1999, Currency: "USD", OccurredAt: at},
			via:  v1alpha1.ViaWebhook,
			want: payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedSucceeded, Raw: "payment.succeeded", EventID: "e1", OccurredAt: at, ProviderPaymentID: "p", Amount: &v1alpha1.Money{Value: 1999, Currency: "USD"}},
		},
		{
			name: "refund carries the cumulative total, not this refund",
			ev:   provider.Event{ID: "e2", Type: "refund.succeeded", Status: provider.StatusRefund, Amount: 100, RefundedTotal: 300, Currency: "EUR"},
			via:  v1alpha1.ViaBackfill,
			want: payment.Observation{Source: v1alpha1.SourceBackfill, Observed: payment.ObservedRefund, Raw: "refund.succeeded", EventID: "e2", RefundedTotal: &v1alpha1.Money{Value: 300, Currency: "EUR"}},
		},
		{
			name: "a payment method required again carries the failure of the attempt",
			ev:   provider.Event{ID: "e7", Type: "payment_intent.payment_failed", Status: provider.StatusPending, FailureCode: "insufficient_funds", FailureMessage: "no"},
			via:  v1alpha1.ViaWebhook,
			want: payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedPending, Raw: "payment_intent.payment_failed", EventID: "e7", Failure: &v1alpha1.Failure{Code: "insufficient_funds", Message: "no"}},
		},
		{
			name: "failure carries code and message",
			ev:   provider.Event{ID: "e3", Type: "payment.failed", Status: provider.StatusFailed, FailureCode: "card_declined", FailureMessage: "no"},
			via:  v1alpha1.ViaWebhook,
			want: payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedFailed, Raw: "payment.failed", EventID: "e3", Failure: &v1alpha1.Failure{Code: "card_declined", Message: "no"}},
		},
		{
			name: "an unknown status never settles anything",
			ev:   provider.Event{ID: "e4", Type: "x", Status: "Weird"},
			via:  v1alpha1.ViaWebhook,
			want: payment.Observation{Source: v1alpha1.SourceWebhook, Observed: payment.ObservedUnknown, Raw: "x", EventID: "e4"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := payment.FromEvent(tc.ev, tc.via)
			if !equalObs(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func equalObs(a, b payment.Observation) bool {
	money := func(x, y *v1alpha1.Money) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	fail := func(x, y *v1alpha1.Failure) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Source == b.Source && a.Observed == b.Observed && a.Raw == b.Raw && a.EventID == b.EventID &&
		a.OccurredAt.Equal(b.OccurredAt) && a.ProviderPaymentID == b.ProviderPaymentID &&
		money(a.Amount, b.Amount) && money(a.RefundedTotal, b.RefundedTotal) && fail(a.Failure, b.Failure)
}

func TestEventResult(t *testing.T) {
	p := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Name: "order"}}
	p.Status.Phase = v1alpha1.PhaseSucceeded
	p.Status.History = []v1alpha1.HistoryEntry{
		{From: "", To: v1alpha1.PhaseSucceeded, EventID: "applied-before"},
		{From: v1alpha1.PhaseSucceeded, To: v1alpha1.PhaseSucceeded, EventID: "conflict-before", Reason: v1alpha1.ReasonConflictingStatus},
		{From: v1alpha1.PhaseSucceeded, To: v1alpha1.PhaseSucceeded, EventID: "dispute-before", Reason: "Dispute: needs_response"},
		{From: v1alpha1.PhasePending, To: v1alpha1.PhaseSucceeded, EventID: "moved-before", Reason: v1alpha1.ReasonConflictingStatus},
	}
	pending := p.DeepCopy()
	pending.Status.Phase = v1alpha1.PhasePending
	failed := p.DeepCopy()
	failed.Status.Phase = v1alpha1.PhaseFailed
	cases := []struct {
		name     string
		p        *v1alpha1.Payment
		result   payment.Result
		observed payment.Observed
		eventID  string
		want     v1alpha1.EventResult
		msg      string // the whole message
	}{
		{"applied is applied", p, payment.Result{Decision: payment.Applied}, payment.ObservedSucceeded, "e", v1alpha1.ResultApplied, "payment order"},
		{"applied names its transition and reason", p, payment.Result{Decision: payment.Applied, Reason: "paid", Transition: &payment.Transition{To: v1alpha1.PhaseSucceeded}},
			payment.ObservedSucceeded, "e", v1alpha1.ResultApplied, "payment order: (new) -> Succeeded: paid"},
		{"applied names its transition", p, payment.Result{Decision: payment.Applied, Transition: &payment.Transition{From: v1alpha1.PhasePending, To: v1alpha1.PhaseSucceeded}},
			payment.ObservedSucceeded, "e", v1alpha1.ResultApplied, "payment order: Pending -> Succeeded"},
		{"stale is stale", p, payment.Result{Decision: payment.Stale, Reason: "older than the last read"}, payment.ObservedSucceeded, "e", v1alpha1.ResultStale, "payment order: older than the last read"},
		{"conflict is conflict", p, payment.Result{Decision: payment.Conflict}, payment.ObservedSucceeded, "e", v1alpha1.ResultConflict, "payment order"},
		{"ignored is ignored", p, payment.Result{Decision: payment.Ignored}, payment.ObservedSucceeded, "e", v1alpha1.ResultIgnored, "payment order"},
		{"a refund of a payment not paid yet waits", pending, payment.Result{Decision: payment.Ignored}, payment.ObservedRefund, "e", v1alpha1.ResultOrphaned,
			"payment order; waiting for the payment to succeed"},
		{"a refund of a payment that failed is ignored", failed, payment.Result{Decision: payment.Ignored}, payment.ObservedRefund, "e", v1alpha1.ResultIgnored, "payment order"},
		{"a duplicate of another event is a duplicate", p, payment.Result{Decision: payment.Duplicate}, payment.ObservedSucceeded, "other", v1alpha1.ResultDuplicate, "payment order"},
		{"this event applied by a crashed attempt is applied", p, payment.Result{Decision: payment.Duplicate}, payment.ObservedSucceeded, "applied-before", v1alpha1.ResultApplied,
			"payment order: applied by an earlier attempt"},
		{"this event's conflict recorded by a crashed attempt is a conflict", p, payment.Result{Decision: payment.Duplicate}, payment.ObservedSucceeded, "conflict-before", v1alpha1.ResultConflict,
			"payment order: conflict recorded by an earlier attempt"},
		{"this event's dispute recorded by a crashed attempt is applied", p, payment.Result{Decision: payment.Duplicate}, payment.ObservedDispute, "dispute-before", v1alpha1.ResultApplied,
			"payment order: applied by an earlier attempt"},
		{"this event's move recorded by a crashed attempt is applied", p, payment.Result{Decision: payment.Duplicate}, payment.ObservedSucceeded, "moved-before", v1alpha1.ResultApplied,
			"payment order: applied by an earlier attempt"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := payment.EventResult(tc.p, payment.Outcome{Results: []payment.Result{tc.result}}, payment.Observation{EventID: tc.eventID, Observed: tc.observed})
			if got != tc.want || msg != tc.msg {
				t.Fatalf("result %s (%q), want %s (%q)", got, msg, tc.want, tc.msg)
			}
		})
	}
}

// TestTheCaptureThatTookTheMoneyIsKept: a read of a payment paid or
// refunded carries the capture that took the money (PayPal's refunds name
// it), and the payment keeps the latest one read; a read in any other state,
// or an event, never sets or clears it.
func TestTheCaptureThatTookTheMoneyIsKept(t *testing.T) {
	read := func(st provider.Status, capture string) provider.Payment {
		pp := provider.Payment{ID: "pay_1", Status: st, RawStatus: string(st), Amount: orderValue, Currency: orderCurrency, CaptureID: capture}
		if st == provider.StatusRefund {
			pp.RefundedTotal = 500
		}
		return pp
	}
	for _, tc := range []struct {
		name string
		pp   provider.Payment
		want []string // each observation's capture, in order
	}{
		{"paid", read(provider.StatusSucceeded, "cap_1"), []string{"cap_1"}},
		{"refunded: its success, then the refund", read(provider.StatusRefund, "cap_1"), []string{"cap_1", "cap_1"}},
		{"still processing", read(provider.StatusProcessing, "cap_1"), []string{""}},
		{"authorized", read(provider.StatusAuthorized, "cap_1"), []string{""}},
		{"failed", read(provider.StatusFailed, "cap_1"), []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := payment.FromPayment(tc.pp, v1alpha1.SourceStatusQuery)
			var got []string
			for _, o := range obs {
				got = append(got, o.CaptureID)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("captures %q, want %q", got, tc.want)
			}
		})
	}

	p := lifecyclePay("order", v1alpha1.CaptureAutomatic)
	now := t0.Add(time.Minute)
	apply := func(obs ...payment.Observation) {
		t.Helper()
		for _, o := range obs {
			p.Status = payment.Apply(p, o, now).Status
			now = now.Add(time.Second)
		}
	}
	apply(payment.FromPayment(read(provider.StatusProcessing, "cap_0"), v1alpha1.SourceStatusQuery)...)
	if p.Status.CaptureID != "" {
		t.Fatalf("a processing read set capture %q", p.Status.CaptureID)
	}
	apply(payment.FromPayment(read(provider.StatusSucceeded, "cap_1"), v1alpha1.SourceStatusQuery)...)
	if p.Status.Phase != v1alpha1.PhaseSucceeded || p.Status.CaptureID != "cap_1" {
		t.Fatalf("paid: phase %s capture %q, want Succeeded and cap_1", p.Status.Phase, p.Status.CaptureID)
	}
	apply(payment.FromEvent(provider.Event{ID: "evt-r", Type: "refund", Status: provider.StatusRefund, PaymentID: "pay_1", RefundedTotal: 200, Currency: orderCurrency}, v1alpha1.ViaWebhook),
		payment.FromPayment(read(provider.StatusSucceeded, ""), v1alpha1.SourceStatusQuery)[0])
	if p.Status.CaptureID != "cap_1" {
		t.Fatalf("an event and a read without a capture changed it to %q", p.Status.CaptureID)
	}
	apply(payment.FromPayment(read(provider.StatusRefund, "cap_2"), v1alpha1.SourceStatusQuery)...)
	if p.Status.CaptureID != "cap_2" {
		t.Fatalf("capture %q, want the latest read, cap_2", p.Status.CaptureID)
	}
}
