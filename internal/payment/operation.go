package payment

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

// The money-moving calls on an existing payment (SPEC §11.5): authorize,
// capture and cancel. Each is crash-safe like the create: the operation is
// stored (status.operation) before the call, the call carries a
// deterministic idempotency key, and an operation whose outcome is unknown
// (no answer, or a crash between the marker and the call) is looked up with a
// status query before the call is repeated.

// OperationKey is the idempotency key of an operation on p: the one stored
// with its marker, so a repeated call is replayed by the provider. A marker
// stored without one was written by a paywarden that keyed operations by
// spec.idempotencyKey or the UID: its retry keeps that key.
func OperationKey(p *v1alpha1.Payment, kind v1alpha1.OperationKind) string {
	if op := p.Status.Operation; op != nil && op.Kind == kind {
		if op.IdempotencyKey != "" {
			return op.IdempotencyKey
		}
		return legacyKey(p) + "/" + strings.ToLower(string(kind))
	}
	return newOperationKey(p, kind)
}

// newOperationKey is the key a new operation marker stores: the create's
// key and the operation. An operation asked for after the provider refused
// one (status.operationsRefused), and a capture or authorization after the
// provider sent the payer back to approve again (status.fundingDeclines), is
// a new attempt, not a retry of the refused or declined one, and gets a key
// of its own ("<create key>/capture/2", ...): the provider may answer a key
// it has seen with that key's first answer (the refusal, the decline), or
// another body under it with a key conflict. Within one attempt the key is
// the marker's, so every retry is byte-identical (SPEC §12.1). A create key
// too long to take the suffix within the providers' limits is hashed
// (derivedKey).
func newOperationKey(p *v1alpha1.Payment, kind v1alpha1.OperationKind) string {
	suffix := "/" + strings.ToLower(string(kind))
	n := p.Status.OperationsRefused
	if kind == v1alpha1.OperationCapture || kind == v1alpha1.OperationAuthorize {
		n += p.Status.FundingDeclines
	}
	if n > 0 {
		suffix += "/" + strconv.Itoa(int(n)+1)
	}
	return derivedKey(CreateKey(p), suffix)
}

// fundingDeclined reports whether obs, what the provider says in answer to the
// capture or authorization (kind) of st's approved payment or to the lookup of
// its outcome, is the provider sending the payer back: the payment waits for
// the payer again. PayPal answers a capture or authorization whose funding
// source failed INSTRUMENT_DECLINED, and the payment is restarted so the payer
// can choose another ("Handle funding failures"); the adapter reports the
// order waiting for its payer. Only such an answer may take a payment back to
// Pending: a status query of its own is stale (the approval stands).
func fundingDeclined(st *v1alpha1.PaymentStatus, kind v1alpha1.OperationKind, obs Observation) bool {
	return (kind == v1alpha1.OperationCapture || kind == v1alpha1.OperationAuthorize) &&
		obs.Observed == ObservedPending && st.Phase == v1alpha1.PhaseProcessing && st.PayerApproved
}

// payerMustApproveAgain marks obs as fundingDeclined found it, with the
// provider's reason.
func payerMustApproveAgain(obs Observation, kind v1alpha1.OperationKind, pp provider.Payment) Observation {
	obs.PayerMustApproveAgain = true
	why := "declined the payer's funding source"
	if pp.FailureCode != "" {
		why += " (" + pp.FailureCode + ")"
	}
	obs.Reason = fmt.Sprintf("the provider %s at the %s: waiting for the payer to approve again with another one", why, strings.ToLower(string(kind)))
	return obs
}

// CreateKey is the idempotency key of p's create: the one stored with its
// marker; for a marker stored without one (written by a paywarden that keyed
// creates by spec.idempotencyKey or the UID) that key, so its retry is
// replayed; before any marker, the order's (Payment.IdempotencyKey).
func CreateKey(p *v1alpha1.Payment) string {
	st := &p.Status
	switch {
	case st.IdempotencyKey != "":
		return st.IdempotencyKey
	case st.CreateRequestedAt != nil:
		return legacyKey(p)
	}
	return p.IdempotencyKey()
}

// legacyKey is the key paywarden sent before keys derived from the order.
func legacyKey(p *v1alpha1.Payment) string {
	if p.Spec.IdempotencyKey != "" {
		return p.Spec.IdempotencyKey
	}
	return string(p.UID)
}

// cancelAction applies the cancel annotation once per value.
func cancelAction(p *v1alpha1.Payment, now time.Time) (Outcome, bool) {
	v := p.Annotations[v1alpha1.AnnotationCancel]
	if v == "" || v == p.Status.Actions.Cancel {
		return Outcome{}, false
	}
	c := begin(p, now)
	st := c.st()
	st.Actions.Cancel = v
	switch phase := c.phase(); {
	case phase.TookMoney():
		c.event(true, "CancelRefused", fmt.Sprintf("payment is %s: it took the payer's money, so it cannot be canceled; create a Refund (kind Refund, spec.paymentRef %q) to return it", phase, p.Name))
	case phase.IsFinal():
		c.event(false, "CancelIgnored", fmt.Sprintf("payment is already %s; nothing to cancel", phase))
	case st.Operation != nil && st.Operation.Kind == v1alpha1.OperationCancel:
	case st.Operation != nil:
		c.event(true, "CancelRefused", fmt.Sprintf("a %s is in progress; annotate again once it has ended", st.Operation.Kind))
	case ProviderID(c.p) == "" && st.CreateRequestedAt == nil:
		c.apply(Observation{
			Source: v1alpha1.SourceCancel, Observed: ObservedCanceled,
			Reason: v1alpha1.ReasonCanceledByOperator + ": " + v + " (never sent to the provider)",
		})
	default:
		st.Operation = &v1alpha1.Operation{Kind: v1alpha1.OperationCancel, RequestedAt: metav1.NewTime(now), Reason: v,
			IdempotencyKey: newOperationKey(p, v1alpha1.OperationCancel)}
		c.event(false, "CancelRequested", "cancel requested: "+v)
	}
	return c.done(), true
}

// captureAction applies the capture annotation of a Manual payment once per
// value. Set early, it waits until the payment is Authorized.
func captureAction(p *v1alpha1.Payment, now time.Time) (Outcome, bool) {
	v := p.Annotations[v1alpha1.AnnotationCapture]
	if v == "" || v == p.Status.Actions.Capture {
		return Outcome{}, false
	}
	st := &p.Status
	phase := st.Phase
	// A tracked payment the payer approved is capturable too: nothing
	// authorizes it automatically (ManualCapture), so it never becomes
	// Authorized by itself.
	capturable := phase == v1alpha1.PhaseAuthorized || p.Spec.ProviderPaymentID != "" && st.PayerApproved
	waiting := !phase.IsFinal() && p.Spec.ManualCapture() && (!capturable || st.Operation != nil)
	if waiting {
		return Outcome{}, false
	}
	c := begin(p, now)
	c.st().Actions.Capture = v
	switch {
	case phase.IsFinal():
		c.event(false, "CaptureIgnored", fmt.Sprintf("payment is already %s; nothing to capture", phase))
	case !p.Spec.ManualCapture():
		c.event(false, "CaptureIgnored", "captureMethod is Automatic: the payment is captured as soon as it is authorized")
	default:
		authorized := AuthorizedAmount(c.p)
		amount, err := captureAmount(v, authorized)
		if err != nil {
			c.event(true, "CaptureRefused", err.Error())
			break
		}
		op := &v1alpha1.Operation{Kind: v1alpha1.OperationCapture, RequestedAt: metav1.NewTime(now),
			IdempotencyKey: newOperationKey(p, v1alpha1.OperationCapture)}
		if amount.Value != authorized.Value {
			op.Amount = &amount
		}
		c.st().Operation = op
		c.st().AmountToCapture = &amount
		c.event(false, "CaptureRequested", "capture of "+v1alpha1.FormatAmount(amount.Value, amount.Currency)+" requested")
	}
	return c.done(), true
}

// AuthorizedAmount is what the authorization reserved (the amount asked for
// when the provider did not say).
func AuthorizedAmount(p *v1alpha1.Payment) v1alpha1.Money {
	if a := p.Status.AmountAuthorized; a != nil {
		return *a
	}
	return v1alpha1.Money{Value: p.Spec.Amount.Value, Currency: p.Spec.Amount.Currency}
}

// captureAmount reads the capture annotation (SPEC §12.3): "all", or a
// positive integer of minor units up to the authorized amount. Anything else
// ("6.00", "600 USD", "1e2", ...) is refused: reading it as "all" would take
// more of the payer's money than the merchant meant.
func captureAmount(v string, authorized v1alpha1.Money) (v1alpha1.Money, error) {
	v = strings.TrimSpace(v)
	if v == CaptureAll {
		return authorized, nil
	}
	limit := fmt.Sprintf("the authorized %s (%d)", v1alpha1.FormatAmount(authorized.Value, authorized.Currency), authorized.Value)
	accepted := fmt.Sprintf(`the annotation %s takes "all" or a whole number of minor units from 1 to %s; nothing was sent to the provider`, v1alpha1.AnnotationCapture, limit)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || !onlyDigits(v) {
		return v1alpha1.Money{}, fmt.Errorf("capture %q refused: %s", v, accepted)
	}
	if n <= 0 || n > authorized.Value {
		return v1alpha1.Money{}, fmt.Errorf("capture of %d minor units refused: %s", n, accepted)
	}
	return v1alpha1.Money{Value: n, Currency: authorized.Currency}, nil
}

// CaptureAll is the capture annotation's value that captures the whole
// authorized amount.
const CaptureAll = "all"

// onlyDigits: ASCII digits and nothing else (no sign, no separators).
func onlyDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// planOperation decides an authorize, capture or cancel call for a payment
// the provider knows; ok is false when none applies.
func planOperation(p *v1alpha1.Payment, pol Policy, facts Facts, now time.Time) (Step, bool) {
	st := &p.Status
	op := st.Operation
	if op == nil {
		kind, ok := automaticOperation(p, pol)
		if !ok {
			return Step{}, false
		}
		c := begin(p, now)
		c.st().Operation = &v1alpha1.Operation{Kind: kind, RequestedAt: metav1.NewTime(now), IdempotencyKey: newOperationKey(p, kind)}
		if kind == v1alpha1.OperationCapture {
			amount := AuthorizedAmount(p)
			c.st().AmountToCapture = &amount
		}
		return Step{Action: Write, Outcome: c.done(), Why: "automatic " + strings.ToLower(string(kind))}, true
	}
	if r := op.RetryAt; r != nil && now.Before(r.Time) && !configFixed(st, facts) {
		return Step{Action: Wait, At: r.Time, Why: string(op.Kind) + " retry not due"}, true
	}
	if facts.FreshOperation {
		// Marked by this process, and no call since: nothing can have gone
		// out, so there is nothing to look up.
		return Step{Action: callFor(op.Kind), Why: strings.ToLower(string(op.Kind)) + " with the operation's idempotency key"}, true
	}
	// A call may have gone out after the marker (a crash, a lost answer):
	// look its outcome up first. The lookup counts only when it was asked
	// after the call may have gone out: the marker's time is stored to the
	// second, so only a query in a later second is surely after it, and it
	// must follow the last attempt too. A lookup due within the marker's own
	// second waits for the next one. And it must have been answered: a query
	// that got none (a timeout, a 500) moves query.lastTime too, and says
	// nothing about the call (an answer clears query.lastError).
	since := op.RequestedAt.Time.Truncate(time.Second).Add(time.Second)
	if a := op.LastAttemptAt; a != nil && a.Time.After(since) {
		since = a.Time
	}
	if last := st.Query.LastTime; last == nil || last.Time.Before(since) || st.Query.LastError != "" {
		if now.Before(since) {
			return Step{Action: Wait, At: since, Why: "the " + strings.ToLower(string(op.Kind)) + "'s lookup must come after its marker's second"}, true
		}
		return Step{Action: Query, Why: "look up the outcome of the " + strings.ToLower(string(op.Kind)) + " before repeating it"}, true
	}
	// Looked up, and not done (the lookup would have ended it): mark again
	// before the call, so that a crash after it is looked up again too.
	c := begin(p, now)
	c.st().Operation.RequestedAt = metav1.NewTime(now)
	c.st().Operation.RetryAt = nil
	return Step{Action: Write, Outcome: c.done(), Why: "looked up: " + strings.ToLower(string(op.Kind)) + " marked again before it is repeated"}, true
}

// automaticOperation is the call the payment's state asks for without an
// operator: the capture of an approved or authorized payment (Automatic),
// the authorization of an approved one (Manual, at providers with that step).
func automaticOperation(p *v1alpha1.Payment, pol Policy) (v1alpha1.OperationKind, bool) {
	st := &p.Status
	if st.Phase.IsFinal() || parked(st) {
		return "", false
	}
	switch {
	case !p.Spec.ManualCapture() && (st.Phase == v1alpha1.PhaseAuthorized || st.PayerApproved):
		return v1alpha1.OperationCapture, true
	case p.Spec.CaptureMethod == v1alpha1.CaptureManual && st.PayerApproved && st.Phase != v1alpha1.PhaseAuthorized && pol.Lifecycle.AuthorizeStep:
		return v1alpha1.OperationAuthorize, true
	}
	return "", false
}

func callFor(kind v1alpha1.OperationKind) Action {
	switch kind {
	case v1alpha1.OperationAuthorize:
		return CallAuthorize
	case v1alpha1.OperationCapture:
		return CallCapture
	}
	return CallCancel
}

// OperationOf is the operation kind a call action performs.
func OperationOf(a Action) v1alpha1.OperationKind {
	switch a {
	case CallAuthorize:
		return v1alpha1.OperationAuthorize
	case CallCapture:
		return v1alpha1.OperationCapture
	case CallCancel:
		return v1alpha1.OperationCancel
	}
	return ""
}

// AfterOperation decides what an authorize, capture or cancel call means.
// An answer is applied and ends the operation; no answer keeps it, to be
// looked up and repeated with the same key; a refusal ends it and says so
// (an automatic capture the provider refuses needs a human).
func AfterOperation(p *v1alpha1.Payment, pol Policy, kind v1alpha1.OperationKind, call Call, now time.Time) Outcome {
	c := begin(p, now)
	st := c.st()
	op := st.Operation
	source := map[v1alpha1.OperationKind]v1alpha1.ObservationSource{
		v1alpha1.OperationAuthorize: v1alpha1.SourceAuthorize,
		v1alpha1.OperationCapture:   v1alpha1.SourceCapture,
		v1alpha1.OperationCancel:    v1alpha1.SourceCancel,
	}[kind]
	if op == nil || op.Kind != kind {
		// Ended meanwhile (a webhook, an operator's resolve, another
		// writer). An answer that the provider took the money is still
		// applied: a repeat of what ended it is a duplicate, and a payment
		// resolved Failed or Canceled meanwhile gets a conflict for a
		// human (SPEC §2.1), never the money dropped silently. Other
		// answers say nothing the operation's end did not decide.
		if Classify(call.Err) == Answered {
			for _, obs := range FromPayment(call.Payment, source) {
				if obs.Observed == ObservedSucceeded {
					c.apply(obs)
				}
			}
		}
		return c.done()
	}
	if orderExpired(c.p, pol, call.Err, now) {
		// The provider deleted the order nobody completed: nothing was
		// captured or authorized, and nothing is left to cancel.
		st.Operation, st.AmountToCapture = nil, nil
		c.sched().answered()
		c.apply(orderExpiredObservation(c.p, pol, source, call.Err))
		return c.done()
	}
	closeOut := isCloseOut(op)
	switch class := Classify(call.Err); class {
	case Answered:
		back := false
		unpaid := false
		for _, obs := range FromPayment(call.Payment, source) {
			unpaid = unpaid || obs.Observed == ObservedPending
			if fundingDeclined(st, kind, obs) {
				obs = payerMustApproveAgain(obs, kind, call.Payment)
				back = c.apply(obs).Decision == Applied
				continue
			}
			c.apply(obs)
		}
		if closeOut && unpaid && !st.Phase.IsFinal() && !parked(st) {
			// Answered, and still unpaid and open: closed out locally.
			// (Any other answer — processing, authorized, paid — stands.)
			c.apply(Observation{Source: source, Observed: ObservedPending, PastExpiry: true})
		}
		st.Operation = nil
		c.sched().answered()
		switch {
		case back:
			c.sched().start(pol) // waiting for the payer again
		case !st.Phase.IsFinal() && !parked(st):
			c.wakeIn(firstStep(pol, string(c.p.UID)))
		}
	case NoAnswer, ConfigProblem, KeyConflict:
		// Unknown outcome (or refused configuration, or a first request
		// under the key that may have done it): looked up with a status
		// query, then repeated with the same key, on the operation's own
		// backoff.
		op.LastAttemptAt = ptrMicro(now)
		op.Attempts++
		wait := createBackoff(pol.Schedule, op.Attempts)
		if class == ConfigProblem {
			wait = pol.configRetry()
		}
		if ra, ok := provider.RetryAfter(call.Err); ok && ra > wait {
			wait = ra
		}
		op.RetryAt = ptrMicro(now.Add(max(wait, MinWait)))
		st.Query.LastError, st.Query.LastErrorClass = call.Err.Error(), class.StatusName()
	default:
		st.Operation = nil
		st.AmountToCapture = nil
		// The next operation is a new attempt, with a key of its own.
		st.OperationsRefused++
		st.Query.LastError, st.Query.LastErrorClass = call.Err.Error(), class.StatusName()
		if closeOut {
			// The provider would not close it (a payment that moved on
			// meanwhile is refused too): never closed out blind. A fresh
			// status query decides: still unpaid, it is closed out locally
			// (CloseOutRefused: not asked again); anything else stands.
			st.CloseOutRefused = true
			c.event(false, "CloseOutRefused", fmt.Sprintf("the provider would not close the unpaid payment: %v; a fresh status query decides", call.Err))
			c.wakeIn(MinWait)
			break
		}
		manual := kind == v1alpha1.OperationCancel || c.p.Spec.ManualCapture() && kind == v1alpha1.OperationCapture
		if manual {
			c.event(true, string(kind)+"Refused", fmt.Sprintf("the provider refused the %s: %v", strings.ToLower(string(kind)), call.Err))
			if !st.Phase.IsFinal() && !parked(st) {
				c.wakeIn(MinWait) // the provider's view decides what comes next
			}
			break
		}
		c.apply(Observation{
			Source: source, Observed: ObservedUnknown, Review: v1alpha1.ReasonCaptureRefused,
			Reason: fmt.Sprintf("the provider refused the automatic %s of the approved payment: %v", strings.ToLower(string(kind)), call.Err),
		})
		c.park()
	}
	return c.done()
}

// operationDone reports whether the payment shows the operation's effect.
func operationDone(st *v1alpha1.PaymentStatus, kind v1alpha1.OperationKind) bool {
	switch {
	case st.Phase.IsFinal():
		return true
	case kind == v1alpha1.OperationAuthorize:
		return st.Phase == v1alpha1.PhaseAuthorized
	case kind == v1alpha1.OperationCapture:
		// Processing is the capture under way, unless the payer's approval
		// is still what the provider reports: an approved payment is
		// Processing before any capture.
		return st.Phase == v1alpha1.PhaseProcessing && st.AmountToCapture != nil && !st.PayerApproved
	}
	return false
}

func firstStep(pol Policy, seed string) time.Duration {
	d, ok := Delay(pol.Schedule, pol.JitterPercent, 0, seed)
	if !ok {
		return time.Minute
	}
	return d
}

func lastStep(pol Policy, seed string) time.Duration {
	if n := len(pol.Schedule); n > 0 {
		d, _ := Delay(pol.Schedule, pol.JitterPercent, int32(n-1), seed)
		return d
	}
	return time.Hour
}
