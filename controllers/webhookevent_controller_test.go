package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
)

// inboxKukoPay creates a KukoPay provider, with the signing secret "secret",
// in ns (one of the processor's namespaces that no other subtest uses),
// and waits until rcv sees it.
func inboxKukoPay(t *testing.T, rcv *fixture.Receiver, ns string, mods ...func(*fixture.Provider)) *v1alpha1.PaymentProvider {
	t.Helper()
	p := fixture.Provider{
		Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay,
		SigningSecrets: map[string]string{"current": "secret"},
	}
	for _, m := range mods {
		m(&p)
	}
	prov := fixture.CreateProvider(t, env.Client, p)
	fixture.WaitCached(t, rcv.Cache, prov)
	return prov
}

func deliverKukoPay(t *testing.T, url string, ev fixture.KukoPayEvent) fixture.Response {
	t.Helper()
	body := ev.Body(t)
	return fixture.Send(t, "POST", url, body, fixture.KukoPayHeader(body, time.Now(), "secret"))
}

// flushInboxProcessor returns once the processor (running one worker) has
// handled every change of ns's WebhookEvents made before the call: it stores
// a fence event that expires at once, Orphaned (a Pending one would be
// applied first), and waits for the processor to delete it. Watch events
// arrive in order and one worker takes them in order, so when the fence is
// gone, nothing earlier is pending. A test can then change
// a Payment knowing that only the Payment watch can wake an orphan.
func flushInboxProcessor(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	fence := &v1alpha1.PaymentProvider{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fence"}, fence); apierrors.IsNotFound(err) {
		fence = fixture.CreateProvider(t, env.Client, fixture.Provider{
			Namespace: ns, Name: "fence", Type: v1alpha1.ProviderKukoPay, Retention: time.Nanosecond,
		})
	} else if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("fence-%d", time.Now().UnixNano())
	evt := &v1alpha1.WebhookEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.WebhookEventName(fence.Name, id)},
		Spec:       v1alpha1.WebhookEventSpec{Provider: fence.Name, EventID: id, Via: v1alpha1.ViaBackfill, ReceivedAt: metav1.Now()},
	}
	if err := env.Client.Create(ctx, evt); err != nil {
		t.Fatal(err)
	}
	// (Should the processor have written it first, it goes as a finished
	// event, FinishedEvents running every second here.)
	evt.Status.Result, evt.Status.Message = v1alpha1.ResultOrphaned, "fence"
	if err := env.Client.Status().Update(ctx, evt); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	fixture.Eventually(t, fixture.Timeout, "the processor to reach the fence event", func() bool {
		return fixture.WebhookEventFor(t, env.Client, ns, fence.Name, id) == nil
	})
}

func TestWebhookEventProcessor(t *testing.T) {
	t.Parallel()
	// The inbox processor on a manager of its own over several namespaces,
	// as the manager process runs it over every one, next to a receiver on
	// its own manager. Its namespaces are made first and it holds those
	// only: over every namespace it would apply and expire the events of
	// the tests beside it. One worker makes its queue FIFO, which
	// flushInboxProcessor relies on.
	spaces := make(chan string, 5)
	o := fixture.Run(controllers.ControllerInbox)
	for range cap(spaces) {
		ns := fixture.Namespace(t, env.Client, "inbox")
		spaces <- ns
		o.Namespaces = append(o.Namespaces, ns)
	}
	next := func(t *testing.T) string {
		select {
		case ns := <-spaces:
			return ns
		default:
			t.Fatal("every namespace made for the processor is taken: make more")
			return ""
		}
	}
	o.PendingGrace, o.InboxMaxConcurrentReconciles = 2*time.Second, 1
	o.FinishedEventsEvery = time.Second
	m := fixture.StartManager(t, env, "", o)
	rcv := fixture.StartReceiver(t, env, fixture.ReceiverOptions{})

	// Issue 5, test 7.
	t.Run("event before its payment is orphaned, then applied once the payment exists", func(t *testing.T) {
		prov := inboxKukoPay(t, rcv, next(t))
		ev := fixture.KukoPayEvent{ID: "evt_7", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_7", MerchantRef: "order-7", Amount: 700, Currency: "USD"}
		r := deliverKukoPay(t, rcv.WebhookURL(prov.Namespace, prov.Name), ev)
		if r.Code != http.StatusOK {
			t.Fatalf("status %d, want 200 for an event whose payment does not exist yet", r.Code)
		}
		if e := fixture.WebhookEventFor(t, env.Client, prov.Namespace, prov.Name, "evt_7"); e == nil || e.Status.Result != v1alpha1.ResultOrphaned {
			t.Fatalf("event %+v, want Orphaned", e)
		}
		flushInboxProcessor(t, prov.Namespace)

		p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: prov.Namespace, Name: "order-7", Provider: prov.Name, MerchantReference: "order-7", ProviderPaymentID: "pay_7", Amount: 700, Currency: "USD"})
		e := fixture.WaitEventResult(t, env.Client, prov.Namespace, prov.Name, "evt_7", v1alpha1.ResultApplied, fixture.Timeout)
		got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
		if n := fixture.Transitions(got); n != 1 {
			t.Errorf("%d transitions, want 1", n)
		}
		if e.Status.Attempts != 2 {
			t.Errorf("attempts %d, want 2 (orphaned at receipt, applied by the processor)", e.Status.Attempts)
		}
	})

	t.Run("a refund delivered before its success waits and is applied after it", func(t *testing.T) {
		prov := inboxKukoPay(t, rcv, next(t))
		p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: prov.Namespace, Name: "order-r", Provider: prov.Name, MerchantReference: "order-r", ProviderPaymentID: "pay_r", Amount: 1000, Currency: "USD"})
		fixture.WaitCached(t, rcv.Cache, p)
		url := rcv.WebhookURL(prov.Namespace, prov.Name)
		refund := fixture.KukoPayEvent{ID: "evt_refund", Type: "refund.succeeded", Status: "succeeded", PaymentID: "pay_r", MerchantRef: "order-r", Amount: 400, RefundedTotal: 400, Currency: "USD"}
		if r := deliverKukoPay(t, url, refund); r.Code != http.StatusOK {
			t.Fatalf("refund: status %d", r.Code)
		}
		if e := fixture.WebhookEventFor(t, env.Client, prov.Namespace, prov.Name, "evt_refund"); e == nil || e.Status.Result != v1alpha1.ResultOrphaned {
			t.Fatalf("early refund %+v, want Orphaned (waiting), not Ignored (lost)", e)
		}
		flushInboxProcessor(t, prov.Namespace)
		success := fixture.KukoPayEvent{ID: "evt_success", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_r", MerchantRef: "order-r", Amount: 1000, Currency: "USD"}
		if r := deliverKukoPay(t, url, success); r.Code != http.StatusOK {
			t.Fatalf("success: status %d", r.Code)
		}
		fixture.WaitEventResult(t, env.Client, prov.Namespace, prov.Name, "evt_refund", v1alpha1.ResultApplied, fixture.Timeout)
		got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhasePartiallyRefunded, fixture.Timeout)
		if n := fixture.Transitions(got); n != 2 {
			t.Errorf("%d transitions, want 2 (Succeeded, PartiallyRefunded)", n)
		}
	})

	// Issue 5, test 9.
	t.Run("receiver stopped after the inbox write and before the apply: the processor applies", func(t *testing.T) {
		// The first WebhookEvent create goes through and every later write
		// fails, as if the process died right after the inbox write; the
		// receiver is stopped then.
		var crashed atomic.Bool
		var dying *fixture.Receiver
		dying = fixture.StartReceiver(t, env, fixture.ReceiverOptions{WrapClient: fixture.AroundWrites(func(w fixture.Write, do func() error) error {
			if crashed.Load() {
				return errProcessGone
			}
			err := do()
			if _, ok := w.Object.(*v1alpha1.WebhookEvent); ok && w.Verb == "create" && err == nil && crashed.CompareAndSwap(false, true) {
				go func() { _ = dying.Stop() }()
			}
			return err
		})})
		prov := inboxKukoPay(t, dying, next(t))
		p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: prov.Namespace, Name: "order-9", Provider: prov.Name, MerchantReference: "order-9", ProviderPaymentID: "pay_9", Amount: 900, Currency: "USD"})
		fixture.WaitCached(t, dying.Cache, p)
		ev := fixture.KukoPayEvent{ID: "evt_9", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_9", MerchantRef: "order-9", Amount: 900, Currency: "USD"}
		body := ev.Body(t)
		// The provider may or may not get an answer from a dying process;
		// either way it is not the receiver that applies the event. Until
		// the inbox write, nothing is stored, and the provider delivers
		// again (a receiver not ready yet on a loaded machine answers 503).
		for deadline := time.Now().Add(fixture.Timeout); !crashed.Load() && time.Now().Before(deadline); {
			req, _ := http.NewRequest("POST", dying.WebhookURL(prov.Namespace, prov.Name), strings.NewReader(string(body)))
			req.Header = fixture.KukoPayHeader(body, time.Now(), "secret")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			if !crashed.Load() {
				time.Sleep(200 * time.Millisecond)
			}
		}
		if err := dying.Stop(); err != nil {
			t.Fatalf("receiver stop: %v", err)
		}
		if !crashed.Load() {
			t.Fatal("the receiver never wrote the inbox record")
		}
		e := fixture.WebhookEventFor(t, env.Client, prov.Namespace, prov.Name, "evt_9")
		if e == nil || e.Status.Result.IsDone() {
			t.Fatalf("after the crash the event is %+v, want stored and not yet applied", e)
		}
		if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != "" {
			t.Fatalf("the crashed receiver moved the payment to %s", got.Status.Phase)
		}

		e = fixture.WaitEventResult(t, env.Client, prov.Namespace, prov.Name, "evt_9", v1alpha1.ResultApplied, fixture.Timeout)
		got := fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
		if e.Status.Attempts != 1 || fixture.Transitions(got) != 1 {
			t.Fatalf("attempts %d, transitions %d; want the processor's single apply", e.Status.Attempts, fixture.Transitions(got))
		}
		// The provider, having had no good answer, delivers again to a
		// healthy replica: a duplicate, still one transition.
		fixture.WaitCached(t, rcv.Cache, prov)
		r := deliverKukoPay(t, rcv.WebhookURL(prov.Namespace, prov.Name), ev)
		if r.Code != http.StatusOK || !strings.Contains(r.Body, "duplicate") {
			t.Fatalf("redelivery: %d %s, want 200 duplicate", r.Code, r.Body)
		}
		if got := fixture.GetPayment(t, env.Client, p); fixture.Transitions(got) != 1 {
			t.Fatalf("%d transitions after redelivery, want 1", fixture.Transitions(got))
		}
	})

	t.Run("finished events leave the cache and are deleted past the provider's retention", func(t *testing.T) {
		short := inboxKukoPay(t, rcv, next(t), func(p *fixture.Provider) { p.Retention = 3 * time.Second })
		long := inboxKukoPay(t, rcv, next(t))
		for _, c := range []struct {
			prov *v1alpha1.PaymentProvider
			id   string
		}{{short, "evt_old"}, {long, "evt_kept"}} {
			ev := fixture.KukoPayEvent{ID: c.id, Type: "customer.created", Status: "succeeded", PaymentID: "pay_" + c.id, MerchantRef: "order-" + c.id, Amount: 1, Currency: "USD"}
			if r := deliverKukoPay(t, rcv.WebhookURL(c.prov.Namespace, c.prov.Name), ev); r.Code != http.StatusOK {
				t.Fatalf("status %d", r.Code)
			}
		}
		kept := fixture.WaitEventResult(t, env.Client, long.Namespace, long.Name, "evt_kept", v1alpha1.ResultIgnored, fixture.Timeout)
		// Finished: the API server has it, the manager's cache lets it go.
		fixture.Eventually(t, fixture.Timeout, "the finished event to leave the manager's cache", func() bool {
			return apierrors.IsNotFound(m.Client().Get(context.Background(), client.ObjectKeyFromObject(kept), &v1alpha1.WebhookEvent{}))
		})
		fixture.Eventually(t, fixture.Timeout, "the finished event past retention to be deleted", func() bool {
			return fixture.WebhookEventFor(t, env.Client, short.Namespace, short.Name, "evt_old") == nil
		})
		// The pass that deleted it kept the one within retention, and
		// counted it for the gauge.
		if fixture.WebhookEventFor(t, env.Client, long.Namespace, long.Name, "evt_kept") == nil {
			t.Fatal("an event within its provider's retention was deleted")
		}
		fixture.Eventually(t, fixture.Timeout, "the kept event counted in paywarden_webhook_events", func() (bool, string) {
			got := fixture.Gauge(t, controllers.InboxCollector{Reader: m.Client(), Finished: m.FinishedEvents}, "paywarden_webhook_events",
				map[string]string{"namespace": long.Namespace, "provider": long.Name, "result": string(v1alpha1.ResultIgnored)})
			return got == 1, fmt.Sprintf("gauge %v, want 1", got)
		})
	})
}

// errProcessGone is what a crashed receiver's writes amount to: nothing.
var errProcessGone = errors.New("receiver process is gone")
