package paysim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Faults are injected by rate (0 = never, 1 = always), decided per request or per
// event from the seeded random source.
type Faults struct {
	// API calls (every provider endpoint, token and verify included; not /_paysim).
	ServerErrorRate     float64       // answer 500 without processing
	TooManyRequestsRate float64       // answer 429 + Retry-After without processing
	RetryAfter          time.Duration // Retry-After sent with 429 (whole seconds, min 1s); default 1s
	SlowRate            float64       // wait SlowDelay before answering
	SlowDelay           time.Duration // real time, not scaled: it is meant to trip client timeouts; default 15s
	// LostResponseRate processes the request and then answers 500: the payment exists
	// but the client does not know. The double-charge trap idempotency must defuse.
	LostResponseRate float64
	// GarbledAnswerRate processes the request and answers its 2xx status with an
	// unreadable body (GarbledBody, or the real body cut in half): the request took
	// effect, the client cannot read that it did. The answer kept for an idempotent
	// replay is the real one, as at a provider that stores "the resulting status code
	// and body of the first request" (Stripe API reference, "Idempotent requests"):
	// the body was lost on the way, not at the provider. Error answers pass unchanged.
	GarbledAnswerRate float64
	// GarbledBody, when set, is the body a garbled answer carries instead of the cut
	// one: e.g. "{}", well-formed JSON without the object.
	GarbledBody string
	// FrontServerErrors: the ServerErrorRate 500s come from in front of the
	// provider's endpoints (a load balancer), before any request started
	// executing, so Stripe stores none of them under the idempotency key. Without
	// it a Stripe 500 is its endpoint's own, stored and replayed for the whole
	// idempotency window as Stripe does. The other providers store no 500s.
	FrontServerErrors bool
	// Operations limits the API faults above to these operations (empty: every
	// endpoint), so e.g. only a refund's answer is lost. Names: Operations().
	Operations []string

	// Webhooks (decided once per event).
	DropRate      float64       // never send the event
	DuplicateRate float64       // send it once more after it was acknowledged
	ReorderRate   float64       // hold it back until the provider's next event went out
	DelayRate     float64       // delay the first attempt by WebhookDelay
	WebhookDelay  time.Duration // simulated (scaled); default 30s
	ReorderHold   time.Duration // simulated (scaled) maximum hold; default 1m
}

func (f Faults) withDefaults() Faults {
	if f.RetryAfter <= 0 {
		f.RetryAfter = time.Second
	}
	if f.SlowDelay <= 0 {
		f.SlowDelay = 15 * time.Second
	}
	if f.WebhookDelay <= 0 {
		f.WebhookDelay = 30 * time.Second
	}
	if f.ReorderHold <= 0 {
		f.ReorderHold = time.Minute
	}
	return f
}

// garble is what a garbled answer carries instead of body.
func (f Faults) garble(body []byte) []byte {
	if f.GarbledBody != "" {
		return []byte(f.GarbledBody)
	}
	return body[:len(body)/2]
}

// faultsJSON is the control API form: durations as Go duration strings.
type faultsJSON struct {
	ServerErrorRate     float64  `json:"serverErrorRate,omitempty"`
	TooManyRequestsRate float64  `json:"tooManyRequestsRate,omitempty"`
	RetryAfter          string   `json:"retryAfter,omitempty"`
	SlowRate            float64  `json:"slowRate,omitempty"`
	SlowDelay           string   `json:"slowDelay,omitempty"`
	LostResponseRate    float64  `json:"lostResponseRate,omitempty"`
	GarbledAnswerRate   float64  `json:"garbledAnswerRate,omitempty"`
	GarbledBody         string   `json:"garbledBody,omitempty"`
	FrontServerErrors   bool     `json:"frontServerErrors,omitempty"`
	Operations          []string `json:"operations,omitempty"`
	DropRate            float64  `json:"dropRate,omitempty"`
	DuplicateRate       float64  `json:"duplicateRate,omitempty"`
	ReorderRate         float64  `json:"reorderRate,omitempty"`
	DelayRate           float64  `json:"delayRate,omitempty"`
	WebhookDelay        string   `json:"webhookDelay,omitempty"`
	ReorderHold         string   `json:"reorderHold,omitempty"`
}

// MarshalJSON writes durations as strings ("1.5s").
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{
		f.ServerErrorRate, f.TooManyRequestsRate, durationString(f.RetryAfter), f.SlowRate, durationString(f.SlowDelay), f.LostResponseRate,
		f.GarbledAnswerRate, f.GarbledBody, f.FrontServerErrors, f.Operations,
		f.DropRate, f.DuplicateRate, f.ReorderRate, f.DelayRate, durationString(f.WebhookDelay), durationString(f.ReorderHold),
	})
}

// UnmarshalJSON reads durations as Go duration strings.
func (f *Faults) UnmarshalJSON(b []byte) error {
	var j faultsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var out Faults
	out.ServerErrorRate, out.TooManyRequestsRate, out.SlowRate, out.LostResponseRate = j.ServerErrorRate, j.TooManyRequestsRate, j.SlowRate, j.LostResponseRate
	out.GarbledAnswerRate, out.GarbledBody = j.GarbledAnswerRate, j.GarbledBody
	out.FrontServerErrors = j.FrontServerErrors
	out.DropRate, out.DuplicateRate, out.ReorderRate, out.DelayRate = j.DropRate, j.DuplicateRate, j.ReorderRate, j.DelayRate
	for _, op := range j.Operations {
		if !knownOperation(op) {
			return fmt.Errorf("faults: unknown operation %q (known: %v)", op, Operations())
		}
	}
	out.Operations = j.Operations
	if err := readDurations(
		durationField{j.RetryAfter, &out.RetryAfter}, durationField{j.SlowDelay, &out.SlowDelay},
		durationField{j.WebhookDelay, &out.WebhookDelay}, durationField{j.ReorderHold, &out.ReorderHold},
	); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	*f = out
	return nil
}

// API operation names, for Faults.Operations. Every provider endpoint is one of them.
const (
	OpToken          = "token"           // PayPal OAuth2 token
	OpVerify         = "verify"          // PayPal verify-webhook-signature
	OpCreate         = "create"          // create a payment, order or job
	OpGet            = "get"             // read one payment, order, job, authorization or capture
	OpFind           = "find"            // search payments by merchant reference
	OpEvents         = "events"          // events API
	OpAuthorize      = "authorize"       // PayPal order authorize
	OpCapture        = "capture"         // PayPal order or authorization capture, KukoPay capture
	OpVoid           = "void"            // PayPal authorization void, KukoPay cancel
	OpRefund         = "refund"          // create a refund
	OpGetRefund      = "get_refund"      // read one refund
	OpFindRefund     = "find_refund"     // search refunds
	OpHostedCheckout = "hosted_checkout" // the payer's page (never faulted)
)

var operations = []string{OpToken, OpVerify, OpCreate, OpGet, OpFind, OpEvents, OpAuthorize, OpCapture, OpVoid, OpRefund, OpGetRefund, OpFindRefund}

// Operations lists the operation names Faults.Operations accepts.
func Operations() []string { return append([]string(nil), operations...) }

func knownOperation(op string) bool {
	for _, o := range operations {
		if o == op {
			return true
		}
	}
	return false
}

// appliesTo reports whether the API faults apply to op.
func (f Faults) appliesTo(op string) bool {
	if len(f.Operations) == 0 {
		return true
	}
	for _, o := range f.Operations {
		if o == op {
			return true
		}
	}
	return false
}

// SetFaults replaces the active faults.
func (s *Sim) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
}

// Faults returns the active faults.
func (s *Sim) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

// apiFaultDraw is what was drawn for one API request: which faults it meets.
type apiFaultDraw struct{ slow, serverErr, tooMany, lost, garbled bool }

// drawAPIFaultsLocked draws the API faults for one request of operation op, in a
// fixed order from the seeded source (nothing for an operation the faults do
// not apply to), and counts them; it returns the faults in force too.
func (s *Sim) drawAPIFaultsLocked(op string) (Faults, apiFaultDraw) {
	f := s.faults.withDefaults()
	var d apiFaultDraw
	if f.appliesTo(op) {
		d.slow, d.serverErr, d.tooMany, d.lost = s.chance(f.SlowRate), s.chance(f.ServerErrorRate), s.chance(f.TooManyRequestsRate), s.chance(f.LostResponseRate)
		d.garbled = s.chance(f.GarbledAnswerRate)
	}
	if d.slow {
		s.counters.APIFaults.Slow++
	}
	switch {
	case d.serverErr:
		s.counters.APIFaults.ServerErrors++
	case d.tooMany:
		s.counters.APIFaults.TooManyRequests++
	case d.lost:
		s.counters.APIFaults.LostResponses++
	}
	return f, d
}

// slowDown holds a request drawn slow for f.SlowDelay, or until the Sim closes;
// false when the client went away first (there is no one left to answer).
func (s *Sim) slowDown(r *http.Request, f Faults) bool {
	t := time.NewTimer(f.SlowDelay)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
		return false
	case <-s.ctx.Done():
		t.Stop()
	}
	return true
}

// chance draws from the seeded source; s.mu must be held.
func (s *Sim) chance(rate float64) bool {
	if rate <= 0 {
		return false
	}
	return s.rng.Float64() < rate
}
