package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
)

// TestAnEventThatWaitedForItsPaymentIsNotDroppedSilently: past its
// provider's retention.webhookEvents an Orphaned event is deleted. One that
// waited for a Payment it named (a dispute lost before the payment's
// success, say) leaves a Warning Event WebhookEventExpired on that Payment:
// the news is gone, and a human may need it. One no Payment matched has no
// one to tell.
func TestAnEventThatWaitedForItsPaymentIsNotDroppedSilently(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "expired")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "short", Type: v1alpha1.ProviderKukoPay, Quiet: true, Retention: time.Nanosecond})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "owed", Provider: prov.Name})
	o := fixture.Run(controllers.ControllerInbox)
	m := fixture.StartManager(t, env, ns, o)
	fixture.WaitCached(t, m.Manager.GetCache(), p)

	orphan := func(id, paymentName, merchantRef, why string) {
		t.Helper()
		evt := &v1alpha1.WebhookEvent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.WebhookEventName(prov.Name, id)},
			Spec: v1alpha1.WebhookEventSpec{Provider: prov.Name, EventID: id, Type: "dispute.closed", Via: v1alpha1.ViaBackfill,
				ReceivedAt: metav1.Now(), Payment: paymentName, MerchantReference: merchantRef},
		}
		if err := env.Client.Create(context.Background(), evt); err != nil {
			t.Fatal(err)
		}
		evt.Status.Result, evt.Status.Message = v1alpha1.ResultOrphaned, why
		if err := env.Client.Status().Update(context.Background(), evt); err != nil {
			t.Fatal(err)
		}
	}
	orphan("evt_unmatched", "", "nobody", "no payment matches")
	orphan("evt_waited", p.Name, "", "payment owed: waiting for the payment to succeed")
	// Stored before its payment could be matched (spec.payment empty), and
	// matched since: its payment is told too.
	orphan("evt_matched_later", "", p.MerchantRef(), "payment owed: waiting for the payment to succeed")
	for _, id := range []string{"evt_unmatched", "evt_waited", "evt_matched_later"} {
		fixture.Eventually(t, fixture.Timeout, "event "+id+" deleted past retention", func() bool {
			return fixture.WebhookEventFor(t, env.Client, ns, prov.Name, id) == nil
		})
	}
	e := m.Events.Wait(t, "Warning", v1alpha1.ReasonWebhookEventExpired)
	if e.Name != p.Name || !strings.Contains(e.Message, "waiting for the payment to succeed") {
		t.Errorf("Event %+v; want one on payment %s saying why the event waited", e, p.Name)
	}
	fixture.Eventually(t, fixture.Timeout, "a WebhookEventExpired Event on "+p.Name+" for each event that waited for it", func() (bool, string) {
		var named []string
		for _, e := range m.Events.About(p.Name, v1alpha1.ReasonWebhookEventExpired) {
			for _, id := range []string{"evt_waited", "evt_matched_later", "evt_unmatched"} {
				if strings.Contains(e.Message, id+" ") {
					named = append(named, id)
				}
			}
		}
		slices.Sort(named)
		return slices.Equal(named, []string{"evt_matched_later", "evt_waited"}), fmt.Sprintf("events named %v", named)
	})
}
