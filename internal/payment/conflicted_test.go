package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// TestAConflictedEndHoldsItsOrder: a payment that ended without the money
// (declined, canceled, expired at the provider) and is then reported paid
// keeps its phase under review (ConflictingStatus, SPEC §3): the payer may
// have paid. Until a human decides, it holds its order (SPEC §12.1: no
// money moves twice): a second Payment of the order is parked, not created,
// and deleted meanwhile it is remembered in the ledger as Unknown, so that
// the order applied again waits for a human too. Resolved by a human, it
// releases the order as any decline does.
func TestAConflictedEndHoldsItsOrder(t *testing.T) {
	for _, ended := range []payment.Observed{payment.ObservedFailed, payment.ObservedCanceled, payment.ObservedExpired} {
		t.Run(string(ended), func(t *testing.T) {
			first := placed("first", "ORD-1", "", -time.Hour, v1alpha1.PhasePending)
			first.Status.ProviderPaymentID = "pay_1"
			retry := placed("retry", "ORD-1", "", 0, "")
			at := t0.Add(time.Minute)
			step := func(obs payment.Observation) {
				t.Helper()
				res := payment.Apply(&first, obs, at)
				first.Status = res.Status
				at = at.Add(time.Minute)
			}
			step(obsWebhook(ended, "evt-ended"))
			if first.Status.Phase.TookMoney() || review(&first) != "" {
				t.Fatalf("after %s: phase %s, review %q", ended, first.Status.Phase, review(&first))
			}
			if owner := payment.ReferenceOwner(&retry, []v1alpha1.Payment{first, retry}); owner != "" {
				t.Fatalf("a retry after a plain %s is owned by %q: the order may be paid again (SPEC §12.1)", first.Status.Phase, owner)
			}

			step(obsWebhook(payment.ObservedSucceeded, "evt-late-paid", withPaid()))
			if review(&first) != v1alpha1.ReasonConflictingStatus {
				t.Fatalf("a success after %s: phase %s, review %q; want the phase kept under ConflictingStatus", ended, first.Status.Phase, review(&first))
			}
			if owner := payment.ReferenceOwner(&retry, []v1alpha1.Payment{first, retry}); owner != "first" {
				t.Errorf("while %s is under review for a reported success, the order's retry is owned by %q, want first: the payer may be charged twice", first.Status.Phase, owner)
			}
			rec, ok := payment.PaymentRecord(&first, at)
			if !ok || !rec.TookMoney() || rec.Phase != string(v1alpha1.PhaseUnknown) {
				t.Errorf("deleted under review it is remembered as %+v (ok %v); want phase Unknown, holding the order", rec, ok)
			}
			if out, parked := payment.Adopt(&retry, []payment.LedgerRecord{rec}, at); !parked || out.Status.Phase != v1alpha1.PhaseUnknown || reviewOf(out.Status) == "" {
				t.Errorf("another attempt after it was deleted under review: parked %v, status %+v; want it parked for a human", parked, out.Status)
			}
			again := retry.DeepCopy()
			again.Name = "first"
			if out, parked := payment.Adopt(again, []payment.LedgerRecord{rec}, at); !parked || out.Status.Phase != v1alpha1.PhaseUnknown || reviewOf(out.Status) == "" {
				t.Errorf("the same manifest applied again after it was deleted under review: parked %v, status %+v; want it parked for a human", parked, out.Status)
			}

			// A human checked the provider: no money was taken.
			step(payment.Observation{Source: v1alpha1.SourceManual, Observed: ended, Reason: "no charge at the provider"})
			if review(&first) != "" || first.Status.Phase.TookMoney() {
				t.Fatalf("resolved %s: phase %s, review %q", ended, first.Status.Phase, review(&first))
			}
			if owner := payment.ReferenceOwner(&retry, []v1alpha1.Payment{first, retry}); owner != "" {
				t.Errorf("resolved without the money, it still holds its order for %q", owner)
			}
			if rec, ok := payment.PaymentRecord(&first, at); !ok || rec.TookMoney() {
				t.Errorf("resolved without the money, it is remembered as %+v", rec)
			}
		})
	}
}

func reviewOf(st v1alpha1.PaymentStatus) string {
	return review(&v1alpha1.Payment{Status: st})
}

// TestAnEarlierAttemptsFailureDoesNotFailAProcessingPayment: a payment
// processing (Stripe: a SEPA debit after a declined card) is failed by a
// failure event only when that event happened after the event it last moved
// on. Stripe retries undelivered events for days and does not deliver them
// in order, so the declined card's payment_intent.payment_failed can come
// after payment_intent.processing: it is Stale, and the status query reads
// the present. Event times have whole seconds: one of the same second may be
// the earlier. A payment moved by a query has no event time to compare
// with: the failure stands.
func TestAnEarlierAttemptsFailureDoesNotFailAProcessingPayment(t *testing.T) {
	processingAt := t0.Add(2 * time.Minute)
	for _, tt := range []struct {
		name     string
		byQuery  bool // the payment was moved to Processing by a status query
		queried  bool // the failure is read by a status query (the present)
		failedAt time.Time
		want     v1alpha1.PaymentPhase
	}{
		{name: "a failure before the processing event", failedAt: processingAt.Add(-time.Minute), want: v1alpha1.PhaseProcessing},
		{name: "a failure in the processing event's second", failedAt: processingAt.Add(900 * time.Millisecond), want: v1alpha1.PhaseProcessing},
		{name: "a failure after the processing event", failedAt: processingAt.Add(time.Second), want: v1alpha1.PhaseFailed},
		{name: "a failure of a payment a query found processing", byQuery: true, failedAt: processingAt.Add(-time.Minute), want: v1alpha1.PhaseFailed},
		{name: "a failure a status query reads", queried: true, want: v1alpha1.PhaseFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := placed("order", "ORD-1", "", 0, v1alpha1.PhasePending)
			p.Status.ProviderPaymentID = "pay_1"
			processing := obsWebhook(payment.ObservedProcessing, "evt-processing", withOccurredAt(processingAt))
			if tt.byQuery {
				processing = obsQuery(payment.ObservedProcessing)
			}
			p.Status = payment.Apply(&p, processing, processingAt.Add(time.Second)).Status
			if p.Status.Phase != v1alpha1.PhaseProcessing {
				t.Fatalf("phase %s, want Processing", p.Status.Phase)
			}
			failed := obsWebhook(payment.ObservedPending, "evt-declined", withOccurredAt(tt.failedAt), withFailure("card_declined", "insufficient funds"))
			failed.Raw = "payment_intent.payment_failed"
			if tt.queried {
				failed = obsQuery(payment.ObservedPending, withFailure("card_declined", "insufficient funds"))
			}
			res := payment.Apply(&p, failed, processingAt.Add(time.Hour))
			if res.Status.Phase != tt.want {
				t.Errorf("phase %s (%s: %s), want %s", res.Status.Phase, res.Decision, res.Reason, tt.want)
			}
		})
	}
}
