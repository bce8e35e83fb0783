package webhookreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	if !s.cachesSynced() {
		// Until the caches hold every provider, an unknown one is not known
		// to be unknown: 503, so the provider delivers again.
		s.shed(w, req, shedNotReady, "receiver starting")
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

	if coding := contentCoding(r.Header); coding != "" {
		// The signature is over the event as the provider wrote it; a body
		// in another coding is not that, and verifying it would call a
		// genuine delivery a forgery (401, invalid_signature, the signal of
		// the signature-failure alert). RFC 9110 §15.5.16: 415, saying
		// which coding is accepted.
		req.log.Info("webhook rejected: unsupported content coding", "contentEncoding", coding)
		w.Header().Set("Accept-Encoding", "identity")
		s.reject(w, req, http.StatusUnsupportedMediaType, metrics.WebhookMalformed, "unsupported Content-Encoding "+strconv.Quote(coding)+": send the body unencoded (identity)")
		return
	}
	limit := prov.Spec.WebhookMaxBodyBytes()
	if r.ContentLength > limit {
		req.log.Info("webhook rejected: declared body over the limit", "contentLength", r.ContentLength, "limit", limit)
		s.reject(w, req, http.StatusRequestEntityTooLarge, metrics.WebhookTooLarge, http.StatusText(http.StatusRequestEntityTooLarge))
		return
	}
	// The in-flight bound starts at the first body byte: a request that
	// only sent headers holds a connection and a goroutine but no body, and
	// ReadTimeout ends it, so such requests cannot keep genuine ones out.
	// From that byte the rest of the body has BodyReadTimeout, and the slot
	// is one of the provider's share, so bodies that stall on one provider's
	// URL hold a few of its slots for seconds, not every tenant's.
	rawBody := http.MaxBytesReader(w, r.Body, limit)
	first, err := firstByte(rawBody)
	if err != nil {
		s.bodyNotRead(w, req, err)
		return
	}
	key := types.NamespacedName{Namespace: prov.Namespace, Name: prov.Name}
	reserve := bodyReservation(r.ContentLength, limit)
	if reason := s.acquire(key, reserve); reason != "" {
		s.shed(w, req, reason, "too many requests in flight")
		return
	}
	defer s.release(key, reserve)
	if err := s.limitBodyTime(w, r); err != nil {
		// Only a connection that cannot take deadlines fails here; the
		// server's ReadTimeout still bounds it.
		req.log.Error(err, "set the body read deadline")
	}
	body, err := readBody(first, rawBody, r.ContentLength, reserve)
	if err != nil {
		s.bodyNotRead(w, req, err)
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
	scheme, err := s.verifySignature(ctx, entry, prov, r.Header, body, secrets)
	if errors.Is(err, errVerifyBudget) {
		s.shed(w, req, shedVerifyRate, "signature verification busy")
		return
	}
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

// contentCoding is the first content coding of the request other than
// identity (RFC 9110 §8.4: Content-Encoding lists the codings applied, in
// order, in one or more header lines); "" when its body is not encoded.
func contentCoding(h http.Header) string {
	for _, line := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(line, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return c
			}
		}
	}
	return ""
}

// firstByte waits for the first byte of the body (none for an empty body).
// It reads into a one-byte array: until the client actually sends, the
// request has nothing allocated for its body.
func firstByte(body io.Reader) ([]byte, error) {
	var b [1]byte
	n, err := io.ReadFull(body, b[:])
	if errors.Is(err, io.EOF) {
		return nil, nil
	}
	return b[:n], err
}

// readBody reads the rest of the body after first, up to the cap of body (a
// MaxBytesReader). It is called once the first body byte came and reserve, the
// bytes the body may take (bodyReservation), are reserved, and its buffer never
// grows past them: a declared length sizes one buffer of the reservation (no
// growth; declaring 16 MiB and sending only headers costs nothing, one byte
// more costs the reservation, bounded by --max-body-bytes-in-flight); a body of
// unknown length starts small and doubles as its bytes arrive, to at most the
// reservation. (bytes.Buffer rounded its growth up past it.)
func readBody(first []byte, body io.Reader, contentLength, reserve int64) ([]byte, error) {
	size := int64(bytes.MinRead)
	if contentLength > 0 {
		size = reserve
	}
	buf := make([]byte, 0, max(min(size, reserve), int64(len(first))))
	buf = append(buf, first...)
	for {
		if len(buf) == cap(buf) {
			n := min(2*int64(cap(buf)), reserve)
			if n <= int64(cap(buf)) {
				// Only a body longer than it declared or than its
				// limit gets here, and neither reaches readBody.
				return nil, fmt.Errorf("body passes its reservation of %d bytes", reserve)
			}
			grown := make([]byte, len(buf), n)
			copy(grown, buf)
			buf = grown
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// bodyReservation is the memory a body may take while it is read: a
// declared length is read into one buffer of that size and the room to see
// its end (readBody); a body of unknown length (chunked) grows its buffer by
// doubling, to at most twice the provider's limit.
func bodyReservation(contentLength, limit int64) int64 {
	if contentLength > 0 {
		return min(contentLength, limit) + bytes.MinRead
	}
	return 2 * limit
}

// bodyNotRead answers a request whose body could not be read.
func (s *Server) bodyNotRead(w http.ResponseWriter, req *request, err error) {
	code, result, reason := http.StatusBadRequest, metrics.WebhookMalformed, "body read failed: "+err.Error()
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		code, result, reason = http.StatusRequestEntityTooLarge, metrics.WebhookTooLarge, "body over the limit"
	case errors.Is(err, os.ErrDeadlineExceeded):
		code, reason = http.StatusRequestTimeout, "body read timed out"
	}
	req.log.Info("webhook rejected: body not read", "status", code, "reason", reason)
	s.reject(w, req, code, result, http.StatusText(code))
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

// shed answers 503 with Retry-After before doing the work, because a bound
// was reached. The connection is closed rather than drained: whatever body
// the client still has to send is not read.
func (s *Server) shed(w http.ResponseWriter, req *request, reason, msg string) {
	shed.WithLabelValues(reason).Inc()
	req.log.V(1).Info("webhook shed", "reason", reason)
	w.Header().Set("Connection", "close")
	s.unavailable(w, req, msg)
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
