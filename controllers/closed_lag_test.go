package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/paymentcache"
)

// Two Payments of one order, created 1.1 s apart (the second is the newer
// by creation time). The second's reconcile is triggered by the typed
// cache, which has both; its merchant-reference look-up goes to the thin
// cache, a separate informer that may not have the first yet. It must be
// parked DuplicatePayment, never created at the provider.
func TestALookupFindsAnOrderTheThinCacheHasNotSeenYet(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "pay")
	s, _ := kukopayAt(t, ns, fixture.Provider{Schedule: []string{"1h"}})
	// The thin cache's watch (of every Payment: no field selector) is
	// lagged; the typed cache's (status.closed!=true) is not.
	lag := fixture.NewWatchLag(4*time.Second, fixture.PaymentWatches(false))
	o := fixture.Run(controllers.ControllerPayment)
	o.Config = lag.Config(env.Config)
	m := fixture.StartManager(t, env, ns, o)
	if !m.PaymentCache.WaitForCacheSync(context.Background()) {
		t.Fatal("thin cache not synced")
	}
	lag.Start() // from now on every event reaches the thin cache 4 s late

	first := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "first", Provider: "kukopay", MerchantReference: "ORD-1001"})
	time.Sleep(1100 * time.Millisecond) // creation times have second precision
	second := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "second", Provider: "kukopay", MerchantReference: "ORD-1001"})

	fixture.Eventually(t, 15*time.Second, "the first payment's provider id", func() bool {
		return fixture.GetPayment(t, env.Client, first).Status.ProviderPaymentID != ""
	})
	fixture.Eventually(t, 15*time.Second, "the second payment decided", func() bool {
		st := fixture.GetPayment(t, env.Client, second).Status
		return st.Phase != "" || st.CreateRequestedAt != nil
	})
	time.Sleep(2 * time.Second)
	if lag.Lagged() == 0 {
		t.Fatal("the thin cache's watch was not lagged: the test proves nothing")
	}
	got := fixture.GetPayment(t, env.Client, second)
	if got.Status.CreateRequestedAt != nil || got.Status.ProviderPaymentID != "" {
		t.Errorf("the second Payment of order ORD-1001 was sent to the provider: phase %s, provider id %q", got.Status.Phase, got.Status.ProviderPaymentID)
	}
	if n := len(m.Requests.Calls(fixture.IsPost)); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	if n := s.Counters().PaymentsCreated; n != 1 {
		t.Errorf("%d payments created at the provider for one order, want 1", n)
	}
	if got.Status.Phase != v1alpha1.PhaseUnknown {
		t.Errorf("second: phase %s, want Unknown (DuplicatePayment)", got.Status.Phase)
	}
}

// A look-up lists its key's bucket and keeps the payments that have the
// key: with one bucket for every key (Buckets: 1), a look-up by one order
// still finds that order's payment and no other.
func TestALookupInABucketSharedByEveryKeyFindsOnlyItsOwn(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "one-bucket")
	var thin *paymentcache.Cache
	o := fixture.Run(controllers.ControllerRetention)
	o.Before = func(mgr ctrl.Manager, _ *controllers.Wiring) error {
		var err error
		if thin, err = paymentcache.New(mgr, paymentcache.Options{Namespaces: []string{ns}, Indexes: controllers.PaymentLookups(), Buckets: 1}); err != nil {
			return err
		}
		return mgr.Add(thin)
	}
	fixture.StartManager(t, env, ns, o)
	for _, ref := range []string{"ORD-1", "ORD-2", "ORD-3"} {
		fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: strings.ToLower(ref), Provider: "kukopay", MerchantReference: ref})
	}
	fixture.Eventually(t, 10*time.Second, "a look-up by ORD-2 to find its payment only", func() (bool, string) {
		var l v1alpha1.PaymentList
		if err := thin.List(context.Background(), &l, client.InNamespace(ns), client.MatchingFields{inbox.IndexPaymentMerchantRef: inbox.Key("kukopay", "ORD-2")}); err != nil {
			return false, err.Error()
		}
		var all v1alpha1.PaymentList
		if err := thin.List(context.Background(), &all, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		return len(all.Items) == 3 && len(l.Items) == 1 && l.Items[0].Name == "ord-2", fmt.Sprintf("%d of %d found", len(l.Items), len(all.Items))
	})
}
