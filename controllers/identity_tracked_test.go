package controllers_test

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// TestATrackedPaymentDeletedByHandIsRemembered (SPEC §12.1): a Payment that
// tracks a payment made elsewhere (spec.providerPaymentID, a checkout page)
// is never sent, so it has no create marker and was never held. Once it
// took the money it gets the money-in-flight finalizer; deleted by hand, it
// is written to the ledger before it goes, and a new Payment of the same
// order is parked (DuplicatePayment) instead of being created at the
// provider: the order is not charged twice.
func TestATrackedPaymentDeletedByHandIsRemembered(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "identity")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	adapter, err := kukopay.New(provider.Config{Name: "checkout", APIURL: s.URL + "/kukopay", Credentials: map[string][]byte{"apiKey": []byte("k")}})
	if err != nil {
		t.Fatal(err)
	}
	made, err := adapter.Create(context.Background(), provider.CreateRequest{
		IdempotencyKey: "checkout-page-1", MerchantReference: "order-tracked", Amount: 1999, Currency: "USD",
		Metadata: map[string]string{paysim.MetaOutcome: string(paysim.OutcomeSucceed)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ledgerManager(t, ns)

	tracked := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "tracked", Provider: "kukopay", ProviderPaymentID: made.ID, MerchantReference: "order-tracked"})
	tracked = fixture.WaitPayment(t, env.Client, tracked, "paid and held", func(p *v1alpha1.Payment) bool {
		return p.Status.Phase == v1alpha1.PhaseSucceeded && controllerutil.ContainsFinalizer(p, v1alpha1.FinalizerMoneyInFlight)
	})
	if got := tracked.Annotations[v1alpha1.AnnotationMoneyUID]; got != string(tracked.UID) {
		t.Errorf("held with money-uid %q, want its own UID %q", got, tracked.UID)
	}
	created := s.Counters().PaymentsCreated

	deleteAndWaitGone(t, tracked.DeepCopy())

	again := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-tracked-again", Provider: "kukopay", MerchantReference: "order-tracked"})
	again = fixture.WaitPayment(t, env.Client, again, "decided", func(p *v1alpha1.Payment) bool { return p.Status.Phase != "" })
	if c := meta.FindStatusCondition(again.Status.Conditions, v1alpha1.ConditionNeedsReview); again.Status.Phase != v1alpha1.PhaseUnknown || c == nil || c.Reason != v1alpha1.ReasonDuplicatePayment {
		t.Errorf("a new Payment of the order of a paid tracked payment deleted by hand is %s %s, want Unknown + DuplicatePayment (the ledger remembers the order)",
			again.Status.Phase, fixture.Dump(again.Status.Conditions))
	}
	if n := s.Counters().PaymentsCreated; n != created {
		t.Errorf("paysim created %d payments after the tracked payment went, %d before: the order was charged again", n, created)
	}
}
