package paysim

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// state is paysim's provider-neutral payment state; each provider renders it in its
// own vocabulary.
type state string

const (
	stPending    state = "pending"
	stProcessing state = "processing"
	stSucceeded  state = "succeeded"
	stFailed     state = "failed"
	stExpired    state = "expired"
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
	refunds                 []refundRec
	disputeReason           string
}

type refundRec struct {
	id     string
	amount int64
	at     time.Time
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
	Script            Script    `json:"script"`
	Created           time.Time `json:"created"`
	Queries           int       `json:"queries"`
}

func (s *Sim) viewLocked(p *payment) PaymentView {
	return PaymentView{
		Provider: p.provider, ID: p.id, MerchantReference: p.ref, Amount: p.amount, Currency: p.currency,
		State: string(p.state), Received: p.received, Refunded: p.refunded, Script: p.script,
		Created: p.created, Queries: s.counters.QueriesByPayment[p.id],
	}
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
func (s *Sim) newPaymentLocked(provider, ref string, amount int64, currency, description string, metadata map[string]string) *payment {
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
		provider: provider, id: id, ref: ref, amount: amount, currency: currency, description: description,
		metadata: metadata, state: stPending, created: now, updated: now,
	}
	s.payments[provider][id] = p
	s.counters.PaymentsCreated++
	s.counters.PaymentsCreatedByProvider[provider]++
	s.setScriptLocked(p, s.scriptFor(p))
	return p
}

// setScriptLocked replaces p's script and schedules it.
func (s *Sim) setScriptLocked(p *payment, sc Script) {
	p.script = sc
	p.gen++
	gen := p.gen
	if sc.Outcome == OutcomePending && p.state == stPending {
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
	p.updated = s.now()
	switch sc.Outcome {
	case OutcomeSucceed, OutcomeMismatch:
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
		if p.captureID == "" {
			p.captureID = s.newID("", 17, upperAlphaNum)
		}
		s.emitLocked(p, evSucceeded)
	case OutcomeFail:
		p.state = stFailed
		p.failureCode = sc.FailureCode
		if p.failureCode == "" {
			p.failureCode = "card_declined"
		}
		p.failureMsg = "paysim scripted failure"
		if p.captureID == "" {
			p.captureID = s.newID("", 17, upperAlphaNum)
		}
		s.emitLocked(p, evFailed)
	case OutcomeExpire:
		p.state = stExpired
		s.emitLocked(p, evExpired)
	case OutcomeProcessing:
		p.state = stProcessing
		if p.captureID == "" {
			p.captureID = s.newID("", 17, upperAlphaNum)
		}
		s.emitLocked(p, evProcessing)
	case OutcomePending:
		p.state = stPending
	case OutcomeUnknown:
		p.state = stUnknown
	}
}

// SetOutcome re-scripts an existing payment (control call). The new outcome applies
// after sc.After (scaled) even if the payment already settled, so tests can produce
// conflicting provider statuses on purpose.
func (s *Sim) SetOutcome(provider, id string, sc Script) error {
	if !validOutcome(sc.Outcome) {
		return fmt.Errorf("paysim: unknown outcome %q", sc.Outcome)
	}
	if provider == Stripe {
		return s.stripeSetOutcome(id, sc)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[provider][id]
	if !ok {
		return fmt.Errorf("paysim: no %s payment %q", provider, id)
	}
	s.setScriptLocked(p, sc)
	return nil
}

// Refund refunds amount of a succeeded payment (0 = the rest) and emits the refund event.
func (s *Sim) Refund(provider, id string, amount int64) error {
	if provider == Stripe {
		return s.stripeRefund(id, amount)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[provider][id]
	if !ok {
		return fmt.Errorf("paysim: no %s payment %q", provider, id)
	}
	if p.state != stSucceeded {
		return fmt.Errorf("paysim: payment %s is %s, only succeeded payments can be refunded", id, p.state)
	}
	left := p.received - p.refunded
	if amount <= 0 || amount > left {
		amount = left
	}
	if amount <= 0 {
		return fmt.Errorf("paysim: payment %s is fully refunded", id)
	}
	p.refunded += amount
	p.updated = s.now()
	p.refunds = append(p.refunds, refundRec{id: s.newID("", 17, upperAlphaNum), amount: amount, at: p.updated})
	s.emitLocked(p, evRefunded)
	return nil
}

// Dispute opens a dispute on a payment and emits the dispute event.
func (s *Sim) Dispute(provider, id, reason string) error {
	if provider == Stripe {
		return s.stripeDispute(id, reason)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[provider][id]
	if !ok {
		return fmt.Errorf("paysim: no %s payment %q", provider, id)
	}
	if reason == "" {
		reason = "fraudulent"
	}
	p.disputeReason = reason
	s.emitLocked(p, evDisputed)
	return nil
}

// --- rendering in each provider's vocabulary ---

func (s *Sim) kukopayObject(p *payment) kukopay.PaymentObject {
	st := string(p.state)
	if p.state == stSucceeded && p.refunded > 0 {
		st = "partially_refunded"
		if p.refunded >= p.received {
			st = "refunded"
		}
	}
	o := kukopay.PaymentObject{
		ID: p.id, Object: "payment", OutTradeNo: p.ref, Amount: p.amount, Currency: p.currency,
		Status: st, AmountReceived: p.received, AmountRefunded: p.refunded,
		Description: p.description, Metadata: p.metadata, Created: p.created.Unix(),
	}
	if p.state == stFailed {
		o.FailureCode, o.FailureMessage = p.failureCode, p.failureMsg
	}
	return o
}

func (s *Sim) paypalCapture(p *payment) paypal.Capture {
	c := paypal.Capture{
		ID: p.captureID, InvoiceID: p.ref, CustomID: p.ref, FinalCapture: true,
		Amount:            paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(p.received, p.currency)},
		SupplementaryData: &paypal.SupplementaryData{RelatedIDs: paypal.RelatedIDs{OrderID: p.id}},
		CreateTime:        p.updated.UTC().Format(time.RFC3339), UpdateTime: p.updated.UTC().Format(time.RFC3339),
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

func (s *Sim) paypalOrder(p *payment) paypal.Order {
	pu := paypal.PurchaseUnit{
		ReferenceID: "default", InvoiceID: p.ref, CustomID: p.ref, Description: p.description,
		Amount: paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(p.amount, p.currency)},
	}
	o := paypal.Order{ID: p.id, Intent: "CAPTURE", CreateTime: p.created.UTC().Format(time.RFC3339), UpdateTime: p.updated.UTC().Format(time.RFC3339)}
	switch p.state {
	case stPending:
		o.Status = "CREATED"
	case stExpired:
		o.Status = "EXPIRED"
	case stUnknown:
		// COMPLETED without a capture: PayPal finished the order flow but cannot say
		// whether money moved.
		o.Status = "COMPLETED"
	default:
		o.Status = "COMPLETED"
		pu.Payments = &paypal.Payments{Captures: []paypal.Capture{s.paypalCapture(p)}}
		for _, r := range p.refunds {
			pu.Payments.Refunds = append(pu.Payments.Refunds, paypal.Refund{
				ID: r.id, Status: "COMPLETED", InvoiceID: p.ref, CustomID: p.ref,
				Amount:     paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(r.amount, p.currency)},
				CreateTime: r.at.UTC().Format(time.RFC3339),
			})
		}
	}
	o.PurchaseUnits = []paypal.PurchaseUnit{pu}
	o.Links = []paypal.Link{{Href: "/v2/checkout/orders/" + p.id, Rel: "self", Method: "GET"}}
	return o
}

func (s *Sim) genericJob(p *payment) generic.Job {
	j := generic.Job{
		JobID: p.id, CorrelationID: p.ref, Amount: generic.Amount{Value: p.amount, Currency: p.currency},
		SubmittedAt: p.created.UTC().Format(time.RFC3339),
	}
	switch p.state {
	case stPending:
		j.JobStatus, j.ProcessingStage = "processing", "queued"
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
	case stUnknown:
		j.JobStatus, j.ProcessingStage = "unknown", "settlement"
	}
	if p.state != stPending && p.state != stProcessing && p.state != stUnknown {
		j.CompletedAt = p.updated.UTC().Format(time.RFC3339)
	}
	return j
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
	evDisputed
)

var eventTypes = map[string]map[eventKind]string{
	KukoPay: {evSucceeded: "payment.succeeded", evFailed: "payment.failed", evExpired: "payment.expired", evRefunded: "refund.succeeded", evDisputed: "dispute.created"},
	PayPal:  {evSucceeded: "PAYMENT.CAPTURE.COMPLETED", evFailed: "PAYMENT.CAPTURE.DENIED", evProcessing: "PAYMENT.CAPTURE.PENDING", evRefunded: "PAYMENT.CAPTURE.REFUNDED", evDisputed: "CUSTOMER.DISPUTE.CREATED"},
	Generic: {evSucceeded: "job.succeeded", evFailed: "job.failed", evExpired: "job.expired", evProcessing: "job.processing", evRefunded: "job.refunded", evDisputed: "job.disputed"},
}

// emitLocked records the event of kind k for p in the events list and schedules its
// delivery; s.mu must be held.
func (s *Sim) emitLocked(p *payment, k eventKind) {
	typ := eventTypes[p.provider][k]
	if typ == "" {
		return
	}
	now := s.now()
	var id string
	var raw []byte
	var err error
	switch p.provider {
	case KukoPay:
		id = s.newID("evt_", 24, hexAlphabet)
		var obj any = s.kukopayObject(p)
		switch k {
		case evRefunded:
			r := p.refunds[len(p.refunds)-1]
			obj = kukopay.RefundObject{
				ID: "re_" + r.id, Object: "refund", Payment: p.id, OutTradeNo: p.ref, Amount: r.amount,
				Currency: p.currency, Status: "succeeded", PaymentAmountRefunded: p.refunded, Created: r.at.Unix(),
			}
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
			r := p.refunds[len(p.refunds)-1]
			resType = "refund"
			res = paypal.Refund{
				ID: r.id, Status: "COMPLETED", InvoiceID: p.ref, CustomID: p.ref,
				Amount: paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(r.amount, p.currency)},
				SellerPayableBreakdown: &paypal.SellerPayableBreakdown{TotalRefundedAmount: &paypal.Money{
					CurrencyCode: p.currency, Value: paypal.FormatAmount(p.refunded, p.currency)}},
				SupplementaryData: &paypal.SupplementaryData{RelatedIDs: paypal.RelatedIDs{OrderID: p.id, CaptureID: p.captureID}},
				CreateTime:        r.at.UTC().Format(time.RFC3339),
			}
		case evDisputed:
			resType = "dispute"
			res = paypal.Dispute{
				DisputeID: s.newID("PP-D-", 8, "0123456789"), Reason: p.disputeReason, Status: "OPEN",
				DisputeAmount:        paypal.Money{CurrencyCode: p.currency, Value: paypal.FormatAmount(p.received, p.currency)},
				DisputedTransactions: []paypal.DisputedTransaction{{SellerTransactionID: p.captureID, InvoiceNumber: p.ref, Custom: p.ref}},
				CreateTime:           now.UTC().Format(time.RFC3339),
			}
		}
		var data []byte
		if data, err = json.Marshal(res); err == nil {
			raw, err = json.Marshal(paypal.WebhookEvent{
				ID: id, EventVersion: "1.0", CreateTime: now.UTC().Format(time.RFC3339), ResourceType: resType,
				EventType: typ, Summary: summary, Resource: data,
			})
		}
	case Generic:
		id = s.newID("msg_", 24, alphaNum)
		var data []byte
		if data, err = json.Marshal(s.genericJob(p)); err == nil {
			raw, err = json.Marshal(generic.EventEnvelope{ID: id, Type: typ, Timestamp: now.UTC().Format(time.RFC3339), Data: data})
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
