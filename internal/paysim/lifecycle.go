package paysim

import (
	"errors"
	"fmt"
	"time"

	"github.com/paywarden/paywarden/internal/provider/kukopay"
)

// The checkout lifecycle, provider-neutral: the payer approves, the money is
// authorized and captured (or charged at once), an authorization is voided or
// expires, refunds are made and settle. The API handlers of each provider check
// their own preconditions and answer in their own words; these functions only
// change state and emit events. s.mu must be held by every *Locked function.

// refreshLocked applies the deadlines that passed on paysim's clock: an authorization
// past its expiry expires, an unpaid payer link past its expiry expires the payment.
// Timers do the same after the scaled delay; this catches a clock that tests move
// (Options.Now) faster than timers run.
func (s *Sim) refreshLocked(p *payment) {
	now := s.now()
	if p.state == stAuthorized && p.auth != nil && !now.Before(p.auth.expiresAt) {
		s.expireAuthorizationLocked(p, p.auth)
	}
	if p.state == stPending && p.action != nil && !p.action.expiresAt.IsZero() && !now.Before(p.action.expiresAt) {
		s.expireActionLocked(p, p.action)
	}
	if !p.orderExpiresAt.IsZero() && !now.Before(p.orderExpiresAt) {
		s.expireOrderLocked(p, p.orderExpiresAt)
	}
}

// orderLifetimeLocked (re)starts the lifetime of a PayPal order that is not
// completed: from its creation, and again from the payer's approval
// (Options.PayPalOrderLifetime cites PayPal).
func (s *Sim) orderLifetimeLocked(p *payment) {
	at := s.now().Add(s.opts.PayPalOrderLifetime)
	p.orderExpiresAt = at
	s.afterLocked(s.opts.PayPalOrderLifetime, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.expireOrderLocked(p, at)
	})
}

// expireOrderLocked deletes a PayPal order that nobody completed by at (its
// lifetime as started then): it was neither captured nor authorized. PayPal
// sends no webhook; from now on the API answers 404 RESOURCE_NOT_FOUND for it.
func (s *Sim) expireOrderLocked(p *payment, at time.Time) {
	if p.gone || !p.orderExpiresAt.Equal(at) || (p.state != stPending && p.state != stApproved) {
		return
	}
	p.gone, p.action, p.state, p.updated = true, nil, stExpired, s.now()
	p.cancelReason = "order_expired"
	p.gen++ // a scheduled approval comes too late
	s.counters.OrdersExpired++
}

// expireActionLocked expires an unpaid payment whose payer link a ran out.
func (s *Sim) expireActionLocked(p *payment, a *payerAction) {
	if p.action != a || p.state != stPending {
		return
	}
	p.action, p.state, p.updated = nil, stExpired, s.now()
	p.cancelReason = "checkout_expired"
	p.gen++ // a scheduled approval comes too late
	s.emitLocked(p, evExpired, nil)
}

var errNotAwaitingPayer = errors.New("payment is not waiting for the payer")

// approveLocked is the payer approving at the provider: PayPal orders become APPROVED
// (the merchant's capture or authorize call is due), KukoPay payments authorized
// (manual capture) or charged, generic jobs charged.
func (s *Sim) approveLocked(p *payment) error {
	s.refreshLocked(p)
	if p.state != stPending {
		return fmt.Errorf("paysim: %s payment %s is %s: %w", p.provider, p.id, p.state, errNotAwaitingPayer)
	}
	p.action, p.updated = nil, s.now()
	p.gen++ // the payer acted: a scripted future that was still pending is over
	s.counters.Approvals++
	switch {
	case p.provider == PayPal:
		p.state = stApproved
		s.orderLifetimeLocked(p)
		s.emitLocked(p, evApproved, nil)
	case p.provider == KukoPay && p.manual:
		s.authorizeLocked(p)
	default:
		s.chargeLocked(p, p.amount)
	}
	return nil
}

// authorizeLocked reserves p's amount until the authorization period ends.
func (s *Sim) authorizeLocked(p *payment) {
	now := s.now()
	period := p.script.AuthorizationPeriod
	if period <= 0 {
		period = s.opts.KukoPayAuthorizationPeriod
		if p.provider == PayPal {
			period = s.opts.PayPalAuthorizationPeriod
		}
	}
	a := &authorization{amount: p.amount, status: "CREATED", created: now, expiresAt: now.Add(period)}
	if p.provider == PayPal {
		a.id = s.newID("", 17, upperAlphaNum)
		a.honorEnds = now.Add(min(s.opts.PayPalHonorPeriod, period))
		s.byAuth[a.id] = p
	} else {
		a.id = s.newID("auth_", 20, hexAlphabet)
	}
	p.auth, p.state, p.action, p.updated = a, stAuthorized, nil, now
	s.counters.AuthorizationsByPayment[p.id]++
	s.emitLocked(p, evAuthorized, nil)
	s.afterLocked(period, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.expireAuthorizationLocked(p, a)
	})
}

// expireAuthorizationLocked ends an authorization that was not captured in time.
// KukoPay reports payment.expired (cancellation_reason authorization_expired). PayPal
// reads the order COMPLETED with the authorization EXPIRED, and sends
// PAYMENT.AUTHORIZATION.VOIDED: "A payment authorization is voided either due to
// authorization reaching its 30 day validity period or authorization was manually
// voided" (PayPal webhook event names, Payments v2), its resource "with response
// status of voided" — the same event as a merchant's void, told apart only by when
// it comes.
func (s *Sim) expireAuthorizationLocked(p *payment, a *authorization) {
	if p.auth != a || p.state != stAuthorized || a.status != "CREATED" {
		return
	}
	p.state, p.updated = stExpired, s.now()
	p.cancelReason = kukopay.CancellationAuthorizationExpired
	p.gen++
	if p.provider == PayPal {
		a.status = "VOIDED" // as the event's resource shows it
		s.emitAtLocked(p, evCanceled, nil, latest(s.now(), a.expiresAt))
	}
	a.status = "EXPIRED"
	if p.provider != PayPal {
		s.emitLocked(p, evExpired, nil)
	}
}

// declineFundingLocked applies OutcomeInstrumentDeclined to the capture or
// authorization of the approved PayPal order p: the first one is declined and
// the order waits for the payer again (its approval link open), who approves
// with another funding source; ok is false when the call goes through.
func (s *Sim) declineFundingLocked(p *payment) (declined bool) {
	if p.script.CaptureOutcome != OutcomeInstrumentDeclined || p.fundingDeclined || p.state != stApproved {
		return false
	}
	p.fundingDeclined = true
	p.state, p.updated = stPending, s.now()
	s.openActionLocked(p)
	s.counters.InstrumentDeclines++
	return true
}

// chargeLocked takes amount: the result is the script's CaptureOutcome.
func (s *Sim) chargeLocked(p *payment, amount int64) {
	s.chargeAsLocked(p, amount, p.script.CaptureOutcome)
}

// chargeAsLocked takes amount with the result outcome.
func (s *Sim) chargeAsLocked(p *payment, amount int64, outcome Outcome) {
	p.updated, p.action = s.now(), nil
	s.ensureCaptureIDLocked(p)
	switch outcome {
	case OutcomeFail:
		p.state = stFailed
		p.failureCode = p.script.FailureCode
		if p.failureCode == "" {
			p.failureCode = "card_declined"
		}
		p.failureMsg = "paysim scripted capture failure"
		s.emitLocked(p, evFailed, nil)
	case OutcomeProcessing:
		p.state = stProcessing
		s.emitLocked(p, evProcessing, nil)
	default:
		p.state, p.received, p.failureCode, p.failureMsg = stSucceeded, amount, "", ""
		s.emitLocked(p, evSucceeded, nil)
	}
}

// captureLocked is the merchant's capture call taking effect: amount of the approved
// order or of the authorization. A partial final capture releases the rest.
func (s *Sim) captureLocked(p *payment, amount int64, final bool) {
	s.counters.CapturesByPayment[p.id]++
	gen := p.gen + 1
	p.gen = gen // the script's pending timer must not re-settle a captured payment
	outcome := p.script.CaptureOutcome
	if a := p.auth; a != nil {
		a.status = "CAPTURED"
		if !final && amount < a.amount {
			a.status = "PARTIALLY_CAPTURED"
		}
		if !a.honorEnds.IsZero() && !s.now().Before(a.honorEnds) && p.script.AfterHonorPeriod == OutcomeFail {
			// Past the honor period the funds are no longer guaranteed
			// (Options.PayPalHonorPeriod): this capture is declined.
			outcome = OutcomeFail
			s.counters.DeclinedAfterHonorPeriod++
		}
	}
	s.chargeAsLocked(p, amount, outcome)
}

// cancelLocked cancels a payment that took no money (KukoPay cancel, PayPal void).
func (s *Sim) cancelLocked(p *payment, reason string) {
	p.state, p.action, p.cancelReason, p.updated = stCanceled, nil, reason, s.now()
	p.gen++
	if p.auth != nil {
		p.auth.status = "VOIDED"
	}
	s.counters.VoidsByPayment[p.id]++
	s.emitLocked(p, evCanceled, nil)
}

// Refund creation errors; each API answers them in its own words.
var (
	errNotRefundable    = errors.New("only a succeeded payment can be refunded")
	errFullyRefunded    = errors.New("the payment is fully refunded")
	errRefundTooLarge   = errors.New("the refund exceeds what is left to refund")
	errCurrencyMismatch = errors.New("the refund currency is not the payment's")
)

type refundRequest struct {
	amount                      int64 // 0: what is left
	currency                    string
	reference, reason, customID string
}

// refundableLocked is what is left to refund: received, less refunds succeeded or pending.
func (s *Sim) refundableLocked(p *payment) int64 {
	left := p.received
	for _, r := range p.refunds {
		if r.status != refundFailed {
			left -= r.amount
		}
	}
	return left
}

// refundID is a new refund id in provider's format.
func (s *Sim) refundIDLocked(provider string) string {
	switch provider {
	case KukoPay:
		return s.newID("re_", 24, hexAlphabet)
	case PayPal:
		return s.newID("", 17, upperAlphaNum)
	default:
		return s.newID("rfd_", 20, alphaNum)
	}
}

// createRefundLocked creates a refund of p that settles with outcome after the
// simulated delay after (0: at once, so the create answer already shows it; outcome
// pending: only SettleRefund settles it).
func (s *Sim) createRefundLocked(p *payment, req refundRequest, outcome Outcome, after time.Duration) (*refund, error) {
	if p.state != stSucceeded {
		return nil, errNotRefundable
	}
	if req.currency != "" && req.currency != p.currency {
		return nil, errCurrencyMismatch
	}
	left := s.refundableLocked(p)
	if left <= 0 {
		return nil, errFullyRefunded
	}
	amount := req.amount
	if amount == 0 {
		amount = left
	}
	if amount > left || amount < 0 {
		return nil, errRefundTooLarge
	}
	now := s.now()
	r := &refund{
		p: p, id: s.refundIDLocked(p.provider), amount: amount, status: refundPending,
		reference: req.reference, reason: req.reason, customID: req.customID, created: now, updated: now,
	}
	p.refunds = append(p.refunds, r)
	s.refunds[p.provider][r.id] = r
	s.counters.RefundsByPayment[p.id]++
	switch {
	case outcome == OutcomePending:
	case after > 0:
		s.afterLocked(after, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.settleRefundLocked(r, outcome)
		})
	default:
		s.settleRefundLocked(r, outcome)
	}
	return r, nil
}

// settleRefundLocked ends a pending refund: succeed ("" too) moves the money and emits
// the refund event with the new cumulative total, fail emits the failure event (PayPal
// has none: a failed refund is found by reading it).
func (s *Sim) settleRefundLocked(r *refund, outcome Outcome) {
	if r.status != refundPending {
		return
	}
	r.updated = s.now()
	if outcome == OutcomeFail {
		r.status = refundFailed
		r.failureCode = r.p.script.FailureCode
		if r.failureCode == "" {
			r.failureCode = "refund_declined"
		}
		s.emitLocked(r.p, evRefundFailed, r)
		return
	}
	r.status = refundSucceeded
	r.p.refunded += r.amount
	r.p.updated = r.updated
	s.emitLocked(r.p, evRefunded, r)
}

// Approve is the payer approving a payment that waits for them (control call; the
// hosted page does the same): a PayPal order becomes APPROVED, a KukoPay payment
// requires_capture (manual capture) or charged, a generic job charged.
func (s *Sim) Approve(provider, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.knownPaymentLocked(provider, id)
	if err != nil {
		return err
	}
	return s.approveLocked(p)
}

// ReverseApproval is PayPal reversing the payer's approval of an order the
// merchant did not capture in time (control call): "When a transaction is not
// captured within a specified amount of time after the buyer approves it
// through the payment method, PayPal sends CHECKOUT.PAYMENT-APPROVAL.REVERSED
// webhook event, initiates a cancellation of the order, and refunds the
// buyer's account" (PayPal developer docs, "Handle uncaptured payments"; the
// window defaults to 3 hours, for alternative payment methods). The order
// then reads VOIDED. Only an APPROVED PayPal order can be reversed.
func (s *Sim) ReverseApproval(provider, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[provider][id]
	if !ok || provider != PayPal {
		return fmt.Errorf("paysim: no PayPal order %q", id)
	}
	s.refreshLocked(p)
	if p.state != stApproved {
		return fmt.Errorf("paysim: order %s is %s, not approved", id, p.state)
	}
	p.state, p.action, p.cancelReason, p.updated = stCanceled, nil, "approval_reversed", s.now()
	p.gen++
	s.emitLocked(p, evApprovalReversed, nil)
	return nil
}

// SettleRefund ends a pending refund now with outcome succeed or fail (control call).
func (s *Sim) SettleRefund(provider, refundID string, outcome Outcome) error {
	if outcome != OutcomeSucceed && outcome != OutcomeFail {
		return fmt.Errorf("paysim: a refund settles with succeed or fail, not %q", outcome)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[provider][refundID]
	if !ok {
		return fmt.Errorf("paysim: no %s refund %q", provider, refundID)
	}
	if r.status != refundPending {
		return fmt.Errorf("paysim: refund %s is already %s", refundID, r.status)
	}
	s.settleRefundLocked(r, outcome)
	return nil
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
