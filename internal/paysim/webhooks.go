package paysim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	stripeadapter "github.com/paywarden/paywarden/internal/provider/stripe"
)

// EventRecord is one event as recorded in a provider's events list; Raw is exactly the
// body that is delivered and that the events API returns.
type EventRecord struct {
	Provider  string    `json:"provider"`
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	PaymentID string    `json:"paymentId"`
	Created   time.Time `json:"created"`
	Raw       []byte    `json:"-"`
}

// Events returns provider's events, oldest first.
func (s *Sim) Events(provider string) []EventRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]EventRecord, 0, len(s.events[provider]))
	for _, e := range s.events[provider] {
		c := *e
		c.Raw = append([]byte(nil), e.Raw...)
		out = append(out, c)
	}
	return out
}

// Retry schedules: the wait before each attempt, the first being immediate. These are
// the providers' documented schedules; TimeFactor scales them.
var retrySchedules = map[string][]time.Duration{
	// KukoPay: first try, then 30s, 2m, 10m, 30m, 2h (6 attempts).
	KukoPay: {0, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, 2 * time.Hour},
	// PayPal: up to 25 attempts over about 3 days, backing off.
	PayPal: {0, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute, 30 * time.Minute,
		time.Hour, 2 * time.Hour, 2 * time.Hour, 3 * time.Hour,
		270 * time.Minute, 270 * time.Minute, 270 * time.Minute, 270 * time.Minute, 270 * time.Minute, 270 * time.Minute, 270 * time.Minute,
		270 * time.Minute, 270 * time.Minute, 270 * time.Minute, 270 * time.Minute, 270 * time.Minute, 270 * time.Minute, 270 * time.Minute},
	// Standard Webhooks: immediately, 5s, 5m, 30m, 2h, 5h, 10h, 10h.
	Generic: {0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour},
	Stripe:  stripeRetrySchedule,
}

// RetrySchedule returns provider's delivery schedule (unscaled), the wait before each
// attempt.
func RetrySchedule(provider string) []time.Duration {
	return append([]time.Duration(nil), retrySchedules[provider]...)
}

// heldDelivery is an event held back by the reorder fault; it is released once, by the
// provider's next delivery or by the hold timer.
type heldDelivery struct {
	once    sync.Once
	release func()
}

func (h *heldDelivery) fire() {
	if h != nil {
		h.once.Do(h.release)
	}
}

// scheduleDeliveryLocked decides the faults for rec and starts its delivery; s.mu held.
func (s *Sim) scheduleDeliveryLocked(rec *EventRecord) {
	p := rec.Provider
	if s.closed || s.targets[p].url == "" {
		return
	}
	f := s.faults.withDefaults()
	s.webhookCount(p, func(w *WebhookCounters) { w.Events++ })
	if s.chance(f.DropRate) {
		s.webhookCount(p, func(w *WebhookCounters) { w.Dropped++ })
		s.log.Info("paysim: webhook dropped (fault)", "provider", p, "event", rec.ID)
		return
	}
	dup := s.chance(f.DuplicateRate)
	var delay time.Duration
	if s.chance(f.DelayRate) {
		delay = f.WebhookDelay
		s.webhookCount(p, func(w *WebhookCounters) { w.Delayed++ })
	}
	prev := s.held[p]
	delete(s.held, p)
	if prev == nil && s.chance(f.ReorderRate) {
		h := &heldDelivery{}
		h.release = func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.held[p] == h {
				delete(s.held, p)
			}
			s.goLocked(func() { s.runDelivery(rec, delay, dup, nil) })
		}
		s.held[p] = h
		s.webhookCount(p, func(w *WebhookCounters) { w.Reordered++ })
		s.afterLocked(f.ReorderHold, h.fire)
		return
	}
	s.goLocked(func() { s.runDelivery(rec, delay, dup, prev) })
}

// runDelivery walks the retry schedule until an attempt is acknowledged. after (an
// event held for reordering) is released once this event's first attempt is done, so
// it arrives second.
func (s *Sim) runDelivery(rec *EventRecord, delay time.Duration, dup bool, after *heldDelivery) {
	defer after.fire()
	if !s.sleep(s.scale(delay)) {
		return
	}
	for i, wait := range retrySchedules[rec.Provider] {
		if i > 0 && !s.sleep(s.scale(wait)) {
			return
		}
		ok, stop := s.attempt(rec)
		if stop {
			return
		}
		if i == 0 {
			after.fire()
		}
		if ok {
			s.mu.Lock()
			s.webhookCount(rec.Provider, func(w *WebhookCounters) { w.Delivered++ })
			if dup {
				s.webhookCount(rec.Provider, func(w *WebhookCounters) { w.Duplicated++ })
			}
			s.mu.Unlock()
			if dup {
				s.attempt(rec)
			}
			return
		}
	}
	s.mu.Lock()
	s.webhookCount(rec.Provider, func(w *WebhookCounters) { w.Exhausted++ })
	s.mu.Unlock()
	s.log.Warn("paysim: webhook retries exhausted", "provider", rec.Provider, "event", rec.ID)
}

// attempt sends rec once, freshly signed (each retry is a new transmission with a new
// timestamp, as real providers do). stop is true when delivery should end without a
// verdict (target removed, simulator closed).
func (s *Sim) attempt(rec *EventRecord) (ok, stop bool) {
	s.mu.Lock()
	t := s.targets[rec.Provider]
	url, secrets := t.url, t.secrets
	now := s.now()
	var transmissionID string
	if rec.Provider == PayPal {
		transmissionID = s.newID("", 8, hexAlphabet) + "-" + s.newID("", 4, hexAlphabet) + "-" + s.newID("", 12, hexAlphabet)
	}
	if url == "" || s.closed {
		s.mu.Unlock()
		return false, true
	}
	s.webhookCount(rec.Provider, func(w *WebhookCounters) { w.Attempts++ })
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(s.ctx, s.opts.DeliveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(rec.Raw))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "paysim/"+rec.Provider)
		err = s.sign(req.Header, rec, now, transmissionID, secrets)
	}
	code := 0
	if err == nil {
		var resp *http.Response
		resp, err = s.client.Do(req)
		if err == nil {
			code = resp.StatusCode
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
	}
	if s.ctx.Err() != nil {
		return false, true
	}
	ok = err == nil && code >= 200 && code < 300
	if !ok {
		s.mu.Lock()
		s.webhookCount(rec.Provider, func(w *WebhookCounters) { w.Failed++ })
		s.mu.Unlock()
	}
	s.log.Info("paysim: webhook attempt", "provider", rec.Provider, "event", rec.ID, "type", rec.Type, "status", code, "ok", ok, "err", err)
	return ok, false
}

// sign adds the provider's signature headers.
func (s *Sim) sign(h http.Header, rec *EventRecord, now time.Time, transmissionID string, secrets [][]byte) error {
	switch rec.Provider {
	case KukoPay:
		h.Set(kukopay.HeaderSignature, kukopay.SignatureHeaderValue(now, rec.Raw, secrets...))
	case Stripe:
		h.Set(stripeadapter.HeaderSignature, stripeadapter.SignatureHeaderValue(now, rec.Raw, secrets...))
	case Generic:
		sh, err := generic.SignHeaders(rec.ID, now, rec.Raw, secrets...)
		if err != nil {
			return err
		}
		for k, v := range sh {
			h[k] = v
		}
	case PayPal:
		// PayPal has one signature per transmission; during a rotation paysim signs
		// with the newest secret and its verify endpoint accepts any configured one.
		ts := now.UTC().Format(time.RFC3339)
		var secret []byte
		if len(secrets) > 0 {
			secret = secrets[len(secrets)-1]
		}
		h.Set(paypal.HeaderTransmissionID, transmissionID)
		h.Set(paypal.HeaderTransmissionTime, ts)
		h.Set(paypal.HeaderTransmissionSig, paypal.SignTransmission(secret, transmissionID, ts, s.opts.PayPalWebhookID, rec.Raw))
		h.Set(paypal.HeaderCertURL, "https://paysim.invalid/paypal/v1/notifications/certs/PAYSIM")
		h.Set(paypal.HeaderAuthAlgo, paypal.SimAuthAlgo)
	}
	return nil
}
