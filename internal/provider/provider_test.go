package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

var now = time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)

func TestParseRetryAfter(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"delay-seconds", "120", 120 * time.Second, true},
		{"zero seconds means retry now", "0", 0, true},
		{"surrounding spaces are ignored", "  7 ", 7 * time.Second, true},
		{"HTTP-date in the future", "Mon, 21 Sep 2026 12:00:30 GMT", 30 * time.Second, true},
		{"HTTP-date in the past is retry now", "Mon, 21 Sep 2026 11:00:00 GMT", 0, true},
		{"obsolete RFC 850 date is accepted", "Monday, 21-Sep-26 12:01:00 GMT", time.Minute, true},
		{"absurd seconds are capped at a day", "99999999999999999999", 24 * time.Hour, true},
		{"two days of seconds are capped at a day", "172800", 24 * time.Hour, true},
		{"an HTTP-date two days ahead is capped at a day", "Wed, 23 Sep 2026 12:00:00 GMT", 24 * time.Hour, true},
		{"empty is no hint", "", 0, false},
		{"negative is no hint", "-5", 0, false},
		{"fraction is no hint", "1.5", 0, false},
		{"garbage is no hint", "soon", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := provider.ParseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestProblemDecodingKeepsAsyncJobMembersAndExtensions(t *testing.T) {
	body := `{"type":"https://example.com/probs/job-failed","title":"Job failed","status":503,"detail":"settlement down",
	"instance":"/jobs/j1","jobId":"j1","jobStatus":"FAILED","correlationId":"c1","processingStage":"settlement",
	"retryable":true,"retryAfter":30,"submittedAt":"2026-09-21T11:59:00Z","vendorCode":{"x":1}}`
	p, ok := provider.DecodeProblem([]byte(body))
	if !ok {
		t.Fatal("not decoded")
	}
	if p.Type != "https://example.com/probs/job-failed" || p.Title != "Job failed" || p.Status != 503 || p.Detail != "settlement down" || p.Instance != "/jobs/j1" {
		t.Errorf("RFC 9457 members wrong: %+v", p)
	}
	if p.JobID != "j1" || p.JobStatus != "FAILED" || p.CorrelationID != "c1" || p.ProcessingStage != "settlement" {
		t.Errorf("extension members wrong: %+v", p)
	}
	if p.Retryable == nil || !*p.Retryable {
		t.Errorf("retryable = %v", p.Retryable)
	}
	if d, ok := p.RetryAfterDelay(now); !ok || d != 30*time.Second {
		t.Errorf("retryAfter = %v %v", d, ok)
	}
	if string(p.Extensions["submittedAt"]) != `"2026-09-21T11:59:00Z"` || string(p.Extensions["vendorCode"]) != `{"x":1}` {
		t.Errorf("unknown extensions not kept: %v", p.Extensions)
	}
	// Round trip keeps the extensions.
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"vendorCode":{"x":1}`) || !strings.Contains(string(b), `"jobId":"j1"`) {
		t.Errorf("marshal lost members: %s", b)
	}
}

func TestProblemMembersOfTheWrongTypeAreIgnored(t *testing.T) {
	p, ok := provider.DecodeProblem([]byte(`{"status":"503","retryable":"yes","title":5,"jobId":"j"}`))
	if !ok {
		t.Fatal("a problem with odd member types must still decode")
	}
	if p.Status != 0 || p.Retryable != nil || p.Title != "" || p.JobID != "j" {
		t.Errorf("got %+v", p)
	}
}

func TestProblemRetryAfterForms(t *testing.T) {
	tests := []struct {
		name, raw string
		want      time.Duration
		ok        bool
	}{
		{"number of seconds", `5`, 5 * time.Second, true},
		{"fractional seconds", `1.5`, 1500 * time.Millisecond, true},
		{"seconds as a string", `"12"`, 12 * time.Second, true},
		{"RFC 3339 timestamp", `"2026-09-21T12:01:00Z"`, time.Minute, true},
		{"HTTP-date", `"Mon, 21 Sep 2026 12:00:10 GMT"`, 10 * time.Second, true},
		{"negative number is ignored", `-1`, 0, false},
		{"garbage string is ignored", `"later"`, 0, false},
		{"object is ignored", `{}`, 0, false},
		{"RFC 3339 timestamp in the past is retry now", `"2026-09-21T11:00:00Z"`, 0, true},
		{"RFC 3339 timestamp two days ahead is capped at a day", `"2026-09-23T12:00:00Z"`, 24 * time.Hour, true},
		{"RFC 3339 timestamp with surrounding spaces", `" 2026-09-21T12:01:00Z "`, time.Minute, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := provider.Problem{RetryAfter: json.RawMessage(tt.raw)}
			got, ok := p.RetryAfterDelay(now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("got %v %v want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestProblemWithoutRetryAfter(t *testing.T) {
	t.Run("a null retryAfter is no hint", func(t *testing.T) {
		p, ok := provider.DecodeProblem([]byte(`{"status":503,"retryAfter":null}`))
		if !ok {
			t.Fatal("not decoded")
		}
		if d, ok := p.RetryAfterDelay(now); ok {
			t.Fatalf("hint %v", d)
		}
	})
	t.Run("no problem is no hint", func(t *testing.T) {
		var p *provider.Problem
		if d, ok := p.RetryAfterDelay(now); ok {
			t.Fatalf("hint %v", d)
		}
	})
	t.Run("an error without a hint has none", func(t *testing.T) {
		if d, ok := provider.RetryAfter(&provider.Error{Op: "get", Class: provider.ErrRetryable}); ok {
			t.Fatalf("hint %v", d)
		}
		if d, ok := provider.RetryAfter(&provider.Error{Op: "get", Class: provider.ErrRetryable, RetryAfter: 3 * time.Second}); !ok || d != 3*time.Second {
			t.Fatalf("hint %v %v", d, ok)
		}
	})
}

func TestProblemExtensionsNeverShadowMembers(t *testing.T) {
	p, ok := provider.DecodeProblem([]byte(`{"type":"t","jobId":"j1","retryAfter":5,"vendor":1}`))
	if !ok {
		t.Fatal("not decoded")
	}
	for _, k := range []string{"type", "jobId", "retryAfter"} {
		if _, ok := p.Extensions[k]; ok {
			t.Errorf("member %s kept as an extension too", k)
		}
	}
	b, err := json.Marshal(provider.Problem{JobID: "j1", Extensions: map[string]json.RawMessage{"jobId": json.RawMessage(`"forged"`), "vendor": json.RawMessage(`1`)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"jobId":"j1"`) || strings.Contains(string(b), "forged") || !strings.Contains(string(b), `"vendor":1`) {
		t.Fatalf("marshal: %s", b)
	}
}

func TestWithinToleranceZeroOrNegativeIsTheDefault(t *testing.T) {
	for _, tol := range []time.Duration{0, -time.Second} {
		if !provider.WithinTolerance(now.Add(-provider.DefaultTolerance), now, tol) {
			t.Errorf("tolerance %v: the default's edge is outside", tol)
		}
		if provider.WithinTolerance(now.Add(-provider.DefaultTolerance-time.Second), now, tol) {
			t.Errorf("tolerance %v: a second past the default is inside", tol)
		}
	}
}

func TestHeaderValue(t *testing.T) {
	tests := []struct {
		name string
		h    http.Header
		want string
	}{
		{"canonical key", http.Header{"Webhook-Id": {"a"}}, "a"},
		{"lower-case key from a hand-built map", http.Header{"webhook-id": {"b"}}, "b"},
		{"upper-case key", http.Header{"WEBHOOK-ID": {"c"}}, "c"},
		{"a key without values is skipped", http.Header{"webhook-id": {}}, ""},
		{"another header is not it", http.Header{"Webhook-Idx": {"d"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := provider.HeaderValue(tt.h, "webhook-id"); got != tt.want {
				t.Fatalf("got %q", got)
			}
		})
	}
}

func TestWithinToleranceBothDirections(t *testing.T) {
	tol := 5 * time.Minute
	for _, tt := range []struct {
		name string
		ts   time.Time
		want bool
	}{
		{"now is inside", now, true},
		{"exactly tolerance old is inside", now.Add(-tol), true},
		{"exactly tolerance in the future is inside", now.Add(tol), true},
		{"four minutes in the future is inside", now.Add(4 * time.Minute), true},
		{"four minutes old is inside", now.Add(-4 * time.Minute), true},
		{"tolerance plus a second old is outside", now.Add(-tol - time.Second), false},
		{"tolerance plus a second in the future is outside", now.Add(tol + time.Second), false},
		{"six minutes old is outside", now.Add(-6 * time.Minute), false},
		{"six minutes in the future is outside", now.Add(6 * time.Minute), false},
		{"far future does not overflow into inside", time.Unix(1<<62, 0), false},
		{"far past does not overflow into inside", time.Unix(-1<<62, 0), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := provider.WithinTolerance(tt.ts, now, tol); got != tt.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}

func TestErrorNamesProviderAndOperation(t *testing.T) {
	err := &provider.Error{Provider: "shop/kuko", Op: "get", Class: provider.ErrRetryable, StatusCode: 503, Detail: "down", RetryAfter: 2 * time.Second}
	msg := err.Error()
	for _, want := range []string{"shop/kuko", "get", "503", "down", "2s"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	providertest.AssertClass(t, err, provider.ErrRetryable)
	if d, ok := provider.RetryAfter(err); !ok || d != 2*time.Second {
		t.Errorf("RetryAfter = %v %v", d, ok)
	}
	if _, ok := provider.RetryAfter(errors.New("plain")); ok {
		t.Error("plain errors carry no hint")
	}
}

func newClient(t *testing.T, url string, timeout time.Duration) *provider.Client {
	t.Helper()
	c, err := provider.NewClient(provider.Config{Name: "ns/p", APIURL: url, Timeout: timeout, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientClassification runs each answer through a real HTTP round trip.
func TestClientClassification(t *testing.T) {
	read := func(r *provider.Request) { r.NotFound = true }
	create := func(r *provider.Request) { r.Method, r.ConflictRetryable = "POST", true }
	post := func(r *provider.Request) { r.Method = "POST" }
	tests := []struct {
		name       string
		req        func(*provider.Request) // nil: a GET of a collection
		handler    http.HandlerFunc
		class      error
		retryAfter time.Duration
	}{
		{"500 is retryable", nil, status(500, "", ""), provider.ErrRetryable, 0},
		{"503 with Retry-After seconds is retryable with the hint", nil, status(503, "7", ""), provider.ErrRetryable, 7 * time.Second},
		{"429 with Retry-After HTTP-date is retryable with the hint", nil, status(429, "Mon, 21 Sep 2026 12:00:09 GMT", ""), provider.ErrRetryable, 9 * time.Second},
		{"408 is retryable", nil, status(408, "", ""), provider.ErrRetryable, 0},
		{"400 is not retryable", nil, status(400, "", `{"error":{"code":"invalid","message":"bad"}}`), provider.ErrNonRetryable, 0},
		{"422 is not retryable", nil, status(422, "", ""), provider.ErrNonRetryable, 0},
		{"404 on a read of one payment is not found", read, status(404, "", ""), provider.ErrNotFound, 0},
		{"404 on a collection route is a configuration problem", nil, status(404, "", ""), provider.ErrProviderConfig, 0},
		{"404 on create is a configuration problem", create, status(404, "", ""), provider.ErrProviderConfig, 0},
		{"401 is a configuration problem", nil, status(401, "", `{"error":"invalid_token"}`), provider.ErrProviderConfig, 0},
		{"401 on a read is a configuration problem, not not-found", read, status(401, "", ""), provider.ErrProviderConfig, 0},
		{"403 is a configuration problem", create, status(403, "", `{"name":"NOT_AUTHORIZED"}`), provider.ErrProviderConfig, 0},
		{"409 on create is retryable (same key in progress)", create, status(409, "2", `{"error":{"code":"idempotency_key_in_use"}}`), provider.ErrRetryable, 2 * time.Second},
		{"409 elsewhere is not retryable", nil, status(409, "", ""), provider.ErrNonRetryable, 0},
		{"problem retryable false beats 503 on a read", nil, problem(503, `{"title":"x","retryable":false}`), provider.ErrNonRetryable, 0},
		// A write's unknown outcome is not made a refusal by "do not retry": a
		// 5xx, 408 or 429 stays retryable (same key), a 409 to a keyed create is a
		// key conflict (its outcome is looked up, SPEC §12.1), a 4xx stays refused.
		{"problem retryable false leaves 503 on a write retryable", post, problem(503, `{"title":"x","retryable":false}`), provider.ErrRetryable, 0},
		{"problem retryable false leaves 500 on a create retryable", create, problem(500, `{"title":"x","retryable":false}`), provider.ErrRetryable, 0},
		{"problem retryable false leaves 429 on a write retryable", post, problem(429, `{"retryable":false}`), provider.ErrRetryable, 0},
		{"problem retryable false leaves 408 on a write retryable", post, problem(408, `{"retryable":false}`), provider.ErrRetryable, 0},
		{"problem retryable false makes 422 on a create a refusal", create, problem(422, `{"title":"invalid amount","retryable":false}`), provider.ErrNonRetryable, 0},
		{"problem retryable false on a 409 to a write without a key is a refusal", post, problem(409, `{"retryable":false}`), provider.ErrNonRetryable, 0},
		{"problem retryable true beats 409", nil, problem(409, `{"title":"busy","retryable":true,"retryAfter":3}`), provider.ErrRetryable, 3 * time.Second},
		{"problem retryable false makes 409 on create a key conflict", create, problem(409, `{"title":"key reused","retryable":false}`), provider.ErrKeyConflict, 0},
		{"problem retryable true beats 400", nil, problem(400, `{"retryable":true}`), provider.ErrRetryable, 0},
		{"problem retryable false keeps 404 on a read not found", read, problem(404, `{"retryable":false,"jobId":"j"}`), provider.ErrNotFound, 0},
		{"problem retryable true makes 404 on a read retryable", read, problem(404, `{"retryable":true,"jobId":"j"}`), provider.ErrRetryable, 0},
		// Configuration wins over the body: rejected credentials do not start working
		// on a retry, and calling them retryable would hide them behind the schedule.
		{"problem retryable true does not make 401 retryable", nil, problem(401, `{"title":"expired key","retryable":true,"retryAfter":5}`), provider.ErrProviderConfig, 5 * time.Second},
		{"problem retryable true does not make 403 retryable", nil, problem(403, `{"retryable":true}`), provider.ErrProviderConfig, 0},
		{"problem retryable false leaves 401 a configuration problem", nil, problem(401, `{"retryable":false}`), provider.ErrProviderConfig, 0},
		{"problem retryable true does not make a 404 route retryable", nil, problem(404, `{"retryable":true}`), provider.ErrProviderConfig, 0},
		{"redirect is not followed and is a configuration problem", nil, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, provider.ErrProviderConfig, 0},
		{"redirect on a read is a configuration problem, not not-found", read, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, provider.ErrProviderConfig, 0},
		{"304 is a configuration problem too", nil, status(304, "", ""), provider.ErrProviderConfig, 0},
		{"2xx with a broken body is retryable (outcome unknown)", nil, status(200, "", "{not json"), provider.ErrRetryable, 0},
		{"oversized body is retryable", nil, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(200)
			_, _ = w.Write([]byte(strings.Repeat(" ", provider.MaxResponseBytes+10)))
		}, provider.ErrRetryable, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var elsewhere atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("/x", tt.handler)
			mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, _ *http.Request) { elsewhere.Add(1); w.Write([]byte(`{}`)) })
			srv := httptest.NewServer(mux)
			defer srv.Close()
			req := provider.Request{Op: "op", Method: "GET", Path: "/x"}
			if tt.req != nil {
				tt.req(&req)
			}
			var out map[string]any
			err := newClient(t, srv.URL, time.Second).Do(context.Background(), req, &out)
			providertest.AssertClass(t, err, tt.class)
			if d, _ := provider.RetryAfter(err); d != tt.retryAfter {
				t.Errorf("retry after = %v, want %v", d, tt.retryAfter)
			}
			if elsewhere.Load() != 0 {
				t.Error("redirect was followed")
			}
		})
	}
}

func TestClientKeepsTheProviderErrorCode(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		code    string
	}{
		{"KukoPay error object", status(409, "", `{"error":{"code":"duplicate_out_trade_no","message":"used"}}`), "duplicate_out_trade_no"},
		{"OAuth2 error string", status(401, "", `{"error":"invalid_client","error_description":"Client Authentication failed"}`), "invalid_client"},
		{"PayPal name", status(422, "", `{"name":"UNPROCESSABLE_ENTITY","message":"x"}`), "UNPROCESSABLE_ENTITY"},
		{"problem type", problem(404, `{"type":"https://example.com/probs/job_not_found"}`), "https://example.com/probs/job_not_found"},
		{"no body", status(500, "", ""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			err := newClient(t, srv.URL, time.Second).Do(context.Background(), provider.Request{Op: "op", Method: "GET", Path: "/x"}, nil)
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Code != tt.code {
				t.Fatalf("err = %v, code %q, want %q", err, pe.Code, tt.code)
			}
		})
	}
}

func TestAmountNotRepresentableIsNonRetryable(t *testing.T) {
	err := provider.AmountNotRepresentable("ns/p", "create", "HUF 1999.50 has fillér")
	providertest.AssertClass(t, err, provider.ErrNonRetryable)
	if !errors.Is(err, provider.ErrAmountNotRepresentable) {
		t.Fatal("does not wrap ErrAmountNotRepresentable")
	}
	for _, want := range []string{"ns/p", "create", "HUF 1999.50"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}

func TestClientDecodesProblemOnError(t *testing.T) {
	srv := httptest.NewServer(problem(422, `{"type":"t","title":"Invalid","jobId":"j9","correlationId":"c9","processingStage":"validation","retryable":false}`))
	defer srv.Close()
	err := newClient(t, srv.URL, time.Second).Do(context.Background(), provider.Request{Op: "create", Method: "POST", Path: "/jobs", JSON: map[string]int{"a": 1}}, nil)
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Problem == nil {
		t.Fatalf("err = %v", err)
	}
	if pe.Problem.JobID != "j9" || pe.Problem.CorrelationID != "c9" || pe.Problem.ProcessingStage != "validation" || pe.StatusCode != 422 {
		t.Errorf("problem = %+v", pe.Problem)
	}
	if !strings.Contains(err.Error(), "ns/p") || !strings.Contains(err.Error(), "create") {
		t.Errorf("error does not name provider and op: %v", err)
	}
}

// silentServer is a server that never answers: a request waits until the
// client gives it up or the test ends.
func silentServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	return srv
}

func TestClientTimeoutIsRetryable(t *testing.T) {
	srv := silentServer(t)
	start := time.Now()
	err := newClient(t, srv.URL, 50*time.Millisecond).Do(context.Background(), provider.Request{Op: "get", Method: "GET", Path: "/"}, nil)
	if !errors.Is(err, provider.ErrRetryable) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("timeout not applied")
	}
}

func TestClientRespectsCancellation(t *testing.T) {
	srv := silentServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	err := newClient(t, srv.URL, 10*time.Second).Do(ctx, provider.Request{Op: "get", Method: "GET", Path: "/"}, nil)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, provider.ErrRetryable) {
		t.Fatalf("err = %v", err)
	}
}

func TestClientDoesNotFollowRedirectsEvenWithCallerClient(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/target" {
			hits.Add(1)
			return
		}
		http.Redirect(w, r, "/target", http.StatusMovedPermanently)
	}))
	defer srv.Close()
	c, err := provider.NewClient(provider.Config{Name: "n", APIURL: srv.URL, HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Do(context.Background(), provider.Request{Op: "get", Method: "GET", Path: "/x", NotFound: true}, nil)
	if !errors.Is(err, provider.ErrProviderConfig) || hits.Load() != 0 {
		t.Fatalf("err = %v, hits = %d", err, hits.Load())
	}
}

func TestNewClientRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "not a url", "/relative"} {
		if _, err := provider.NewClient(provider.Config{Name: "n", APIURL: u}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

func status(code int, retryAfter, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

func problem(code int, body string) http.HandlerFunc {
	return providertest.Answer(code, "application/problem+json; charset=utf-8", body)
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "Mon, 21 Sep 2026 12:00:30 GMT", "Monday, 21-Sep-26 12:01:00 GMT", "Mon Sep 21 12:00:00 2026", "", "-1", "9999999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := provider.ParseRetryAfter(s, now)
		if d < 0 || d > 24*time.Hour || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", s, d, ok)
		}
	})
}

func FuzzDecodeProblem(f *testing.F) {
	for _, s := range []string{`{"title":"x","retryable":true,"retryAfter":5}`, `{"retryAfter":"Mon, 21 Sep 2026 12:00:30 GMT"}`, `{"retryAfter":1e308}`, `{"retryAfter":"NaN"}`, `{"retryAfter":"Inf"}`, `[]`, `null`, `{"status":1e99}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := provider.DecodeProblem(b)
		if !ok {
			return
		}
		if d, ok := p.RetryAfterDelay(now); d < 0 || d > 24*time.Hour || (!ok && d != 0) {
			t.Fatalf("RetryAfterDelay = %v, %v", d, ok)
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatalf("re-marshal: %v", err)
		}
	})
}
