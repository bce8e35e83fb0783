package controllers_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// TestAPayPalRefundRefundsTheCaptureOfItsOwnOrder: a PayPal Refund's marker
// names its order (status.providerPaymentID, order A) and the manager dies
// before the call. While it is down an operator removes the Payment's
// finalizer and deletes it (orphaning the Refund), and a new Payment of the
// same name, for another order (merchant reference "shop-2"), is created and
// paid (order B, its capture recorded in status.captureID). The refund the
// Refund was marked for is a refund of order A: it must refund A's capture,
// never B's: the Payment's status.captureID is sent only while it follows
// the marker's order (payment.RefundCallNames); else that order is read.
func TestAPayPalRefundRefundsTheCaptureOfItsOwnOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	isMarker := func(w fixture.Write) bool {
		rf, ok := w.Object.(*v1alpha1.Refund)
		return ok && w.Status() && rf.Status.CreateRequestedAt != nil && rf.Status.ProviderRefundID == ""
	}
	ns := fixture.Namespace(t, env.Client, "refund")
	s, _ := simProvider(t, ns, v1alpha1.ProviderPayPal)
	crash := fixture.CrashAfter(isMarker)
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.WrapClient = crash.Wrap
	first := fixture.StartManager(t, env, ns, o)
	a := paidPayment(t, ns, "paypal", "order", 1999)
	orderA := a.Status.ProviderPaymentID
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "crash", Payment: a.Name, Amount: 700})
	crash.Wait(t)
	first.Stop()
	rf = fixture.GetRefund(t, env.Client, rf)
	if st := rf.Status; st.CreateRequestedAt == nil || st.ProviderRefundID != "" || st.ProviderPaymentID != orderA {
		t.Fatalf("after the crash the Refund holds %s, want the marker for order %s", fixture.Dump(st), orderA)
	}

	// The operator's forced delete of Payment "order".
	if err := env.Client.Delete(ctx, a, client.PropagationPolicy("Orphan")); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, fixture.Timeout, "Payment order gone", func() bool {
		got := &v1alpha1.Payment{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(a), got)
		if apierrors.IsNotFound(err) {
			return true
		}
		if err == nil && len(got.Finalizers) > 0 {
			base := got.DeepCopy()
			got.Finalizers = nil
			_ = env.Client.Patch(ctx, got, client.MergeFrom(base))
		}
		return false
	})

	// Another order under the same name, paid.
	second := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	b := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order", Provider: "paypal", Amount: 1999, MerchantReference: "shop-2"})
	b = fixture.WaitPhase(t, env.Client, b, v1alpha1.PhaseSucceeded, fixture.Timeout)
	orderB := b.Status.ProviderPaymentID
	if orderB == "" || orderB == orderA {
		t.Fatalf("the new Payment's order is %q (the old one %q)", orderB, orderA)
	}
	second.Stop()
	t.Logf("order A %s, order B %s (status.captureID %q)", orderA, orderB, b.Status.CaptureID)

	refundManager(t, ns)
	fixture.Eventually(t, fixture.Timeout, "a refund at paysim", func() bool {
		c := s.Counters()
		return c.RefundsByPayment[orderA]+c.RefundsByPayment[orderB] > 0
	})
	c := s.Counters()
	if c.RefundsByPayment[orderB] != 0 || c.RefundsByPayment[orderA] != 1 {
		va, _ := s.Payment(paysim.PayPal, orderA)
		vb, _ := s.Payment(paysim.PayPal, orderB)
		t.Errorf("the Refund marked for order %s refunded %d of it and %d of order %s (capture %s): refunds of A %+v, of B %+v",
			orderA, c.RefundsByPayment[orderA], c.RefundsByPayment[orderB], orderB, vb.CaptureID, va.Refunds, vb.Refunds)
	}
}
