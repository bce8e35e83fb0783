package paypal

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/paywarden/paywarden/internal/provider"
)

// PayPal refuses every business rule with HTTP 422 and name UNPROCESSABLE_ENTITY; the
// reason is in details[].issue. provider.Client classifies the answer but keeps only
// the name, so the adapter's transport keeps a copy of error bodies for the request
// that asked for it (a slot in the request context), and do turns the issue into the
// error's Code.

// maxErrorBody bounds the copy; PayPal error bodies are a few hundred bytes.
const maxErrorBody = 64 << 10

type errorBodyKey struct{}

// errorBodySlot receives the body of a non-2xx answer. RoundTrip runs in the caller's
// goroutine, so the slot needs no lock.
type errorBodySlot struct{ body []byte }

// errorBodyTransport copies the head of every 4xx/5xx body into the request's slot and
// hands the whole body on unchanged.
type errorBodyTransport struct{ base http.RoundTripper }

func (t errorBodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	slot, ok := req.Context().Value(errorBodyKey{}).(*errorBodySlot)
	if !ok {
		return resp, nil
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	slot.body = head
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	return resp, nil
}

// withErrorBodies returns the HTTP client the adapter's provider.Client uses: the
// configured one (or one with the configured timeout, as provider.NewClient would
// build) with errorBodyTransport around its transport. The caller's client is not
// changed.
func withErrorBodies(cfg provider.Config) *http.Client {
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	} else {
		hc.Timeout = cfg.Timeout
		if hc.Timeout <= 0 {
			hc.Timeout = provider.DefaultTimeout
		}
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = errorBodyTransport{base: base}
	return &hc
}

// Issue returns PayPal's issue code of an error body (details[0].issue), or "".
func Issue(body []byte) string {
	var b ErrorBody
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	for _, d := range b.Details {
		if d.Issue != "" {
			return d.Issue
		}
	}
	return ""
}

// withIssue returns err with Code set to the issue of body, when there is one.
func withIssue(err error, body []byte) error {
	var pe *provider.Error
	if err == nil || !errors.As(err, &pe) || pe.StatusCode < 400 {
		return err
	}
	issue := Issue(body)
	if issue == "" {
		return err
	}
	c := *pe
	c.Code = issue
	if c.Detail != "" {
		c.Detail += " (" + issue + ")"
	} else {
		c.Detail = issue
	}
	return &c
}

// errorCode is the provider error code of err ("" when err is not a provider answer).
func errorCode(err error) string {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
