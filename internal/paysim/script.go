package paysim

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Outcome is what a payment eventually does.
type Outcome string

// Outcomes.
const (
	OutcomeSucceed    Outcome = "succeed"    // succeeds for the full amount
	OutcomeFail       Outcome = "fail"       // fails (declined)
	OutcomeExpire     Outcome = "expire"     // expires unpaid
	OutcomeProcessing Outcome = "processing" // moves to processing and stays there
	OutcomePending    Outcome = "pending"    // stays pending (never paid, never expires)
	OutcomeMismatch   Outcome = "mismatch"   // succeeds with a different amount received
	OutcomeUnknown    Outcome = "unknown"    // the provider itself does not know

	// The checkout outcomes: the payment waits for the payer (PayPal
	// CREATED/PAYER_ACTION_REQUIRED, KukoPay requires_action, a generic job with an
	// action link) until the payer approves. What approval leads to is the
	// provider's: PayPal APPROVED (the merchant must capture or authorize), KukoPay
	// requires_capture (manual capture) or the charge (automatic), a generic job
	// the charge. A charge's result is Script.CaptureOutcome.
	OutcomeApprove     Outcome = "approve"      // the payer approves after After (0: at once)
	OutcomeAbandon     Outcome = "abandon"      // the payer never approves (only the approve control call moves it)
	OutcomeNeedsAction Outcome = "needs_action" // the payer must act: approves after After when After > 0, else only by the control call

	// OutcomeInstrumentDeclined (a CaptureOutcome, PayPal) declines the payer's
	// funding source at the first capture (intent CAPTURE) or authorization
	// (intent AUTHORIZE) of the approved order: 422 INSTRUMENT_DECLINED, and the
	// order waits for the payer again, to approve with another funding source,
	// after which the next capture or authorization goes through. PayPal: "If
	// your payer's funding source fails, the Orders API returns an
	// INSTRUMENT_DECLINED error ... restart the payment so the payer can select
	// a different payment option" (PayPal developer docs, "Handle funding
	// failures").
	OutcomeInstrumentDeclined Outcome = "instrument_declined"
)

func validOutcome(o Outcome) bool {
	switch o {
	case OutcomeSucceed, OutcomeFail, OutcomeExpire, OutcomeProcessing, OutcomePending, OutcomeMismatch, OutcomeUnknown,
		OutcomeApprove, OutcomeAbandon, OutcomeNeedsAction:
		return true
	}
	return false
}

// needsPayer reports whether the outcome makes the payment wait for the payer.
func (o Outcome) needsPayer() bool {
	return o == OutcomeApprove || o == OutcomeAbandon || o == OutcomeNeedsAction
}

// validCaptureOutcome: what a capture (or an automatic charge after approval) does.
func validCaptureOutcome(o Outcome) bool {
	return o == "" || o == OutcomeSucceed || o == OutcomeFail || o == OutcomeProcessing || o == OutcomeInstrumentDeclined
}

// validRefundOutcome: what a refund does.
func validRefundOutcome(o Outcome) bool {
	return o == "" || o == OutcomeSucceed || o == OutcomeFail || o == OutcomePending
}

// Metadata keys that script a payment from the create request (kukopay and generic;
// PayPal orders carry no metadata, script those by amount or reference).
const (
	MetaOutcome = "paysim.outcome" // an Outcome
	MetaAfter   = "paysim.after"   // a Go duration, simulated (scaled)
	MetaAmount  = "paysim.amount"  // amount received for "mismatch", minor units
	MetaFailure = "paysim.failure" // failure code for "fail"

	MetaCapture             = "paysim.capture"             // Script.CaptureOutcome
	MetaAuthorizationPeriod = "paysim.authorizationPeriod" // Script.AuthorizationPeriod, a Go duration
	MetaRefund              = "paysim.refund"              // Script.RefundOutcome
	MetaRefundAfter         = "paysim.refundAfter"         // Script.RefundAfter, a Go duration
)

// Script is the scripted future of one payment.
type Script struct {
	Outcome Outcome
	// After is the simulated delay (scaled by TimeFactor) before the outcome applies.
	After time.Duration
	// Amount is the amount received for OutcomeMismatch; 0 means amount-1.
	Amount int64
	// FailureCode for OutcomeFail (and a failing capture); default "card_declined".
	FailureCode string

	// CaptureOutcome is what taking the money does: a capture call, or the charge
	// after the payer approved an automatic-capture KukoPay or generic payment.
	// "" or succeed: the money is taken; fail: declined; processing: stays pending
	// (PayPal capture PENDING); instrument_declined (PayPal): the payer's funding
	// source is declined once, and the payer must approve again.
	CaptureOutcome Outcome
	// AuthorizationPeriod is how long an authorization can be captured (simulated,
	// scaled); 0 is the provider's (PayPal 29 days, KukoPay 7 days, see Options).
	AuthorizationPeriod time.Duration
	// AfterHonorPeriod is what a capture of a PayPal authorization does once its
	// honor period (Options.PayPalHonorPeriod) is over: "" or succeed, the funds
	// are still there; fail, the capture is declined (capture DECLINED). PayPal
	// guarantees the funds only in the honor period: after it "capture success
	// depends on risk assessment and fund availability" (PayPal developer docs,
	// "Authorization and honor period").
	AfterHonorPeriod Outcome
	// RefundOutcome is what a refund of this payment does: "" or succeed, fail, or
	// pending (stays pending until SettleRefund). RefundAfter delays it (simulated,
	// scaled); until then the refund is pending. 0 settles it in the create answer.
	RefundOutcome Outcome
	RefundAfter   time.Duration
}

type scriptJSON struct {
	Outcome             Outcome `json:"outcome"`
	After               string  `json:"after,omitempty"`
	Amount              int64   `json:"amount,omitempty"`
	FailureCode         string  `json:"failureCode,omitempty"`
	CaptureOutcome      Outcome `json:"captureOutcome,omitempty"`
	AuthorizationPeriod string  `json:"authorizationPeriod,omitempty"`
	AfterHonorPeriod    Outcome `json:"afterHonorPeriod,omitempty"`
	RefundOutcome       Outcome `json:"refundOutcome,omitempty"`
	RefundAfter         string  `json:"refundAfter,omitempty"`
}

// MarshalJSON writes durations as duration strings.
func (sc Script) MarshalJSON() ([]byte, error) {
	return json.Marshal(scriptJSON{
		Outcome: sc.Outcome, After: durationString(sc.After), Amount: sc.Amount, FailureCode: sc.FailureCode,
		CaptureOutcome: sc.CaptureOutcome, AuthorizationPeriod: durationString(sc.AuthorizationPeriod), AfterHonorPeriod: sc.AfterHonorPeriod,
		RefundOutcome: sc.RefundOutcome, RefundAfter: durationString(sc.RefundAfter),
	})
}

// UnmarshalJSON reads durations as duration strings and validates the outcomes.
func (sc *Script) UnmarshalJSON(b []byte) error {
	var j scriptJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Script{Outcome: j.Outcome, Amount: j.Amount, FailureCode: j.FailureCode, CaptureOutcome: j.CaptureOutcome, AfterHonorPeriod: j.AfterHonorPeriod, RefundOutcome: j.RefundOutcome}
	if err := readDurations(
		durationField{j.After, &out.After}, durationField{j.AuthorizationPeriod, &out.AuthorizationPeriod},
		durationField{j.RefundAfter, &out.RefundAfter},
	); err != nil {
		return err
	}
	if err := ValidateScript(out); err != nil {
		return err
	}
	*sc = out
	return nil
}

// durationString writes a duration of the control API's JSON (Script, Faults):
// a Go duration string ("1.5s"), "" for none.
func durationString(v time.Duration) string {
	if v == 0 {
		return ""
	}
	return v.String()
}

// durationField is a duration of the control API's JSON: the string s read into
// dst.
type durationField struct {
	s   string
	dst *time.Duration
}

// readDurations reads each field's string as a Go duration into its dst; an
// empty one ("" for none, as durationString writes it) leaves dst as it is.
func readDurations(fields ...durationField) error {
	for _, f := range fields {
		if f.s == "" {
			continue
		}
		d, err := time.ParseDuration(f.s)
		if err != nil {
			return err
		}
		*f.dst = d
	}
	return nil
}

// Rule scripts every new payment that matches; zero fields match anything. Rules are
// tried in the order they were added; metadata on the payment wins over rules.
type Rule struct {
	Provider          string `json:"provider,omitempty"`
	Amount            int64  `json:"amount,omitempty"`
	Currency          string `json:"currency,omitempty"`
	MerchantReference string `json:"merchantReference,omitempty"`
	Script            Script `json:"script"`
}

func (r Rule) matches(p *payment) bool {
	return (r.Provider == "" || r.Provider == p.provider) &&
		(r.Amount == 0 || r.Amount == p.amount) &&
		(r.Currency == "" || r.Currency == p.currency) &&
		(r.MerchantReference == "" || r.MerchantReference == p.ref)
}

// Script adds a rule for payments created from now on.
func (s *Sim) Script(r Rule) error {
	if err := ValidateScript(r.Script); err != nil {
		return fmt.Errorf("paysim: %w", err)
	}
	if r.Provider != "" && !knownProvider(r.Provider) {
		return fmt.Errorf("paysim: unknown provider %q", r.Provider)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, r)
	return nil
}

// ClearScripts removes every rule.
func (s *Sim) ClearScripts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = nil
}

// scriptFor picks the script of a new payment: metadata, then rules, then the
// default; s.mu must be held.
func (s *Sim) scriptFor(p *payment) Script {
	if o := Outcome(p.metadata[MetaOutcome]); o != "" && validOutcome(o) {
		sc := Script{Outcome: o}
		if d, err := time.ParseDuration(p.metadata[MetaAfter]); err == nil {
			sc.After = d
		}
		if n, err := strconv.ParseInt(p.metadata[MetaAmount], 10, 64); err == nil {
			sc.Amount = n
		}
		sc.FailureCode = p.metadata[MetaFailure]
		if o := Outcome(p.metadata[MetaCapture]); validCaptureOutcome(o) {
			sc.CaptureOutcome = o
		}
		if d, err := time.ParseDuration(p.metadata[MetaAuthorizationPeriod]); err == nil && d > 0 {
			sc.AuthorizationPeriod = d
		}
		if o := Outcome(p.metadata[MetaRefund]); validRefundOutcome(o) {
			sc.RefundOutcome = o
		}
		if d, err := time.ParseDuration(p.metadata[MetaRefundAfter]); err == nil && d > 0 {
			sc.RefundAfter = d
		}
		return sc
	}
	for _, r := range s.rules {
		if r.matches(p) {
			return r.Script
		}
	}
	return *s.opts.DefaultScript
}

// ValidateScript reports whether sc names known outcomes and non-negative delays.
func ValidateScript(sc Script) error {
	if !validOutcome(sc.Outcome) {
		return fmt.Errorf("unknown outcome %q", sc.Outcome)
	}
	if !validCaptureOutcome(sc.CaptureOutcome) {
		return fmt.Errorf("unknown capture outcome %q (succeed, fail or processing)", sc.CaptureOutcome)
	}
	if o := sc.AfterHonorPeriod; o != "" && o != OutcomeSucceed && o != OutcomeFail {
		return fmt.Errorf("unknown outcome after the honor period %q (succeed or fail)", o)
	}
	if !validRefundOutcome(sc.RefundOutcome) {
		return fmt.Errorf("unknown refund outcome %q (succeed, fail or pending)", sc.RefundOutcome)
	}
	if sc.After < 0 || sc.AuthorizationPeriod < 0 || sc.RefundAfter < 0 {
		return fmt.Errorf("negative delay in %+v", sc)
	}
	return nil
}
