package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/ledger"
	"github.com/paywarden/paywarden/internal/paysim"
)

// ledgerManager runs the payment and refund controllers over ns with the
// ledger kept in a namespace of its own.
func ledgerManager(t *testing.T, ns string) *fixture.Manager {
	t.Helper()
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.LedgerNamespace = fixture.Namespace(t, env.Client, "ledger")
	return fixture.StartManager(t, env, ns, o)
}

// deleteAndWaitGone deletes obj and waits until the API server no longer
// has it (its finalizer let go).
func deleteAndWaitGone(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	fixture.Eventually(t, fixture.Timeout, obj.GetName()+" to be gone", func() (bool, string) {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err), fmt.Sprintf("err=%v finalizers=%v", err, obj.GetFinalizers())
	})
}

// TestDeletedAndReappliedObjectsAdoptTheirOutcome (SPEC §12.1): Payments of
// every provider type and a Refund settle; every object is deleted and
// applied again from its manifest, without status and with new UIDs. Each
// adopts its earlier outcome from the ledger: the same phase, ids and
// amounts, and no second create or refund at the provider.
func TestDeletedAndReappliedObjectsAdoptTheirOutcome(t *testing.T) {
	t.Parallel()
	for _, typ := range []v1alpha1.ProviderType{v1alpha1.ProviderKukoPay, v1alpha1.ProviderPayPal, v1alpha1.ProviderGeneric, v1alpha1.ProviderStripe} {
		t.Run(string(typ), func(t *testing.T) {
			t.Parallel()
			ns := fixture.Namespace(t, env.Client, "identity")
			s, _ := simProvider(t, ns, typ)
			m := ledgerManager(t, ns)

			a := paidPayment(t, ns, string(typ), "order-a", 1999)
			b := paidPayment(t, ns, string(typ), "order-b", 2500)
			for _, p := range []*v1alpha1.Payment{a, b} {
				if !controllerutil.ContainsFinalizer(p, v1alpha1.FinalizerMoneyInFlight) {
					t.Errorf("%s was created at the provider without the %s finalizer", p.Name, v1alpha1.FinalizerMoneyInFlight)
				}
			}
			rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "r1", Payment: a.Name, Amount: 500})
			rf = fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
			a = waitRefunded(t, a, v1alpha1.PhasePartiallyRefunded, 500)
			b = fixture.GetPayment(t, env.Client, b)
			created := s.Counters().PaymentsCreated
			if n := s.Counters().Searches; n != 0 {
				t.Errorf("%d lookups by merchant reference on the happy path of new payments, want 0", n)
			}
			creates := len(m.Requests.Calls(fixture.IsKind(fixture.CallCreate)))
			refunds, _ := fixture.SimRefunds(t, s, typ, a.Status.ProviderPaymentID)

			for _, obj := range []client.Object{rf, a, b} {
				deleteAndWaitGone(t, obj.DeepCopyObject().(client.Object))
			}
			// The same manifests, applied again.
			a2 := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-a", Provider: string(typ), Amount: 1999})
			b2 := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-b", Provider: string(typ), Amount: 2500})
			rf2 := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "r1", Payment: "order-a", Amount: 500})

			for _, c := range []struct{ old, now *v1alpha1.Payment }{{a, a2}, {b, b2}} {
				got := fixture.WaitPayment(t, env.Client, c.now, "adopted", func(p *v1alpha1.Payment) bool { return p.Status.AdoptedAt != nil })
				if got.UID == c.old.UID {
					t.Fatalf("%s was not re-created", got.Name)
				}
				// Adopted, it is remembered again when it goes.
				if !controllerutil.ContainsFinalizer(got, v1alpha1.FinalizerMoneyInFlight) {
					t.Errorf("%s adopted without the %s finalizer", got.Name, v1alpha1.FinalizerMoneyInFlight)
				}
				if got.Status.Phase != c.old.Status.Phase || got.Status.ProviderPaymentID != c.old.Status.ProviderPaymentID ||
					!sameMoney(got.Status.AmountReceived, c.old.Status.AmountReceived) || !sameMoney(got.Status.AmountRefunded, c.old.Status.AmountRefunded) {
					t.Errorf("%s adopted %s; before deletion it was %s", got.Name, fixture.Dump(got.Status), fixture.Dump(c.old.Status))
				}
				if h := got.Status.History; len(h) == 0 || h[0].Source != v1alpha1.SourceLedger || !strings.Contains(h[0].Reason, "adopted: "+c.old.Status.ProviderPaymentID) {
					t.Errorf("%s: history does not say it was adopted: %s", got.Name, fixture.Dump(got.Status.History))
				}
				fixture.Eventually(t, fixture.Timeout, got.Name+" Adopted Event", func() bool { return len(m.Events.About(got.Name, "Adopted")) > 0 })
			}
			got := fixture.WaitRefund(t, env.Client, rf2, "adopted", func(r *v1alpha1.Refund) bool { return r.Status.AdoptedAt != nil })
			if got.Status.Phase != v1alpha1.RefundSucceeded || got.Status.ProviderRefundID != rf.Status.ProviderRefundID || !sameMoney(got.Status.Amount, rf.Status.Amount) {
				t.Errorf("r1 adopted %s; before deletion it was %s", fixture.Dump(got.Status), fixture.Dump(rf.Status))
			}

			if n := s.Counters().PaymentsCreated; n != created {
				t.Errorf("paysim created %d payments after the re-apply, %d before: a second create", n, created)
			}
			if n := len(m.Requests.Calls(fixture.IsKind(fixture.CallCreate))); n != creates {
				t.Errorf("%d create calls after the re-apply, %d before", n, creates)
			}
			if n, total := fixture.SimRefunds(t, s, typ, a.Status.ProviderPaymentID); n != refunds || total != 500 {
				t.Errorf("paysim made %d refunds (%d) after the re-apply, %d before: a second refund", n, total, refunds)
			}
		})
	}
}

func sameMoney(a, b *v1alpha1.Money) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// inFlightPayment runs the payment and refund controllers, with a ledger,
// over a new namespace with a kukopay provider at a new paysim, and creates
// there a Payment "in-flight" that the provider keeps pending: it returns
// once the payment is created at the provider.
func inFlightPayment(t *testing.T) (*fixture.Sim, *v1alpha1.PaymentProvider, *fixture.Manager, *v1alpha1.Payment) {
	t.Helper()
	ns := fixture.Namespace(t, env.Client, "identity")
	s, prov := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	m := ledgerManager(t, ns)
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "in-flight", Provider: "kukopay", Outcome: paysim.OutcomePending})
	p = fixture.WaitPayment(t, env.Client, p, "created at the provider", func(p *v1alpha1.Payment) bool { return p.Status.ProviderPaymentID != "" })
	return s, prov, m, p
}

// TestDeletionWaitsWhileMoneyIsInFlight: a Payment deleted while its outcome
// is not known stays (its finalizer), says why in an Event, is driven on to
// its final answer and only then goes, remembered in the ledger.
func TestDeletionWaitsWhileMoneyIsInFlight(t *testing.T) {
	t.Parallel()
	// The provider keeps it pending until the test has seen the deletion
	// wait, however long that takes, then lets it succeed.
	s, _, m, p := inFlightPayment(t)
	ns := p.Namespace
	if p.Status.Phase.IsFinal() {
		t.Fatalf("settled too early to test: %s", p.Status.Phase)
	}
	if err := env.Client.Delete(context.Background(), p.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	m.Events.Wait(t, "Normal", "DeletionWaits")
	held := fixture.GetPayment(t, env.Client, p)
	if held.DeletionTimestamp.IsZero() || held.Status.Phase.IsFinal() {
		t.Fatalf("want a deleted payment still waiting for its answer, got deletion %v phase %s", held.DeletionTimestamp, held.Status.Phase)
	}
	if err := s.SetOutcome(paysim.KukoPay, p.Status.ProviderPaymentID, paysim.Script{Outcome: paysim.OutcomeSucceed}); err != nil {
		t.Fatal(err)
	}
	deleteAndWaitGone(t, held)
	if n := len(m.Events.About("in-flight", "DeletionWaits")); n == 0 {
		t.Errorf("no DeletionWaits Event on the payment")
	}
	// It settled before it went: applied again, it adopts Succeeded.
	again := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "in-flight", Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "4s"})
	got := fixture.WaitPayment(t, env.Client, again, "adopted", func(p *v1alpha1.Payment) bool { return p.Status.AdoptedAt != nil })
	if got.Status.Phase != v1alpha1.PhaseSucceeded || got.Status.ProviderPaymentID != p.Status.ProviderPaymentID {
		t.Errorf("re-applied payment adopted %s, want Succeeded %s", fixture.Dump(got.Status), p.Status.ProviderPaymentID)
	}
	if n := s.Counters().PaymentsCreated; n != 1 {
		t.Errorf("paysim created %d payments, want 1", n)
	}
}

// TestRestoredCopyIsLookedUpBeforeCreate: a Payment restored from a backup
// (its metadata with the finalizer and the annotation of the object that
// sent the create, no status, a new UID) that the ledger does not know is
// looked up at the provider by merchant reference and adopted: no second
// create.
func TestRestoredCopyIsLookedUpBeforeCreate(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "identity")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	m := fixture.StartManager(t, env, ns, fixture.Run(controllers.ControllerPayment)) // no ledger
	p := paidPayment(t, ns, "kukopay", "backed-up", 1999)
	if s.Counters().Searches != 0 {
		t.Fatalf("a new payment was looked up before its create")
	}
	deleteAndWaitGone(t, p.DeepCopy())

	restored := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.Name, Annotations: p.Annotations, Finalizers: p.Finalizers}, Spec: p.Spec}
	if err := env.Client.Create(context.Background(), restored); err != nil {
		t.Fatal(err)
	}
	got := fixture.WaitPayment(t, env.Client, restored, "adopted", func(p *v1alpha1.Payment) bool { return p.Status.AdoptedAt != nil })
	if got.Status.Phase != v1alpha1.PhaseSucceeded || got.Status.ProviderPaymentID != p.Status.ProviderPaymentID || got.Status.CreateRequestedAt != nil {
		t.Errorf("restored copy: %s", fixture.Dump(got.Status))
	}
	if !strings.Contains(got.Status.History[0].Reason, "restored without status") {
		t.Errorf("history does not say how it was adopted: %s", fixture.Dump(got.Status.History))
	}
	c := s.Counters()
	if c.PaymentsCreated != 1 || c.Searches != 1 {
		t.Errorf("paysim created %d payments after %d lookups, want 1 and 1", c.PaymentsCreated, c.Searches)
	}
	if n := len(m.Requests.Calls(fixture.IsKind(fixture.CallCreate))); n != 1 {
		t.Errorf("%d create calls, want 1", n)
	}
	if got.Annotations[v1alpha1.AnnotationMoneyUID] != p.Annotations[v1alpha1.AnnotationMoneyUID] {
		t.Errorf("the adopted copy's annotation changed: %v", got.Annotations)
	}
}

// TestRetentionRemembersPaymentsWithoutTheFinalizer: a payment settled
// before paywarden put finalizers on payments (simulated by removing it) is
// written to the ledger by retention before it deletes it, so its manifest
// applied again adopts the outcome instead of creating again.
func TestRetentionRemembersPaymentsWithoutTheFinalizer(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "identity")
	s, _ := simProvider(t, ns, v1alpha1.ProviderGeneric)
	ledgerNS := fixture.Namespace(t, env.Client, "ledger")
	o := fixture.Run(controllers.ControllerPayment)
	o.LedgerNamespace = ledgerNS
	fixture.StartManager(t, env, ns, o)
	p := paidPayment(t, ns, "generic", "before-finalizers", 1999)
	base := p.DeepCopy()
	p.Finalizers = nil
	if err := env.Client.Patch(context.Background(), p, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}

	ro := fixture.Run(controllers.ControllerRetention)
	ro.LedgerNamespace = ledgerNS
	ro.Clock = clocktesting.NewFakeClock(time.Now().Add(v1alpha1.DefaultFinalRetention + time.Hour))
	fixture.StartManager(t, env, ns, ro)
	fixture.Eventually(t, fixture.Timeout, "retention to delete the payment", func() bool {
		return apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &v1alpha1.Payment{}))
	})
	again := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: p.Name, Provider: "generic", Amount: 1999})
	got := fixture.WaitPayment(t, env.Client, again, "adopted", func(p *v1alpha1.Payment) bool { return p.Status.AdoptedAt != nil })
	if got.Status.Phase != v1alpha1.PhaseSucceeded || got.Status.ProviderPaymentID != p.Status.ProviderPaymentID {
		t.Errorf("adopted %s", fixture.Dump(got.Status))
	}
	if n := s.Counters().PaymentsCreated; n != 1 {
		t.Errorf("paysim created %d payments, want 1", n)
	}
}

// TestADeletedAuthorizedPaymentCanStillBeCanceled: a deleted payment holding
// an authorization waits (its money is reserved) and says how to end it; the
// operator's cancel is acted on, the authorization voided at the provider,
// and the payment goes.
func TestADeletedAuthorizedPaymentCanStillBeCanceled(t *testing.T) {
	t.Parallel()
	s, prov := startPayPal(t, paysim.Options{}, "identity", payerSchedule)
	ns := prov.Namespace
	o := fixture.Run(controllers.ControllerPayment)
	o.LedgerNamespace = fixture.Namespace(t, env.Client, "ledger")
	m := fixture.StartManager(t, env, ns, o)
	p := fixture.CreateCheckoutPayment(t, env.Client, fixture.CheckoutPayment{Payment: fixture.Payment{Namespace: ns, Name: "authorized", Provider: prov.Name}, CaptureMethod: v1alpha1.CaptureManual})
	id := approve(t, s, v1alpha1.ProviderPayPal, p)
	awaitAuthorized(t, p)
	if err := env.Client.Delete(context.Background(), p.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, fixture.Timeout, "a DeletionWaits Event naming the cancel", func() bool {
		for _, e := range m.Events.About(p.Name, "DeletionWaits") {
			if strings.Contains(e.Message, v1alpha1.AnnotationCancel) {
				return true
			}
		}
		return false
	})
	fixture.Annotate(t, env.Client, p, v1alpha1.AnnotationCancel, "order withdrawn, object deleted")
	deleteAndWaitGone(t, p.DeepCopy())
	if n := s.Counters().VoidsByPayment[id]; n != 1 {
		t.Errorf("%d voids at paysim, want 1", n)
	}
}

// TestANamespaceDeletedWithMoneyInFlightDoesNotHang: its PaymentProvider
// goes first (a namespace being deleted), and a payment whose outcome is not
// known cannot be settled any more: it goes, remembered in the ledger as
// unsettled with a Warning Event, and its manifest applied again sends
// nothing and waits for review.
func TestANamespaceDeletedWithMoneyInFlightDoesNotHang(t *testing.T) {
	t.Parallel()
	s, prov, m, p := inFlightPayment(t)
	ns := p.Namespace
	deleteAndWaitGone(t, prov.DeepCopy())
	deleteAndWaitGone(t, p.DeepCopy())
	m.Events.Wait(t, "Warning", "DeletedUnsettled")

	recreated := prov.DeepCopy()
	recreated.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: prov.Name}
	recreated.Status = v1alpha1.PaymentProviderStatus{}
	if err := env.Client.Create(context.Background(), recreated); err != nil {
		t.Fatal(err)
	}
	again := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "in-flight", Provider: "kukopay", Outcome: paysim.OutcomePending})
	got := fixture.WaitPayment(t, env.Client, again, "parked for review", func(p *v1alpha1.Payment) bool { return p.Status.Phase == v1alpha1.PhaseUnknown })
	if got.Status.CreateRequestedAt != nil || !strings.Contains(fixture.Dump(got.Status.Conditions), v1alpha1.ReasonCreateOutcomeUnknown) {
		t.Errorf("re-applied after an unsettled delete: %s", fixture.Dump(got.Status))
	}
	if n := s.Counters().PaymentsCreated; n != 1 {
		t.Errorf("paysim created %d payments, want 1", n)
	}
}

// TestRestoredRefundCopyIsNeverSentAgain: a Refund restored from a backup
// (the finalizer and the money-uid annotation of the object that made the
// refund, no status, no owner reference, a new UID) that the ledger does
// not know is parked for a human: the refund may have been made, so none is
// sent again. Owning it by its Payment on its first reconcile must not take
// it for an object of its own.
func TestRestoredRefundCopyIsNeverSentAgain(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "identity")
	simProvider(t, ns, v1alpha1.ProviderKukoPay)
	m := refundManager(t, ns) // no ledger
	p := paidPayment(t, ns, "kukopay", "backed-up", 1999)
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "r1", Payment: p.Name, Amount: 500})
	done := fixture.WaitRefundPhase(t, env.Client, rf, v1alpha1.RefundSucceeded)
	deleteAndWaitGone(t, done.DeepCopy())

	restored := &v1alpha1.Refund{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: done.Name, Annotations: done.Annotations, Finalizers: done.Finalizers}, Spec: done.Spec}
	if err := env.Client.Create(context.Background(), restored); err != nil {
		t.Fatal(err)
	}
	got := fixture.WaitRefund(t, env.Client, restored, "parked for a human", func(r *v1alpha1.Refund) bool { return r.Status.Phase == v1alpha1.RefundUnknown })
	if !strings.Contains(fixture.Dump(got.Status), "restored without status") {
		t.Errorf("restored Refund: %s", fixture.Dump(got.Status))
	}
	if n := len(m.Requests.Calls(fixture.IsRefundCreate)); n != 1 {
		t.Errorf("%d refund calls, want 1 (none for the restored copy)", n)
	}
	if got.Annotations[v1alpha1.AnnotationMoneyUID] != done.Annotations[v1alpha1.AnnotationMoneyUID] {
		t.Errorf("the restored copy's money-uid changed to %q, was %q", got.Annotations[v1alpha1.AnnotationMoneyUID], done.Annotations[v1alpha1.AnnotationMoneyUID])
	}
}

// TestARefundManifestChangedAndRevertedAdoptsItsFirstRefund: a GitOps
// history of one Refund manifest "five" of a payment of 1999. It asks 500
// (refunded); its amount, immutable, is changed to 300, so the tool replaces
// the object: the 300 Refund asks another amount and is a new refund
// (refunded). The change is reverted: "five" asking 500 is applied again and
// adopts the first refund from the ledger instead of refunding 500 a second
// time. Deleted again, it is remembered again in place of its own record:
// the name keeps one record per amount it asked, and applying either amount
// once more adopts it too.
func TestARefundManifestChangedAndRevertedAdoptsItsFirstRefund(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "identity")
	typ := v1alpha1.ProviderKukoPay
	s, _ := simProvider(t, ns, typ)
	ledgerNS := fixture.Namespace(t, env.Client, "ledger")
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.LedgerNamespace = ledgerNS
	fixture.StartManager(t, env, ns, o)
	p := paidPayment(t, ns, string(typ), "order-a", 1999)
	apply := func(amount int64) *v1alpha1.Refund {
		return fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "five", Payment: p.Name, Amount: amount})
	}
	refunded := func(want int, total int64) {
		t.Helper()
		if n, got := fixture.SimRefunds(t, s, typ, p.Status.ProviderPaymentID); n != want || got != total {
			t.Fatalf("paysim made %d refunds of %d in all, want %d of %d", n, got, want, total)
		}
	}

	first := fixture.WaitRefundPhase(t, env.Client, apply(500), v1alpha1.RefundSucceeded)
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 500)
	deleteAndWaitGone(t, first.DeepCopy())
	second := fixture.WaitRefundPhase(t, env.Client, apply(300), v1alpha1.RefundSucceeded)
	if second.Status.AdoptedAt != nil || second.Status.ProviderRefundID == first.Status.ProviderRefundID {
		t.Fatalf("five asking 300 after five asking 500 adopted it: %s", fixture.Dump(second.Status))
	}
	waitRefunded(t, p, v1alpha1.PhasePartiallyRefunded, 800)
	deleteAndWaitGone(t, second.DeepCopy())
	refunded(2, 800)

	adopt := func(amount int64, was *v1alpha1.Refund) {
		t.Helper()
		got := fixture.WaitRefund(t, env.Client, apply(amount), "adopted", func(r *v1alpha1.Refund) bool { return r.Status.AdoptedAt != nil || r.Status.Phase.IsFinal() })
		if got.Status.AdoptedAt == nil || got.Status.Phase != v1alpha1.RefundSucceeded || got.Status.ProviderRefundID != was.Status.ProviderRefundID {
			t.Fatalf("five asking %d applied again: %s; want adopted from %s", amount, fixture.Dump(got.Status), was.Status.ProviderRefundID)
		}
		deleteAndWaitGone(t, got.DeepCopy())
	}
	adopt(500, first) // the revert
	refunded(2, 800)
	l := &ledger.Store{Reader: env.Client, Namespace: ledgerNS}
	recs, err := l.Get(context.Background(), v1alpha1.RefundIdentity(p, "five"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, r := range recs {
		kept = append(kept, fmt.Sprintf("%d:%s", r.Asked, r.ProviderID))
	}
	if want := fmt.Sprintf("[300:%s 500:%s]", second.Status.ProviderRefundID, first.Status.ProviderRefundID); fmt.Sprint(kept) != want {
		t.Errorf("the ledger keeps %v for five, want %s (the 500 remembered again after the 300)", kept, want)
	}
	adopt(300, second)
	adopt(500, first)
	refunded(2, 800)
}

// TestAnUnreadableLedgerLineKeepsItsOrderWaitingVisibly: a ledger line the
// manager cannot read (a later release's format after a rollback, a line
// edited by hand) may be the record that the order took its money. A new
// Payment of that order, and a new Refund of that name, are not sent while
// it stands, and each says why with a Warning Event LedgerUnreadable naming
// the line; once the line is removed the Payment is created.
func TestAnUnreadableLedgerLineKeepsItsOrderWaitingVisibly(t *testing.T) {
	t.Parallel()
	ns := fixture.Namespace(t, env.Client, "identity")
	s, _ := simProvider(t, ns, v1alpha1.ProviderKukoPay)
	ledgerNS := fixture.Namespace(t, env.Client, "ledger")
	o := fixture.Run(controllers.ControllerPayment, controllers.ControllerRefund)
	o.LedgerNamespace = ledgerNS
	m := fixture.StartManager(t, env, ns, o)
	paid := paidPayment(t, ns, "kukopay", "paid", 1999)

	const line = "v2|P|order-x|Succeeded|pay_1|1999|1999|0|USD|1764651000|1764910200"
	order := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order-x"}, Spec: v1alpha1.PaymentSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: "kukopay"}}}
	unreadable := map[string]string{order.OrderIdentity(): line, v1alpha1.RefundIdentity(paid, "r1"): line}
	shards := map[string]map[string]string{}
	for id, l := range unreadable {
		if shards[id[:3]] == nil {
			shards[id[:3]] = map[string]string{}
		}
		shards[id[:3]][id] = l
	}
	for digits, data := range shards {
		shard := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ledgerNS, Name: ledger.ShardPrefix + digits}, Data: data}
		if err := env.Client.Create(context.Background(), shard); err != nil {
			t.Fatal(err)
		}
	}
	created := s.Counters().PaymentsCreated

	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-x", Provider: "kukopay", Amount: 1999})
	rf := fixture.CreateRefund(t, env.Client, fixture.Refund{Namespace: ns, Name: "r1", Payment: paid.Name, Amount: 500})
	for _, name := range []string{p.Name, rf.Name} {
		fixture.Eventually(t, fixture.Timeout, name+" LedgerUnreadable Event", func() (bool, string) {
			got := m.Events.About(name, "LedgerUnreadable")
			if len(got) == 0 {
				return false, "no Event"
			}
			return got[0].Type == corev1.EventTypeWarning && strings.Contains(got[0].Message, line), got[0].Type + " " + got[0].Message
		})
	}
	// Several reconciles have failed on the line by now; none sent anything.
	if got := fixture.GetPayment(t, env.Client, p); got.Status.CreateRequestedAt != nil || got.Status.Phase != "" {
		t.Errorf("order-x moved past its unreadable ledger line: %s", fixture.Dump(got.Status))
	}
	if got := fixture.GetRefund(t, env.Client, rf); got.Status.CreateRequestedAt != nil || got.Status.ProviderRefundID != "" {
		t.Errorf("r1 moved past its unreadable ledger line: %s", fixture.Dump(got.Status))
	}
	if n := s.Counters().PaymentsCreated; n != created {
		t.Errorf("paysim created %d payments, want none past the unreadable line", n-created)
	}
	if n := s.Counters().ActionRequests; n != 0 {
		t.Errorf("paysim took %d refund calls, want none past the unreadable line", n)
	}

	// The line removed by hand, the payment goes out (its next retry, or at
	// once on a change of it).
	shard := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ledgerNS, Name: ledger.ShardPrefix + order.OrderIdentity()[:3]}, shard); err != nil {
		t.Fatal(err)
	}
	delete(shard.Data, order.OrderIdentity())
	if err := env.Client.Update(context.Background(), shard); err != nil {
		t.Fatal(err)
	}
	fixture.Annotate(t, env.Client, p, "example.com/poke", "1")
	fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, fixture.Timeout)
}
