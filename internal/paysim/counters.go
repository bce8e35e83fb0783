package paysim

import "maps"

// Counters is a snapshot of what the simulator saw and did. Tests assert on it: e.g.
// "three creates with one idempotency key, one payment created" is no double charge.
type Counters struct {
	// CreateRequests counts create calls that reached the create logic (faults
	// injected before processing are not included).
	CreateRequests int `json:"createRequests"`
	// CreatesByKey counts create calls per "<provider>/<idempotency key>", replays
	// included. Calls without a key are not listed.
	CreatesByKey map[string]int `json:"createsByKey"`
	// PaymentsCreated counts payments that actually came into existence.
	PaymentsCreated           int            `json:"paymentsCreated"`
	PaymentsCreatedByProvider map[string]int `json:"paymentsCreatedByProvider"`
	// QueriesByPayment counts status reads per provider payment id.
	QueriesByPayment map[string]int `json:"queriesByPayment"`
	Searches         int            `json:"searches"`       // find-by-merchant-reference calls
	EventListCalls   int            `json:"eventListCalls"` // events API pages served
	TokensIssued     int            `json:"tokensIssued"`   // PayPal OAuth2 tokens
	VerifyCalls      int            `json:"verifyCalls"`    // PayPal verify-webhook-signature calls
	Unauthorized     int            `json:"unauthorized"`   // API calls rejected for credentials

	// Approvals counts payers approving (scripted, hosted page or control call).
	Approvals int `json:"approvals"`
	// OrdersExpired counts PayPal orders deleted uncompleted at the end of
	// their lifetime (Options.PayPalOrderLifetime).
	OrdersExpired int `json:"ordersExpired"`
	// InstrumentDeclines counts PayPal captures and authorizations refused
	// INSTRUMENT_DECLINED (OutcomeInstrumentDeclined).
	InstrumentDeclines int `json:"instrumentDeclines"`
	// DeclinedAfterHonorPeriod counts PayPal captures declined because they
	// came after the authorization's honor period (Script.AfterHonorPeriod).
	DeclinedAfterHonorPeriod int `json:"declinedAfterHonorPeriod"`
	// ActionRequests counts capture, authorize, void, cancel and refund calls that
	// reached their logic (replays and refusals included); ActionsByKey counts them
	// per "<provider>/<idempotency key>".
	ActionRequests int            `json:"actionRequests"`
	ActionsByKey   map[string]int `json:"actionsByKey"`
	// CapturesByPayment counts captures that took effect through the capture API
	// (PayPal order or authorization capture, KukoPay capture, Stripe PaymentIntent
	// capture), per payment id:
	// "captured exactly once" is CapturesByPayment[id] == 1. Charges made without a
	// capture call (automatic capture, scripted outcomes) are not captures.
	CapturesByPayment map[string]int `json:"capturesByPayment"`
	// AuthorizationsByPayment counts authorizations created, per payment id.
	AuthorizationsByPayment map[string]int `json:"authorizationsByPayment"`
	// VoidsByPayment counts PayPal voids, KukoPay cancels and Stripe PaymentIntent
	// cancels (the merchant's) that took effect.
	VoidsByPayment map[string]int `json:"voidsByPayment"`
	// RefundsByPayment counts refunds created (API and control calls), per payment id.
	RefundsByPayment map[string]int `json:"refundsByPayment"`

	APIFaults          APIFaultCounters           `json:"apiFaults"`
	Webhooks           WebhookCounters            `json:"webhooks"`
	WebhooksByProvider map[string]WebhookCounters `json:"webhooksByProvider"`
}

// APIFaultCounters counts faults injected into API answers.
type APIFaultCounters struct {
	ServerErrors    int `json:"serverErrors"`    // 500 instead of processing
	TooManyRequests int `json:"tooManyRequests"` // 429 with Retry-After instead of processing
	Slow            int `json:"slow"`            // answers delayed by SlowDelay
	LostResponses   int `json:"lostResponses"`   // processed, then answered 500
	Garbled         int `json:"garbled"`         // processed, then answered 2xx with an unreadable body
}

// WebhookCounters counts webhook deliveries by outcome. Events counts events that
// were due for delivery (a target was set); each ends Delivered, Exhausted, Dropped or
// still pending.
type WebhookCounters struct {
	Events     int `json:"events"`
	Attempts   int `json:"attempts"`   // HTTP requests sent, duplicates included
	Delivered  int `json:"delivered"`  // events acknowledged with a 2xx
	Failed     int `json:"failed"`     // attempts answered non-2xx (3xx included), timed out or refused
	Exhausted  int `json:"exhausted"`  // events whose whole retry schedule failed
	Dropped    int `json:"dropped"`    // events never sent (fault)
	Duplicated int `json:"duplicated"` // extra copies sent after a success (fault)
	Reordered  int `json:"reordered"`  // events held back until the next one went out (fault)
	Delayed    int `json:"delayed"`    // events whose first attempt was delayed (fault)
}

func newCounters() Counters {
	return Counters{
		CreatesByKey:              map[string]int{},
		PaymentsCreatedByProvider: map[string]int{},
		QueriesByPayment:          map[string]int{},
		WebhooksByProvider:        map[string]WebhookCounters{},
		ActionsByKey:              map[string]int{},
		CapturesByPayment:         map[string]int{},
		AuthorizationsByPayment:   map[string]int{},
		VoidsByPayment:            map[string]int{},
		RefundsByPayment:          map[string]int{},
	}
}

func (c Counters) clone() Counters {
	c.CreatesByKey = maps.Clone(c.CreatesByKey)
	c.PaymentsCreatedByProvider = maps.Clone(c.PaymentsCreatedByProvider)
	c.QueriesByPayment = maps.Clone(c.QueriesByPayment)
	c.WebhooksByProvider = maps.Clone(c.WebhooksByProvider)
	c.ActionsByKey = maps.Clone(c.ActionsByKey)
	c.CapturesByPayment = maps.Clone(c.CapturesByPayment)
	c.AuthorizationsByPayment = maps.Clone(c.AuthorizationsByPayment)
	c.VoidsByPayment = maps.Clone(c.VoidsByPayment)
	c.RefundsByPayment = maps.Clone(c.RefundsByPayment)
	return c
}

// Counters returns a snapshot.
func (s *Sim) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters.clone()
}

// ResetCounters zeroes every counter (payments and events are kept).
func (s *Sim) ResetCounters() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters = newCounters()
}

// webhookCount applies f to provider's and the total webhook counters; s.mu held.
func (s *Sim) webhookCount(provider string, f func(*WebhookCounters)) {
	f(&s.counters.Webhooks)
	w := s.counters.WebhooksByProvider[provider]
	f(&w)
	s.counters.WebhooksByProvider[provider] = w
}
