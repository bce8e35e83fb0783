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
}

// Recorder is a reverse proxy that time-stamps every request it forwards:
// in front of paysim it sees every provider call paywarden makes (for the
// rate-limit check), in front of the receiver every webhook delivery and
// its answer (for "every delivered event stored exactly once").
type Recorder struct {
	URL string

	keepBody bool
	srv      *http.Server
	mu       sync.Mutex
	calls    []Call
}

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
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 512,
		IdleConnTimeout:     30 * time.Second,
	}
	proxy.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		w.WriteHeader(http.StatusBadGateway)
	}
	r.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			c := Call{At: time.Now(), Method: req.Method, Path: req.URL.Path}
			if r.keepBody {
				b, _ := io.ReadAll(req.Body)
				req.Body.Close()
				req.Body = io.NopCloser(bytes.NewReader(b))
				c.Body, c.Header = b, req.Header.Clone()
			}
			sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
			proxy.ServeHTTP(sw, req)
			c.Status = sw.status
			r.mu.Lock()
			r.calls = append(r.calls, c)
			r.mu.Unlock()
		}),
	}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
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

// Close stops the proxy.
func (r *Recorder) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
