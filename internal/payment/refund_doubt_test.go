package payment_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
)

// A restored copy of a Refund that sent its refund is parked
// Unknown + CreateOutcomeUnknown with nothing in status that says "sent"
// (no createRequestedAt, no provider refund id): its original's refund may
// have moved money. docs/state-machine.md (Refunds, RefundAllowance): "A
// Refund in Unknown may have refunded and counts as in flight". SPEC 11.7
// "over-refund refused before any call"; invariant: the sum of all Refunds of
// a payment, including ones whose answer is unknown, never exceeds what was
// received.
//
// It counts for every other Refund of the payment, older ones included: a
// restored object gets a fresh creationTimestamp, so the creation order says
// nothing about its money (refundMayHaveMoved).
func TestRestoredCopyUnderReviewCountsForAnOlderRefund(t *testing.T) {
	pol := testPolicy()
	p := paidPayment(0) // the figure does not count the original's refund (it was in flight)

	// The copy of r1 (asked 500), restored at t0+2m, parked by PlanRefund.
	cp := newRefund("r1", 500, t0.Add(2*time.Minute))
	cp.UID = "copy-of-r1"
	cp.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-r1"}
	s := payment.PlanRefund(cp, pol, payment.RefundFacts{Payment: p}, t0.Add(2*time.Minute))
	cp.Status = s.Outcome.Status
	if cp.Status.Phase != v1alpha1.RefundUnknown || refundReview(&cp.Status) != v1alpha1.ReasonCreateOutcomeUnknown {
		t.Fatalf("precondition: the copy is %s review %q", cp.Status.Phase, refundReview(&cp.Status))
	}

	for _, tc := range []struct {
		name string
		r    *v1alpha1.Refund
	}{
		{"everything refundable", newRefund("r2", 0, t0.Add(time.Minute))},
		{"1600 of the 1999 (1600+500 > 1999)", newRefund("r2", 1600, t0.Add(time.Minute))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			amount, wait, refusal := payment.RefundAllowance(tc.r, p, []v1alpha1.Refund{*cp})
			if wait == "" && refusal == "" && amount.Value+500 > orderValue {
				t.Fatalf("granted %d beside a parked copy whose 500 refund may have gone: %d of %d received (want a wait or OverRefund)",
					amount.Value, amount.Value+500, orderValue)
			}
		})
	}
}

// Same through the ledger: a Refund applied again whose
// ledger record is unsettled (deleted before its answer) is parked Unknown +
// CreateOutcomeUnknown with no marker ("an earlier Refund ... was deleted
// while it was Processing ..."). An older Refund of the payment counts it.
func TestLedgerUnsettledRefundCountsForAnOlderRefund(t *testing.T) {
	pol := testPolicy()
	p := paidPayment(0)
	rec := payment.LedgerRecord{Kind: payment.LedgerRefund, Name: "r1", Phase: string(v1alpha1.RefundProcessing), ProviderID: "re_1",
		Asked: 500, Amount: 500, Currency: orderCurrency, SettledAt: t0}
	again := newRefund("r1", 500, t0.Add(2*time.Minute))
	again.UID = "again"
	s := payment.PlanRefund(again, pol, payment.RefundFacts{Payment: p, Ledger: []payment.LedgerRecord{rec}}, t0.Add(2*time.Minute))
	again.Status = s.Outcome.Status
	if again.Status.Phase != v1alpha1.RefundUnknown || again.Status.CreateRequestedAt != nil {
		t.Fatalf("precondition: %s %+v", s.Why, again.Status)
	}
	older := newRefund("r2", 1600, t0.Add(time.Minute))
	amount, wait, refusal := payment.RefundAllowance(older, p, []v1alpha1.Refund{*again})
	if wait == "" && refusal == "" && amount.Value+500 > orderValue {
		t.Fatalf("granted %d beside a parked Refund whose 500 may be refunding: %d of %d", amount.Value, amount.Value+500, orderValue)
	}
}

// An operator's resolve Failed is taken for the provider's
// failure by the "succeeded before it failed" rule. Refund r1 (500) was sent
// and is Processing (re_1). At t0+5m the provider refunded it; at t0+10m an
// operator, seeing no answer, resolves it Failed. The success event (occurred
// t0+5m) is delivered late (backfill / retry) at t0+30m.
//
// docs/state-machine.md "Refunds": "final phases do not flip (... ) a refund
// reported failed after it succeeded ..." and the table row "the refund's
// success delivered after its failure, the success no later than the failure
// was reported (the failure's event time, else when a read found it) | stays
// Failed: Stale". Nothing reported a failure here: a human guessed. A success
// from the provider on a Failed refund must be a ConflictingStatus review
// (the payment machine does exactly that for Failed then Succeeded, SPEC 2.1).
//
// Taken for Stale, the Refund would stay Failed without its provider id
// (so RefundMayLower is false and the payment never re-reads), and
// RefundAllowance would free its 500 for the next Refund although the money
// left.
func TestResolvedFailedThenProviderSuccessIsAConflict(t *testing.T) {
	r := sentRefund("r1", 500, v1alpha1.RefundProcessing)
	// The provider answered with its id (a call with no answer at all
	// cannot be resolved Failed: TestResolveFailedWaitsForARefundCallsAnswer).
	r.Status.ProviderRefundID = "re_1"
	manual := payment.Observation{Source: v1alpha1.SourceManual, Observed: payment.ObservedFailed, Reason: "looked failed to me"}
	res := payment.ApplyRefund(&r, manual, t0.Add(10*time.Minute))
	if res.Decision != payment.Applied || res.Status.Phase != v1alpha1.RefundFailed {
		t.Fatalf("precondition: resolve Failed %s %s", res.Decision, res.Status.Phase)
	}
	r.Status = res.Status

	ok := refundObs(payment.ObservedSucceeded, "evt-late-success", withAmount(500, orderCurrency))
	ok.ProviderRefundID = "re_1"
	ok.OccurredAt = t0.Add(5 * time.Minute)
	res = payment.ApplyRefund(&r, ok, t0.Add(30*time.Minute))
	if res.Decision != payment.Conflict || refundReview(&res.Status) != v1alpha1.ReasonConflictingStatus {
		t.Errorf("provider success of a refund an operator resolved Failed: %s (%s), review %q; want Conflict + ConflictingStatus",
			res.Decision, res.Reason, refundReview(&res.Status))
	}
	r.Status = res.Status

	// Consequence: the 500 is free again for another Refund of the payment.
	p := paidPayment(0)
	amount, wait, refusal := payment.RefundAllowance(newRefund("r2", 0, t0.Add(40*time.Minute)), p, []v1alpha1.Refund{r})
	if wait == "" && refusal == "" && amount.Value+500 > orderValue {
		t.Errorf("granted %d beside a refund of 500 the provider reported succeeded: %d of %d", amount.Value, amount.Value+500, orderValue)
	}
}

// The same with a parked refund (Unknown + CreateOutcomeUnknown
// after the lookup found nothing usable): the operator resolves Failed; the
// provider's success, which happened before the resolve, arrives later.
func TestParkedRefundResolvedFailedThenSuccessIsAConflict(t *testing.T) {
	r := sentRefund("r1", 500, v1alpha1.RefundPending)
	r.Status.ProviderRefundID = ""
	park := payment.Observation{Source: v1alpha1.SourceCreate, Observed: payment.ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown, Reason: "lookup found nothing"}
	r.Status = payment.ApplyRefund(&r, park, t0.Add(time.Hour)).Status
	r.Status = payment.ApplyRefund(&r, payment.Observation{Source: v1alpha1.SourceManual, Observed: payment.ObservedFailed, Reason: "not at the provider"}, t0.Add(2*time.Hour)).Status
	if r.Status.Phase != v1alpha1.RefundFailed {
		t.Fatalf("precondition: %s", r.Status.Phase)
	}
	ok := refundObs(payment.ObservedSucceeded, "evt-bf", withAmount(500, orderCurrency))
	ok.Source = v1alpha1.SourceBackfill
	ok.ProviderRefundID = "re_1"
	ok.OccurredAt = t0.Add(90 * time.Minute) // the search lagged; it had succeeded
	res := payment.ApplyRefund(&r, ok, t0.Add(3*time.Hour))
	if res.Decision != payment.Conflict || refundReview(&res.Status) != v1alpha1.ReasonConflictingStatus {
		t.Errorf("%s (%s), review %q; want Conflict + ConflictingStatus", res.Decision, res.Reason, refundReview(&res.Status))
	}
}

// Refund "a" (5.00) succeeded and was counted (amountRefunded
// 500), then failed after it succeeded (Stripe: succeeded -> failed, the
// charge's amount_refunded goes back down). The payment has not read the
// lower figure yet (refundsReversed does not name "a"). A new Refund of
// "everything still refundable" is granted 19.99 - 5.00 = 14.99 on the old
// figure; after the read the rest is 19.99, so the customer silently gets
// 5.00 less than "everything" and the Refund says Succeeded.
// docs/state-machine.md: "a Refund of everything only when low = high:
// beside high alone it would return less than the rest, silently", and the
// reversal table: "a new Refund of that money before the payment's read |
// waits (EarlierRefundInFlight), never refused OverRefund on the old figure".
// (A fixed amount that fits beside the old figure may go; "everything" may
// not: its amount depends on the figure being read.)
func TestEverythingBesideAnUnreadReversalWaits(t *testing.T) {
	a := reversedRefund("a", 500)
	p := countedBy(paidPayment(500), "a") // read when "a" had succeeded; reversal not read yet
	amount, wait, refusal := payment.RefundAllowance(fullRefund(), p, []v1alpha1.Refund{a})
	if wait != v1alpha1.ReasonEarlierRefundInFlight {
		t.Errorf("granted %d (wait %q, refusal %q) as \"everything\" while a 500 reversal is unread (the rest is %d once read); want EarlierRefundInFlight",
			amount.Value, wait, refusal, orderValue)
	}
}

// A refund of 5.00 made in the provider's dashboard (or by a
// Refund since deleted) was counted (amountRefunded 500), then failed after
// it succeeded. Its failure event reaches the payment (refundFailureSeen:
// status.refundFailureSeenAt set, the figure is to be read again). Before
// that read, a Refund of 16.00 is created to pay the customer back: it
// must not be refused OverRefund (Failed, final) on the old figure, since
// 19.99 is refundable once read; RefundAllowance reads
// status.refundFailureSeenAt besides the Refunds' own reversals.
// docs/state-machine.md reversal table: "a new Refund of that money before
// the payment's read | waits (EarlierRefundInFlight), never refused
// OverRefund on the old figure".
func TestRefundBesideAnUnreadDashboardReversalWaits(t *testing.T) {
	p := paidPayment(500)
	ev := obsWebhook(payment.ObservedUnknown, "evt-refund-failed")
	ev.RefundFailed = true
	res := payment.Apply(p, ev, t0.Add(time.Hour))
	if res.Status.RefundFailureSeenAt == nil {
		t.Fatalf("precondition: refundFailureSeenAt not set (%s %s)", res.Decision, res.Reason)
	}
	p.Status = res.Status
	for _, r := range []*v1alpha1.Refund{partRefund(1600), fullRefund()} {
		amount, wait, refusal := payment.RefundAllowance(r, p, nil)
		if wait != v1alpha1.ReasonEarlierRefundInFlight {
			t.Errorf("Refund asking %v: granted %d, wait %q, refusal %q while a reversal is unread; want EarlierRefundInFlight",
				r.Spec.Amount, amount.Value, wait, refusal)
		}
	}
}

// Same root cause: the restored copy resolved Succeeded by an
// operator ("found re_1 at the provider") has no marker and no refund id,
// so while the payment has not read its figure since (refundsCounted), an
// older Refund counts it.
func TestResolvedSucceededCopyCountsForAnOlderRefund(t *testing.T) {
	pol := testPolicy()
	p := paidPayment(0)
	cp := newRefund("r1", 500, t0.Add(2*time.Minute))
	cp.UID = "copy-of-r1"
	cp.Annotations = map[string]string{v1alpha1.AnnotationMoneyUID: "uid-r1"}
	cp.Status = payment.PlanRefund(cp, pol, payment.RefundFacts{Payment: p}, t0.Add(2*time.Minute)).Outcome.Status
	cp.Annotations[v1alpha1.AnnotationResolve] = "Succeeded"
	cp.Annotations[v1alpha1.AnnotationResolveReason] = "found re_1 at the provider"
	cp.Status = payment.PlanRefund(cp, pol, payment.RefundFacts{Payment: p}, t0.Add(3*time.Minute)).Outcome.Status
	if cp.Status.Phase != v1alpha1.RefundSucceeded {
		t.Fatalf("precondition: %+v", cp.Status)
	}
	amount, wait, refusal := payment.RefundAllowance(newRefund("r2", 1600, t0.Add(time.Minute)), p, []v1alpha1.Refund{*cp})
	if wait == "" && refusal == "" && amount.Value+500 > orderValue {
		t.Fatalf("granted %d beside a copy resolved Succeeded (500 refunded, not read into the payment's figure yet): %d of %d",
			amount.Value, amount.Value+500, orderValue)
	}
}
