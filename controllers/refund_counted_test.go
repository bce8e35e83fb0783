package controllers_test

// A settled Refund is counted in its payment's refunded total before
// either of them may go (payment.Uncounted).

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// TestASettledRefundDeletedBeforeItsPaymentCountedItIsStillCounted: a
// Refund of 500 of a 1999 payment succeeds. The Payment's read of the
// provider's cumulative refunded figure (RefundsUncounted, "a required step
// of the Payment's own reconcile, not a best effort") fails for a while (the
// provider answers 500 to the read). Meanwhile the user (or a GitOps prune)
// deletes the settled Refund: RefundInFlight is "" for a final Refund, so
// the refund controller writes it to the ledger and lets it go at once,
// whether or not its Payment has counted it. The provider recovers. The
// Payment must show the 500 refunded (PartiallyRefunded), as the provider
// does; instead the only fact that asked for the read (a Succeeded Refund
// not in status.refundsCounted) left with the object, and the Payment stays
// Succeeded with nothing refunded: the refund is counted nowhere (and its
// ledger record, when it is deleted, says 0 refunded).
//
// The same loss happens without any fault, as a race: a Refund deleted while
// its refund is in flight is let go in the very reconcile that stores its
// success (drive: storeAnswer, plan Nothing, finalize), so the Payment's
// reconcile woken by that success often lists the Refunds after it is gone.
func TestASettledRefundDeletedBeforeItsPaymentCountedItIsStillCounted(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund-r")
	m := refundManager(t, ns)
	sim, prov, reads := unreadablePayments(t, ns)
	p := paidPayment(t, ns, prov.Name, "order", 1999)
	id := p.Status.ProviderPaymentID
	reads.breakFor(id)

	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "five", Payment: p.Name, Amount: 500})
	fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	fixture.Eventually(t, fixture.Timeout, "the payment's read of its refunded total to fail", func() bool { return reads.failed.Load() > 0 })

	userDeletes(t, rf)
	// While its payment cannot count it, the deleted Refund stays: its
	// settlement is known only while it stands.
	reads.twoMoreFail(t)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(rf), &v1alpha1.Refund{}); err != nil {
		t.Fatalf("the settled Refund, deleted before its payment counted it, was let go (%v): nothing asks for the count any more", err)
	}
	reads.broken.Store(false)

	if _, total := fixture.SimRefunds(t, sim, v1alpha1.ProviderKukoPay, id); total != 500 {
		t.Fatalf("paysim refunded %d, want 500", total)
	}
	deadline := time.Now().Add(fixture.Timeout)
	var got *v1alpha1.Payment
	for time.Now().Before(deadline) {
		got = fixture.GetPayment(t, env.Client, p)
		if a := got.Status.AmountRefunded; a != nil && a.Value == 500 && got.Status.Phase == v1alpha1.PhasePartiallyRefunded {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if a := got.Status.AmountRefunded; a == nil || a.Value != 500 || got.Status.Phase != v1alpha1.PhasePartiallyRefunded {
		t.Fatalf("the provider refunded 500 of payment %s through Refund %s, deleted after it succeeded and before the payment's read of its refunded total went through; the payment says %s with amountRefunded %+v (refundsCounted %v, %d failed reads, reads: %d)",
			p.Name, rf.Name, got.Status.Phase, got.Status.AmountRefunded, got.Status.RefundsCounted, reads.failed.Load(),
			len(m.Requests.Calls(func(c fixture.Call) bool { return c.Method == http.MethodGet })))
	}
	// Counted, it goes.
	fixture.Eventually(t, fixture.Timeout, "the counted Refund to be let go", func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(rf), &v1alpha1.Refund{})
		return apierrors.IsNotFound(err)
	})
}

// TestAPaymentDeletedWhileItsRefundIsInFlightIsRememberedWithThatRefund:
// a Payment of 3004 is deleted (by its user, a GitOps prune, or retention:
// all reach PaymentReconciler.finalize) while its Refund of 500 is pending
// at the provider. The deletion waits for the Refund, as documented
// ("DeletionWaits ... one of its Refunds in flight"). The refund succeeds.
// The Payment's next reconcile starts with finalize: settled, no Refund in
// flight, so it is written to the ledger and let go at once, before the read
// of the provider's refunded figure that the Refund's success asks for
// (RefundsUncounted runs in Plan, which a deleted settled payment never
// reaches). The ledger record says 0 refunded. The Refund goes with its
// Payment (the garbage collector; done by hand here, envtest runs none) and
// the manifest of the Payment is applied again: it adopts Succeeded with
// nothing refunded, parked, while the provider has refunded 500 of it.
func TestAPaymentDeletedWhileItsRefundIsInFlightIsRememberedWithThatRefund(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund-r")
	s, prov := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	ledgerManager(t, ns)
	if err := s.Script(paysim.Rule{Provider: paysim.KukoPay, Amount: 3004, Script: paysim.Script{Outcome: paysim.OutcomeSucceed, RefundOutcome: paysim.OutcomePending}}); err != nil {
		t.Fatal(err)
	}
	p := paidPayment(t, ns, prov.Name, "order", 3004)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "five", Payment: p.Name, Amount: 500})
	pending := fixture.WaitRefund(t, env.Client, rf, "pending at the provider", func(r *v1alpha1.Refund) bool { return r.Status.ProviderRefundID != "" })

	if err := env.Client.Delete(context.Background(), p.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if !exists(t, ns, p.Name) {
		t.Fatal("the payment went while its Refund was in flight: the test proves nothing")
	}
	if err := s.SettleRefund(paysim.KukoPay, pending.Status.ProviderRefundID, paysim.OutcomeSucceed); err != nil {
		t.Fatal(err)
	}
	fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	fixture.Eventually(t, fixture.Timeout, "the payment to be let go once its Refund settled", func() bool { return !exists(t, ns, p.Name) })
	deleteAndWaitGone(t, fixture.GetRefund(t, env.Client, rf)) // the garbage collector's part

	if _, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, p.Status.ProviderPaymentID); total != 500 {
		t.Fatalf("paysim refunded %d, want 500", total)
	}
	again := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order", Provider: prov.Name, Amount: 3004})
	got := fixture.WaitPayment(t, env.Client, again, "adopted", func(p *v1alpha1.Payment) bool { return p.Status.AdoptedAt != nil })
	if a := got.Status.AmountRefunded; a == nil || a.Value != 500 || got.Status.Phase != v1alpha1.PhasePartiallyRefunded {
		t.Errorf("payment %s was let go when its Refund of 500 succeeded, before its refunded total counted it; applied again it adopted %s with amountRefunded %+v from the ledger, while the provider has refunded 500 of it",
			p.Name, got.Status.Phase, got.Status.AmountRefunded)
	}
}

// TestRetentionKeepsAPaymentUntilItCountedItsRefund: past its provider's
// retention, a payment whose Refund succeeded is kept until its refunded
// total counts that Refund (its read failing meanwhile), then deleted:
// deleted before, the ledger would remember it without the refund.
func TestRetentionKeepsAPaymentUntilItCountedItsRefund(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund-r")
	m := refundManager(t, ns, controllers.ControllerRetention)
	_, prov, reads := unreadablePayments(t, ns)
	p := paidPayment(t, ns, prov.Name, "order", 1999)
	reads.breakFor(p.Status.ProviderPaymentID)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "five", Payment: p.Name, Amount: 500})
	fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)

	pastRetention(t, m, prov, p)
	reads.twoMoreFail(t)
	if got := fixture.GetPayment(t, env.Client, p); got.DeletionTimestamp != nil {
		t.Fatal("retention deleted a payment whose refunded total does not count its Refund that succeeded")
	}
	reads.broken.Store(false)
	fixture.Eventually(t, fixture.Timeout, "the payment to be deleted once it counted its Refund", func() (bool, string) {
		got := &v1alpha1.Payment{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("payment %s, refunded %+v, counted %v, deleted at %v, query %+v, conditions %+v; %d failed reads",
			got.Status.Phase, got.Status.AmountRefunded, got.Status.RefundsCounted, got.DeletionTimestamp, got.Status.Query, got.Status.Conditions, reads.failed.Load())
	})
}

// failingReads makes a KukoPay provider's reads of one payment fail (500)
// while broken is set, counting them.
type failingReads struct {
	broken  atomic.Bool
	failed  atomic.Int32
	payment atomic.Value
}

func (f *failingReads) breakFor(id string) {
	f.payment.Store(id)
	f.broken.Store(true)
}

// twoMoreFail waits for two more failed reads: the payment goes on asking.
func (f *failingReads) twoMoreFail(t *testing.T) {
	t.Helper()
	n := f.failed.Load()
	fixture.Eventually(t, fixture.Timeout, "two more failed reads of the refunded total", func() bool { return f.failed.Load() >= n+2 })
}

// unreadablePayments starts paysim behind a front that fails the reads
// failingReads breaks, and a KukoPay provider in ns that calls it.
func unreadablePayments(t *testing.T, ns string) (*fixture.Sim, *v1alpha1.PaymentProvider, *failingReads) {
	t.Helper()
	sim := fixture.StartSim(t, paysim.Options{})
	f := &failingReads{}
	f.payment.Store("\x00")
	h := sim.Handler()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.broken.Load() && r.Method == http.MethodGet && r.URL.Path == "/kukopay/v1/payments/"+f.payment.Load().(string) {
			f.failed.Add(1)
			http.Error(w, `{"error":"internal"}`, http.StatusInternalServerError)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	spec := refundProvider(ns, v1alpha1.ProviderKukoPay, &fixture.Sim{Sim: sim.Sim, URL: front.URL})
	// The failing reads must not open the circuit (5 failures, a minute by
	// default): the payment would then read again only after its probe,
	// later than the tests wait on a loaded machine.
	spec.Failures = 1000
	prov := fixture.CreateProvider(t, env.Client, spec)
	return sim, prov, f
}
