package controllers_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/payment"
)

// A Refund that is Failed but under review (the provider reported it
// succeeded after it had failed: NeedsReview=ConflictingStatus, a human must
// decide whether the money went back to the payer) is not decided: retention
// must not delete its Payment, which would garbage-collect the Refund (it is
// owned by the Payment) and with it the only place the review shows. The
// Payment's own count of the Refund is done (refundsReversed names it), so
// nothing but the review keeps it.
func TestRetentionKeepsAPaymentWhoseRefundNeedsReview(t *testing.T) {
	t.Parallel()
	ns, keep, now := keepsAnHour(t)
	r := &controllers.Retention{Client: env.Client, APIReader: env.Client, Clock: clocktesting.NewFakePassiveClock(now), Recorder: &fixture.EventLog{}}

	p := storedPayment(t, ns, "paid", keep.Name, now, settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{3 * time.Hour}})
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "return", Payment: p.Name, Amount: 500})
	requested := metav1.NewTime(now.Add(-3 * time.Hour))
	rf.Status = v1alpha1.RefundStatus{
		Phase:             v1alpha1.RefundFailed,
		ProviderRefundID:  "re_1",
		CreateRequestedAt: &requested,
		Failure:           &v1alpha1.Failure{Code: "insufficient_funds", Message: "the provider could not refund"},
		History: []v1alpha1.HistoryEntry{
			{Time: metav1.NewTime(now.Add(-3 * time.Hour)), From: v1alpha1.PaymentPhase(v1alpha1.RefundProcessing), To: v1alpha1.PaymentPhase(v1alpha1.RefundFailed), Source: v1alpha1.SourceWebhook},
			{Time: metav1.NewTime(now.Add(-2 * time.Hour)), From: v1alpha1.PaymentPhase(v1alpha1.RefundFailed), To: v1alpha1.PaymentPhase(v1alpha1.RefundFailed), Source: v1alpha1.SourceWebhook, Reason: v1alpha1.ReasonConflictingStatus},
		},
		Conditions: []metav1.Condition{{
			Type: v1alpha1.ConditionNeedsReview, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonConflictingStatus,
			Message: "provider reported Succeeded for a refund already Failed", LastTransitionTime: metav1.NewTime(now.Add(-2 * time.Hour)),
		}},
	}
	if err := env.Client.Status().Update(context.Background(), rf); err != nil {
		t.Fatal(err)
	}
	// The payment read the provider's figure after the failure: the Refund
	// is counted (nothing Uncounted), so only its review is open.
	fixture.SetStatus(t, env.Client, p, func(s *v1alpha1.PaymentStatus) {
		s.ProviderPaymentID = "pi_1"
		s.RefundsReversed = []types.UID{rf.UID}
	})

	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
		t.Fatal(err)
	}
	if !exists(t, ns, p.Name) {
		t.Fatal("retention deleted a payment whose Refund needs review (Failed, NeedsReview=ConflictingStatus): " +
			"the Refund is owned by the payment and goes with it, the review unanswered")
	}
}

// A payment with an open dispute (Disputed=True, DisputeOpened) still has an
// open money question: the provider may take the money back, and a lost
// dispute must raise NeedsReview=DisputeLost on this payment (SPEC §0: never
// silently stuck; docs/state-machine.md "Disputes"). Disputes last weeks to
// months; retention (72h by default, here 1h) must not let the payment go
// while its dispute is open, or the dispute's outcome arrives for a payment
// that no longer exists (the event stays Orphaned until its own retention)
// and nobody is asked to settle the order.
func TestRetentionKeepsAPaymentWithAnOpenDispute(t *testing.T) {
	t.Parallel()
	ns, keep, now := keepsAnHour(t)
	r := &controllers.Retention{Client: env.Client, APIReader: env.Client, Clock: clocktesting.NewFakePassiveClock(now), Recorder: &fixture.EventLog{}}

	p := storedPayment(t, ns, "disputed", keep.Name, now, settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{5 * time.Hour}})
	fixture.SetStatus(t, env.Client, p, func(s *v1alpha1.PaymentStatus) {
		s.ProviderPaymentID = "pi_1"
		opened := metav1.NewTime(now.Add(-2 * time.Hour))
		s.History = append(s.History, v1alpha1.HistoryEntry{Time: opened, From: v1alpha1.PhaseSucceeded, To: v1alpha1.PhaseSucceeded,
			Source: v1alpha1.SourceWebhook, EventID: "evt_dispute_1", Reason: v1alpha1.ReasonDisputeOpened})
		s.Conditions = append(s.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionDisputed, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonDisputeOpened,
			Message: "the provider reported a dispute", LastTransitionTime: opened,
		})
	})

	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
		t.Fatal(err)
	}
	if !exists(t, ns, p.Name) {
		t.Fatal("retention deleted a payment whose dispute is still open (Disputed=True): its outcome (DisputeLost: the provider took the money back) can no longer be recorded or reviewed")
	}
}

// mapLedger is an in-memory Ledger.
type mapLedger struct {
	mu   sync.Mutex
	recs map[string][]payment.LedgerRecord
}

func (l *mapLedger) Get(_ context.Context, id string) ([]payment.LedgerRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs[id]), nil
}

func (l *mapLedger) Put(_ context.Context, id string, rec payment.LedgerRecord) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recs == nil {
		l.recs = map[string][]payment.LedgerRecord{}
	}
	l.recs[id] = append(l.recs[id], rec)
	return nil
}

// A Payment that tracks a payment made elsewhere (spec.providerPaymentID, a
// checkout page) and that took the money holds its order's merchant
// reference like any other (ReferenceOwner: a second Payment of the order is
// parked as DuplicatePayment while it stands). It never had a create marker
// nor the money-in-flight finalizer, so when retention deletes it, retention
// itself must remember it in the ledger (SPEC §12.1: objects removed by
// retention may not move money again; the ledger of settled identities
// outlives retention and is consulted before any create). Deleted
// unremembered, a new attempt at the same order would find nothing in the
// ledger and be created at the provider: the order charged twice.
func TestRetentionRemembersATrackedPaymentThatTookMoney(t *testing.T) {
	t.Parallel()
	ns, keep, now := keepsAnHour(t)
	led := &mapLedger{}
	r := &controllers.Retention{Client: env.Client, APIReader: env.Client, Clock: clocktesting.NewFakePassiveClock(now), Recorder: &fixture.EventLog{}, Ledger: led}

	mk := func(name string, tracked bool) *v1alpha1.Payment {
		p := &v1alpha1.Payment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.PaymentSpec{
				ProviderRef:       v1alpha1.LocalObjectReference{Name: keep.Name},
				Amount:            v1alpha1.Amount{Value: 1999, Currency: "USD"},
				MerchantReference: "order-" + name,
			},
		}
		if tracked {
			p.Spec.ProviderPaymentID = "pi_checkout_" + name
		}
		if err := env.Client.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		return fixture.SetStatus(t, env.Client, p, func(s *v1alpha1.PaymentStatus) {
			s.Phase = v1alpha1.PhaseSucceeded
			s.AmountReceived = &v1alpha1.Money{Value: 1999, Currency: "USD"}
			if !tracked {
				// Created by a paywarden from before finalizers.
				at := metav1.NewTime(now.Add(-3 * time.Hour))
				s.CreateRequestedAt = &at
				s.ProviderPaymentID = "pi_created_" + name
			}
			s.History = []v1alpha1.HistoryEntry{{Time: metav1.NewTime(now.Add(-2 * time.Hour)), From: v1alpha1.PhasePending, To: v1alpha1.PhaseSucceeded, Source: v1alpha1.SourceStatusQuery}}
		})
	}
	created := mk("created", false)
	tracked := mk("tracked", true)

	for _, p := range []*v1alpha1.Payment{created, tracked} {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
			t.Fatal(err)
		}
		if exists(t, ns, p.Name) {
			t.Fatalf("%s: retention kept a settled payment past its retention", p.Name)
		}
	}

	for _, p := range []*v1alpha1.Payment{created, tracked} {
		recs, _ := led.Get(context.Background(), p.OrderIdentity())
		// A new attempt at the same order (another Payment, same merchant
		// reference), applied after retention: what does the ledger make
		// of it before its first create?
		retry := &v1alpha1.Payment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name + "-retry", UID: "retry-" + types.UID(p.Name)},
			Spec:       v1alpha1.PaymentSpec{ProviderRef: p.Spec.ProviderRef, Amount: p.Spec.Amount, MerchantReference: p.Spec.MerchantReference},
		}
		out, parked := payment.Adopt(retry, recs, now)
		if !parked {
			t.Errorf("%s: retention deleted a Succeeded payment of order %q and the ledger has no record of it (%d records): "+
				"a new Payment of the order is created at the provider again (double charge)", p.Name, p.Spec.MerchantReference, len(recs))
			continue
		}
		if c := meta.FindStatusCondition(out.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Reason != v1alpha1.ReasonDuplicatePayment {
			t.Errorf("%s: a new attempt at the order is not parked as DuplicatePayment: %+v", p.Name, out.Status.Conditions)
		}
	}
}
