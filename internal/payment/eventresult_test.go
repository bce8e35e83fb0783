package payment

import (
	"testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// What a refund event did to its Refund is recorded as the decision says.
func TestRefundEventResult(t *testing.T) {
	rf := &v1alpha1.Refund{}
	rf.Name = "r1"
	for _, c := range []struct {
		d    Decision
		want v1alpha1.EventResult
	}{
		{Applied, v1alpha1.ResultApplied},
		{Conflict, v1alpha1.ResultConflict},
		{Duplicate, v1alpha1.ResultDuplicate},
		{Stale, v1alpha1.ResultStale},
		{Ignored, v1alpha1.ResultIgnored},
	} {
		out := RefundOutcome{Results: []RefundResult{{Decision: Stale, Reason: "earlier"}, {Decision: c.d, Reason: "why"}}}
		got, msg := RefundEventResult(rf, out)
		if got != c.want || msg != "refund r1: why" {
			t.Errorf("%s: %s %q, want %s %q (the last decision's)", c.d, got, msg, c.want, "refund r1: why")
		}
	}
	if got, msg := RefundEventResult(rf, RefundOutcome{}); got != v1alpha1.ResultIgnored || msg != "refund r1: nothing decided" {
		t.Errorf("no decision: %s %q, want Ignored", got, msg)
	}
}

// A refund event is news about its payment and its Refund; the one result
// recorded never hides a share that still waits, and the more telling of the
// two otherwise.
func TestRefundEventOutcome(t *testing.T) {
	const (
		pay = "payment order: Succeeded -> PartiallyRefunded"
		ref = "refund r1: Processing -> Succeeded"
	)
	type res = v1alpha1.EventResult
	for _, c := range []struct {
		name            string
		payment, refund res
		refundMsg       string
		want            res
		wantMsg         string
	}{
		{"the payment's share waits although the Refund settled", v1alpha1.ResultOrphaned, v1alpha1.ResultApplied, ref,
			v1alpha1.ResultOrphaned, ref + "; " + pay},
		{"the payment's share waits, no Refund", v1alpha1.ResultOrphaned, "", "",
			v1alpha1.ResultOrphaned, pay},
		{"the payment's share waits, the Refund's part says nothing", v1alpha1.ResultOrphaned, v1alpha1.ResultApplied, "",
			v1alpha1.ResultOrphaned, pay},
		{"the Refund is not seen yet", v1alpha1.ResultApplied, v1alpha1.ResultOrphaned, "waiting for Refund shop/r1/uid",
			v1alpha1.ResultOrphaned, "waiting for Refund shop/r1/uid; " + pay},
		{"both applied", v1alpha1.ResultApplied, v1alpha1.ResultApplied, ref,
			v1alpha1.ResultApplied, ref + "; " + pay},
		{"the Refund contradicts", v1alpha1.ResultApplied, v1alpha1.ResultConflict, "refund r1: Failed is final",
			v1alpha1.ResultConflict, "refund r1: Failed is final; " + pay},
		{"the payment applied, the Refund a duplicate", v1alpha1.ResultApplied, v1alpha1.ResultDuplicate, "refund r1: already applied",
			v1alpha1.ResultApplied, pay},
		{"the payment applied, the Refund stale", v1alpha1.ResultApplied, v1alpha1.ResultStale, "refund r1: older",
			v1alpha1.ResultApplied, pay},
		{"the payment applied, the Refund ignored", v1alpha1.ResultApplied, v1alpha1.ResultIgnored, "refund r1: not acted on",
			v1alpha1.ResultApplied, pay},
		{"the payment stale, the Refund a duplicate", v1alpha1.ResultStale, v1alpha1.ResultDuplicate, "refund r1: already applied",
			v1alpha1.ResultDuplicate, "refund r1: already applied; " + pay},
		{"the payment a duplicate, the Refund applied", v1alpha1.ResultDuplicate, v1alpha1.ResultApplied, ref,
			v1alpha1.ResultApplied, ref + "; " + pay},
		{"the payment in conflict, the Refund stale", v1alpha1.ResultConflict, v1alpha1.ResultStale, "refund r1: older",
			v1alpha1.ResultStale, "refund r1: older; " + pay},
		{"a refund of an earlier Refund of that name settles none", v1alpha1.ResultApplied, "", "made for an earlier Refund r1",
			v1alpha1.ResultApplied, "made for an earlier Refund r1; " + pay},
		{"a refund made in the dashboard", v1alpha1.ResultApplied, "", "",
			v1alpha1.ResultApplied, pay},
		{"a refund made in the dashboard, stale", v1alpha1.ResultStale, "", "",
			v1alpha1.ResultStale, pay},
	} {
		got, msg := RefundEventOutcome(c.payment, pay, c.refund, c.refundMsg)
		if got != c.want || msg != c.wantMsg {
			t.Errorf("%s: %s %q, want %s %q", c.name, got, msg, c.want, c.wantMsg)
		}
	}
}
