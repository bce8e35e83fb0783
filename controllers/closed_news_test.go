package controllers_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// A refund event that names only the provider's payment id arrives before
// the payment has that id (its create not answered yet): no Payment
// matches, the event is Orphaned and waits for orphansOf. The payment then
// stores the create's answer: its id and Succeeded, closed in the same
// write. The event must be woken and applied (the refunded total moves).
func TestAnOrphanWaitingForAProviderIDIsWokenByTheWriteThatClosesWithIt(t *testing.T) {
	t.Parallel()
	for _, closes := range []bool{false, true} {
		name := "stays-open"
		if closes {
			name = "closes"
		}
		t.Run(name, func(t *testing.T) {
			ns := fixture.Namespace(t, env.Client, "orphan-close")
			prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay, Quiet: true})
			p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-1", Provider: prov.Name, MerchantReference: "order-1"})
			marked := metav1.NewTime(time.Now().Add(-time.Minute))
			p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
				st.Phase = v1alpha1.PhasePending
				st.CreateRequestedAt = &marked
			})
			m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerInbox))
			fixture.WaitCached(t, m.Client(), p)

			body := fixture.KukoPayEvent{ID: "evt_refund_1", Type: "refund.succeeded", PaymentID: "pay_X", Status: "succeeded",
				Amount: 500, RefundedTotal: 500, Currency: "USD"}.Body(t)
			ev, err := kukopay.ParseEvent(body)
			if err != nil {
				t.Fatal(err)
			}
			in := &inbox.Inbox{Client: env.Client, Reader: m.Client(), APIReader: env.Client}
			out, err := in.Receive(context.Background(), prov, ev, v1alpha1.ViaWebhook, "", 0)
			if err != nil || out.Result != v1alpha1.ResultOrphaned {
				t.Fatalf("Receive = %+v, %v; want Orphaned (no payment has id pay_X yet)", out, err)
			}
			// The inbox processor has looked at the Orphaned event (and found
			// no payment either) before the payment learns its id.
			orphaned := fixture.WebhookEventFor(t, env.Client, ns, prov.Name, "evt_refund_1")
			m.Reconciles.WaitSeen(t, controllers.ControllerInbox, orphaned, orphaned)
			if e := fixture.WebhookEventFor(t, env.Client, ns, prov.Name, "evt_refund_1"); e.Status.Result != v1alpha1.ResultOrphaned {
				t.Fatalf("event %s: %s", e.Status.Result, e.Status.Message)
			}

			// The create's answer, stored as the payment controller stores it.
			now := metav1.Now()
			p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
				st.Phase = v1alpha1.PhaseSucceeded
				st.ProviderPaymentID = "pay_X"
				st.AmountReceived = &v1alpha1.Money{Value: 1999, Currency: "USD"}
				st.History = append(st.History, v1alpha1.HistoryEntry{Time: now, From: v1alpha1.PhasePending, To: v1alpha1.PhaseSucceeded, Source: v1alpha1.SourceCreate})
				if closes {
					st.Closed = payment.Closable(&v1alpha1.Payment{Status: *st})
				}
			})
			if p.Status.Closed != closes {
				t.Fatalf("closed = %v, want %v", p.Status.Closed, closes)
			}
			fixture.Eventually(t, 15*time.Second, "the orphaned refund event to be applied", func() (bool, string) {
				e := fixture.WebhookEventFor(t, env.Client, ns, prov.Name, "evt_refund_1")
				if e == nil {
					return false, "no event"
				}
				return e.Status.Result != v1alpha1.ResultOrphaned, string(e.Status.Result) + ": " + e.Status.Message
			})
		})
	}
}

// A payment settles and closes in one write (the inbox's event, the
// payment controller's answer). The manager's cache of open work reports
// that write as the deletion of the open, not yet final copy it had;
// retention still judges the payment at once, from the thin cache's update,
// and deletes it at the end of its 2 s retention, not at a later scan.
func TestRetentionDeletesAPaymentThatClosedAsItSettled(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "retention-close")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "short", Quiet: true, Spec: func(s *v1alpha1.PaymentProviderSpec) {
		s.Retention.FinalPayments = fixture.Duration("2s")
	}})
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerRetention))
	fixture.WaitCached(t, m.Client(), prov)
	p := storedPayment(t, ns, "paid", prov.Name, time.Now(), settled{phase: v1alpha1.PhasePending})
	fixture.WaitCached(t, m.Client(), p)
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		st.Phase = v1alpha1.PhaseSucceeded
		st.History = append(st.History, v1alpha1.HistoryEntry{Time: metav1.Now(), From: v1alpha1.PhasePending, To: v1alpha1.PhaseSucceeded, Source: v1alpha1.SourceWebhook})
		st.Closed = payment.Closable(&v1alpha1.Payment{Status: *st})
	})
	if !p.Status.Closed {
		t.Fatal("not closed")
	}
	fixture.Eventually(t, 20*time.Second, "the settled payment deleted past its 2s retention", func() (bool, string) {
		return !exists(t, ns, p.Name), "still there"
	})
}

// An operator resolves a closed payment while no manager runs (a rollout,
// a leader failover). A closed payment is not in the manager's cache, so no
// start-up reconcile comes from there; the thin cache hands it over because
// its annotation was not acted on yet (payment.ActionsUnanswered).
func TestAResolveOfAClosedPaymentSetWhileNoManagerRanIsActedOn(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "closed-annotated")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay, Quiet: true})
	p := storedPayment(t, ns, "paid", prov.Name, time.Now(), settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{time.Minute}})
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		st.ProviderPaymentID = "pay_closed"
		st.Closed = payment.Closable(&v1alpha1.Payment{Status: *st})
	})
	if !p.Status.Closed {
		t.Fatal("not closed")
	}
	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationResolveReason, "chargeback settled offline")
	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationResolve, "Failed")
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	fixture.Eventually(t, 15*time.Second, "the operator's resolve acted on", func() (bool, string) {
		got := fixture.GetPayment(t, env.Client, p)
		return got.Status.Actions.Resolve != "", "status.actions.resolve empty, phase " + string(got.Status.Phase)
	})
}

// A tracked payment the receiver settled (and so closed) while no manager
// ran gets its money-in-flight finalizer at start, as an open one would
// (holdTracked): it is remembered in the ledger when it goes.
func TestATrackedPaymentSettledWhileNoManagerRanIsHeldAtStart(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "closed-tracked")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay, Quiet: true})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "tracked", Provider: prov.Name, ProviderPaymentID: "pay_tracked"})
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		st.Phase = v1alpha1.PhaseSucceeded
		st.ProviderPaymentID = "pay_tracked"
		st.History = append(st.History, v1alpha1.HistoryEntry{Time: metav1.Now(), To: v1alpha1.PhaseSucceeded, Source: v1alpha1.SourceWebhook})
		st.Closed = payment.Closable(&v1alpha1.Payment{Status: *st})
	})
	if !p.Status.Closed || len(p.Finalizers) > 0 {
		t.Fatalf("closed %v, finalizers %v: want closed, not held", p.Status.Closed, p.Finalizers)
	}
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	fixture.Eventually(t, 15*time.Second, "the money-in-flight finalizer on the closed tracked payment", func() bool {
		got := fixture.GetPayment(t, env.Client, p)
		return slices.Contains(got.Finalizers, v1alpha1.FinalizerMoneyInFlight) && got.Status.Closed
	})
}

// A closed payment past its retention when the manager starts (it ran
// out while no manager ran) is deleted at start: the manager's cache holds
// no closed payment to report, and the retention scan at start hands back
// what is past its end.
func TestAClosedPaymentPastItsRetentionAtStartIsDeleted(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "closed-expired")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "short", Quiet: true, Spec: func(s *v1alpha1.PaymentProviderSpec) {
		s.Retention.FinalPayments = fixture.Duration("1m")
	}})
	p := storedPayment(t, ns, "old", prov.Name, time.Now(), settled{phase: v1alpha1.PhaseSucceeded, history: []time.Duration{time.Hour}})
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		st.Closed = payment.Closable(&v1alpha1.Payment{Status: *st})
	})
	if !p.Status.Closed {
		t.Fatal("not closed")
	}
	fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerRetention))
	fixture.Eventually(t, 15*time.Second, "the closed payment past its retention deleted at start", func() (bool, string) {
		return !exists(t, ns, p.Name), "still there"
	})
}

// flakyPaymentGets fails the first two reads of one Payment by name.
type flakyPaymentGets struct {
	client.Reader
	name   string
	failed atomic.Int32
}

func (f *flakyPaymentGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.Payment); ok && key.Name == f.name && f.failed.Add(1) <= 2 {
		return apierrors.NewServiceUnavailable("etcdserver: request timed out")
	}
	return f.Reader.Get(ctx, key, obj, opts...)
}

// The closing write is the only news that can wake an event waiting for the
// provider id it stores, and a map function cannot retry: the closed
// payment's Orphaned events are found from the thin cache's entry, without
// a read of the payment an API server's blip could fail.
func TestAnOrphanIsWokenByAClosingWhileTheAPIServerFailsReads(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "orphan-flaky")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay, Quiet: true})
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-1", Provider: prov.Name, MerchantReference: "order-1"})
	marked := metav1.NewTime(time.Now().Add(-time.Minute))
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		st.Phase = v1alpha1.PhasePending
		st.CreateRequestedAt = &marked
	})
	flaky := &flakyPaymentGets{name: "order-1"}
	o := fixture.Run(controllers.ControllerInbox)
	o.Before = func(_ ctrl.Manager, w *controllers.Wiring) error {
		flaky.Reader = w.Inbox.APIReader
		w.Inbox.APIReader = flaky
		return nil
	}
	m := fixture.StartManager(t, env, ns, o)
	fixture.WaitCached(t, m.Client(), p)

	body := fixture.KukoPayEvent{ID: "evt_refund_1", Type: "refund.succeeded", PaymentID: "pay_X", Status: "succeeded",
		Amount: 500, RefundedTotal: 500, Currency: "USD"}.Body(t)
	ev, err := kukopay.ParseEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	in := &inbox.Inbox{Client: env.Client, Reader: m.Client(), APIReader: env.Client}
	if out, err := in.Receive(context.Background(), prov, ev, v1alpha1.ViaWebhook, "", 0); err != nil || out.Result != v1alpha1.ResultOrphaned {
		t.Fatalf("Receive = %+v, %v; want Orphaned", out, err)
	}
	orphaned := fixture.WebhookEventFor(t, env.Client, ns, prov.Name, "evt_refund_1")
	m.Reconciles.WaitSeen(t, controllers.ControllerInbox, orphaned, orphaned)

	now := metav1.Now()
	p = fixture.SetStatus(t, env.Client, p, func(st *v1alpha1.PaymentStatus) {
		st.Phase = v1alpha1.PhaseSucceeded
		st.ProviderPaymentID = "pay_X"
		st.AmountReceived = &v1alpha1.Money{Value: 1999, Currency: "USD"}
		st.History = append(st.History, v1alpha1.HistoryEntry{Time: now, From: v1alpha1.PhasePending, To: v1alpha1.PhaseSucceeded, Source: v1alpha1.SourceCreate})
		st.Closed = payment.Closable(&v1alpha1.Payment{Status: *st})
	})
	if !p.Status.Closed {
		t.Fatal("payment did not close")
	}
	fixture.Eventually(t, 15*time.Second, "the orphaned refund event to be applied", func() (bool, string) {
		e := fixture.WebhookEventFor(t, env.Client, ns, prov.Name, "evt_refund_1")
		if e == nil {
			return false, "no event"
		}
		return e.Status.Result != v1alpha1.ResultOrphaned, fmt.Sprintf("%s: %s (reads of the payment failed: %d)", e.Status.Result, e.Status.Message, flaky.failed.Load())
	})
}
