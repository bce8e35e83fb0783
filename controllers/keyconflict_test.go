package controllers_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// TestKeyConflictConcernsOneCall: a Payment whose idempotency key the provider already
// has for another request body (KukoPay 422 idempotency_error) is neither failed nor
// a problem of the provider: its create's outcome is looked up by merchant reference
// (and found), a conflicting Payment whose reference finds nothing keeps waiting, and
// meanwhile the provider stays Ready and its other payments go through.
func TestKeyConflictConcernsOneCall(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, prov := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment, controllers.ControllerProvider))

	// The first requests under the keys: another body (with metadata) than the
	// Payments below send.
	firstID := fixture.SimCreate(t, s, v1alpha1.ProviderKukoPay, ns+".found", paysim.OutcomeSucceed)
	fixture.SimCreate(t, s, v1alpha1.ProviderKukoPay, ns+".elsewhere", paysim.OutcomeSucceed)
	conflicting := func(name, key, ref string) *v1alpha1.Payment {
		p := &v1alpha1.Payment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.PaymentSpec{
				ProviderRef: v1alpha1.LocalObjectReference{Name: prov.Name}, Amount: v1alpha1.Amount{Value: 1999, Currency: "USD"},
				IdempotencyKey: key, MerchantReference: ref,
			},
		}
		if err := env.Client.Create(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	found := conflicting("found", "key-"+ns+".found", ns+".found")
	waiting := conflicting("waiting", "key-"+ns+".elsewhere", ns+".waiting")

	got := fixture.WaitPhase(t, env.Client, found, v1alpha1.PhaseSucceeded, 20*time.Second)
	if got.Status.ProviderPaymentID != firstID || got.Status.Failure != nil {
		t.Fatalf("the conflicting create was not looked up: id %q (want %q) failure %+v", got.Status.ProviderPaymentID, firstID, got.Status.Failure)
	}
	fixture.Eventually(t, 20*time.Second, "the create whose reference finds nothing to wait on its key conflict", func() bool {
		st := fixture.GetPayment(t, env.Client, waiting).Status
		return st.Query.LastErrorClass == "KeyConflict"
	})

	other := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "other", Provider: prov.Name, Outcome: paysim.OutcomeSucceed})
	fixture.WaitPhase(t, env.Client, other, v1alpha1.PhaseSucceeded, 20*time.Second)
	c := meta.FindStatusCondition(fixture.GetProvider(t, env.Client, ns, prov.Name).Status.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("a key conflict marked the provider not Ready: %+v", c)
	}
	st := fixture.GetPayment(t, env.Client, waiting).Status
	if st.Phase != v1alpha1.PhasePending || st.Failure != nil || meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview) != nil {
		t.Fatalf("a key conflict settled the payment: %+v", st)
	}
	if n := s.Counters().PaymentsCreated; n != 3 {
		t.Errorf("%d payments at the provider, want 3 (two first requests and the other payment)", n)
	}
}
