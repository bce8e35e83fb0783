package paysim_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
)

var creds = map[string]map[string][]byte{
	paysim.KukoPay: {"apiKey": []byte("kuko-key")},
	paysim.PayPal:  {"clientID": []byte("pp-id"), "clientSecret": []byte("pp-secret")},
	paysim.Generic: {"token": []byte("gen-token")},
}

var allProviders = []string{paysim.KukoPay, paysim.PayPal, paysim.Generic}

type env struct {
	sim *paysim.Sim
	srv *httptest.Server
	p   map[string]provider.Provider
}

// start runs a Sim behind a real HTTP server and builds one adapter per provider
// against it, exactly as the manager would (APIURL = server + prefix).
func start(t *testing.T, opts paysim.Options) *env {
	t.Helper()
	opts.KukoPayAPIKey, opts.PayPalClientID, opts.PayPalClientSecret, opts.GenericToken = "kuko-key", "pp-id", "pp-secret", "gen-token"
	if opts.DefaultScript == nil {
		opts.DefaultScript = &paysim.Script{Outcome: paysim.OutcomePending}
	}
	sim, srv := paysimtest.Serve(t, opts)
	e := &env{sim: sim, srv: srv, p: map[string]provider.Provider{}}
	for _, name := range allProviders {
		e.p[name] = e.adapter(t, name, time.Second, opts.Now)
	}
	return e
}

func (e *env) adapter(t *testing.T, name string, timeout time.Duration, now func() time.Time) provider.Provider {
	t.Helper()
	a, err := providers.New(name, provider.Config{
		Name: "test/" + name, APIURL: e.srv.URL + "/" + name, Credentials: creds[name],
		WebhookID: paysim.DefaultPayPalWebhookID, Timeout: timeout, Now: now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// eventually polls cond until it holds or the deadline passes: tests wait for
// asynchronous outcomes without sleeping a guessed amount.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// receiver is a webhook endpoint that records what arrives, verifies it with the
// adapter, and answers with codes(n) for the n-th request (0-based).
type receiver struct {
	srv     *httptest.Server
	adapter provider.Provider
	secrets [][]byte
	codes   func(n int) int
	now     func() time.Time

	mu  sync.Mutex
	got []delivery
}

type delivery struct {
	at        time.Time
	header    http.Header
	body      []byte
	verifyErr error
	event     provider.Event
	parseErr  error
}

func newReceiver(t *testing.T, a provider.Provider, secrets [][]byte, codes func(n int) int) *receiver {
	t.Helper()
	r := &receiver{adapter: a, secrets: secrets, codes: codes, now: time.Now}
	if r.codes == nil {
		r.codes = func(int) int { return http.StatusOK }
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		d := delivery{at: time.Now(), header: req.Header.Clone(), body: body}
		_, d.verifyErr = r.adapter.VerifyWebhook(context.Background(), req.Header, body, r.secrets, 5*time.Minute, r.now())
		d.event, d.parseErr = r.adapter.ParseEvent(body)
		r.mu.Lock()
		n := len(r.got)
		r.got = append(r.got, d)
		r.mu.Unlock()
		code := r.codes(n)
		if code >= 300 && code < 400 {
			w.Header().Set("Location", "/moved")
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

func (r *receiver) count() int { return len(r.deliveries()) }

func (e *env) create(t *testing.T, name, key, ref string, amount int64, meta map[string]string) provider.Payment {
	t.Helper()
	p, err := e.p[name].Create(context.Background(), createReq(key, ref, amount, meta))
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return p
}

func newAdapter(name, base string, c map[string][]byte) (provider.Provider, error) {
	return providers.New(name, provider.Config{Name: "test/" + name, APIURL: base + "/" + name, Credentials: c, Timeout: time.Second})
}

func createReq(key, ref string, amount int64, meta map[string]string) provider.CreateRequest {
	return provider.CreateRequest{IdempotencyKey: key, MerchantReference: ref, Amount: amount, Currency: "USD", Description: "test", Metadata: meta}
}

// send sends req and returns the answer's status, headers and body.
func send(t *testing.T, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}
