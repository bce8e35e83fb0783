package payment_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// What Plan tells the reconciler about a call's place in its provider's line
// (SPEC §12.3): which status queries are only the schedule's, and which
// marker announces a call whose token is taken before the marker is stored.

func TestPlanMarksScheduledQueriesAndAnnouncedCalls(t *testing.T) {
	pol := testPolicy()
	capturing := func() *v1alpha1.Payment {
		p := created("capturing")
		p.Status.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCapture, RequestedAt: metav1.NewTime(t0)}
		return p
	}
	cases := []struct {
		name      string
		pay       *v1alpha1.Payment
		now       time.Time
		action    payment.Action
		scheduled bool
		announces payment.Action
	}{
		{name: "the create marker announces the create", pay: newPay("new"), now: t0, action: payment.Write, announces: payment.Create},
		{name: "the create itself is no scheduled query", pay: store(newPay("marked"), planned(newPay("marked"), pol, t0).Outcome), now: t0, action: payment.Create},
		{name: "a status query on the schedule is scheduled", pay: created("due"), now: t0.Add(30 * time.Second), action: payment.Query, scheduled: true},
		{name: "the look-up of a capture's outcome is not", pay: capturing(), now: t0.Add(2 * time.Second), action: payment.Query},
		{name: "a write that is no marker announces nothing", pay: expiresAfter(newPay("expired"), time.Minute), now: t0.Add(time.Minute), action: payment.Write},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := planned(tc.pay, pol, tc.now)
			if s.Action != tc.action || s.Scheduled != tc.scheduled || s.Announces != tc.announces {
				t.Fatalf("step %s scheduled=%v announces %s (%s), want %s scheduled=%v announces %s",
					s.Action, s.Scheduled, s.Announces, s.Why, tc.action, tc.scheduled, tc.announces)
			}
		})
	}
}

func TestPlanRefundMarksItsScheduledQuery(t *testing.T) {
	pol := testPolicy()
	pol.Lifecycle, pol.LifecycleKnown = provider.Lifecycle{Refunds: true}, true
	facts := payment.RefundFacts{Payment: paidPayment(0)}
	r := newRefundMarked(pol, facts)
	if s := payment.PlanRefund(r, pol, facts, t0); s.Action != payment.Create || s.Scheduled {
		t.Fatalf("refund create: %s scheduled=%v", s.Action, s.Scheduled)
	}
	r.Status = payment.AfterRefundCreate(r, pol, payment.RefundCall{Refund: provider.Refund{ID: "re_1", Status: provider.RefundPending, Amount: 500, Currency: orderCurrency}}, t0).Status
	if s := payment.PlanRefund(r, pol, facts, r.Status.Query.NextTime.Time); s.Action != payment.Query || !s.Scheduled {
		t.Fatalf("refund status query: %s scheduled=%v (%s), want a scheduled query", s.Action, s.Scheduled, s.Why)
	}
}

func TestQueryMoot(t *testing.T) {
	settled := created("settled")
	settled.Status.Phase = v1alpha1.PhaseSucceeded
	query := payment.Step{Action: payment.Query, Scheduled: true}
	cases := []struct {
		name string
		step payment.Step
		seen *v1alpha1.Payment
		moot bool
	}{
		{"a query for a payment seen settled does not go out", query, settled, true},
		{"a query for a payment seen pending goes out", query, created("pending"), false},
		{"the look-up of an operation on a payment seen settled does not go out", payment.Step{Action: payment.Query}, settled, true},
		{"only queries are held back", payment.Step{Action: payment.CallCapture}, settled, false},
		{"the read of a settled payment's refunded total goes out", payment.Step{Action: payment.Query, Read: &payment.RefundRead{}}, settled, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := payment.QueryMoot(tc.step, tc.seen); got != tc.moot {
				t.Fatalf("QueryMoot = %v, want %v", got, tc.moot)
			}
		})
	}
}

// TestAFreshCreateMarkerPastExpirySentNothing: the create's token came and
// its marker was stored, and expiresAfter passed before the call: this
// reconcile knows nothing was sent, so the payment expires unsent (no marker
// left standing), never looked up into CreateOutcomeUnknown. A marker from an
// earlier reconcile may have been sent: that one is looked up.
func TestAFreshCreateMarkerPastExpirySentNothing(t *testing.T) {
	pol := testPolicy()
	p := expiresAfter(newPay("late"), 2*time.Second)
	marked := store(p, planned(p, pol, t0.Add(2*time.Second-time.Millisecond)).Outcome)
	if marked.Status.CreateRequestedAt == nil {
		t.Fatal("no create marker before the expiry")
	}
	past := t0.Add(2 * time.Second)
	s := payment.Plan(marked, pol, payment.Facts{FreshCreate: true}, past)
	if s.Action != payment.Write || s.Outcome.Status.Phase != v1alpha1.PhaseExpired || s.Outcome.Status.CreateRequestedAt != nil {
		t.Fatalf("fresh marker past expiry: %s (%s) phase %s marker %v, want Expired with no marker", s.Action, s.Why, s.Outcome.Status.Phase, s.Outcome.Status.CreateRequestedAt)
	}
	if s := payment.Plan(marked, pol, payment.Facts{}, past); s.Action != payment.Lookup {
		t.Fatalf("earlier marker past expiry: %s (%s), want the look-up", s.Action, s.Why)
	}
}
