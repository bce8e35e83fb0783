package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
	// Stored Orphaned before the manager starts: no reconcile of a fresh
	// event (Pending, applied or ignored by the processor) races the
	// result written here.
	orphan(t, prov, "evt_unmatched", "", "nobody", "no payment matches")
	orphan(t, prov, "evt_waited", p.Name, "", "payment owed: waiting for the payment to succeed")
	// Stored before its payment could be matched (spec.payment empty), and
	// matched since: its payment is told too.
	orphan(t, prov, "evt_matched_later", "", p.MerchantRef(), "payment owed: waiting for the payment to succeed")
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerInbox))
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

// TestAnExpiredEventWaitsUntilItsPaymentCanBeTold: the Payment an expired
// event waited for is read before the event is deleted. While that read
// fails the event stays (the reconcile comes back with its backoff); once it
// succeeds the event goes and the Payment has its Warning, even when the
// delete's answer is lost (the retry finds the event gone and does nothing
// more). Deleting first, or telling after the delete, would lose the news
// with no one told.
func TestAnExpiredEventWaitsUntilItsPaymentCanBeTold(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "expired-read")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "short", Type: v1alpha1.ProviderKukoPay, Quiet: true, Retention: time.Nanosecond})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "owed", Provider: prov.Name})
	var failing, answerLost atomic.Bool
	var failed atomic.Int32
	failing.Store(true)
	o := fixture.Run(controllers.ControllerInbox)
	o.WrapClient = func(c client.Client) client.Client {
		return fixture.Intercept(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1alpha1.Payment); ok && key.Name == p.Name && failing.Load() {
				failed.Add(1)
				return apierrors.NewServiceUnavailable("the API server is overloaded")
			}
			return c.Get(ctx, key, obj, opts...)
		}, Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			err := c.Delete(ctx, obj, opts...)
			if _, ok := obj.(*v1alpha1.WebhookEvent); ok && err == nil && answerLost.CompareAndSwap(false, true) {
				time.Sleep(time.Second) // the cache hears of the delete before its answer is lost
				return apierrors.NewServerTimeout(v1alpha1.GroupVersion.WithResource("webhookevents").GroupResource(), "delete", 1)
			}
			return err
		}})
	}
	orphan(t, prov, "evt_waited", p.Name, "", "payment owed: waiting for the payment to succeed")
	m := fixture.StartManager(t, env, ns, o)
	fixture.Eventually(t, fixture.Timeout, "the payment's read to fail twice (a second read comes only if the event was kept)", func() bool { return failed.Load() >= 2 })
	if fixture.WebhookEventFor(t, env.Client, ns, prov.Name, "evt_waited") == nil {
		t.Fatal("the expired event was deleted while its payment could not be read: no one was told")
	}
	if got := m.Events.About(p.Name, v1alpha1.ReasonWebhookEventExpired); len(got) != 0 {
		t.Fatalf("Events %+v before the event was deleted", got)
	}
	failing.Store(false)
	fixture.Eventually(t, fixture.Timeout, "the expired event deleted once its payment is read", func() bool {
		return fixture.WebhookEventFor(t, env.Client, ns, prov.Name, "evt_waited") == nil
	})
	if e := m.Events.Wait(t, "Warning", v1alpha1.ReasonWebhookEventExpired); e.Name != p.Name || !strings.Contains(e.Message, "evt_waited ") {
		t.Errorf("Event %+v; want one on payment %s naming evt_waited", e, p.Name)
	}
}

// TestALaggingCopyOfAnExpiredEventIsJudgedAgain: the manager's cache may
// hold an older copy of an event than the API server (applied since, say).
// Past retention such a copy is neither told on its Payment (that one is
// read from the API server first) nor deleted (the delete is of the
// version judged, so it conflicts): it is judged again, and the version
// the cache catches up with decides.
func TestALaggingCopyOfAnExpiredEventIsJudgedAgain(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "expired-lag")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "short", Type: v1alpha1.ProviderKukoPay, Quiet: true, Retention: time.Nanosecond})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "owed", Provider: prov.Name})
	// One with a Payment to tell, one with no one; each written again since
	// the copy the manager is given (still Orphaned, so still in its cache).
	stale := map[string]*v1alpha1.WebhookEvent{}
	for _, id := range []string{"evt_told", "evt_untold"} {
		named := map[string]string{"evt_told": p.Name}[id]
		evt := orphan(t, prov, id, named, "", "payment owed: waiting for the payment to succeed")
		stale[evt.Name] = evt.DeepCopy()
		evt.Status.Message = "payment owed: still waiting for the payment to succeed"
		if err := env.Client.Status().Update(context.Background(), evt); err != nil {
			t.Fatal(err)
		}
	}
	var lagging atomic.Bool
	lagging.Store(true)
	var reads sync.Map // event name -> *atomic.Int32: lagging reads of it
	o := fixture.Run(controllers.ControllerInbox)
	o.WrapClient = func(c client.Client) client.Client {
		return fixture.Intercept(c, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if old, ok := stale[key.Name]; ok && key.Namespace == ns && lagging.Load() {
				n, _ := reads.LoadOrStore(key.Name, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
				old.DeepCopyInto(obj.(*v1alpha1.WebhookEvent))
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		}})
	}
	m := fixture.StartManager(t, env, ns, o)
	fixture.Eventually(t, fixture.Timeout, "each lagging copy judged three times", func() bool {
		for _, id := range []string{"evt_told", "evt_untold"} {
			if fixture.WebhookEventFor(t, env.Client, ns, prov.Name, id) == nil {
				t.Fatalf("event %s was deleted from a lagging copy", id)
			}
		}
		for name := range stale {
			n, ok := reads.Load(name)
			if !ok || n.(*atomic.Int32).Load() < 3 {
				return false
			}
		}
		return true
	})
	lagging.Store(false)
	if got := m.Events.About(p.Name, v1alpha1.ReasonWebhookEventExpired); len(got) != 0 {
		t.Errorf("Events %+v told from a lagging copy", got)
	}
	// The current version decides: both waited past retention.
	for _, id := range []string{"evt_told", "evt_untold"} {
		fixture.Eventually(t, fixture.Timeout, "event "+id+" deleted once the cache's copy is current", func() bool {
			return fixture.WebhookEventFor(t, env.Client, ns, prov.Name, id) == nil
		})
	}
	if e := m.Events.Wait(t, "Warning", v1alpha1.ReasonWebhookEventExpired); e.Name != p.Name || !strings.Contains(e.Message, "evt_told (") || !strings.Contains(e.Message, "still waiting") {
		t.Errorf("Event %+v; want one on payment %s telling evt_told's current version", e, p.Name)
	}
}

// orphan stores an event of prov that waits (Orphaned, why) for the payment
// it names or the one its merchant reference will match.
func orphan(t *testing.T, prov *v1alpha1.PaymentProvider, id, paymentName, merchantRef, why string) *v1alpha1.WebhookEvent {
	t.Helper()
	evt := &v1alpha1.WebhookEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: prov.Namespace, Name: v1alpha1.WebhookEventName(prov.Name, id)},
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
	return evt
}
