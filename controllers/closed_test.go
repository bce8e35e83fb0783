package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// A settled payment with nothing left to do is closed in the write that
// settles it and leaves the manager's cache of open work; the thin cache
// keeps a small copy. It is still found by a Payment applied again with its
// order (no second create), still answers an operator's annotation set while
// no manager ran, and still goes when deleted.
func TestClosedPaymentsAreFoundAndWoken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := fixture.Namespace(t, env.Client, "closed")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	first := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "first", Provider: "kukopay", MerchantReference: "ORD-7", Outcome: paysim.OutcomeSucceed, After: "1s"})
	got := fixture.WaitPhase(t, env.Client, first, v1alpha1.PhaseSucceeded, 20*time.Second)
	if !got.Status.Closed {
		t.Fatalf("settled with nothing left, stored open: %+v", got.Status)
	}

	fixture.Eventually(t, 10*time.Second, "the manager's cache to let the closed payment go", func() bool {
		return apierrors.IsNotFound(m.Manager.GetCache().Get(ctx, client.ObjectKeyFromObject(first), &v1alpha1.Payment{}))
	})
	// The thin cache is an informer of its own: it may deliver the closing
	// write after the manager's cache dropped the payment.
	var thin v1alpha1.Payment
	fixture.Eventually(t, 10*time.Second, "the thin cache to hold the closed payment", func() bool {
		thin = v1alpha1.Payment{}
		return m.PaymentCache.Get(ctx, client.ObjectKeyFromObject(first), &thin) == nil && thin.Status.Closed
	})
	if thin.Status.AmountReceived != nil {
		t.Fatalf("thin cache: %+v; want the closed payment without its money fields", thin.Status)
	}

	// The same order applied again under another name: the closed payment
	// owns its merchant reference.
	time.Sleep(1100 * time.Millisecond) // creation times have second precision
	second := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "second", Provider: "kukopay", MerchantReference: "ORD-7"})
	again := fixture.WaitPhase(t, env.Client, second, v1alpha1.PhaseUnknown, 20*time.Second)
	if c := meta.FindStatusCondition(again.Status.Conditions, v1alpha1.ConditionNeedsReview); c == nil || c.Reason != v1alpha1.ReasonDuplicatePayment || !strings.Contains(c.Message, "first") {
		t.Fatalf("review %+v, want DuplicatePayment naming the closed payment", c)
	}
	if n := s.Counters().PaymentsCreated; n != 1 {
		t.Fatalf("%d payments created at the provider, want 1", n)
	}

	// An annotation set while no manager runs is answered at start.
	m.Stop()
	fixture.Annotate(t, env.Client, first, v1alpha1.AnnotationRequery, "1")
	m = m.Restart(t)
	fixture.Eventually(t, 20*time.Second, "the requery of the closed payment, set while the manager was down", func() bool {
		return fixture.GetPayment(t, env.Client, first).Status.Actions.Requery == "1"
	})
	fixture.Eventually(t, 20*time.Second, "the payment to close again after its requery", func() bool {
		return fixture.GetPayment(t, env.Client, first).Status.Closed
	})

	// Deleted, it goes (its finalizer let go).
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, 20*time.Second, "the closed payment to be let go", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(first), &v1alpha1.Payment{}))
	})
}
