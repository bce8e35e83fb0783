package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxResponseBytes caps how much of a provider answer is read. Payment objects are a few
// KiB; the cap protects the manager from a misbehaving endpoint streaming forever.
const MaxResponseBytes = 1 << 20

// Client is the HTTP plumbing the adapters share, so every provider gets the same
// timeouts, redirect refusal, body cap and error classification.
type Client struct {
	name    string
	base    *url.URL
	http    *http.Client
	timeout time.Duration
	now     func() time.Time
}

// NewClient validates cfg.APIURL and builds the shared client.
func NewClient(cfg Config) (*Client, error) {
	if cfg.APIURL == "" {
		return nil, fmt.Errorf("provider %s: apiURL is empty", cfg.Name)
	}
	u, err := url.Parse(cfg.APIURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("provider %s: apiURL %q is not an absolute http(s) URL", cfg.Name, cfg.APIURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient // a copy: we must not change the caller's redirect policy
	} else {
		hc.Timeout = timeout
	}
	// A provider that redirects is misconfigured or compromised; following it could
	// send credentials elsewhere. Return the 3xx as-is and classify it as an error.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Client{name: cfg.Name, base: u, http: &hc, timeout: timeout, now: now}, nil
}

// Name is the provider name used in errors.
func (c *Client) Name() string { return c.name }

// Now is the configured clock.
func (c *Client) Now() time.Time { return c.now() }

// Request describes one call.
type Request struct {
	Op     string // operation name for errors
	Method string
	Path   string // appended to the API URL's path; segments must already be escaped
	Query  url.Values
	Header http.Header
	JSON   any        // marshalled as an application/json body when non-nil
	Form   url.Values // sent as application/x-www-form-urlencoded when non-nil
	// RawJSON is sent byte for byte as an application/json body. PayPal's signature
	// check needs the webhook event embedded exactly as received, and encoding/json
	// would compact and re-escape a json.RawMessage.
	RawJSON []byte
	// NotFound makes a 404 mean ErrNotFound: a read of one resource the provider may
	// not have. Elsewhere (collections, searches, actions) a 404 means the route does
	// not exist, i.e. a wrong apiURL: ErrProviderConfig.
	NotFound bool
	// ConflictRetryable makes a 409 mean ErrRetryable. Set it on create: with an
	// idempotency key a 409 says "a request with this key is still in progress", and
	// retrying with the same key later gets the first request's answer.
	ConflictRetryable bool
}

// Do performs r and decodes a 2xx JSON answer into out (when out is non-nil). Every
// failure is an *Error with a class.
func (c *Client) Do(ctx context.Context, r Request, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	u := *c.base
	u.Path = c.base.Path + r.Path
	u.RawPath = ""
	if r.Query != nil {
		u.RawQuery = r.Query.Encode()
	}
	var body io.Reader
	contentType := ""
	switch {
	case r.JSON != nil:
		b, err := json.Marshal(r.JSON)
		if err != nil {
			return c.fail(r.Op, ErrNonRetryable, 0, fmt.Errorf("encoding request: %w", err))
		}
		body, contentType = bytes.NewReader(b), "application/json"
	case r.RawJSON != nil:
		body, contentType = bytes.NewReader(r.RawJSON), "application/json"
	case r.Form != nil:
		body, contentType = strings.NewReader(r.Form.Encode()), "application/x-www-form-urlencoded"
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), body)
	if err != nil {
		return c.fail(r.Op, ErrNonRetryable, 0, err)
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")

	resp, err := c.http.Do(req)
	if err != nil {
		// Transport errors and timeouts leave the outcome unknown: always retryable.
		// The context error is wrapped too so callers can tell cancellation apart.
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", ctxErr, err)
		}
		return c.fail(r.Op, ErrRetryable, 0, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return c.fail(r.Op, ErrRetryable, resp.StatusCode, fmt.Errorf("reading response: %w", err))
	}
	if len(raw) > MaxResponseBytes {
		return UnreadableAnswer(c.name, r.Op, resp.StatusCode, fmt.Errorf("response body exceeds %d bytes", MaxResponseBytes))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(raw, out); err != nil {
			// The call may have taken effect; only a retry (same idempotency key) can tell.
			return UnreadableAnswer(c.name, r.Op, resp.StatusCode, fmt.Errorf("decoding response: %w", err))
		}
		return nil
	}
	return c.classify(r, resp, raw)
}

func (c *Client) fail(op string, class error, code int, err error) *Error {
	return &Error{Provider: c.name, Op: op, Class: class, StatusCode: code, Err: err}
}

// classify turns a non-2xx answer into an *Error. The order matters: configuration
// codes are decided first and nothing in the body can change them; then the provider's
// explicit problem "retryable" verdict beats the status code.
func (c *Client) classify(r Request, resp *http.Response, raw []byte) *Error {
	e := &Error{Provider: c.name, Op: r.Op, StatusCode: resp.StatusCode}
	code := resp.StatusCode
	switch {
	case code >= 300 && code < 400:
		e.Class = ErrProviderConfig
		e.Detail = "redirect not followed"
		if loc := resp.Header.Get("Location"); loc != "" {
			e.Detail += " (Location: " + truncate(loc, 200) + ")"
		}
		return e
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		e.Class = ErrProviderConfig
	case code == http.StatusNotFound && !r.NotFound:
		e.Class = ErrProviderConfig
	case code == http.StatusNotFound:
		e.Class = ErrNotFound
	case code == http.StatusConflict && r.ConflictRetryable:
		e.Class = ErrRetryable
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
		e.Class = ErrRetryable
	default:
		e.Class = ErrNonRetryable
	}
	if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), c.now()); ok {
		e.RetryAfter = d
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/problem+json" {
		if p, ok := DecodeProblem(raw); ok {
			e.Problem = p
			// The provider's explicit verdict beats the status code: that is the point
			// of the retryable member. The exceptions: a configuration problem stays one
			// (retrying with rejected credentials cannot help, and calling it retryable
			// would hide it behind the schedule), a 404 on a read stays NotFound unless
			// it says retry, and "do not retry" never makes a write's unknown outcome a
			// refusal (retryableFalse).
			if p.Retryable != nil && e.Class != ErrProviderConfig {
				switch {
				case *p.Retryable:
					e.Class = ErrRetryable
				case e.Class != ErrNotFound:
					e.Class = retryableFalse(r, code, e.Class)
				}
			}
			if e.RetryAfter == 0 {
				if d, ok := p.RetryAfterDelay(c.now()); ok {
					e.RetryAfter = d
				}
			}
		}
	}
	e.Detail = errorDetail(e.Problem, raw)
	if e.Detail == "" {
		e.Detail = http.StatusText(code)
	}
	e.Code = errorCode(e.Problem, raw)
	return e
}

// retryableFalse is the class of an answer of class first whose problem says
// "retryable": false. On a read it is a refusal: the query stops, and the payment
// waits for a human (NonRetryableQueryError). On a write it is one only where the
// status code says the request was refused: a server error, a timeout or a throttle
// (first is ErrRetryable) says nothing of whether the write took effect, so the
// write stays retryable with the same key (the core's schedule ends in a look-up or
// Unknown, never Failed: SPEC §2.2, §11.3); and a 409 to a write with a key ("this
// key is still in progress", or taken by another request) concerns that one call:
// its outcome is looked up (ErrKeyConflict, SPEC §12.1).
func retryableFalse(r Request, code int, first error) error {
	write := r.Method != "" && r.Method != http.MethodGet && r.Method != http.MethodHead
	switch {
	case write && code == http.StatusConflict && r.ConflictRetryable:
		return ErrKeyConflict
	case write && first == ErrRetryable:
		return ErrRetryable
	}
	return ErrNonRetryable
}

// errorCode pulls the provider's machine-readable error code out of the common body
// shapes: the problem type, KukoPay's {"error":{"code"}}, OAuth2's {"error":"..."} and
// PayPal's {"name"}. Adapters use it where one status code has two meanings.
func errorCode(p *Problem, raw []byte) string {
	if p != nil && p.Type != "" && p.Type != "about:blank" {
		return truncate(p.Type, 200)
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	var s string
	if v, ok := m["error"]; ok {
		if json.Unmarshal(v, &s) == nil {
			return truncate(s, 200)
		}
		var inner struct {
			Code string `json:"code"`
		}
		if json.Unmarshal(v, &inner) == nil && inner.Code != "" {
			return truncate(inner.Code, 200)
		}
	}
	if v, ok := m["name"]; ok && json.Unmarshal(v, &s) == nil {
		return truncate(s, 200)
	}
	return ""
}

// errorDetail pulls a short human message out of the common error body shapes
// (problem details, {"error":{"message"}}, PayPal's {"name","message"}, OAuth2's
// {"error","error_description"}), so logs say more than "HTTP 400".
func errorDetail(p *Problem, raw []byte) string {
	if p != nil {
		parts := []string{}
		for _, s := range []string{p.Title, p.Detail} {
			if s != "" {
				parts = append(parts, s)
			}
		}
		if len(parts) > 0 {
			return truncate(strings.Join(parts, ": "), 300)
		}
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	str := func(v any) string { s, _ := v.(string); return s }
	if inner, ok := m["error"].(map[string]any); ok {
		code, msg := str(inner["code"]), str(inner["message"])
		if code != "" && msg != "" {
			return truncate(code+": "+msg, 300)
		}
		return truncate(code+msg, 300)
	}
	for _, pair := range [][2]string{{"name", "message"}, {"error", "error_description"}} {
		a, b := str(m[pair[0]]), str(m[pair[1]])
		if a != "" || b != "" {
			return truncate(strings.Trim(a+": "+b, ": "), 300)
		}
	}
	return truncate(str(m["message"]), 300)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
