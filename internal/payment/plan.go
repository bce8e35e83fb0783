package payment

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
)

// Action is what the reconciler should do for a payment now.
type Action int

// The actions Plan chooses from.
const (
	// Nothing: no call and no wake-up; only news (an event, an operator)
	// moves the payment now.
	Nothing Action = iota
	// Wait: look again at Step.At.
	Wait
	// Write: store Step.Outcome (no provider call), then plan again.
	Write
	// Create: call the provider's create with the payment's idempotency key.
	Create
	// Lookup: find the payment by merchant reference instead of creating it.
	Lookup
	// Query: ask the provider for the payment's status.
	Query
	// CallAuthorize, CallCapture and CallCancel: the money-moving call of
	// status.operation, with its idempotency key (OperationKey).
	CallAuthorize
	CallCapture
	CallCancel
)

func (a Action) String() string {
	return [...]string{"Nothing", "Wait", "Write", "Create", "Lookup", "Query", "Authorize", "Capture", "Cancel"}[a]
}

// Step is Plan's answer.
type Step struct {
	Action Action
	// At is when to look again (Wait).
	At time.Time
	// Outcome is the status to store (Write).
	Outcome Outcome
	// CloseOut marks a query made after spec.expiresAfter (SPEC §2.5): a
	// Pending answer then closes the payment out as a local Expired.
	CloseOut bool
	// Read, on a Query of a settled payment, is a read of its refunded
	// total (AfterRefundRead).
	Read *RefundRead
	// Scheduled marks a status query on the payment's schedule (not the
	// look-up of an operation's outcome): it waits for its provider's token
	// behind every call that moves money or that someone waits for (SPEC
	// §12.3).
	Scheduled bool
	// Announces is the call a Write's marker announces (Create): the call's
	// token is taken before the marker is stored, so a marker never stands
	// for a call that then waited for the rate limit. A create held back
	// stays unmarked, known not to have left (SPEC §12.3).
	Announces Action
	// Why explains the step, for logs.
	Why string
}

// Facts are what the reconciler read besides the payment itself.
type Facts struct {
	// ReferenceOwner names an older Payment of the same provider in the same
	// namespace that already uses this payment's merchant reference.
	ReferenceOwner string
	// KeyOwner names an older Payment of the same provider in the same
	// namespace that already uses this payment's spec.idempotencyKey.
	KeyOwner string
	// ConfigAccepted is true when the provider's configuration has not been
	// refused since it last changed: a payment that waits because its last
	// call was refused for the configuration (lastErrorClass ProviderConfig)
	// goes again at once instead of at its retry time.
	ConfigAccepted bool
	// FreshOperation is true when status.operation was stored by this very
	// reconcile and no call has gone out since: its call is due at once.
	// Otherwise (a crash between the marker and the call) the outcome is
	// looked up first.
	FreshOperation bool
	// FreshCreate is true when status.createRequestedAt was stored by this
	// very reconcile and no call has gone out since: the create has not left
	// the process.
	FreshCreate bool
	// Ledger are the ledger's records of the payment's order (SPEC §12.1),
	// read before a first create: earlier objects of the order that settled
	// and were deleted.
	Ledger []LedgerRecord
	// SucceededRefunds and ReversedRefunds are the UIDs of the payment's
	// Refunds that succeeded, and that failed after they may have been
	// counted (RefundMayLower), read for a settled payment: one its refunded total
	// has not been read since (status.refundsCounted, refundsReversed) makes
	// the provider's cumulative figure be read (RefundsUncounted).
	SucceededRefunds, ReversedRefunds []types.UID
	// RefundsListed is true when the payment's Refunds were read;
	// RefundLines (RefundLines of them) is then what status.refunds must
	// say (WithRefundLines).
	RefundsListed bool
	RefundLines   []v1alpha1.RefundSummary
	// ProviderUnusable is true when the provider cannot be called now (no
	// usable PaymentProvider): what needs no call is not held back for it.
	ProviderUnusable bool
}

// RefundRead is a read of a settled payment's refunded total (Step.Read):
// the Refunds its answer counts and the reversals it reflects, and whether
// the total may have gone down.
type RefundRead struct {
	Counts, Reversed []types.UID
	Lowers           bool
	// FailureSeenAt is status.refundFailureSeenAt when the read was planned:
	// the read answers for the refund failures seen until then.
	FailureSeenAt time.Time
	// From is the refunded total when the read was planned: a lower answer
	// is taken only over that figure, never over a newer one an event
	// stored meanwhile (the read is then made again).
	From int64
	// PlannedAt is when the read was planned, just before it was sent: the
	// provider's answer counts every refund made before then.
	PlannedAt time.Time
}

// refundReadDue is when a settled payment whose refunded total does not
// count all its Refunds may be read: at once, unless its last read failed;
// then one step of the schedule per failure in a row (then its last step)
// after it, so a provider that cannot be read is asked ever more slowly.
func refundReadDue(p *v1alpha1.Payment, pol Policy) time.Time {
	q := p.Status.Query
	if q.LastTime == nil || q.ConsecutiveErrors == 0 {
		return time.Time{}
	}
	d, ok := Delay(pol.Schedule, pol.JitterPercent, q.ConsecutiveErrors-1, string(p.UID))
	if !ok {
		d = lastStep(pol, string(p.UID))
	}
	return q.LastTime.Add(max(d, MinWait))
}

// RefundsUncounted returns the read a settled payment needs, if any: a
// Refund succeeded after its refunded total was last read (its own answer
// came before the payment's), or one failed after it had succeeded (the
// provider's figure went down) since. The provider's cumulative
// figure counts every refund of the payment once, made by a Refund or
// elsewhere (AfterRefundRead).
func RefundsUncounted(p *v1alpha1.Payment, facts Facts) (RefundRead, bool) {
	read := RefundRead{Counts: slices.Clone(facts.SucceededRefunds), Reversed: slices.Clone(facts.ReversedRefunds)}
	if a := p.Status.AmountRefunded; a != nil {
		read.From = a.Value
	}
	if !p.Status.Phase.TookMoney() || ProviderID(p) == "" {
		return read, false
	}
	for _, uid := range facts.ReversedRefunds {
		if !slices.Contains(p.Status.RefundsReversed, uid) {
			read.Lowers = true
		}
	}
	if seen := p.Status.RefundFailureSeenAt; seen != nil {
		read.Lowers = true // an event said a refund failed (refundFailureSeen)
		read.FailureSeenAt = seen.Time
	}
	for _, uid := range facts.SucceededRefunds {
		if !slices.Contains(p.Status.RefundsCounted, uid) {
			return read, true
		}
	}
	return read, read.Lowers
}

// SettledRefunds are the UIDs of the Refunds that succeeded and of those
// that failed in a way that may lower the provider's refunded total
// (Facts.SucceededRefunds, Facts.ReversedRefunds).
func SettledRefunds(all []v1alpha1.Refund) (succeeded, reversed []types.UID) {
	for i := range all {
		rf := &all[i]
		switch {
		case rf.Status.Phase == v1alpha1.RefundSucceeded:
			succeeded = append(succeeded, rf.UID)
		case RefundMayLower(rf):
			reversed = append(reversed, rf.UID)
		}
	}
	return succeeded, reversed
}

// Uncounted names the first of refunds that settled but that p's refunded
// total does not count yet ("" when it counts them all): the read
// RefundsUncounted asks for has not answered. Neither the payment nor that
// Refund may go (deleted, or past retention) before it has: the Refund's
// settlement is known only while one of them stands, and the ledger would
// remember the payment without it.
func Uncounted(p *v1alpha1.Payment, refunds []v1alpha1.Refund) string {
	for i := range refunds {
		succeeded, reversed := SettledRefunds(refunds[i : i+1])
		if _, need := RefundsUncounted(p, Facts{SucceededRefunds: succeeded, ReversedRefunds: reversed}); need {
			return refunds[i].Name
		}
	}
	return ""
}

// AfterRefundRead is AfterQuery for the read of a settled payment's
// refunded total that Plan asked for (Step.Read): an answer counts the
// Refunds that had succeeded when the read was sent, and only those, and the
// reversals known then; after a reversal a lower figure is taken
// (Observation.Lowers).
func AfterRefundRead(p *v1alpha1.Payment, pol Policy, call Call, read RefundRead, now time.Time) Outcome {
	out := AfterQuery(p, pol, call, false, now)
	if Classify(call.Err) != Answered {
		return out
	}
	c := begin(p, now)
	c.merge(out)
	c.st().RefundsCounted = slices.Clone(read.Counts)
	if !read.Lowers {
		return c.done()
	}
	var current int64
	if a := p.Status.AmountRefunded; a != nil {
		current = a.Value
	}
	if current != read.From {
		// An event moved the total since the read was planned: the answer
		// may be older than it. Read again (the reversals stay unread).
		return c.done()
	}
	answersFailure := false
	if seen := c.st().RefundFailureSeenAt; seen != nil && !seen.After(read.FailureSeenAt) {
		// The read a failed refund asked for is made; one that failed
		// after it was planned asks for another (refundFailureSeen). A
		// refund event from a whole second before the read was sent
		// carries a total the read answers for: it is stale, lowered or
		// not (the failed refund's own event may come after its
		// failure's). One from the read's own second may be a refund made
		// while the read was out, and is taken.
		c.st().RefundFailureSeenAt = nil
		answersFailure = true
	}
	before := c.st().RefundsLoweredAt.DeepCopy()
	if got := call.Payment; got.Currency != "" {
		c.apply(Observation{
			Source: v1alpha1.SourceStatusQuery, Observed: ObservedRefund, Raw: got.RawStatus,
			RefundedTotal: &v1alpha1.Money{Value: got.RefundedTotal, Currency: got.Currency}, Lowers: true,
		})
	}
	if lowered := !c.st().RefundsLoweredAt.Equal(before); (answersFailure || lowered) && !read.PlannedAt.IsZero() {
		// The read answers for every refund made a whole second before it
		// was sent, whether it lowered the figure or not; one from the
		// read's own second may be a refund made while it was out, and is
		// taken (the lowering's own time, when the answer came, would make
		// it stale).
		at := metav1.NewTime(read.PlannedAt.Truncate(time.Second).Add(-time.Second))
		if before != nil && before.After(at.Time) {
			at = *before
		}
		c.st().RefundsLoweredAt = &at
	}
	c.st().RefundsReversed = slices.Clone(read.Reversed)
	return c.done()
}

// Plan decides what to do for a payment now (SPEC §2.2–§2.5, §11): operator
// actions first, then by stored phase. It is pure: the reconciler does the
// I/O it names and feeds the result to AfterCreate, AfterLookup or
// AfterQuery.
func Plan(p *v1alpha1.Payment, pol Policy, facts Facts, now time.Time) Step {
	if !copyOfAnOrder(p, facts, now) {
		if out, why, ok := OperatorAction(p, now); ok {
			return Step{Action: Write, Outcome: out, Why: why}
		}
	}
	if out, ok := honorPeriodEnded(p, now); ok {
		return Step{Action: Write, Outcome: out, Why: "the provider no longer guarantees the authorized funds"}
	}
	st := &p.Status
	linesNews := facts.RefundsListed && refundLinesNews(st.Refunds, facts.RefundLines)
	if read, ok := RefundsUncounted(p, facts); ok && !(linesNews && facts.ProviderUnusable) {
		if due := refundReadDue(p, pol); now.Before(due) {
			return Step{Action: Wait, At: due, Why: "refunded total behind its Refunds: next read not due"}
		}
		read.PlannedAt = now
		return Step{Action: Query, Read: &read, Why: "a Refund settled that the refunded total may not count yet: read the provider's cumulative figure"}
	}
	if linesNews {
		// Written with the read of the refunded total when there is one.
		out := Outcome{Status: *st.DeepCopy()}
		return Step{Action: Write, Outcome: WithRefundLines(out, facts), Why: "a Refund settled or went: list the payment's Refunds"}
	}
	if st.Phase.IsFinal() && (st.Query.NextTime != nil || st.Query.UnansweredSince != nil || st.Operation != nil) {
		c := begin(p, now)
		return Step{Action: Write, Outcome: c.done(), Why: "a settled payment keeps no schedule"}
	}
	if closable := Closable(p); st.Closed != closable {
		// Stored before the mark existed, or changed by hand: every status
		// write stores it as Closable says (Outcome.StoreIn).
		out := Outcome{Status: *st.DeepCopy()}
		out.Status.Closed = closable
		return Step{Action: Write, Outcome: out, Why: "status.closed as the payment stands"}
	}
	if st.Phase.IsFinal() {
		return Step{Action: Nothing, Why: "settled"}
	}
	if ProviderID(p) != "" {
		if step, ok := planOperation(p, pol, facts, now); ok {
			return step
		}
	}
	if parked(st) {
		return Step{Action: Nothing, Why: "waiting for a final answer or an operator"}
	}
	if ProviderID(p) == "" {
		return planCreate(p, pol, facts, now)
	}
	return planQuery(p, pol, facts, now)
}

// copyOfAnOrder reports whether p, with nothing in its status yet, is a copy
// of an object that may have moved money: restored without status, or
// applied again with the ledger holding its order. Its operator annotations
// (carried over with the copy) wait until the copy is adopted or looked up:
// acted on first, a cancel or resolve would settle locally, and release the
// merchant reference of, an order the provider may hold money for (SPEC
// §12.1). A lookup that finds nothing acts on them before any create. A
// copy being deleted does not act on them either: settled locally, it would
// be remembered in the ledger in place of its order's record (planCreate
// leaves it as it is). Restored and Adopt see only objects with nothing in
// their status.
func copyOfAnOrder(p *v1alpha1.Payment, facts Facts, now time.Time) bool {
	if p.Status.Phase != "" {
		// Parked (Unsent): its annotations act, a requery among them.
		return false
	}
	if Restored(p) {
		return true
	}
	_, adopts := Adopt(p, facts.Ledger, now)
	return adopts
}

// configFixed: the payment waits only because the provider refused the
// configuration, and the configuration has changed since.
func configFixed(st *v1alpha1.PaymentStatus, facts Facts) bool {
	return facts.ConfigAccepted && st.Query.LastErrorClass == ConfigProblem.StatusName()
}

func planCreate(p *v1alpha1.Payment, pol Policy, facts Facts, now time.Time) Step {
	st := &p.Status
	marked := st.CreateRequestedAt != nil
	if !marked && !p.DeletionTimestamp.IsZero() {
		// Decided on the API server's copy too (a write that conflicts with
		// the deletion is planned again on it): nothing is created.
		return Step{Action: Nothing, Why: "deleted before its create was sent: nothing may start now"}
	}
	if !marked && facts.ReferenceOwner != "" {
		return Step{Action: Write, Outcome: referenceTaken(p, facts.ReferenceOwner, now), Why: "merchant reference already in use"}
	}
	if !marked && facts.KeyOwner != "" {
		return Step{Action: Write, Outcome: keyTaken(p, facts.KeyOwner, now), Why: "idempotency key already in use"}
	}
	if len(facts.Ledger) > 0 && !marked {
		if out, ok := Adopt(p, facts.Ledger, now); ok {
			return Step{Action: Write, Outcome: out, Why: "the order was settled by an earlier object: adopt, do not create again"}
		}
	}
	if refusal := unsupported(p, pol); refusal != "" && !marked {
		return Step{Action: Write, Outcome: refuseCreate(p, refusal, now), Why: "the provider type cannot do what the spec asks"}
	}
	expiry, expires := expiresAt(p)
	pastExpiry := expires && !now.Before(expiry)
	if pastExpiry && (!marked || facts.FreshCreate) {
		// Marked a moment ago, with expiresAfter passing before the call:
		// still nothing was sent.
		return Step{Action: Write, Outcome: neverCreated(p, now), Why: "expired before it was created"}
	}
	// A cancel asked for while the create's outcome is unknown: the payment
	// must be found before it can be canceled (cancelingUnknownCreate).
	canceling := cancelingUnknownCreate(p)
	if gaveUp(st, pol, now) {
		return Step{Action: Write, Outcome: unreachable(p, pol, now), Why: "provider unreachable"}
	}
	if next := st.Query.NextTime; next != nil && now.Before(next.Time) && !configFixed(st, facts) {
		return Step{Action: Wait, At: next.Time, Why: "create retry not due"}
	}
	switch {
	case !marked && Restored(p):
		return Step{Action: Lookup, Why: "restored without status: look the order up at the provider before creating it"}
	case !marked:
		return Step{Action: Write, Outcome: markCreate(p, now), Announces: Create, Why: "create marker before the call"}
	case pastExpiry:
		return Step{Action: Lookup, Why: "past expiresAfter: no create is sent; look for one that may have gone out"}
	case canceling && chargesOnCreate(p, pol):
		return Step{Action: Lookup, Why: "canceled before the charge's outcome was known: never charge again, look for the charge to cancel"}
	case now.Sub(st.CreateRequestedAt.Time) >= pol.LookupAfter():
		return Step{Action: Lookup, Why: "create marker older than the idempotency window minus its margin"}
	case st.Query.LastErrorClass == KeyConflict.StatusName() && pol.canLookUp():
		return Step{Action: Lookup, Why: "a first create with this idempotency key exists: look up what it did"}
	case canceling:
		return Step{Action: Create, Why: "canceled before the create's outcome was known: the create takes no money, so it is repeated with its key to learn the payment to cancel"}
	}
	return Step{Action: Create, Why: "create with the payment's idempotency key"}
}

// cancelingUnknownCreate: a cancel was asked for while the create's outcome
// is unknown (a marker, no provider id). The payment must be found first:
//   - a create that takes no money (a checkout, an authorization: see
//     chargesOnCreate) is repeated with its key within the key window; the
//     provider replays its first answer or, if the first never arrived,
//     creates a payment nobody can pay; either way the cancel then cancels it;
//   - a charge's create is never repeated (a first create that never arrived
//     would take the money now being withdrawn): the charge is looked up by
//     merchant reference, on the schedule, until the key window ends;
//     "not found" before then is no verdict (AfterLookup).
func cancelingUnknownCreate(p *v1alpha1.Payment) bool {
	st := &p.Status
	return st.Operation != nil && st.Operation.Kind == v1alpha1.OperationCancel && ProviderID(p) == "" && st.CreateRequestedAt != nil
}

// chargesOnCreate: the create itself takes the payer's money and cannot be
// withdrawn: a server-side charge of a stored payment method, captured at
// once, or a payment without a checkout at a provider type that cannot
// cancel (the async-job API charges a job as submitted).
func chargesOnCreate(p *v1alpha1.Payment, pol Policy) bool {
	return p.Spec.PaymentMethod != nil && p.Spec.CaptureMethod != v1alpha1.CaptureManual ||
		pol.LifecycleKnown && !pol.Lifecycle.Cancel && p.Spec.Checkout == nil
}

func planQuery(p *v1alpha1.Payment, pol Policy, facts Facts, now time.Time) Step {
	st := &p.Status
	if gaveUp(st, pol, now) {
		return Step{Action: Write, Outcome: unreachable(p, pol, now), Why: "provider unreachable"}
	}
	expiry, expires := expiresAt(p)
	closeOut := expires && !now.Before(expiry)
	last := st.Query.LastTime
	freshDue := closeOut && (last == nil || last.Time.Before(expiry))
	if next := st.Query.NextTime; next != nil && now.Before(next.Time) && !freshDue && !configFixed(st, facts) {
		at := next.Time
		if expires && !closeOut && expiry.Before(at) {
			at = expiry // the close-out's fresh query
		}
		return Step{Action: Wait, At: at, Why: "next status query not due"}
	}
	return Step{Action: Query, CloseOut: closeOut, Scheduled: true, Why: "status query due"}
}

// QueryMoot reports whether a status query planned on one copy of a payment
// must not go out because seen, the freshest copy the manager holds (its
// cache, read after the wait for the provider's token), shows the payment
// settled. A settled payment never leaves the settled phases, so no answer
// could change it: the query would only take a token from calls that matter
// (SPEC §12.3). A read of a settled payment's refunded total (Step.Read) is
// never moot: it is asked because the payment is settled.
func QueryMoot(step Step, seen *v1alpha1.Payment) bool {
	return step.Action == Query && step.Read == nil && seen.Status.Phase.IsFinal()
}

// ProviderID is the provider's id of the payment: recorded in status, or
// given in spec for a payment paywarden only tracks.
func ProviderID(p *v1alpha1.Payment) string {
	if id := p.Status.ProviderPaymentID; id != "" {
		return id
	}
	return p.Spec.ProviderPaymentID
}

// parked: in Unknown with nothing scheduled, waiting for a final answer or a
// human. Nothing automatic re-arms it.
func parked(st *v1alpha1.PaymentStatus) bool {
	return st.Phase == v1alpha1.PhaseUnknown && st.Query.NextTime == nil
}

// expiresAt is when an unpaid payment is closed out (spec.expiresAfter).
func expiresAt(p *v1alpha1.Payment) (time.Time, bool) {
	if p.Spec.ExpiresAfter == nil {
		return time.Time{}, false
	}
	switch p.Status.Phase {
	case "", v1alpha1.PhasePending, v1alpha1.PhaseProcessing:
		return p.CreationTimestamp.Add(p.Spec.ExpiresAfter.Duration), true
	}
	return time.Time{}, false
}

func gaveUp(st *v1alpha1.PaymentStatus, pol Policy, now time.Time) bool {
	return unreachableFor(&st.Query, pol, now)
}

// unreachableFor: no answer at all for Policy.MaxUnreachable.
func unreachableFor(q *v1alpha1.QueryStatus, pol Policy, now time.Time) bool {
	u := q.UnansweredSince
	return u != nil && pol.MaxUnreachable > 0 && now.Sub(u.Time) >= pol.MaxUnreachable
}

func markCreate(p *v1alpha1.Payment, now time.Time) Outcome {
	c := begin(p, now)
	c.apply(Observation{Source: v1alpha1.SourceCreate, Observed: ObservedPending})
	c.st().CreateRequestedAt = ptrTime(now)
	c.st().IdempotencyKey = p.IdempotencyKey()
	c.st().ObservedGeneration = p.Generation
	return c.done()
}

func neverCreated(p *v1alpha1.Payment, now time.Time) Outcome {
	c := begin(p, now)
	c.apply(Observation{
		Source: v1alpha1.SourceCreate, Observed: ObservedExpired, Local: true,
		Reason: "expiresAfter passed before the payment was created at the provider; nothing was sent",
	})
	c.park()
	c.st().CreateRequestedAt = nil // no create stands for the payment
	return c.done()
}

func referenceTaken(p *v1alpha1.Payment, owner string, now time.Time) Outcome {
	return parkedAsDuplicate(p, fmt.Sprintf("merchant reference %q is already used by Payment %s of provider %s; this Payment was not created at the provider, so the order cannot be charged twice: delete it, or give it its own spec.merchantReference",
		p.MerchantRef(), owner, p.Spec.ProviderRef.Name), now)
}

func keyTaken(p *v1alpha1.Payment, owner string, now time.Time) Outcome {
	return parkedAsDuplicate(p, fmt.Sprintf("spec.idempotencyKey %q is already used by Payment %s of provider %s; this Payment was not created at the provider, which would answer it with that Payment's create: delete it, or give it its own spec.idempotencyKey",
		p.Spec.IdempotencyKey, owner, p.Spec.ProviderRef.Name), now)
}

// parkedAsDuplicate parks a payment never created at the provider because
// another Payment holds what its create would use: it is reviewed as a
// DuplicatePayment, for the reason given.
func parkedAsDuplicate(p *v1alpha1.Payment, reason string, now time.Time) Outcome {
	c := begin(p, now)
	c.apply(Observation{
		Source: v1alpha1.SourceCreate, Observed: ObservedUnknown, Review: v1alpha1.ReasonDuplicatePayment,
		Reason: reason,
	})
	c.park()
	return c.done()
}

func unreachable(p *v1alpha1.Payment, pol Policy, now time.Time) Outcome {
	c := begin(p, now)
	q := c.st().Query
	c.apply(Observation{
		Source: v1alpha1.SourceStatusQuery, Observed: ObservedUnknown, Review: v1alpha1.ReasonProviderUnreachable,
		Reason: fmt.Sprintf("no answer from the provider for %s (since %s; statusQuery.maxUnreachable is %s); last error: %s",
			now.Sub(q.UnansweredSince.Time).Round(time.Second), q.UnansweredSince.UTC().Format(time.RFC3339), pol.MaxUnreachable, orNone(q.LastError)),
	})
	c.park()
	return c.done()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ReferenceOwner returns the name of the Payment that owns p's merchant
// reference when that is not p: the oldest (creation time, then name) of the
// Payments of the same provider using the reference. One that ended without
// taking money (Failed, Expired, Canceled) no longer holds it: an order may
// be paid again after a decline or a cancel (SPEC §12.1), unless it is under
// review (releasesOrder). Everyone computes
// the same owner, so of two Payments created together exactly one is created
// at the provider.
func ReferenceOwner(p *v1alpha1.Payment, same []v1alpha1.Payment) string {
	return oldestOwner(p, same, func(o *v1alpha1.Payment) bool {
		return o.MerchantRef() == p.MerchantRef() && !releasesOrder(o)
	})
}

// oldestOwner is the name of the oldest (creation time, then name) Payment of
// p's provider in same, other than p and not let go after a deletion, that
// holds what p asks for; "" when p is the oldest.
func oldestOwner(p *v1alpha1.Payment, same []v1alpha1.Payment, holds func(*v1alpha1.Payment) bool) string {
	owner := p
	for i := range same {
		o := &same[i]
		if o.UID == p.UID || o.Spec.ProviderRef.Name != p.Spec.ProviderRef.Name || gone(o) || !holds(o) {
			continue
		}
		if older(o, owner) {
			owner = o
		}
	}
	if owner == p {
		return ""
	}
	return owner.Name
}

// KeyOwner returns the name of the Payment that owns p's spec.idempotencyKey
// when that is not p: the oldest (creation time, then name) of the Payments
// of the same provider that set the same key (SPEC §12.1). Unlike a merchant
// reference, a key is never released by how its Payment ended: the provider
// replays the first create under a key, so a second Payment would be given
// the first one's payment (or a key-conflict error). A Payment being deleted
// holds it until it is let go (its call may still be in flight), as for
// references. A default key (empty spec.idempotencyKey) is not checked here.
// Everyone computes the same owner, so of two Payments created together
// exactly one is created at the provider.
func KeyOwner(p *v1alpha1.Payment, same []v1alpha1.Payment) string {
	key := p.Spec.IdempotencyKey
	if key == "" {
		return ""
	}
	return oldestOwner(p, same, func(o *v1alpha1.Payment) bool { return o.Spec.IdempotencyKey == key })
}

// releasesOrder: p ended without taking the payer's money, and nothing of
// that is in doubt, so its order may be paid by another Payment. One under
// review holds its order until a human decides: a success reported after it
// was declined, canceled or expired (ConflictingStatus) may mean the payer
// paid, and a second Payment of the order would charge them again.
func releasesOrder(p *v1alpha1.Payment) bool {
	return releasesReference(p.Status.Phase) && !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ConditionNeedsReview)
}

// releasesReference: the payment ended without taking the payer's money, so
// its order may be paid by another Payment.
func releasesReference(phase v1alpha1.PaymentPhase) bool {
	switch phase {
	case v1alpha1.PhaseFailed, v1alpha1.PhaseExpired, v1alpha1.PhaseCanceled:
		return true
	}
	return false
}

// gone reports whether a Payment is being deleted and holds no money in
// flight any more (no money-in-flight finalizer): it no longer owns its
// merchant reference or key. One still held is driven on, and may still
// charge: it keeps them until it is let go (and then the ledger does).
func gone(p *v1alpha1.Payment) bool {
	if p.DeletionTimestamp.IsZero() {
		return false
	}
	for _, f := range p.Finalizers {
		if f == v1alpha1.FinalizerMoneyInFlight {
			return false
		}
	}
	return true
}

func older(a, b *v1alpha1.Payment) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// unsupported says what the spec asks that the provider type cannot do; ""
// when nothing. Checked before the create: a definitive refusal about the
// payment, not a configuration problem.
func unsupported(p *v1alpha1.Payment, pol Policy) string {
	if !pol.LifecycleKnown {
		return ""
	}
	l := pol.Lifecycle
	switch {
	case p.Spec.CaptureMethod == v1alpha1.CaptureManual && !l.ManualCapture:
		return "captureMethod Manual is not supported by this provider type"
	case p.Spec.Checkout != nil && !l.Checkout:
		return "spec.checkout (a hosted checkout page) is not supported by this provider type"
	case p.Spec.PaymentMethod != nil && !l.StoredMethod:
		return "spec.paymentMethod (a server-side charge) is not supported by this provider type"
	}
	return ""
}

func refuseCreate(p *v1alpha1.Payment, why string, now time.Time) Outcome {
	c := begin(p, now)
	c.apply(Observation{
		Source: v1alpha1.SourceCreate, Observed: ObservedFailed,
		Failure: &v1alpha1.Failure{Code: v1alpha1.ReasonCreateRejected, Message: why + "; nothing was sent"},
		Reason:  v1alpha1.ReasonCreateRejected,
	})
	return c.done()
}

// RefundMayLower reports whether a failed Refund may have been counted in
// its payment's refunded total before it failed, so that the total may go
// down: it failed after it succeeded, or it reached the provider (Stripe
// counts a refund in amount_refunded from its creation, pending included,
// and its failure_balance_transaction takes it back out).
func RefundMayLower(r *v1alpha1.Refund) bool {
	return r.Status.Phase == v1alpha1.RefundFailed && (r.Status.ProviderRefundID != "" || RefundReversed(r))
}

// RefundReversed reports whether a Refund failed after it had succeeded:
// its money came back to the merchant (ReasonRefundReversed).
func RefundReversed(r *v1alpha1.Refund) bool {
	if r.Status.Phase != v1alpha1.RefundFailed {
		return false
	}
	if f := r.Status.Failure; f != nil && f.Code == v1alpha1.ReasonRefundReversed {
		return true
	}
	for _, h := range r.Status.History {
		if h.Reason == v1alpha1.ReasonRefundReversed {
			return true
		}
	}
	return false
}
