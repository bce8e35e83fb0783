// Package paysimtest runs a paysim behind a real HTTP server for tests and records
// every request that reaches it, so a test can check what an adapter sent (method,
// path, headers, body) as well as what paysim did.
package paysimtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// Request is one recorded request.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// Server is a running paysim with a request log.
type Server struct {
	Sim     *paysim.Sim
	URL     string // the server URL; an adapter's APIURL is URL + "/" + provider
	Control *paysim.ControlClient

	mu   sync.Mutex
	reqs []Request
}

// Serve runs a paysim.Sim with opts behind an httptest server that records
// nothing, both closed at the end of the test (the Sim first: it cancels
// deliveries and slow answers).
func Serve(t testing.TB, opts paysim.Options) (*paysim.Sim, *httptest.Server) {
	t.Helper()
	sim := paysim.New(opts)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		sim.Close()
		srv.Close()
	})
	return sim, srv
}

// StripeKey is the secret key of the paysim ServeStripe runs.
const StripeKey = "sk_test_paysim"

// ServeStripe is Serve for tests of paysim's Stripe mode: the secret key is
// StripeKey and, unless opts say otherwise, no payer acts (the default script
// is pending) and 30 simulated minutes take 0.18 s.
func ServeStripe(t testing.TB, opts paysim.Options) (*paysim.Sim, *httptest.Server) {
	t.Helper()
	opts.StripeSecretKey = StripeKey
	if opts.DefaultScript == nil {
		opts.DefaultScript = &paysim.Script{Outcome: paysim.OutcomePending}
	}
	if opts.TimeFactor == 0 {
		opts.TimeFactor = 0.0001
	}
	return Serve(t, opts)
}

// Start runs a paysim.Sim with opts behind an httptest server, both closed at the end
// of the test (the Sim first, so no delivery outlives it).
func Start(t testing.TB, opts paysim.Options) *Server {
	t.Helper()
	s := &Server{Sim: paysim.New(opts)}
	h := s.Sim.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !strings.HasPrefix(r.URL.Path, "/_paysim/") {
			s.mu.Lock()
			s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
			s.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	s.URL = srv.URL
	s.Control = paysim.NewControlClient(srv.URL)
	t.Cleanup(func() {
		s.Sim.Close()
		srv.Close()
	})
	return s
}

// StartAt is Start for an adapter's lifecycle tests: unless opts say
// otherwise, no payer ever pays (the default script abandons) and paysim's
// clock stands still at now.
func StartAt(t testing.TB, opts paysim.Options, now time.Time) *Server {
	t.Helper()
	if opts.DefaultScript == nil {
		opts.DefaultScript = &paysim.Script{Outcome: paysim.OutcomeAbandon}
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return now }
	}
	return Start(t, opts)
}

// Requests returns the recorded provider requests (not control calls), oldest first.
// The OAuth2 token requests of PayPal are left out unless withTokens.
func (s *Server) Requests(withTokens bool) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.reqs {
		if !withTokens && strings.HasSuffix(r.Path, "/v1/oauth2/token") {
			continue
		}
		out = append(out, r)
	}
	return out
}

// Reset forgets the recorded requests.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = nil
}

// Sent returns the recorded requests to method path, oldest first.
func (s *Server) Sent(method, path string) []Request {
	var out []Request
	for _, r := range s.Requests(false) {
		if r.Method == method && r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// Only returns the one recorded request to method path; the test fails
// unless exactly one reached paysim.
func (s *Server) Only(t testing.TB, method, path string) Request {
	t.Helper()
	found := s.Sent(method, path)
	if len(found) != 1 {
		t.Fatalf("%d %s %s, want 1 (requests %v)", len(found), method, path, s.Requests(false))
	}
	return found[0]
}

// PayPalToken gets an OAuth2 access token from paysim's PayPal API at the
// server URL base, with the client id and secret, as the adapter would.
func PayPalToken(t testing.TB, base, id, secret string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/paypal/v1/oauth2/token", strings.NewReader("grant_type=client_credentials"))
	req.SetBasicAuth(id, secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok paypal.TokenResponse
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}
