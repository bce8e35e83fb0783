package harness

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// Call is one request that went through a Recorder.
type Call struct {
	At     time.Time // when the request reached the recorder
	Method string
	Path   string
	Status int // the answer's status; 502 when the target was unreachable
	Header http.Header
	Body   []byte // kept only when the recorder keeps bodies
	// Key is the request's idempotency key (Idempotency-Key, or PayPal's
	// PayPal-Request-Id), whatever the recorder keeps.
	Key string
	// Replayed: the target answered with Idempotent-Replayed: true (it had
	// done this call before and only repeated its first answer).
	Replayed bool
	// Owner is the process that sent the request (Recorder.SetOwner).
	Owner string
	// Refused: a Refuse gate answered it; it never reached the target.
	// Held: a Hold gate kept it; Dropped: and never let it through.
	Refused, Held, Dropped bool
}

// Recorder is a reverse proxy that time-stamps every request it forwards:
// in front of paysim it sees every provider call paywarden makes (for the
// rate-limit check), in front of the receiver every webhook delivery and
// its answer (for "every delivered event stored exactly once"). Gates
// (Hold, Refuse) let a test keep back or refuse chosen requests: a call
// that goes out as its sender dies, a provider that refuses one payment's
// calls for a while, webhooks that arrive late.
type Recorder struct {
	URL string

	keepBody bool
	srv      *http.Server
	proxy    *httputil.ReverseProxy
	mu       sync.Mutex
	calls    []Call
	owner    func(remote string) string
	holds    []*Held
	refusals []*refusal
}

type ownerKey struct{}

// NewRecorder listens on a free loopback port and forwards to target.
func NewRecorder(target string, keepBody bool) (*Recorder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Recorder{URL: "http://" + ln.Addr().String(), keepBody: keepBody}
	r.proxy = httputil.NewSingleHostReverseProxy(u)
	r.proxy.Transport = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     30 * time.Second,
	}
	r.proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		w.WriteHeader(http.StatusBadGateway)
	}
	r.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler:           http.HandlerFunc(r.serve),
		// The sender of a connection is looked up once, while it is
		// connected: its requests carry it.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			r.mu.Lock()
			owner := r.owner
			r.mu.Unlock()
			if owner == nil {
				return ctx
			}
			return context.WithValue(ctx, ownerKey{}, owner(c.RemoteAddr().String()))
		},
	}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *Recorder) serve(w http.ResponseWriter, req *http.Request) {
	c := Call{At: time.Now(), Method: req.Method, Path: req.URL.Path}
	c.Owner, _ = req.Context().Value(ownerKey{}).(string)
	c.Key = req.Header.Get("Idempotency-Key")
	if c.Key == "" {
		c.Key = req.Header.Get("PayPal-Request-Id")
	}
	var body []byte
	if r.keepBody || req.Method == http.MethodPost {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	if r.keepBody {
		c.Body, c.Header = body, req.Header.Clone()
	}
	if ref := r.refused(req, body); ref != nil {
		c.Refused, c.Status = true, ref.status
		w.WriteHeader(ref.status)
		r.record(c)
		return
	}
	if h := r.held(req, body); h != nil {
		c.Held = true
		if !h.wait() {
			c.Dropped, c.Status = true, http.StatusBadGateway
			w.WriteHeader(http.StatusBadGateway)
			r.record(c)
			return
		}
		// Let through: it reaches the target even when its sender is gone
		// (a call that went out as its sender died).
		req = req.WithContext(context.WithoutCancel(req.Context()))
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	r.proxy.ServeHTTP(sw, req)
	c.Status, c.Replayed = sw.status, sw.replayed
	r.record(c)
}

func (r *Recorder) record(c Call) {
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
}

// SetOwner makes the recorder ask owner, once per connection, which process
// sent it (from the connection's remote address; see SocketOwner).
func (r *Recorder) SetOwner(owner func(remote string) string) {
	r.mu.Lock()
	r.owner = owner
	r.mu.Unlock()
}

// Match picks requests by method, path and body.
type Match func(req *http.Request, body []byte) bool

// Held is a Hold gate: the requests it matches wait until it is released.
type Held struct {
	match   Match
	max     time.Duration
	mu      sync.Mutex
	caught  int
	done    chan struct{}
	forward bool
	arrived chan struct{} // signalled on every request caught
}

// Hold keeps the requests match picks from the target until Release, or
// for max at most (then they go through). A request that goes through after
// its sender gave up still reaches the target.
func (r *Recorder) Hold(match Match, max time.Duration) *Held {
	h := &Held{match: match, max: max, done: make(chan struct{}), arrived: make(chan struct{}, 1024)}
	r.mu.Lock()
	r.holds = append(r.holds, h)
	r.mu.Unlock()
	return h
}

func (r *Recorder) held(req *http.Request, body []byte) *Held {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range r.holds {
		select {
		case <-h.done:
			continue
		default:
		}
		if h.match(req, body) {
			h.mu.Lock()
			h.caught++
			h.mu.Unlock()
			select {
			case h.arrived <- struct{}{}:
			default:
			}
			return h
		}
	}
	return nil
}

// wait blocks until release or max; it reports whether to let the request
// through.
func (h *Held) wait() bool {
	t := time.NewTimer(h.max)
	defer t.Stop()
	select {
	case <-h.done:
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.forward
	case <-t.C:
		return true
	}
}

// Caught is how many requests the gate has kept.
func (h *Held) Caught() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.caught
}

// WaitCaught waits until the gate has kept n requests, or for timeout.
func (h *Held) WaitCaught(n int, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for h.Caught() < n {
		select {
		case <-h.arrived:
		case <-deadline:
			return h.Caught() >= n
		}
	}
	return true
}

// Release ends the gate: the requests it keeps go through (forward) or are
// dropped (never reach the target), and it keeps no more.
func (h *Held) Release(forward bool) {
	h.mu.Lock()
	select {
	case <-h.done:
	default:
		h.forward = forward
		close(h.done)
	}
	h.mu.Unlock()
}

type refusal struct {
	match  Match
	status int
	done   chan struct{}
}

// Refuse answers the requests match picks with status, without forwarding
// them, until the returned stop is called.
func (r *Recorder) Refuse(match Match, status int) (stop func()) {
	ref := &refusal{match: match, status: status, done: make(chan struct{})}
	r.mu.Lock()
	r.refusals = append(r.refusals, ref)
	r.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ref.done) }) }
}

func (r *Recorder) refused(req *http.Request, body []byte) *refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ref := range r.refusals {
		select {
		case <-ref.done:
			continue
		default:
		}
		if ref.match(req, body) {
			return ref
		}
	}
	return nil
}

// Calls returns the recorded calls, in the order they were answered.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Reset forgets the recorded calls.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

// Close stops the proxy; held requests go through.
func (r *Recorder) Close() {
	r.mu.Lock()
	holds := r.holds
	r.mu.Unlock()
	for _, h := range holds {
		h.Release(true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

type statusWriter struct {
	http.ResponseWriter
	status   int
	wrote    bool
	replayed bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
		s.replayed = s.Header().Get("Idempotent-Replayed") == "true"
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
