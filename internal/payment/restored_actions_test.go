package payment_test

import (
	"slices"
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
)

// Operator actions on copies: an operator annotation carried by a
// copy of a Payment restored from a backup (or re-applied) must not be
// acted on before the copy has learnt what the provider already holds for
// its order (SPEC §12.1: "None of that may move money again ... Observe
// before create"; docs/state-machine.md "Observe before create").
//
// The old object took the payer's money; the operator's cancel was refused
// on it (CancelRefused: money moved), and the annotation stayed. The
// backup restores the object with its annotations and finalizer but
// without status. Acted on first, the cancel saw no provider id and no
// create marker and canceled the copy locally ("never sent to the
// provider"), never looked up: Canceled while the provider held a captured
// payment, and Canceled releases the order's merchant reference (SPEC
// §12.1), so the order could be charged again. The copy is looked up first;
// only a lookup that finds nothing lets the cancel act, before any create.
func TestRestoredCopyWithACancelAnnotationIsLookedUpNotCanceledBlind(t *testing.T) {
	pol := testPolicy()
	old := newPay("order-1")
	old.Finalizers = []string{v1alpha1.FinalizerMoneyInFlight}
	old.Annotations = map[string]string{
		v1alpha1.AnnotationMoneyUID: string(old.UID),
		v1alpha1.AnnotationCancel:   "customer changed their mind", // refused on the old object: it had taken the money
	}
	restored := old.DeepCopy()
	restored.UID = "restored-with-a-new-uid"
	if !payment.Restored(restored) {
		t.Fatalf("the copy is not seen as restored")
	}

	// Deleted before its first reconcile wrote anything, it is planned on
	// the API server's copy (a write that conflicted with the deletion):
	// settled Canceled it would be remembered in the ledger as a Canceled
	// Payment of its name, replacing the record that the order took money.
	// Nothing is written; the object goes as it is.
	deleted := restored.DeepCopy()
	deleted.DeletionTimestamp = ptrTime(t0)
	if s := planned(deleted, pol, t0); s.Action != payment.Nothing {
		t.Fatalf("a deleted restored copy carrying a cancel annotation: %s (%s) phase %q, want nothing", s.Action, s.Why, s.Outcome.Status.Phase)
	}

	// Deleted while its look-up was out, the answer "nothing found" is
	// stored on the API server's deleted copy: nothing is created for it.
	gone := store(deleted, payment.AfterLookup(deleted, pol, payment.Call{Err: errNotFound}, t0))
	if gone.Status.CreateRequestedAt != nil || gone.Status.Phase != "" {
		t.Fatalf("a deleted restored copy whose look-up found nothing: marker %v phase %q, want nothing started", gone.Status.CreateRequestedAt, gone.Status.Phase)
	}
	if s := planned(gone, pol, t0.Add(time.Second)); s.Action != payment.Nothing || payment.InFlight(gone) != "" {
		t.Fatalf("then: %s (%s), in flight %q; want nothing, and nothing holding its deletion", s.Action, s.Why, payment.InFlight(gone))
	}

	s := planned(restored, pol, t0)
	if s.Action == payment.Write && s.Outcome.Status.Phase.IsFinal() {
		t.Fatalf("a restored copy carrying a cancel annotation was settled %s without asking the provider (%s); history %+v: "+
			"want the lookup by merchant reference first (its order may hold the payer's money)",
			s.Outcome.Status.Phase, s.Why, s.Outcome.Status.History)
	}
	if s.Action != payment.Lookup {
		t.Fatalf("a restored copy carrying a cancel annotation: %s (%s), want Lookup", s.Action, s.Why)
	}

	// Nothing found: the order is new, and the operator asked to cancel
	// it. It is canceled with nothing sent, never created first.
	got := store(restored, payment.AfterLookup(restored, pol, payment.Call{Err: errNotFound}, t0))
	if got.Status.Phase != v1alpha1.PhaseCanceled || got.Status.CreateRequestedAt != nil {
		t.Fatalf("nothing found for a restored copy asked to cancel: phase %q, create marker %v; want Canceled with nothing sent",
			got.Status.Phase, got.Status.CreateRequestedAt)
	}
}

// The same with the ledger: a manifest re-applied after its Payment
// succeeded and was deleted (the ledger remembers it) adopts the record
// instead of creating again. Carrying the cancel annotation (refused on the
// first object), it was canceled locally first and the record never read:
// the order the provider holds as paid was shown Canceled.
func TestReappliedPaymentWithACancelAnnotationAdoptsTheLedgerRecord(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(100 * time.Hour)
	rec, ok := payment.PaymentRecord(settled("order-1", v1alpha1.PhaseSucceeded, orderValue, 0), now)
	if !ok {
		t.Fatal("no record for the settled payment")
	}
	again := annotate(newPay("order-1"), v1alpha1.AnnotationCancel, "customer changed their mind")
	again.UID = "second-life"

	s := payment.Plan(again, pol, payment.Facts{Ledger: []payment.LedgerRecord{rec}}, now)
	if s.Action != payment.Write || s.Outcome.Status.Phase != v1alpha1.PhaseSucceeded || s.Outcome.Status.AdoptedAt == nil {
		t.Fatalf("re-applied with the cancel annotation, the ledger holding its success: %s (%s) phase %q adopted %v; want the record adopted (Succeeded)",
			s.Action, s.Why, s.Outcome.Status.Phase, s.Outcome.Status.AdoptedAt)
	}
}

// The same root cause with resolve: the old object was resolved Failed by
// an operator (its create's outcome unknown), and the provider's late
// success then made it ConflictingStatus (Failed kept, under review). The
// restored copy carries the resolve annotation; run before the lookup,
// Resolve settled the copy Failed with no provider id and no review: the
// provider held the payer's money, paywarden said Failed (which releases
// the merchant reference), and nobody was asked to look.
func TestRestoredCopyWithAResolveAnnotationIsLookedUpFirst(t *testing.T) {
	pol := testPolicy()
	old := newPay("order-1")
	old.Finalizers = []string{v1alpha1.FinalizerMoneyInFlight}
	old.Annotations = map[string]string{
		v1alpha1.AnnotationMoneyUID:      string(old.UID),
		v1alpha1.AnnotationResolve:       "Failed",
		v1alpha1.AnnotationResolveReason: "not in the provider's dashboard",
	}
	restored := old.DeepCopy()
	restored.UID = "restored-with-a-new-uid"

	// Deleted before its first reconcile wrote anything, it is planned on
	// the API server's copy (a write that conflicted with the deletion):
	// settled Canceled it would be remembered in the ledger as a Canceled
	// Payment of its name, replacing the record that the order took money.
	// Nothing is written; the object goes as it is.
	deleted := restored.DeepCopy()
	deleted.DeletionTimestamp = ptrTime(t0)
	if s := planned(deleted, pol, t0); s.Action != payment.Nothing {
		t.Fatalf("a deleted restored copy carrying a cancel annotation: %s (%s) phase %q, want nothing", s.Action, s.Why, s.Outcome.Status.Phase)
	}

	// Deleted while its look-up was out, the answer "nothing found" is
	// stored on the API server's deleted copy: nothing is created for it.
	gone := store(deleted, payment.AfterLookup(deleted, pol, payment.Call{Err: errNotFound}, t0))
	if gone.Status.CreateRequestedAt != nil || gone.Status.Phase != "" {
		t.Fatalf("a deleted restored copy whose look-up found nothing: marker %v phase %q, want nothing started", gone.Status.CreateRequestedAt, gone.Status.Phase)
	}
	if s := planned(gone, pol, t0.Add(time.Second)); s.Action != payment.Nothing || payment.InFlight(gone) != "" {
		t.Fatalf("then: %s (%s), in flight %q; want nothing, and nothing holding its deletion", s.Action, s.Why, payment.InFlight(gone))
	}

	s := planned(restored, pol, t0)
	if s.Action == payment.Write && s.Outcome.Status.Phase.IsFinal() {
		t.Fatalf("a restored copy carrying a resolve annotation was settled %s without asking the provider (%s), provider id %q: want the lookup by merchant reference first",
			s.Outcome.Status.Phase, s.Why, s.Outcome.Status.ProviderPaymentID)
	}
	if s.Action != payment.Lookup {
		t.Errorf("a restored copy carrying a resolve annotation: %s (%s), want Lookup", s.Action, s.Why)
	}
}

// TestACaptureAnswerAfterAResolveIsNotDropped: a resolve to a phase
// without the money, asked while the operator's capture is in flight, is
// refused (ResolveIgnored): applied, it would end the operation, and a
// capture whose answer is lost would never be looked up while the provider
// holds the money. The capture's answer, when it comes, settles the payment
// as the provider says.
func TestACaptureAnswerAfterAResolveIsNotDropped(t *testing.T) {
	pol := testPolicy()
	now := t0.Add(time.Minute)
	p := annotate(authorizedFor(t, "resolve-mid-capture", orderValue), v1alpha1.AnnotationCapture, payment.CaptureAll)
	p = store(p, payment.Plan(p, pol, payment.Facts{}, now).Outcome)
	if op := p.Status.Operation; op == nil || op.Kind != v1alpha1.OperationCapture {
		t.Fatalf("operation %+v, want the capture marked", op)
	}
	if s := payment.Plan(p, pol, payment.Facts{FreshOperation: true}, now); s.Action != payment.CallCapture {
		t.Fatalf("step %s, want the capture call", s.Action)
	}
	// The capture is out. The operator resolves the payment Failed.
	resolved := annotate(p, v1alpha1.AnnotationResolve, "Failed")
	resolved.Annotations[v1alpha1.AnnotationResolveReason] = "customer called off the order"
	step := payment.Plan(resolved, pol, payment.Facts{}, now.Add(time.Second))
	resolved = store(resolved, step.Outcome)
	if resolved.Status.Phase != v1alpha1.PhaseAuthorized || resolved.Status.Operation == nil || !slices.Contains(eventReasons(step.Outcome), "ResolveIgnored") {
		t.Fatalf("resolved Failed while the capture is out: phase %s, operation %+v, events %v; want it refused (ResolveIgnored), the capture still followed",
			resolved.Status.Phase, resolved.Status.Operation, eventReasons(step.Outcome))
	}
	// The capture's answer: the provider took the money.
	out := payment.AfterOperation(resolved, pol, v1alpha1.OperationCapture, answer(provider.StatusSucceeded), now.Add(2*time.Second))
	if got := store(resolved, out); got.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("the provider captured the payment: phase %s, events %v; want Succeeded", got.Status.Phase, eventReasons(out))
	}
}
