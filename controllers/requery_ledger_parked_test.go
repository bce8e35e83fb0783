package controllers_test

import (
	"testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
)

// TestRequeryOfLedgerParkedDuplicateNeverCreates: a Payment parked
// DuplicatePayment because the ledger says another (deleted) Payment of its
// order took the money, then requeried by an operator, is judged against
// the ledger again and parked again, never created: the controller reads
// the ledger for every payment nothing of which was sent (payment.Unsent),
// parked ones included.
func TestRequeryOfLedgerParkedDuplicateNeverCreates(t *testing.T) {
	for _, typ := range []v1alpha1.ProviderType{v1alpha1.ProviderKukoPay, v1alpha1.ProviderStripe} {
		t.Run(string(typ), func(t *testing.T) { requeryLedgerParked(t, typ) })
	}
}

func requeryLedgerParked(t *testing.T, typ v1alpha1.ProviderType) {
	ns := fixture.Namespace(t, env.Client, "requery-ledger")
	s, _ := simProvider(t, ns, typ)
	m := ledgerManager(t, ns)

	a := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-a", Provider: string(typ), Amount: 1999, MerchantReference: "shared-ref"})
	a = fixture.WaitPhase(t, env.Client, a, v1alpha1.PhaseSucceeded, fixture.Timeout)
	deleteAndWaitGone(t, a.DeepCopy())
	created := s.Counters().PaymentsCreated
	creates := len(m.Requests.Calls(fixture.IsKind(fixture.CallCreate)))

	b := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-b", Provider: string(typ), Amount: 1999, MerchantReference: "shared-ref"})
	b = fixture.WaitPayment(t, env.Client, b, "parked as a duplicate", func(p *v1alpha1.Payment) bool {
		return p.Status.Phase == v1alpha1.PhaseUnknown
	})
	t.Logf("parked: %s", fixture.Dump(b.Status.History))
	fixture.Annotate(t, env.Client, b, v1alpha1.AnnotationRequery, "1")
	// Acted on: parked again, or (the defect) marked for a create.
	b = fixture.WaitPayment(t, env.Client, b, "the requery acted on", func(p *v1alpha1.Payment) bool {
		return p.Status.Actions.Requery == "1" && (p.Status.Query.NextTime == nil || p.Status.CreateRequestedAt != nil)
	})
	if b.Status.CreateRequestedAt != nil {
		// Give a create that was marked the time to go out, to say so.
		b = fixture.WaitPayment(t, env.Client, b, "its create", func(p *v1alpha1.Payment) bool { return p.Status.ProviderPaymentID != "" })
	}
	if n := s.Counters().PaymentsCreated; n != created {
		t.Errorf("order-b was created at the provider after a requery (%d creates, %d before): the order is charged twice; status %s", n, created, fixture.Dump(b.Status))
	}
	if n := len(m.Requests.Calls(fixture.IsKind(fixture.CallCreate))); n != creates {
		t.Errorf("%d create calls after the requery, %d before (order-a was %s)", n, creates, a.Status.ProviderPaymentID)
	}
	if b.Status.CreateRequestedAt != nil || b.Status.ProviderPaymentID != "" {
		t.Errorf("order-b requeried: createRequestedAt=%v providerPaymentID=%q phase=%s", b.Status.CreateRequestedAt, b.Status.ProviderPaymentID, b.Status.Phase)
	}
}
