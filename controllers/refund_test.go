package controllers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// The Refund tests (SPEC §11.7) run the real manager (controllers.Setup)
// against paysim over HTTP: payments are made by the payment controller,
// refunds by the refund controller, webhooks go through the real receiver.

// refundSchedule is the status-query schedule of the refund tests'
// providers, for payments and refunds alike: short steps, then longer ones,
// 50 (the most a provider takes) over about 54 s, so that nothing runs out
// of its schedule while a test on a loaded machine waits (a payment kept
// pending while a Refund waits for it, then told to succeed, must still be
// queried).
var refundSchedule = func() []string {
	s := []string{"100ms", "200ms"}
	for len(s) < 38 {
		s = append(s, "500ms")
	}
	for len(s) < 50 {
		s = append(s, "3s")
	}
	return s
}()

// refundProvider is a provider of typ at s, named after its type.
func refundProvider(ns string, typ v1alpha1.ProviderType, s *fixture.Sim) fixture.Provider {
	p := fixture.Provider{Namespace: ns, Name: string(typ), Type: typ, Sim: s, Schedule: refundSchedule}
	if typ == v1alpha1.ProviderStripe {
		p.Credentials = map[string]string{stripe.CredentialSecretKey: "sk_test_paysim"}
	}
	return p
}

// simProvider starts paysim and creates refundProvider(ns, typ) at it.
func simProvider(t *testing.T, ns string, typ v1alpha1.ProviderType) (*fixture.Sim, *v1alpha1.PaymentProvider) {
	t.Helper()
	s := fixture.StartSim(t, paysim.Options{})
	return s, fixture.CreateProvider(t, env.Client, refundProvider(ns, typ, s))
}

// refundManager runs the payment and refund controllers (and cs) over ns.
func refundManager(t *testing.T, ns string, cs ...controllers.Controller) *fixture.Manager {
	t.Helper()
	return fixture.StartManager(t, env, ns, fixture.Run(append([]controllers.Controller{controllers.ControllerPayment, controllers.ControllerRefund}, cs...)...))
}

// webhookRefunds runs the payment, refund and inbox controllers over a new
// namespace and the real receiver, and a provider of typ at a new paysim
// that sends its webhooks, signed with secret, through that receiver.
func webhookRefunds(t *testing.T, typ v1alpha1.ProviderType, secret string) (string, *fixture.Manager, *fixture.Sim, *v1alpha1.PaymentProvider) {
	t.Helper()
	ns := fixture.Namespace(t, env.Client, "refund")
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund, controllers.ControllerInbox)
	o.PendingGrace = time.Second
	m := fixture.StartManager(t, env, ns, o)
	rcv := fixture.StartReceiver(t, env, fixture.ReceiverOptions{})
	s := fixture.StartSim(t, paysim.Options{})
	pp := refundProvider(ns, typ, s)
	pp.SigningSecrets = map[string]string{"current": secret}
	prov := fixture.CreateProvider(t, env.Client, pp)
	fixture.WaitCached(t, rcv.Cache, prov)
	if err := s.SetWebhookTarget(string(typ), rcv.WebhookURL(ns, prov.Name), []byte(secret)); err != nil {
		t.Fatal(err)
	}
	return ns, m, s, prov
}

// refundSucceeded waits for paysim's first KukoPay refund.succeeded event
// about the provider payment id.
func refundSucceeded(t *testing.T, s *fixture.Sim, id string) paysim.EventRecord {
	t.Helper()
	var rec paysim.EventRecord
	fixture.Eventually(t, fixture.Timeout, "paysim's refund.succeeded of "+id, func() bool {
		for _, e := range s.Events(string(v1alpha1.ProviderKukoPay)) {
			if e.PaymentID == id && e.Type == "refund.succeeded" {
				rec = e
				return true
			}
		}
		return false
	})
	return rec
}

// paidPayment creates a Payment of amount USD that paysim's default script
// settles at once, and waits until paywarden has seen it succeed.
func paidPayment(t *testing.T, ns, prov, name string, amount int64) *v1alpha1.Payment {
	t.Helper()
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: name, Provider: prov, Amount: amount})
	p = fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
	if p.Status.ProviderPaymentID == "" {
		t.Fatalf("succeeded payment %s has no provider id", p.Name)
	}
	return p
}

// waitRefunded waits until the payment shows the provider's cumulative
// refunded total in phase.
func waitRefunded(t *testing.T, p *v1alpha1.Payment, phase v1alpha1.PaymentPhase, total int64) *v1alpha1.Payment {
	t.Helper()
	var got *v1alpha1.Payment
	fixture.Eventually(t, fixture.Timeout, fmt.Sprintf("%s to be %s with %d refunded", p.Name, phase, total), func() (bool, string) {
		got = fixture.GetPayment(t, env.Client, p)
		a := got.Status.AmountRefunded
		return got.Status.Phase == phase && a != nil && a.Value == total, "status:\n" + fixture.Dump(got.Status)
	})
	return got
}

// refundRest makes the Refund "rest" of p, without an amount: it must
// refund exactly the left USD that are left, and p must end Refunded in
// full. It returns the Refund as created and as succeeded, and p as
// Refunded.
func refundRest(t *testing.T, p *v1alpha1.Payment, left int64) (*v1alpha1.Refund, *v1alpha1.Refund, *v1alpha1.Payment) {
	t.Helper()
	rest := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: p.Namespace, Name: "rest", Payment: p.Name})
	got := fixture.WaitRefundPhase(t, env.Client, rest, v1alpha1.RefundSucceeded)
	if !amountIs(got.Status.Amount, left, "USD") {
		t.Errorf("the Refund of the rest (no amount) refunded %+v, want the %d USD left", got.Status.Amount, left)
	}
	return rest, got, waitRefunded(t, p, v1alpha1.PhaseRefunded, p.Spec.Amount.Value)
}

// waitListed waits until the payment's status.refunds lists rf as want.
func waitListed(t *testing.T, p *v1alpha1.Payment, want v1alpha1.RefundSummary) *v1alpha1.Payment {
	t.Helper()
	var got *v1alpha1.Payment
	fixture.Eventually(t, fixture.Timeout, fmt.Sprintf("%s to list %+v", p.Name, want), func() (bool, string) {
		got = fixture.GetPayment(t, env.Client, p)
		for _, s := range got.Status.Refunds {
			if s == want {
				return true, ""
			}
		}
		return false, fmt.Sprintf("refunds %+v", got.Status.Refunds)
	})
	return got
}

// checkOwned asserts that rf is owned by p with blockOwnerDeletion, so the
// garbage collector (which envtest does not run) deletes it with p, and
// foreground deletion of p waits for it.
func checkOwned(t *testing.T, rf *v1alpha1.Refund, p *v1alpha1.Payment) {
	t.Helper()
	for _, o := range rf.OwnerReferences {
		if o.UID == p.UID {
			if o.Kind != "Payment" || o.APIVersion != v1alpha1.GroupVersion.String() || o.Name != p.Name ||
				o.BlockOwnerDeletion == nil || !*o.BlockOwnerDeletion {
				t.Errorf("Refund %s: owner reference %+v, want Payment %s with blockOwnerDeletion", rf.Name, o, p.Name)
			}
			return
		}
	}
	t.Errorf("Refund %s is not owned by Payment %s (uid %s): %+v", rf.Name, p.Name, p.UID, rf.OwnerReferences)
}

func amountIs(m *v1alpha1.Money, value int64, cur string) bool {
	return m != nil && m.Value == value && m.Currency == cur
}

// refundKey is paysim's key of rf's refund calls (the key the refund
// controller sends, derived from rf's Payment and rf).
func refundKey(t *testing.T, typ v1alpha1.ProviderType, rf *v1alpha1.Refund) string {
	t.Helper()
	p := &v1alpha1.Payment{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: rf.Namespace, Name: rf.Spec.PaymentRef.Name}, p); err != nil {
		t.Fatalf("payment of refund %s: %v", rf.Name, err)
	}
	return string(typ) + "/" + payment.RefundKey(p, rf)
}

// refundCost is what one refund cost the manager, from its logs.
type refundCost struct {
	calls                             []fixture.Call
	refundStatus, refundObject        int
	paymentStatus, reconciles         int
	paymentConflicts, refundConflicts int
	// paymentOwn are the Payment's status writes by its own controller.
	paymentOwn int
}

func (c refundCost) String() string {
	var calls []string
	for _, x := range c.calls {
		calls = append(calls, fmt.Sprintf("%s %s -> %d", x.Method, x.Path, x.Status))
	}
	return fmt.Sprintf("%d provider calls [%s]; Refund: %d status writes, %d object writes, %d reconciles; Payment: %d status writes by the refund controller, %d by its own; 409s: Payment %d, Refund %d",
		len(c.calls), strings.Join(calls, ", "), c.refundStatus, c.refundObject, c.reconciles, c.paymentStatus, c.paymentOwn, c.paymentConflicts, c.refundConflicts)
}

// conflicts counts write conflicts (409) per kind under a manager's writes.
type conflicts struct {
	mu              sync.Mutex
	payment, refund int
}

func (c *conflicts) wrap(cl client.Client) client.Client {
	return fixture.InterceptWrites(cl, func(w fixture.Write, do func() error) error {
		err := do()
		if apierrors.IsConflict(err) {
			c.mu.Lock()
			switch w.Object.(type) {
			case *v1alpha1.Payment:
				c.payment++
			case *v1alpha1.Refund:
				c.refund++
			}
			c.mu.Unlock()
		}
		return err
	})
}

func (c *conflicts) get() (payment, refund int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.payment, c.refund
}

// TestRefundHappyPathPerProviderType: for each provider type, a partial
// Refund of a succeeded Payment succeeds; the Payment shows the provider's
// cumulative refunded total (PartiallyRefunded), lists the Refund and owns
// it; a second Refund without an amount refunds the rest (Refunded). Each
// refund is one refund call at the provider. The cost of a refund (calls,
// writes) is logged.
//
// Not parallel, nor are its subtests: it counts the Payment's status writes
// per refund, and on a busy control plane the payment controller can see
// the Refund between its marker and its answer and write once more.
func TestRefundHappyPathPerProviderType(t *testing.T) {
	for _, typ := range []v1alpha1.ProviderType{v1alpha1.ProviderKukoPay, v1alpha1.ProviderPayPal, v1alpha1.ProviderGeneric, v1alpha1.ProviderStripe} {
		t.Run(string(typ), func(t *testing.T) {
			ns := fixture.Namespace(t, env.Client, "refund")
			s, _ := simProvider(t, ns, typ)
			var conf conflicts
			o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
			o.WrapClient = conf.wrap
			m := fixture.StartManager(t, env, ns, o)
			p := paidPayment(t, ns, string(typ), "order", 1999)
			id := p.Status.ProviderPaymentID

			// measure returns what rf cost, once the refund controller has
			// reconciled its final state (nothing is left to do for it).
			measure := func(rf *v1alpha1.Refund, final *v1alpha1.Refund, since time.Time, before refundCost) refundCost {
				m.Reconciles.WaitSeen(t, controllers.ControllerRefund, rf, final)
				ws := m.WritesBy(controllers.ControllerRefund)
				pc, rc := conf.get()
				return refundCost{
					calls:            m.Requests.Calls(func(c fixture.Call) bool { return !c.At.Before(since) }),
					refundStatus:     fixture.CountWrites(ws, rf, true),
					refundObject:     fixture.CountWrites(ws, rf, false),
					paymentStatus:    fixture.CountWrites(ws, p, true) - before.paymentStatus,
					paymentOwn:       fixture.CountWrites(m.WritesBy(controllers.ControllerPayment), p, true) - before.paymentOwn,
					reconciles:       m.ReconcilesOf(controllers.ControllerRefund, rf),
					paymentConflicts: pc - before.paymentConflicts, refundConflicts: rc - before.refundConflicts,
				}
			}

			// The payment's own last write after it settled (its schedule
			// cleared) comes before the refunds are counted.
			fixture.WaitPayment(t, env.Client, p, "settled, with no schedule", func(p *v1alpha1.Payment) bool {
				q := p.Status.Query
				return q.NextTime == nil && q.UnansweredSince == nil && p.Status.Operation == nil
			})
			// On a loaded machine a last write of its settling can still be on
			// its way: the payment's writes are counted from when they have
			// stopped for a second.
			own := func() int { return fixture.CountWrites(m.WritesBy(controllers.ControllerPayment), p, true) }
			for n, still := own(), time.Now(); time.Since(still) < time.Second; time.Sleep(100 * time.Millisecond) {
				if now := own(); now != n {
					n, still = now, time.Now()
				}
			}
			since := time.Now()
			first := refundCost{paymentOwn: own()}
			part := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "part", Payment: p.Name, Amount: 500, Reason: "damaged in transit"})
			got := fixture.WaitRefundPhase(t, env.Client, part, v1alpha1.RefundSucceeded)
			if !amountIs(got.Status.Amount, 500, "USD") || got.Status.AmountDisplay != "5.00 USD" || got.Status.ProviderRefundID == "" ||
				got.Status.ProviderPaymentID != id || got.Status.CreateRequestedAt == nil || !fixture.RefundReady(got) ||
				got.Status.Query.NextTime != nil || got.Status.WaitingFor != "" {
				t.Errorf("succeeded Refund: %s", fixture.Dump(got.Status))
			}
			pay := waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 500)
			pay = waitListed(t, pay, v1alpha1.RefundSummary{Name: "part", Amount: "5.00 USD", Phase: v1alpha1.RefundSucceeded})
			owned := fixture.WaitRefund(t, env.Client, part, "owned", func(r *v1alpha1.Refund) bool { return len(r.OwnerReferences) > 0 })
			checkOwned(t, owned, pay)
			cost1 := measure(part, got, since, first)
			if n, total := fixture.SimRefunds(t, s, typ, id); n != 1 || total != 500 {
				t.Errorf("paysim made %d refunds totalling %d, want 1 of 500", n, total)
			}
			if n := len(m.Requests.Calls(fixture.IsRefundCreate)); n != 1 {
				t.Errorf("%d refund calls, want 1", n)
			}

			since = time.Now()
			before := refundCost{paymentStatus: fixture.CountWrites(m.WritesBy(controllers.ControllerRefund), p, true),
				paymentOwn: fixture.CountWrites(m.WritesBy(controllers.ControllerPayment), p, true)}
			before.paymentConflicts, before.refundConflicts = conf.get()
			rest, got, pay := refundRest(t, p, 1499)
			pay = waitListed(t, pay, v1alpha1.RefundSummary{Name: "rest", Amount: "14.99 USD", Phase: v1alpha1.RefundSucceeded})
			waitListed(t, pay, v1alpha1.RefundSummary{Name: "part", Amount: "5.00 USD", Phase: v1alpha1.RefundSucceeded})
			cost2 := measure(rest, got, since, before)
			if n, total := fixture.SimRefunds(t, s, typ, id); n != 2 || total != 1999 {
				t.Errorf("paysim made %d refunds totalling %d, want 2 of 1999 in all", n, total)
			}
			if n := len(m.Requests.Calls(fixture.IsRefundCreate)); n != 2 {
				t.Errorf("%d refund calls, want 2", n)
			}
			t.Logf("%s partial refund: %s", typ, cost1)
			t.Logf("%s refund of the rest: %s", typ, cost2)
			// A refund is one refund call and one read of the payment back
			// (PayPal's names the capture the payment's success was read
			// with: no read of the order first), two status
			// writes of the Refund (the marker before the call, the answer
			// after it) and one of the Payment, by its own controller (the
			// refunded total read back, with the Refund listed): the
			// Payment has one writer. The Refund's object is written once:
			// owned by its Payment and held (money-in-flight) in one patch,
			// right before its marker. Three writes of the Refund in all.
			const calls = 2
			for _, c := range []refundCost{cost1, cost2} {
				if len(c.calls) != calls || c.refundStatus != 2 || c.refundObject != 1 || c.paymentStatus != 0 || c.paymentOwn != 1 {
					t.Errorf("a refund cost %s; want %d provider calls, 1 Refund object write (owned and held before its marker), 2 Refund status writes and 1 Payment status write, by the payment controller", c, calls)
				}
			}

			// A settled Refund deleted leaves the payment's list; what the
			// provider refunded stays the payment's figure.
			if err := env.Client.Delete(context.Background(), fixture.GetRefund(t, env.Client, part)); err != nil {
				t.Fatalf("delete Refund part: %v", err)
			}
			fixture.Eventually(t, fixture.Timeout, "the deleted Refund to leave status.refunds", func() (bool, string) {
				got := fixture.GetPayment(t, env.Client, p)
				st := got.Status
				return len(st.Refunds) == 1 && st.Refunds[0].Name == "rest" && st.Phase == v1alpha1.PhaseRefunded && amountIs(st.AmountRefunded, 1999, "USD"),
					"status:\n" + fixture.Dump(st)
			})
		})
	}
}

// refundCrash runs the payment and refund controllers over a new namespace
// with a kukopay provider at a new paysim, under a manager that crash kills;
// there it makes a Refund of 7.00 USD of a paid 19.99 USD payment, waits for
// the crash and stops that manager. The Refund must then hold its marker
// (Pending, 700 USD, createRequestedAt) without a refund id; it is returned
// as stored, with the key of its refund calls.
func refundCrash(t *testing.T, crash *fixture.Crash) (ns string, s *fixture.Sim, first *fixture.Manager, p *v1alpha1.Payment, rf *v1alpha1.Refund, key string) {
	t.Helper()
	ns = fixture.Namespace(t, env.Client, "refund")
	s, _ = simProvider(t, ns, v1alpha1.ProviderKukoPay)
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.WrapClient = crash.Wrap
	first = fixture.StartManager(t, env, ns, o)
	p = paidPayment(t, ns, "kukopay", "order", 1999)
	rf = fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "crash", Payment: p.Name, Amount: 700})
	crash.Wait(t)
	first.Stop()
	rf = fixture.GetRefund(t, env.Client, rf)
	if st := rf.Status; st.CreateRequestedAt == nil || st.ProviderRefundID != "" || !amountIs(st.Amount, 700, "USD") || st.Phase != v1alpha1.RefundPending {
		t.Fatalf("after the crash the Refund holds %s, want the marker (Pending, 700 USD, createRequestedAt) without a refund id", fixture.Dump(st))
	}
	return ns, s, first, p, rf, refundKey(t, v1alpha1.ProviderKukoPay, rf)
}

// TestRefundCrashAroundTheRefundCallRefundsOnce: the manager dies after the
// refund marker is stored, before the call or after it (before its answer
// is stored). The next manager finds the marker without a refund id and
// calls again with the same idempotency key: one refund at the provider.
func TestRefundCrashAroundTheRefundCallRefundsOnce(t *testing.T) {
	t.Parallel()
	isMarker := func(w fixture.Write) bool {
		rf, ok := w.Object.(*v1alpha1.Refund)
		return ok && w.Status() && rf.Status.CreateRequestedAt != nil && rf.Status.ProviderRefundID == ""
	}
	isAnswer := func(w fixture.Write) bool {
		rf, ok := w.Object.(*v1alpha1.Refund)
		return ok && w.Status() && rf.Status.ProviderRefundID != ""
	}

	t.Run("dies after the marker, before the call", func(t *testing.T) {
		ns, s, first, p, rf, key := refundCrash(t, fixture.CrashAfter(isMarker))
		if calls := first.Requests.Calls(fixture.IsRefundCreate); len(calls) != 0 || s.Counters().ActionsByKey[key] != 0 {
			t.Fatalf("the dying manager called the provider after the marker: %+v", calls)
		}

		refundManager(t, ns)
		got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
		c := s.Counters()
		if c.RefundsByPayment[p.Status.ProviderPaymentID] != 1 || c.ActionsByKey[key] != 1 {
			t.Errorf("paysim: %d refunds of the payment, %d calls with key %s; want exactly 1 and 1", c.RefundsByPayment[p.Status.ProviderPaymentID], c.ActionsByKey[key], key)
		}
		if !got.Status.CreateRequestedAt.Equal(rf.Status.CreateRequestedAt) || !amountIs(got.Status.Amount, 700, "USD") {
			t.Errorf("the marker was not kept: %s", fixture.Dump(got.Status))
		}
		waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 700)
	})

	t.Run("dies after the call, before its answer is stored", func(t *testing.T) {
		// The dying manager made the refund; its answer is gone with the process.
		ns, s, _, p, rf, key := refundCrash(t, fixture.CrashBefore(isAnswer))
		made, _ := s.Payment(paysim.KukoPay, p.Status.ProviderPaymentID)
		if len(made.Refunds) != 1 || s.Counters().ActionsByKey[key] != 1 {
			t.Fatalf("paysim holds refunds %+v after %d calls with key %s, want the one the dying manager made with one call", made.Refunds, s.Counters().ActionsByKey[key], key)
		}

		refundManager(t, ns)
		got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
		c := s.Counters()
		if c.RefundsByPayment[p.Status.ProviderPaymentID] != 1 || c.ActionsByKey[key] != 2 {
			t.Errorf("paysim: %d refunds from %d calls with key %s, want 1 refund from 2 calls (the retry reuses the key)", c.RefundsByPayment[p.Status.ProviderPaymentID], c.ActionsByKey[key], key)
		}
		if got.Status.ProviderRefundID != made.Refunds[0].ID {
			t.Errorf("Refund records provider refund %q, want %q, the one made before the crash", got.Status.ProviderRefundID, made.Refunds[0].ID)
		}
		waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 700)
	})
}

// TestFailedWriteOfARefundAnswerStoresItWithoutCallingAgain: the refund's
// answer came back but storing it failed (the API server went away): the
// retry stores the kept answer; the provider is not asked again.
func TestFailedWriteOfARefundAnswerStoresItWithoutCallingAgain(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	failed := fixture.FailWrites(fixture.Once(func(w fixture.Write) bool {
		rf, ok := w.Object.(*v1alpha1.Refund)
		return ok && w.Status() && rf.Status.ProviderRefundID != ""
	}), errors.New("injected: the API server is unavailable"))
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.WrapClient = failed.Wrap
	fixture.StartManager(t, env, ns, o)
	p := paidPayment(t, ns, "kukopay", "order", 1999)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "part", Payment: p.Name, Amount: 500})
	got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	if failed.Failed() != 1 {
		t.Fatalf("the write of the refund's answer was not failed (failed=%d)", failed.Failed())
	}
	if n := s.Counters().ActionsByKey[refundKey(t, v1alpha1.ProviderKukoPay, got)]; n != 1 {
		t.Errorf("%d refund calls, want 1: the kept answer must be stored, not asked for again", n)
	}
}

// TestRefundLostAnswerIsRetriedWithTheSameKey: paysim makes the refund and
// loses its answer, once. The controller does not know whether it was made,
// retries with the same key, and paysim replays the first answer: one
// refund.
func TestRefundLostAnswerIsRetriedWithTheSameKey(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	sim := fixture.StartSim(t, paysim.Options{})
	s := sim.FaultOnce(t, paysim.Faults{LostResponseRate: 1, Operations: []string{paysim.OpRefund}}, func(r *http.Request) bool {
		return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/refunds")
	})
	fixture.CreateProvider(t, env.Client, refundProvider(ns, v1alpha1.ProviderKukoPay, s))
	m := refundManager(t, ns)
	p := paidPayment(t, ns, "kukopay", "order", 1999)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "lost", Payment: p.Name, Amount: 800})
	got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)

	c := sim.Counters()
	key := refundKey(t, v1alpha1.ProviderKukoPay, got)
	if c.APIFaults.LostResponses != 1 {
		t.Fatalf("%d answers lost, want 1", c.APIFaults.LostResponses)
	}
	if c.RefundsByPayment[p.Status.ProviderPaymentID] != 1 || c.ActionsByKey[key] != 2 {
		t.Errorf("paysim: %d refunds from %d calls with key %s, want 1 refund from 2 calls", c.RefundsByPayment[p.Status.ProviderPaymentID], c.ActionsByKey[key], key)
	}
	calls := m.Requests.Calls(fixture.IsRefundCreate)
	if len(calls) != 2 || calls[0].Status != http.StatusInternalServerError || calls[1].Status != http.StatusOK {
		t.Errorf("refund calls %+v, want a lost one (500) and its replay (200)", calls)
	}
	if !amountIs(got.Status.Amount, 800, "USD") {
		t.Errorf("refund amount %+v", got.Status.Amount)
	}
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 800)
	t.Logf("retry %s after the lost answer", calls[1].At.Sub(calls[0].At).Round(time.Millisecond))
}

// TestOverRefundIsRefusedBeforeAnyCall: a Refund of more than the payment
// received, or in another currency, is Failed with OverRefund without any
// call to the provider, with a Warning Event; the payment is untouched.
func TestOverRefundIsRefusedBeforeAnyCall(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	m := refundManager(t, ns)
	p := paidPayment(t, ns, "kukopay", "order", 1999)
	s.ResetCounters()

	for _, tc := range []struct {
		name     string
		amount   int64
		currency string
		message  string
	}{
		{name: "too-much", amount: 2000, currency: "USD", message: "20.00 USD asked, but of the 19.99 USD received 0.00 USD is refunded or being refunded, leaving 19.99 USD"},
		{name: "other-currency", amount: 100, currency: "EUR", message: "the refund is in EUR, the payment in USD"},
	} {
		rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: tc.name, Payment: p.Name, Amount: tc.amount, Currency: tc.currency})
		got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundFailed)
		if code := fixture.RefundFailure(got); code != v1alpha1.ReasonOverRefund ||
			!strings.Contains(got.Status.Failure.Message, tc.message) || !strings.Contains(got.Status.Failure.Message, "nothing was sent to the provider") {
			t.Errorf("%s: failure %+v, want OverRefund: %s", tc.name, got.Status.Failure, tc.message)
		}
		if got.Status.CreateRequestedAt != nil || got.Status.ProviderRefundID != "" || !fixture.RefundReady(got) {
			t.Errorf("%s: a refused Refund holds %s", tc.name, fixture.Dump(got.Status))
		}
		fixture.Eventually(t, 10*time.Second, "a Warning Event RefundFailed about "+tc.name, func() bool {
			for _, e := range m.Events.About(tc.name, "RefundFailed") {
				if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, v1alpha1.ReasonOverRefund) {
					return true
				}
			}
			return false
		})
		waitListed(t, p, v1alpha1.RefundSummary{Name: tc.name, Phase: v1alpha1.RefundFailed})
	}
	if calls := m.Requests.Calls(fixture.IsRefundCreate); len(calls) != 0 {
		t.Errorf("refund calls went out: %+v", calls)
	}
	if c := s.Counters(); c.ActionRequests != 0 || len(c.RefundsByPayment) != 0 {
		t.Errorf("paysim saw %d refund calls and made refunds %v", c.ActionRequests, c.RefundsByPayment)
	}
	if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != v1alpha1.PhaseSucceeded || got.Status.AmountRefunded != nil {
		t.Errorf("payment changed: %s, refunded %+v", got.Status.Phase, got.Status.AmountRefunded)
	}
}

// TestConcurrentRefundsNeverRefundMoreThanReceived: two Refunds of one
// payment that add up to more than it received, created back to back and
// reconciled in parallel (two workers): the later one is refused
// (OverRefund) before any call, the earlier one succeeds, and the provider
// never refunds more than the amount. Three payments, three races.
func TestConcurrentRefundsNeverRefundMoreThanReceived(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	refundManager(t, ns)
	for i := range 3 {
		p := paidPayment(t, ns, "kukopay", fmt.Sprintf("order-%d", i), 1999)
		earlier := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: fmt.Sprintf("order-%d-a", i), Payment: p.Name, Amount: 1200})
		later := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: fmt.Sprintf("order-%d-b", i), Payment: p.Name, Amount: 1200})
		got := fixture.WaitRefund(t, env.Client, later, "final", func(r *v1alpha1.Refund) bool { return r.Status.Phase.IsFinal() })
		if fixture.RefundFailure(got) != v1alpha1.ReasonOverRefund || got.Status.CreateRequestedAt != nil ||
			s.Counters().ActionsByKey[refundKey(t, v1alpha1.ProviderKukoPay, got)] != 0 {
			t.Errorf("round %d: the later Refund was not refused before any call:\n%s", i, fixture.DescribeRefunds(t, env.Client, ns))
		}
		fixture.WaitRefundPhase(t, env.Client, earlier, v1alpha1.RefundSucceeded)
		if n, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, p.Status.ProviderPaymentID); n != 1 || total != 1200 {
			t.Errorf("round %d: paysim made %d refunds totalling %d, want 1 of 1200 (never more than the 1999 received)", i, n, total)
		}
		waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 1200)
	}
}

// TestARefundWaitsWhileTheProviderTotalMayCountOneInFlight: the payment's
// refunded total is the provider's cumulative figure, which can count a
// Refund whose own answer has not arrived yet (its webhook lost, its next
// query not due). A second Refund that fits once the first is counted once
// waits for the first to settle instead of being refused for counting it
// twice, and goes as soon as the first settles: the first's change wakes it,
// the payment not having changed.
func TestARefundWaitsWhileTheProviderTotalMayCountOneInFlight(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	if err := s.Script(paysim.Rule{Provider: paysim.KukoPay, Amount: 2999, Script: paysim.Script{Outcome: paysim.OutcomeSucceed, RefundOutcome: paysim.OutcomePending}}); err != nil {
		t.Fatal(err)
	}
	m := refundManager(t, ns)
	p := paidPayment(t, ns, "kukopay", "order", 2999)
	first := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "first", Payment: p.Name, Amount: 2000})
	first = fixture.WaitRefund(t, env.Client, first, "in flight at the provider", func(r *v1alpha1.Refund) bool {
		return r.Status.ProviderRefundID != "" && !r.Status.Phase.IsFinal()
	})

	// The provider's cumulative figure, already counting the first refund,
	// reaches the payment (as a backfilled event would carry it).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pay := fixture.GetPayment(t, env.Client, p)
		pay.Status.Phase = v1alpha1.PhasePartiallyRefunded
		pay.Status.AmountRefunded = &v1alpha1.Money{Value: 2000, Currency: "USD"}
		return env.Client.Status().Update(context.Background(), pay)
	}); err != nil {
		t.Fatal(err)
	}
	// The manager decides on its cache: the second Refund comes once the
	// cache holds that figure (as a Refund applied after the event would).
	fixture.Eventually(t, fixture.Timeout, "the manager's cache to hold the provider's figure", func() bool {
		pay := &v1alpha1.Payment{}
		err := m.Client().Get(context.Background(), client.ObjectKeyFromObject(p), pay)
		return err == nil && pay.Status.AmountRefunded != nil && pay.Status.AmountRefunded.Value == 2000
	})

	second := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "second", Payment: p.Name, Amount: 500})
	got := fixture.WaitRefund(t, env.Client, second, "waiting for the first", func(r *v1alpha1.Refund) bool {
		return r.Status.WaitingFor == v1alpha1.ReasonEarlierRefundInFlight || r.Status.Phase.IsFinal()
	})
	if got.Status.Phase.IsFinal() || got.Status.CreateRequestedAt != nil || s.Counters().ActionsByKey[refundKey(t, v1alpha1.ProviderKukoPay, got)] != 0 {
		t.Fatalf("the second Refund was decided on a total that may count the first twice:\n%s", fixture.DescribeRefunds(t, env.Client, ns))
	}

	if err := s.SettleRefund(paysim.KukoPay, first.Status.ProviderRefundID, paysim.OutcomeSucceed); err != nil {
		t.Fatal(err)
	}
	fixture.WaitRefundPhase(t, env.Client, first, v1alpha1.RefundSucceeded)
	got = fixture.WaitRefund(t, env.Client, second, "sent once the first settled", func(r *v1alpha1.Refund) bool { return r.Status.ProviderRefundID != "" })
	if err := s.SettleRefund(paysim.KukoPay, got.Status.ProviderRefundID, paysim.OutcomeSucceed); err != nil {
		t.Fatal(err)
	}
	got = fixture.WaitRefundPhase(t, env.Client, second, v1alpha1.RefundSucceeded)
	if !amountIs(got.Status.Amount, 500, "USD") {
		t.Errorf("second Refund: %s", fixture.Dump(got.Status))
	}
	if n, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, p.Status.ProviderPaymentID); n != 2 || total != 2500 {
		t.Errorf("paysim made %d refunds totalling %d, want 2 of 2500", n, total)
	}
}

// TestConcurrentRefundsCreatedOutOfNameOrderWithinASecond: the same race
// where creation order and name order disagree. Refunds are counted in
// (creationTimestamp, name) order; creationTimestamp has whole seconds, so
// two Refunds created in one second are ordered by name, whatever order
// they were created in. Here "pair-b" is created first and decided alone
// (its marker write is held back, as by a slow API server), then "pair-a"
// in the same second. pair-a counts pair-b only if it is sent, since by
// name pair-b comes later. Deciding on the cache while pair-b's marker is
// on its way, pair-a would go too, and only the provider's own check would
// stop the over-refund. The refund controller decides one unsent Refund of
// a payment at a time, on the Refunds as the API server has them: pair-a
// waits for pair-b's marker, sees it, and is refused before any call.
//
// Not parallel: pair-b's reconcile must reach its held write within the
// second both creates fall into, which a busy control plane can miss.
func TestConcurrentRefundsCreatedOutOfNameOrderWithinASecond(t *testing.T) {
	ns := fixture.Namespace(t, env.Client, "refund")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	held, release, aRead := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once, aOnce sync.Once
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.WrapClient = func(c client.Client) client.Client {
		writes := fixture.InterceptWrites(c, func(w fixture.Write, do func() error) error {
			if rf, ok := w.Object.(*v1alpha1.Refund); ok && rf.Name == "pair-b" && w.Status() && rf.Status.CreateRequestedAt != nil && rf.Status.ProviderRefundID == "" {
				once.Do(func() { close(held) })
				select {
				case <-release:
				case <-time.After(fixture.Timeout):
				}
			}
			return do()
		})
		// pair-a's reconcile is under way once it has read pair-a.
		return readsOf{Client: writes, name: "pair-a", read: func() { aOnce.Do(func() { close(aRead) }) }}
	}
	fixture.StartManager(t, env, ns, o)
	p := paidPayment(t, ns, "kukopay", "order", 1999)

	// Both creates must fall into one second: start at the top of one.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	b := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "pair-b", Payment: p.Name, Amount: 1200})
	select {
	case <-held:
	case <-time.After(fixture.Timeout):
		t.Fatalf("pair-b was not decided alone:\n%s", fixture.DescribeRefunds(t, env.Client, ns))
	}
	a := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "pair-a", Payment: p.Name, Amount: 1200})
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		t.Fatalf("the Refunds were created in different seconds (%s, %s): the race was not set up", b.CreationTimestamp, a.CreationTimestamp)
	}
	select {
	case <-aRead:
	case <-time.After(fixture.Timeout):
		t.Fatalf("pair-a was never reconciled:\n%s", fixture.DescribeRefunds(t, env.Client, ns))
	}
	// pair-a's reconcile has read it: deciding on the cache it would store
	// its marker within milliseconds. Give it that chance while pair-b's
	// marker is still held back.
	time.Sleep(500 * time.Millisecond)
	close(release)

	var refused []string
	for _, rf := range []*v1alpha1.Refund{a, b} {
		got := fixture.WaitRefund(t, env.Client, rf, "final", func(r *v1alpha1.Refund) bool { return r.Status.Phase.IsFinal() })
		if fixture.RefundFailure(got) == v1alpha1.ReasonOverRefund && got.Status.CreateRequestedAt == nil {
			refused = append(refused, got.Name)
		}
	}
	if c := s.Counters(); len(refused) != 1 || c.ActionRequests != 1 {
		t.Errorf("want exactly one Refund refused (OverRefund) before any call and one refund call; got %d refund calls and:\n%s",
			c.ActionRequests, fixture.DescribeRefunds(t, env.Client, ns))
	}
	if _, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, p.Status.ProviderPaymentID); total > 1999 {
		t.Errorf("paysim refunded %d of the 1999 received", total)
	}
}

// TestRefundEventBeforeItsRefundIsSeenIsAppliedOnceItIs: the refund is made
// at the provider under a Refund's reference ("<ns>/<name>/<uid>") and key,
// and the provider's refund.succeeded reaches the receiver and the inbox
// processor while their caches have not seen that Refund yet. The payment
// learns the refunded total; the event waits (Orphaned) for the Refund its
// reference names. When the Refund is seen (a change of it reaches the
// processor), the event is applied and the Refund settles from it; the
// refund controller, started afterwards, makes no second refund, and a
// Refund of the rest counts the settled one.
func TestRefundEventBeforeItsRefundIsSeenIsAppliedOnceItIs(t *testing.T) {
	// Serial: the event must still be Orphaned when the processor has
	// looked at it, within its one-second grace, so it runs alone, before
	// the package's parallel tests load the machine.
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerInbox)
	o.PendingGrace = time.Second
	var lagging atomic.Bool
	lagging.Store(true)
	o.WrapClient = func(c client.Client) client.Client { return laggingRefunds{c, &lagging} }
	ns := fixture.Namespace(t, env.Client, "refund")
	m := fixture.StartManager(t, env, ns, o)
	s, prov := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	p := paidPayment(t, ns, prov.Name, "order", 1999)
	id := p.Status.ProviderPaymentID

	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "early", Payment: p.Name})
	adapter, err := kukopay.New(provider.Config{Name: ns + "/kukopay", APIURL: s.APIURL(v1alpha1.ProviderKukoPay), Credentials: map[string][]byte{"apiKey": []byte("sk_test")}})
	if err != nil {
		t.Fatal(err)
	}
	made, err := adapter.CreateRefund(context.Background(), provider.RefundRequest{
		PaymentID: id, IdempotencyKey: payment.RefundKey(p, rf), Reference: rf.Reference(), Amount: 500, Currency: "USD",
	})
	if err != nil || made.Status != provider.RefundSucceeded {
		t.Fatalf("refund at paysim: %+v %v", made, err)
	}
	rec := refundSucceeded(t, s, id)
	ev, err := kukopay.ParseEvent(rec.Raw)
	if err != nil {
		t.Fatal(err)
	}
	fixture.WaitCached(t, m.Client(), prov)
	receiver := &inbox.Inbox{Client: m.Client(), Reader: laggingRefunds{m.Client(), &lagging}, APIReader: laggingRefunds{m.Client(), &lagging}, Clock: clock.RealClock{}}
	out, err := receiver.Receive(context.Background(), prov, ev, v1alpha1.ViaWebhook, provider.SchemeKukoPay, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.Result != v1alpha1.ResultOrphaned || !strings.Contains(out.Message, "waiting for Refund "+rf.Reference()) || out.Event.Spec.RefundReference != rf.Reference() {
		t.Fatalf("event at a receiver that has not seen its Refund: %s (%s), reference %q", out.Result, out.Message, out.Event.Spec.RefundReference)
	}
	// The same event moved the payment: the refunded total is the provider's.
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 500)
	// The inbox processor, not seeing the Refund either, leaves it waiting.
	m.Reconciles.WaitSeen(t, controllers.ControllerInbox, out.Event, out.Event)
	if e := fixture.WaitEventResult(t, env.Client, ns, prov.Name, ev.ID, "", fixture.Timeout); e.Status.Result != v1alpha1.ResultOrphaned {
		t.Fatalf("event %s (%s), want it still Orphaned", e.Status.Result, e.Status.Message)
	}

	// The Refund is seen: its next change wakes the event waiting for it.
	lagging.Store(false)
	// (Read again on a conflict: the manager may write the Refund meanwhile.)
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		touch := fixture.GetRefund(t, env.Client, rf)
		touch.Labels = map[string]string{"seen": "yes"}
		return env.Client.Update(context.Background(), touch)
	}); err != nil {
		t.Fatal(err)
	}
	fixture.WaitEventResult(t, env.Client, ns, prov.Name, ev.ID, v1alpha1.ResultApplied, fixture.Timeout)
	got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	if got.Status.ProviderRefundID != made.ID || got.Status.CreateRequestedAt != nil || !fixture.RefundReady(got) {
		t.Errorf("Refund settled by the event: %s", fixture.Dump(got.Status))
	}
	if h := got.Status.History; len(h) == 0 || h[len(h)-1].Source != v1alpha1.SourceWebhook || h[len(h)-1].EventID != ev.ID {
		t.Errorf("history %+v, want the webhook's transition last", h)
	}
	if !amountIs(got.Status.Amount, 500, "USD") || got.Status.AmountDisplay != "5.00 USD" {
		t.Errorf("a Refund settled by its event shows amount %+v (%q), want the 5.00 USD the provider refunded", got.Status.Amount, got.Status.AmountDisplay)
	}

	// Now the refund controller: it finds a settled Refund and calls nobody.
	refunds := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerRefund))
	refunds.Reconciles.WaitSeen(t, controllers.ControllerRefund, rf, got)
	if calls := refunds.Requests.Calls(nil); len(calls) != 0 {
		t.Errorf("the refund controller called the provider for a settled Refund: %+v", calls)
	}
	owned := fixture.WaitRefund(t, env.Client, rf, "owned", func(r *v1alpha1.Refund) bool { return len(r.OwnerReferences) > 0 })
	checkOwned(t, owned, p)
	if n, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, id); n != 1 || total != 500 {
		t.Errorf("paysim made %d refunds totalling %d, want 1 of 500", n, total)
	}

	// A Refund of the rest counts the one the event settled.
	refundRest(t, p, 1499)
}

// laggingRefunds is a cache that has not seen any Refund yet, while lagging.
type laggingRefunds struct {
	client.Client
	lagging *atomic.Bool
}

func (r laggingRefunds) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.Refund); ok && r.lagging.Load() {
		return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("refunds").GroupResource(), key.Name)
	}
	return r.Client.Get(ctx, key, obj, opts...)
}

func (r laggingRefunds) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*v1alpha1.RefundList); ok && r.lagging.Load() {
		return nil
	}
	return r.Client.List(ctx, list, opts...)
}

// TestRefundFailedAtTheProvider: a refund the provider declines, in its
// answer or later, fails the Refund with the provider's failure code and a
// Warning Event; the payment keeps its money (phase, refunded total).
func TestRefundFailedAtTheProvider(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	m := refundManager(t, ns)

	check := func(t *testing.T, p *v1alpha1.Payment, rf *v1alpha1.Refund, source v1alpha1.ObservationSource) {
		t.Helper()
		got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundFailed)
		if fixture.RefundFailure(got) != "refund_declined" || got.Status.ProviderRefundID == "" || got.Status.Query.NextTime != nil {
			t.Errorf("failed Refund: %s", fixture.Dump(got.Status))
		}
		if h := got.Status.History; len(h) == 0 || h[len(h)-1].Source != source || h[len(h)-1].To != v1alpha1.PaymentPhase(v1alpha1.RefundFailed) {
			t.Errorf("history %+v, want the last transition to Failed via %s", h, source)
		}
		fixture.Eventually(t, 10*time.Second, "a Warning Event RefundFailed about "+rf.Name, func() bool {
			for _, e := range m.Events.About(rf.Name, "RefundFailed") {
				if e.Type == corev1.EventTypeWarning {
					return true
				}
			}
			return false
		})
		waitListed(t, p, v1alpha1.RefundSummary{Name: rf.Name, Amount: "10.00 USD", Phase: v1alpha1.RefundFailed})
		if pay := fixture.GetPayment(t, env.Client, p); pay.Status.Phase != v1alpha1.PhaseSucceeded || pay.Status.AmountRefunded != nil {
			t.Errorf("payment changed by a failed refund: %s, refunded %+v", pay.Status.Phase, pay.Status.AmountRefunded)
		}
		if n, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, p.Status.ProviderPaymentID); n != 1 || total != 0 {
			t.Errorf("paysim made %d refunds, refunded %d; want 1 refund, nothing refunded", n, total)
		}
	}

	t.Run("declined in the refund call's answer", func(t *testing.T) {
		if err := s.Script(paysim.Rule{Provider: paysim.KukoPay, Amount: 3001, Script: paysim.Script{Outcome: paysim.OutcomeSucceed, RefundOutcome: paysim.OutcomeFail}}); err != nil {
			t.Fatal(err)
		}
		p := paidPayment(t, ns, "kukopay", "declined", 3001)
		rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "declined", Payment: p.Name, Amount: 1000})
		check(t, p, rf, v1alpha1.SourceCreate)
	})

	t.Run("pending, then failed at the provider, found by a status query", func(t *testing.T) {
		if err := s.Script(paysim.Rule{Provider: paysim.KukoPay, Amount: 3002, Script: paysim.Script{Outcome: paysim.OutcomeSucceed, RefundOutcome: paysim.OutcomePending}}); err != nil {
			t.Fatal(err)
		}
		p := paidPayment(t, ns, "kukopay", "later", 3002)
		rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "later", Payment: p.Name, Amount: 1000})
		pending := fixture.WaitRefund(t, env.Client, rf, "pending at the provider", func(r *v1alpha1.Refund) bool { return r.Status.ProviderRefundID != "" })
		if pending.Status.Phase != v1alpha1.RefundPending || pending.Status.ProviderStatus != "pending" || pending.Status.Query.NextTime == nil {
			t.Fatalf("refund pending at the provider: %s", fixture.Dump(pending.Status))
		}
		if err := s.SettleRefund(paysim.KukoPay, pending.Status.ProviderRefundID, paysim.OutcomeFail); err != nil {
			t.Fatal(err)
		}
		check(t, p, rf, v1alpha1.SourceStatusQuery)
	})
}

// TestDashboardRefundIsCountedOnce: a refund made in the provider's
// dashboard (no Refund) and one made by a Refund: the payment's refunded
// total is the provider's cumulative figure, each refund counted once; the
// allowance counts the dashboard refund, so a Refund of more than is left
// is refused before any call, and one without an amount refunds exactly
// what is left.
func TestDashboardRefundIsCountedOnce(t *testing.T) {
	t.Parallel()
	const secret = "whsec_dashboard"
	ns, m, s, prov := webhookRefunds(t, v1alpha1.ProviderKukoPay, secret)
	p := paidPayment(t, ns, prov.Name, "order", 1999)
	id := p.Status.ProviderPaymentID

	// The dashboard: 5.00 refunded at the provider; its webhook tells paywarden.
	if err := s.Refund(paysim.KukoPay, id, 500); err != nil {
		t.Fatal(err)
	}
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 500)

	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "ten", Payment: p.Name, Amount: 1000})
	fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 1500)
	// Every event about both refunds done (the Refund's own webhook too):
	// still the provider's 15.00, not 5.00 + 10.00 + 10.00.
	fixture.Eventually(t, fixture.Timeout, "every refund event to be done", func() (bool, string) {
		done := 0
		for _, e := range fixture.WebhookEvents(t, env.Client, ns) {
			if e.Spec.Type != "refund.succeeded" {
				continue
			}
			if !e.Status.Result.IsDone() {
				return false, fmt.Sprintf("event %s is %q", e.Spec.EventID, e.Status.Result)
			}
			done++
		}
		return done == 2, fmt.Sprintf("%d refund events done", done)
	})
	if got := fixture.GetPayment(t, env.Client, p); !amountIs(got.Status.AmountRefunded, 1500, "USD") || got.Status.Phase != v1alpha1.PhasePartiallyRefunded {
		t.Errorf("payment %s refunded %+v, want PartiallyRefunded 1500 (5.00 dashboard + 10.00 Refund, each once)", got.Status.Phase, got.Status.AmountRefunded)
	}

	calls := len(m.Requests.Calls(fixture.IsRefundCreate))
	tooMuch := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "too-much", Payment: p.Name, Amount: 600})
	got := fixture.WaitRefundPhase(t, env.Client, tooMuch, v1alpha1.RefundFailed)
	if fixture.RefundFailure(got) != v1alpha1.ReasonOverRefund || !strings.Contains(got.Status.Failure.Message, "leaving 4.99 USD") {
		t.Errorf("over-refund after a dashboard refund: %+v", got.Status.Failure)
	}
	if n := len(m.Requests.Calls(fixture.IsRefundCreate)); n != calls || s.Counters().ActionsByKey[refundKey(t, v1alpha1.ProviderKukoPay, got)] != 0 {
		t.Errorf("the refused Refund was sent (%d refund calls before, %d after)", calls, n)
	}

	refundRest(t, p, 499)
	if n, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, id); n != 3 || total != 1999 {
		t.Errorf("paysim made %d refunds totalling %d, want 3 of 1999", n, total)
	}
}

// TestRefundWaitsForItsPayment: a Refund of a payment that has not taken
// the money waits (Pending, waitingFor PaymentNotSucceeded) without calling
// the provider and goes once the payment succeeds; a Refund of a payment
// that failed is Failed with PaymentNotPaid.
func TestRefundWaitsForItsPayment(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	m := refundManager(t, ns)

	t.Run("waits until the payment succeeds", func(t *testing.T) {
		p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "slow", Provider: "kukopay", Outcome: paysim.OutcomePending})
		fixture.Eventually(t, fixture.Timeout, "the payment to exist at paysim", func() bool {
			return fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID != ""
		})
		rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "slow", Payment: p.Name, Amount: 300})
		waiting := fixture.WaitRefund(t, env.Client, rf, "waiting for its payment", func(r *v1alpha1.Refund) bool {
			return r.Status.WaitingFor == v1alpha1.ReasonPaymentNotSucceeded
		})
		if waiting.Status.Phase != v1alpha1.RefundPending || waiting.Status.CreateRequestedAt != nil || waiting.Status.Amount != nil {
			t.Errorf("waiting Refund: %s", fixture.Dump(waiting.Status))
		}
		// A reconcile of the waiting Refund is one that would have called.
		// The write that set waitingFor is no news to the refund controller
		// when the Refund was Pending already (waiting first for a payment
		// its cache did not hold yet), so an annotation, which is news,
		// brings one about.
		poked := fixture.Annotate(t, env.Client, waiting, "test.paywarden.dev/poke", "1")
		m.Reconciles.WaitSeen(t, controllers.ControllerRefund, rf, poked)
		if calls := m.Requests.Calls(fixture.IsRefundCreate); len(calls) != 0 {
			t.Fatalf("refund calls while the payment is pending: %+v", calls)
		}
		if pay := fixture.GetPayment(t, env.Client, p); pay.Status.Phase.TookMoney() {
			t.Fatalf("the payment took the money already (%s): the test proves nothing", pay.Status.Phase)
		}

		if err := s.SetOutcome(paysim.KukoPay, fixture.GetPayment(t, env.Client, p).Status.ProviderPaymentID, paysim.Script{Outcome: paysim.OutcomeSucceed}); err != nil {
			t.Fatal(err)
		}
		// The payment succeeds (a status query sees it), the Refund goes.
		got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
		if got.Status.WaitingFor != "" || !amountIs(got.Status.Amount, 300, "USD") {
			t.Errorf("Refund after its payment succeeded: %s", fixture.Dump(got.Status))
		}
		waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 300)
	})

	t.Run("a failed payment has nothing to refund", func(t *testing.T) {
		p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "declined", Provider: "kukopay", Outcome: paysim.OutcomeFail})
		p = fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseFailed, fixture.Timeout)
		calls := len(m.Requests.Calls(fixture.IsRefundCreate))
		rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "declined", Payment: p.Name})
		got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundFailed)
		if fixture.RefundFailure(got) != v1alpha1.ReasonPaymentNotPaid || got.Status.CreateRequestedAt != nil {
			t.Errorf("Refund of a failed payment: %s", fixture.Dump(got.Status))
		}
		if n := len(m.Requests.Calls(fixture.IsRefundCreate)); n != calls {
			t.Errorf("a refund call went out for a failed payment")
		}
		if n, _ := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, p.Status.ProviderPaymentID); n != 0 {
			t.Errorf("paysim made %d refunds of a failed payment", n)
		}
	})
}

// TestRetentionKeepsAPaymentWhileItsRefundsAreInFlight: a final Payment
// past its provider's retention.finalPayments is kept while one of its
// Refunds is not final, and deleted once it is. Its Refunds are owned by it
// with blockOwnerDeletion, so the garbage collector (not run by envtest)
// deletes them with it.
// pastRetention makes prov keep final payments 1ms, so p is long past its
// retention, and waits for a retention reconcile that judged p with it.
func pastRetention(t *testing.T, m *fixture.Manager, prov *v1alpha1.PaymentProvider, p *v1alpha1.Payment) {
	t.Helper()
	fresh := fixture.GetProvider(t, env.Client, prov.Namespace, prov.Name)
	fresh.Spec.Retention.FinalPayments = fixture.Duration("1ms")
	if err := env.Client.Update(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	fixture.WaitCached(t, m.Client(), fresh)
	// A retention reconcile that read the payment after this change had the
	// new retention in its cache.
	poked := fixture.Annotate(t, env.Client, p, "test.paywarden.dev/poke", "1")
	m.Reconciles.WaitSeen(t, controllers.ControllerRetention, p, poked)
}

func TestRetentionKeepsAPaymentWhileItsRefundsAreInFlight(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	s, prov := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	m := refundManager(t, ns, controllers.ControllerRetention)
	if err := s.Script(paysim.Rule{Provider: paysim.KukoPay, Amount: 3003, Script: paysim.Script{Outcome: paysim.OutcomeSucceed, RefundOutcome: paysim.OutcomePending}}); err != nil {
		t.Fatal(err)
	}
	p := paidPayment(t, ns, prov.Name, "order", 3003)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "in-flight", Payment: p.Name, Amount: 1000})
	pending := fixture.WaitRefund(t, env.Client, rf, "pending at the provider, owned", func(r *v1alpha1.Refund) bool {
		return r.Status.ProviderRefundID != "" && len(r.OwnerReferences) > 0
	})
	checkOwned(t, pending, p)

	pastRetention(t, m, prov, p)
	if !exists(t, ns, p.Name) {
		t.Fatal("deleted a payment whose Refund is in flight")
	}
	if st := fixture.GetRefund(t, env.Client, rf).Status; st.Phase.IsFinal() {
		t.Fatalf("the Refund settled meanwhile (%s): the test proves nothing", st.Phase)
	}

	if err := s.SettleRefund(paysim.KukoPay, pending.Status.ProviderRefundID, paysim.OutcomeSucceed); err != nil {
		t.Fatal(err)
	}
	fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	fixture.Eventually(t, fixture.Timeout, "the payment to be deleted once its Refund settled", func() bool { return !exists(t, ns, p.Name) })
	// envtest runs no garbage collector: the Refund is left, owned by the
	// deleted payment, which a cluster's collector acts on.
	checkOwned(t, fixture.GetRefund(t, env.Client, rf), p)
}

// TestARecreatedRefundIsNotSettledByItsPredecessorsEvent: Refund "r1" asks
// 500 and succeeds; it is deleted and created again under the same name
// asking 300. The old refund's refund.succeeded then reaches paywarden (a
// webhook delivered late, before the new r1 is sent): it names the old r1's
// UID, so it counts in the payment's refunded total and settles nothing.
// The new r1 sends its own refund, with its own key, and ends Succeeded
// with 300: paysim made two refunds, 500 and 300, none twice.
func TestARecreatedRefundIsNotSettledByItsPredecessorsEvent(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	s, prov := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	first := refundManager(t, ns)
	p := paidPayment(t, ns, prov.Name, "order", 1999)
	id := p.Status.ProviderPaymentID

	old := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "r1", Payment: p.Name, Amount: 500})
	oldDone := fixture.WaitRefundPhase(t, env.Client, old, v1alpha1.RefundSucceeded)
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 500)
	oldKey := refundKey(t, v1alpha1.ProviderKukoPay, oldDone)
	rec := refundSucceeded(t, s, id)

	// r1 is deleted (its finalizer is let go by the running manager once it
	// is settled) and applied again (by hand, or a GitOps re-sync), asking 300.
	if err := env.Client.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, fixture.Timeout, "the old r1 to be gone", func() bool {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(old), &v1alpha1.Refund{})
		return apierrors.IsNotFound(err)
	})
	first.Stop()
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "r1", Payment: p.Name, Amount: 300})
	if rf.UID == old.UID {
		t.Fatal("the new r1 has the old one's UID")
	}

	// The old refund's event arrives now, through the inbox, while the new
	// r1 is not sent yet.
	payments := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment))
	fixture.WaitCached(t, payments.Client(), rf)
	fixture.WaitCached(t, payments.Client(), prov)
	ev, err := kukopay.ParseEvent(rec.Raw)
	if err != nil || ev.Refund == nil {
		t.Fatalf("old refund event: %+v %v", ev, err)
	}
	if ev.Refund.Reference != oldDone.Reference() {
		t.Fatalf("old refund event has reference %q, want the old r1's %q", ev.Refund.Reference, oldDone.Reference())
	}
	in := &inbox.Inbox{Client: payments.Client(), Reader: payments.Client(), APIReader: payments.Manager.GetAPIReader(), Clock: clock.RealClock{}}
	out, err := in.Receive(context.Background(), prov, ev, v1alpha1.ViaWebhook, provider.SchemeKukoPay, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Stored || out.Result == v1alpha1.ResultOrphaned || !out.Result.IsDone() || !strings.Contains(out.Message, "earlier Refund r1") {
		t.Errorf("the old refund's event: stored=%v, result %s (%s); want it done, settling no Refund", out.Stored, out.Result, out.Message)
	}
	if got := fixture.GetRefund(t, env.Client, rf); got.Status.Phase.IsFinal() || got.Status.ProviderRefundID != "" || got.Status.Amount != nil {
		t.Fatalf("the new r1 was settled by the old r1's event: %s", fixture.Dump(got.Status))
	}

	// The refund controller sends the new r1's own refund.
	refunds := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerRefund))
	got := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	if !amountIs(got.Status.Amount, 300, "USD") || got.Status.ProviderRefundID == "" || got.Status.ProviderRefundID == oldDone.Status.ProviderRefundID || got.Status.CreateRequestedAt == nil {
		t.Errorf("the new r1: %s", fixture.Dump(got.Status))
	}
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 800)
	newKey := refundKey(t, v1alpha1.ProviderKukoPay, got)
	if n := len(refunds.Requests.Calls(fixture.IsRefundCreate)); n != 1 || newKey == oldKey {
		t.Errorf("%d refund calls for the new r1 (key %q, the old one's %q), want 1 with its own key", n, newKey, oldKey)
	}
	if c := s.Counters(); c.ActionsByKey[oldKey] != 1 || c.ActionsByKey[newKey] != 1 {
		t.Errorf("refund calls by key: old %d, new %d; want one each", c.ActionsByKey[oldKey], c.ActionsByKey[newKey])
	}
	n, total := fixture.SimRefunds(t, s, v1alpha1.ProviderKukoPay, id)
	v, _ := s.Payment(string(v1alpha1.ProviderKukoPay), id)
	var amounts []int64
	for _, r := range v.Refunds {
		amounts = append(amounts, r.Amount)
	}
	if n != 2 || total != 800 || len(amounts) != 2 || amounts[0] != 500 || amounts[1] != 300 {
		t.Errorf("paysim made %d refunds (%v) totalling %d, want two: 500 and 300", n, amounts, total)
	}
}

// TestARefundThatSettlesAlwaysMovesItsPaymentsTotal: no webhook reaches
// paywarden, and the first read of the payment after its Refund succeeded
// fails. The payment's refunded total is a required step, not a best
// effort: the payment is read again (on its backoff) until its total counts
// the Refund, then never again.
func TestARefundThatSettlesAlwaysMovesItsPaymentsTotal(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "refund")
	m := refundManager(t, ns)
	var armed atomic.Bool
	var id atomic.Value
	id.Store("\x00")
	s := fixture.StartSim(t, paysim.Options{}).FaultOnce(t, paysim.Faults{ServerErrorRate: 1}, func(r *http.Request) bool {
		return armed.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, id.Load().(string))
	})
	prov := fixture.CreateProvider(t, env.Client, refundProvider(ns, v1alpha1.ProviderKukoPay, s))
	p := paidPayment(t, ns, prov.Name, "order", 1999)
	id.Store(p.Status.ProviderPaymentID)
	armed.Store(true)

	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "five", Payment: p.Name, Amount: 500})
	fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	got := waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 500)
	if got.Status.Query.NextTime != nil {
		t.Errorf("a settled payment keeps no schedule: next %v", got.Status.Query.NextTime)
	}
	reads := func() int {
		n := 0
		for _, c := range m.Requests.Calls(func(c fixture.Call) bool { return c.Method == http.MethodGet }) {
			if strings.Contains(c.Path, p.Status.ProviderPaymentID) {
				n++
			}
		}
		return n
	}
	before := reads()
	if before < 2 {
		t.Errorf("%d reads of the payment after its refund, want the failed one and the one that counted", before)
	}
	// Counted: nothing wakes it again, however long it waits.
	time.Sleep(2 * time.Second)
	if n := reads(); n != before {
		t.Errorf("payment read %d more times after its total counted the Refund", n-before)
	}
}

// TestAStripeRefundThatFailsAfterSucceedingFreesItsMoney: Stripe documents
// refunds that fail after they succeeded (the balance transaction is
// reversed and the charge's amount_refunded goes down; events
// refund.updated and refund.failed). The Refund becomes Failed
// (RefundReversed), its Payment reads the lower figure and returns to
// Succeeded, and a new Refund of that money is made, not refused OverRefund.
func TestAStripeRefundThatFailsAfterSucceedingFreesItsMoney(t *testing.T) {
	t.Parallel()
	const secret = "whsec_reversal"
	ns, m, s, prov := webhookRefunds(t, v1alpha1.ProviderStripe, secret)
	p := paidPayment(t, ns, prov.Name, "order", 1999)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "all", Payment: p.Name})
	done := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	waitRefunded(t, p, v1alpha1.PhaseRefunded, 1999)

	if err := s.StripeFailRefund(done.Status.ProviderRefundID, "expired_or_canceled_card"); err != nil {
		t.Fatal(err)
	}
	failed := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundFailed)
	if f := failed.Status.Failure; f == nil || f.Code != "expired_or_canceled_card" || !fixture.RefundReady(failed) {
		t.Errorf("reversed Refund: %s; want Failed with Stripe's failure reason, settled without review", fixture.Dump(failed.Status))
	}
	fixture.Eventually(t, fixture.Timeout, "the payment back to Succeeded with nothing refunded", func() (bool, string) {
		got := fixture.GetPayment(t, env.Client, p)
		return got.Status.Phase == v1alpha1.PhaseSucceeded && got.Status.AmountRefunded == nil, fixture.Dump(got.Status)
	})

	again := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "again", Payment: p.Name, Amount: 1000})
	if got := fixture.WaitRefundPhase(t, env.Client, again, v1alpha1.RefundSucceeded); !amountIs(got.Status.Amount, 1000, "USD") {
		t.Errorf("the new Refund: %s", fixture.Dump(got.Status))
	}
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 1000)
	if n := len(m.Requests.Calls(fixture.IsRefundCreate)); n != 2 {
		t.Errorf("%d refund calls, want 2 (the reversed one, the new one)", n)
	}
}

// readsOf calls read whenever a Refund of name is read through it.
type readsOf struct {
	client.Client
	name string
	read func()
}

func (r readsOf) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.Refund); ok && key.Name == r.name {
		r.read()
	}
	return r.Client.Get(ctx, key, obj, opts...)
}
