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
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/inbox/inboxtest"
)

// processor is a manager running only the inbox processor, as the manager
// process would, next to a receiver running on its own manager.
type inboxProcessor struct {
	mgr   ctrl.Manager
	inbox *inbox.Inbox // for the test's stand-in backfill
}

// startInboxProcessor starts the WebhookEventReconciler on its own manager the way
// the manager main wires it, and stops it when the test ends.
func startInboxProcessor(t *testing.T, grace time.Duration, workers int) *inboxProcessor {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := inbox.SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	r := &controllers.WebhookEventReconciler{
		Client:       mgr.GetClient(),
		APIReader:    mgr.GetAPIReader(),
		Scheme:       mgr.GetScheme(),
		Recorder:     mgr.GetEventRecorder("paywarden"),
		PendingGrace: grace,
		// One worker makes the queue FIFO, which flushInboxProcessor relies on.
		MaxConcurrentReconciles: workers,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("processor manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("processor cache did not sync")
	}
	return &inboxProcessor{mgr: mgr, inbox: &inbox.Inbox{
		Client: mgr.GetClient(), Reader: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
	}}
}

func startInboxReceiver(t *testing.T, ro inboxtest.ReceiverOptions) *inboxtest.Receiver {
	t.Helper()
	r, err := inboxtest.StartReceiver(env.Config, env.Scheme, ro)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

// kukoPay creates a KukoPay provider in a fresh namespace, visible to rcv.
func inboxKukoPay(t *testing.T, rcv *inboxtest.Receiver, mods ...func(*inboxtest.Provider)) *v1alpha1.PaymentProvider {
	t.Helper()
	p := inboxtest.Provider{
		Namespace: inboxtest.Namespace(t, env.Client, "inbox"), Name: "kukopay", Type: v1alpha1.ProviderKukoPay,
		SigningSecrets: map[string]string{"current": "secret"},
	}
	for _, m := range mods {
		m(&p)
	}
	prov := inboxtest.CreateProvider(t, env.Client, p)
	inboxtest.WaitCached(t, rcv.Cache, prov)
	return prov
}

func deliverKukoPay(t *testing.T, url string, ev inboxtest.KukoPayEvent) inboxtest.Response {
	t.Helper()
	body := ev.Body(t)
	return inboxtest.Send(t, "POST", url, body, inboxtest.KukoPayHeader(body, time.Now(), "secret"))
}

func waitEventResult(t *testing.T, ns, provider, eventID string, want v1alpha1.EventResult) *v1alpha1.WebhookEvent {
	t.Helper()
	var got *v1alpha1.WebhookEvent
	inboxtest.Eventually(t, inboxtest.Timeout, func() (bool, string) {
		got = inboxtest.EventFor(t, env.Client, ns, provider, eventID)
		if got == nil {
			return false, "event " + eventID + " not stored"
		}
		return got.Status.Result == want, "event " + eventID + " is " + string(got.Status.Result) + ", want " + string(want)
	})
	return got
}

func waitPaymentPhase(t *testing.T, p *v1alpha1.Payment, want v1alpha1.PaymentPhase) *v1alpha1.Payment {
	t.Helper()
	var got *v1alpha1.Payment
	inboxtest.Eventually(t, inboxtest.Timeout, func() (bool, string) {
		got = inboxtest.GetPayment(t, env.Client, p)
		return got.Status.Phase == want, "payment " + p.Name + " is " + string(got.Status.Phase) + ", want " + string(want)
	})
	return got
}

// flushInboxProcessor returns once the processor (running one worker) has
// handled every change of ns's WebhookEvents made before the call: it stores
// a fence event that expires at once and waits for the processor to delete
// it. Watch events arrive in order and one worker takes them in order, so
// when the fence is gone, nothing earlier is pending. A test can then change
// a Payment knowing that only the Payment watch can wake an orphan.
func flushInboxProcessor(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	fence := &v1alpha1.PaymentProvider{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fence"}, fence); apierrors.IsNotFound(err) {
		fence = inboxtest.CreateProvider(t, env.Client, inboxtest.Provider{
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
	inboxtest.Eventually(t, inboxtest.Timeout, func() (bool, string) {
		return inboxtest.EventFor(t, env.Client, ns, fence.Name, id) == nil, "the processor has not reached the fence event"
	})
}

func TestWebhookEventProcessor(t *testing.T) {
	const grace = 2 * time.Second
	startInboxProcessor(t, grace, 1)
	rcv := startInboxReceiver(t, inboxtest.ReceiverOptions{})

	// Issue 5, test 7.
	t.Run("event before its payment is orphaned, then applied once the payment exists", func(t *testing.T) {
		prov := inboxKukoPay(t, rcv)
		ev := inboxtest.KukoPayEvent{ID: "evt_7", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_7", MerchantRef: "order-7", Amount: 700, Currency: "USD"}
		r := deliverKukoPay(t, rcv.WebhookURL(prov.Namespace, prov.Name), ev)
		if r.Code != http.StatusOK {
			t.Fatalf("status %d, want 200 for an event whose payment does not exist yet", r.Code)
		}
		if e := inboxtest.EventFor(t, env.Client, prov.Namespace, prov.Name, "evt_7"); e == nil || e.Status.Result != v1alpha1.ResultOrphaned {
			t.Fatalf("event %+v, want Orphaned", e)
		}
		flushInboxProcessor(t, prov.Namespace)

		p := inboxtest.CreatePayment(t, env.Client, prov.Namespace, "order-7", prov.Name, "order-7", "pay_7", 700, "USD")
		e := waitEventResult(t, prov.Namespace, prov.Name, "evt_7", v1alpha1.ResultApplied)
		got := waitPaymentPhase(t, p, v1alpha1.PhaseSucceeded)
		if n := inboxtest.Transitions(got); n != 1 {
			t.Errorf("%d transitions, want 1", n)
		}
		if e.Status.Attempts != 2 {
			t.Errorf("attempts %d, want 2 (orphaned at receipt, applied by the processor)", e.Status.Attempts)
		}
	})

	t.Run("a refund delivered before its success waits and is applied after it", func(t *testing.T) {
		prov := inboxKukoPay(t, rcv)
		p := inboxtest.CreatePayment(t, env.Client, prov.Namespace, "order-r", prov.Name, "order-r", "pay_r", 1000, "USD")
		inboxtest.WaitCached(t, rcv.Cache, p)
		url := rcv.WebhookURL(prov.Namespace, prov.Name)
		refund := inboxtest.KukoPayEvent{ID: "evt_refund", Type: "refund.succeeded", Status: "succeeded", PaymentID: "pay_r", MerchantRef: "order-r", Amount: 400, RefundedTotal: 400, Currency: "USD"}
		if r := deliverKukoPay(t, url, refund); r.Code != http.StatusOK {
			t.Fatalf("refund: status %d", r.Code)
		}
		if e := inboxtest.EventFor(t, env.Client, prov.Namespace, prov.Name, "evt_refund"); e == nil || e.Status.Result != v1alpha1.ResultOrphaned {
			t.Fatalf("early refund %+v, want Orphaned (waiting), not Ignored (lost)", e)
		}
		flushInboxProcessor(t, prov.Namespace)
		success := inboxtest.KukoPayEvent{ID: "evt_success", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_r", MerchantRef: "order-r", Amount: 1000, Currency: "USD"}
		if r := deliverKukoPay(t, url, success); r.Code != http.StatusOK {
			t.Fatalf("success: status %d", r.Code)
		}
		waitEventResult(t, prov.Namespace, prov.Name, "evt_refund", v1alpha1.ResultApplied)
		got := waitPaymentPhase(t, p, v1alpha1.PhasePartiallyRefunded)
		if n := inboxtest.Transitions(got); n != 2 {
			t.Errorf("%d transitions, want 2 (Succeeded, PartiallyRefunded)", n)
		}
	})

	// Issue 5, test 9.
	t.Run("receiver stopped after the inbox write and before the apply: the processor applies", func(t *testing.T) {
		var crashed *crashAfterInboxWrite
		var dying *inboxtest.Receiver
		dying = startInboxReceiver(t, inboxtest.ReceiverOptions{WrapClient: func(c client.Client) client.Client {
			crashed = &crashAfterInboxWrite{Client: c, crash: func() { go func() { _ = dying.Stop() }() }}
			return crashed
		}})
		prov := inboxKukoPay(t, dying)
		p := inboxtest.CreatePayment(t, env.Client, prov.Namespace, "order-9", prov.Name, "order-9", "pay_9", 900, "USD")
		inboxtest.WaitCached(t, dying.Cache, p)
		ev := inboxtest.KukoPayEvent{ID: "evt_9", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_9", MerchantRef: "order-9", Amount: 900, Currency: "USD"}
		body := ev.Body(t)
		req, _ := http.NewRequest("POST", dying.WebhookURL(prov.Namespace, prov.Name), strings.NewReader(string(body)))
		req.Header = inboxtest.KukoPayHeader(body, time.Now(), "secret")
		// The provider may or may not get an answer from a dying process;
		// either way it is not the receiver that applies the event.
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		if err := dying.Stop(); err != nil {
			t.Fatalf("receiver stop: %v", err)
		}
		if !crashed.crashed.Load() {
			t.Fatal("the receiver never wrote the inbox record")
		}
		e := inboxtest.EventFor(t, env.Client, prov.Namespace, prov.Name, "evt_9")
		if e == nil || e.Status.Result.IsDone() {
			t.Fatalf("after the crash the event is %+v, want stored and not yet applied", e)
		}
		if got := inboxtest.GetPayment(t, env.Client, p); got.Status.Phase != "" {
			t.Fatalf("the crashed receiver moved the payment to %s", got.Status.Phase)
		}

		e = waitEventResult(t, prov.Namespace, prov.Name, "evt_9", v1alpha1.ResultApplied)
		got := waitPaymentPhase(t, p, v1alpha1.PhaseSucceeded)
		if e.Status.Attempts != 1 || inboxtest.Transitions(got) != 1 {
			t.Fatalf("attempts %d, transitions %d; want the processor's single apply", e.Status.Attempts, inboxtest.Transitions(got))
		}
		// The provider, having had no good answer, delivers again to a
		// healthy replica: a duplicate, still one transition.
		inboxtest.WaitCached(t, rcv.Cache, prov)
		r := deliverKukoPay(t, rcv.WebhookURL(prov.Namespace, prov.Name), ev)
		if r.Code != http.StatusOK || !strings.Contains(r.Body, "duplicate") {
			t.Fatalf("redelivery: %d %s, want 200 duplicate", r.Code, r.Body)
		}
		if got := inboxtest.GetPayment(t, env.Client, p); inboxtest.Transitions(got) != 1 {
			t.Fatalf("%d transitions after redelivery, want 1", inboxtest.Transitions(got))
		}
	})

	t.Run("events past the provider's retention are deleted", func(t *testing.T) {
		prov := inboxKukoPay(t, rcv, func(p *inboxtest.Provider) { p.Retention = 3 * time.Second })
		ev := inboxtest.KukoPayEvent{ID: "evt_old", Type: "customer.created", Status: "succeeded", PaymentID: "pay_old", MerchantRef: "order-old", Amount: 1, Currency: "USD"}
		if r := deliverKukoPay(t, rcv.WebhookURL(prov.Namespace, prov.Name), ev); r.Code != http.StatusOK {
			t.Fatalf("status %d", r.Code)
		}
		if e := inboxtest.EventFor(t, env.Client, prov.Namespace, prov.Name, "evt_old"); e == nil {
			t.Fatal("event not stored")
		}
		inboxtest.Eventually(t, inboxtest.Timeout, func() (bool, string) {
			return inboxtest.EventFor(t, env.Client, prov.Namespace, prov.Name, "evt_old") == nil, "event past retention still stored"
		})
	})
}

// errProcessGone is what a crashed receiver's writes amount to: nothing.
var errProcessGone = errors.New("receiver process is gone")

// crashAfterInboxWrite lets the first WebhookEvent create through and then
// fails every later write, as if the process died right after the inbox
// write; crash stops the receiver.
type crashAfterInboxWrite struct {
	client.Client
	crashed atomic.Bool
	crash   func()
}

func (c *crashAfterInboxWrite) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if c.crashed.Load() {
		return errProcessGone
	}
	err := c.Client.Create(ctx, obj, opts...)
	if _, ok := obj.(*v1alpha1.WebhookEvent); ok && err == nil && c.crashed.CompareAndSwap(false, true) {
		c.crash()
	}
	return err
}

func (c *crashAfterInboxWrite) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if c.crashed.Load() {
		return errProcessGone
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c *crashAfterInboxWrite) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if c.crashed.Load() {
		return errProcessGone
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *crashAfterInboxWrite) Status() client.SubResourceWriter {
	return crashedStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type crashedStatus struct {
	client.SubResourceWriter
	c *crashAfterInboxWrite
}

func (s crashedStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if s.c.crashed.Load() {
		return errProcessGone
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s crashedStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if s.c.crashed.Load() {
		return errProcessGone
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}
