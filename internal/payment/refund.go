package payment

import (
	"fmt"
	"time"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// The Refund's state machine (SPEC §11.7): Pending → Processing →
// Succeeded | Failed, Unknown + NeedsReview. Like the payment's, it is one
// pure function; the refund controller and the inbox only read, call and
// write. The Payment's refunded total keeps coming from the provider's
// cumulative figure (Apply), so a refund made in the provider's dashboard
// and one made by a Refund are never counted twice.

// RefundResult is ApplyRefund's answer. Status is a new value.
type RefundResult struct {
	Status     v1alpha1.RefundStatus
	Source     v1alpha1.ObservationSource
	Decision   Decision
	Reason     string
	Events     []Event
	Transition *Transition
}

// ApplyRefund runs the refund's state machine on one observation.
func ApplyRefund(r *v1alpha1.Refund, obs Observation, now time.Time) RefundResult {
	m := refundMachine{r: r, st: *r.Status.DeepCopy(), deciding: deciding{obs: obs, now: now}}
	m.run()
	m.finish()
	return RefundResult{Status: m.st, Source: obs.Source, Decision: m.decision, Reason: m.reason, Events: m.events, Transition: m.transition}
}

type refundMachine struct {
	r  *v1alpha1.Refund
	st v1alpha1.RefundStatus
	deciding
}

func (m *refundMachine) ledger() ledger {
	return ledger{
		history: &m.st.History, dropped: &m.st.HistoryDropped, last: &m.st.LastEvent,
		recent: &m.st.RecentEventIDs, conditions: &m.st.Conditions, events: &m.events, now: m.now,
	}
}

func (m *refundMachine) phase() v1alpha1.RefundPhase {
	if m.st.Phase == "" {
		return v1alpha1.RefundPending
	}
	return m.st.Phase
}

func (m *refundMachine) run() {
	l := m.ledger()
	if m.obs.EventID != "" && l.seen(m.obs.EventID) {
		m.decide(Duplicate, "event %s already applied", m.obs.EventID)
		return
	}
	if why := ForeignRefund(m.r, m.obs.ProviderRefundID, m.obs.RefundReference); why != "" && m.obs.Review == "" {
		// Another refund's status (an earlier Refund of the same name, or
		// another refund of the payment) is never taken for this one's, nor
		// its amount for this one's amount.
		m.decide(Ignored, "%s", why)
		return
	}
	from := m.phase()
	switch {
	case m.obs.Source == v1alpha1.SourceManual:
		m.manual(from)
	case m.obs.Observed == ObservedPending || m.obs.Observed == ObservedProcessing:
		to := v1alpha1.RefundPhase(m.obs.Observed)
		switch {
		case m.st.Phase == "" || from == v1alpha1.RefundPending && to == v1alpha1.RefundProcessing:
			m.moveTo(to, "")
		default:
			m.confirm()
			m.decide(Stale, "%s after %s is stale", to, from)
		}
	case m.obs.Observed == ObservedSucceeded:
		m.succeeded(from)
	case m.obs.Observed == ObservedFailed:
		m.failed(from)
	case m.obs.Observed == ObservedUnknown && m.obs.Review != "":
		m.review(from)
	case m.obs.Observed == ObservedUnknown:
		m.confirm()
		m.decide(Ignored, "the provider does not know the outcome yet")
	default:
		m.decide(Ignored, "%s does not apply to a refund", m.obs.Observed)
	}
}

func (m *refundMachine) succeeded(from v1alpha1.RefundPhase) {
	switch {
	case from == v1alpha1.RefundSucceeded:
		m.confirm()
		m.decide(Stale, "already Succeeded")
	case from == v1alpha1.RefundFailed && m.beforeTheFailure():
		// Delivered late (events come in any order): the refund succeeded
		// before it failed, which is a refund failing after it succeeded
		// (Stripe), not a contradiction.
		m.decide(Stale, "succeeded at %s, before the refund failed: it failed after it succeeded", m.obs.OccurredAt.UTC().Format(time.RFC3339))
	case from == v1alpha1.RefundFailed:
		m.conflict(from)
	default:
		if a, want := m.obs.Amount, m.st.Amount; a != nil && want != nil && (a.Value != want.Value || a.Currency != want.Currency) {
			msg := fmt.Sprintf("provider reports %s refunded, expected %s",
				v1alpha1.FormatAmount(a.Value, a.Currency), v1alpha1.FormatAmount(want.Value, want.Currency))
			if m.ledger().reviewReason() == v1alpha1.ReasonAmountMismatch {
				m.decide(Stale, "amount mismatch already under review")
				return
			}
			m.moveTo(v1alpha1.RefundUnknown, v1alpha1.ReasonAmountMismatch)
			m.ledger().needsReview(v1alpha1.ReasonAmountMismatch, msg)
			return
		}
		if a := m.obs.Amount; a != nil && m.st.Amount == nil {
			// Settled before paywarden decided an amount (the provider's
			// event came first): what it refunded is the amount, which later
			// Refunds of the payment count (RefundAllowance).
			cp := *a
			m.st.Amount = &cp
		}
		m.moveTo(v1alpha1.RefundSucceeded, "")
	}
}

// beforeTheFailure: obs is an event that happened no later than the failure
// of the Failed refund was reported (the failure's event time, else when a
// read found it failed). A Failed an operator resolved reports nothing of
// the provider's: a success the provider reports beside it is a conflict
// for a human, whenever it happened.
func (m *refundMachine) beforeTheFailure() bool {
	if m.obs.OccurredAt.IsZero() {
		return false
	}
	h := m.st.History
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].To == v1alpha1.PaymentPhase(v1alpha1.RefundFailed) {
			if h[i].Source == v1alpha1.SourceManual {
				return false
			}
			break
		}
	}
	var failedAt time.Time
	switch last, h := m.st.LastEvent, m.st.History; {
	case last != nil && last.Time != nil:
		failedAt = last.Time.Time
	case len(h) > 0:
		failedAt = h[len(h)-1].Time.Time
	default:
		return false
	}
	return !m.obs.OccurredAt.After(failedAt)
}

func (m *refundMachine) failed(from v1alpha1.RefundPhase) {
	switch from {
	case v1alpha1.RefundSucceeded:
		// A refund can fail after it succeeded (Stripe, "Refunds": a refund
		// whose status becomes failed has its balance transaction reversed
		// by failure_balance_transaction, and the charge's amount_refunded
		// goes down). The money is back with the merchant: the Refund is
		// Failed, which frees its amount, and its payment reads the
		// provider's lower total (RefundsUncounted).
		if f := m.obs.Failure; f != nil {
			cp := *f
			m.st.Failure = &cp
		} else {
			m.st.Failure = &v1alpha1.Failure{Code: v1alpha1.ReasonRefundReversed}
		}
		msg := "the provider reports this refund failed after it succeeded; its money is back with the merchant"
		if f := m.st.Failure; f.Code != "" && f.Code != v1alpha1.ReasonRefundReversed {
			msg += " (" + f.Code + ")"
		}
		m.events = append(m.events, Event{Warning: true, Reason: v1alpha1.ReasonRefundReversed, Message: msg})
		m.moveTo(v1alpha1.RefundFailed, v1alpha1.ReasonRefundReversed)
	case v1alpha1.RefundFailed:
		m.confirm()
		m.decide(Stale, "already Failed")
	default:
		if f := m.obs.Failure; f != nil {
			cp := *f
			m.st.Failure = &cp
		}
		reason := m.obs.Reason
		if reason == "" && m.obs.Failure != nil {
			reason = m.obs.Failure.Code
		}
		m.moveTo(v1alpha1.RefundFailed, reason)
	}
}

func (m *refundMachine) review(from v1alpha1.RefundPhase) {
	current := m.ledger().reviewReason()
	switch {
	case from.IsFinal():
		m.decide(Stale, "already %s", from)
	case from == v1alpha1.RefundUnknown && current == m.obs.Review:
		m.decide(Stale, "already under review for %s", current)
	case IsHumanReason(current) && !IsHumanReason(m.obs.Review):
		if from == v1alpha1.RefundUnknown {
			m.decide(Stale, "%s does not replace the review for %s", m.obs.Review, current)
			return
		}
		m.moveTo(v1alpha1.RefundUnknown, m.obs.Review)
	default:
		msg := m.obs.Reason
		if msg == "" {
			msg = "paywarden cannot settle this refund automatically: " + m.obs.Review
		}
		m.moveTo(v1alpha1.RefundUnknown, m.obs.Review)
		m.ledger().needsReview(m.obs.Review, msg)
	}
}

func (m *refundMachine) manual(from v1alpha1.RefundPhase) {
	to := v1alpha1.RefundPhase(m.obs.Observed)
	if to != v1alpha1.RefundSucceeded && to != v1alpha1.RefundFailed {
		m.decide(Ignored, "a manual resolve of a refund must be Succeeded or Failed, not %q", m.obs.Observed)
		return
	}
	reviewing := m.ledger().reviewReason() != ""
	if from.IsFinal() && !reviewing {
		m.decide(Ignored, "refund is already %s and needs no review", from)
		return
	}
	if at := m.st.CreateRequestedAt; at != nil && m.st.ProviderRefundID == "" && to == v1alpha1.RefundFailed && !reviewing {
		// Resolved Failed, its call would never be looked up, and its amount
		// would be free for another Refund beside a refund that may stand
		// at the provider. Its look-up settles it, or puts it under review.
		m.decide(Ignored, "its refund call (requested %s) has no answer yet and may have refunded: wait for its outcome, or resolve Succeeded",
			at.UTC().Format(time.RFC3339))
		return
	}
	if reviewing {
		m.ledger().clearReview("resolved by an operator: " + m.obs.Reason)
	}
	m.moveTo(to, v1alpha1.ReasonResolved+": "+m.obs.Reason)
}

func (m *refundMachine) conflict(from v1alpha1.RefundPhase) {
	msg := fmt.Sprintf("provider reported %s for a refund already %s", m.obs.Observed, from)
	if m.obs.EventID == "" && m.ledger().reviewReason() == v1alpha1.ReasonConflictingStatus {
		m.decide(Stale, "conflict already under review")
		return
	}
	l := m.ledger()
	l.remember(m.obs.Source, string(m.obs.Observed), m.obs.Raw, m.obs.EventID, m.obs.OccurredAt)
	l.needsReview(v1alpha1.ReasonConflictingStatus, msg)
	l.appendHistory(v1alpha1.PaymentPhase(from), v1alpha1.PaymentPhase(from), m.obs.Source, m.obs.EventID, v1alpha1.ReasonConflictingStatus)
	m.decide(Conflict, "%s", msg)
}

func (m *refundMachine) confirm() {
	if m.obs.Raw != "" {
		m.st.ProviderStatus = m.obs.Raw
	}
	if id := m.obs.ProviderRefundID; id != "" && m.st.ProviderRefundID == "" {
		m.st.ProviderRefundID = id
	}
}

func (m *refundMachine) moveTo(to v1alpha1.RefundPhase, reason string) {
	from := m.st.Phase
	l := m.ledger()
	l.remember(m.obs.Source, string(m.obs.Observed), m.obs.Raw, m.obs.EventID, m.obs.OccurredAt)
	m.confirm()
	m.st.Phase = to
	if to.IsFinal() || to == v1alpha1.RefundUnknown {
		m.st.Query.NextTime = nil
	}
	if m.obs.Source == v1alpha1.SourceManual && reason == "" {
		reason = m.obs.Reason
	}
	l.appendHistory(v1alpha1.PaymentPhase(from), v1alpha1.PaymentPhase(to), m.obs.Source, m.obs.EventID, reason)
	if from != to {
		m.transition = &Transition{From: v1alpha1.PaymentPhase(from), To: v1alpha1.PaymentPhase(to)}
		msg := fmt.Sprintf("refund %s -> %s via %s", displayPhase(v1alpha1.PaymentPhase(from)), to, m.obs.Source)
		if reason != "" {
			msg += ": " + reason
		}
		m.events = append(m.events, Event{Warning: to == v1alpha1.RefundFailed || to == v1alpha1.RefundUnknown, Reason: "Refund" + string(to), Message: msg})
	}
	m.decide(Applied, "%s", reason)
}

func (m *refundMachine) finish() {
	if m.decision == Duplicate {
		return
	}
	if a := m.st.Amount; a != nil {
		m.st.AmountDisplay = v1alpha1.FormatAmount(a.Value, a.Currency)
	}
	if m.st.Phase.IsFinal() {
		m.st.Query.NextTime, m.st.Query.UnansweredSince = nil, nil
		m.st.WaitingFor = ""
	}
	setReadyCondition(&m.st.Conditions, m.st.Phase.IsFinal(), string(m.st.Phase), m.now)
}

// FromRefund translates the provider's view of a refund into an observation.
func FromRefund(rf provider.Refund, source v1alpha1.ObservationSource, eventID string) Observation {
	obs := Observation{
		Source: source, Raw: rf.RawStatus, EventID: eventID, ProviderRefundID: rf.ID, RefundReference: rf.Reference,
		Observed: map[provider.RefundStatus]Observed{
			provider.RefundPending: ObservedPending, provider.RefundProcessing: ObservedProcessing,
			provider.RefundSucceeded: ObservedSucceeded, provider.RefundFailed: ObservedFailed,
		}[rf.Status],
	}
	if obs.Observed == "" {
		obs.Observed = ObservedUnknown
	}
	if rf.Currency != "" && obs.Observed == ObservedSucceeded {
		obs.Amount = &v1alpha1.Money{Value: rf.Amount, Currency: rf.Currency}
	}
	if obs.Observed == ObservedFailed && (rf.FailureCode != "" || rf.FailureMessage != "") {
		obs.Failure = &v1alpha1.Failure{Code: rf.FailureCode, Message: rf.FailureMessage}
	}
	return obs
}
