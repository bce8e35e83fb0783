package paysim

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// maxRequestBody caps request bodies; provider APIs reject large bodies too.
const maxRequestBody = 1 << 20

func (s *Sim) routes() *http.ServeMux {
	m := http.NewServeMux()
	// KukoPay
	m.HandleFunc("POST /kukopay/v1/payments", s.api(KukoPay, OpCreate, s.kukopayCreate))
	m.HandleFunc("GET /kukopay/v1/payments/{id}", s.api(KukoPay, OpGet, s.kukopayGet))
	m.HandleFunc("GET /kukopay/v1/payments", s.api(KukoPay, OpFind, s.kukopaySearch))
	m.HandleFunc("GET /kukopay/v1/events", s.api(KukoPay, OpEvents, s.kukopayEvents))
	m.HandleFunc("POST /kukopay/v1/payments/{id}/capture", s.api(KukoPay, OpCapture, s.kukopayCapture))
	m.HandleFunc("POST /kukopay/v1/payments/{id}/cancel", s.api(KukoPay, OpVoid, s.kukopayCancel))
	m.HandleFunc("POST /kukopay/v1/refunds", s.api(KukoPay, OpRefund, s.kukopayCreateRefund))
	m.HandleFunc("GET /kukopay/v1/refunds/{id}", s.api(KukoPay, OpGetRefund, s.kukopayGetRefund))
	m.HandleFunc("GET /kukopay/v1/refunds", s.api(KukoPay, OpFindRefund, s.kukopayListRefunds))
	// PayPal
	m.HandleFunc("POST /paypal/v1/oauth2/token", s.api(PayPal, OpToken, s.paypalToken))
	m.HandleFunc("POST /paypal/v2/checkout/orders", s.api(PayPal, OpCreate, s.paypalCreate))
	m.HandleFunc("GET /paypal/v2/checkout/orders/{id}", s.api(PayPal, OpGet, s.paypalGet))
	m.HandleFunc("POST /paypal/v2/checkout/orders/{id}/capture", s.api(PayPal, OpCapture, s.paypalCaptureOrder))
	m.HandleFunc("POST /paypal/v2/checkout/orders/{id}/authorize", s.api(PayPal, OpAuthorize, s.paypalAuthorizeOrder))
	m.HandleFunc("GET /paypal/v2/payments/authorizations/{id}", s.api(PayPal, OpGet, s.paypalGetAuthorization))
	m.HandleFunc("POST /paypal/v2/payments/authorizations/{id}/capture", s.api(PayPal, OpCapture, s.paypalCaptureAuthorization))
	m.HandleFunc("POST /paypal/v2/payments/authorizations/{id}/void", s.api(PayPal, OpVoid, s.paypalVoidAuthorization))
	m.HandleFunc("GET /paypal/v2/payments/captures/{id}", s.api(PayPal, OpGet, s.paypalGetCapture))
	m.HandleFunc("POST /paypal/v2/payments/captures/{id}/refund", s.api(PayPal, OpRefund, s.paypalRefundCapture))
	m.HandleFunc("GET /paypal/v2/payments/refunds/{id}", s.api(PayPal, OpGetRefund, s.paypalGetRefund))
	m.HandleFunc("POST /paypal/v1/notifications/verify-webhook-signature", s.api(PayPal, OpVerify, s.paypalVerify))
	m.HandleFunc("GET /paypal"+paypalEventsPath, s.api(PayPal, OpEvents, s.paypalEvents))
	// Generic async-job API
	m.HandleFunc("POST /generic/jobs", s.api(Generic, OpCreate, s.genericCreate))
	m.HandleFunc("GET /generic/jobs/{id}", s.api(Generic, OpGet, s.genericGet))
	m.HandleFunc("GET /generic/jobs", s.api(Generic, OpFind, s.genericSearch))
	m.HandleFunc("GET /generic/events", s.api(Generic, OpEvents, s.genericEvents))
	m.HandleFunc("POST /generic/jobs/{id}/refunds", s.api(Generic, OpRefund, s.genericCreateRefund))
	m.HandleFunc("GET /generic/jobs/{id}/refunds/{refundId}", s.api(Generic, OpGetRefund, s.genericGetRefund))
	// The payer's pages (links in CustomerAction): no faults, they are for browsers.
	m.HandleFunc("/paypal/checkoutnow", s.hostedPage(PayPal))
	m.HandleFunc("/kukopay/checkout/{id}", s.hostedPage(KukoPay))
	m.HandleFunc("/generic/actions/{id}", s.hostedPage(Generic))
	// Stripe (and its control calls)
	s.stripeRoutes(m)
	// Control API
	s.controlRoutes(m)
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	return m
}

// api wraps a provider endpoint (operation op) with fault injection. Decisions are
// drawn in a fixed order from the seeded source so a run with the same seed and request
// sequence injects the same faults; an operation the faults do not apply to draws
// nothing.
func (s *Sim) api(prov, op string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		f, d := s.drawAPIFaultsLocked(op)
		slow, serverErr, tooMany, lost, garbled := d.slow, d.serverErr, d.tooMany, d.lost, d.garbled
		s.mu.Unlock()

		if slow && !s.slowDown(r, f) {
			return
		}
		switch {
		case serverErr:
			s.writeError(w, prov, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "paysim injected server error", nil, 0)
			return
		case tooMany:
			secs := int64(math.Ceil(f.RetryAfter.Seconds()))
			w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
			s.writeError(w, prov, http.StatusTooManyRequests, "RATE_LIMIT_REACHED", "paysim injected rate limit", nil, time.Duration(max(secs, 1))*time.Second)
			return
		case lost:
			// The request takes effect; only the answer is lost.
			h(discardWriter{header: http.Header{}}, r)
			s.writeError(w, prov, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "paysim injected lost response", nil, 0)
			return
		case garbled:
			// The request takes effect (and is kept for an idempotent replay);
			// a 2xx answer arrives unreadable.
			rec := &bufferWriter{header: http.Header{}}
			h(rec, r)
			s.send(w, rec, f, true)
			return
		}
		h(w, r)
	}
}

// send writes the answer rec holds; a 2xx is garbled (Faults.GarbledAnswerRate)
// when garble is set.
func (s *Sim) send(w http.ResponseWriter, rec *bufferWriter, f Faults, garble bool) {
	status, body := max(rec.status, http.StatusOK), rec.buf
	if garble && status >= 200 && status < 300 {
		s.mu.Lock()
		s.counters.APIFaults.Garbled++
		s.mu.Unlock()
		body = f.garble(body)
	}
	for k, vs := range rec.header {
		w.Header()[k] = vs
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

type discardWriter struct{ header http.Header }

func (d discardWriter) Header() http.Header         { return d.header }
func (d discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d discardWriter) WriteHeader(int)             {}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func writeRaw(w http.ResponseWriter, code int, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// writeError answers in the provider's own error format. retryable is only
// expressed by the generic provider (problem details); nil means "per status".
func (s *Sim) writeError(w http.ResponseWriter, prov string, code int, errCode, msg string, retryable *bool, retryAfter time.Duration) {
	errorAnswer(prov, code, errCode, msg, retryable, retryAfter).write(w)
}

// queryPayment is a status query of the prov payment id: counted, the payment
// brought up to date and shown as render shows it; ok is false when there is
// no such payment, or no longer (an expired PayPal order is deleted,
// Options.PayPalOrderLifetime).
func queryPayment[T any](s *Sim, prov, id string, render func(*payment) T) (shown T, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.payments[prov][id]
	if !ok {
		return shown, false
	}
	s.counters.QueriesByPayment[id]++
	s.refreshLocked(p)
	if p.gone {
		return shown, false
	}
	return render(p), true
}

// searchPayments is a search of prov's payments by merchant reference (every
// payment when ref is empty): counted, each payment found brought up to date and
// shown as render shows it.
func searchPayments[T any](s *Sim, prov, ref string, render func(*payment) T) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Searches++
	found := []T{}
	for _, p := range s.payments[prov] {
		if ref == "" || p.ref == ref {
			s.refreshLocked(p)
			found = append(found, render(p))
		}
	}
	return found
}

// optionalJSON decodes the body of a call whose fields may all be left out into
// v; an empty body (or white space only) leaves v as it is.
func optionalJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return json.Unmarshal(body, v)
}

// answer is one HTTP answer, built under the lock and written after it (and
// remembered for idempotent replays).
type answer struct {
	status      int
	contentType string
	body        []byte
}

func jsonAnswer(status int, v any) answer {
	b, err := json.Marshal(v)
	if err != nil {
		return answer{status: http.StatusInternalServerError, contentType: "text/plain; charset=utf-8", body: []byte(err.Error())}
	}
	return answer{status: status, contentType: "application/json", body: b}
}

func (a answer) write(w http.ResponseWriter) {
	if a.status == http.StatusNoContent {
		w.WriteHeader(a.status)
		return
	}
	writeRaw(w, a.status, a.contentType, a.body)
}

func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

// errorAnswer is writeError's answer.
func errorAnswer(prov string, code int, errCode, msg string, retryable *bool, retryAfter time.Duration) answer {
	switch prov {
	case KukoPay:
		return jsonAnswer(code, kukopay.ErrorBody{Error: kukopay.ErrorDetail{Code: strings.ToLower(errCode), Message: msg}})
	case PayPal:
		return jsonAnswer(code, paypal.ErrorBody{Name: errCode, Message: msg, DebugID: "paysim"})
	default:
		p := provider.Problem{
			Type: "https://paysim.invalid/problems/" + strings.ToLower(errCode), Title: http.StatusText(code),
			Status: code, Detail: msg, Retryable: retryable,
		}
		if p.Retryable == nil {
			r := code == http.StatusTooManyRequests || code >= 500
			p.Retryable = &r
		}
		if retryAfter > 0 {
			p.RetryAfter = json.RawMessage(strconv.FormatInt(int64(retryAfter/time.Second), 10))
		}
		return problemAnswer(p)
	}
}

func problemAnswer(p provider.Problem) answer {
	b, err := json.Marshal(p)
	if err != nil {
		return answer{status: http.StatusInternalServerError, contentType: "text/plain; charset=utf-8", body: []byte(err.Error())}
	}
	return answer{status: p.Status, contentType: "application/problem+json", body: b}
}

func writeProblem(w http.ResponseWriter, p provider.Problem) { problemAnswer(p).write(w) }

// readJSON decodes a capped request body.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON body: %w", err)
	}
	return nil
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

// credentialOK accepts want exactly, or any non-empty value when want is unset.
func credentialOK(got, want string) bool {
	if want == "" {
		return got != ""
	}
	return got == want
}

func (s *Sim) unauthorized(w http.ResponseWriter, prov string) {
	s.mu.Lock()
	s.counters.Unauthorized++
	s.mu.Unlock()
	f := false
	s.writeError(w, prov, http.StatusUnauthorized, "AUTHENTICATION_FAILURE", "missing or invalid credentials", &f, 0)
}

// idemEntry is the remembered first answer for an idempotency key.
type idemEntry struct {
	fingerprint [32]byte
	status      int
	contentType string
	body        []byte
	at          time.Time
	window      time.Duration // how long it replays; 0: Options.IdempotencyWindow
}

var errIdemMismatch = errors.New("idempotency key reused with a different request")

// idempotentLocked looks key up: a stored answer within the window is returned for
// replay, a different request under the same key is an error. s.mu must be held.
func (s *Sim) idempotentLocked(prov, key string, body []byte) (*idemEntry, [32]byte, error) {
	return s.idempotentFPLocked(prov, key, sha256.Sum256(body))
}

func (s *Sim) idempotentFPLocked(prov, key string, fp [32]byte) (*idemEntry, [32]byte, error) {
	if key == "" {
		return nil, fp, nil
	}
	e, ok := s.idem[prov+"/"+key]
	if !ok {
		return nil, fp, nil
	}
	window := e.window
	if window <= 0 {
		window = s.opts.IdempotencyWindow
	}
	if s.now().Sub(e.at) > window {
		return nil, fp, nil
	}
	if e.fingerprint != fp {
		return nil, fp, errIdemMismatch
	}
	return e, fp, nil
}

func (s *Sim) rememberLocked(prov, key string, fp [32]byte, status int, contentType string, body []byte) {
	s.rememberRouteLocked(prov, "", key, fp, status, contentType, body)
}

// rememberRouteLocked stores the first answer for key, kept for the window
// the provider documents for route (keyWindow).
func (s *Sim) rememberRouteLocked(prov, route, key string, fp [32]byte, status int, contentType string, body []byte) {
	if key == "" {
		return
	}
	s.idem[prov+"/"+key] = &idemEntry{fingerprint: fp, status: status, contentType: contentType, body: body, at: s.now(), window: s.keyWindow(prov, route)}
}

// keyWindow is how long a key sent to route (a path below the provider's
// prefix, or the full request path) replays its first answer. PayPal documents
// it per API (Options.PayPalOrderKeyWindow, PayPalRefundKeyWindow); every
// other route keeps Options.IdempotencyWindow.
func (s *Sim) keyWindow(prov, route string) time.Duration {
	if prov != PayPal {
		return s.opts.IdempotencyWindow
	}
	route = strings.TrimPrefix(route, "/"+PayPal)
	switch {
	case strings.HasPrefix(route, "/v2/checkout/orders"):
		return s.opts.PayPalOrderKeyWindow
	case strings.HasPrefix(route, "/v2/payments/captures/") && strings.HasSuffix(route, "/refund"):
		return s.opts.PayPalRefundKeyWindow
	}
	return s.opts.IdempotencyWindow
}

// idempotentCall serves a money-moving call (capture, authorize, void, cancel,
// refund): it counts it, replays the first 2xx answer for the same key within the
// window (the key is keyHeader's value; method, path and body must match, else 422),
// and otherwise runs fn under s.mu. Only 2xx answers are remembered: a refusal changed
// nothing, so asking again is harmless. Because fn runs under the lock, a second
// request with the same key waits for the first and then replays it.
func (s *Sim) idempotentCall(w http.ResponseWriter, r *http.Request, prov, keyHeader string, fn func(body []byte) answer) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		s.writeError(w, prov, http.StatusRequestEntityTooLarge, "invalid_request", err.Error(), boolPtr(false), 0)
		return
	}
	key := r.Header.Get(keyHeader)
	h := sha256.New()
	_, _ = io.WriteString(h, r.Method+" "+r.URL.Path+"\n")
	_, _ = h.Write(body)
	var fp [32]byte
	copy(fp[:], h.Sum(nil))

	s.mu.Lock()
	s.counters.ActionRequests++
	if key != "" {
		s.counters.ActionsByKey[prov+"/"+key]++
	}
	replay, _, err := s.idempotentFPLocked(prov, key, fp)
	var a answer
	switch {
	case err != nil:
		a = errorAnswer(prov, http.StatusUnprocessableEntity, "idempotency_error", err.Error(), boolPtr(false), 0)
		if prov == PayPal {
			a = paypalIssue(http.StatusUnprocessableEntity, "IDEMPOTENCY_KEY_REUSED", err.Error())
		}
	case replay != nil:
		a = answer{status: replay.status, contentType: replay.contentType, body: replay.body}
		w.Header().Set("Idempotent-Replayed", "true")
	default:
		a = fn(body)
		if a.ok() {
			s.rememberRouteLocked(prov, r.URL.Path, key, fp, a.status, a.contentType, a.body)
		}
	}
	s.mu.Unlock()
	a.write(w)
}

// countCreateLocked counts one create call.
func (s *Sim) countCreateLocked(prov, key string) {
	s.counters.CreateRequests++
	if key != "" {
		s.counters.CreatesByKey[prov+"/"+key]++
	}
}

// validCurrency checks ISO 4217 shape.
func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

// pageLimit parses ?limit= (default and max 100).
func pageLimit(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n <= 0 || n > 100 {
		return 100
	}
	return n
}

// parseSince accepts RFC 3339 or unix seconds; empty is the beginning of time.
func parseSince(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(n, 0), nil
	}
	return time.Parse(time.RFC3339, v)
}

// eventsPage answers one call of prov's events list (counted): the bodies of a
// page of eventsPageLocked, oldest first, and the id of its last event, which
// pages on when more is true. ok is false for an unknown cursor.
func (s *Sim) eventsPage(prov string, since time.Time, typ, cursor string, limit int) (raws []json.RawMessage, last string, more, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.EventListCalls++
	page, more, ok := s.eventsPageLocked(prov, since, typ, cursor, limit)
	raws = []json.RawMessage{}
	for _, e := range page {
		raws = append(raws, e.Raw)
	}
	if len(page) > 0 {
		last = page[len(page)-1].ID
	}
	return raws, last, more, ok
}

// eventsPageLocked pages provider's events created at or after since, optionally only
// of type typ, starting after the event with id cursor. s.mu must be held.
func (s *Sim) eventsPageLocked(prov string, since time.Time, typ, cursor string, limit int) (page []*EventRecord, hasMore bool, ok bool) {
	evs := s.events[prov]
	start := 0
	if cursor != "" {
		start = -1
		for i, e := range evs {
			if e.ID == cursor {
				start = i + 1
				break
			}
		}
		if start < 0 {
			return nil, false, false
		}
	}
	for _, e := range evs[start:] {
		if e.Created.Before(since.Truncate(time.Second)) || (typ != "" && e.Type != typ) {
			continue
		}
		if len(page) == limit {
			return page, true, true
		}
		page = append(page, e)
	}
	return page, false, true
}
