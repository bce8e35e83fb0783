package payment

import (
	"fmt"
	"strings"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// ApplyEvent applies one provider event, already translated by FromEvent, to
// the payment it was resolved to.
func ApplyEvent(p *v1alpha1.Payment, obs Observation, now time.Time) Outcome {
	c := begin(p, now)
	c.apply(obs)
	return c.done()
}

// EventResult is what the inbox records on the event, given the payment as
// stored after ApplyEvent and that call's outcome.
//
// A Duplicate whose id is in the payment's history is this very event,
// applied by an earlier attempt that died before recording it: that attempt's
// result is reported, not "duplicate". A refund that arrives before the
// success it refunds (reordering) is news to keep: it waits as Orphaned and
// is applied when the payment changes.
func EventResult(p *v1alpha1.Payment, out Outcome, obs Observation) (v1alpha1.EventResult, string) {
	if len(out.Results) == 0 {
		return v1alpha1.ResultIgnored, fmt.Sprintf("payment %s: nothing decided", p.Name)
	}
	res := out.Results[len(out.Results)-1]
	msg := fmt.Sprintf("payment %s", p.Name)
	if res.Reason != "" {
		msg += ": " + res.Reason
	}
	switch res.Decision {
	case Applied:
		if t := res.Transition; t != nil {
			msg = fmt.Sprintf("payment %s: %s -> %s", p.Name, displayPhase(t.From), t.To)
			if res.Reason != "" {
				msg += ": " + res.Reason
			}
		}
		return v1alpha1.ResultApplied, msg
	case Duplicate:
		for _, h := range p.Status.History {
			if h.EventID != obs.EventID {
				continue
			}
			if h.From == h.To && (h.Reason == v1alpha1.ReasonConflictingStatus || strings.HasPrefix(h.Reason, v1alpha1.ReasonDuplicatePayment)) {
				return v1alpha1.ResultConflict, fmt.Sprintf("payment %s: conflict recorded by an earlier attempt", p.Name)
			}
			return v1alpha1.ResultApplied, fmt.Sprintf("payment %s: applied by an earlier attempt", p.Name)
		}
		return v1alpha1.ResultDuplicate, msg
	case Stale:
		return v1alpha1.ResultStale, msg
	case Conflict:
		return v1alpha1.ResultConflict, msg
	default:
		if waitsForTheMoney(obs) && (!p.Status.Phase.IsFinal() || endedInDoubt(p)) {
			return v1alpha1.ResultOrphaned, msg + "; waiting for the payment to succeed"
		}
		return v1alpha1.ResultIgnored, msg
	}
}

// waitsForTheMoney: obs is news about money the payment took (a refund, a
// refund's failure, a dispute's outcome; a dispute's opening is recorded in
// any phase and never gets here). Events come in any order (a backfill of
// Stripe or PayPal reads newest first): one that comes before the payment's
// success waits for it (Orphaned: the payment's next change applies it
// again) instead of being dropped; a dispute lost, dropped, would raise no
// review, a refund's failure dropped would leave a total the provider took
// back.
func waitsForTheMoney(obs Observation) bool {
	return obs.Observed == ObservedRefund || obs.Observed == ObservedDispute || obs.RefundFailed
}

// endedInDoubt: p ended without taking money (Failed, Expired, Canceled),
// and a human is to decide it (NeedsReview: the provider reported it paid
// after, ConflictingStatus): it may yet be resolved Succeeded. Its refunds
// wait for that decision (a Refund waits, a refund event stays Orphaned)
// instead of being refused or dropped on its phase.
func endedInDoubt(p *v1alpha1.Payment) bool {
	return p.Status.Phase.IsFinal() && !p.Status.Phase.TookMoney() && reviewReason(p.Status.Conditions) != ""
}

// RefundEventResult is what the inbox records of a refund event's effect on
// the Refund it is about, given the outcome of ApplyRefundEvent, with its
// message.
func RefundEventResult(rf *v1alpha1.Refund, out RefundOutcome) (v1alpha1.EventResult, string) {
	if len(out.Results) == 0 {
		return v1alpha1.ResultIgnored, fmt.Sprintf("refund %s: nothing decided", rf.Name)
	}
	res := out.Results[len(out.Results)-1]
	msg := fmt.Sprintf("refund %s: %s", rf.Name, res.Reason)
	switch res.Decision {
	case Applied:
		return v1alpha1.ResultApplied, msg
	case Conflict:
		return v1alpha1.ResultConflict, msg
	case Duplicate:
		return v1alpha1.ResultDuplicate, msg
	case Stale:
		return v1alpha1.ResultStale, msg
	}
	return v1alpha1.ResultIgnored, msg
}

// RefundEventOutcome is the one result recorded for a refund event, which is
// news about two objects: its payment (the refunded total; result and msg,
// from EventResult) and the Refund it settles (refund and refundMsg, from
// RefundEventResult; refund is "" when the event settles no Refund, and
// refundMsg then says why, or is "" for a refund paywarden did not make).
//
//   - The payment's share waiting (Orphaned: it has not succeeded yet) keeps
//     the event Orphaned, even when its Refund settled now: nothing applies a
//     finished event again, and the payment's refunded total would be lost.
//   - Otherwise the Refund's result is recorded when it waits (Orphaned), was
//     applied or contradicts the Refund (Conflict), or when the payment's
//     share was not applied; a payment's Applied outranks a Refund's
//     Duplicate, Stale or Ignored.
//
// The message names both parts, the Refund's first, whenever the Refund's
// part has something to say that the recorded result does not hide.
func RefundEventOutcome(result v1alpha1.EventResult, msg string, refund v1alpha1.EventResult, refundMsg string) (v1alpha1.EventResult, string) {
	switch {
	case result == v1alpha1.ResultOrphaned && refundMsg != "":
		return result, refundMsg + "; " + msg
	case result == v1alpha1.ResultOrphaned:
		return result, msg
	case refund != "" && (refund == v1alpha1.ResultOrphaned || refund == v1alpha1.ResultApplied || refund == v1alpha1.ResultConflict || result != v1alpha1.ResultApplied):
		return refund, refundMsg + "; " + msg
	case refund == "" && refundMsg != "":
		return result, refundMsg + "; " + msg
	}
	return result, msg
}
