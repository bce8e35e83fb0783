package controllers_test

// A Refund deleted before anything went out sends nothing, and a Payment
// lists its settled Refunds whether or not its provider can be called.

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// TestRefundDeletedBeforeItsMarkerIsNeverSent: a Refund is deleted by
// its user right after its first reconcile made it owned by its Payment,
// before any marker was stored (the reconcile still holds the copy it read
// before the delete, as with a lagging cache). Nothing went out, so nothing
// may go out: "Deleted ... before anything went out: nothing may start now".
// The marker's write, planned again on the API server's copy after it
// conflicts with the deletion, must not mark it either.
//
// Not parallel: it concludes that nothing was sent after a fixed wait,
// which other tests sharing the control plane could make too short.
func TestRefundDeletedBeforeItsMarkerIsNeverSent(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "refund-deleted")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	var deleted atomic.Bool
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.WrapClient = fixture.AroundWrites(func(w fixture.Write, do func() error) error {
		err := do()
		rf, ok := w.Object.(*v1alpha1.Refund)
		if err == nil && ok && !w.Status() && w.Verb == "patch" && len(rf.OwnerReferences) > 0 && rf.Status.CreateRequestedAt == nil &&
			deleted.CompareAndSwap(false, true) {
			// The user deletes the Refund now: after it was owned, before
			// any marker.
			userDeletes(t, rf)
		}
		return err
	})
	m := fixture.StartManager(t, env, ns, o)
	p := paidPayment(t, ns, "kukopay", "order", 1999)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "changed-my-mind", Payment: p.Name, Amount: 500})

	fixture.Eventually(t, fixture.Timeout, "the Refund to be deleted and gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(rf), &v1alpha1.Refund{})
		return deleted.Load() && apierrors.IsNotFound(err), "deleted in the first reconcile: " + boolString(deleted.Load())
	})
	time.Sleep(500 * time.Millisecond) // a refund call in flight would be logged by now
	if calls := m.Requests.Calls(fixture.IsRefundCreate); len(calls) != 0 {
		t.Errorf("%d refund call(s) for a Refund deleted before its marker was stored: %+v", len(calls), calls)
	}
	if n, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, p.Status.ProviderPaymentID); n != 0 {
		t.Errorf("paysim made %d refund(s) totalling %d for a Refund deleted before anything went out", n, total)
	}
}

// userDeletes deletes rf as its user would, by name, whatever copy the
// manager holds.
func userDeletes(t *testing.T, rf *v1alpha1.Refund) {
	victim := &v1alpha1.Refund{}
	victim.Namespace, victim.Name = rf.Namespace, rf.Name
	if err := env.Client.Delete(context.Background(), victim); err != nil {
		t.Errorf("delete the Refund: %v", err)
	}
}

func boolString(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// TestWaitingRefundDeletedAsItsPaymentSucceedsIsNeverSent: the realistic
// form of the defect above. A Refund waits for its payment to take the
// money. The payment
// succeeds; the refund reconcile that wakes reads the Refund, and the user
// deletes it at that moment (the reconcile's copy predates the delete, as a
// cache that lags by one event has it). The refund, for a
// Refund deleted while it was only waiting, must not go out.
//
// Not parallel: it concludes that nothing was sent after a fixed wait,
// which other tests sharing the control plane could make too short.
func TestWaitingRefundDeletedAsItsPaymentSucceedsIsNeverSent(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "refund-deleted")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	var paid, deleted atomic.Bool
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.WrapClient = func(c client.Client) client.Client {
		return fixture.Intercept(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			rf, ok := obj.(*v1alpha1.Refund)
			if err == nil && ok && paid.Load() && rf.DeletionTimestamp.IsZero() && paymentTookMoney(rf) && rf.Status.WaitingFor == v1alpha1.ReasonPaymentNotSucceeded &&
				deleted.CompareAndSwap(false, true) {
				userDeletes(t, rf)
			}
			return err
		}})
	}
	m := fixture.StartManager(t, env, ns, o)
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "slow", Provider: "kukopay", Outcome: paysim.OutcomePending})
	fixture.Eventually(t, fixture.Timeout, "the payment to exist at paysim", func() bool {
		return fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID != ""
	})
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "slow", Payment: p.Name, Amount: 300})
	fixture.WaitRefund(t, env.Client, rf, "waiting for its payment", func(r *v1alpha1.Refund) bool {
		return r.Status.WaitingFor == v1alpha1.ReasonPaymentNotSucceeded
	})
	id := fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID
	paid.Store(true)
	if err := s.SetOutcome(paysim.KukoPay, id, paysim.Script{Outcome: paysim.OutcomeSucceed}); err != nil {
		t.Fatal(err)
	}
	fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
	fixture.Eventually(t, fixture.Timeout, "the Refund to be deleted and gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(rf), &v1alpha1.Refund{})
		return deleted.Load() && apierrors.IsNotFound(err), "deleted: " + boolString(deleted.Load())
	})
	time.Sleep(500 * time.Millisecond)
	if calls := m.Requests.Calls(fixture.IsRefundCreate); len(calls) != 0 {
		t.Errorf("%d refund call(s) for a Refund deleted while it waited for its payment: %+v", len(calls), calls)
	}
	if n, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, id); n != 0 {
		t.Errorf("paysim made %d refund(s) totalling %d for a Refund deleted before anything went out", n, total)
	}
}

// paymentTookMoney: rf's Payment, as the API server has it, took the money.
func paymentTookMoney(rf *v1alpha1.Refund) bool {
	p := &v1alpha1.Payment{}
	err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: rf.Namespace, Name: rf.Spec.PaymentRef.Name}, p)
	return err == nil && p.Status.Phase.TookMoney()
}

// TestASettledRefundIsListedWhileItsProviderIsUnusable: a Refund
// settles just as its provider becomes unusable (its credentials Secret is
// gone: the gateway has no entry). The read of the refunded total
// (RefundsUncounted) cannot be made without an entry; the list needs no
// call, so the Payment's reconcile writes it meanwhile
// (Facts.ProviderUnusable).
//
// Not parallel: it gives the manager's cache a fixed 500 ms to see the
// deleted Secret, which other tests sharing the control plane could make
// too short.
func TestASettledRefundIsListedWhileItsProviderIsUnusable(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "refund-deleted")
	simProvider(t, ns, v1alpha1.ProviderKukoPay)
	var broke atomic.Bool
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.WrapClient = fixture.AroundWrites(func(w fixture.Write, do func() error) error {
		rf, ok := w.Object.(*v1alpha1.Refund)
		if ok && w.Status() && rf.Name == "second" && rf.Status.Phase == v1alpha1.RefundSucceeded && broke.CompareAndSwap(false, true) {
			sec := &corev1.Secret{}
			sec.Namespace, sec.Name = ns, "kukopay-credentials"
			if err := env.Client.Delete(context.Background(), sec); err != nil {
				t.Errorf("delete the credentials: %v", err)
			}
			time.Sleep(500 * time.Millisecond) // the manager's cache sees it
		}
		return do()
	})
	fixture.StartManager(t, env, ns, o)
	p := paidPayment(t, ns, "kukopay", "order", 1999)
	first := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "first", Payment: p.Name, Amount: 500})
	fixture.WaitRefundPhase(t, env.Client, first, v1alpha1.RefundSucceeded)
	waitListed(t, p, v1alpha1.RefundSummary{Name: "first", Amount: "5.00 USD", Phase: v1alpha1.RefundSucceeded})
	second := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "second", Payment: p.Name, Amount: 300})
	fixture.WaitRefundPhase(t, env.Client, second, v1alpha1.RefundSucceeded)
	if !broke.Load() {
		t.Fatal("the credentials were not deleted: the test proves nothing")
	}
	waitListed(t, p, v1alpha1.RefundSummary{Name: "second", Amount: "3.00 USD", Phase: v1alpha1.RefundSucceeded})
}
