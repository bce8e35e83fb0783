package webhookreceiver

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/provider"
)

// errVerifyBudget means the request needs a call to the provider's
// verification API and the provider's bucket is empty: 503, the provider
// delivers it again.
var errVerifyBudget = errors.New("provider signature verification budget exhausted")

// verifySignature checks a webhook's signature with the provider's adapter.
// Local checks (HMAC) are cheap and go straight to the adapter; a
// verification that calls the provider's API (the adapter is a
// provider.RemoteVerifier) goes through apiVerification.
func (s *Server) verifySignature(ctx context.Context, adapter *gateway.Entry, prov *v1alpha1.PaymentProvider, h http.Header, body []byte, secrets [][]byte) (string, error) {
	tolerance, now := prov.Spec.WebhookTolerance(), s.clock.Now()
	if adapter.RemoteVerifier == nil {
		return adapter.Provider.VerifyWebhook(ctx, h, body, secrets, tolerance, now)
	}
	return s.verify.do(ctx, adapter.Provider, adapter.RemoteVerifier, prov, h, body, secrets, tolerance, now)
}

// apiVerification guards the verifications that cost a call to the provider
// (PayPal's verify-webhook-signature). Without it every forged request that
// looks well formed would become one call made with the merchant's
// credentials, spending the account's API quota. Two things stand in front
// of the call:
//
//   - a verdict cache: the verdict (valid or not) on one exact request is
//     remembered while the time it was sent is within the tolerance, so a
//     replayed or redelivered request costs no second call. The key is the
//     provider and the adapter's VerificationKey, which covers everything
//     the adapter sends the provider to verify (for PayPal its webhook id,
//     every transmission header and the body), so a forgery that reuses a
//     genuine transmission id has a key of its own and cannot poison the
//     genuine request's verdict;
//   - a token bucket per provider: a request that needs a call when the
//     bucket is empty gets errVerifyBudget.
type apiVerification struct {
	qps      rate.Limit
	burst    int
	clock    clock.PassiveClock
	verdicts *cache.LRUExpireCache

	mu       sync.Mutex
	limiters map[types.NamespacedName]*rate.Limiter
}

// verdict is one remembered VerifyWebhook answer: err is nil or wraps
// provider.ErrInvalidSignature; transient errors are never remembered.
type verdict struct {
	scheme string
	err    error
}

func newAPIVerification(qps float64, burst, size int, clk clock.PassiveClock) *apiVerification {
	return &apiVerification{
		qps: rate.Limit(qps), burst: burst, clock: clk,
		verdicts: cache.NewLRUExpireCacheWithClock(size, clk),
		limiters: map[types.NamespacedName]*rate.Limiter{},
	}
}

// verdictKey identifies one exact request to one provider.
type verdictKey struct {
	provider types.NamespacedName
	request  string // the adapter's VerificationKey
}

func (a *apiVerification) do(ctx context.Context, p provider.Provider, rv provider.RemoteVerifier, prov *v1alpha1.PaymentProvider, h http.Header, body []byte, secrets [][]byte, tolerance time.Duration, now time.Time) (string, error) {
	request, sentAt, err := rv.VerificationKey(h, body)
	if err != nil || !provider.WithinTolerance(sentAt, now, tolerance) {
		// The adapter rejects these itself without a call. Out-of-window
		// requests are never looked up either: a remembered verdict must not
		// outlive the tolerance of the request it was given to.
		return p.VerifyWebhook(ctx, h, body, secrets, tolerance, now)
	}
	key := verdictKey{provider: types.NamespacedName{Namespace: prov.Namespace, Name: prov.Name}, request: request}
	if v, ok := a.verdicts.Get(key); ok {
		verifyAPI.WithLabelValues(prov.Name, verifyCached).Inc()
		v := v.(verdict)
		return v.scheme, v.err
	}
	if !a.limiter(prov).AllowN(now, 1) {
		verifyAPI.WithLabelValues(prov.Name, verifyRateLimited).Inc()
		return "", errVerifyBudget
	}
	verifyAPI.WithLabelValues(prov.Name, verifyCalled).Inc()
	scheme, err := p.VerifyWebhook(ctx, h, body, secrets, tolerance, now)
	if err == nil || errors.Is(err, provider.ErrInvalidSignature) {
		// Kept until the time it was sent leaves the window, after which
		// the adapter rejects the request without a call anyway.
		if ttl := sentAt.Add(tolerance).Sub(now); ttl > 0 {
			a.verdicts.Add(key, verdict{scheme: scheme, err: err}, ttl)
		}
	}
	return scheme, err
}

// limiter is prov's bucket; there is one per provider that exists, as the
// caller found prov in the cache.
func (a *apiVerification) limiter(prov *v1alpha1.PaymentProvider) *rate.Limiter {
	key := types.NamespacedName{Namespace: prov.Namespace, Name: prov.Name}
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.limiters[key]
	if l == nil {
		l = rate.NewLimiter(a.qps, a.burst)
		a.limiters[key] = l
	}
	return l
}
