package webhookreceiver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
)

// TestAnEventAboutAnotherProviderPaymentIsADuplicatePaymentReview: a signed
// webhook for the same order (merchant reference) but another provider
// payment than the one recorded is a possible double charge. Through the
// receiver and the inbox it raises NeedsReview=DuplicatePayment naming every
// id with a Warning Event, and never changes the phase: a success for
// payment B does not pass as stale news about A, and a failure of payment C
// does not fail an order A paid.
func TestAnEventAboutAnotherProviderPaymentIsADuplicatePaymentReview(t *testing.T) {
	k := newKukoPay(t)
	p := k.payment(t, "order-dup", "order-dup", "pay_A", 1500)
	wantCode(t, k.deliver(t, k.event("evt_a", "payment.succeeded", "succeeded", p)), http.StatusOK)

	second := k.event("evt_b", "payment.succeeded", "succeeded", p)
	second.PaymentID = "pay_B"
	wantCode(t, k.deliver(t, second), http.StatusOK)
	failed := k.event("evt_c", "payment.failed", "failed", p)
	failed.PaymentID = "pay_C"
	wantCode(t, k.deliver(t, failed), http.StatusOK)

	for _, id := range []string{"evt_b", "evt_c"} {
		if e := fixture.WaitEventResult(t, env.Client, k.ns, k.name, id, "", fixture.Timeout); e == nil || e.Status.Result == v1alpha1.ResultStale {
			t.Errorf("event %s recorded as %+v, want stored and not passed off as stale", id, e)
		}
	}
	got := fixture.GetPayment(t, env.Client, p)
	if got.Status.Phase != v1alpha1.PhaseSucceeded || got.Status.ProviderPaymentID != "pay_A" {
		t.Fatalf("payment %s with provider payment %q, want still Succeeded with pay_A", got.Status.Phase, got.Status.ProviderPaymentID)
	}
	if got.Status.AmountReceived == nil || got.Status.AmountReceived.Value != 1500 {
		t.Errorf("amountReceived %+v, want the 1500 of pay_A, counted once", got.Status.AmountReceived)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionNeedsReview)
	if c == nil || c.Reason != v1alpha1.ReasonDuplicatePayment || !strings.Contains(c.Message, "pay_A") ||
		!strings.Contains(c.Message, "pay_B") || !strings.Contains(c.Message, "pay_C") {
		t.Fatalf("review %+v, want DuplicatePayment naming pay_A, pay_B and pay_C (the failed pay_C never hides the paid pay_B)", c)
	}
	fixture.Eventually(t, fixture.Timeout, "a Warning Event DuplicatePayment", func() (bool, string) {
		var l eventsv1.EventList
		if err := env.Client.List(context.Background(), &l, client.InNamespace(k.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range l.Items {
			if e.Regarding.Name == p.Name && e.Reason == v1alpha1.ReasonDuplicatePayment && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, "no Warning Event DuplicatePayment for the payment"
	})
}
