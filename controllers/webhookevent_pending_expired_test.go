package controllers_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// TestAPendingEventIsAppliedBeforeItIsDeletedForAge: an event the receiver
// stored and acknowledged (200) but could not apply in its budget is
// Pending: the provider will never deliver it again, and only the inbox
// processor can still apply it. When the processor first sees it after
// retention.webhookEvents (the manager down or failing longer than that:
// docs/capacity.md suggests webhookEvents: 24h for large clusters), it
// applies it before the event goes; deleted unapplied, the payment's success
// would be lost.
func TestAPendingEventIsAppliedBeforeItIsDeletedForAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := fixture.Namespace(t, env.Client, "pend")
	p, evt := pendingSuccess(t, ns, "p")

	// The inbox processor comes (back) after the event's retention.
	o := fixture.Run(controllers.ControllerInbox)
	o.Clock = clocktesting.NewFakePassiveClock(time.Now().Add(v1alpha1.DefaultWebhookRetention + time.Hour))
	fixture.StartManager(t, env, ns, o)

	key := client.ObjectKeyFromObject(evt)
	fixture.Eventually(t, fixture.Timeout, "the processor to act on the Pending event", func() bool {
		err := env.Client.Get(ctx, key, &v1alpha1.WebhookEvent{})
		return apierrors.IsNotFound(err) || fixture.GetPayment(t, env.Client, p).Status.Phase == v1alpha1.PhaseSucceeded
	})
	got := fixture.GetPayment(t, env.Client, p)
	err := env.Client.Get(ctx, key, &v1alpha1.WebhookEvent{})
	if got.Status.Phase != v1alpha1.PhaseSucceeded && apierrors.IsNotFound(err) {
		t.Errorf("the Pending event was deleted for its age without ever being applied: the payment stays %s "+
			"although the provider reported it succeeded (and will not deliver it again)", got.Status.Phase)
	}
}

// TestAPendingEventOfAProviderGoneIsDeletedForAge: a Pending event whose
// PaymentProvider is gone can never be applied (its payload cannot be
// parsed without the provider's adapter): past retention it goes, as an
// Orphaned one does, instead of waiting for ever.
func TestAPendingEventOfAProviderGoneIsDeletedForAge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := fixture.Namespace(t, env.Client, "pendgone")
	gone := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gone"}, Spec: v1alpha1.PaymentProviderSpec{Type: v1alpha1.ProviderKukoPay}}
	evt := storePending(t, gone, "g")

	o := fixture.Run(controllers.ControllerInbox)
	o.Clock = clocktesting.NewFakePassiveClock(time.Now().Add(v1alpha1.DefaultWebhookRetention + time.Hour))
	fixture.StartManager(t, env, ns, o)
	fixture.Eventually(t, fixture.Timeout, "the Pending event of a provider gone to be deleted past retention", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(evt), &v1alpha1.WebhookEvent{}))
	})
}

// TestAPendingEventIsKeptWhileItsProviderIsOnlyMissingFromTheCache: a
// Pending event past retention goes when its provider is gone, since it can
// never be applied. Gone is asked of the API server: a cache that does not
// hold the provider yet (one created again a moment ago) deletes nothing,
// and once it does the event is applied.
func TestAPendingEventIsKeptWhileItsProviderIsOnlyMissingFromTheCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := fixture.Namespace(t, env.Client, "pendlag")
	p, evt := pendingSuccess(t, ns, "l")

	var lagging atomic.Bool
	var missed atomic.Int32
	lagging.Store(true)
	o := fixture.Run(controllers.ControllerInbox)
	o.Clock = clocktesting.NewFakePassiveClock(time.Now().Add(v1alpha1.DefaultWebhookRetention + time.Hour))
	o.WrapClient = func(c client.Client) client.Client {
		return fixture.Intercept(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1alpha1.PaymentProvider); ok && key.Namespace == ns && lagging.Load() {
				missed.Add(1)
				return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("paymentproviders").GroupResource(), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	}
	fixture.StartManager(t, env, ns, o)
	fixture.Eventually(t, fixture.Timeout, "the processor to miss the provider three times", func() bool {
		if apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(evt), &v1alpha1.WebhookEvent{})) {
			t.Fatal("the Pending event was deleted for its age while its provider exists: the payment's success is lost")
		}
		return missed.Load() >= 3
	})
	lagging.Store(false)
	fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
}

// pendingSuccess makes, in ns, KukoPay provider "kukopay", its payment
// order-<x> Processing as pay_<x>, and the Pending webhook event that says
// it succeeded (storePending).
func pendingSuccess(t *testing.T, ns, x string) (*v1alpha1.Payment, *v1alpha1.WebhookEvent) {
	t.Helper()
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Quiet: true})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-" + x, Provider: prov.Name,
		MerchantReference: "order-" + x, ProviderPaymentID: "pay_" + x, Amount: 900, Currency: "USD"})
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		st.Phase, st.ProviderPaymentID = v1alpha1.PhaseProcessing, "pay_"+x
	})
	return p, storePending(t, prov, x)
}

// storePending stores, Pending (acknowledged, not applied at receipt), the
// KukoPay webhook of prov saying payment pay_<x> of order-<x> succeeded
// (900 USD).
func storePending(t *testing.T, prov *v1alpha1.PaymentProvider, x string) *v1alpha1.WebhookEvent {
	t.Helper()
	ctx := context.Background()
	ev, err := kukopay.ParseEvent(fixture.KukoPayEvent{ID: "evt_" + x, Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_" + x,
		MerchantRef: "order-" + x, Amount: 900, Currency: "USD"}.Body(t))
	if err != nil {
		t.Fatal(err)
	}
	evt, err := inbox.NewEvent(prov, ev, v1alpha1.ViaWebhook, "kukopay", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, evt); err != nil {
		t.Fatal(err)
	}
	evt.Status.Result, evt.Status.Message = v1alpha1.ResultPending, "not applied at receipt, left to the inbox processor"
	if err := env.Client.Status().Update(ctx, evt); err != nil {
		t.Fatal(err)
	}
	return evt
}
