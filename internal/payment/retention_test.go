package payment_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

func condition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason}
}

// TestRetentionHold: what in a payment keeps it past its retention.
func TestRetentionHold(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	settled := func(f func(p *v1alpha1.Payment)) *v1alpha1.Payment {
		p := &v1alpha1.Payment{}
		p.Status.Phase = v1alpha1.PhaseSucceeded
		if f != nil {
			f(p)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		p    *v1alpha1.Payment
		want string // "" = nothing keeps it
	}{
		{"a settled payment may go", settled(nil), ""},
		{"a failed one too", settled(func(p *v1alpha1.Payment) { p.Status.Phase = v1alpha1.PhaseFailed }), ""},
		{"not final", settled(func(p *v1alpha1.Payment) { p.Status.Phase = v1alpha1.PhaseProcessing }), "not final"},
		{"unknown", settled(func(p *v1alpha1.Payment) { p.Status.Phase = v1alpha1.PhaseUnknown }), "not final"},
		{"being deleted", settled(func(p *v1alpha1.Payment) { p.DeletionTimestamp = &now }), "being deleted"},
		{"adopted", settled(func(p *v1alpha1.Payment) { p.Status.AdoptedAt = &now }), "adopted"},
		{"under review", settled(func(p *v1alpha1.Payment) {
			p.Status.Conditions = []metav1.Condition{condition(v1alpha1.ConditionNeedsReview, metav1.ConditionTrue, v1alpha1.ReasonAmountMismatch)}
		}), "needs review"},
		{"a review resolved", settled(func(p *v1alpha1.Payment) {
			p.Status.Conditions = []metav1.Condition{condition(v1alpha1.ConditionNeedsReview, metav1.ConditionFalse, "Resolved")}
		}), ""},
		{"an open dispute", settled(func(p *v1alpha1.Payment) {
			p.Status.Conditions = []metav1.Condition{condition(v1alpha1.ConditionDisputed, metav1.ConditionTrue, v1alpha1.ReasonDisputeOpened)}
		}), "dispute is open"},
		{"a dispute won", settled(func(p *v1alpha1.Payment) {
			p.Status.Conditions = []metav1.Condition{condition(v1alpha1.ConditionDisputed, metav1.ConditionFalse, v1alpha1.ReasonDisputeWon)}
		}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := payment.RetentionHold(tc.p)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("RetentionHold = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRefundsHold: which Refunds keep their payment past its retention.
func TestRefundsHold(t *testing.T) {
	p := &v1alpha1.Payment{}
	p.Status.Phase = v1alpha1.PhasePartiallyRefunded
	p.Status.ProviderPaymentID = "pay_1"
	p.Status.RefundsCounted = []types.UID{"u-ok"}
	p.Status.RefundsReversed = []types.UID{"u-failed"}
	refund := func(name string, uid types.UID, phase v1alpha1.RefundPhase, conds ...metav1.Condition) v1alpha1.Refund {
		rf := v1alpha1.Refund{}
		rf.Name, rf.UID, rf.Status.Phase, rf.Status.Conditions = name, uid, phase, conds
		return rf
	}
	counted := refund("counted", "u-ok", v1alpha1.RefundSucceeded)
	for _, tc := range []struct {
		name    string
		refunds []v1alpha1.Refund
		want    string
	}{
		{"no Refunds", nil, ""},
		{"a counted Refund", []v1alpha1.Refund{counted}, ""},
		{"a failed one, read back", []v1alpha1.Refund{counted, refund("failed", "u-failed", v1alpha1.RefundFailed)}, ""},
		{"one in flight", []v1alpha1.Refund{counted, refund("late", "u-2", v1alpha1.RefundProcessing)}, "Refund late is not final"},
		{"one not started", []v1alpha1.Refund{refund("new", "u-3", "")}, "Refund new is not final"},
		{"one under review", []v1alpha1.Refund{counted, refund("failed", "u-failed", v1alpha1.RefundFailed,
			condition(v1alpha1.ConditionNeedsReview, metav1.ConditionTrue, v1alpha1.ReasonConflictingStatus))}, "Refund failed needs review"},
		{"a review resolved", []v1alpha1.Refund{counted, refund("failed", "u-failed", v1alpha1.RefundFailed,
			condition(v1alpha1.ConditionNeedsReview, metav1.ConditionFalse, "Resolved"))}, ""},
		{"one settled, not counted", []v1alpha1.Refund{counted, refund("fresh", "u-4", v1alpha1.RefundSucceeded)}, "Refund fresh is not counted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := payment.RefundsHold(p, tc.refunds)
			if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("RefundsHold = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestRetentionRemembers: retention writes to the ledger a payment that was
// sent to the provider or that took money (a tracked one never was sent), so
// a new Payment of its order adopts it instead of charging it again.
func TestRetentionRemembers(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name    string
		phase   v1alpha1.PaymentPhase
		created bool
		want    bool
	}{
		{"created and paid", v1alpha1.PhaseSucceeded, true, true},
		{"created and failed", v1alpha1.PhaseFailed, true, true},
		{"tracked and paid", v1alpha1.PhaseSucceeded, false, true},
		{"tracked and partially refunded", v1alpha1.PhasePartiallyRefunded, false, true},
		{"tracked and refunded", v1alpha1.PhaseRefunded, false, true},
		{"tracked and expired", v1alpha1.PhaseExpired, false, false},
		{"tracked and failed", v1alpha1.PhaseFailed, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.Payment{}
			p.Status.Phase = tc.phase
			if tc.created {
				p.Status.CreateRequestedAt = &at
			} else {
				p.Spec.ProviderPaymentID = "pay_elsewhere"
			}
			if got := payment.RetentionRemembers(p); got != tc.want {
				t.Fatalf("RetentionRemembers = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHoldTracked: a tracked payment gets the money-in-flight finalizer once
// the provider answered for it, while it took the money or may still take it
// (a deletion by hand then waits for the final answer and writes it to the
// ledger, as retention would); one that ended without the money, one not
// observed yet, one paywarden sent (held before its create) and one already
// being deleted are not.
func TestHoldTracked(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name    string
		phase   v1alpha1.PaymentPhase
		tracked bool
		deleted bool
		want    bool
	}{
		{"tracked and paid", v1alpha1.PhaseSucceeded, true, false, true},
		{"tracked and partially refunded", v1alpha1.PhasePartiallyRefunded, true, false, true},
		{"tracked and refunded", v1alpha1.PhaseRefunded, true, false, true},
		{"tracked and pending (a checkout the payer may still pay)", v1alpha1.PhasePending, true, false, true},
		{"tracked and processing (a bank debit under way)", v1alpha1.PhaseProcessing, true, false, true},
		{"tracked and authorized (the money reserved)", v1alpha1.PhaseAuthorized, true, false, true},
		{"tracked and unknown", v1alpha1.PhaseUnknown, true, false, true},
		{"tracked, not observed yet", "", true, false, false},
		{"tracked and failed", v1alpha1.PhaseFailed, true, false, false},
		{"tracked and expired", v1alpha1.PhaseExpired, true, false, false},
		{"tracked and canceled", v1alpha1.PhaseCanceled, true, false, false},
		{"tracked, paid and being deleted", v1alpha1.PhaseSucceeded, true, true, false},
		{"sent by paywarden and paid", v1alpha1.PhaseSucceeded, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.Payment{}
			p.Status.Phase = tc.phase
			if tc.tracked {
				p.Spec.ProviderPaymentID = "pay_elsewhere"
			}
			if tc.deleted {
				p.DeletionTimestamp = &deleted
			}
			if got := payment.HoldTracked(p); got != tc.want {
				t.Fatalf("HoldTracked = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRetentionLeftAndQueued: retention counts from the last history entry,
// else Ready's last change, else creation; only the last stretch, within
// the horizon, waits in the retention queue.
func TestRetentionLeftAndQueued(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	created := &v1alpha1.Payment{}
	created.CreationTimestamp = at(5 * time.Hour)
	ready := created.DeepCopy()
	ready.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: at(4 * time.Hour)}}
	history := ready.DeepCopy()
	history.Status.History = []v1alpha1.HistoryEntry{{Time: at(3 * time.Hour)}, {Time: at(2 * time.Hour)}}
	for _, tc := range []struct {
		name string
		p    *v1alpha1.Payment
		want time.Duration
	}{
		{"from its creation", created, -2 * time.Hour},
		{"from Ready's last change", ready, -time.Hour},
		{"from the last history entry", history, time.Hour},
	} {
		if got := payment.RetentionLeft(tc.p, 3*time.Hour, now); got != tc.want {
			t.Errorf("%s: RetentionLeft = %s, want %s", tc.name, got, tc.want)
		}
	}
	h := time.Hour
	for _, tc := range []struct {
		left, want time.Duration
	}{
		{-time.Second, 0}, {0, 0}, // past its end: not handed back
		{time.Nanosecond, time.Nanosecond}, {h - time.Second, h - time.Second}, {h, h},
		{h + time.Nanosecond, 0}, {72 * time.Hour, 0}, // beyond the horizon: no queue
	} {
		if got := payment.RetentionWait(tc.left, h); got != tc.want {
			t.Errorf("RetentionWait(%s, %s) = %s, want %s", tc.left, h, got, tc.want)
		}
	}
}
