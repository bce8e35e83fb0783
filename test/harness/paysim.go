package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
)

// Paysim talks to a paysim process's control API (docs/paysim.md).
type Paysim struct {
	URL string
}

var controlClient = &http.Client{Timeout: 60 * time.Second}

func (s Paysim) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := controlClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("paysim %s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Counters reads paysim's counters.
func (s Paysim) Counters(ctx context.Context) (paysim.Counters, error) {
	var c paysim.Counters
	err := s.do(ctx, http.MethodGet, "/_paysim/counters", nil, &c)
	return c, err
}

// ResetCounters zeroes the counters.
func (s Paysim) ResetCounters(ctx context.Context) error {
	return s.do(ctx, http.MethodPost, "/_paysim/counters/reset", nil, nil)
}

// SetFaults replaces the active faults.
func (s Paysim) SetFaults(ctx context.Context, f paysim.Faults) error {
	return s.do(ctx, http.MethodPut, "/_paysim/faults", f, nil)
}

// Script adds a rule for new payments.
func (s Paysim) Script(ctx context.Context, r paysim.Rule) error {
	return s.do(ctx, http.MethodPost, "/_paysim/scripts", r, nil)
}

// SetWebhook points provider's deliveries at url (empty: deliver nothing).
func (s Paysim) SetWebhook(ctx context.Context, provider, url string, secrets ...string) error {
	return s.do(ctx, http.MethodPut, "/_paysim/webhooks/"+provider, map[string]any{"url": url, "secrets": secrets}, nil)
}

// Payments lists provider's simulated payments.
func (s Paysim) Payments(ctx context.Context, provider string) ([]paysim.PaymentView, error) {
	var out []paysim.PaymentView
	err := s.do(ctx, http.MethodGet, "/_paysim/payments/"+provider, nil, &out)
	return out, err
}

// SetOutcome re-scripts one payment.
func (s Paysim) SetOutcome(ctx context.Context, provider, id string, sc paysim.Script) error {
	return s.do(ctx, http.MethodPost, "/_paysim/payments/"+provider+"/"+id+"/outcome", sc, nil)
}

// StripeFailRefund makes a Stripe refund fail after it succeeded, with
// failure_reason reason ("" is Stripe's "unknown").
func (s Paysim) StripeFailRefund(ctx context.Context, refundID, reason string) error {
	return s.do(ctx, http.MethodPost, "/_paysim/stripe/refunds/"+refundID+"/fail", map[string]string{"reason": reason}, nil)
}

// Event is one recorded provider event.
type Event struct {
	paysim.EventRecord
	Body json.RawMessage `json:"body"`
}

// Events lists provider's recorded events, oldest first.
func (s Paysim) Events(ctx context.Context, provider string) ([]Event, error) {
	var out []Event
	err := s.do(ctx, http.MethodGet, "/_paysim/events/"+provider, nil, &out)
	return out, err
}

// ProviderCalls counts the API calls paysim processed: creates, status
// reads, look-ups, event pages, PayPal tokens and verifications.
func ProviderCalls(c paysim.Counters) int {
	n := c.CreateRequests + c.Searches + c.EventListCalls + c.TokensIssued + c.VerifyCalls
	for _, q := range c.QueriesByPayment {
		n += q
	}
	return n
}
