package plugin_test

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
)

// payerSchedule keeps the status queries running while the payer approves,
// then slows down so that the payer who never approves ("abandoned") is
// still Pending, with queries left, when the test gets to it on a slow
// machine (the schedule's steps add up to 100 s). Its last step is how often
// an authorization waiting for the merchant's capture is looked at.
var payerSchedule = []string{"200ms", "200ms", "200ms", "200ms", "200ms", "500ms", "1s", "2s", "5s", "30s", "30s", "30s", "300ms"}

func get(t *testing.T, p *v1alpha1.Payment) *v1alpha1.Payment {
	t.Helper()
	return fixture.GetPayment(t, env.Client, p)
}

func refundsOf(t *testing.T, ns, payment string) []v1alpha1.Refund {
	t.Helper()
	var l v1alpha1.RefundList
	if err := env.Client.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []v1alpha1.Refund
	for _, rf := range l.Items {
		if rf.Spec.PaymentRef.Name == payment {
			out = append(out, rf)
		}
	}
	return out
}

// wantRefused checks that the command was refused with a message saying
// says, and that the payment's annotations are as they were.
func wantRefused(t *testing.T, r result, says string, p *v1alpha1.Payment) {
	t.Helper()
	if r.code != 1 || !strings.Contains(r.stderr, "refused, nothing written") || !strings.Contains(r.stderr, says) || r.stdout != "" {
		t.Errorf("want a refusal saying %q; got %s", says, r)
	}
	if got := get(t, p).Annotations; !maps.Equal(got, p.Annotations) {
		t.Errorf("annotations of %s changed by a refused command: %v, were %v", p.Name, got, p.Annotations)
	}
}

// TestActions: capture, refund, cancel, requery and resolve against a
// manager and paysim (KukoPay, captureMethod Manual, a hosted checkout
// the payer approves): each is checked by what the manager did, and by
// what is refused before anything is written.
func TestActions(t *testing.T) {
	s := fixture.StartSim(t, paysim.Options{})
	ns := fixture.Namespace(t, env.Client, "actions")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Sim: s, Schedule: payerSchedule})
	fixture.StartManager(t, env, ns, fixture.ManagerOptions{
		Options:          controllers.Options{Controllers: []controllers.Controller{controllers.ControllerPayment, controllers.ControllerRefund}},
		KubernetesEvents: true,
	})
	checkout := func(name string) *v1alpha1.Payment {
		return fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{
			Payment:       fixture.Payment{Namespace: ns, Name: name, Provider: prov.Name, Amount: 4500, Outcome: paysim.OutcomeNeedsAction},
			CaptureMethod: v1alpha1.CaptureManual, ReturnURL: "https://shop.example/return",
		})
	}
	awaitPayer := func(p *v1alpha1.Payment) *v1alpha1.Payment {
		return fixture.WaitPayment(t, env.Client, p, "to wait for the payer", func(p *v1alpha1.Payment) bool {
			return p.Status.CustomerAction != nil && p.Status.ProviderPaymentID != ""
		})
	}
	order, voided, abandoned := checkout("order"), checkout("voided"), checkout("abandoned")
	for _, p := range []*v1alpha1.Payment{order, voided} {
		if err := s.Approve(paysim.KukoPay, awaitPayer(p).Status.ProviderPaymentID); err != nil {
			t.Fatal(err)
		}
	}
	awaitPayer(abandoned)
	for _, p := range []*v1alpha1.Payment{order, voided} {
		fixture.WaitPayment(t, env.Client, p, "to wait for its capture", func(p *v1alpha1.Payment) bool {
			return p.Status.Phase == v1alpha1.PhaseAuthorized && p.Status.WaitingFor == "Capture" && p.Status.Operation == nil
		})
	}

	t.Run("capture refuses what the manager would, writing nothing", func(t *testing.T) {
		p := get(t, order)
		wantRefused(t, kubectl("paywarden", "capture", "order", "-n", ns, "--amount", "45.01"), "a whole number of minor units from 1 to the authorized 45.00 USD (4500)", p)
		wantRefused(t, kubectl("paywarden", "capture", "order", "-n", ns, "--amount", "30.001"), `"30.001" has 3 decimals, but USD has 2`, p)
		wantRefused(t, kubectl("paywarden", "capture", "order", "-n", ns, "--amount", "3000 USD"), `is not an amount in USD major units`, p)
	})

	t.Run("capture part of the authorization", func(t *testing.T) {
		r := kubectl("paywarden", "capture", "order", "-n", ns, "--amount", "30.00", "--timeout", "30s")
		want := fmt.Sprintf("payment %s/order: capture of 30.00 USD of the 45.00 USD authorized (annotation payments.paywarden.dev/capture=\"3000\" written)\n"+
			"captured: payment order is Succeeded, 30.00 of 45.00 USD\n", ns)
		if r.code != 0 || r.stdout != want {
			t.Fatalf("%s\nwant stdout\n%s", r, want)
		}
		got := get(t, order)
		if got.Annotations[v1alpha1.AnnotationCapture] != "3000" || got.Status.Actions.Capture != "3000" || got.Status.AmountReceived.Value != 3000 {
			t.Errorf("annotations %v, actions %+v, received %+v", got.Annotations, got.Status.Actions, got.Status.AmountReceived)
		}
		if v, _ := s.Payment(paysim.KukoPay, got.Status.ProviderPaymentID); v.Received != 3000 {
			t.Errorf("paysim received %d, want 3000", v.Received)
		}
	})

	t.Run("refund within what is refundable, and not above", func(t *testing.T) {
		p := get(t, order)
		wantRefused(t, kubectl("paywarden", "refund", "order", "-n", ns, "--amount", "30.01"),
			"OverRefund: 30.01 USD asked, but of the 30.00 USD received 0.00 USD is refunded or being refunded, leaving 30.00 USD", p)
		wantRefused(t, kubectl("paywarden", "refund", "order", "-n", ns, "--amount", "10.005"), `"10.005" has 3 decimals, but USD has 2`, p)
		if got := refundsOf(t, ns, "order"); len(got) != 0 {
			t.Fatalf("refused refunds created %d Refunds", len(got))
		}

		r := kubectl("paywarden", "refund", "order", "-n", ns, "--amount", "10.00", "--reason", "one item returned", "--timeout", "30s")
		rfs := refundsOf(t, ns, "order")
		if r.code != 0 || len(rfs) != 1 {
			t.Fatalf("%s\n%d Refunds", r, len(rfs))
		}
		rf := rfs[0]
		if !strings.HasPrefix(rf.Name, "order-") || rf.Spec.Amount.Value != 1000 || rf.Spec.Amount.Currency != "USD" || rf.Spec.Reason != "one item returned" || rf.Status.Phase != v1alpha1.RefundSucceeded {
			t.Errorf("refund %s: spec %+v, phase %s", rf.Name, rf.Spec, rf.Status.Phase)
		}
		want := fmt.Sprintf("refund %s/%s created: refund of 10.00 USD of payment order\nrefunded: refund %s is Succeeded, 10.00 USD (provider refund id %s)\n", ns, rf.Name, rf.Name, rf.Status.ProviderRefundID)
		if r.stdout != want {
			t.Errorf("stdout\n%s\nwant\n%s", r.stdout, want)
		}

		wantRefused(t, kubectl("paywarden", "refund", "order", "-n", ns, "--amount", "20.01"), "leaving 20.00 USD", p)
		if r := kubectl("paywarden", "refund", "order", "-n", ns, "--all", "--timeout", "30s"); r.code != 0 || !strings.Contains(r.stdout, "is Succeeded, 20.00 USD") {
			t.Fatal(r)
		}
		fixture.WaitPhase(t, env.Client, order, v1alpha1.PhaseRefunded, fixture.Timeout)
	})

	t.Run("cancel an authorization; not a payment that took money", func(t *testing.T) {
		r := kubectl("paywarden", "cancel", "voided", "-n", ns, "--reason", "out of stock", "--timeout", "30s")
		if r.code != 0 || !strings.HasSuffix(r.stdout, "canceled: payment voided is Canceled\n") {
			t.Fatal(r)
		}
		if got := get(t, voided); got.Status.Phase != v1alpha1.PhaseCanceled || got.Annotations[v1alpha1.AnnotationCancel] != "out of stock" {
			t.Errorf("phase %s annotations %v", got.Status.Phase, got.Annotations)
		}
		wantRefused(t, kubectl("paywarden", "cancel", "order", "-n", ns, "--reason", "too late"), "it took the payer's money, so it cannot be canceled", get(t, order))
	})

	t.Run("requery, then resolve", func(t *testing.T) {
		r := kubectl("paywarden", "requery", "abandoned", "-n", ns, "--timeout", "30s")
		if r.code != 0 || !strings.Contains(r.stdout, `: payment abandoned is Pending (provider status "requires_action")`) {
			t.Fatal(r)
		}
		got := get(t, abandoned)
		if v := got.Annotations[v1alpha1.AnnotationRequery]; v == "" || got.Status.Actions.Requery != v {
			t.Errorf("requery annotation %q acted on as %q", v, got.Status.Actions.Requery)
		}
		r = kubectl("paywarden", "resolve", "abandoned", "-n", ns, "--phase", "Failed", "--reason", "payer gave up, OPS-1", "--timeout", "30s")
		if r.code != 0 || !strings.HasSuffix(r.stdout, "resolved: payment abandoned is Failed\n") {
			t.Fatal(r)
		}
		got = get(t, abandoned)
		if h := got.Status.History[len(got.Status.History)-1]; h.To != v1alpha1.PhaseFailed || h.Source != v1alpha1.SourceManual || !strings.Contains(h.Reason, "payer gave up, OPS-1") {
			t.Errorf("last history entry %+v", h)
		}
		wantRefused(t, kubectl("paywarden", "requery", "abandoned", "-n", ns), "already Failed; nothing to query", got)
		wantRefused(t, kubectl("paywarden", "resolve", "abandoned", "-n", ns, "--phase", "Succeeded", "--reason", "x"), "already Failed and needs no review", got)
	})

	t.Run("why tells the story the manager wrote", func(t *testing.T) {
		r := kubectl("paywarden", "why", "order", "-n", ns)
		t.Logf("kubectl paywarden why order -n %s\n%s", ns, r.stdout)
		for _, want := range []string{"Payment " + ns + "/order: Refunded, 30.00 of 45.00 USD at kukopay", "Pending -> Authorized", "Normal CaptureRequested: capture of 30.00 USD requested",
			"(10.00 USD): ", "(20.00 USD): ", "Settled Refunded."} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("why order lacks %q:\n%s", want, r)
			}
		}
	})
}

// TestWaitTimeout: without a manager, an action's annotation is written
// and the wait ends with what it still waited for; a refusal the manager
// records as an Event ends it as refused; --wait=false returns at once.
func TestWaitTimeout(t *testing.T) {
	ctx := context.Background()
	ns := fixture.Namespace(t, env.Client, "quiet")
	authorized := func(name string) *v1alpha1.Payment {
		p := &v1alpha1.Payment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.PaymentSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "kukopay"}, Amount: v1alpha1.Amount{Value: 4500, Currency: "USD"},
				CaptureMethod: v1alpha1.CaptureManual},
		}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status = v1alpha1.PaymentStatus{Phase: v1alpha1.PhaseAuthorized, ProviderPaymentID: "kp_" + name, AmountAuthorized: &v1alpha1.Money{Value: 4500, Currency: "USD"}}
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p, q := authorized("held"), authorized("left")

	r := kubectl("paywarden", "capture", "held", "-n", ns, "--amount", "10.00", "--timeout", "1s")
	if r.code != 1 || r.stderr != "waiting up to 1s for the manager...\nerror: timed out after 1s: the manager has not acted on the capture yet (payment held is Authorized)\n" {
		t.Error(r)
	}
	if got := get(t, p).Annotations[v1alpha1.AnnotationCapture]; got != "1000" {
		t.Errorf("capture annotation %q, want 1000", got)
	}

	// The manager's part, played by the test: it takes the new value and
	// the provider refuses the capture.
	done := make(chan result, 1)
	go func() {
		done <- kubectl("paywarden", "capture", "held", "-n", ns, "--amount", "20.00", "--timeout", "30s")
	}()
	fixture.Eventually(t, fixture.Timeout, "the capture annotation 2000", func() bool {
		return get(t, p).Annotations[v1alpha1.AnnotationCapture] == "2000"
	})
	held := get(t, p)
	held.Status.Actions.Capture = "2000"
	if err := env.Client.Status().Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	refusal := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held.capturerefused"},
		EventTime:  metav1.NewMicroTime(time.Now()), ReportingController: "paywarden.dev/manager", ReportingInstance: "test", Action: "Reconcile",
		Regarding: corev1.ObjectReference{Kind: "Payment", APIVersion: v1alpha1.GroupVersion.String(), Namespace: ns, Name: "held"},
		Type:      corev1.EventTypeWarning, Reason: "CaptureRefused", Note: "the provider refused the capture: 402 insufficient_funds",
	}
	if err := env.Client.Create(ctx, refusal); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.code != 1 || !strings.HasSuffix(r.stdout, "capture refused by the manager: the provider refused the capture: 402 insufficient_funds\n") {
		t.Error(r)
	}

	r = kubectl("paywarden", "cancel", "left", "-n", ns, "--reason", "duplicate order", "--wait=false", "-o", "yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "payments.paywarden.dev/cancel: duplicate order") || !strings.Contains(r.stdout, "kind: Payment") ||
		r.stderr != fmt.Sprintf("payment %s/left: cancel: duplicate order (annotation payments.paywarden.dev/cancel=\"duplicate order\" written)\n", ns) {
		t.Error(r)
	}
	if got := get(t, q).Annotations[v1alpha1.AnnotationCancel]; got != "duplicate order" {
		t.Errorf("cancel annotation %q", got)
	}
}
