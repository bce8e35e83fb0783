package controllers_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Quiet: true})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-p", Provider: prov.Name,
		MerchantReference: "order-p", ProviderPaymentID: "pay_p", Amount: 900, Currency: "USD"})
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		st.Phase, st.ProviderPaymentID = v1alpha1.PhaseProcessing, "pay_p"
	})

	body := fixture.KukoPayEvent{ID: "evt_p", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_p",
		MerchantRef: "order-p", Amount: 900, Currency: "USD"}.Body(t)
	ev, err := kukopay.ParseEvent(body)
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
	err = env.Client.Get(ctx, key, &v1alpha1.WebhookEvent{})
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
	body := fixture.KukoPayEvent{ID: "evt_g", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_g",
		MerchantRef: "order-g", Amount: 900, Currency: "USD"}.Body(t)
	ev, err := kukopay.ParseEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	evt, err := inbox.NewEvent(gone, ev, v1alpha1.ViaWebhook, "kukopay", time.Now())
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

	o := fixture.Run(controllers.ControllerInbox)
	o.Clock = clocktesting.NewFakePassiveClock(time.Now().Add(v1alpha1.DefaultWebhookRetention + time.Hour))
	fixture.StartManager(t, env, ns, o)
	fixture.Eventually(t, fixture.Timeout, "the Pending event of a provider gone to be deleted past retention", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(evt), &v1alpha1.WebhookEvent{}))
	})
}
