package paysim

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// state is paysim's provider-neutral payment state; each provider renders it in its
// own vocabulary.
type state string

const (
	stPending    state = "pending"    // created; waits for the payer while action is set
	stApproved   state = "approved"   // PayPal: approved, the merchant's capture or authorize is due
	stAuthorized state = "authorized" // money reserved: capture, void or expiry next
	stProcessing state = "processing"
	stSucceeded  state = "succeeded"
	stFailed     state = "failed"
	stExpired    state = "expired"
	stCanceled   state = "canceled"
	stUnknown    state = "unknown"
)

type payment struct {
	provider, id, ref       string
	amount                  int64
	currency, description   string
	metadata                map[string]string
	state                   state
	received, refunded      int64
	failureCode, failureMsg string
	created, updated        time.Time
	script                  Script
	gen                     int // bumped when the script changes, so stale timers do nothing
	captureID               string
	refunds                 []*refund
	disputeReason           string
	// disputeID, disputeCreated and disputeOutcome (PayPal) are the
	// payment's dispute and, once it is resolved, its
	// dispute_outcome.outcome_code.
	disputeID, disputeOutcome string
	disputeCreated            time.Time

	manual                  bool   // capture_method manual (KukoPay), intent AUTHORIZE (PayPal)
	checkout                bool   // PayPal: created with a payment_source, so PAYER_ACTION_REQUIRED
	returnURL, cancelURL    string // where the hosted page sends the payer back
	customer, paymentMethod string
	base                    string       // scheme://host the payment was created through, for payer links
	actionExpires           time.Time    // requested expiry of the payer link; zero: Options.CheckoutTTL
	action                  *payerAction // set while the payer must act
	auth                    *authorization
	cancelReason            string
	// orderExpiresAt (PayPal) is when the order, not completed by then, is
	// deleted (Options.PayPalOrderLifetime); gone is true once it was: the API
	// answers 404 for it.
	orderExpiresAt time.Time
	gone           bool
	// fundingDeclined (PayPal) is true once the payer's funding source was
	// declined at a capture or authorization (OutcomeInstrumentDeclined).
	fundingDeclined bool
}

// payerAction is the link the payer must open.
type payerAction struct {
	url       string
	expiresAt time.Time // zero: the link does not expire (PayPal)
}

// authorization is reserved money. status uses PayPal's words (CREATED, CAPTURED,
// PARTIALLY_CAPTURED, VOIDED, EXPIRED) for every provider.
type authorization struct {
	id                 string
	amount             int64
	status             string
	created, expiresAt time.Time
	honorEnds          time.Time // PayPal: the funds are guaranteed until then (Options.PayPalHonorPeriod)
}

// Refund statuses (provider-neutral).
const (
	refundPending   = "pending"
	refundSucceeded = "succeeded"
	refundFailed    = "failed"
)

// refund is one refund of a payment.
type refund struct {
	p                           *payment
	id                          string
	amount                      int64
	status                      string
	reference, reason, customID string
	failureCode                 string
	created, updated            time.Time
}

// newPayment is what a create request asks for.
type newPayment struct {
	ref                   string
	amount                int64
	currency, description string
	metadata              map[string]string
	manual, checkout      bool
	returnURL, cancelURL  string
	customer, method      string
	actionExpires         time.Time
	base                  string
}

// PaymentView is the control API's view of one simulated payment.
type PaymentView struct {
	Provider          string    `json:"provider"`
	ID                string    `json:"id"`
	MerchantReference string    `json:"merchantReference"`
	Amount            int64     `json:"amount"`
	Currency          string    `json:"currency"`
	State             string    `json:"state"`
	Received          int64     `json:"received"`
	Refunded          int64     `json:"refunded"`
	Script            Script    `json:"script,omitzero"`
	Created           time.Time `json:"created"`
	Queries           int       `json:"queries"`

	ManualCapture bool `json:"manualCapture,omitempty"`
	// ActionURL is the payer's link while the payment waits for the payer.
	ActionURL       string    `json:"actionURL,omitempty"`
	ActionExpiresAt time.Time `json:"actionExpiresAt,omitzero"`
	// Authorization is the authorization, once there is one.
	Authorization *AuthorizationView `json:"authorization,omitempty"`
	CaptureID     string             `json:"captureID,omitempty"`
	Refunds       []RefundView       `json:"refunds,omitempty"`
	// OrderGone is true for a PayPal order deleted at the end of its lifetime
	// (the API answers 404 for it).
	OrderGone bool `json:"orderGone,omitempty"`
}

// AuthorizationView is the control API's view of an authorization.
type AuthorizationView struct {
	ID        string    `json:"id"`
	Amount    int64     `json:"amount"`
	Status    string    `json:"status"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// RefundView is the control API's view of a refund.
type RefundView struct {
	ID        string `json:"id"`
	Amount    int64  `json:"amount"`
	Status    string `json:"status"`
	Reference string `json:"reference,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

func (s *Sim) viewLocked(p *payment) PaymentView {
	s.refreshLocked(p)
	v := PaymentView{
		Provider: p.provider, ID: p.id, MerchantReference: p.ref, Amount: p.amount, Currency: p.currency,
		State: string(p.state), Received: p.received, Refunded: p.refunded, Script: p.script,
		Created: p.created, Queries: s.counters.QueriesByPayment[p.id],
		ManualCapture: p.manual, CaptureID: p.captureID, OrderGone: p.gone,
	}
	if p.action != nil {
		v.ActionURL, v.ActionExpiresAt = p.action.url, p.action.expiresAt
	}
	if a := p.auth; a != nil {
		v.Authorization = &AuthorizationView{ID: a.id, Amount: a.amount, Status: a.status, ExpiresAt: a.expiresAt}
	}
	for _, r := range p.refunds {
		v.Refunds = append(v.Refunds, RefundView{ID: r.id, Amount: r.amount, Status: r.status, Reference: r.reference, Reason: r.reason})
	}
	if p.provider == Stripe {
		s.stripeViewLocked(&v)
	}
	return v
}

// Payment returns the simulator's view of a payment.
func (s *Sim) Payment(provider, id string) (PaymentView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[provider][id]
	if !ok {
		return PaymentView{}, false
	}
	return s.viewLocked(p), true
}

// Payments lists provider's payments.
func (s *Sim) Payments(provider string) []PaymentView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []PaymentView{}
	for _, p := range s.payments[provider] {
		out = append(out, s.viewLocked(p))
	}
	return out
}

// newPaymentLocked stores a payment and schedules its script; s.mu must be held.
//
// A PayPal order always waits for the payer (CREATED, or PAYER_ACTION_REQUIRED with a
// payment_source). A KukoPay payment does when it is a hosted checkout (return_url
// without a stored payment method) and a generic job when it has a returnUrl; both do
// when the script is a checkout outcome (approve, abandon, needs_action).
func (s *Sim) newPaymentLocked(provider string, in newPayment) *payment {
	var id string
	switch provider {
	case KukoPay:
		id = s.newID("pay_", 20, hexAlphabet)
	case PayPal:
		id = s.newID("", 17, upperAlphaNum)
	default:
		id = s.newID("job_", 20, alphaNum)
	}
	now := s.now()
	p := &payment{
		provider: provider, id: id, ref: in.ref, amount: in.amount, currency: in.currency, description: in.description,
		metadata: in.metadata, state: stPending, created: now, updated: now,
		manual: in.manual, checkout: in.checkout, returnURL: in.returnURL, cancelURL: in.cancelURL,
		customer: in.customer, paymentMethod: in.method, base: in.base, actionExpires: in.actionExpires,
	}
	s.payments[provider][id] = p
	s.counters.PaymentsCreated++
	s.counters.PaymentsCreatedByProvider[provider]++
	sc := s.scriptFor(p)
	if provider == PayPal || (in.returnURL != "" && in.method == "") {
		s.openActionLocked(p)
	}
	if provider == PayPal {
		s.orderLifetimeLocked(p)
	}
	s.setScriptLocked(p, sc)
	return p
}

// actionURL is the payer's page for p, served by hostedPage.
func actionURL(p *payment) string {
	base := p.base
	if base == "" {
		base = "http://paysim.invalid"
	}
	switch p.provider {
	case PayPal:
		return base + "/paypal/checkoutnow?token=" + p.id
	case KukoPay:
		return base + "/kukopay/checkout/" + p.id
	default:
		return base + "/generic/actions/" + p.id
	}
}

// openActionLocked makes p wait for the payer. KukoPay and generic links expire (the
// requested expiry, else Options.CheckoutTTL) and the unpaid payment with them; a
// PayPal order's link works until the order itself expires (orderLifetimeLocked).
func (s *Sim) openActionLocked(p *payment) {
	if p.action != nil || p.state != stPending {
		return
	}
	a := &payerAction{url: actionURL(p)}
	if p.provider != PayPal {
		now := s.now()
		a.expiresAt = p.actionExpires
		if a.expiresAt.IsZero() {
			a.expiresAt = now.Add(s.opts.CheckoutTTL)
		}
		s.afterLocked(a.expiresAt.Sub(now), func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.expireActionLocked(p, a)
		})
	}
	p.action = a
}

// setScriptLocked replaces p's script and schedules it.
func (s *Sim) setScriptLocked(p *payment, sc Script) {
	p.script = sc
	p.gen++
	gen := p.gen
	if sc.Outcome.needsPayer() {
		s.openActionLocked(p)
	}
	switch {
	case sc.Outcome == OutcomePending && p.state == stPending,
		sc.Outcome == OutcomeAbandon,
		sc.Outcome == OutcomeNeedsAction && sc.After <= 0:
		return
	}
	s.afterLocked(sc.After, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if p.gen != gen || s.closed {
			return
		}
		s.settleLocked(p)
	})
}

// settleLocked applies p.script now and emits the matching event.
func (s *Sim) settleLocked(p *payment) {
	sc := p.script
	switch sc.Outcome {
	case OutcomeApprove, OutcomeNeedsAction:
		_ = s.approveLocked(p)
		return
	case OutcomeAbandon:
		return
	}
	p.updated = s.now()
	p.action = nil
	switch sc.Outcome {
	case OutcomeSucceed, OutcomeMismatch:
		// For a manual-capture payment, success is the authorization: the merchant
		// takes the money with a capture call.
		if p.manual && p.provider != Generic && p.auth == nil && (p.state == stPending || p.state == stApproved) {
			s.authorizeLocked(p)
			return
		}
		p.state, p.failureCode, p.failureMsg = stSucceeded, "", ""
		p.received = p.amount
		if sc.Outcome == OutcomeMismatch {
			p.received = sc.Amount
			if p.received == 0 || p.received == p.amount {
				p.received = p.amount - 1
				if p.received <= 0 {
					p.received = p.amount + 1
				}
			}
		}
		s.ensureCaptureIDLocked(p)
		s.emitLocked(p, evSucceeded, nil)
	case OutcomeFail:
		p.state = stFailed
		p.failureCode = sc.FailureCode
		if p.failureCode == "" {
			p.failureCode = "card_declined"
		}
		p.failureMsg = "paysim scripted failure"
		s.ensureCaptureIDLocked(p)
		s.emitLocked(p, evFailed, nil)
	case OutcomeExpire:
		p.state = stExpired
		s.emitLocked(p, evExpired, nil)
	case OutcomeProcessing:
		p.state = stProcessing
		s.ensureCaptureIDLocked(p)
		s.emitLocked(p, evProcessing, nil)
	case OutcomePending:
		p.state = stPending
	case OutcomeUnknown:
		p.state = stUnknown
	}
}

// ensureCaptureIDLocked gives p a capture id (PayPal: refunds are made against it).
func (s *Sim) ensureCaptureIDLocked(p *payment) {
	if p.captureID != "" {
		return
	}
	p.captureID = s.newID("", 17, upperAlphaNum)
	if p.provider == PayPal {
		s.byCap[p.captureID] = p
	}
}

// knownPaymentLocked is the provider's payment id, for a control call; an
// unknown one is an error.
func (s *Sim) knownPaymentLocked(provider, id string) (*payment, error) {
	p, ok := s.payments[provider][id]
	if !ok {
		return nil, fmt.Errorf("paysim: no %s payment %q", provider, id)
	}
	return p, nil
}

// SetOutcome re-scripts an existing payment (control call). The new outcome applies
// after sc.After (scaled) even if the payment already settled, so tests can produce
// conflicting provider statuses on purpose.
func (s *Sim) SetOutcome(provider, id string, sc Script) error {
	if err := ValidateScript(sc); err != nil {
		return fmt.Errorf("paysim: %w", err)
	}
	if provider == Stripe {
		return s.stripeSetOutcome(id, sc)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.knownPaymentLocked(provider, id)
	if err != nil {
		return err
	}
	s.refreshLocked(p)
	s.setScriptLocked(p, sc)
	return nil
}

// Refund refunds amount of a succeeded payment (0 or more than is left = the rest) at
// once, as a refund made in the provider's dashboard would, and emits the refund event.
func (s *Sim) Refund(provider, id string, amount int64) error {
	if provider == Stripe {
		return s.stripeRefund(id, amount)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.knownPaymentLocked(provider, id)
	if err != nil {
		return err
	}
	if p.state != stSucceeded {
		return fmt.Errorf("paysim: payment %s is %s, only succeeded payments can be refunded", id, p.state)
	}
	left := s.refundableLocked(p)
	if amount <= 0 || amount > left {
		amount = left
	}
	if amount <= 0 {
		return fmt.Errorf("paysim: payment %s is fully refunded", id)
	}
	_, err = s.createRefundLocked(p, refundRequest{amount: amount}, OutcomeSucceed, 0)
	return err
}

// Dispute opens a dispute on a payment and emits the dispute event.
func (s *Sim) Dispute(provider, id, reason string) error {
	if provider == Stripe {
		return s.stripeDispute(id, reason)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.knownPaymentLocked(provider, id)
	if err != nil {
		return err
	}
	if reason == "" {
		reason = "fraudulent"
	}
	p.disputeReason = reason
	s.emitLocked(p, evDisputed, nil)
	return nil
}

// PayPalResolveDispute resolves the open dispute of PayPal order id with
// outcome, one of paypal.DisputeOutcomeCodes (Customer Disputes API v1,
// definition dispute_outcome, outcome_code), and sends
// CUSTOMER.DISPUTE.RESOLVED ("A dispute is resolved", PayPal developer docs,
// "Subscribe to disputes webhooks") with the dispute RESOLVED and its
// dispute_outcome.
func (s *Sim) PayPalResolveDispute(id, outcome string) error {
	if !slices.Contains(paypal.DisputeOutcomeCodes(), outcome) {
		return fmt.Errorf("paysim: %q is not a PayPal dispute outcome code (%v)", outcome, paypal.DisputeOutcomeCodes())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[PayPal][id]
	switch {
	case !ok:
		return fmt.Errorf("paysim: no paypal payment %q", id)
	case p.disputeID == "" || p.disputeOutcome != "":
		return fmt.Errorf("paysim: payment %s has no open dispute", id)
	}
	p.disputeOutcome = outcome
	s.emitLocked(p, evDisputeResolved, nil)
	return nil
}

// --- rendering in each provider's vocabulary ---

func (s *Sim) kukopayObject(p *payment) kukopay.PaymentObject {
	st := string(p.state)
	switch p.state {
	case stSucceeded:
		if p.refunded > 0 {
			st = "partially_refunded"
			if p.refunded >= p.received {
				st = "refunded"
			}
		}
	case stPending:
		if p.action != nil {
			st = "requires_action"
		}
	case stAuthorized:
		st = "requires_capture"
	case stApproved:
		st = "requires_action"
	}
	o := kukopay.PaymentObject{
		ID: p.id, Object: "payment", OutTradeNo: p.ref, Amount: p.amount, Currency: p.currency,
		Status: st, AmountReceived: p.received, AmountRefunded: p.refunded,
		Description: p.description, Metadata: p.metadata, Created: p.created.Unix(),
		CaptureMethod: kukopay.CaptureAutomatic, Customer: p.customer, PaymentMethod: p.paymentMethod,
	}
	if p.manual {
		o.CaptureMethod = kukopay.CaptureManual
	}
	switch p.state {
	case stFailed:
		o.FailureCode, o.FailureMessage = p.failureCode, p.failureMsg
	case stPending:
		if p.action != nil {
			o.NextAction = &kukopay.NextAction{Type: "redirect_to_url", RedirectURL: p.action.url, ExpiresAt: p.action.expiresAt.Unix()}
		}
	case stAuthorized:
		if p.auth != nil {
			o.AmountCapturable, o.CaptureBefore = p.auth.amount, p.auth.expiresAt.Unix()
		}
	case stCanceled, stExpired:
		o.CancellationReason = p.cancelReason
	}
	return o
}

func (s *Sim) kukopayRefund(r *refund) kukopay.RefundObject {
	p := r.p
	o := kukopay.RefundObject{
		ID: r.id, Object: "refund", Payment: p.id, OutTradeNo: p.ref, Amount: r.amount, Currency: p.currency,
		Status: r.status, Reason: r.reason, PaymentAmountRefunded: p.refunded, Created: r.created.Unix(),
	}
	if r.reference != "" {
		o.Metadata = map[string]string{kukopay.MetadataReference: r.reference}
	}
	if r.status == refundFailed {
		o.FailureCode, o.FailureMessage = r.failureCode, "paysim scripted refund failure"
	}
	return o
}

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func (s *Sim) paypalCapture(p *payment) paypal.Capture {
	c := paypal.Capture{
		ID: p.captureID, InvoiceID: p.ref, CustomID: p.ref, FinalCapture: true,
		Amount:            paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(p.received, p.currency)},
		SupplementaryData: &paypal.SupplementaryData{RelatedIDs: paypal.RelatedIDs{OrderID: p.id}},
		CreateTime:        ts(p.updated), UpdateTime: ts(p.updated),
		Links: []paypal.Link{
			{Href: "/v2/payments/captures/" + p.captureID, Rel: "self", Method: "GET"},
			{Href: "/v2/checkout/orders/" + p.id, Rel: paypal.RelUp, Method: "GET"},
		},
	}
	if p.auth != nil {
		c.SupplementaryData.RelatedIDs.AuthorizationID = p.auth.id
		c.Links[1] = paypal.Link{Href: "/v2/payments/authorizations/" + p.auth.id, Rel: paypal.RelUp, Method: "GET"}
	}
	switch p.state {
	case stSucceeded:
		c.Status = "COMPLETED"
		if p.refunded > 0 {
			c.Status = "PARTIALLY_REFUNDED"
			if p.refunded >= p.received {
				c.Status = "REFUNDED"
			}
		}
	case stFailed:
		c.Status = "DECLINED"
		c.Amount.Value = paypal.FormatAmount(p.amount, p.currency)
		c.StatusDetails = &paypal.StatusDetails{Reason: p.failureCode}
	case stProcessing:
		c.Status = "PENDING"
		c.Amount.Value = paypal.FormatAmount(p.amount, p.currency)
		c.StatusDetails = &paypal.StatusDetails{Reason: "PENDING_REVIEW"}
	}
	return c
}

func (s *Sim) paypalAuthorization(p *payment) paypal.Authorization {
	a := p.auth
	return paypal.Authorization{
		ID: a.id, Status: a.status, InvoiceID: p.ref, CustomID: p.ref,
		Amount:            paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(a.amount, p.currency)},
		ExpirationTime:    ts(a.expiresAt),
		SupplementaryData: &paypal.SupplementaryData{RelatedIDs: paypal.RelatedIDs{OrderID: p.id}},
		CreateTime:        ts(a.created), UpdateTime: ts(p.updated),
		Links: []paypal.Link{
			{Href: "/v2/payments/authorizations/" + a.id, Rel: "self", Method: "GET"},
			{Href: "/v2/payments/authorizations/" + a.id + "/capture", Rel: "capture", Method: "POST"},
			{Href: "/v2/payments/authorizations/" + a.id + "/void", Rel: "void", Method: "POST"},
			{Href: "/v2/checkout/orders/" + p.id, Rel: paypal.RelUp, Method: "GET"},
		},
	}
}

// paypalRefund renders r. invoice_id is the merchant's refund reference (the payment's
// reference for refunds made without one), custom_id the payment's reference.
func (s *Sim) paypalRefund(r *refund) paypal.Refund {
	p := r.p
	out := paypal.Refund{
		ID: r.id, Status: map[string]string{refundPending: "PENDING", refundSucceeded: "COMPLETED", refundFailed: "FAILED"}[r.status],
		InvoiceID: r.reference, CustomID: r.customID, NoteToPayer: r.reason,
		Amount: paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(r.amount, p.currency)},
		SellerPayableBreakdown: &paypal.SellerPayableBreakdown{TotalRefundedAmount: &paypal.Money{
			CurrencyCode: p.currency, Value: paypal.FormatAmount(p.refunded, p.currency)}},
		SupplementaryData: &paypal.SupplementaryData{RelatedIDs: paypal.RelatedIDs{OrderID: p.id, CaptureID: p.captureID}},
		CreateTime:        ts(r.created), UpdateTime: ts(r.updated),
		Links: []paypal.Link{
			{Href: "/v2/payments/refunds/" + r.id, Rel: "self", Method: "GET"},
			{Href: "/v2/payments/captures/" + p.captureID, Rel: paypal.RelUp, Method: "GET"},
		},
	}
	if out.InvoiceID == "" {
		out.InvoiceID = p.ref
	}
	if out.CustomID == "" {
		out.CustomID = p.ref
	}
	if r.status == refundFailed {
		out.StatusDetails = &paypal.StatusDetails{Reason: r.failureCode}
	}
	return out
}

func (s *Sim) paypalOrder(p *payment) paypal.Order {
	pu := paypal.PurchaseUnit{
		ReferenceID: "default", InvoiceID: p.ref, CustomID: p.ref, Description: p.description,
		Amount: paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(p.amount, p.currency)},
	}
	o := paypal.Order{ID: p.id, Intent: paypal.IntentCapture, CreateTime: ts(p.created), UpdateTime: ts(p.updated)}
	if p.manual {
		o.Intent = paypal.IntentAuthorize
	}
	o.Links = []paypal.Link{{Href: "/v2/checkout/orders/" + p.id, Rel: "self", Method: "GET"}}
	withAuth := func() {
		pu.Payments = &paypal.Payments{Authorizations: []paypal.Authorization{s.paypalAuthorization(p)}}
	}
	switch p.state {
	case stPending:
		o.Status = "CREATED"
		rel := paypal.RelApprove
		if p.checkout {
			o.Status, rel = "PAYER_ACTION_REQUIRED", paypal.RelPayerAction
		}
		if p.action != nil {
			o.Links = append(o.Links, paypal.Link{Href: p.action.url, Rel: rel, Method: "GET"})
		}
	case stApproved:
		o.Status = "APPROVED"
		action := "capture"
		if p.manual {
			action = "authorize"
		}
		o.Links = append(o.Links, paypal.Link{Href: "/v2/checkout/orders/" + p.id + "/" + action, Rel: action, Method: "POST"})
	case stUnknown:
		// COMPLETED without a capture: PayPal finished the order flow but cannot say
		// whether money moved.
		o.Status = "COMPLETED"
	case stAuthorized:
		o.Status = "COMPLETED"
		withAuth()
	case stExpired, stCanceled:
		if p.auth != nil {
			o.Status = "COMPLETED"
			withAuth()
		} else {
			o.Status = map[state]string{stExpired: "EXPIRED", stCanceled: "VOIDED"}[p.state]
		}
	default:
		o.Status = "COMPLETED"
		pu.Payments = &paypal.Payments{Captures: []paypal.Capture{s.paypalCapture(p)}}
		if p.auth != nil {
			pu.Payments.Authorizations = []paypal.Authorization{s.paypalAuthorization(p)}
		}
		for _, r := range p.refunds {
			pu.Payments.Refunds = append(pu.Payments.Refunds, s.paypalRefund(r))
		}
	}
	o.PurchaseUnits = []paypal.PurchaseUnit{pu}
	return o
}

// paypalDispute renders p's dispute (Customer Disputes API v1, "dispute"):
// OPEN, or RESOLVED with its dispute_outcome; the buyer's favour refunds the
// disputed amount.
func (s *Sim) paypalDispute(p *payment, now time.Time) paypal.Dispute {
	if p.disputeID == "" {
		p.disputeID, p.disputeCreated = s.newID("PP-D-", 8, "0123456789"), now
	}
	amount := paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(p.received, p.currency)}
	d := paypal.Dispute{
		DisputeID: p.disputeID, Reason: p.disputeReason, Status: "OPEN", DisputeAmount: amount,
		DisputedTransactions: []paypal.DisputedTransaction{{SellerTransactionID: p.captureID, InvoiceNumber: p.ref, Custom: p.ref}},
		CreateTime:           ts(p.disputeCreated),
	}
	if p.disputeOutcome != "" {
		d.Status, d.DisputeOutcome = "RESOLVED", &paypal.DisputeOutcome{OutcomeCode: p.disputeOutcome}
		if p.disputeOutcome == paypal.OutcomeBuyerFavour {
			d.DisputeOutcome.AmountRefunded = &amount
		}
	}
	return d
}

func (s *Sim) genericJob(p *payment) generic.Job {
	j := generic.Job{
		JobID: p.id, CorrelationID: p.ref, Amount: generic.Amount{Value: p.amount, Currency: p.currency},
		SubmittedAt: ts(p.created),
	}
	switch p.state {
	case stPending, stApproved, stAuthorized:
		j.JobStatus, j.ProcessingStage = "processing", "queued"
		if p.action != nil {
			j.ProcessingStage = "awaiting_customer"
			j.Action = &generic.JobAction{URL: p.action.url, ExpiresAt: ts(p.action.expiresAt)}
		}
	case stProcessing:
		j.JobStatus, j.ProcessingStage = "processing", "settlement"
	case stSucceeded:
		j.JobStatus = "succeeded"
		if p.refunded > 0 {
			j.JobStatus = "partially_refunded"
			if p.refunded >= p.received {
				j.JobStatus = "refunded"
			}
			j.AmountRefunded = &generic.Amount{Value: p.refunded, Currency: p.currency}
		}
		j.AmountReceived = &generic.Amount{Value: p.received, Currency: p.currency}
	case stFailed:
		j.JobStatus, j.ProcessingStage = "failed", "authorization"
		j.Failure = &generic.JobFailure{Code: p.failureCode, Message: p.failureMsg}
	case stExpired:
		j.JobStatus = "expired"
	case stCanceled:
		j.JobStatus = "canceled"
	case stUnknown:
		j.JobStatus, j.ProcessingStage = "unknown", "settlement"
	}
	if p.state != stPending && p.state != stProcessing && p.state != stUnknown {
		j.CompletedAt = ts(p.updated)
	}
	return j
}

func (s *Sim) genericRefund(r *refund) generic.JobRefund {
	out := generic.JobRefund{
		RefundID: r.id, JobID: r.p.id, Reference: r.reference, Reason: r.reason,
		RefundStatus: map[string]string{refundPending: "processing", refundSucceeded: "succeeded", refundFailed: "failed"}[r.status],
		Amount:       generic.Amount{Value: r.amount, Currency: r.p.currency}, SubmittedAt: ts(r.created),
	}
	if r.status != refundPending {
		out.CompletedAt = ts(r.updated)
	}
	if r.status == refundFailed {
		out.Failure = &generic.JobFailure{Code: r.failureCode, Message: "paysim scripted refund failure"}
	}
	return out
}

// eventKind is a provider-neutral event; eventTypes names it per provider ("" = the
// provider has no such event).
type eventKind int

const (
	evSucceeded eventKind = iota
	evFailed
	evExpired
	evProcessing
	evRefunded
	evRefundFailed
	evDisputed
	evApproved
	evAuthorized
	evCanceled
	evApprovalReversed
	evDisputeResolved
)

var eventTypes = map[string]map[eventKind]string{
	KukoPay: {
		evSucceeded: "payment.succeeded", evFailed: "payment.failed", evExpired: "payment.expired",
		evRefunded: "refund.succeeded", evRefundFailed: "refund.failed", evDisputed: "dispute.created",
		evAuthorized: "payment.authorized", evCanceled: "payment.canceled",
	},
	PayPal: {
		evSucceeded: "PAYMENT.CAPTURE.COMPLETED", evFailed: "PAYMENT.CAPTURE.DENIED", evProcessing: "PAYMENT.CAPTURE.PENDING",
		evRefunded: "PAYMENT.CAPTURE.REFUNDED", evDisputed: "CUSTOMER.DISPUTE.CREATED", evApproved: "CHECKOUT.ORDER.APPROVED",
		evAuthorized: "PAYMENT.AUTHORIZATION.CREATED", evCanceled: "PAYMENT.AUTHORIZATION.VOIDED",
		evApprovalReversed: "CHECKOUT.PAYMENT-APPROVAL.REVERSED", evDisputeResolved: "CUSTOMER.DISPUTE.RESOLVED",
	},
	Generic: {
		evSucceeded: "job.succeeded", evFailed: "job.failed", evExpired: "job.expired", evProcessing: "job.processing",
		evRefunded: "job.refunded", evRefundFailed: "job.refund_failed", evDisputed: "job.disputed",
	},
}

// emitLocked records the event of kind k for p (about refund r, for refund events) in
// the events list and schedules its delivery; s.mu must be held.
func (s *Sim) emitLocked(p *payment, k eventKind, r *refund) {
	s.emitAtLocked(p, k, r, s.now())
}

// emitAtLocked is emitLocked for an event that happened at now on the
// simulated clock (a deadline a scaled timer reached: its own instant, not the
// wall clock at which the timer fired).
func (s *Sim) emitAtLocked(p *payment, k eventKind, r *refund, now time.Time) {
	typ := eventTypes[p.provider][k]
	if typ == "" {
		return
	}
	var id string
	var raw []byte
	var err error
	switch p.provider {
	case KukoPay:
		id = s.newID("evt_", 24, hexAlphabet)
		var obj any = s.kukopayObject(p)
		switch k {
		case evRefunded, evRefundFailed:
			obj = s.kukopayRefund(r)
		case evDisputed:
			obj = kukopay.DisputeObject{
				ID: s.newID("dp_", 20, hexAlphabet), Object: "dispute", Payment: p.id, OutTradeNo: p.ref,
				Amount: p.received, Currency: p.currency, Reason: p.disputeReason, Status: "needs_response", Created: now.Unix(),
			}
		}
		var data []byte
		if data, err = json.Marshal(obj); err == nil {
			raw, err = json.Marshal(kukopay.EventObject{ID: id, Object: "event", Type: typ, Created: now.Unix(), Data: kukopay.EventData{Object: data}})
		}
	case PayPal:
		id = "WH-" + s.newID("", 17, upperAlphaNum) + "-" + s.newID("", 17, upperAlphaNum)
		var res any = s.paypalCapture(p)
		resType, summary := "capture", "Payment "+typ
		switch k {
		case evRefunded:
			resType, res = "refund", s.paypalRefund(r)
		case evApproved:
			resType, res = "checkout-order", s.paypalOrder(p)
		case evAuthorized, evCanceled:
			resType, res = "authorization", s.paypalAuthorization(p)
		case evApprovalReversed:
			resType, summary = "checkout-order", "A payment has been reversed after approval."
			res = paypal.ApprovalReversal{OrderID: p.id, PurchaseUnits: s.paypalOrder(p).PurchaseUnits}
		case evDisputed, evDisputeResolved:
			resType, res = "dispute", s.paypalDispute(p, now)
		}
		var data []byte
		if data, err = json.Marshal(res); err == nil {
			raw, err = json.Marshal(paypal.WebhookEvent{
				ID: id, EventVersion: "1.0", CreateTime: ts(now), ResourceType: resType,
				EventType: typ, Summary: summary, Resource: data,
			})
		}
	case Generic:
		id = s.newID("msg_", 24, alphaNum)
		j := s.genericJob(p)
		if r != nil {
			gr := s.genericRefund(r)
			j.Refund = &gr
		}
		var data []byte
		if data, err = json.Marshal(j); err == nil {
			raw, err = json.Marshal(generic.EventEnvelope{ID: id, Type: typ, Timestamp: ts(now), Data: data})
		}
	}
	if err != nil {
		s.log.Error("paysim: encoding event", "provider", p.provider, "type", typ, "err", err)
		return
	}
	rec := &EventRecord{Provider: p.provider, ID: id, Type: typ, PaymentID: p.id, Created: now, Raw: raw}
	s.events[p.provider] = append(s.events[p.provider], rec)
	s.scheduleDeliveryLocked(rec)
}
