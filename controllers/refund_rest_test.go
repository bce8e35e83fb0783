package controllers_test

import (
	"fmt"
	"testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// TestARefundOfTheRestIsNeverMoreThanIsLeft: a payment of
// 19.99; 6.00 refunded in the provider's dashboard; a Refund "one" of 1.00
// succeeds and the payment reads the provider's figure (7.00, counting
// "one"). Then the payment's reads fail (the provider answers 500), and a
// Refund "five" of 5.00 succeeds: the payment's figure stays 7.00 without
// it. At the provider 12.00 is refunded, 7.99 is left.
//
// A Refund "rest" without an amount must refund at most 7.99 (or wait for
// the payment's read), and nothing above what is left may be sent (SPEC
// §11.7: over-refund refused before any call). Taking the total as
// max(Refunds succeeded 6.00, figure 7.00) = 7.00, as if the figure counted
// "five", decided 12.99, and paysim refused it as amount_too_large.
func TestARefundOfTheRestIsNeverMoreThanIsLeft(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund-hr")
	m := refundManager(t, ns)
	sim, prov, reads := unreadablePayments(t, ns)
	p := paidPayment(t, ns, prov.Name, "order", 1999)
	id := p.Status.ProviderPaymentID

	if err := sim.Refund(paysim.KukoPay, id, 600); err != nil { // the dashboard
		t.Fatal(err)
	}
	one := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "one", Payment: p.Name, Amount: 100})
	fixture.WaitRefundPhase(t, env.Client, one, v1alpha1.RefundSucceeded)
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 700)

	reads.breakFor(id)
	five := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "five", Payment: p.Name, Amount: 500})
	fixture.WaitRefundPhase(t, env.Client, five, v1alpha1.RefundSucceeded)
	fixture.Eventually(t, fixture.Timeout, "the payment's read of its refunded total to fail", func() bool { return reads.failed.Load() > 0 })
	if got := fixture.GetPayment(t, env.Client, p); !amountIs(got.Status.AmountRefunded, 700, "USD") {
		t.Fatalf("precondition: the payment's figure is %+v, want 700 (not counting five)", got.Status.AmountRefunded)
	}

	calls := len(m.Requests.Calls(fixture.IsRefundCreate))
	rest := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "rest", Payment: p.Name})
	const left = 1999 - 600 - 100 - 500
	var got *v1alpha1.Refund
	fixture.Eventually(t, fixture.Timeout, "the Refund rest to be decided", func() (bool, string) {
		got = fixture.GetRefund(t, env.Client, rest)
		return got.Status.Amount != nil || got.Status.WaitingFor != "" || got.Status.Phase.IsFinal(), fmt.Sprintf("status:\n%s", fixture.Dump(got.Status))
	})
	if a := got.Status.Amount; a != nil && a.Value > left {
		t.Errorf("Refund rest decided %d minor units; the provider has refunded 1200 of 1999 (dashboard 600, one 100, five 500), leaving %d: status\n%s",
			a.Value, left, fixture.Dump(got.Status))
	}
	reads.broken.Store(false)
	got = fixture.WaitRefund(t, env.Client, rest, "final", func(r *v1alpha1.Refund) bool { return r.Status.Phase.IsFinal() })
	if n := len(m.Requests.Calls(fixture.IsRefundCreate)); n != calls && got.Status.Phase == v1alpha1.RefundFailed {
		t.Errorf("an over-refund was sent to the provider (%d refund calls before, %d after) and refused there: %+v", calls, n, got.Status.Failure)
	}
	if got.Status.Phase == v1alpha1.RefundSucceeded && (got.Status.Amount == nil || got.Status.Amount.Value != left) {
		t.Errorf("Refund rest refunded %+v, want %d", got.Status.Amount, left)
	}
}
