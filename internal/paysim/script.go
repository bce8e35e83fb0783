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
)

func validOutcome(o Outcome) bool {
	switch o {
	case OutcomeSucceed, OutcomeFail, OutcomeExpire, OutcomeProcessing, OutcomePending, OutcomeMismatch, OutcomeUnknown:
		return true
	}
	return false
}

// Metadata keys that script a payment from the create request (kukopay and generic;
// PayPal orders carry no metadata, script those by amount or reference).
const (
	MetaOutcome = "paysim.outcome" // an Outcome
	MetaAfter   = "paysim.after"   // a Go duration, simulated (scaled)
	MetaAmount  = "paysim.amount"  // amount received for "mismatch", minor units
	MetaFailure = "paysim.failure" // failure code for "fail"
)

// Script is the scripted future of one payment.
type Script struct {
	Outcome Outcome
	// After is the simulated delay (scaled by TimeFactor) before the outcome applies.
	After time.Duration
	// Amount is the amount received for OutcomeMismatch; 0 means amount-1.
	Amount int64
	// FailureCode for OutcomeFail; default "card_declined".
	FailureCode string
}

type scriptJSON struct {
	Outcome     Outcome `json:"outcome"`
	After       string  `json:"after,omitempty"`
	Amount      int64   `json:"amount,omitempty"`
	FailureCode string  `json:"failureCode,omitempty"`
}

// MarshalJSON writes After as a duration string.
func (sc Script) MarshalJSON() ([]byte, error) {
	j := scriptJSON{Outcome: sc.Outcome, Amount: sc.Amount, FailureCode: sc.FailureCode}
	if sc.After != 0 {
		j.After = sc.After.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads After as a duration string and validates the outcome.
func (sc *Script) UnmarshalJSON(b []byte) error {
	var j scriptJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if !validOutcome(j.Outcome) {
		return fmt.Errorf("unknown outcome %q", j.Outcome)
	}
	out := Script{Outcome: j.Outcome, Amount: j.Amount, FailureCode: j.FailureCode}
	if j.After != "" {
		d, err := time.ParseDuration(j.After)
		if err != nil {
			return err
		}
		out.After = d
	}
	*sc = out
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
	if !validOutcome(r.Script.Outcome) {
		return fmt.Errorf("paysim: unknown outcome %q", r.Script.Outcome)
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
		return sc
	}
	for _, r := range s.rules {
		if r.matches(p) {
			return r.Script
		}
	}
	return *s.opts.DefaultScript
}

// ValidateScript reports whether sc names a known outcome and a non-negative delay.
func ValidateScript(sc Script) error {
	if !validOutcome(sc.Outcome) {
		return fmt.Errorf("unknown outcome %q", sc.Outcome)
	}
	if sc.After < 0 {
		return fmt.Errorf("negative delay %s", sc.After)
	}
	return nil
}
