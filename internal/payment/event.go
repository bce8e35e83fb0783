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
		if obs.Observed == ObservedRefund && !p.Status.Phase.IsFinal() {
			return v1alpha1.ResultOrphaned, msg + "; waiting for the payment to succeed"
		}
		return v1alpha1.ResultIgnored, msg
	}
}
