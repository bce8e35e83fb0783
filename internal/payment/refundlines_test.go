package payment_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// A Payment's status.refunds is written by the Payment's own reconcile,
// from its Refunds as listed: one line each, oldest first, at most
// MaxRefundSummaries (the oldest settled lines make room). It is written on
// its own only when a Refund settled, stopped being settled or went; a
// Refund on its way rides along with the payment's next write.

func refundAt(name string, minute int, phase v1alpha1.RefundPhase, amount string) v1alpha1.Refund {
	r := v1alpha1.Refund{}
	r.Name = name
	r.CreationTimestamp = metav1.NewTime(t0.Add(time.Duration(minute) * time.Minute))
	r.Status.Phase, r.Status.AmountDisplay = phase, amount
	return r
}

func line(name string, phase v1alpha1.RefundPhase, amount string) v1alpha1.RefundSummary {
	return v1alpha1.RefundSummary{Name: name, Phase: phase, Amount: amount}
}

func TestRefundLinesAreOldestFirstAndBounded(t *testing.T) {
	got := payment.RefundLines([]v1alpha1.Refund{
		refundAt("late", 3, v1alpha1.RefundPending, "1.00 USD"),
		refundAt("b", 1, v1alpha1.RefundSucceeded, "2.00 USD"),
		refundAt("a", 1, v1alpha1.RefundFailed, "3.00 USD"),
	})
	want := []v1alpha1.RefundSummary{line("a", v1alpha1.RefundFailed, "3.00 USD"), line("b", v1alpha1.RefundSucceeded, "2.00 USD"), line("late", v1alpha1.RefundPending, "1.00 USD")}
	if !slices.Equal(got, want) {
		t.Errorf("RefundLines = %+v, want %+v", got, want)
	}
	if got := payment.RefundLines(nil); got != nil {
		t.Errorf("no Refunds: %+v, want none", got)
	}

	// One more than the bound: the oldest settled line goes, not the
	// oldest line (a Refund on its way is never hidden).
	var many []v1alpha1.Refund
	many = append(many, refundAt("first-pending", 0, v1alpha1.RefundPending, ""))
	for i := 1; i <= payment.MaxRefundSummaries; i++ {
		many = append(many, refundAt(fmt.Sprintf("r%02d", i), i, v1alpha1.RefundSucceeded, ""))
	}
	got = payment.RefundLines(many)
	if len(got) != payment.MaxRefundSummaries || got[0].Name != "first-pending" || got[1].Name != "r02" {
		t.Errorf("bounded list starts %+v (%d lines), want first-pending, r02 … (%d)", got[:2], len(got), payment.MaxRefundSummaries)
	}
}

func TestRefundLinesAreWrittenWhenARefundSettlesOrGoes(t *testing.T) {
	pending := line("r1", v1alpha1.RefundPending, "5.00 USD")
	done := line("r1", v1alpha1.RefundSucceeded, "5.00 USD")
	failed := line("r1", v1alpha1.RefundFailed, "5.00 USD")
	other := line("r2", v1alpha1.RefundSucceeded, "1.00 USD")
	for _, tc := range []struct {
		name         string
		listed, want []v1alpha1.RefundSummary
		write        bool
	}{
		{"nothing listed, nothing to list", nil, nil, false},
		{"a Refund on its way appears: rides along", nil, []v1alpha1.RefundSummary{pending}, false},
		{"a listed Refund moves on, not settled: rides along", []v1alpha1.RefundSummary{line("r1", "", "")}, []v1alpha1.RefundSummary{pending}, false},
		{"a Refund settled", []v1alpha1.RefundSummary{pending}, []v1alpha1.RefundSummary{done}, true},
		{"a settled Refund appears", nil, []v1alpha1.RefundSummary{done}, true},
		{"a settled Refund failed after it succeeded", []v1alpha1.RefundSummary{done}, []v1alpha1.RefundSummary{failed}, true},
		{"a settled Refund was retried by a human", []v1alpha1.RefundSummary{failed}, []v1alpha1.RefundSummary{pending}, true},
		{"a listed Refund was deleted", []v1alpha1.RefundSummary{done, other}, []v1alpha1.RefundSummary{other}, true},
		{"up to date", []v1alpha1.RefundSummary{done, other}, []v1alpha1.RefundSummary{done, other}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := succeededPayment()
			p.Status.Refunds = tc.listed
			facts := payment.Facts{RefundsListed: true, RefundLines: tc.want}
			step := payment.Plan(p, testPolicy(), facts, t0.Add(time.Hour))
			wrote := step.Action == payment.Write
			if wrote != tc.write {
				t.Fatalf("Plan = %s (%s), want a write: %v", step.Action, step.Why, tc.write)
			}
			if wrote && (!slices.Equal(step.Outcome.Status.Refunds, tc.want) || len(step.Outcome.Status.History) != len(p.Status.History) || len(step.Outcome.Events) > 0 || step.Outcome.Status.Phase != p.Status.Phase) {
				t.Errorf("wrote %+v (history %d, events %d, phase %s), want only the list %+v", step.Outcome.Status.Refunds, len(step.Outcome.Status.History), len(step.Outcome.Events), step.Outcome.Status.Phase, tc.want)
			}
			// Unread Refunds are never taken for none.
			if step := payment.Plan(p, testPolicy(), payment.Facts{RefundLines: tc.want}, t0.Add(time.Hour)); step.Action == payment.Write {
				t.Errorf("with the Refunds not read, Plan wrote %+v", step.Outcome.Status.Refunds)
			}
		})
	}
}

func TestEveryPaymentWriteCarriesItsRefunds(t *testing.T) {
	p := succeededPayment()
	lines := []v1alpha1.RefundSummary{line("r1", v1alpha1.RefundPending, "5.00 USD")}
	out := payment.WithRefundLines(payment.Outcome{Status: p.Status}, payment.Facts{RefundsListed: true, RefundLines: lines})
	if !slices.Equal(out.Status.Refunds, lines) || out.Status.Phase != p.Status.Phase {
		t.Errorf("WithRefundLines = %+v in %s", out.Status.Refunds, out.Status.Phase)
	}
	p.Status.Refunds = lines
	out = payment.WithRefundLines(payment.Outcome{Status: p.Status}, payment.Facts{})
	if !slices.Equal(out.Status.Refunds, lines) {
		t.Errorf("with the Refunds not read, the list changed to %+v", out.Status.Refunds)
	}
}

// Nothing starts for an object deleted before its money call was marked,
// whichever copy the plan is made on: the reconcile's, or the API server's
// after a write that conflicted with the deletion. One marked before it was
// deleted is driven on until it settles.
func TestNothingStartsForADeletedObject(t *testing.T) {
	deleted := metav1.NewTime(t0)
	pol := testPolicy()

	p := newPay("gone")
	if s := payment.Plan(p, pol, payment.Facts{}, t0); s.Action != payment.Write || s.Outcome.Status.CreateRequestedAt == nil {
		t.Fatalf("a new payment: %s (%s), want its create marker", s.Action, s.Why)
	}
	p.DeletionTimestamp = &deleted
	if s := payment.Plan(p, pol, payment.Facts{}, t0); s.Action != payment.Nothing {
		t.Errorf("a payment deleted before its create: %s (%s), want nothing", s.Action, s.Why)
	}
	marked := store(newPay("marked"), payment.Plan(newPay("marked"), pol, payment.Facts{}, t0).Outcome)
	marked.DeletionTimestamp = &deleted
	if s := payment.Plan(marked, pol, payment.Facts{FreshCreate: true}, t0); s.Action != payment.Create {
		t.Errorf("a payment deleted after its create marker: %s (%s), want the create it announced", s.Action, s.Why)
	}

	paid := paidPayment(0)
	rf := newRefund("r", 500, t0)
	if s := payment.PlanRefund(rf, pol, payment.RefundFacts{Payment: paid}, t0); s.Action != payment.Write || s.Outcome.Status.CreateRequestedAt == nil {
		t.Fatalf("a new Refund: %s (%s), want its marker", s.Action, s.Why)
	}
	rf.DeletionTimestamp = &deleted
	if s := payment.PlanRefund(rf, pol, payment.RefundFacts{Payment: paid}, t0); s.Action != payment.Nothing {
		t.Errorf("a Refund deleted before its marker: %s (%s), want nothing", s.Action, s.Why)
	}
	sent := newRefund("sent", 500, t0)
	sent.Status.CreateRequestedAt = ptrTime(t0)
	sent.Status.Phase = v1alpha1.RefundPending
	sent.DeletionTimestamp = &deleted
	if s := payment.PlanRefund(sent, pol, payment.RefundFacts{Payment: paid}, t0); s.Action == payment.Nothing {
		t.Errorf("a Refund deleted after its marker is left (%s); its refund may be on its way", s.Why)
	}
}

// A Refund that settled is listed even while the provider cannot be read:
// the list needs no call, so it does not wait for the refunded total's read.
func TestRefundLinesDoNotWaitForAnImpossibleRead(t *testing.T) {
	p := succeededPayment()
	lines := []v1alpha1.RefundSummary{line("r1", v1alpha1.RefundSucceeded, "5.00 USD")}
	facts := payment.Facts{RefundsListed: true, RefundLines: lines, SucceededRefunds: []types.UID{"uid-r1"}}
	if s := payment.Plan(p, testPolicy(), facts, t0.Add(time.Hour)); s.Action != payment.Query || s.Read == nil {
		t.Fatalf("provider usable: %s (%s), want the read (the list rides along with its answer)", s.Action, s.Why)
	}
	facts.ProviderUnusable = true
	s := payment.Plan(p, testPolicy(), facts, t0.Add(time.Hour))
	if s.Action != payment.Write || !slices.Equal(s.Outcome.Status.Refunds, lines) {
		t.Fatalf("provider unusable: %s (%s), want the list written", s.Action, s.Why)
	}
	p.Status.Refunds = lines
	if s := payment.Plan(p, testPolicy(), facts, t0.Add(time.Hour)); s.Action != payment.Query || s.Read == nil {
		t.Errorf("listed, provider unusable: %s (%s), want the read still asked for", s.Action, s.Why)
	}
}
