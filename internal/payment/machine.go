// Package payment holds the one state machine that decides every change of a
// Payment's status (SPEC §2.1), and the helper every writer uses to store the
// result with optimistic concurrency.
//
// Apply is a pure function: no client, no clock, no randomness. Time comes in
// as an argument, so re-running it on freshly read state after a write
// conflict is always correct, and the reconciler, the webhook receiver, the
// inbox processor and operator actions cannot disagree about a rule.
package payment

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// Observed is a provider status normalized across providers.
type Observed string

// Normalized observations (SPEC §2.1).
const (
	ObservedPending    Observed = "Pending"
	ObservedProcessing Observed = "Processing"
	ObservedSucceeded  Observed = "Succeeded"
	ObservedFailed     Observed = "Failed"
	ObservedExpired    Observed = "Expired"
	ObservedRefund     Observed = "Refund"
	ObservedDispute    Observed = "Dispute"
	ObservedUnknown    Observed = "Unknown"
	// ObservedApproved: the payer approved; the merchant's capture (or
	// authorization) is due. No money is reserved yet.
	ObservedApproved Observed = "Approved"
	// ObservedAuthorized: the money is reserved (Amount is the reserved amount).
	ObservedAuthorized Observed = "Authorized"
	// ObservedCanceled: canceled or voided before any money was taken.
	ObservedCanceled Observed = "Canceled"
)

// Observation is one piece of news about a payment, from any channel.
type Observation struct {
	Source   v1alpha1.ObservationSource
	Observed Observed
	// Raw is the provider's own status string or event type.
	Raw string
	// EventID identifies a provider event; observations from status queries
	// have none.
	EventID    string
	OccurredAt time.Time
	// ProviderPaymentID, when known, is recorded on the payment.
	ProviderPaymentID string
	// CheckoutID is another provider id of the same payment (its checkout).
	CheckoutID string
	// CaptureID (success and refund observations read from the provider) is
	// the capture that took the money, where refunds name it.
	CaptureID string
	// ProviderRefundID (refund observations) is the provider's refund id.
	ProviderRefundID string
	// RefundReference (refund observations) is the reference the provider
	// kept with the refund (v1alpha1.Refund.Reference, when paywarden made it).
	RefundReference string
	// CustomerAction, while the payer must act, is where they must go.
	CustomerAction *v1alpha1.CustomerAction
	// AuthorizationExpiresAt (Authorized) is when the reservation ends.
	AuthorizationExpiresAt *metav1.Time
	// FundsGuaranteedUntil (Authorized) is when the provider stops
	// guaranteeing the reserved funds (PayPal's honor period).
	FundsGuaranteedUntil *metav1.Time
	// Amount is what the provider says was paid (success observations).
	Amount *v1alpha1.Money
	// RefundedTotal is the provider's cumulative refunded amount (refunds).
	RefundedTotal *v1alpha1.Money
	// Dispute (disputes) is how the dispute ended: provider.DisputeWon,
	// provider.DisputeLost, or "" when it opened.
	Dispute string
	// Lowers (refunds) says the provider's figure may have gone down: a
	// Refund of the payment failed after it had succeeded, and this is a
	// read of the provider made since. A lower total is then the truth, not
	// a stale report (AfterRefundRead).
	Lowers bool
	// RefundFailed (events) says the event is about a refund of the
	// payment that failed: it may have succeeded before, and the provider's
	// refunded total may have gone down (refundFailureSeen).
	RefundFailed bool
	Failure      *v1alpha1.Failure
	// Review, on an Unknown observation, is the NeedsReview reason paywarden
	// itself raises: RetriesExhausted, CreateOutcomeUnknown or
	// NonRetryableQueryError.
	Review string
	// Local marks an Expired that paywarden decided (unpaid close-out, §2.5)
	// rather than the provider.
	Local bool
	// PayerMustApproveAgain, on a Pending answer to the capture or
	// authorization of an approved payment (or the lookup of its outcome),
	// says the provider declined the payer's funding source and waits for the
	// payer to approve again (PayPal INSTRUMENT_DECLINED): the one Pending that
	// takes a payment back (see fundingDeclined).
	PayerMustApproveAgain bool
	// PastExpiry says the payment is past its spec.expiresAfter: a Pending
	// answer (the provider confirms nobody paid) then closes it out as a
	// local Expired (§2.5). Processing means money may be moving and is not
	// closed out.
	PastExpiry bool
	// Reason is free text recorded in history (e.g. an operator's reason).
	Reason string
}

// Decision is what the state machine made of an observation.
type Decision string

// Decisions (SPEC §2.1).
const (
	// Applied: the observation changed the payment.
	Applied Decision = "Applied"
	// Duplicate: this event was applied before; nothing changes.
	Duplicate Decision = "Duplicate"
	// Stale: older or no newer news than the payment already has.
	Stale Decision = "Stale"
	// Conflict: the observation contradicts a final phase; the phase is kept
	// and the payment needs review.
	Conflict Decision = "Conflict"
	// Ignored: the observation does not apply to the payment as it stands.
	Ignored Decision = "Ignored"
)

// Event is a Kubernetes Event the caller should record for the change.
type Event struct {
	Warning bool
	Reason  string
	Message string
}

// Transition is a phase change, for metrics.
type Transition struct {
	From, To v1alpha1.PaymentPhase
}

// Result is the state machine's answer. Status is a new value; the input is
// never modified.
type Result struct {
	Status v1alpha1.PaymentStatus
	// Source is the channel of the observation, for the metrics.
	Source     v1alpha1.ObservationSource
	Decision   Decision
	Reason     string
	Events     []Event
	Transition *Transition
}

// Bounds of the lists kept in status.
const (
	MaxHistory        = 20
	MaxRecentEventIDs = 16
)

// Apply runs the state machine: given a payment (its spec and current status),
// one observation and the current time, it returns the new status and what it
// decided. It is the only place that changes a payment's phase.
func Apply(p *v1alpha1.Payment, obs Observation, now time.Time) Result {
	m := machine{spec: &p.Spec, st: *p.Status.DeepCopy(), deciding: deciding{obs: obs, now: now}}
	m.run()
	m.finish()
	return Result{Status: m.st, Source: obs.Source, Decision: m.decision, Reason: m.reason, Events: m.events, Transition: m.transition}
}

type machine struct {
	spec *v1alpha1.PaymentSpec
	st   v1alpha1.PaymentStatus
	deciding
}

// deciding is what a state machine, the payment's or the refund's, works out
// about one observation at a time: what it decided and why, and the Events
// and the phase change it announces.
type deciding struct {
	obs        Observation
	now        time.Time
	decision   Decision
	reason     string
	events     []Event
	transition *Transition
}

func (d *deciding) decide(decision Decision, format string, args ...any) {
	d.decision, d.reason = decision, fmt.Sprintf(format, args...)
}

func (m *machine) run() {
	if m.obs.EventID != "" && m.seen(m.obs.EventID) {
		m.decide(Duplicate, "event %s already applied", m.obs.EventID)
		return
	}
	if m.obs.Source == v1alpha1.SourceManual {
		m.manual()
		return
	}
	if other, known := m.otherPayment(); other {
		m.duplicatePayment(known)
		return
	}
	if voidedAtItsEnd(&m.st, m.obs, m.now) {
		m.obs = expiredAtItsEnd(&m.st, m.obs)
	}
	if closedOut(&m.st, m.obs) {
		// paywarden's close-out cancel (§2.5) seen done, by its answer, a
		// look-up or the provider's event (which can come first): what
		// paywarden calls Expired is what the provider now holds.
		m.obs.Observed, m.obs.Reason = ObservedExpired, v1alpha1.ReasonUnpaidTimeout
	}
	if canceledByOperator(&m.st, m.obs) {
		// The operator's cancel (§11.5) seen done, by its answer, a look-up
		// or the provider's event (which can come first).
		m.obs.Reason = v1alpha1.ReasonCanceledByOperator + ": " + m.st.Operation.Reason
	}
	switch m.obs.Observed {
	case ObservedApproved:
		m.approved()
	case ObservedAuthorized:
		m.authorized()
	case ObservedPending, ObservedProcessing:
		if m.obs.Observed == ObservedPending && m.obs.PastExpiry {
			m.obs.Observed, m.obs.Local = ObservedExpired, true
			m.notPaid()
			return
		}
		m.progress()
	case ObservedSucceeded:
		m.succeeded()
	case ObservedFailed, ObservedExpired, ObservedCanceled:
		m.notPaid()
	case ObservedRefund:
		m.refund()
	case ObservedDispute:
		m.dispute()
	case ObservedUnknown:
		m.unknown()
	default:
		m.decide(Ignored, "unsupported observation %q", m.obs.Observed)
	}
}

func (m *machine) phase() v1alpha1.PaymentPhase {
	if m.st.Phase == "" {
		return v1alpha1.PhasePending
	}
	return m.st.Phase
}

// progress handles Pending and Processing: they only ever move a payment forward.
func (m *machine) progress() {
	to := v1alpha1.PaymentPhase(m.obs.Observed)
	from := m.phase()
	switch {
	case m.st.Phase == "":
		m.moveTo(to, "")
	case from == v1alpha1.PhaseProcessing && to == v1alpha1.PhasePending && m.obs.PayerMustApproveAgain && m.st.PayerApproved:
		m.payerMustApproveAgain()
	case from == v1alpha1.PhasePending && to == v1alpha1.PhaseProcessing:
		m.moveTo(to, "")
	case from == v1alpha1.PhaseProcessing && to == v1alpha1.PhasePending && m.obs.Failure != nil && !m.st.PayerApproved && m.olderThanLastEvent():
		// A failure that happened no later than the event the payment
		// last moved on (a declined card before the debit now
		// processing, redelivered late: Stripe does not deliver events in
		// order) is news of an earlier attempt. The next status query
		// reads the present.
		m.decide(Stale, "%s at %s is not after the last event applied (%s at %s): an earlier attempt's failure",
			m.obs.Raw, m.obs.OccurredAt.UTC().Format(time.RFC3339), m.st.LastEvent.Type, m.st.LastEvent.Time.UTC().Format(time.RFC3339))
	case from == v1alpha1.PhaseProcessing && to == v1alpha1.PhasePending && m.obs.Failure != nil && !m.st.PayerApproved:
		// The attempt under way failed and the provider waits for another
		// payment method, which nobody will bring to a payment past its
		// processing (Stripe, "Payment status updates": an asynchronous
		// debit that fails goes processing → requires_payment_method with
		// last_payment_error). Recorded as the failure it is.
		m.settleNotPaid(v1alpha1.PhaseFailed)
	case (from == v1alpha1.PhaseAuthorized || from == v1alpha1.PhaseProcessing) && to == v1alpha1.PhaseProcessing && m.st.AmountToCapture != nil && m.fromBeforeTheCapture():
		m.decide(Stale, "%s from before the capture was asked for (%s) is not news of the capture",
			to, m.st.Operation.RequestedAt.UTC().Format(time.RFC3339))
	case from == v1alpha1.PhaseAuthorized && to == v1alpha1.PhaseProcessing && m.st.AmountToCapture != nil:
		// The capture paywarden asked for is under way.
		m.moveTo(to, "capture in progress")
	case from == v1alpha1.PhaseProcessing && to == v1alpha1.PhaseProcessing && m.st.PayerApproved && m.st.AmountToCapture != nil:
		// The capture of an approved payment is under way (a capture the
		// provider holds as pending): the approval is used up, and nothing
		// asks for a second capture.
		m.st.PayerApproved = false
		m.moveTo(to, "capture in progress")
	case from == to:
		m.confirm(false)
		m.decide(Stale, "already %s", from)
	case from == v1alpha1.PhaseUnknown:
		m.decide(Stale, "%s does not take a payment out of Unknown; only a final answer or an operator does", to)
	default:
		m.decide(Stale, "%s after %s is stale", to, from)
	}
}

// olderThanLastEvent reports whether the observation is an event that
// happened no later than the event last applied to the payment, both by the
// provider's clock (whole seconds: an event of the same second may be the
// earlier one). A query reports the present and carries no time, and a
// payment last moved by a query has no event time to compare with.
func (m *machine) olderThanLastEvent() bool {
	last := m.st.LastEvent
	if m.obs.EventID == "" || m.obs.OccurredAt.IsZero() || last == nil || last.Time == nil {
		return false
	}
	return !m.obs.OccurredAt.Truncate(time.Second).After(last.Time.Truncate(time.Second))
}

// fromBeforeTheCapture reports whether the observation is an event that
// happened no later than the second the capture was marked: a payment that
// went through processing before it was authorized (Stripe: processing, then
// requires_capture) can have that event delivered after the capture was
// asked for, and it says nothing about the capture. Events carry whole
// seconds; an event of the marker's own second is counted as earlier, which
// costs at most a lookup of the capture under its key, never a second one. A
// query reports the present, and carries no time.
func (m *machine) fromBeforeTheCapture() bool {
	op := m.st.Operation
	if op == nil || op.Kind != v1alpha1.OperationCapture || m.obs.OccurredAt.IsZero() {
		return false
	}
	return !m.obs.OccurredAt.Truncate(time.Second).After(op.RequestedAt.Time.Truncate(time.Second))
}

// payerMustApproveAgain takes an approved payment whose capture (or
// authorization) the provider declined for the payer's funding source back to
// waiting for the payer: the approval is used up, nothing is being captured,
// and the payer's link is where they choose another funding source. The
// decline is counted: the next capture is a new attempt with its own key.
func (m *machine) payerMustApproveAgain() {
	m.st.PayerApproved, m.st.AmountToCapture, m.st.Operation = false, nil, nil
	m.st.FundingDeclines++
	reason := m.obs.Reason
	if reason == "" {
		reason = "the provider declined the payer's funding source: waiting for the payer to approve again"
	}
	m.moveTo(v1alpha1.PhasePending, reason)
	if a := m.obs.CustomerAction; a != nil {
		cp := *a
		m.st.CustomerAction = &cp
	}
}

// approved handles the payer's approval: the merchant's capture (automatic)
// or authorization (manual) is due, which Plan turns into a call.
func (m *machine) approved() {
	from := m.phase()
	switch {
	case m.st.Phase == "" || from == v1alpha1.PhasePending:
		m.st.PayerApproved = true
		m.moveTo(v1alpha1.PhaseProcessing, "approved by the payer")
	case from == v1alpha1.PhaseProcessing && m.st.AmountToCapture != nil:
		// A late or reordered approval of a payment whose capture is already
		// under way asks for nothing more.
		m.confirm(false)
		m.decide(Stale, "the capture is already under way")
	case from == v1alpha1.PhaseProcessing && !m.st.PayerApproved:
		m.st.PayerApproved = true
		m.moveTo(v1alpha1.PhaseProcessing, "approved by the payer")
	case from == v1alpha1.PhaseProcessing:
		m.confirm(false)
		m.decide(Stale, "already approved")
	default:
		m.decide(Stale, "an approval after %s is stale", from)
	}
}

// authorized handles a reservation of the money.
func (m *machine) authorized() {
	from := m.phase()
	switch mismatch := m.authorizationMismatch(); {
	case mismatch != "" && (from == v1alpha1.PhaseAuthorized || from == v1alpha1.PhaseUnknown):
		// The provider now holds another amount than asked: a capture of
		// "all" would take what it holds, not what was authorized before.
		if reviewReason(m.st.Conditions) == v1alpha1.ReasonAmountMismatch {
			m.decide(Stale, "amount mismatch already under review")
			return
		}
		m.moveTo(v1alpha1.PhaseUnknown, v1alpha1.ReasonAmountMismatch)
		m.needsReview(v1alpha1.ReasonAmountMismatch, "authorization: "+mismatch)
		return
	case from == v1alpha1.PhaseAuthorized:
		m.confirm(false)
		m.decide(Stale, "already Authorized")
		return
	case from == v1alpha1.PhaseProcessing && m.st.AmountToCapture != nil:
		m.decide(Stale, "the capture is already under way")
		return
	case m.st.Phase != "" && from != v1alpha1.PhasePending && from != v1alpha1.PhaseProcessing:
		m.decide(Stale, "an authorization after %s is stale", from)
		return
	}
	if mismatch := m.amountMismatch(); mismatch != "" {
		m.moveTo(v1alpha1.PhaseUnknown, v1alpha1.ReasonAmountMismatch)
		m.needsReview(v1alpha1.ReasonAmountMismatch, "authorization: "+mismatch)
		return
	}
	if a := m.obs.Amount; a != nil {
		cp := *a
		m.st.AmountAuthorized = &cp
	}
	m.st.PayerApproved = false
	m.moveTo(v1alpha1.PhaseAuthorized, "")
}

func (m *machine) succeeded() {
	from := m.phase()
	mismatch := m.amountMismatch()
	switch {
	case from == v1alpha1.PhaseSucceeded || from == v1alpha1.PhasePartiallyRefunded || from == v1alpha1.PhaseRefunded:
		if from == v1alpha1.PhaseSucceeded {
			m.confirm(false)
		}
		m.decide(Stale, "already %s", from)
	case from == v1alpha1.PhaseExpired && m.st.ExpiredLocally && mismatch == "":
		// Money moved after paywarden closed the payment out: someone must
		// fulfil or refund it.
		m.recordAmount()
		m.moveTo(v1alpha1.PhaseSucceeded, v1alpha1.ReasonLateSuccess)
		m.st.ExpiredLocally = false
		m.needsReview(v1alpha1.ReasonLateSuccess, "payment succeeded at the provider after it was closed out as unpaid")
	case from == v1alpha1.PhaseFailed || from == v1alpha1.PhaseCanceled || (from == v1alpha1.PhaseExpired && !m.st.ExpiredLocally):
		// Final without the money (a cancel released the merchant
		// reference too): a success now is for a human, never a flip.
		m.conflict(from)
	case mismatch == "" && m.obs.Amount == nil && from == v1alpha1.PhaseUnknown && m.reviewReason() == v1alpha1.ReasonAmountMismatch:
		// A success that does not say how much was paid cannot settle a
		// payment that is under review for the amount.
		m.decide(Stale, "success without an amount does not settle an amount mismatch")
	case mismatch != "":
		if from == v1alpha1.PhaseUnknown && m.reviewReason() == v1alpha1.ReasonAmountMismatch {
			m.decide(Stale, "amount mismatch already under review")
			return
		}
		// A wrong amount is never a success, not even a late one.
		m.st.ExpiredLocally = false
		m.recordAmount()
		m.moveTo(v1alpha1.PhaseUnknown, v1alpha1.ReasonAmountMismatch)
		m.needsReview(v1alpha1.ReasonAmountMismatch, mismatch)
	default:
		m.recordAmount()
		m.moveTo(v1alpha1.PhaseSucceeded, "")
	}
}

// notPaid handles Failed and Expired answers from the provider.
func (m *machine) notPaid() {
	to := v1alpha1.PaymentPhase(m.obs.Observed)
	from := m.phase()
	switch from {
	case v1alpha1.PhaseSucceeded, v1alpha1.PhasePartiallyRefunded, v1alpha1.PhaseRefunded:
		if m.obs.Local {
			// paywarden's own close-out lost a race with the provider's
			// answer (§2.5 closes out only unpaid payments): not a conflict.
			m.decide(Stale, "a local close-out does not apply to a payment already %s", from)
			return
		}
		m.conflict(from)
	case v1alpha1.PhaseUnknown:
		if m.obs.Local {
			m.decide(Stale, "a local close-out does not take a payment out of Unknown")
			return
		}
		m.settleNotPaid(to)
	case v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseCanceled:
		// Failed, Expired and Canceled all mean "not paid": the first answer stands.
		if from == to {
			m.confirm(false)
		}
		m.decide(Stale, "already %s", from)
	default:
		m.settleNotPaid(to)
	}
}

func (m *machine) settleNotPaid(to v1alpha1.PaymentPhase) {
	{
		if m.obs.Failure != nil {
			f := *m.obs.Failure
			m.st.Failure = &f
		}
		reason := m.obs.Reason
		if m.obs.Local && to == v1alpha1.PhaseExpired {
			m.st.ExpiredLocally = true
			reason = v1alpha1.ReasonUnpaidTimeout
		} else if to == v1alpha1.PhaseExpired && m.phase() == v1alpha1.PhaseAuthorized {
			reason = v1alpha1.ReasonAuthorizationExpired
		} else if m.obs.Failure != nil && m.obs.Failure.Code != "" && reason == "" {
			reason = m.obs.Failure.Code
		}
		m.moveTo(to, reason)
	}
}

func (m *machine) refund() {
	from := m.phase()
	if from != v1alpha1.PhaseSucceeded && from != v1alpha1.PhasePartiallyRefunded && from != v1alpha1.PhaseRefunded {
		m.decide(Ignored, "refund reported while %s; refunds apply only after success", from)
		return
	}
	if m.obs.RefundedTotal == nil {
		m.decide(Ignored, "refund without a refunded total")
		return
	}
	total := *m.obs.RefundedTotal
	if m.obs.Lowers && m.st.AmountRefunded != nil && total.Currency == m.st.AmountRefunded.Currency &&
		total.Value >= 0 && total.Value < m.st.AmountRefunded.Value {
		m.lowerRefunded(total)
		return
	}
	if total.Value <= 0 {
		m.decide(Ignored, "refund with a refunded total of %d", total.Value)
		return
	}
	if total.Currency != m.spec.Amount.Currency {
		m.conflictReview(from, fmt.Sprintf("refund in %s for a payment in %s", total.Currency, m.spec.Amount.Currency))
		return
	}
	if m.st.AmountRefunded != nil && total.Value <= m.st.AmountRefunded.Value {
		m.decide(Stale, "refunded total %d is not above %d", total.Value, m.st.AmountRefunded.Value)
		return
	}
	if lowered := m.st.RefundsLoweredAt; lowered != nil && m.obs.EventID != "" && !m.obs.OccurredAt.IsZero() &&
		m.obs.OccurredAt.Unix() <= lowered.Unix() {
		// The event is older than a read that answered for a refund's
		// failure (the second before it was sent): its total is one the
		// read has answered for.
		m.decide(Stale, "refunded total %d reported at %s, before the read of %s that answered for a refund's failure",
			total.Value, m.obs.OccurredAt.UTC().Format(time.RFC3339), lowered.UTC().Format(time.RFC3339))
		return
	}
	m.st.AmountRefunded = &total
	if lowered := m.st.RefundsLoweredAt; lowered != nil && m.obs.EventID != "" && !m.obs.OccurredAt.IsZero() &&
		m.obs.OccurredAt.Unix() <= lowered.Add(RefundReadAmbiguity).Unix() {
		// From the seconds of the read that answered for a refund's
		// failure: a refund made while it was out, or one it answered for
		// (events carry whole seconds, and a provider's clock is not
		// paywarden's). Taken, and the figure read again: the read's
		// answer is the provider's own.
		m.askForRead()
	}
	// Everything is refunded once the refunds reach what the payment
	// received: a partial capture received less than was ordered, and the
	// refund allowance is bounded by the same figure (receivedAmount).
	to := v1alpha1.PhasePartiallyRefunded
	if total.Value >= receivedAmount(m.spec, &m.st).Value {
		to = v1alpha1.PhaseRefunded
	}
	m.moveTo(to, fmt.Sprintf("refunded %s", v1alpha1.FormatAmount(total.Value, total.Currency)))
}

// RefundReadAmbiguity is how long after the stamp of a read that answered
// for a refund's failure (RefundsLoweredAt: the second before it was sent)
// a refund event may be one the read answered for or one made while it was
// out: such an event is taken and the refunded total read again.
const RefundReadAmbiguity = 2 * time.Second

// lowerRefunded takes a refunded total below the recorded one: a refund
// failed after it had succeeded and the provider took it back out of its
// figure. The payment returns to PartiallyRefunded, or to Succeeded when
// nothing is refunded any more.
// refundFailureSeen handles an event about a failed refund of a payment
// that took money: it may be a refund taken back after it succeeded,
// whether or not a Refund object stands for it (one made in the provider's
// dashboard, or a Refund deleted after it was counted), and whether or not
// the total counts it yet (events come in any order: the refund's own
// event may come after its failure's). The total is read again
// (RefundsUncounted) and lowered if the provider's figure went down, and a
// refund event older than that read is stale (RefundsLoweredAt); without
// the read the payment would say Refunded while the merchant holds the
// money, and refuse the Refund that pays the customer back.
func (m *machine) refundFailureSeen() {
	from := m.phase()
	switch {
	case !from.TookMoney():
		m.decide(Ignored, "a refund failed of a payment that is %s", from)
		return
	case m.st.ProviderPaymentID == "" && m.spec.ProviderPaymentID == "":
		// Resolved Succeeded by hand, it has no id to read a total by: a
		// read asked for would never be made, and a Refund of everything
		// would wait on it for ever.
		m.decide(Ignored, "a refund failed of a payment without a provider id: its refunded total cannot be read")
		return
	}
	// A failure seen while a read is out asks for a read after it: the
	// one out may have been answered before this refund failed.
	m.remember()
	m.askForRead()
	m.appendHistory(from, from, v1alpha1.ReasonRefundReversed+": a refund failed; the refunded total is read again")
	m.decide(Applied, "a refund failed: the provider's refunded total is read again")
}

// askForRead asks for a read of the provider's refunded total
// (status.refundFailureSeenAt, RefundsUncounted). Whole seconds, as the API
// server stores them, and later than the mark before: a read planned before
// this ask never clears it.
func (m *machine) askForRead() {
	at := m.now.Truncate(time.Second)
	if prev := m.st.RefundFailureSeenAt; prev != nil && !at.After(prev.Time) {
		at = prev.Truncate(time.Second).Add(time.Second)
	}
	t := metav1.NewTime(at)
	m.st.RefundFailureSeenAt = &t
}

func (m *machine) lowerRefunded(total v1alpha1.Money) {
	was := *m.st.AmountRefunded
	to := v1alpha1.PhasePartiallyRefunded
	if total.Value == 0 {
		m.st.AmountRefunded = nil
		m.st.AmountRefundedDisplay = ""
		to = v1alpha1.PhaseSucceeded
	} else {
		m.st.AmountRefunded = &total
		if total.Value >= receivedAmount(m.spec, &m.st).Value {
			to = v1alpha1.PhaseRefunded
		}
	}
	t := metav1.NewTime(m.now)
	m.st.RefundsLoweredAt = &t
	msg := fmt.Sprintf("a refund failed after it succeeded: refunded %s, not %s any more",
		v1alpha1.FormatAmount(total.Value, total.Currency), v1alpha1.FormatAmount(was.Value, was.Currency))
	m.warn(v1alpha1.ReasonRefundReversed, msg)
	m.moveTo(to, v1alpha1.ReasonRefundReversed+": "+msg)
}

func (m *machine) dispute() {
	if m.obs.Dispute != "" {
		m.disputeClosed()
		return
	}
	if c := meta.FindStatusCondition(m.st.Conditions, v1alpha1.ConditionDisputed); c != nil && c.Status == metav1.ConditionFalse &&
		(c.Reason == v1alpha1.ReasonDisputeWon || c.Reason == v1alpha1.ReasonDisputeLost) {
		// Events come in any order (and the backfill reads newest first):
		// the opening of a dispute already closed is older news. A payment
		// is disputed once (one dispute per charge).
		m.decide(Stale, "the dispute already ended (%s)", c.Reason)
		return
	}
	if c := meta.FindStatusCondition(m.st.Conditions, v1alpha1.ConditionDisputed); c != nil && c.Status == metav1.ConditionTrue {
		m.decide(Stale, "dispute already recorded")
		return
	}
	meta.SetStatusCondition(&m.st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionDisputed, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonDisputeOpened,
		Message: "the provider reported a dispute", LastTransitionTime: metav1.NewTime(m.now),
	})
	m.warn(v1alpha1.ReasonDisputeOpened, "the provider reported a dispute on this payment")
	m.moveTo(m.phase(), v1alpha1.ReasonDisputeOpened)
}

// disputeClosed records how a dispute ended. Won: the Disputed condition
// goes False (DisputeWon) and the payment stays as it is. Lost: the provider
// took the money back, which no phase of the payment says (it took the
// money, and refunds are the merchant's own), so the payment keeps its
// phase, Disputed goes False (DisputeLost) and NeedsReview=DisputeLost asks
// a human to settle the order (docs/state-machine.md, "Disputes").
func (m *machine) disputeClosed() {
	from := m.phase()
	if !from.TookMoney() {
		m.decide(Ignored, "a dispute outcome for a payment that is %s", from)
		return
	}
	reason, msg := v1alpha1.ReasonDisputeWon, "the dispute ended in the merchant's favour"
	if m.obs.Dispute == provider.DisputeLost {
		reason, msg = v1alpha1.ReasonDisputeLost, "the payer won the dispute: the provider took the disputed money back"
	}
	if c := meta.FindStatusCondition(m.st.Conditions, v1alpha1.ConditionDisputed); c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason {
		m.decide(Stale, "dispute already %s", reason)
		return
	}
	meta.SetStatusCondition(&m.st.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionDisputed, Status: metav1.ConditionFalse, Reason: reason,
		Message: msg, LastTransitionTime: metav1.NewTime(m.now),
	})
	switch {
	case reason == v1alpha1.ReasonDisputeLost && m.reviewReason() == "":
		m.needsReview(reason, msg+"; the payment keeps its phase, a human settles the order")
	case reason == v1alpha1.ReasonDisputeLost:
		m.warn(reason, msg) // the review under way stays; the Event says this too
	default:
		m.events = append(m.events, Event{Reason: reason, Message: msg})
	}
	m.moveTo(from, reason)
}

// unknown handles an "unknown" provider answer (not final: keep querying) and
// paywarden's own decision that a payment cannot be settled automatically.
func (m *machine) unknown() {
	from := m.phase()
	if m.obs.RefundFailed && m.obs.Review == "" {
		m.refundFailureSeen()
		return
	}
	if m.obs.Review == "" {
		if from != v1alpha1.PhaseUnknown && !from.IsFinal() {
			m.confirm(false)
		}
		m.decide(Ignored, "the provider does not know the outcome yet")
		return
	}
	if from.IsFinal() {
		m.decide(Stale, "already %s", from)
		return
	}
	if from == v1alpha1.PhaseUnknown && m.reviewReason() == m.obs.Review {
		m.decide(Stale, "already under review for %s", m.obs.Review)
		return
	}
	if current := m.reviewReason(); IsHumanReason(current) && !IsHumanReason(m.obs.Review) {
		// What the provider did (a wrong amount, a second payment, ...) is
		// what a human must judge; paywarden's own reason must not hide it.
		if from == v1alpha1.PhaseUnknown {
			m.decide(Stale, "%s does not replace the review for %s", m.obs.Review, current)
			return
		}
		m.moveTo(v1alpha1.PhaseUnknown, m.obs.Review)
		return
	}
	msg := m.obs.Reason
	if msg == "" {
		msg = "paywarden cannot settle this payment automatically: " + m.obs.Review
	}
	m.moveTo(v1alpha1.PhaseUnknown, m.obs.Review)
	m.needsReview(m.obs.Review, msg)
}

// manual applies an operator's decision. It settles any non-final or Unknown
// payment, and a final one only while it needs review.
func (m *machine) manual() {
	to := v1alpha1.PaymentPhase(m.obs.Observed)
	switch {
	case to == v1alpha1.PhaseSucceeded, to == v1alpha1.PhaseFailed, to == v1alpha1.PhaseExpired, to == v1alpha1.PhaseCanceled:
	case to == m.phase() && to.TookMoney() && m.reviewReason() != "":
		// Reviewed, and the phase stands (a lost dispute on a partially
		// refunded payment, say): the review is cleared, nothing else moves.
	default:
		m.decide(Ignored, "a manual resolve must be Succeeded, Failed, Expired or Canceled, not %q", m.obs.Observed)
		return
	}
	if op := m.st.Operation; op != nil && (op.Kind == v1alpha1.OperationCapture || op.Kind == v1alpha1.OperationAuthorize) && !to.TookMoney() {
		// Settled without the money, the payment would drop the look-up of
		// a call that may have taken it, and release its order.
		m.decide(Ignored, "its %s (requested %s) has no answer yet and may have taken the money: wait for its outcome, or resolve Succeeded",
			strings.ToLower(string(op.Kind)), op.RequestedAt.UTC().Format(time.RFC3339))
		return
	}
	if at := m.st.CreateRequestedAt; at != nil && m.st.ProviderPaymentID == "" && m.spec.ProviderPaymentID == "" &&
		!to.TookMoney() && m.reviewReason() == "" {
		// The same for a create with no answer: its look-up settles it, or
		// puts it under review (CreateOutcomeUnknown) for a human to decide.
		m.decide(Ignored, "its create (requested %s) has no answer yet and may have taken the money: wait for its outcome, or resolve Succeeded",
			at.UTC().Format(time.RFC3339))
		return
	}
	from := m.phase()
	reviewing := m.reviewReason() != ""
	if from.IsFinal() && !reviewing {
		m.decide(Ignored, "payment is already %s and needs no review", from)
		return
	}
	if to == v1alpha1.PhaseSucceeded && from.TookMoney() {
		// Already a success: its refunds stay counted (PartiallyRefunded
		// or Refunded is a success with refunds).
		to = from
	}
	m.st.ExpiredLocally = false
	if reviewing {
		m.ledger().clearReview("resolved by an operator: " + m.obs.Reason)
	}
	m.moveTo(to, v1alpha1.ReasonResolved+": "+m.obs.Reason)
}

func (m *machine) conflict(from v1alpha1.PaymentPhase) {
	m.conflictReview(from, fmt.Sprintf("provider reported %s for a payment already %s", m.obs.Observed, from))
}

func (m *machine) conflictReview(from v1alpha1.PaymentPhase, msg string) {
	if m.obs.EventID == "" && m.reviewReason() == v1alpha1.ReasonConflictingStatus {
		m.decide(Stale, "conflict already under review")
		return
	}
	m.remember()
	m.needsReview(v1alpha1.ReasonConflictingStatus, msg)
	m.appendHistory(from, from, v1alpha1.ReasonConflictingStatus)
	m.decide(Conflict, "%s", msg)
}

// moveTo applies a change: the new phase, history, an Event and a transition.
func (m *machine) moveTo(to v1alpha1.PaymentPhase, reason string) {
	from := m.st.Phase
	m.remember()
	m.confirm(true)
	m.st.Phase = to
	if to.IsFinal() || to == v1alpha1.PhaseUnknown {
		// Nothing left to poll for; only new observations or operators move it.
		m.st.Query.NextTime = nil
	}
	m.appendHistory(from, to, reason)
	if from != to {
		m.transition = &Transition{From: from, To: to}
		m.phaseEvent(from, to, reason)
	}
	m.decide(Applied, "%s", reason)
}

func (m *machine) phaseEvent(from, to v1alpha1.PaymentPhase, reason string) {
	msg := fmt.Sprintf("%s -> %s via %s", displayPhase(from), to, m.obs.Source)
	if reason != "" {
		msg += ": " + reason
	}
	warn := to == v1alpha1.PhaseFailed || to == v1alpha1.PhaseUnknown
	m.events = append(m.events, Event{Warning: warn, Reason: string(to), Message: msg})
}

// confirm records what the provider says without deciding anything; news
// is true when the observation changes the payment. A
// webhook or backfilled event that brings no news leaves providerStatus as
// the provider's API last reported it: an event's type is not a status, and
// rewriting one with the other would be a status write that says nothing.
func (m *machine) confirm(news bool) {
	event := m.obs.Source == v1alpha1.SourceWebhook || m.obs.Source == v1alpha1.SourceBackfill
	if m.obs.Raw != "" && (news || !event || m.st.ProviderStatus == "") {
		m.st.ProviderStatus = m.obs.Raw
	}
	id, checkout := m.obs.ProviderPaymentID, m.obs.CheckoutID
	if checkout != "" && m.st.CheckoutID == "" {
		m.st.CheckoutID = checkout
	}
	if c := m.obs.CaptureID; c != "" {
		m.st.CaptureID = c
	}
	switch {
	case id != "" && m.st.ProviderPaymentID == "":
		m.st.ProviderPaymentID = id
	case id != "" && id != m.st.ProviderPaymentID && m.awaitingPaymentID():
		// The checkout recorded until now has its payment: the payment's id
		// is the one to follow from here on, the checkout's is kept.
		m.st.ProviderPaymentID = id
	}
	if a := m.obs.CustomerAction; a != nil && m.phase() == v1alpha1.PhasePending {
		cp := *a
		m.st.CustomerAction = &cp
	}
	if t := m.obs.AuthorizationExpiresAt; t != nil && m.obs.Observed == ObservedAuthorized {
		cp := *t
		m.st.AuthorizationExpiresAt = &cp
	}
	if t := m.obs.FundsGuaranteedUntil; t != nil && m.obs.Observed == ObservedAuthorized {
		cp := *t
		m.st.FundsGuaranteedUntil = &cp
	}
}

// remember records the observation as the last event and its id for dedup.
func (m *machine) remember() {
	m.ledger().remember(m.obs.Source, string(m.obs.Observed), m.obs.Raw, m.obs.EventID, m.obs.OccurredAt)
}

func (m *machine) appendHistory(from, to v1alpha1.PaymentPhase, reason string) {
	if m.obs.Source == v1alpha1.SourceManual && reason == "" {
		reason = m.obs.Reason
	}
	m.ledger().appendHistory(from, to, m.obs.Source, m.obs.EventID, reason)
}

func (m *machine) needsReview(reason, msg string) { m.ledger().needsReview(reason, msg) }

func (m *machine) warn(reason, msg string) { m.ledger().warn(reason, msg) }

func (m *machine) reviewReason() string { return m.ledger().reviewReason() }

func (m *machine) seen(id string) bool { return m.ledger().seen(id) }

func (m *machine) ledger() ledger {
	return ledger{
		history: &m.st.History, dropped: &m.st.HistoryDropped, last: &m.st.LastEvent,
		recent: &m.st.RecentEventIDs, conditions: &m.st.Conditions, events: &m.events, now: m.now,
	}
}

func (m *machine) amountMismatch() string {
	a := m.obs.Amount
	if a == nil {
		return ""
	}
	want := v1alpha1.Money{Value: m.spec.Amount.Value, Currency: m.spec.Amount.Currency}
	if c := m.st.AmountToCapture; c != nil {
		// A partial capture: the success is for what was captured.
		want = *c
	}
	if a.Value != want.Value || a.Currency != want.Currency {
		return fmt.Sprintf("provider reports %s paid, expected %s",
			v1alpha1.FormatAmount(a.Value, a.Currency), v1alpha1.FormatAmount(want.Value, want.Currency))
	}
	return ""
}

// authorizationMismatch: the provider reports an authorization of another
// amount than the payment asked (a capture under way does not change what
// was authorized).
func (m *machine) authorizationMismatch() string {
	a := m.obs.Amount
	if a == nil || a.Value == m.spec.Amount.Value && a.Currency == m.spec.Amount.Currency {
		return ""
	}
	return fmt.Sprintf("provider reports %s authorized, expected %s",
		v1alpha1.FormatAmount(a.Value, a.Currency), v1alpha1.FormatAmount(m.spec.Amount.Value, m.spec.Amount.Currency))
}

// receivedAmount is what a payment took from the payer: the amount the provider
// reported with its success, else what the merchant captured (a partial
// capture), else the amount ordered. Refunds are bounded by it and complete
// when they reach it.
func receivedAmount(spec *v1alpha1.PaymentSpec, st *v1alpha1.PaymentStatus) v1alpha1.Money {
	switch {
	case st.AmountReceived != nil:
		return *st.AmountReceived
	case st.AmountToCapture != nil:
		return *st.AmountToCapture
	}
	return v1alpha1.Money{Value: spec.Amount.Value, Currency: spec.Amount.Currency}
}

func (m *machine) recordAmount() {
	if m.obs.Amount != nil {
		a := *m.obs.Amount
		m.st.AmountReceived = &a
	}
}

// finish keeps the derived parts of status in line with the rest.
func (m *machine) finish() {
	if m.decision == Duplicate {
		return
	}
	// Every applied change gets an Event (SPEC §2.1), also one that keeps the
	// phase: a larger refund, an operator confirming the phase under review.
	if n := len(m.st.History); m.decision == Applied && len(m.events) == 0 && n > 0 {
		h := m.st.History[n-1]
		m.phaseEvent(h.From, h.To, h.Reason)
	}
	m.st.AmountDisplay = amountDisplay(m.spec, &m.st)
	if a := m.st.AmountRefunded; a != nil {
		m.st.AmountRefundedDisplay = v1alpha1.FormatAmount(a.Value, a.Currency)
	}
	settle(&m.st)
	setReady(&m.st, m.now)
	m.st.WaitingFor = WaitingFor(m.spec, &m.st)
}

// amountDisplay is the Amount column: the amount ordered or, once the
// payment took another amount (a partial capture, an amount under review),
// what it took of what was ordered ("30.00 of 45.00 USD"), so a partly
// captured payment is not read as fully paid.
func amountDisplay(spec *v1alpha1.PaymentSpec, st *v1alpha1.PaymentStatus) string {
	ordered := v1alpha1.FormatAmount(spec.Amount.Value, spec.Amount.Currency)
	a := st.AmountReceived
	switch {
	case a == nil || a.Value == spec.Amount.Value && a.Currency == spec.Amount.Currency:
		return ordered
	case a.Currency == spec.Amount.Currency:
		return strings.TrimSuffix(v1alpha1.FormatAmount(a.Value, a.Currency), " "+a.Currency) + " of " + ordered
	}
	return v1alpha1.FormatAmount(a.Value, a.Currency) + " of " + ordered
}

// settle keeps the schedule consistent with the phase: a final payment has
// nothing to query, whatever brought it there, so its next query is cleared
// in the same write that settles it.
func settle(st *v1alpha1.PaymentStatus) {
	if st.Phase.IsFinal() {
		st.Query.NextTime = nil
		st.Query.UnansweredSince = nil
		st.Operation = nil
		st.PayerApproved = false
	}
	if st.Phase != "" && st.Phase != v1alpha1.PhasePending {
		// The payer has nothing left to do.
		st.CustomerAction = nil
	}
	if st.Phase == v1alpha1.PhaseAuthorized || st.Phase.IsFinal() {
		st.PayerApproved = false
	}
	if st.Phase != v1alpha1.PhaseAuthorized {
		// The guarantee of reserved funds ends with the reservation.
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionFundsGuaranteed)
	}
}

// WaitingFor says in a word what the payment waits for (status.waitingFor,
// a kubectl column): a review, a call in progress, the payer, or the
// merchant's capture.
func WaitingFor(spec *v1alpha1.PaymentSpec, st *v1alpha1.PaymentStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionNeedsReview); c != nil && c.Status == metav1.ConditionTrue {
		return "Review:" + c.Reason
	}
	switch {
	case st.Phase.IsFinal():
		return ""
	case st.Operation != nil:
		return string(st.Operation.Kind)
	case st.Phase == v1alpha1.PhaseAuthorized && spec.ManualCapture():
		return "Capture"
	case st.PayerApproved:
		return "Capture"
	case st.CustomerAction != nil:
		return "Payer"
	}
	return ""
}

// IsHumanReason reports whether a NeedsReview reason reports something the
// provider did that a human must judge (as opposed to paywarden giving up).
func IsHumanReason(reason string) bool {
	switch reason {
	case v1alpha1.ReasonAmountMismatch, v1alpha1.ReasonConflictingStatus, v1alpha1.ReasonLateSuccess, v1alpha1.ReasonDuplicatePayment:
		return true
	}
	return false
}

// otherPayment reports whether the observation is about a provider payment
// other than the one recorded for this Payment, and returns the recorded id.
// awaitingPaymentID: the payment is known by its checkout only (a Stripe
// Checkout Session before its PaymentIntent exists); the first payment id
// reported for it is its own.
func (m *machine) awaitingPaymentID() bool {
	return m.st.CheckoutID != "" && m.st.ProviderPaymentID == m.st.CheckoutID
}

func (m *machine) otherPayment() (bool, string) {
	if m.obs.Review != "" {
		return false, "" // paywarden's own decisions are not provider news
	}
	if m.awaitingPaymentID() {
		// Its first payment id is its own, but news naming another
		// checkout (an earlier attempt's session of the same order) is
		// about another payment.
		if c := m.obs.CheckoutID; c != "" && c != m.st.CheckoutID {
			return true, m.st.CheckoutID
		}
		return false, ""
	}
	known := nonEmpty(m.st.ProviderPaymentID, m.st.CheckoutID, m.spec.ProviderPaymentID)
	seen := nonEmpty(m.obs.ProviderPaymentID, m.obs.CheckoutID)
	if len(known) == 0 || len(seen) == 0 {
		return false, ""
	}
	for _, s := range seen {
		for _, k := range known {
			if s == k {
				return false, ""
			}
		}
	}
	return true, known[0]
}

func nonEmpty(ss ...string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// duplicatePayment records that the provider reported a second payment for
// this order: possibly a double charge. The phase is not touched (the news is
// not about the payment paywarden tracks); a human must look.
func (m *machine) duplicatePayment(known string) {
	from := m.phase()
	msg := fmt.Sprintf("the provider reported %s for payment %s, but this Payment is recorded as provider payment %s: possibly a second charge for one order",
		m.obs.Observed, m.obs.ProviderPaymentID, known)
	if m.reviewReason() == v1alpha1.ReasonDuplicatePayment {
		if m.obs.EventID == "" {
			m.decide(Stale, "second provider payment already under review")
			return
		}
		if c := meta.FindStatusCondition(m.st.Conditions, v1alpha1.ConditionNeedsReview); c != nil {
			msg = duplicateReviewMessage(c.Message, m.obs)
		}
	}
	m.remember()
	m.needsReview(v1alpha1.ReasonDuplicatePayment, msg)
	m.appendHistory(from, from, v1alpha1.ReasonDuplicatePayment+": "+m.obs.ProviderPaymentID)
	m.decide(Conflict, "%s", msg)
}

// maxDuplicateReviewMessage bounds the DuplicatePayment review's message as
// more provider payments are reported; the history and the Warning Events
// name every one.
const maxDuplicateReviewMessage = 1024

// duplicateReviewMessage adds a further provider payment to a standing
// DuplicatePayment review's message, so a later report (a failed attempt)
// never hides an earlier one (a second charge).
func duplicateReviewMessage(prev string, obs Observation) string {
	id := obs.ProviderPaymentID
	if id == "" {
		id = obs.CheckoutID
	}
	named := regexp.MustCompile(`payment ` + regexp.QuoteMeta(id) + `([,:;]|$)`)
	if id == "" || named.MatchString(prev) {
		return prev
	}
	next := fmt.Sprintf("%s; then %s for payment %s", prev, obs.Observed, id)
	if len(next) > maxDuplicateReviewMessage {
		return prev
	}
	return next
}

// setReady derives the Ready condition: True only when the payment is settled
// in a final phase and nobody needs to look at it.
func setReady(st *v1alpha1.PaymentStatus, now time.Time) {
	setReadyCondition(&st.Conditions, st.Phase.IsFinal(), string(st.Phase), now)
}

func displayPhase(p v1alpha1.PaymentPhase) string {
	if p == "" {
		return "(new)"
	}
	return string(p)
}
