package stripe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/paywarden/paywarden/internal/provider"
)

// guard is the one piece of HTTP plumbing stripe-go lacks for paywarden. stripe-go
// treats every status below 400 as a success (a redirect answer would be decoded as
// the object asked for), reads bodies without a size limit, and loses the HTTP
// status of an error answer that is not Stripe's JSON (a proxy's HTML 502 becomes an
// undifferentiated error). It also cannot talk to an API under a path prefix
// (paysim's /stripe, an egress proxy): it reads the API version from the request
// path and refuses "/stripe/v1/...". The guard sits between stripe-go and the
// network: it adds the prefix to the path on the wire only, and turns those answers
// into typed transport errors, so classify sees them; Stripe's own JSON answers pass
// through untouched for stripe-go to decode.
type guard struct {
	next   http.RoundTripper
	prefix string // path prefix of the API URL, "" for https://api.stripe.com
}

// redirectError: a 3xx, which paywarden never follows (ProviderConfig).
type redirectError struct {
	status   int
	location string
}

func (e *redirectError) Error() string {
	msg := fmt.Sprintf("HTTP %d: redirect not followed", e.status)
	if e.location != "" {
		msg += " (Location: " + truncate(e.location, 200) + ")"
	}
	return msg
}

// statusError: a non-2xx answer whose body is not a Stripe error object.
type statusError struct {
	status int
	header http.Header
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d without a Stripe error body", e.status)
}

// undecodableError: a 2xx whose body is not JSON, or any body over the cap. The call
// may have taken effect, so it is retryable.
type undecodableError struct {
	status int
	reason string
}

func (e *undecodableError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.status, e.reason)
}

func (g guard) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.prefix != "" {
		// A copy: a RoundTripper must not change the caller's request.
		r := req.Clone(req.Context())
		r.URL.Path = g.prefix + req.URL.Path
		r.URL.RawPath = ""
		req = r
	}
	resp, err := g.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		resp.Body.Close()
		return nil, &redirectError{status: resp.StatusCode, location: resp.Header.Get("Location")}
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, provider.MaxResponseBytes+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	if len(raw) > provider.MaxResponseBytes {
		return nil, &undecodableError{status: resp.StatusCode, reason: fmt.Sprintf("response body exceeds %d bytes", provider.MaxResponseBytes)}
	}
	ok2xx := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case ok2xx && !json.Valid(raw):
		return nil, &undecodableError{status: resp.StatusCode, reason: "response is not JSON"}
	case !ok2xx && !isStripeError(raw):
		return nil, &statusError{status: resp.StatusCode, header: resp.Header.Clone()}
	}
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	resp.ContentLength = int64(len(raw))
	return resp, nil
}

// isStripeError reports whether raw is Stripe's error envelope {"error":{...}}.
func isStripeError(raw []byte) bool {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &env) != nil {
		return false
	}
	return len(env.Error) > 0 && env.Error[0] == '{'
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
