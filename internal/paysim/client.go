package paysim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ControlClient drives a paysim over its control API (/_paysim/), for tests and tools
// that run paysim out of process. Each method mirrors the Sim method of the same name.
type ControlClient struct {
	// BaseURL is the paysim server URL, without /_paysim.
	BaseURL string
	// HTTP is the client used; nil means http.DefaultClient.
	HTTP *http.Client
}

// NewControlClient returns a ControlClient for the paysim at baseURL.
func NewControlClient(baseURL string) *ControlClient {
	return &ControlClient{BaseURL: strings.TrimSuffix(baseURL, "/")}
}

// do sends a control call; out, when non-nil, receives the JSON answer. A non-2xx
// answer is an error carrying paysim's message.
func (c *ControlClient) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+"/_paysim"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(raw))
		}
		return fmt.Errorf("paysim control %s %s: HTTP %d: %s", method, path, resp.StatusCode, e.Error)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

func seg(s string) string { return url.PathEscape(s) }

// Approve is the payer approving payment id of provider (see Sim.Approve).
func (c *ControlClient) Approve(ctx context.Context, provider, id string) error {
	return c.do(ctx, http.MethodPost, "/payments/"+seg(provider)+"/"+seg(id)+"/approve", nil, nil)
}

// ReverseApproval has PayPal reverse the approval of an APPROVED order (see
// Sim.ReverseApproval).
func (c *ControlClient) ReverseApproval(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodPost, "/payments/"+PayPal+"/"+seg(id)+"/reverse-approval", nil, nil)
}

// SetOutcome re-scripts a payment (see Sim.SetOutcome).
func (c *ControlClient) SetOutcome(ctx context.Context, provider, id string, sc Script) error {
	return c.do(ctx, http.MethodPost, "/payments/"+seg(provider)+"/"+seg(id)+"/outcome", sc, nil)
}

// SettleRefund ends a pending refund with succeed or fail (see Sim.SettleRefund).
func (c *ControlClient) SettleRefund(ctx context.Context, provider, refundID string, outcome Outcome) error {
	return c.do(ctx, http.MethodPost, "/refunds/"+seg(provider)+"/"+seg(refundID)+"/settle", map[string]Outcome{"outcome": outcome}, nil)
}

// Payment reads paysim's view of a payment.
func (c *ControlClient) Payment(ctx context.Context, provider, id string) (PaymentView, error) {
	var v PaymentView
	err := c.do(ctx, http.MethodGet, "/payments/"+seg(provider)+"/"+seg(id), nil, &v)
	return v, err
}

// Counters reads the counters.
func (c *ControlClient) Counters(ctx context.Context) (Counters, error) {
	var out Counters
	err := c.do(ctx, http.MethodGet, "/counters", nil, &out)
	return out, err
}

// SetFaults replaces the active faults.
func (c *ControlClient) SetFaults(ctx context.Context, f Faults) error {
	return c.do(ctx, http.MethodPut, "/faults", f, nil)
}

// Script adds a rule for payments created from now on (see Sim.Script).
func (c *ControlClient) Script(ctx context.Context, r Rule) error {
	return c.do(ctx, http.MethodPost, "/scripts", r, nil)
}

// ResetCounters zeroes the counters (see Sim.ResetCounters).
func (c *ControlClient) ResetCounters(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/counters/reset", nil, nil)
}

// SetWebhookTarget points provider's webhook deliveries at target, signed with
// secrets (see Sim.SetWebhookTarget: an empty target stops delivery, no secrets
// keep the current ones).
func (c *ControlClient) SetWebhookTarget(ctx context.Context, provider, target string, secrets ...string) error {
	return c.do(ctx, http.MethodPut, "/webhooks/"+seg(provider), map[string]any{"url": target, "secrets": secrets}, nil)
}

// Payments lists provider's payments (see Sim.Payments).
func (c *ControlClient) Payments(ctx context.Context, provider string) ([]PaymentView, error) {
	var out []PaymentView
	err := c.do(ctx, http.MethodGet, "/payments/"+seg(provider), nil, &out)
	return out, err
}

// Events lists provider's events, oldest first, each with its body as Raw (see
// Sim.Events).
func (c *ControlClient) Events(ctx context.Context, provider string) ([]EventRecord, error) {
	var listed []struct {
		EventRecord
		Body json.RawMessage `json:"body"`
	}
	if err := c.do(ctx, http.MethodGet, "/events/"+seg(provider), nil, &listed); err != nil {
		return nil, err
	}
	out := make([]EventRecord, len(listed))
	for i, e := range listed {
		out[i] = e.EventRecord
		out[i].Raw = e.Body
	}
	return out, nil
}

// StripeFailRefund makes a Stripe refund fail after it succeeded, with
// failure_reason reason (see Sim.StripeFailRefund).
func (c *ControlClient) StripeFailRefund(ctx context.Context, refundID, reason string) error {
	return c.do(ctx, http.MethodPost, "/stripe/refunds/"+seg(refundID)+"/fail", map[string]string{"reason": reason}, nil)
}
