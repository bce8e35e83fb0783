package paysim

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v84"

	stripeadapter "github.com/paywarden/paywarden/internal/provider/stripe"
)

// Stripe is the provider name and URL prefix of paysim's Stripe mode: Checkout
// Sessions, PaymentIntents (off-session confirmation, manual capture, cancel),
// refunds, disputes, the Search API, the events API and Stripe-Signature webhooks.
// Objects are rendered with stripe-go's types, so paysim writes the JSON the SDK
// reads.
const Stripe = "stripe"

// stripeAuthorizationLifetime is how long a card authorization can be captured
// (Stripe: 7 days for most cards); after it Stripe cancels the PaymentIntent with
// cancellation_reason "automatic".
const stripeAuthorizationLifetime = 7 * 24 * time.Hour

// StripeEventRetention is how far back GET /v1/events reaches: "List events, going
// back up to 30 days" (Stripe API reference, Events, "List all events"). Older events
// are not listed, and a page cursor naming one is "No such event".
const StripeEventRetention = 30 * 24 * time.Hour

// stripeRetrySchedule: Stripe retries a failed webhook delivery "for up to three days
// with an exponential back off" and does not publish the intervals; these are close
// to what it does.
var stripeRetrySchedule = []time.Duration{
	0, time.Minute, 5 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour,
	8 * time.Hour, 12 * time.Hour, 12 * time.Hour, 12 * time.Hour, 20 * time.Hour,
}

// StripeCounters counts what only the Stripe mode does. The shared Counters count
// its creates per key ("stripe/<key>"), payments created (sessions and server-side
// PaymentIntents: the intent Checkout makes for a session is the same payment),
// queries, searches, event list calls, rejected credentials, faults and webhooks,
// and, per PaymentIntent as for the other providers, its captures, merchant cancels
// and refunds (CapturesByPayment, VoidsByPayment, RefundsByPayment) and its other
// POSTs with their idempotency keys (ActionRequests, ActionsByKey).
type StripeCounters struct {
	SessionsCreated int `json:"sessionsCreated"`
	// IntentsCreated counts every PaymentIntent, those Checkout made included.
	IntentsCreated int `json:"intentsCreated"`
	// Replays counts answers replayed for an idempotency key; ReplayedErrors those
	// that replayed a stored error (a 500, a 402 decline).
	Replays        int `json:"replays"`
	ReplayedErrors int `json:"replayedErrors"`
	// IdempotencyErrors counts a key reused with other parameters (400) or while its
	// first request was still running (409).
	IdempotencyErrors int `json:"idempotencyErrors"`
	Captures          int `json:"captures"`
	Cancels           int `json:"cancels"`
	SessionsExpired   int `json:"sessionsExpired"`
	RefundsCreated    int `json:"refundsCreated"`
	Declines          int `json:"declines"`
}

// stripeState is the Stripe mode's store; guarded by Sim.mu.
type stripeState struct {
	sessions  map[string]*stripeSession
	intents   map[string]*stripeIntent
	refunds   map[string]*stripeRefund
	inFlight  map[string]bool // idempotency keys whose first request is running
	searchLag time.Duration
	counters  StripeCounters
}

func newStripeState() *stripeState {
	return &stripeState{
		sessions: map[string]*stripeSession{}, intents: map[string]*stripeIntent{},
		refunds: map[string]*stripeRefund{}, inFlight: map[string]bool{},
	}
}

// stripeSession is a Checkout Session. Amounts are in Stripe's units.
type stripeSession struct {
	id, ref, url                string
	status                      stripego.CheckoutSessionStatus
	paymentStatus               stripego.CheckoutSessionPaymentStatus
	amount                      int64
	currency                    string // lower case, as Stripe writes it
	metadata, intentMetadata    map[string]string
	intentDescription, customer string
	captureMethod               stripego.PaymentIntentCaptureMethod
	successURL, cancelURL       string
	expiresAt, created          time.Time
	intent                      string // the PaymentIntent, once the payer tried to pay
	script                      Script
	gen                         int
}

// stripeIntent is a PaymentIntent with its latest charge.
type stripeIntent struct {
	id                               string
	amount, capturable, received     int64
	currency                         string
	captureMethod                    stripego.PaymentIntentCaptureMethod
	status                           stripego.PaymentIntentStatus
	cancellationReason               stripego.PaymentIntentCancellationReason
	canceledAt, created              time.Time
	lastError                        *stripego.Error
	customer, paymentMethod, descr   string
	metadata                         map[string]string
	session                          string // the Checkout Session it belongs to
	nextActionURL                    string
	charge                           *stripeCharge
	refunds                          []string
	script                           Script
	gen                              int
	disputed                         bool
	dispute                          *stripego.Dispute // the open or last dispute
	requestID, requestIdempotencyKey string
}

// stripeCharge is the latest charge of an intent.
type stripeCharge struct {
	id                         string
	amount, captured, refunded int64
	status                     stripego.ChargeStatus
	captureBefore, created     time.Time
	failureCode, failureMsg    string
}

// stripeRefund is a refund of an intent's charge.
type stripeRefund struct {
	id, intent, charge string
	amount             int64
	currency           string
	status             stripego.RefundStatus
	reason             stripego.RefundReason
	failureReason      stripego.RefundFailureReason
	metadata           map[string]string
	created            time.Time
}

// --- Go API ---------------------------------------------------------------

// StripeCounters returns a snapshot of the Stripe mode's own counters.
func (s *Sim) StripeCounters() StripeCounters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stripe.counters
}

// SetStripeSearchLag makes the Search API miss PaymentIntents younger than d
// (simulated time), as Stripe's search index lags behind writes. Zero (the default)
// finds everything at once.
func (s *Sim) SetStripeSearchLag(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stripe.searchLag = d
}

// Payer actions on a Checkout Session, for StripePayer.
const (
	PayerPays     = "pays"     // pays (card; manual capture leaves it authorized)
	PayerFails    = "fails"    // the attempt is declined; the session stays open for another try
	PayerAbandons = "abandons" // walks away: the session expires now
)

// StripePayer makes the payer of an open Checkout Session act now: pay, fail with a
// decline code (default generic_decline), or abandon the page.
func (s *Sim) StripePayer(sessionID, action, declineCode string) error {
	var sc Script
	switch action {
	case PayerPays:
		sc = Script{Outcome: OutcomeSucceed}
	case PayerFails:
		sc = Script{Outcome: OutcomeFail, FailureCode: declineCode}
	case PayerAbandons:
		sc = Script{Outcome: OutcomeExpire}
	default:
		return fmt.Errorf("paysim: unknown payer action %q (pays, fails, abandons)", action)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, ok := s.stripe.sessions[sessionID]
	if !ok {
		return fmt.Errorf("paysim: no stripe checkout session %q", sessionID)
	}
	if cs.status != stripego.CheckoutSessionStatusOpen {
		return fmt.Errorf("paysim: checkout session %s is %s", sessionID, cs.status)
	}
	s.stripeSessionActLocked(cs, sc)
	return nil
}

// StripeFailRefund makes a refund fail (the money goes back to the merchant's
// balance), with failure_reason reason (default "unknown").
func (s *Sim) StripeFailRefund(refundID, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rf, ok := s.stripe.refunds[refundID]
	if !ok {
		return fmt.Errorf("paysim: no stripe refund %q", refundID)
	}
	if rf.status == stripego.RefundStatusFailed {
		return nil
	}
	if reason == "" {
		reason = string(stripego.RefundFailureReasonUnknown)
	}
	rf.status, rf.failureReason = stripego.RefundStatusFailed, stripego.RefundFailureReason(reason)
	if pi := s.stripe.intents[rf.intent]; pi != nil && pi.charge != nil {
		pi.charge.refunded -= rf.amount
		s.stripeMirrorLocked(pi)
	}
	s.stripeEmitLocked(stripego.EventTypeRefundUpdated, rf.intent, s.stripeRefundJSON(rf))
	s.stripeEmitLocked(stripego.EventTypeRefundFailed, rf.intent, s.stripeRefundJSON(rf))
	return nil
}

// stripeSetOutcome re-scripts a session or an intent (SetOutcome for Stripe).
func (s *Sim) stripeSetOutcome(id string, sc Script) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs, ok := s.stripe.sessions[id]; ok {
		if cs.intent == "" || cs.status == stripego.CheckoutSessionStatusOpen && sc.Outcome == OutcomeExpire {
			s.stripeScheduleSessionLocked(cs, sc)
			return nil
		}
		id = cs.intent
	}
	pi, ok := s.stripe.intents[id]
	if !ok {
		return fmt.Errorf("paysim: no stripe payment %q", id)
	}
	s.stripeScheduleIntentLocked(pi, sc)
	return nil
}

// stripeRefund refunds amount of an intent (0: the rest) as from the Dashboard.
func (s *Sim) stripeRefund(id string, amount int64) error {
	return s.withStripeIntent(id, func(pi *stripeIntent) error {
		_, err := s.stripeRefundLocked(pi, amount, "", nil)
		return err
	})
}

// stripeDispute opens a dispute on an intent's charge.
func (s *Sim) stripeDispute(id, reason string) error {
	return s.withStripeIntent(id, func(pi *stripeIntent) error {
		if pi.charge == nil || pi.charge.captured == 0 {
			return fmt.Errorf("paysim: payment %s has no captured charge to dispute", pi.id)
		}
		if reason == "" {
			reason = string(stripego.DisputeReasonFraudulent)
		}
		pi.disputed = true
		d := stripego.Dispute{
			ID: s.newID("dp_", 24, alphaNum), Object: "dispute", Amount: pi.charge.captured, Currency: stripego.Currency(pi.currency),
			Charge: &stripego.Charge{ID: pi.charge.id}, PaymentIntent: &stripego.PaymentIntent{ID: pi.id},
			Reason: stripego.DisputeReason(reason), Status: stripego.DisputeStatusNeedsResponse, Created: s.now().Unix(),
			Metadata: map[string]string{},
		}
		pi.dispute = &d
		s.stripeEmitLocked(stripego.EventTypeChargeDisputeCreated, pi.id, renderJSON(d, nil))
		// Stripe, "Disputes > How disputes work": the disputed amount (and fee)
		// is withdrawn from the balance when the dispute is opened.
		s.stripeEmitLocked(stripego.EventTypeChargeDisputeFundsWithdrawn, pi.id, renderJSON(d, nil))
		return nil
	})
}

// StripeCloseDispute ends the open dispute of a payment (an intent or its
// session) as won or lost. Stripe ("Disputes > Dispute outcomes";
// API reference, Disputes, status): a won dispute reinstates the funds
// (charge.dispute.funds_reinstated) and closes with status won; a lost one
// closes with status lost and the funds stay withdrawn.
func (s *Sim) StripeCloseDispute(id string, won bool) error {
	return s.withStripeIntent(id, func(pi *stripeIntent) error {
		d := pi.dispute
		if d == nil || d.Status == stripego.DisputeStatusWon || d.Status == stripego.DisputeStatusLost {
			return fmt.Errorf("paysim: payment %s has no open dispute", pi.id)
		}
		d.Status = stripego.DisputeStatusLost
		if won {
			d.Status = stripego.DisputeStatusWon
			s.stripeEmitLocked(stripego.EventTypeChargeDisputeFundsReinstated, pi.id, renderJSON(*d, nil))
		}
		s.stripeEmitLocked(stripego.EventTypeChargeDisputeClosed, pi.id, renderJSON(*d, nil))
		return nil
	})
}

// withStripeIntent runs do, under s.mu, on the intent id names (an intent, or
// the session that has it).
func (s *Sim) withStripeIntent(id string, do func(pi *stripeIntent) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs, ok := s.stripe.sessions[id]; ok {
		id = cs.intent
	}
	pi, ok := s.stripe.intents[id]
	if !ok {
		return fmt.Errorf("paysim: no stripe payment intent for %q", id)
	}
	return do(pi)
}

// --- lifecycle --------------------------------------------------------------

// stripeNewSessionLocked stores a Checkout Session, schedules its natural expiry and
// its script (what the payer will do).
func (s *Sim) stripeNewSessionLocked(cs *stripeSession, host string) {
	cs.id = s.newID("cs_test_", 58, alphaNum)
	cs.url = "http://" + host + "/" + Stripe + "/checkout/" + cs.id
	cs.status, cs.paymentStatus = stripego.CheckoutSessionStatusOpen, stripego.CheckoutSessionPaymentStatusUnpaid
	s.stripe.sessions[cs.id] = cs
	s.stripe.counters.SessionsCreated++
	s.counters.PaymentsCreated++
	s.counters.PaymentsCreatedByProvider[Stripe]++
	s.payments[Stripe][cs.id] = &payment{provider: Stripe, id: cs.id, ref: cs.ref, amount: cs.amount, currency: strings.ToUpper(cs.currency),
		metadata: cs.metadata, state: state("open"), created: cs.created, updated: cs.created}
	// The natural expiry: a simulated delay like every other, scaled by TimeFactor.
	s.afterLocked(cs.expiresAt.Sub(cs.created), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.stripeExpireSessionLocked(cs, stripego.PaymentIntentCancellationReasonExpired)
	})
	s.stripeScheduleSessionLocked(cs, s.scriptFor(&payment{provider: Stripe, ref: cs.ref, amount: cs.amount, currency: strings.ToUpper(cs.currency), metadata: cs.metadata}))
}

// stripeScheduleSessionLocked makes the payer act after sc.After.
func (s *Sim) stripeScheduleSessionLocked(cs *stripeSession, sc Script) {
	cs.script = sc
	s.stripeAfterLocked(&cs.gen, sc, func() {
		if cs.status == stripego.CheckoutSessionStatusOpen {
			s.stripeSessionActLocked(cs, sc)
		}
	})
}

// stripeSessionActLocked is the payer acting on an open session now.
func (s *Sim) stripeSessionActLocked(cs *stripeSession, sc Script) {
	if sc.Outcome == OutcomeExpire {
		s.stripeExpireSessionLocked(cs, stripego.PaymentIntentCancellationReasonExpired)
		return
	}
	pi := s.stripe.intents[cs.intent]
	if pi == nil {
		pi = &stripeIntent{
			amount: cs.amount, currency: cs.currency, captureMethod: cs.captureMethod,
			status: stripego.PaymentIntentStatusRequiresPaymentMethod, metadata: cs.intentMetadata,
			descr: cs.intentDescription, customer: cs.customer, session: cs.id, created: s.now(),
		}
		s.stripeNewIntentLocked(pi)
		cs.intent = pi.id
		if p := s.payments[Stripe][cs.id]; p != nil {
			p.updated = s.now()
		}
	}
	pi.paymentMethod = "pm_" + s.newID("", 24, alphaNum)
	s.stripeConfirmLocked(pi, sc)
}

// stripeExpireSessionLocked expires an open session; its PaymentIntent, if the payer
// tried, is canceled.
func (s *Sim) stripeExpireSessionLocked(cs *stripeSession, reason stripego.PaymentIntentCancellationReason) {
	if cs.status != stripego.CheckoutSessionStatusOpen {
		return
	}
	cs.status = stripego.CheckoutSessionStatusExpired
	cs.gen++
	s.stripe.counters.SessionsExpired++
	if p := s.payments[Stripe][cs.id]; p != nil {
		p.state, p.updated = state("expired"), s.now()
	}
	if pi := s.stripe.intents[cs.intent]; pi != nil && stripeCancelable(pi.status) {
		s.stripeCancelLocked(pi, reason)
	}
	s.stripeEmitLocked(stripego.EventTypeCheckoutSessionExpired, s.stripeSessionPaymentID(cs), s.stripeSessionJSON(cs, nil))
}

// stripeNewIntentLocked stores a new PaymentIntent.
func (s *Sim) stripeNewIntentLocked(pi *stripeIntent) {
	pi.id = s.newID("pi_", 24, alphaNum)
	if pi.metadata == nil {
		pi.metadata = map[string]string{}
	}
	s.stripe.intents[pi.id] = pi
	s.stripe.counters.IntentsCreated++
	s.payments[Stripe][pi.id] = &payment{provider: Stripe, id: pi.id, ref: pi.metadata[stripeadapter.MetadataMerchantReference],
		amount: pi.amount, currency: strings.ToUpper(pi.currency), metadata: pi.metadata, created: pi.created}
	s.stripeMirrorLocked(pi)
}

// stripeScheduleIntentLocked applies sc to an intent after sc.After.
func (s *Sim) stripeScheduleIntentLocked(pi *stripeIntent, sc Script) {
	pi.script = sc
	s.stripeAfterLocked(&pi.gen, sc, func() { s.stripeApplyLocked(pi, sc) })
}

// stripeAfterLocked starts a new generation of a session's or an intent's
// script (gen) and runs act, under s.mu, after sc.After: unless sc leaves the
// object as it is (pending, unknown), a newer script replaced it by then, or
// the Sim closed.
func (s *Sim) stripeAfterLocked(gen *int, sc Script, act func()) {
	*gen++
	mine := *gen
	if sc.Outcome == OutcomePending || sc.Outcome == OutcomeUnknown {
		return
	}
	s.afterLocked(sc.After, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if *gen != mine || s.closed {
			return
		}
		act()
	})
}

// stripeConfirmLocked is a confirmation (the payer on Checkout or the front end, or
// the merchant off-session): with no delay the outcome is immediate (a card), with a
// delay the intent is processing until it applies (a slower method).
func (s *Sim) stripeConfirmLocked(pi *stripeIntent, sc Script) {
	if sc.After > 0 && sc.Outcome != OutcomePending && sc.Outcome != OutcomeUnknown && sc.Outcome != OutcomeExpire {
		s.stripeApplyLocked(pi, Script{Outcome: OutcomeProcessing})
		s.stripeScheduleIntentLocked(pi, sc)
		return
	}
	s.stripeApplyLocked(pi, sc)
}

// stripeApplyLocked moves an intent (and its session) to the outcome of sc now, with
// the events Stripe sends.
func (s *Sim) stripeApplyLocked(pi *stripeIntent, sc Script) {
	cs := s.stripe.sessions[pi.session]
	now := s.now()
	wasProcessing := pi.status == stripego.PaymentIntentStatusProcessing
	switch sc.Outcome {
	case OutcomeSucceed, OutcomeMismatch:
		if !stripeConfirmable(pi.status) && pi.status != stripego.PaymentIntentStatusProcessing {
			return
		}
		amount := pi.amount
		if sc.Outcome == OutcomeMismatch {
			amount = sc.Amount
			if amount == 0 || amount == pi.amount {
				amount = max(pi.amount-1, 1)
			}
		}
		pi.lastError, pi.nextActionURL = nil, ""
		pi.charge = &stripeCharge{id: "ch_" + s.newID("", 24, alphaNum), amount: amount, status: stripego.ChargeStatusSucceeded, created: now}
		if pi.captureMethod == stripego.PaymentIntentCaptureMethodManual {
			pi.status, pi.capturable = stripego.PaymentIntentStatusRequiresCapture, amount
			pi.charge.captureBefore = now.Add(stripeAuthorizationLifetime)
			s.stripeMirrorLocked(pi)
			s.stripeEmitLocked(stripego.EventTypePaymentIntentAmountCapturableUpdated, pi.id, s.stripeIntentJSON(pi, nil))
			gen := pi.gen
			s.afterLocked(stripeAuthorizationLifetime, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if pi.gen == gen && pi.status == stripego.PaymentIntentStatusRequiresCapture {
					s.stripeCancelLocked(pi, stripego.PaymentIntentCancellationReasonAutomatic)
				}
			})
		} else {
			pi.status, pi.received, pi.charge.captured = stripego.PaymentIntentStatusSucceeded, amount, amount
			s.stripeMirrorLocked(pi)
			s.stripeEmitLocked(stripego.EventTypePaymentIntentSucceeded, pi.id, s.stripeIntentJSON(pi, nil))
		}
		if cs != nil {
			s.stripeCompleteSessionLocked(cs, pi, wasProcessing)
		}
	case OutcomeFail:
		if !stripeConfirmable(pi.status) && pi.status != stripego.PaymentIntentStatusProcessing {
			return
		}
		code := sc.FailureCode
		if code == "" {
			code = string(stripego.DeclineCodeGenericDecline)
		}
		s.stripe.counters.Declines++
		pi.lastError = &stripego.Error{
			Type: stripego.ErrorTypeCard, Code: stripego.ErrorCodeCardDeclined, DeclineCode: stripego.DeclineCode(code),
			Msg: "Your card was declined.", DocURL: "https://docs.stripe.com/error-codes/card-declined",
		}
		pi.charge = &stripeCharge{
			id: "ch_" + s.newID("", 24, alphaNum), amount: pi.amount, status: stripego.ChargeStatusFailed, created: now,
			failureCode: string(stripego.ErrorCodeCardDeclined), failureMsg: "Your card was declined.",
		}
		pi.status, pi.nextActionURL = stripego.PaymentIntentStatusRequiresPaymentMethod, ""
		s.stripeMirrorLocked(pi)
		s.stripeEmitLocked(stripego.EventTypePaymentIntentPaymentFailed, pi.id, s.stripeIntentJSON(pi, nil))
		if cs != nil && cs.status == stripego.CheckoutSessionStatusComplete && wasProcessing {
			// An async method failed after the session completed: the session is over.
			s.stripeEmitLocked(stripego.EventTypeCheckoutSessionAsyncPaymentFailed, pi.id, s.stripeSessionJSON(cs, nil))
		}
	case OutcomeProcessing:
		if !stripeConfirmable(pi.status) {
			return
		}
		pi.lastError, pi.nextActionURL = nil, ""
		pi.status = stripego.PaymentIntentStatusProcessing
		pi.charge = &stripeCharge{id: "ch_" + s.newID("", 24, alphaNum), amount: pi.amount, status: stripego.ChargeStatusPending, created: now}
		s.stripeMirrorLocked(pi)
		s.stripeEmitLocked(stripego.EventTypePaymentIntentProcessing, pi.id, s.stripeIntentJSON(pi, nil))
		if cs != nil && cs.status == stripego.CheckoutSessionStatusOpen {
			cs.status, cs.paymentStatus = stripego.CheckoutSessionStatusComplete, stripego.CheckoutSessionPaymentStatusUnpaid
			cs.gen++
			s.stripeMirrorSessionLocked(cs)
			s.stripeEmitLocked(stripego.EventTypeCheckoutSessionCompleted, pi.id, s.stripeSessionJSON(cs, nil))
		}
	case OutcomeExpire:
		switch {
		case pi.status == stripego.PaymentIntentStatusRequiresCapture:
			s.stripeCancelLocked(pi, stripego.PaymentIntentCancellationReasonAutomatic)
		case cs != nil && cs.status == stripego.CheckoutSessionStatusOpen:
			s.stripeExpireSessionLocked(cs, stripego.PaymentIntentCancellationReasonExpired)
		case stripeCancelable(pi.status):
			s.stripeCancelLocked(pi, stripego.PaymentIntentCancellationReasonExpired)
		}
	case OutcomePending:
		if stripeConfirmable(pi.status) {
			// Needs the payer: 3-D Secure on the issuer's page.
			pi.status = stripego.PaymentIntentStatusRequiresAction
			pi.nextActionURL = "https://paysim.invalid/stripe/3ds/" + pi.id
			s.stripeMirrorLocked(pi)
			s.stripeEmitLocked(stripego.EventTypePaymentIntentRequiresAction, pi.id, s.stripeIntentJSON(pi, nil))
		}
	}
}

// stripeCompleteSessionLocked completes a session whose payment went through (or was
// authorized); after an async payment it says so with its own event.
func (s *Sim) stripeCompleteSessionLocked(cs *stripeSession, pi *stripeIntent, wasProcessing bool) {
	paid := pi.status == stripego.PaymentIntentStatusSucceeded
	if cs.status == stripego.CheckoutSessionStatusComplete {
		if paid && wasProcessing {
			cs.paymentStatus = stripego.CheckoutSessionPaymentStatusPaid
			s.stripeMirrorSessionLocked(cs)
			s.stripeEmitLocked(stripego.EventTypeCheckoutSessionAsyncPaymentSucceeded, pi.id, s.stripeSessionJSON(cs, nil))
		}
		return
	}
	if cs.status != stripego.CheckoutSessionStatusOpen {
		return
	}
	cs.status, cs.paymentStatus = stripego.CheckoutSessionStatusComplete, stripego.CheckoutSessionPaymentStatusUnpaid
	if paid {
		cs.paymentStatus = stripego.CheckoutSessionPaymentStatusPaid
	}
	cs.gen++
	s.stripeMirrorSessionLocked(cs)
	s.stripeEmitLocked(stripego.EventTypeCheckoutSessionCompleted, pi.id, s.stripeSessionJSON(cs, nil))
}

// stripeCancelLocked cancels an intent (voiding its authorization).
func (s *Sim) stripeCancelLocked(pi *stripeIntent, reason stripego.PaymentIntentCancellationReason) {
	pi.status, pi.cancellationReason, pi.canceledAt = stripego.PaymentIntentStatusCanceled, reason, s.now()
	pi.capturable, pi.nextActionURL = 0, ""
	pi.gen++
	s.stripeMirrorLocked(pi)
	s.stripeEmitLocked(stripego.EventTypePaymentIntentCanceled, pi.id, s.stripeIntentJSON(pi, nil))
}

// stripeCaptureLocked captures amount (0: all) of an authorized intent.
func (s *Sim) stripeCaptureLocked(pi *stripeIntent, amount int64) {
	if amount <= 0 {
		amount = pi.capturable
	}
	pi.status, pi.received, pi.capturable = stripego.PaymentIntentStatusSucceeded, amount, 0
	pi.charge.captured = amount
	pi.gen++
	s.stripe.counters.Captures++
	s.counters.CapturesByPayment[pi.id]++
	s.stripeMirrorLocked(pi)
	s.stripeEmitLocked(stripego.EventTypePaymentIntentSucceeded, pi.id, s.stripeIntentJSON(pi, nil))
}

// stripeRefundLocked refunds amount (0: the rest) of a captured intent.
func (s *Sim) stripeRefundLocked(pi *stripeIntent, amount int64, reason stripego.RefundReason, metadata map[string]string) (*stripeRefund, error) {
	if pi.status != stripego.PaymentIntentStatusSucceeded || pi.charge == nil {
		return nil, fmt.Errorf("paysim: payment %s is %s; only a succeeded payment can be refunded", pi.id, pi.status)
	}
	left := pi.charge.captured - pi.charge.refunded
	if amount <= 0 {
		amount = left
	}
	if left <= 0 {
		return nil, errStripeFullyRefunded
	}
	if amount > left {
		return nil, errStripeRefundTooLarge
	}
	if metadata == nil {
		metadata = map[string]string{}
	}
	rf := &stripeRefund{
		id: "re_" + s.newID("", 24, alphaNum), intent: pi.id, charge: pi.charge.id, amount: amount, currency: pi.currency,
		status: stripego.RefundStatusSucceeded, reason: reason, metadata: metadata, created: s.now(),
	}
	s.stripe.refunds[rf.id] = rf
	s.stripe.counters.RefundsCreated++
	s.counters.RefundsByPayment[pi.id]++
	pi.refunds = append(pi.refunds, rf.id)
	pi.charge.refunded += amount
	s.stripeMirrorLocked(pi)
	s.stripeEmitLocked(stripego.EventTypeRefundCreated, pi.id, s.stripeRefundJSON(rf))
	s.stripeEmitLocked(stripego.EventTypeChargeRefunded, pi.id, s.stripeChargeJSON(pi))
	return rf, nil
}

var (
	errStripeFullyRefunded  = fmt.Errorf("charge has already been refunded")
	errStripeRefundTooLarge = fmt.Errorf("refund amount is greater than the unrefunded amount of the charge")
)

// stripeConfirmable: statuses from which a confirmation can succeed or fail.
func stripeConfirmable(st stripego.PaymentIntentStatus) bool {
	switch st {
	case stripego.PaymentIntentStatusRequiresPaymentMethod, stripego.PaymentIntentStatusRequiresConfirmation,
		stripego.PaymentIntentStatusRequiresAction:
		return true
	}
	return false
}

// stripeCancelable: statuses Stripe lets a merchant cancel from.
func stripeCancelable(st stripego.PaymentIntentStatus) bool {
	return stripeConfirmable(st) || st == stripego.PaymentIntentStatusRequiresCapture
}

// stripeMirrorLocked keeps the shared payment record (the control API's view) in
// step with an intent.
func (s *Sim) stripeMirrorLocked(pi *stripeIntent) {
	p := s.payments[Stripe][pi.id]
	if p == nil {
		return
	}
	p.state, p.received, p.updated = state(pi.status), pi.received, s.now()
	if pi.charge != nil {
		p.refunded = pi.charge.refunded
	}
	if pi.lastError != nil {
		p.failureCode, p.failureMsg = string(pi.lastError.DeclineCode), pi.lastError.Msg
	}
}

// stripeViewLocked adds what the shared record does not keep to the control API's
// view of a PaymentIntent: its script, its card authorization (manual capture: the amount the
// charge reserved; CREATED while capturable, then CAPTURED or VOIDED, as the other
// providers' views say it), the charge id and its refunds with paywarden's
// reference (metadata) and Stripe's status (pending, succeeded, failed).
func (s *Sim) stripeViewLocked(v *PaymentView) {
	pi := s.stripe.intents[v.ID]
	if pi == nil {
		return
	}
	v.Script = pi.script
	v.ManualCapture = pi.captureMethod == stripego.PaymentIntentCaptureMethodManual
	if c := pi.charge; c != nil {
		v.CaptureID = c.id
		if v.ManualCapture && c.status == stripego.ChargeStatusSucceeded {
			a := &AuthorizationView{ID: c.id, Amount: c.amount, Status: "CREATED", ExpiresAt: c.captureBefore}
			switch {
			case c.captured > 0:
				a.Status = "CAPTURED"
			case pi.status == stripego.PaymentIntentStatusCanceled:
				a.Status = "VOIDED"
			}
			v.Authorization = a
		}
	}
	for _, id := range pi.refunds {
		if rf := s.stripe.refunds[id]; rf != nil {
			v.Refunds = append(v.Refunds, RefundView{ID: rf.id, Amount: rf.amount, Status: string(rf.status),
				Reference: rf.metadata[stripeadapter.MetadataRefundReference], Reason: string(rf.reason)})
		}
	}
}

func (s *Sim) stripeMirrorSessionLocked(cs *stripeSession) {
	if p := s.payments[Stripe][cs.id]; p != nil {
		p.state, p.updated = state(string(cs.status)+"/"+string(cs.paymentStatus)), s.now()
	}
}

// stripeSessionPaymentID is the id events name for a session's payment: its
// PaymentIntent once there is one.
func (s *Sim) stripeSessionPaymentID(cs *stripeSession) string {
	if cs.intent != "" {
		return cs.intent
	}
	return cs.id
}

// stripeEmitLocked records one event and schedules its delivery.
func (s *Sim) stripeEmitLocked(typ stripego.EventType, paymentID string, object json.RawMessage) {
	now := s.now()
	ev := stripego.Event{
		ID: "evt_" + s.newID("", 24, alphaNum), Object: "event", APIVersion: stripego.APIVersion, Created: now.Unix(),
		Data: &stripego.EventData{Raw: object}, PendingWebhooks: 1, Type: typ,
		Request: &stripego.EventRequest{},
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		s.log.Error("paysim: encoding stripe event", "type", typ, "err", err)
		return
	}
	rec := &EventRecord{Provider: Stripe, ID: ev.ID, Type: string(typ), PaymentID: paymentID, Created: now, Raw: raw}
	s.events[Stripe] = append(s.events[Stripe], rec)
	s.scheduleDeliveryLocked(rec)
}

// cloneMeta copies a metadata map (nil stays empty, never null on the wire).
func cloneMeta(m map[string]string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	return out
}
