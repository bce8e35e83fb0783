package payment

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// RefundOutcome is a decision about a refund: the status to store, what the
// state machine decided on the way, and other Events.
type RefundOutcome struct {
	Status  v1alpha1.RefundStatus
	Results []RefundResult
	Events  []Event
}

// RefundStep is PlanRefund's answer (Create, Lookup and Query are the
// refund's create, lookup by reference and status query).
type RefundStep struct {
	Action  Action
	At      time.Time
	Outcome RefundOutcome
	// Scheduled: as Step.Scheduled (the refund's status query).
	Scheduled bool
	Why       string
}

// RefundFacts are what the refund controller read besides the Refund.
type RefundFacts struct {
	// Payment is the Payment refunded; nil when it does not exist.
	Payment *v1alpha1.Payment
	// Siblings are the other Refunds of the same Payment.
	Siblings []v1alpha1.Refund
	// ConfigAccepted: as Facts.ConfigAccepted.
	ConfigAccepted bool
	// Ledger are the ledger's records of a Refund of the same name of the
	// same order, deleted after it settled (SPEC §12.1).
	Ledger []LedgerRecord
}

// RefundCall is what one refund call produced.
type RefundCall struct {
	Refund provider.Refund
	Err    error
}

type refundChange struct {
	r   *v1alpha1.Refund
	now time.Time
	out RefundOutcome
}

func beginRefund(r *v1alpha1.Refund, now time.Time) *refundChange {
	return &refundChange{r: r.DeepCopy(), now: now}
}

func (c *refundChange) st() *v1alpha1.RefundStatus { return &c.r.Status }

func (c *refundChange) apply(obs Observation) RefundResult {
	res := ApplyRefund(c.r, obs, c.now)
	c.r.Status = res.Status
	c.out.Results = append(c.out.Results, res)
	return res
}

func (c *refundChange) sched() schedule {
	return schedule{q: &c.st().Query, now: c.now, seed: string(c.r.UID)}
}

func (c *refundChange) park() {
	c.st().Query.NextTime, c.st().Query.UnansweredSince = nil, nil
}

func (c *refundChange) event(warning bool, reason, msg string) {
	c.out.Events = append(c.out.Events, Event{Warning: warning, Reason: reason, Message: msg})
}

func (c *refundChange) done() RefundOutcome {
	st := c.st()
	if st.Phase.IsFinal() {
		st.Query.NextTime, st.Query.UnansweredSince, st.WaitingFor = nil, nil, ""
	}
	if a := st.Amount; a != nil {
		st.AmountDisplay = v1alpha1.FormatAmount(a.Value, a.Currency)
	}
	c.out.Status = *st
	return c.out
}

func refundParked(st *v1alpha1.RefundStatus) bool {
	return st.Phase == v1alpha1.RefundUnknown && st.Query.NextTime == nil
}

// RefundAtRest reports whether a Refund leaves its controller nothing to
// do, whatever its payment and provider say: settled, with no schedule to
// clear, no operator action to take and no deletion under way, and owned by
// a Payment of the name it refunds (the owner's UID is not checked: a
// settled Refund whose owner is gone is the garbage collector's to delete,
// and then not at rest). PlanRefund plans Nothing for it; the controller
// skips the reads of its payment and provider (a manager's start
// reconciles every Refund, and a closed payment is a read of the API
// server).
func RefundAtRest(r *v1alpha1.Refund, now time.Time) bool {
	st := &r.Status
	if !st.Phase.IsFinal() || st.Query.NextTime != nil || st.WaitingFor != "" || !r.DeletionTimestamp.IsZero() {
		return false
	}
	if _, _, acts := RefundOperatorAction(r, now); acts {
		return false
	}
	for _, o := range r.OwnerReferences {
		if o.APIVersion == v1alpha1.GroupVersion.String() && o.Kind == "Payment" && o.Name == r.Spec.PaymentRef.Name {
			return true
		}
	}
	return false
}

// PlanRefund decides what the refund controller does for a Refund now:
// operator actions, the guard rails before any call (the payment must have
// taken the money; the refunds of one payment never add up to more than it
// received), then the crash-safe create and the status queries, as for a
// payment (SPEC §2.3, §11.7).
func PlanRefund(r *v1alpha1.Refund, pol Policy, facts RefundFacts, now time.Time) RefundStep {
	if !copyOfARefund(r, facts, now) {
		if out, why, ok := RefundOperatorAction(r, now); ok {
			return RefundStep{Action: Write, Outcome: out, Why: why}
		}
	}
	st := &r.Status
	switch {
	case st.Phase.IsFinal():
		if st.Query.NextTime != nil || st.WaitingFor != "" {
			return RefundStep{Action: Write, Outcome: beginRefund(r, now).done(), Why: "a settled refund keeps no schedule"}
		}
		return RefundStep{Action: Nothing, Why: "settled"}
	case refundParked(st):
		return RefundStep{Action: Nothing, Why: "waiting for a final answer or an operator"}
	}
	if st.ProviderRefundID == "" && st.CreateRequestedAt == nil {
		if !r.DeletionTimestamp.IsZero() {
			// Decided on the API server's copy too (a write that conflicts
			// with the deletion is planned again on it): nothing is sent.
			return RefundStep{Action: Nothing, Why: "deleted before its refund was sent: nothing may start now"}
		}
		if len(facts.Ledger) > 0 {
			if out, ok := AdoptRefund(r, facts.Ledger, now); ok {
				return RefundStep{Action: Write, Outcome: out, Why: "the refund was settled by an earlier object: adopt, do not refund again"}
			}
		}
		if RestoredRefund(r) {
			return RefundStep{Action: Write, Outcome: restoredRefund(r, now), Why: "a restored copy of a refund that was sent: never sent again"}
		}
		return planRefundDecision(r, pol, facts, now)
	}
	if st.ProviderRefundID == "" {
		if unreachableFor(&st.Query, pol, now) {
			return RefundStep{Action: Write, Outcome: refundUnreachable(r, pol, now), Why: "provider unreachable"}
		}
		if next := st.Query.NextTime; next != nil && now.Before(next.Time) && !refundConfigFixed(st, facts) {
			return RefundStep{Action: Wait, At: next.Time, Why: "refund retry not due"}
		}
		if now.Sub(st.CreateRequestedAt.Time) >= pol.LookupAfter() {
			return RefundStep{Action: Lookup, Why: "refund marker older than the idempotency window minus its margin"}
		}
		if st.Query.LastErrorClass == KeyConflict.StatusName() && pol.canLookUpRefund() {
			return RefundStep{Action: Lookup, Why: "a first refund with this idempotency key exists: look up what it did"}
		}
		return RefundStep{Action: Create, Why: "refund with the Refund's idempotency key"}
	}
	if unreachableFor(&st.Query, pol, now) {
		return RefundStep{Action: Write, Outcome: refundUnreachable(r, pol, now), Why: "provider unreachable"}
	}
	if next := st.Query.NextTime; next != nil && now.Before(next.Time) && !refundConfigFixed(st, facts) {
		return RefundStep{Action: Wait, At: next.Time, Why: "next refund query not due"}
	}
	return RefundStep{Action: Query, Scheduled: true, Why: "refund status query due"}
}

func refundConfigFixed(st *v1alpha1.RefundStatus, facts RefundFacts) bool {
	return facts.ConfigAccepted && st.Query.LastErrorClass == ConfigProblem.StatusName()
}

// planRefundDecision applies the guard rails to a Refund not yet sent.
func planRefundDecision(r *v1alpha1.Refund, pol Policy, facts RefundFacts, now time.Time) RefundStep {
	amount, waitFor, refusal := RefundAllowance(r, facts.Payment, facts.Siblings)
	if refusal == "" && pol.LifecycleKnown && !pol.Lifecycle.Refunds {
		refusal, waitFor = v1alpha1.ReasonRefundsNotSupported+": the payment's provider type cannot refund through its API", ""
	}
	c := beginRefund(r, now)
	st := c.st()
	switch {
	case refusal != "":
		code, msg := splitReason(refusal)
		c.apply(Observation{
			Source: v1alpha1.SourceCreate, Observed: ObservedFailed,
			Failure: &v1alpha1.Failure{Code: code, Message: msg + "; nothing was sent to the provider"},
			Reason:  code,
		})
		return RefundStep{Action: Write, Outcome: c.done(), Why: "refused before any call"}
	case waitFor != "":
		if st.WaitingFor == waitFor && st.Phase != "" {
			return RefundStep{Action: Nothing, Why: "waiting: " + waitFor}
		}
		if st.Phase == "" {
			c.apply(Observation{Source: v1alpha1.SourceCreate, Observed: ObservedPending, Reason: waitFor})
		}
		st.WaitingFor = waitFor
		return RefundStep{Action: Write, Outcome: c.done(), Why: "waiting: " + waitFor}
	}
	// The marker goes first, with the amount fixed now.
	if st.Phase == "" {
		c.apply(Observation{Source: v1alpha1.SourceCreate, Observed: ObservedPending})
	}
	st.Amount = &amount
	st.WaitingFor = ""
	st.ProviderPaymentID = ProviderID(facts.Payment)
	st.CreateRequestedAt = ptrTime(now)
	st.IdempotencyKey = RefundKey(facts.Payment, r)
	st.ObservedGeneration = r.Generation
	return RefundStep{Action: Write, Outcome: c.done(), Why: "refund marker before the call"}
}

func splitReason(s string) (code, msg string) {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == ':' && s[i+1] == ' ' {
			return s[:i], s[i+2:]
		}
	}
	return s, s
}

// RefundAllowance decides, before any call, how much a Refund may return:
// the payment must have taken the money (else the refund waits, or is
// refused once the payment ended unpaid), and the refunds of one payment
// never add up to more than it received. Refunds are counted in creation
// order, so of two created together exactly the later one can be refused.
// A refused Refund gets "<reason>: <message>"; a waiting one the reason.
func RefundAllowance(r *v1alpha1.Refund, p *v1alpha1.Payment, siblings []v1alpha1.Refund) (amount v1alpha1.Money, waitFor, refusal string) {
	switch {
	case p == nil:
		return amount, v1alpha1.ReasonPaymentNotFound, ""
	case p.Status.Phase.TookMoney():
	case p.Status.Phase.IsFinal() && !endedInDoubt(p):
		return amount, "", fmt.Sprintf("%s: payment %s ended %s without taking money; there is nothing to refund", v1alpha1.ReasonPaymentNotPaid, p.Name, p.Status.Phase)
	default:
		return amount, v1alpha1.ReasonPaymentNotSucceeded, ""
	}
	received := receivedAmount(&p.Spec, &p.Status)
	if a := r.Spec.Amount; a != nil && a.Currency != received.Currency {
		return amount, "", fmt.Sprintf("%s: the refund is in %s, the payment in %s", v1alpha1.ReasonOverRefund, a.Currency, received.Currency)
	}
	// succeeded: the Refunds that succeeded and that the payment's figure
	// counts (status.refundsCounted: it was read after they succeeded);
	// inFlight: those it may or may not count yet, in flight or succeeded
	// since its last read.
	var succeeded, inFlight int64
	// reversed: a refund the provider's figure counted failed afterwards,
	// and the payment has not read the lower figure yet: a Refund's, or one
	// no Refund stands for (made in the dashboard, or its Refund deleted),
	// known by its failure event (status.refundFailureSeenAt).
	reversed := p.Status.RefundFailureSeenAt != nil
	older := olderRefunds(r, siblings)
	for i := range siblings {
		s := &siblings[i]
		if s.UID != r.UID && RefundMayLower(s) && !slices.Contains(p.Status.RefundsReversed, s.UID) {
			reversed = true
		}
		if s.UID == r.UID {
			continue
		}
		review := reviewReason(s.Status.Conditions)
		if review == v1alpha1.ReasonAmountMismatch {
			// The provider refunded another amount than asked, kept only
			// in the review's message: nothing here bounds it, so later
			// Refunds wait for the human.
			return amount, v1alpha1.ReasonEarlierRefundUndecided, ""
		}
		if s.Status.Phase == v1alpha1.RefundFailed && review == "" {
			continue // under review (said succeeded after failed), it may have moved its amount
		}
		if !refundMayHaveMoved(s) && !older[s.UID] {
			continue // decided after this one
		}
		value, ok := decidedAmount(s)
		if !ok {
			return amount, v1alpha1.ReasonEarlierRefundUndecided, ""
		}
		sum := &inFlight
		if s.Status.Phase == v1alpha1.RefundSucceeded && slices.Contains(p.Status.RefundsCounted, s.UID) {
			sum = &succeeded
		}
		if *sum, ok = addMinor(*sum, value); !ok {
			return amount, "", uncountable(p, received)
		}
	}
	// What the payment's refunds add up to: the Refunds that succeeded or
	// are in flight, and refunds made elsewhere (the provider's dashboard),
	// which only the provider's cumulative figure shows. That figure counts
	// the Refunds that succeeded before it was read and may or may not count
	// the others yet, so the total lies between low and high.
	reported := int64(0)
	if a := p.Status.AmountRefunded; a != nil {
		reported = a.Value
	}
	both, ok1 := addMinor(succeeded, inFlight)
	high, ok2 := addMinor(max(succeeded, reported), inFlight)
	if !ok1 || !ok2 {
		return amount, "", uncountable(p, received)
	}
	low := max(both, reported)
	// fits: the Refund fits when the payment's other refunds add up to total.
	fits := func(total int64) bool {
		if a := r.Spec.Amount; a != nil {
			return a.Value > 0 && a.Value <= received.Value-total
		}
		return received.Value-total > 0 // everything still refundable
	}
	switch {
	case fits(high) && r.Spec.Amount != nil:
		return v1alpha1.Money{Value: r.Spec.Amount.Value, Currency: received.Currency}, "", ""
	case reversed && r.Spec.Amount == nil:
		// "Everything still refundable" is measured on the figure being
		// read again: beside the old one it would return less than the
		// rest, and nothing would say so.
		return amount, v1alpha1.ReasonEarlierRefundInFlight, ""
	case fits(high) && high == low:
		return v1alpha1.Money{Value: received.Value - high, Currency: received.Currency}, "", ""
	case high > low && fits(low):
		// It fits unless the provider's figure leaves out a Refund in
		// flight: decided once that Refund settles, never refused on a
		// guess. "Everything still refundable" waits too: beside high it
		// would refund less than the rest, and nothing would say so.
		return amount, v1alpha1.ReasonEarlierRefundInFlight, ""
	case reversed && fits(both):
		// It fits once the payment's figure no longer counts a refund that
		// failed after it succeeded: decided after the payment's read.
		return amount, v1alpha1.ReasonEarlierRefundInFlight, ""
	}
	asked := "everything still refundable"
	if a := r.Spec.Amount; a != nil {
		asked = v1alpha1.FormatAmount(a.Value, received.Currency)
	}
	return amount, "", fmt.Sprintf("%s: %s asked, but of the %s received %s is refunded or being refunded, leaving %s",
		v1alpha1.ReasonOverRefund, asked, v1alpha1.FormatAmount(received.Value, received.Currency),
		v1alpha1.FormatAmount(low, received.Currency), v1alpha1.FormatAmount(max(received.Value-low, 0), received.Currency))
}

// AllowanceMoved reports whether a change of a payment from o to n may
// change what RefundAllowance decides for its Refunds: everything it reads
// of the payment (the phase, its review, what it received, its refunded
// figure and which Refunds that figure counts, and a refund failure still to
// be read). A Refund waiting on its payment is decided again on such a
// change, and only then: a wait nothing wakes would hang for ever.
func AllowanceMoved(o, n *v1alpha1.Payment) bool {
	os, ns := &o.Status, &n.Status
	return os.Phase != ns.Phase || reviewReason(os.Conditions) != reviewReason(ns.Conditions) ||
		receivedAmount(&o.Spec, os) != receivedAmount(&n.Spec, ns) ||
		!SameMoney(os.AmountRefunded, ns.AmountRefunded) ||
		!slices.Equal(os.RefundsCounted, ns.RefundsCounted) || !slices.Equal(os.RefundsReversed, ns.RefundsReversed) ||
		(os.RefundFailureSeenAt == nil) != (ns.RefundFailureSeenAt == nil)
}

// SameMoney: both nil, or the same amount and currency.
func SameMoney(a, b *v1alpha1.Money) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// refundMayHaveMoved: s's money may have left, whenever it was decided: it
// was sent (a marker, a refund id), or it stands in a phase only money
// moving explains without one: parked Unknown (a restored copy, a Refund
// applied again over an unsettled record), Succeeded (adopted from the
// ledger, resolved by an operator). Only one not yet sent nor parked (no phase, or
// Pending while it waits) is left to the order of creation.
func refundMayHaveMoved(s *v1alpha1.Refund) bool {
	st := &s.Status
	return st.CreateRequestedAt != nil || st.ProviderRefundID != "" || st.Phase != "" && st.Phase != v1alpha1.RefundPending
}

// addMinor adds two amounts of minor units, reporting false for a negative
// amount or a sum beyond int64: refund arithmetic must never wrap (a wrapped
// sum is negative, and would leave room for a refund above what was received).
func addMinor(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// uncountable is the refusal when a payment's refunds add up to more than
// int64 minor units: necessarily more than it received.
func uncountable(p *v1alpha1.Payment, received v1alpha1.Money) string {
	return fmt.Sprintf("%s: the Refunds of payment %s cannot be added up in int64 minor units (a sum beyond its range, far more than the %s received, or a negative amount); nothing more can be refunded beside them",
		v1alpha1.ReasonOverRefund, p.Name, v1alpha1.FormatAmount(received.Value, received.Currency))
}

// olderRefunds are the siblings created before r (creation time, then name).
func olderRefunds(r *v1alpha1.Refund, siblings []v1alpha1.Refund) map[types.UID]bool {
	all := append([]v1alpha1.Refund{*r}, siblings...)
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i].CreationTimestamp, all[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return all[i].Name < all[j].Name
	})
	out := map[types.UID]bool{}
	for _, s := range all {
		if s.UID == r.UID {
			break
		}
		out[s.UID] = true
	}
	return out
}

func decidedAmount(s *v1alpha1.Refund) (int64, bool) {
	if a := s.Status.Amount; a != nil {
		return a.Value, true
	}
	if a := s.Spec.Amount; a != nil {
		return a.Value, true
	}
	return 0, false
}

// AfterRefundCreate decides what a refund call means: only a definitive
// refusal fails the Refund; no answer is retried with the same key; a key
// conflict (a first refund under the key exists and may have paid back) is
// looked up by reference where the provider can, else retried on the backoff.
func AfterRefundCreate(r *v1alpha1.Refund, pol Policy, call RefundCall, now time.Time) RefundOutcome {
	c := beginRefund(r, now)
	st := c.st()
	if st.ProviderRefundID != "" || st.CreateRequestedAt == nil {
		return c.done()
	}
	switch class := Classify(call.Err); {
	case class == Answered && call.Refund.ID != "":
		c.created(pol, call.Refund)
	case class == Answered:
		c.noAnswer(pol, fmt.Errorf("the provider answered the refund without a refund id"), false)
	case class == NoAnswer:
		c.noAnswer(pol, call.Err, false)
	case class == KeyConflict:
		wait := MinWait
		if !pol.canLookUpRefund() {
			wait = 0 // the create backoff
		}
		c.keyConflict(pol, call.Err, wait)
	case class == Refused:
		c.apply(Observation{
			Source: v1alpha1.SourceCreate, Observed: ObservedFailed,
			Failure: &v1alpha1.Failure{Code: v1alpha1.ReasonCreateRejected, Message: call.Err.Error()},
			Reason:  v1alpha1.ReasonCreateRejected,
		})
	default:
		c.sched().configProblem(pol, call.Err)
	}
	return c.done()
}

// AfterRefundLookup decides what a lookup by reference means (past the key
// window): anything but a clear "found" ends in Unknown with
// CreateOutcomeUnknown, never Failed: the first call may have refunded. After
// a key conflict inside the window, finding nothing yet is no verdict: it is
// looked up again on the backoff.
func AfterRefundLookup(r *v1alpha1.Refund, pol Policy, call RefundCall, now time.Time) RefundOutcome {
	c := beginRefund(r, now)
	st := c.st()
	if st.ProviderRefundID != "" || st.CreateRequestedAt == nil {
		return c.done()
	}
	afterConflict := st.Query.LastErrorClass == KeyConflict.StatusName() && now.Sub(st.CreateRequestedAt.Time) < pol.LookupAfter()
	switch class := Classify(call.Err); {
	case class == Answered && call.Refund.ID != "":
		c.created(pol, call.Refund)
	case class == NoAnswer:
		c.noAnswer(pol, call.Err, false)
	case class == ConfigProblem:
		c.sched().configProblem(pol, call.Err)
	case afterConflict:
		c.keyConflict(pol, fmt.Errorf("a first refund with this Refund's idempotency key exists at the provider; looking reference %q up found nothing yet (%s)",
			r.Reference(), foundInstead(call.Err)), 0)
	default:
		c.apply(Observation{
			Source: v1alpha1.SourceCreate, Observed: ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown,
			Reason: fmt.Sprintf("a refund was requested at %s and may have reached the provider; past the idempotency window, looking reference %q up found nothing usable (%s): a new refund could pay back twice",
				st.CreateRequestedAt.UTC().Format(time.RFC3339), r.Reference(), foundInstead(call.Err)),
		})
		c.park()
	}
	return c.done()
}

// AfterRefundQuery decides what a refund status query means; only answers
// consume attempts, as for payments.
func AfterRefundQuery(r *v1alpha1.Refund, pol Policy, call RefundCall, now time.Time) RefundOutcome {
	c := beginRefund(r, now)
	st := c.st()
	held := st.Phase.IsFinal() || refundParked(st)
	q := &st.Query
	switch Classify(call.Err) {
	case Answered:
		q.LastTime = ptrMicro(now)
		c.sched().answered()
		c.apply(FromRefund(call.Refund, v1alpha1.SourceStatusQuery, ""))
		if !held {
			q.Attempts++
		}
		if held || st.Phase.IsFinal() || refundParked(st) {
			return c.done()
		}
		if d, ok := Delay(pol.Schedule, pol.JitterPercent, q.Attempts, string(r.UID)); ok {
			c.sched().wakeIn(d)
			return c.done()
		}
		c.apply(Observation{
			Source: v1alpha1.SourceStatusQuery, Observed: ObservedUnknown, Review: v1alpha1.ReasonRetriesExhausted,
			Reason: fmt.Sprintf("no final answer about the refund after %d status queries (provider status %q)", q.Attempts, st.ProviderStatus),
		})
		c.park()
	default:
		if held {
			return c.done()
		}
		switch gone, refused := c.sched().queryFailed(pol, call.Err); {
		case gone:
			c.r.Status = refundUnreachable(c.r, pol, c.now).Status
		case refused:
			c.apply(nonRetryableQuery(call.Err))
			c.park()
		}
	}
	return c.done()
}

// ApplyRefundEvent applies a refund event to the Refund it is about.
func ApplyRefundEvent(r *v1alpha1.Refund, obs Observation, now time.Time) RefundOutcome {
	c := beginRefund(r, now)
	c.apply(obs)
	return c.done()
}

// foreignAnswer parks the Refund when the provider answered its refund call
// with another Refund's refund (its reference names another UID: a
// spec.idempotencyKey reused by a second Refund). That refund is not this
// one's, and what became of this one's is unknown: a new call could refund
// twice, so a human decides.
func (c *refundChange) foreignAnswer(got provider.Refund) bool {
	why := ForeignRefund(c.r, got.ID, got.Reference)
	if why == "" {
		return false
	}
	c.apply(Observation{
		Source: v1alpha1.SourceCreate, Observed: ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown,
		Reason: fmt.Sprintf("the provider answered this Refund's call (idempotency key shared with another Refund?) with provider refund %s, %s; this Refund's own refund is unknown", got.ID, why),
	})
	c.park()
	return true
}

// created takes the refund the provider answered a create or a lookup with,
// unless it is another Refund's (foreignAnswer), and starts its schedule.
func (c *refundChange) created(pol Policy, got provider.Refund) {
	if c.foreignAnswer(got) {
		return
	}
	c.apply(FromRefund(got, v1alpha1.SourceCreate, ""))
	c.st().ProviderRefundID = got.ID
	c.sched().answered()
	c.startSchedule(pol)
}

// foundInstead is what a lookup by reference that found no refund got: its
// error, or an answer without a refund id.
func foundInstead(err error) string {
	if err != nil {
		return err.Error()
	}
	return "the provider answered without a refund id"
}

func (c *refundChange) startSchedule(pol Policy) {
	if st := c.st(); st.Phase.IsFinal() || refundParked(st) {
		return
	}
	c.sched().start(pol)
}

func (c *refundChange) keyConflict(pol Policy, err error, wait time.Duration) {
	if c.sched().keyConflict(pol, err, wait) {
		c.r.Status = refundUnreachable(c.r, pol, c.now).Status
	}
}

func (c *refundChange) noAnswer(pol Policy, err error, query bool) {
	if c.sched().noAnswer(pol, err, query) {
		c.r.Status = refundUnreachable(c.r, pol, c.now).Status
	}
}

func refundUnreachable(r *v1alpha1.Refund, pol Policy, now time.Time) RefundOutcome {
	c := beginRefund(r, now)
	q := c.st().Query
	c.apply(Observation{
		Source: v1alpha1.SourceStatusQuery, Observed: ObservedUnknown, Review: v1alpha1.ReasonProviderUnreachable,
		Reason: fmt.Sprintf("no answer from the provider about the refund for %s (since %s); last error: %s",
			now.Sub(q.UnansweredSince.Time).Round(time.Second), q.UnansweredSince.UTC().Format(time.RFC3339), orNone(q.LastError)),
	})
	c.park()
	return c.done()
}

// RefundOperatorAction decides on the Refund's operator annotations, in
// the order PlanRefund acts on them: resolve, then requery. ok is false when
// neither has a value not yet acted on. Refusals are Warning Events of the
// outcome (ResolveIgnored; RequeryIgnored is Normal): as with
// OperatorAction, kubectl paywarden runs it on a copy with the annotation it
// is about to write, so it refuses locally exactly what the manager would.
func RefundOperatorAction(r *v1alpha1.Refund, now time.Time) (out RefundOutcome, why string, ok bool) {
	if out, ok := refundResolve(r, now); ok {
		return out, "operator resolve", true
	}
	if out, ok := refundRequery(r, now); ok {
		return out, "operator requery", true
	}
	return RefundOutcome{}, "", false
}

// Refusal is the Event by which an operator action on the Refund was
// refused or left alone (ResolveIgnored, RequeryIgnored), if the outcome has
// one.
func (o RefundOutcome) Refusal() (Event, bool) { return refusal(o.Events) }

func refundResolve(r *v1alpha1.Refund, now time.Time) (RefundOutcome, bool) {
	v := r.Annotations[v1alpha1.AnnotationResolve]
	if v == "" {
		return RefundOutcome{}, false
	}
	value := v + ": " + r.Annotations[v1alpha1.AnnotationResolveReason]
	if value == r.Status.Actions.Resolve {
		return RefundOutcome{}, false
	}
	c := beginRefund(r, now)
	res := c.apply(Observation{Source: v1alpha1.SourceManual, Observed: Observed(v), Reason: r.Annotations[v1alpha1.AnnotationResolveReason]})
	c.st().Actions.Resolve = value
	if res.Decision != Applied {
		c.event(true, "ResolveIgnored", fmt.Sprintf("resolve %q not applied: %s", v, res.Reason))
	}
	return c.done(), true
}

func refundRequery(r *v1alpha1.Refund, now time.Time) (RefundOutcome, bool) {
	v := r.Annotations[v1alpha1.AnnotationRequery]
	if v == "" || v == r.Status.Actions.Requery {
		return RefundOutcome{}, false
	}
	c := beginRefund(r, now)
	st := c.st()
	st.Actions.Requery = v
	if st.Phase.IsFinal() {
		c.event(false, "RequeryIgnored", fmt.Sprintf("refund is already %s; nothing to query", st.Phase))
		return c.done(), true
	}
	st.Query.Attempts, st.Query.ConsecutiveErrors, st.Query.LastError, st.Query.LastErrorClass = 0, 0, "", ""
	st.Query.UnansweredSince = nil
	st.Query.NextTime = ptrMicro(now)
	c.event(false, "Requery", "refund status-query schedule restarted by an operator")
	return c.done(), true
}

// MaxRefundSummaries bounds Payment.status.refunds.
const MaxRefundSummaries = 20

// RefundLines is what a Payment's status.refunds says of its Refunds: one
// line each, oldest first (by creation, then name). When there are more
// than MaxRefundSummaries, the oldest settled lines make room.
func RefundLines(refunds []v1alpha1.Refund) []v1alpha1.RefundSummary {
	sorted := slices.Clone(refunds)
	slices.SortStableFunc(sorted, func(a, b v1alpha1.Refund) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	lines := make([]v1alpha1.RefundSummary, 0, len(sorted))
	for i := range sorted {
		r := &sorted[i]
		lines = append(lines, v1alpha1.RefundSummary{Name: r.Name, Amount: r.Status.AmountDisplay, Phase: r.Status.Phase})
	}
	for len(lines) > MaxRefundSummaries {
		drop := 0
		for i, l := range lines {
			if l.Phase.IsFinal() {
				drop = i
				break
			}
		}
		lines = slices.Delete(lines, drop, drop+1)
	}
	if len(lines) == 0 {
		return nil
	}
	return lines
}

// refundLinesNews reports whether status.refunds must be written on its
// own: a Refund settled (or its settlement changed) since the list was
// written, or a listed Refund is gone. A Refund on its way is shown with the
// payment's next write for another reason: it is not worth one of its own.
func refundLinesNews(listed, lines []v1alpha1.RefundSummary) bool {
	was := make(map[string]v1alpha1.RefundSummary, len(listed))
	for _, l := range listed {
		was[l.Name] = l
	}
	for _, l := range lines {
		old, ok := was[l.Name]
		delete(was, l.Name)
		if l != old && (l.Phase.IsFinal() || ok && old.Phase.IsFinal()) {
			return true
		}
	}
	return len(was) > 0
}

// WithRefundLines is out with the payment's Refunds listed (status.refunds)
// as facts has them: every write of the payment carries the list.
func WithRefundLines(out Outcome, facts Facts) Outcome {
	if facts.RefundsListed {
		out.Status.Refunds = facts.RefundLines
	}
	return out
}

// copyOfARefund reports whether r, with nothing in its status yet, is a
// copy of a Refund that may have moved money: restored without status, or
// applied again with the ledger holding its refund. Its operator
// annotations (carried over with the copy) wait until it is adopted or
// parked as restored (copyOfAnOrder is the same for a Payment): acted on
// first, a resolve would settle it locally beside the ledger's record,
// which it would then never adopt nor renew. Once its status says
// anything (adopted, parked), they act.
func copyOfARefund(r *v1alpha1.Refund, facts RefundFacts, now time.Time) bool {
	st := &r.Status
	if st.Phase != "" || st.CreateRequestedAt != nil || st.ProviderRefundID != "" || st.AdoptedAt != nil {
		return false
	}
	if RestoredRefund(r) {
		return true
	}
	_, adopts := AdoptRefund(r, facts.Ledger, now)
	return adopts
}
