// Package webhookreceiver is paywarden's webhook endpoint: POST
// /webhooks/{namespace}/{provider}. It caps and reads the raw body, verifies
// the signature through the provider's adapter with the provider's active
// secrets, parses the event and hands it to the inbox, then maps the outcome
// to an HTTP status (SPEC §6). It has no business rules of its own: what an
// event means for a payment is decided in internal/inbox and internal/payment.
//
// The receiver is stateless and scales horizontally. It reads PaymentProviders,
// Secrets and Payments through a cache (a rotated secret takes effect on the
// next request) and writes with a client. It also serves /healthz, /readyz and,
// when given a gatherer, /metrics.
//
// It is the one component the internet reaches, so everything an
// unauthenticated client can make it spend is bounded: header bytes and time,
// body bytes (nothing before the first one arrives; from it, a buffer within
// the bytes the request reserved of MaxBodyBytesInFlight, sized by a declared
// length or doubling as bytes arrive), the
// time a body may take once it has started, the number of requests past
// their first body byte (in all and per provider), and the calls a forged
// request can make it send to a provider that verifies signatures through
// its API (a per-provider token bucket and a verdict cache).
// docs/receiver.md lists each bound with the test that proves it.
package webhookreceiver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
)

// Defaults of Options.
const (
	DefaultApplyBudget       = 2 * time.Second
	DefaultStoreTimeout      = 3 * time.Second
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultShutdownTimeout   = 20 * time.Second
	DefaultRetryAfter        = 10 * time.Second
	// DefaultBodyReadTimeout bounds a body from its first byte: a provider
	// sends a webhook of a few KiB in one go, in milliseconds.
	DefaultBodyReadTimeout = 5 * time.Second
	// DefaultMaxHeaderBytes caps request headers; signature headers are a
	// few hundred bytes.
	DefaultMaxHeaderBytes = 64 << 10
	// DefaultMaxConcurrentRequests bounds requests past their first body
	// byte: with the default 1 MiB maxBodyBytes, at most 256 MiB of bodies.
	DefaultMaxConcurrentRequests = 256
	// DefaultMaxBodyBytesInFlight bounds the body bytes the requests past
	// their first body byte may hold, a quarter of the shipped 1 GiB memory
	// limit: a provider's maxBodyBytes may be 16 MiB, and 256 such bodies
	// would be 4 GiB.
	DefaultMaxBodyBytesInFlight = 256 << 20
	// DefaultProviderShareDivisor: unless set, a provider may hold at most a
	// quarter of MaxConcurrentRequests (64 of 256), so whoever floods one
	// provider's URL leaves three quarters to the others.
	DefaultProviderShareDivisor = 4
	// DefaultVerifyQPS and DefaultVerifyBurst bound, per provider and
	// replica, the calls to a provider's signature-verification API.
	DefaultVerifyQPS   = 5
	DefaultVerifyBurst = 10
	// DefaultVerdictCacheSize bounds the remembered verification verdicts.
	DefaultVerdictCacheSize = 10000
	DefaultRecentEvents     = 65536
)

// Options configure a Server. Client, Reader and APIReader are required.
type Options struct {
	// Client creates WebhookEvents and writes WebhookEvent and Payment status.
	Client client.Client
	// Reader reads PaymentProviders, Secrets and Payments: a cache with the
	// indexes of inbox.SetupIndexes.
	Reader client.Reader
	// APIReader re-reads after write conflicts, from the API server.
	APIReader client.Reader
	// BundleNamespace holds the webhook verification bundles the manager
	// maintains (bundle.go); the receiver reads no other Secret. Required.
	BundleNamespace string
	// Recorder receives Kubernetes Events for payment changes; may be nil.
	Recorder events.EventRecorder
	// Clock is used for signature timestamps and the records; default real time.
	Clock clock.PassiveClock
	// HTTPClient, when set, is used by the provider adapters (PayPal verifies
	// webhooks through its API).
	HTTPClient *http.Client

	// Addr is the listen address of Start (e.g. ":8080"), unless Listener is set.
	Addr string
	// Listener, when set, is served by Start instead of listening on Addr.
	Listener net.Listener
	// Namespaces, when non-empty, are the only namespaces served; other paths
	// answer 404 as if the provider did not exist.
	Namespaces []string

	// ApplyBudget bounds applying an event after it is stored; what does not
	// finish stays Pending for the manager's inbox processor.
	ApplyBudget time.Duration
	// StoreTimeout bounds the WebhookEvent create; past it the request gets
	// 503 and the provider retries.
	StoreTimeout time.Duration
	// ReadHeaderTimeout and ReadTimeout (headers and body) bound slow clients.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	// BodyReadTimeout bounds the rest of a body once its first byte has
	// arrived (and ReadTimeout still bounds the whole request): a request
	// holds an in-flight slot from that byte, so a client that sends one
	// byte and stalls holds it this long at most, then gets 408.
	BodyReadTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections.
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the graceful drain of in-flight requests.
	ShutdownTimeout time.Duration
	// RetryAfter is sent with 503 answers.
	RetryAfter time.Duration
	// MaxHeaderBytes caps the request line and headers; more is answered 431.
	MaxHeaderBytes int
	// MaxConcurrentRequests bounds the webhook requests being read past
	// their first body byte, verified, stored or applied. A request beyond it
	// is answered 503 with Retry-After at once, without reading its body.
	// Requests still waiting for their first body byte do not count: they
	// hold a connection and a goroutine but no body, and ReadTimeout ends
	// them, so idle connections cannot crowd out deliveries that arrive whole.
	MaxConcurrentRequests int
	// MaxConcurrentRequestsPerProvider bounds the slots of
	// MaxConcurrentRequests one PaymentProvider (its URL) may hold; beyond it
	// the provider's requests are shed the same way. Its path is public, so
	// without this anyone could fill every slot through one URL and shed
	// every tenant. Default MaxConcurrentRequests/4 (at least 1).
	MaxConcurrentRequestsPerProvider int
	// MaxBodyBytesInFlight bounds the body bytes those requests may hold: a
	// request reserves what its body can take (its Content-Length, else
	// twice its provider's maxBodyBytes, what a buffer grown while reading
	// may reach) before it is read, and beyond the bound it is answered 503
	// with Retry-After at once. A provider may hold the same share of it as
	// of MaxConcurrentRequests. Default DefaultMaxBodyBytesInFlight.
	MaxBodyBytesInFlight int64
	// VerifyQPS and VerifyBurst are the token bucket, per provider, for
	// signature verifications that call the provider's API (PayPal). A
	// request that would need a call when the bucket is empty is answered
	// 503 with Retry-After; the provider delivers it again later.
	VerifyQPS   float64
	VerifyBurst int
	// VerdictCacheSize bounds how many of those verdicts are remembered; a
	// verdict is kept while its transmission time is within the tolerance.
	VerdictCacheSize int
	// RecentEvents is how many stored events the receiver remembers, so a
	// provider's repeated delivery is answered "duplicate" without an API
	// request (default DefaultRecentEvents; negative disables).
	RecentEvents int
	// SyncResults records each event's result before answering (three API
	// writes per new event instead of two). Off by default: the result
	// follows the answer, and the inbox processor finishes any that is lost.
	SyncResults bool

	// Ready reports whether the caches are synced; /readyz, and webhooks with
	// Retry-After, are answered 503 until it returns true. Nil means ready
	// once Start serves.
	Ready func(ctx context.Context) bool
	// Gatherer, when set, is served on /metrics.
	Gatherer prometheus.Gatherer
	// Logger is the base logger; request logs carry provider and eventID,
	// never secrets or bodies.
	Logger logr.Logger
}

// Server is the webhook receiver. Create it with New; serve Handler in tests
// or run Start.
type Server struct {
	opts       Options
	clock      clock.PassiveClock
	inbox      *inbox.Inbox
	adapters   *gateway.Gateway
	namespaces map[string]bool
	handler    http.Handler
	// slots are held by requests past their first body byte.
	slots  *slots
	verify *apiVerification

	synced   atomic.Bool // caches synced
	draining atomic.Bool // shutting down: not ready for new traffic
}

// New builds a Server.
func New(opts Options) (*Server, error) {
	if opts.Client == nil || opts.Reader == nil || opts.APIReader == nil || opts.BundleNamespace == "" {
		return nil, errors.New("webhookreceiver: Client, Reader, APIReader and BundleNamespace are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	setDefault(&opts.ApplyBudget, DefaultApplyBudget)
	setDefault(&opts.StoreTimeout, DefaultStoreTimeout)
	setDefault(&opts.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDefault(&opts.ReadTimeout, DefaultReadTimeout)
	setDefault(&opts.BodyReadTimeout, DefaultBodyReadTimeout)
	setDefault(&opts.IdleTimeout, DefaultIdleTimeout)
	setDefault(&opts.ShutdownTimeout, DefaultShutdownTimeout)
	setDefault(&opts.RetryAfter, DefaultRetryAfter)
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if opts.MaxConcurrentRequests <= 0 {
		opts.MaxConcurrentRequests = DefaultMaxConcurrentRequests
	}
	if opts.MaxConcurrentRequestsPerProvider <= 0 {
		opts.MaxConcurrentRequestsPerProvider = max(1, opts.MaxConcurrentRequests/DefaultProviderShareDivisor)
	}
	if opts.MaxBodyBytesInFlight <= 0 {
		opts.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	if opts.VerifyQPS <= 0 {
		opts.VerifyQPS = DefaultVerifyQPS
	}
	if opts.VerifyBurst <= 0 {
		opts.VerifyBurst = DefaultVerifyBurst
	}
	if opts.VerdictCacheSize <= 0 {
		opts.VerdictCacheSize = DefaultVerdictCacheSize
	}
	if opts.RecentEvents == 0 {
		opts.RecentEvents = DefaultRecentEvents
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	s := &Server{
		opts:  opts,
		clock: opts.Clock,
		inbox: &inbox.Inbox{
			Client: opts.Client, Reader: opts.Reader, APIReader: opts.APIReader,
			Recorder: opts.Recorder, Clock: opts.Clock,
			Recent: inbox.NewRecentEvents(opts.RecentEvents),
		},
		// The gateway is the one place that builds an adapter from a
		// PaymentProvider and its credentials; it caches the adapter until
		// the provider or its credentials Secret changes (PayPal keeps its
		// OAuth token in the adapter).
		adapters: &gateway.Gateway{Reader: bundleCredentials{Reader: opts.Reader, namespace: opts.BundleNamespace}, HTTPClient: opts.HTTPClient},
		slots: newSlots(opts.MaxConcurrentRequests, opts.MaxConcurrentRequestsPerProvider,
			opts.MaxBodyBytesInFlight, opts.MaxBodyBytesInFlight*int64(min(opts.MaxConcurrentRequestsPerProvider, opts.MaxConcurrentRequests))/int64(opts.MaxConcurrentRequests)),
		verify: newAPIVerification(opts.VerifyQPS, opts.VerifyBurst, opts.VerdictCacheSize, opts.Clock),
	}
	if !opts.SyncResults {
		// An event is acknowledged once it is stored and applied; its result
		// on the record follows.
		s.inbox.Results = inbox.NewResultQueue(4*opts.MaxConcurrentRequests, 4, opts.StoreTimeout)
	}
	if len(opts.Namespaces) > 0 {
		s.namespaces = map[string]bool{}
		for _, ns := range opts.Namespaces {
			s.namespaces[ns] = true
		}
	}
	s.handler = s.routes()
	return s, nil
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Handler serves the webhook, health and metrics endpoints.
func (s *Server) Handler() http.Handler { return s.handler }

// routes dispatches on the path by hand. http.ServeMux answers unclean paths
// ("//", "..", a missing trailing slash) with a 301, and a provider must
// never get a 3xx: it counts as a failed delivery and some follow it.
func (s *Server) routes() http.Handler {
	var metricsHandler http.Handler
	if s.opts.Gatherer != nil {
		metricsHandler = promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch path := r.URL.Path; {
		case len(path) > len(webhookPrefix) && path[:len(webhookPrefix)] == webhookPrefix:
			s.serveWebhook(w, r)
		case path == "/healthz":
			writeText(w, http.StatusOK, "ok")
		case path == "/readyz":
			if s.ready() {
				writeText(w, http.StatusOK, "ok")
			} else {
				writeText(w, http.StatusServiceUnavailable, "not ready")
			}
		case path == "/metrics" && metricsHandler != nil:
			metricsHandler.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

func (s *Server) ready() bool {
	if s.draining.Load() {
		return false
	}
	return s.cachesSynced()
}

// cachesSynced is false until the caches have synced. Until then webhooks
// are answered 503: an empty cache would call every provider unknown.
func (s *Server) cachesSynced() bool {
	return s.opts.Ready == nil || s.synced.Load()
}

// acquire takes an in-flight slot and the bytes of a body of at most n
// bytes for prov without waiting, or returns why not (a shed reason);
// release gives them back.
func (s *Server) acquire(prov types.NamespacedName, n int64) (shedReason string) {
	if shedReason = s.slots.acquire(prov, n); shedReason == "" {
		inFlight.Inc()
	}
	return shedReason
}

func (s *Server) release(prov types.NamespacedName, n int64) {
	s.slots.release(prov, n)
	inFlight.Dec()
}

// NeedLeaderElection is false: every receiver replica serves (manager.Runnable).
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx is cancelled, then stops accepting connections and
// drains in-flight requests for up to ShutdownTimeout. Requests are not
// cancelled by ctx: an event being stored or applied is finished, so the
// provider gets its answer instead of a reset connection.
func (s *Server) Start(ctx context.Context) error {
	ln := s.opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.opts.Addr); err != nil {
			return fmt.Errorf("webhookreceiver: listen on %s: %w", s.opts.Addr, err)
		}
	}
	// Connections remember their read deadline, so the body deadline can
	// be held to ReadTimeout (limitBodyTime).
	ln = deadlineListener{ln}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		// ReadTimeout covers the body too: a client trickling a 1 MiB body,
		// or declaring one and sending nothing, cannot hold a connection
		// for longer; BodyReadTimeout bounds a body, and its in-flight
		// slot, from its first byte.
		ReadTimeout: s.opts.ReadTimeout,
		ConnContext: withConn,
		// Writing covers verify, store and apply; the budgets below bound
		// them, this is the backstop.
		WriteTimeout:   s.opts.ReadTimeout + s.opts.StoreTimeout + s.opts.ApplyBudget + 15*time.Second,
		IdleTimeout:    s.opts.IdleTimeout,
		MaxHeaderBytes: s.opts.MaxHeaderBytes,
		BaseContext:    func(net.Listener) context.Context { return logr.NewContext(context.Background(), s.opts.Logger) },
	}
	if s.opts.Ready != nil {
		go func() {
			if s.opts.Ready(ctx) {
				s.synced.Store(true)
			}
		}()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.opts.Logger.Info("webhook receiver serving", "addr", ln.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("webhookreceiver: serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		_ = srv.Close()
		return fmt.Errorf("webhookreceiver: graceful shutdown: %w", err)
	}
	if s.inbox.Results != nil {
		// Results not written by now are finished by the inbox processor.
		s.inbox.Results.Close(shutdownCtx)
	}
	s.opts.Logger.Info("webhook receiver stopped")
	return nil
}

func writeText(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg + "\n"))
}
