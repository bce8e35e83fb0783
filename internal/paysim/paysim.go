// Package paysim is a payment provider simulator: one HTTP server that speaks the
// KukoPay, PayPal, generic async-job and Stripe APIs exactly as paywarden's adapters expect
// (the wire structs and signing helpers are imported from the adapter packages, so the
// format has one definition), and that misbehaves on purpose.
//
// Per payment the outcome can be scripted (succeed, fail, expire after a delay; stay
// pending or processing; succeed with a different amount; unknown; the payer approves
// after a delay or never). The checkout lifecycle follows each provider: PayPal orders
// wait for the payer, then for the merchant's capture or authorization; KukoPay
// payments may need the payer (requires_action) and be captured manually; refunds are
// resources that settle now, later or fail; authorizations and payer links expire.
// Money-moving calls honour the idempotency headers, so a lost answer retried with the
// same key is replayed, never done twice. Events are recorded
// in a per-provider events list (for backfill) and delivered as signed webhooks with
// each provider's real retry schedule, scaled by a time factor. Faults are injected by
// rate from a seeded random source so a failing run can be replayed. Counters (creates
// per idempotency key, payments actually created, queries per payment, deliveries by
// outcome, faults injected, captures, authorizations, voids and refunds per payment)
// let tests assert "no double charge" and "captured exactly once" instead of guessing.
//
// Routes: /kukopay/..., /paypal/..., /generic/... (an adapter's APIURL is the server
// URL plus the prefix) and the control API under /_paysim/.
package paysim

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Provider names, also the URL prefixes.
const (
	KukoPay = "kukopay"
	PayPal  = "paypal"
	Generic = "generic"
)

var providerNames = []string{KukoPay, PayPal, Generic, Stripe}

func knownProvider(p string) bool {
	for _, n := range providerNames {
		if n == p {
			return true
		}
	}
	return false
}

// Default secrets, used until SetWebhookTarget or Options.WebhookSecrets says otherwise,
// so a dev environment signs something verifiable out of the box.
var defaultSecrets = map[string]string{
	KukoPay: "paysim-kukopay-secret",
	PayPal:  "paysim-paypal-secret",
	Generic: "whsec_cGF5c2ltLWdlbmVyaWMtc2VjcmV0", // base64("paysim-generic-secret")
	Stripe:  "whsec_paysim_stripe_secret",
}

// DefaultPayPalWebhookID is the webhook id paysim signs PayPal events for.
const DefaultPayPalWebhookID = "PAYSIMWEBHOOK0001"

// Lifecycle defaults (see Options).
const (
	DefaultPayPalAuthorizationPeriod  = 29 * 24 * time.Hour
	DefaultPayPalHonorPeriod          = 3 * 24 * time.Hour
	DefaultKukoPayAuthorizationPeriod = 7 * 24 * time.Hour
	DefaultCheckoutTTL                = 24 * time.Hour
	DefaultPayPalOrderLifetime        = 3 * time.Hour
	DefaultPayPalOrderKeyWindow       = 6 * time.Hour
	DefaultPayPalRefundKeyWindow      = 45 * 24 * time.Hour
)

// Options configure a Sim. The zero value is usable.
type Options struct {
	// TimeFactor multiplies every simulated delay: outcome delays (Script.After),
	// webhook retry schedules, the webhook delay fault and the reorder hold. 1 is real
	// time, 0.001 makes KukoPay's 2h retry take 7.2s. Zero means 1.
	TimeFactor float64
	// Now is the clock for timestamps (event times, signature timestamps, token and
	// idempotency-key expiry). Default time.Now. Delays are waited in real time.
	Now func() time.Time
	// Seed makes fault decisions and generated ids reproducible. Zero means 1.
	Seed uint64
	// Logger receives one line per delivery attempt and fault; default discards.
	Logger *slog.Logger

	// Credentials paysim accepts. Empty means any non-empty value is accepted.
	KukoPayAPIKey      string
	PayPalClientID     string
	PayPalClientSecret string
	GenericToken       string
	StripeSecretKey    string

	// PayPalWebhookID is the webhook id paysim signs for and its
	// verify-webhook-signature endpoint expects. Default DefaultPayPalWebhookID.
	PayPalWebhookID string
	// PayPalTokenTTL is the lifetime of issued OAuth2 tokens. Default 9h (PayPal's).
	PayPalTokenTTL time.Duration
	// IdempotencyWindow is how long an idempotency key replays its first answer
	// (KukoPay, generic, and PayPal routes without a documented window). Default 24h.
	IdempotencyWindow time.Duration
	// PayPalOrderKeyWindow is how long a PayPal-Request-Id sent to the Orders v2
	// API (create, authorize, capture of an order) replays its first answer.
	// Default 6h: "The server stores keys for 6 hours" (PayPal Orders v2 API
	// reference, "Create order" and "Authorize payment for order", header
	// PayPal-Request-Id; 72 hours only on request to PayPal).
	PayPalOrderKeyWindow time.Duration
	// PayPalRefundKeyWindow is the same for refunds of a capture. Default 45
	// days: "The server stores keys for 45 days" (PayPal Payments v2 API
	// reference, "Refund captured payment", header PayPal-Request-Id).
	PayPalRefundKeyWindow time.Duration
	// DeliveryTimeout is how long a webhook receiver has to answer. Default 10s; not
	// scaled, because it measures the receiver, not the simulated provider.
	DeliveryTimeout time.Duration

	// PayPalAuthorizationPeriod and KukoPayAuthorizationPeriod are how long an
	// authorization can be captured before it expires (simulated, scaled; a script's
	// AuthorizationPeriod overrides them). Defaults: 29 days (PayPal's) and 7 days.
	PayPalAuthorizationPeriod  time.Duration
	KukoPayAuthorizationPeriod time.Duration
	// PayPalHonorPeriod is how long after a PayPal authorization its funds are
	// guaranteed: "Within this period, there is a 3-day honor period starting
	// from the authorization date ... After the honor period expires, capture
	// success depends on risk assessment and fund availability" (PayPal
	// developer docs, "Authorization and honor period"). A capture after it does
	// what the script's AfterHonorPeriod says. Default 3 days (simulated).
	PayPalHonorPeriod time.Duration
	// CheckoutTTL is how long a KukoPay or generic payer link works when the create
	// request sets no expiry; past it the unpaid payment expires. Default 24h.
	CheckoutTTL time.Duration
	// PayPalOrderLifetime is how long a PayPal order nobody completed (not
	// approved, or approved and neither captured nor authorized) lives; then
	// PayPal deletes it and every call about it answers 404 RESOURCE_NOT_FOUND
	// (INVALID_RESOURCE_ID), with no webhook. It counts from the creation, and
	// again from the payer's approval. Default 3h (simulated, scaled): "Any
	// order that doesn't get completed will automatically expire. The default
	// amount of time is 3 hours" (PayPal SDK maintainers, paypal/Checkout-PHP-SDK
	// issue 84); "the time window for capturing the payment [after approval] is
	// controlled by the merchant, but the default is 3 hours" (PayPal developer
	// docs, "Handle uncaptured payments").
	PayPalOrderLifetime time.Duration

	// DefaultScript is the outcome of payments no rule or metadata scripts. Default:
	// succeed after 2s.
	DefaultScript *Script
	// WebhookTargets and WebhookSecrets configure delivery per provider at start (see
	// SetWebhookTarget). Secrets may be set without a target.
	WebhookTargets map[string]string
	WebhookSecrets map[string][][]byte
	// Faults active from the start.
	Faults Faults
}

// Sim is a running simulator. Create it with New, serve Handler, stop it with Close.
type Sim struct {
	opts   Options
	factor float64
	now    func() time.Time
	log    *slog.Logger
	mux    *http.ServeMux
	client *http.Client // webhook deliveries

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	rng      *rand.Rand // faults; guarded by mu
	idRng    *rand.Rand // ids; separate so id generation does not shift fault decisions
	faults   Faults
	rules    []Rule
	payments map[string]map[string]*payment // provider -> id -> payment
	refunds  map[string]map[string]*refund  // provider -> refund id -> refund
	byAuth   map[string]*payment            // PayPal authorization id -> order
	byCap    map[string]*payment            // PayPal capture id -> order
	idem     map[string]*idemEntry          // "<provider>/<key>"
	events   map[string][]*EventRecord      // provider -> events, oldest first
	targets  map[string]*target
	held     map[string]*heldDelivery // provider -> event held back for reordering
	tokens   map[string]time.Time     // paypal access token -> expiry
	timers   map[*time.Timer]struct{}
	counters Counters
	stripe   *stripeState
}

type target struct {
	url     string
	secrets [][]byte
}

// defaultDuration sets a duration option left zero (or negative) to its default.
func defaultDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// New builds a Sim. It starts no goroutines until payments or deliveries need them.
func New(opts Options) *Sim {
	if opts.TimeFactor <= 0 {
		opts.TimeFactor = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PayPalWebhookID == "" {
		opts.PayPalWebhookID = DefaultPayPalWebhookID
	}
	defaultDuration(&opts.PayPalTokenTTL, 9*time.Hour)
	defaultDuration(&opts.IdempotencyWindow, 24*time.Hour)
	defaultDuration(&opts.PayPalOrderKeyWindow, DefaultPayPalOrderKeyWindow)
	defaultDuration(&opts.PayPalRefundKeyWindow, DefaultPayPalRefundKeyWindow)
	defaultDuration(&opts.DeliveryTimeout, 10*time.Second)
	defaultDuration(&opts.PayPalAuthorizationPeriod, DefaultPayPalAuthorizationPeriod)
	defaultDuration(&opts.PayPalHonorPeriod, DefaultPayPalHonorPeriod)
	defaultDuration(&opts.KukoPayAuthorizationPeriod, DefaultKukoPayAuthorizationPeriod)
	defaultDuration(&opts.CheckoutTTL, DefaultCheckoutTTL)
	defaultDuration(&opts.PayPalOrderLifetime, DefaultPayPalOrderLifetime)
	if opts.DefaultScript == nil {
		opts.DefaultScript = &Script{Outcome: OutcomeSucceed, After: 2 * time.Second}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sim{
		opts: opts, factor: opts.TimeFactor, now: opts.Now, log: opts.Logger,
		ctx: ctx, cancel: cancel,
		rng:      rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15)),
		idRng:    rand.New(rand.NewPCG(opts.Seed, 0x1d1d1d1d)),
		faults:   opts.Faults,
		payments: map[string]map[string]*payment{},
		refunds:  map[string]map[string]*refund{},
		byAuth:   map[string]*payment{},
		byCap:    map[string]*payment{},
		idem:     map[string]*idemEntry{},
		events:   map[string][]*EventRecord{},
		targets:  map[string]*target{},
		held:     map[string]*heldDelivery{},
		tokens:   map[string]time.Time{},
		timers:   map[*time.Timer]struct{}{},
		counters: newCounters(),
		stripe:   newStripeState(),
	}
	s.client = &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		// Providers do not follow redirects: a 3xx is a failed delivery.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	for _, p := range providerNames {
		s.payments[p] = map[string]*payment{}
		s.refunds[p] = map[string]*refund{}
		t := &target{url: opts.WebhookTargets[p], secrets: opts.WebhookSecrets[p]}
		if len(t.secrets) == 0 {
			t.secrets = [][]byte{[]byte(defaultSecrets[p])}
		}
		s.targets[p] = t
	}
	s.mux = s.routes()
	return s
}

// Handler serves all providers' APIs and the control API.
func (s *Sim) Handler() http.Handler { return s.mux }

// Close stops timers and delivery goroutines and waits for them; in-flight webhook
// requests are cancelled. The handler keeps answering API calls after Close, but no
// outcome fires and nothing is delivered any more.
func (s *Sim) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for t := range s.timers {
		t.Stop()
	}
	s.timers = map[*time.Timer]struct{}{}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.client.CloseIdleConnections()
}

// scale turns a simulated duration into the real duration to wait.
func (s *Sim) scale(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(float64(d) * s.factor)
}

// goLocked starts fn in a tracked goroutine; s.mu must be held. Adding to the
// WaitGroup only under the lock and only while open means Close's Wait never races
// with an Add.
func (s *Sim) goLocked(fn func()) {
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn()
	}()
}

// afterLocked runs fn after the simulated delay d (scaled) in a tracked goroutine;
// s.mu must be held. fn runs without the lock.
func (s *Sim) afterLocked(d time.Duration, fn func()) {
	if s.closed {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(s.scale(d), func() {
		s.mu.Lock()
		delete(s.timers, t)
		s.goLocked(fn)
		s.mu.Unlock()
	})
	s.timers[t] = struct{}{}
}

// sleep waits the real duration d or until the Sim closes; false when closed.
func (s *Sim) sleep(d time.Duration) bool {
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// newID returns prefix plus n random characters from alphabet; s.mu must be held.
func (s *Sim) newID(prefix string, n int, alphabet string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for range n {
		b.WriteByte(alphabet[s.idRng.IntN(len(alphabet))])
	}
	return b.String()
}

const (
	hexAlphabet   = "0123456789abcdef"
	upperAlphaNum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	alphaNum      = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
)

// SetWebhookTarget sets where provider's webhooks go and which secrets sign them (one,
// or two during a rotation: every secret adds a signature). An empty url stops delivery
// but keeps recording events; no secrets keeps the current ones. For paypal the secrets
// are what paysim's verify-webhook-signature endpoint checks against.
func (s *Sim) SetWebhookTarget(provider, url string, secrets ...[]byte) error {
	if !knownProvider(provider) {
		return fmt.Errorf("paysim: unknown provider %q", provider)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[provider]
	t.url = url
	if len(secrets) > 0 {
		t.secrets = make([][]byte, len(secrets))
		for i, sec := range secrets {
			t.secrets[i] = append([]byte(nil), sec...)
		}
	}
	return nil
}

// WebhookSecrets returns the secrets provider's webhooks are signed with.
func (s *Sim) WebhookSecrets(provider string) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.targets[provider]
	if !ok {
		return nil
	}
	out := make([][]byte, len(t.secrets))
	for i, sec := range t.secrets {
		out[i] = append([]byte(nil), sec...)
	}
	return out
}

// PayPalWebhookID is the webhook id paysim signs PayPal events for.
func (s *Sim) PayPalWebhookID() string { return s.opts.PayPalWebhookID }

// RevokePayPalTokens invalidates every issued PayPal token, as PayPal does on a
// credential rotation; clients must notice the 401 and fetch a new one.
func (s *Sim) RevokePayPalTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens = map[string]time.Time{}
}
