package webhookreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/provider"
)

const webhookPrefix = "/webhooks/"

// response is the body of every webhook answer. Providers only look at the
// status code; the body helps whoever reads a provider's delivery log.
type response struct {
	Result string `json:"result"`
	Event  string `json:"event,omitempty"`
}

// request carries what one webhook request has learned so far.
type request struct {
	start    time.Time
	provider string // label value; empty until the provider is known to exist
	ns       string // namespace label value, set with provider
	log      logr.Logger
}

// serveWebhook implements SPEC §6 step by step. Nothing is written to the API
// server before the signature is verified and the event parsed.
func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	req := &request{start: time.Now(), log: s.opts.Logger.WithValues("remote", r.RemoteAddr)}
	ns, name, ok := parsePath(r.URL.Path)
	if !ok || (s.namespaces != nil && !s.namespaces[ns]) {
		s.reject(w, req, http.StatusNotFound, metrics.WebhookNotFound, "unknown provider")
		return
	}
	// Requests are finished even if the provider hangs up: a half-done store
	// or apply would only leave more for the inbox processor. Deadlines come
	// from the store timeout and the apply budget instead.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.opts.StoreTimeout+s.opts.ApplyBudget)
	defer cancel()

	prov := &v1alpha1.PaymentProvider{}
	if err := s.opts.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, prov); err != nil {
		if apierrors.IsNotFound(err) {
			s.reject(w, req, http.StatusNotFound, metrics.WebhookNotFound, "unknown provider")
			return
		}
		req.log.Error(err, "read PaymentProvider", "provider", ns+"/"+name)
		s.unavailable(w, req, "provider configuration unavailable")
		return
	}
	req.ns, req.provider = prov.Namespace, prov.Name
	req.log = req.log.WithValues("provider", ns+"/"+name)
	ctx = logr.NewContext(ctx, req.log)

	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.reject(w, req, http.StatusMethodNotAllowed, metrics.WebhookMethodNotAllowed, "method not allowed")
		return
	}

	body, code, err := readBody(w, r, prov.Spec.WebhookMaxBodyBytes())
	if err != nil {
		req.log.Info("webhook rejected: body not read", "status", code, "reason", err.Error())
		result := metrics.WebhookMalformed
		if code == http.StatusRequestEntityTooLarge {
			result = metrics.WebhookTooLarge
		}
		s.reject(w, req, code, result, http.StatusText(code))
		return
	}

	secrets, err := s.signingSecrets(ctx, prov)
	if err != nil {
		req.log.Error(err, "read webhook signing secrets")
		s.unavailable(w, req, "signing secrets unavailable")
		return
	}
	entry, err := s.adapters.For(ctx, prov)
	if err != nil {
		// Without an adapter the request cannot be judged either way; 503
		// keeps the event at the provider until the configuration is fixed.
		req.log.Error(err, "build provider adapter")
		s.unavailable(w, req, "provider adapter unavailable")
		return
	}
	scheme, err := entry.Provider.VerifyWebhook(ctx, r.Header, body, secrets, prov.Spec.WebhookTolerance(), s.clock.Now())
	if errors.Is(err, provider.ErrInvalidSignature) {
		// The reason names which check failed (header, format, signature,
		// timestamp); adapters never put secrets or the body in it.
		req.log.Info("webhook rejected: invalid signature", "reason", err.Error())
		s.reject(w, req, http.StatusUnauthorized, metrics.WebhookInvalidSignature, "invalid signature")
		return
	}
	if err != nil {
		req.log.Error(err, "webhook signature could not be verified")
		s.unavailable(w, req, "signature verification unavailable")
		return
	}

	ev, err := entry.Provider.ParseEvent(body)
	if err != nil {
		req.log.Info("webhook rejected: malformed event", "reason", err.Error())
		s.reject(w, req, http.StatusBadRequest, metrics.WebhookMalformed, "malformed event")
		return
	}
	req.log = req.log.WithValues("eventID", ev.ID, "type", ev.Type)
	ctx = logr.NewContext(ctx, req.log)

	out, err := s.inbox.Receive(ctx, prov, ev, v1alpha1.ViaWebhook, scheme, s.opts.ApplyBudget)
	switch {
	case errors.Is(err, inbox.ErrInvalidEvent):
		req.log.Info("webhook rejected: event cannot be stored", "reason", err.Error())
		s.reject(w, req, http.StatusBadRequest, metrics.WebhookMalformed, "event cannot be stored")
		return
	case err != nil:
		req.log.Error(err, "store webhook event")
		s.unavailable(w, req, "inbox unavailable")
		return
	}

	result := metrics.WebhookAccepted
	switch out.Result {
	case v1alpha1.ResultDuplicate:
		if !out.Stored {
			result = metrics.WebhookDuplicate
		}
	case v1alpha1.ResultIgnored:
		result = metrics.WebhookIgnored
	}
	event := v1alpha1.WebhookEventName(prov.Name, ev.ID)
	req.log.V(1).Info("webhook acknowledged", "result", result, "eventResult", out.Result, "payment", out.Payment)
	s.answer(w, req, http.StatusOK, result, response{Result: result, Event: event})
}

// parsePath splits "/webhooks/<namespace>/<provider>". Anything else, or
// names Kubernetes would not accept, is not a provider.
func parsePath(path string) (ns, name string, ok bool) {
	rest := strings.TrimPrefix(path, webhookPrefix)
	ns, name, ok = strings.Cut(rest, "/")
	if !ok || strings.Contains(name, "/") {
		return "", "", false
	}
	if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", "", false
	}
	return ns, name, true
}

// readBody reads at most limit bytes of the raw body. A declared length over
// the limit is refused before reading anything.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, int, error) {
	if r.ContentLength > limit {
		return nil, http.StatusRequestEntityTooLarge, errors.New("declared body length " + strconv.FormatInt(r.ContentLength, 10) + " over the limit")
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return buf.Bytes(), 0, nil
	case errors.As(err, &tooLarge):
		return nil, http.StatusRequestEntityTooLarge, errors.New("body over the limit")
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, http.StatusRequestTimeout, errors.New("body read timed out")
	default:
		return nil, http.StatusBadRequest, errors.New("body read failed: " + err.Error())
	}
}

// signingSecrets returns the provider's active signing secrets (every key of
// its signing Secret, as copied by the manager into the provider's bundle:
// rotation is "add a key, later remove the old one", and the next request
// after the bundle reaches the cache uses it). A provider without a signing
// Secret has none, so verification fails with 401; a bundle the manager has
// not published yet is an error (503), so the provider delivers again.
func (s *Server) signingSecrets(ctx context.Context, prov *v1alpha1.PaymentProvider) ([][]byte, error) {
	return s.bundleSigningSecrets(ctx, prov)
}

// reject answers a request that is not acted on.
func (s *Server) reject(w http.ResponseWriter, req *request, code int, result, msg string) {
	s.answer(w, req, code, result, response{Result: msg})
}

// unavailable answers 503 with Retry-After: the provider keeps the event and
// delivers it again, so nothing is lost while the API server is away.
func (s *Server) unavailable(w http.ResponseWriter, req *request, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int(s.opts.RetryAfter.Round(time.Second)/time.Second))))
	s.answer(w, req, http.StatusServiceUnavailable, metrics.WebhookUnavailable, response{Result: msg})
}

func (s *Server) answer(w http.ResponseWriter, req *request, code int, result string, body response) {
	metrics.Webhooks.WithLabelValues(req.ns, req.provider, result).Inc()
	metrics.WebhookAckDuration.WithLabelValues(result).Observe(time.Since(req.start).Seconds())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
