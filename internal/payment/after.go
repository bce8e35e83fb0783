package payment

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// Call is what one provider call produced: the provider's view of the
// payment, or a classified error.
type Call struct {
	Payment provider.Payment
	Err     error
}

// AfterCreate decides what a create call means (SPEC §2.3, §11.3, §12.1).
// Only a definitive refusal about the payment fails it; no answer is retried
// with the same key, a configuration problem waits for the fix, and a key
// conflict (a first request under the key exists) is looked up by merchant
// reference where the provider can, else retried on the backoff.
func AfterCreate(p *v1alpha1.Payment, pol Policy, call Call, now time.Time) Outcome {
	c := begin(p, now)
	if ProviderID(c.p) != "" || c.st().CreateRequestedAt == nil {
		return c.done() // recorded meanwhile by another writer
	}
	switch class := Classify(call.Err); {
	case class == Answered && call.Payment.ID != "":
		if cancelingUnknownCreate(c.p) {
			// The create was repeated to find the payment to cancel. No
			// cancel can have gone out without its id: the answer stands
			// for the cancel's lookup, which is due at once.
			c.st().Query.LastTime = ptrMicro(now)
		}
		c.answered(call.Payment, v1alpha1.SourceCreate, false)
		c.startSchedule(pol)
	case class == Answered:
		c.noAnswer(pol, errors.New("the provider answered the create without a payment id"), false)
	case class == NoAnswer:
		c.noAnswer(pol, call.Err, false)
	case class == KeyConflict:
		// The first create under this key may have charged: never Failed.
		// Find out what it did (the lookup comes next), or, at a provider
		// that cannot look up, ask again with the key on the backoff.
		wait := MinWait
		if !pol.canLookUp() {
			wait = 0 // the create backoff
		}
		c.keyConflict(pol, call.Err, wait)
	case class == Refused:
		code := v1alpha1.ReasonCreateRejected
		if errors.Is(call.Err, provider.ErrAmountNotRepresentable) {
			code = v1alpha1.ReasonAmountNotRepresentable
		}
		c.apply(Observation{
			Source: v1alpha1.SourceCreate, Observed: ObservedFailed,
			Failure: &v1alpha1.Failure{Code: code, Message: call.Err.Error()},
			Reason:  v1alpha1.ReasonCreateRejected,
		})
	default:
		// A refused configuration, a route that is not there: nothing is
		// known about the payment. Wait for the fix, same key next time.
		c.configProblem(pol, call.Err)
	}
	return c.done()
}

// AfterLookup decides what a lookup by merchant reference means: it replaces
// the create once the key window (minus its margin) or spec.expiresAfter has
// passed. Anything but a clear "found" ends in Unknown with
// CreateOutcomeUnknown, never Failed: the first create may have charged.
func AfterLookup(p *v1alpha1.Payment, pol Policy, call Call, now time.Time) Outcome {
	c := begin(p, now)
	st := c.st()
	if ProviderID(c.p) != "" {
		return c.done()
	}
	if st.CreateRequestedAt == nil {
		return afterObserve(c, pol, call)
	}
	at, expires := expiresAt(c.p)
	pastExpiry := expires && !now.Before(at)
	windowEnd := st.CreateRequestedAt.Add(pol.LookupAfter())
	// A canceled charge is looked up instead of created again (planCreate):
	// until its key window ends, "not found" may be a create still on its way
	// or a search that lags, and is no verdict.
	searching := cancelingUnknownCreate(c.p) && chargesOnCreate(c.p, pol) && now.Before(windowEnd)
	// A lookup after a key conflict, still inside the key window: finding
	// nothing yet is no verdict (the first request may still be running, or
	// not searchable yet); look again on the backoff.
	canceling := st.Operation != nil && st.Operation.Kind == v1alpha1.OperationCancel
	afterConflict := st.Query.LastErrorClass == KeyConflict.StatusName() && !pastExpiry && !canceling &&
		now.Sub(st.CreateRequestedAt.Time) < pol.LookupAfter()
	switch class := Classify(call.Err); {
	case class == Answered && call.Payment.ID != "":
		// The lookup read the payment's status: past expiresAfter it is the
		// close-out's fresh query, and a payment nobody paid closes out now.
		st.Query.LastTime = ptrMicro(now)
		if op := st.Operation; op != nil {
			op.Attempts = 0 // the lookups were not the operation's calls
		}
		c.answered(call.Payment, v1alpha1.SourceCreate, pastExpiry)
		c.startSchedule(pol)
	case class == NoAnswer:
		c.noAnswer(pol, call.Err, false)
	case class == ConfigProblem:
		c.configProblem(pol, call.Err)
	case class == NotFound && searching:
		// Look again on the schedule's steps (the cancel operation counts
		// the lookups), and once more when the window ends.
		op := st.Operation
		op.Attempts++
		c.sched().answered()
		c.wakeIn(min(createBackoff(pol.Schedule, op.Attempts), windowEnd.Sub(now)))
	case afterConflict:
		found := "the provider answered without a payment id"
		if call.Err != nil {
			found = call.Err.Error()
		}
		c.keyConflict(pol, fmt.Errorf("a first create with idempotency key %q exists at the provider; looking merchant reference %q up found nothing yet (%s)",
			CreateKey(c.p), c.p.MerchantRef(), found), 0)
	default:
		why := fmt.Sprintf("it is past the provider's idempotency window (%s, less a %d%% margin)", pol.KeyWindow, pol.KeyWindowMarginPercent)
		switch {
		case pastExpiry:
			why = "it is past spec.expiresAfter, so no create may be sent"
		case searching:
			why = "a cancel was asked for before the outcome was known, and a charge's create is never repeated (it could take the money being withdrawn)"
		}
		found := "the provider answered without a payment id"
		if call.Err != nil {
			found = call.Err.Error()
		}
		c.apply(Observation{
			Source: v1alpha1.SourceCreate, Observed: ObservedUnknown, Review: v1alpha1.ReasonCreateOutcomeUnknown,
			Reason: fmt.Sprintf("a create was requested at %s and may have reached the provider; %s and looking merchant reference %q up found nothing usable (%s): a new create could charge twice",
				st.CreateRequestedAt.UTC().Format(time.RFC3339), why, c.p.MerchantRef(), found),
		})
		c.park()
	}
	return c.done()
}

// AfterQuery decides what a status query means (SPEC §2.2, §11.2). Only an
// answer consumes a schedule attempt. Run again on fresh state after a write
// conflict, it never re-arms a payment that is settled or parked meanwhile.
func AfterQuery(p *v1alpha1.Payment, pol Policy, call Call, closeOut bool, now time.Time) Outcome {
	c := begin(p, now)
	st := c.st()
	held := st.Phase.IsFinal() || parked(st)
	// A settled payment is read only for its refunded total
	// (RefundsUncounted); the next read, while it is still behind, follows
	// the schedule's backoff.
	settled := st.Phase.IsFinal() && st.Operation == nil
	if st.ProviderPaymentID == "" {
		st.ProviderPaymentID = c.p.Spec.ProviderPaymentID
	}
	q := &st.Query
	if op := st.Operation; op != nil && call.Err != nil {
		// The lookup of an operation's outcome got no usable answer: look
		// again on the operation's backoff, whatever the schedule says.
		op.Attempts++
		wait := createBackoff(pol.Schedule, op.Attempts)
		if ra, ok := provider.RetryAfter(call.Err); ok && ra > wait {
			wait = ra
		}
		op.RetryAt = ptrMicro(now.Add(max(wait, MinWait)))
		q.LastError, q.LastErrorClass = call.Err.Error(), Classify(call.Err).StatusName()
		if held {
			return c.done()
		}
	}
	switch Classify(call.Err) {
	case Answered:
		q.LastTime = ptrMicro(now)
		c.sched().answered()
		for _, obs := range FromPayment(call.Payment, v1alpha1.SourceStatusQuery) {
			// An operation marked while the close-out's query was out (an
			// operator's cancel, decided again on fresh state after a write
			// conflict) goes out first: expiring the payment under it would
			// drop it and leave the provider's object open to be paid.
			obs.PastExpiry = closeOut && st.Operation == nil
			if op := st.Operation; op != nil && fundingDeclined(st, op.Kind, obs) {
				// The lookup of a capture's (or authorization's) outcome
				// finds the payer sent back: the decline, not a call to repeat.
				if c.apply(payerMustApproveAgain(obs, op.Kind, call.Payment)).Decision == Applied {
					c.sched().start(pol)
					return c.done()
				}
				continue
			}
			if closeOut && obs.Observed == ObservedPending && st.Operation == nil && closesAtProvider(c.p, pol) {
				// Unpaid past expiresAfter: the provider's object is closed
				// first (a cancel), so the payer cannot pay what paywarden
				// calls Expired (SPEC §2.5; AfterOperation ends it Expired).
				obs.PastExpiry = false
				c.apply(obs)
				c.st().Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCancel, RequestedAt: metav1.NewTime(now),
					Reason: v1alpha1.ReasonUnpaidTimeout, IdempotencyKey: newOperationKey(c.p, v1alpha1.OperationCancel)}
				c.event(false, "CloseOutRequested", "unpaid past spec.expiresAfter: closing it at the provider before it is marked Expired")
				return c.done()
			}
			c.apply(obs)
		}
		if settled {
			c.readAgain()
			return c.done()
		}
		if op := st.Operation; op != nil && isCloseOut(op) && st.Phase != v1alpha1.PhasePending {
			// The close-out's cancel was looked up and the payment is no
			// longer unpaid (processing, authorized, paid): nothing to
			// close; its answer stands and the schedule goes on.
			st.Operation = nil
		}
		if op := st.Operation; op != nil {
			if !operationDone(st, op.Kind) {
				// This query looked up an operation whose outcome was
				// unknown: it did not happen, so the call is repeated (same
				// key) now.
				op.RetryAt = nil
				return c.done()
			}
			st.Operation = nil
		}
		waitingForMerchant := st.Phase == v1alpha1.PhaseAuthorized && c.p.Spec.ManualCapture()
		if !held && !waitingForMerchant {
			q.Attempts++
		}
		if held || st.Phase.IsFinal() || parked(st) {
			return c.done()
		}
		if waitingForMerchant {
			// Waiting for the merchant's capture is not waiting for the
			// provider: no attempt is consumed; look now and then (and when
			// the authorization should have expired) for a void or an expiry.
			wait := lastStep(pol, string(c.p.UID))
			for _, at := range []*metav1.Time{st.AuthorizationExpiresAt, st.FundsGuaranteedUntil} {
				if at != nil && at.Time.After(now) && at.Time.Sub(now)+time.Second < wait {
					wait = at.Time.Sub(now) + time.Second
				}
			}
			c.wakeIn(wait)
			return c.done()
		}
		if d, ok := Delay(pol.Schedule, pol.JitterPercent, q.Attempts, string(c.p.UID)); ok {
			c.wakeIn(d)
			return c.done()
		}
		if at, due := orderExpiryQuery(c.p, pol, now); due {
			// Not given up on before the provider had time to let the order
			// expire: a read then settles it (its "not found" is Expired).
			c.wakeIn(at.Sub(now))
			return c.done()
		}
		c.apply(Observation{
			Source: v1alpha1.SourceStatusQuery, Observed: ObservedUnknown, Review: v1alpha1.ReasonRetriesExhausted,
			Reason: fmt.Sprintf("no final answer after %d status queries (provider status %q)", q.Attempts, st.ProviderStatus),
		})
		c.park()
	default:
		if settled {
			q.LastError, q.LastErrorClass = call.Err.Error(), Classify(call.Err).StatusName()
			q.ConsecutiveErrors++
			c.readAgain()
		}
		if held {
			return c.done()
		}
		if orderExpired(c.p, pol, call.Err, now) {
			// The provider deleted the order nobody completed: its verdict.
			q.LastTime = ptrMicro(now)
			c.sched().answered()
			c.apply(orderExpiredObservation(c.p, pol, v1alpha1.SourceStatusQuery, call.Err))
			return c.done()
		}
		switch gone, refused := c.sched().queryFailed(pol, call.Err); {
		case gone:
			c.merge(unreachable(c.p, pol, c.now))
		case refused:
			c.apply(nonRetryableQuery(call.Err))
			c.park() // asking again cannot help; an operator's requery restarts it
		}
	}
	return c.done()
}

// closesAtProvider: an unpaid payment past its expiresAfter is closed at
// its provider (canceled: a Checkout Session expired, a PaymentIntent or
// order voided) before paywarden marks it Expired. Not a payment paywarden
// only tracks (its creator closes it), nor where the provider type cannot
// cancel.
func closesAtProvider(p *v1alpha1.Payment, pol Policy) bool {
	return pol.LifecycleKnown && pol.Lifecycle.Cancel && p.Spec.ProviderPaymentID == "" && !p.Status.CloseOutRefused
}

// isCloseOut: op is the cancel of an unpaid payment past expiresAfter.
func isCloseOut(op *v1alpha1.Operation) bool {
	return op.Kind == v1alpha1.OperationCancel && op.Reason == v1alpha1.ReasonUnpaidTimeout
}

// closedOut: obs says the provider's object is closed (canceled or expired)
// while paywarden's close-out cancel is under way: the close-out's effect,
// whichever way it is seen first.
func closedOut(st *v1alpha1.PaymentStatus, obs Observation) bool {
	return st.Operation != nil && isCloseOut(st.Operation) && (obs.Observed == ObservedCanceled || obs.Observed == ObservedExpired)
}

// canceledByOperator: obs says the provider's object is canceled while the
// cancel an operator asked for is under way: that cancel's effect, for its
// reason, whichever way it is seen first (its answer, a look-up, the
// provider's event).
func canceledByOperator(st *v1alpha1.PaymentStatus, obs Observation) bool {
	op := st.Operation
	return op != nil && op.Kind == v1alpha1.OperationCancel && !isCloseOut(op) && obs.Observed == ObservedCanceled
}

// readAgain records a read of a settled payment made for its refunded total
// (RefundsUncounted): when it was made and how many there were, from which
// Plan paces the next one while the total is still behind (refundReadDue).
// A settled payment keeps no schedule (nextTime stays empty).
func (c *change) readAgain() {
	q := &c.st().Query
	q.LastTime = ptrMicro(c.now)
	q.Attempts++
}

// answered records what the provider said about the payment: its id (always,
// even when the observation itself changes nothing) and the observations.
func (c *change) answered(pp provider.Payment, source v1alpha1.ObservationSource, pastExpiry bool) {
	for _, obs := range FromPayment(pp, source) {
		obs.PastExpiry = pastExpiry
		c.apply(obs)
	}
	st := c.st()
	if st.ProviderPaymentID == "" {
		st.ProviderPaymentID = pp.ID
	}
	c.sched().answered()
}

// startSchedule starts the status-query schedule once the provider knows the
// payment, unless the answer already settled or parked it.
func (c *change) startSchedule(pol Policy) {
	st := c.st()
	if st.Phase.IsFinal() || parked(st) {
		return
	}
	c.sched().start(pol)
}

// noAnswer records a call that got no answer; past Policy.MaxUnreachable
// without any answer the payment gives up with ProviderUnreachable.
func (c *change) noAnswer(pol Policy, err error, query bool) {
	if c.sched().noAnswer(pol, err, query) {
		c.merge(unreachable(c.p, pol, c.now))
	}
}

// configProblem records a refused configuration: no attempt is consumed and
// nothing about the payment changes; the call waits for the fix.
func (c *change) configProblem(pol Policy, err error) { c.sched().configProblem(pol, err) }

// keyConflict records a create whose key the provider already has for
// another request; past Policy.MaxUnreachable without any answer about the
// payment it gives up with ProviderUnreachable, like no answer.
func (c *change) keyConflict(pol Policy, err error, wait time.Duration) {
	if c.sched().keyConflict(pol, err, wait) {
		c.merge(unreachable(c.p, pol, c.now))
	}
}

// wakeIn schedules the next call for the payment.
func (c *change) wakeIn(d time.Duration) { c.sched().wakeIn(d) }

func (c *change) sched() schedule {
	return schedule{q: &c.st().Query, now: c.now, seed: string(c.p.UID)}
}

// MinWait is the shortest wait paywarden schedules between two calls for one
// payment, whatever the provider's schedule says: a next call is never due at
// once. (Each call stores what it learned first, and every provider call
// goes through the provider's rate limit.)
const MinWait = 10 * time.Millisecond

// schedule is the bookkeeping of status.query, the same for every kind
// (Payment, Refund): only answers consume attempts; no answer waits at the
// current step (queries) or on the create backoff (creates), honouring
// Retry-After; a refused configuration waits for the fix.
type schedule struct {
	q    *v1alpha1.QueryStatus
	now  time.Time
	seed string
}

func (s schedule) wakeIn(d time.Duration) {
	s.q.NextTime = ptrMicro(s.now.Add(max(d, MinWait)))
}

// start begins the schedule: no attempts yet, the first query after step 1.
func (s schedule) start(pol Policy) {
	first, _ := Delay(pol.Schedule, pol.JitterPercent, 0, s.seed)
	s.q.Attempts = 0
	s.wakeIn(first)
}

// answered clears the run of errors after an answer.
func (s schedule) answered() {
	s.q.LastError, s.q.LastErrorClass, s.q.ConsecutiveErrors, s.q.UnansweredSince = "", "", 0, nil
}

// noAnswer records a call without an answer and reports whether the object
// has had no answer for Policy.MaxUnreachable.
func (s schedule) noAnswer(pol Policy, err error, query bool) bool {
	q := s.q
	q.LastError, q.LastErrorClass = err.Error(), NoAnswer.StatusName()
	q.ConsecutiveErrors++
	if q.UnansweredSince == nil {
		q.UnansweredSince = ptrMicro(s.now)
	}
	var wait time.Duration
	if query {
		wait = currentStep(pol, q.Attempts, s.seed)
	} else {
		wait = createBackoff(pol.Schedule, q.ConsecutiveErrors)
	}
	if ra, ok := provider.RetryAfter(err); ok && ra > wait {
		wait = ra
	}
	s.wakeIn(wait)
	return unreachableFor(q, pol, s.now)
}

// keyConflict records a call the provider did not carry out because a first
// request under its idempotency key exists: no attempt is consumed and
// nothing about the object changes; what the first request did is looked up
// (the caller's plan knows how). It counts as a call without an answer about
// the object. wait 0 is the create backoff.
func (s schedule) keyConflict(pol Policy, err error, wait time.Duration) bool {
	q := s.q
	q.LastError, q.LastErrorClass = err.Error(), KeyConflict.StatusName()
	q.ConsecutiveErrors++
	if q.UnansweredSince == nil {
		q.UnansweredSince = ptrMicro(s.now)
	}
	if wait <= 0 {
		wait = createBackoff(pol.Schedule, q.ConsecutiveErrors)
	}
	if ra, ok := provider.RetryAfter(err); ok && ra > wait {
		wait = ra
	}
	s.wakeIn(wait)
	return unreachableFor(q, pol, s.now)
}

// queryFailed records a status query without a usable answer: no answer
// (wait at the current step), an answer asking again cannot change (an
// attempt consumed; refused), or a refused configuration (wait for the fix).
// gone reports no answer for Policy.MaxUnreachable.
func (s schedule) queryFailed(pol Policy, err error) (gone, refused bool) {
	s.q.LastTime = ptrMicro(s.now)
	switch class := Classify(err); class {
	case NoAnswer, KeyConflict: // a read carries no key: no adapter says so
		return s.noAnswer(pol, err, true), false
	case NotFound, Refused:
		s.q.Attempts++
		s.q.LastError, s.q.LastErrorClass = err.Error(), class.StatusName()
		return false, true
	default: // ConfigProblem, Unsupported
		s.configProblem(pol, err)
		return false, false
	}
}

// nonRetryableQuery is the review a query answer that asking again cannot
// change calls for.
func nonRetryableQuery(err error) Observation {
	return Observation{Source: v1alpha1.SourceStatusQuery, Observed: ObservedUnknown, Review: v1alpha1.ReasonNonRetryableQueryError, Reason: err.Error()}
}

func (s schedule) configProblem(pol Policy, err error) {
	s.q.LastError = "provider configuration problem, waiting for it to be fixed: " + err.Error()
	s.q.LastErrorClass = Classify(err).StatusName()
	s.wakeIn(pol.configRetry())
}

// currentStep is the wait of the schedule step the payment is at (the wait
// before its next query), or the last step's past the end.
func currentStep(pol Policy, attempts int32, seed string) time.Duration {
	if d, ok := Delay(pol.Schedule, pol.JitterPercent, attempts, seed); ok {
		return d
	}
	if n := len(pol.Schedule); n > 0 {
		d, _ := Delay(pol.Schedule, pol.JitterPercent, int32(n-1), seed)
		return d
	}
	return time.Minute
}

// createBackoff is the wait after the n-th create in a row that got no
// answer: the first steps of the schedule, capped at its last step. A create
// must eventually go through or be resolved, never be given up on.
func createBackoff(schedule []time.Duration, n int32) time.Duration {
	i := int(n) - 1
	if i >= len(schedule) {
		i = len(schedule) - 1
	}
	if i < 0 || len(schedule) == 0 {
		return time.Second
	}
	return schedule[i]
}
