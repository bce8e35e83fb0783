package paysim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v84"

	stripeadapter "github.com/paywarden/paywarden/internal/provider/stripe"
)

// stripeRoutes registers the Stripe API under /stripe and its control calls under
// /_paysim/stripe.
func (s *Sim) stripeRoutes(m *http.ServeMux) {
	const p = "/" + Stripe
	m.HandleFunc("POST "+p+"/v1/checkout/sessions", s.stripeAPI(OpCreate, true, stripeSessionParams, s.stripeSessionCreate))
	m.HandleFunc("GET "+p+"/v1/checkout/sessions", s.stripeAPI(OpGet, false, stripeListParams("payment_intent", "customer", "status", "created"), s.stripeSessionList))
	m.HandleFunc("GET "+p+"/v1/checkout/sessions/{id}", s.stripeAPI(OpGet, false, []string{"expand"}, s.stripeSessionGet))
	m.HandleFunc("POST "+p+"/v1/checkout/sessions/{id}/expire", s.stripeAPI(OpVoid, false, []string{"expand"}, s.stripeSessionExpire))
	m.HandleFunc("POST "+p+"/v1/payment_intents", s.stripeAPI(OpCreate, true, stripeIntentParams, s.stripeIntentCreate))
	m.HandleFunc("GET "+p+"/v1/payment_intents/search", s.stripeAPI(OpFind, false, []string{"query", "limit", "page", "expand"}, s.stripeIntentSearch))
	m.HandleFunc("GET "+p+"/v1/payment_intents/{id}", s.stripeAPI(OpGet, false, []string{"expand", "client_secret"}, s.stripeIntentGet))
	m.HandleFunc("POST "+p+"/v1/payment_intents/{id}/capture", s.stripeAPI(OpCapture, false, []string{"amount_to_capture", "expand", "metadata", "final_capture"}, s.stripeIntentCapture))
	m.HandleFunc("POST "+p+"/v1/payment_intents/{id}/cancel", s.stripeAPI(OpVoid, false, []string{"cancellation_reason", "expand"}, s.stripeIntentCancel))
	m.HandleFunc("GET "+p+"/v1/events", s.stripeAPI(OpEvents, false, stripeListParams("created", "type", "types", "delivery_success"), s.stripeEvents))
	m.HandleFunc("POST "+p+"/v1/refunds", s.stripeAPI(OpRefund, false, []string{"payment_intent", "charge", "amount", "reason", "metadata", "expand"}, s.stripeRefundCreate))
	m.HandleFunc("GET "+p+"/v1/refunds", s.stripeAPI(OpFindRefund, false, stripeListParams("payment_intent", "charge", "created"), s.stripeRefundList))
	m.HandleFunc("GET "+p+"/v1/refunds/{id}", s.stripeAPI(OpGetRefund, false, []string{"expand"}, s.stripeRefundGet))
	m.HandleFunc(p+"/", func(w http.ResponseWriter, r *http.Request) {
		stripeError(w, http.StatusNotFound, stripego.Error{Type: stripego.ErrorTypeInvalidRequest,
			Msg: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, strings.TrimPrefix(r.URL.Path, p))}, nil)
	})
	// The payer's page: where Payment.CustomerAction points. GET describes it;
	// POST decision=approve (or pay), decline or abandon acts as the payer, as
	// the other providers' payer pages and the control API do.
	m.HandleFunc("GET "+p+"/checkout/{id}", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "paysim Stripe Checkout %s\nPOST this page with decision=approve, decline or abandon (or POST /_paysim/stripe/checkout/%s/{pays|fails|abandons}) to act as the payer.\n", id, id)
	})
	m.HandleFunc("POST "+p+"/checkout/{id}", func(w http.ResponseWriter, r *http.Request) {
		action := map[string]string{"approve": PayerPays, "pay": PayerPays, "decline": PayerFails, "abandon": PayerAbandons}[r.FormValue("decision")]
		if action == "" {
			http.Error(w, "decision must be approve, pay, decline or abandon", http.StatusBadRequest)
			return
		}
		if err := s.StripePayer(r.PathValue("id"), action, ""); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		_, _ = w.Write([]byte(action + "\n"))
	})
	s.stripeControlRoutes(m)
}

// Top-level parameters each endpoint accepts; anything else is answered like Stripe
// does ("Received unknown parameter"), so a misspelt parameter fails in tests.
var (
	stripeSessionParams = []string{"mode", "line_items", "client_reference_id", "metadata", "payment_intent_data",
		"success_url", "cancel_url", "expires_at", "customer", "customer_email", "expand", "locale", "payment_method_types"}
	stripeIntentParams = []string{"amount", "currency", "capture_method", "confirm", "off_session", "customer", "payment_method",
		"metadata", "description", "automatic_payment_methods", "payment_method_types", "return_url", "expand",
		"error_on_requires_action", "receipt_email", "statement_descriptor"}
)

func stripeListParams(extra ...string) []string {
	return append([]string{"limit", "starting_after", "ending_before", "expand"}, extra...)
}

type stripeHandler func(w http.ResponseWriter, r *http.Request, f url.Values)

// stripeAPI wraps a Stripe endpoint: fault injection (the shared knobs, drawn in
// the same order as the other providers), the secret key, parameter names, and
// Stripe's idempotency: a POST with an Idempotency-Key replays the first answer for
// the window, errors included once the request began executing (a 500, a 402
// decline; not a 400 validation error or a 429), a different request under the same
// key is a 400 idempotency_error, and the same key while its first request still runs
// is a 409.
func (s *Sim) stripeAPI(op string, create bool, allowed []string, h stripeHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		f, d := s.drawAPIFaultsLocked(op)
		slow, serverErr, tooMany, lost, garbled := d.slow, d.serverErr, d.tooMany, d.lost, d.garbled
		reqID := "req_" + s.newID("", 14, alphaNum)
		s.mu.Unlock()
		w.Header().Set("Request-Id", reqID)
		if v := r.Header.Get("Stripe-Version"); v != "" {
			w.Header().Set("Stripe-Version", v)
		}
		if slow && !s.slowDown(r, f) {
			return
		}
		if serverErr && f.FrontServerErrors {
			// In front of the endpoint: nothing started executing, nothing is
			// stored under the key.
			stripeError(w, http.StatusInternalServerError, stripego.Error{Type: stripego.ErrorTypeAPI,
				Msg: "An unknown error occurred (paysim injected server error, in front of the API)."}, nil)
			return
		}
		if tooMany && !serverErr {
			secs := max(int64(math.Ceil(f.RetryAfter.Seconds())), 1)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			stripeError(w, http.StatusTooManyRequests, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodeRateLimit,
				Msg: "Too many requests hit the API too quickly (paysim injected rate limit)."}, nil)
			return
		}
		if !credentialOK(bearer(r), s.opts.StripeSecretKey) {
			s.mu.Lock()
			s.counters.Unauthorized++
			s.mu.Unlock()
			stripeError(w, http.StatusUnauthorized, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Msg: "Invalid API Key provided."}, nil)
			return
		}
		form := r.URL.Query()
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
			if err := r.ParseForm(); err != nil {
				stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Msg: "Invalid request body: " + err.Error()}, nil)
				return
			}
			form = r.PostForm
		}
		for k := range form {
			if name, _, _ := strings.Cut(k, "["); !slices.Contains(allowed, name) {
				stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodeParameterUnknown,
					Param: name, Msg: "Received unknown parameter: " + name}, nil)
				return
			}
		}
		key := ""
		if r.Method == http.MethodPost {
			key = r.Header.Get("Idempotency-Key")
			w.Header().Set("Idempotency-Key", key)
			if !create {
				// A capture, cancel, expiry or refund: counted like the other
				// providers' money-moving calls, replays and refusals included.
				s.mu.Lock()
				s.counters.ActionRequests++
				if key != "" {
					s.counters.ActionsByKey[Stripe+"/"+key]++
				}
				s.mu.Unlock()
			}
		}
		var fp [32]byte
		if key != "" {
			canonical := []byte(r.Method + " " + r.URL.Path + "\n" + form.Encode())
			s.mu.Lock()
			if create {
				s.countCreateLocked(Stripe, key)
			}
			replay, sum, err := s.idempotentLocked(Stripe, key, canonical)
			switch {
			case err != nil:
				s.stripe.counters.IdempotencyErrors++
				s.mu.Unlock()
				stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeIdempotency,
					Msg: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + key + "' if you meant to execute a different request."}, nil)
				return
			case replay != nil:
				s.stripe.counters.Replays++
				if replay.status >= 400 {
					s.stripe.counters.ReplayedErrors++
				}
				s.mu.Unlock()
				w.Header().Set("Idempotent-Replayed", "true")
				writeRaw(w, replay.status, replay.contentType, replay.body)
				return
			case s.stripe.inFlight[key]:
				s.stripe.counters.IdempotencyErrors++
				s.mu.Unlock()
				w.Header().Set("Stripe-Should-Retry", "true")
				stripeError(w, http.StatusConflict, stripego.Error{Type: stripego.ErrorTypeIdempotency, Code: stripego.ErrorCodeIdempotencyKeyInUse,
					Msg: "There is currently another in-progress request using this Idempotency-Key. Try again later."}, nil)
				return
			}
			s.stripe.inFlight[key] = true
			s.mu.Unlock()
			fp = sum
			defer func() {
				s.mu.Lock()
				delete(s.stripe.inFlight, key)
				s.mu.Unlock()
			}()
		} else if create {
			s.mu.Lock()
			s.countCreateLocked(Stripe, "")
			s.mu.Unlock()
		}
		rec := &bufferWriter{header: http.Header{}}
		if serverErr {
			// The request started executing and failed: Stripe stores this 500 under
			// the key and replays it for the whole window.
			stripeError(rec, http.StatusInternalServerError, stripego.Error{Type: stripego.ErrorTypeAPI,
				Msg: "An unknown error occurred (paysim injected server error)."}, nil)
		} else {
			h(rec, r, form)
		}
		if key != "" && (rec.status < 400 || rec.status == http.StatusPaymentRequired || rec.status >= 500) {
			s.mu.Lock()
			s.rememberLocked(Stripe, key, fp, rec.status, rec.header.Get("Content-Type"), rec.buf)
			s.mu.Unlock()
		}
		if lost && !serverErr {
			// Processed and stored; only the answer is lost on the way.
			stripeError(w, http.StatusInternalServerError, stripego.Error{Type: stripego.ErrorTypeAPI,
				Msg: "An unknown error occurred (paysim injected lost response)."}, nil)
			return
		}
		// Processed and stored; a garbled answer arrives 2xx but unreadable.
		s.send(w, rec, f, garbled && !serverErr)
	}
}

// bufferWriter keeps an answer so it can be stored for replay before it is sent.
type bufferWriter struct {
	header http.Header
	status int
	buf    []byte
}

func (b *bufferWriter) Header() http.Header { return b.header }
func (b *bufferWriter) WriteHeader(code int) {
	if b.status == 0 {
		b.status = code
	}
}
func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

// stripeError writes Stripe's error envelope; pi, when set, is the PaymentIntent a
// card error leaves behind (Stripe includes it).
func stripeError(w http.ResponseWriter, code int, e stripego.Error, pi json.RawMessage) {
	b, err := json.Marshal(stripeErrorBody{Error: &e})
	if err == nil && pi != nil {
		var m map[string]map[string]any
		if json.Unmarshal(b, &m) == nil {
			m["error"]["payment_intent"] = pi
			b, err = json.Marshal(m)
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if code == http.StatusConflict || code >= 500 {
		w.Header().Set("Stripe-Should-Retry", "true")
	} else if code >= 400 {
		w.Header().Set("Stripe-Should-Retry", "false")
	}
	writeRaw(w, code, "application/json", b)
}

func invalid(w http.ResponseWriter, param, msg string) {
	stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Param: param, Msg: msg}, nil)
}

// formMap collects "prefix[key]=value" members into a map.
func formMap(f url.Values, prefix string) map[string]string {
	out := map[string]string{}
	for k, vs := range f {
		if rest, ok := strings.CutPrefix(k, prefix+"["); ok && strings.HasSuffix(rest, "]") && !strings.Contains(rest, "[") && len(vs) > 0 {
			out[strings.TrimSuffix(rest, "]")] = vs[0]
		}
	}
	return out
}

// formList collects "name[0]", "name[1]", "name[]" values in index order.
func formList(f url.Values, name string) []string {
	type item struct {
		i int
		v string
	}
	var items []item
	for k, vs := range f {
		rest, ok := strings.CutPrefix(k, name+"[")
		if !ok || !strings.HasSuffix(rest, "]") {
			continue
		}
		idx := strings.TrimSuffix(rest, "]")
		i, err := strconv.Atoi(idx)
		if idx == "" {
			i, err = len(items), nil
		}
		if err != nil {
			continue
		}
		for _, v := range vs {
			items = append(items, item{i, v})
		}
	}
	sort.SliceStable(items, func(a, b int) bool { return items[a].i < items[b].i })
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.v)
	}
	return out
}

func formInt(w http.ResponseWriter, f url.Values, name string, required bool) (int64, bool) {
	v := f.Get(name)
	if v == "" {
		if required {
			invalid(w, name, "Missing required param: "+name+".")
			return 0, false
		}
		return 0, true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		invalid(w, name, "Invalid integer: "+v)
		return 0, false
	}
	return n, true
}

func formBool(f url.Values, name string) bool { return f.Get(name) == "true" }

var stripeCurrencyRE = regexp.MustCompile(`^[a-z]{3}$`)

func (s *Sim) stripeSessionCreate(w http.ResponseWriter, r *http.Request, f url.Values) {
	if f.Get("mode") != "payment" {
		invalid(w, "mode", "paysim supports mode=payment only.")
		return
	}
	cur := f.Get("line_items[0][price_data][currency]")
	unit, ok := formInt(w, f, "line_items[0][price_data][unit_amount]", true)
	if !ok {
		return
	}
	qty, ok := formInt(w, f, "line_items[0][quantity]", true)
	if !ok {
		return
	}
	if !stripeCurrencyRE.MatchString(cur) {
		invalid(w, "line_items[0][price_data][currency]", "Invalid currency: "+cur+". Stripe currencies are lower-case ISO codes.")
		return
	}
	if f.Get("line_items[0][price_data][product_data][name]") == "" {
		invalid(w, "line_items[0][price_data][product_data][name]", "Missing required param: line_items[0][price_data][product_data][name].")
		return
	}
	if unit <= 0 || qty <= 0 || f.Get("line_items[1][quantity]") != "" {
		invalid(w, "line_items", "paysim takes exactly one line item with a positive unit_amount and quantity.")
		return
	}
	capture, ok := formCaptureMethod(w, f, "payment_intent_data[capture_method]")
	if !ok {
		return
	}
	expiresAt, ok := formInt(w, f, "expires_at", false)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	exp := now.Add(24 * time.Hour)
	if expiresAt != 0 {
		exp = time.Unix(expiresAt, 0)
		if exp.Before(now.Add(30*time.Minute)) || exp.After(now.Add(24*time.Hour)) {
			invalid(w, "expires_at", "The `expires_at` timestamp must be at least 30 minutes and at most 24 hours from Checkout Session creation.")
			return
		}
	}
	cs := &stripeSession{
		ref: f.Get("client_reference_id"), amount: unit * qty, currency: cur,
		metadata: formMap(f, "metadata"), intentMetadata: formMap(f, "payment_intent_data[metadata]"),
		intentDescription: f.Get("payment_intent_data[description]"), customer: f.Get("customer"), captureMethod: capture,
		successURL: f.Get("success_url"), cancelURL: f.Get("cancel_url"), expiresAt: exp, created: now,
	}
	if cs.ref == "" {
		cs.ref = cs.metadata[stripeadapter.MetadataMerchantReference]
	}
	s.stripeNewSessionLocked(cs, r.Host)
	writeRaw(w, http.StatusOK, "application/json", s.stripeSessionJSON(cs, formList(f, "expand")))
}

func (s *Sim) stripeSessionGet(w http.ResponseWriter, r *http.Request, f url.Values) {
	stripeGet(s, w, r, f, s.stripe.sessions, "checkout.session", "session", s.stripeSessionJSON)
}

// stripeGet answers a GET of the Stripe object with the id in the path, one of
// objects (kind, or param when missing), as render shows it with the request's
// expand; it counts as a status query of that id.
func stripeGet[T any](s *Sim, w http.ResponseWriter, r *http.Request, f url.Values, objects map[string]T, kind, param string, render func(T, []string) json.RawMessage) {
	stripeObject(s, w, r, objects, kind, param, func(id string, obj T) {
		s.counters.QueriesByPayment[id]++
		writeRaw(w, http.StatusOK, "application/json", render(obj, formList(f, "expand")))
	})
}

// stripeObject runs found, under s.mu, on the Stripe object with the id in the
// path, one of objects; a missing one is answered as Stripe does, 404
// resource_missing "No such <kind>" naming param.
func stripeObject[T any](s *Sim, w http.ResponseWriter, r *http.Request, objects map[string]T, kind, param string, found func(id string, obj T)) {
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, ok := objects[id]
	if !ok {
		stripeError(w, http.StatusNotFound, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodeResourceMissing,
			Param: param, Msg: fmt.Sprintf("No such %s: '%s'", kind, id)}, nil)
		return
	}
	found(id, obj)
}

func (s *Sim) stripeSessionList(w http.ResponseWriter, _ *http.Request, f url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*stripeSession
	for _, cs := range s.stripe.sessions {
		if pi := f.Get("payment_intent"); pi != "" && cs.intent != pi {
			continue
		}
		if st := f.Get("status"); st != "" && string(cs.status) != st {
			continue
		}
		all = append(all, cs)
	}
	writeStripeList(w, f, "/v1/checkout/sessions", "No such object: ", all,
		func(cs *stripeSession) (time.Time, string) { return cs.created, cs.id },
		func(cs *stripeSession) json.RawMessage { return s.stripeSessionJSON(cs, nil) })
}

// writeStripeList answers a Stripe list request f with the page of all, newest
// first, that its limit and starting_after ask for, each object rendered by
// render; an unknown starting_after is refused with noSuch and the id.
func writeStripeList[T any](w http.ResponseWriter, f url.Values, listURL, noSuch string, all []T,
	key func(T) (created time.Time, id string), render func(T) json.RawMessage) {
	sort.Slice(all, func(i, j int) bool {
		ti, idi := key(all[i])
		tj, idj := key(all[j])
		return newerFirst(ti, idi, tj, idj)
	})
	ids := make([]string, len(all))
	byID := make(map[string]T, len(all))
	for i, o := range all {
		_, ids[i] = key(o)
		byID[ids[i]] = o
	}
	page, more, ok := pageOf(ids, f)
	if !ok {
		invalid(w, "starting_after", noSuch+f.Get("starting_after"))
		return
	}
	out := stripeList{Object: "list", ListMeta: stripego.ListMeta{HasMore: more, URL: listURL}, Data: []json.RawMessage{}}
	for _, id := range page {
		out.Data = append(out.Data, render(byID[id]))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) stripeSessionExpire(w http.ResponseWriter, r *http.Request, f url.Values) {
	stripeObject(s, w, r, s.stripe.sessions, "checkout.session", "session", func(_ string, cs *stripeSession) {
		if cs.status != stripego.CheckoutSessionStatusOpen {
			invalid(w, "", "Only Checkout Sessions with a status of `open` can be expired. This session has a status of `"+string(cs.status)+"`.")
			return
		}
		s.stripeExpireSessionLocked(cs, stripego.PaymentIntentCancellationReasonExpired)
		writeRaw(w, http.StatusOK, "application/json", s.stripeSessionJSON(cs, formList(f, "expand")))
	})
}

func (s *Sim) stripeIntentCreate(w http.ResponseWriter, _ *http.Request, f url.Values) {
	amount, ok := formInt(w, f, "amount", true)
	if !ok {
		return
	}
	cur := f.Get("currency")
	if !stripeCurrencyRE.MatchString(cur) {
		invalid(w, "currency", "Invalid currency: "+cur+". Stripe currencies are lower-case ISO codes.")
		return
	}
	if amount <= 0 {
		invalid(w, "amount", "This value must be greater than or equal to 1.")
		return
	}
	capture, ok := formCaptureMethod(w, f, "capture_method")
	if !ok {
		return
	}
	confirm := formBool(f, "confirm")
	pm := f.Get("payment_method")
	if confirm && pm == "" {
		invalid(w, "payment_method", "You cannot confirm this PaymentIntent because it's missing a payment method.")
		return
	}
	if formBool(f, "off_session") && !confirm {
		invalid(w, "off_session", "off_session can only be used with confirm=true.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pi := &stripeIntent{
		amount: amount, currency: cur, captureMethod: capture, status: stripego.PaymentIntentStatusRequiresPaymentMethod,
		metadata: formMap(f, "metadata"), customer: f.Get("customer"), paymentMethod: pm, descr: f.Get("description"),
		created: s.now(),
	}
	if pm != "" {
		pi.status = stripego.PaymentIntentStatusRequiresConfirmation
	}
	s.stripeNewIntentLocked(pi)
	s.counters.PaymentsCreated++
	s.counters.PaymentsCreatedByProvider[Stripe]++
	sc := s.scriptFor(&payment{provider: Stripe, ref: pi.metadata[stripeadapter.MetadataMerchantReference], amount: amount,
		currency: strings.ToUpper(cur), metadata: pi.metadata})
	expand := formList(f, "expand")
	if !confirm {
		// The merchant's front end confirms with the client secret; its payer does
		// what the script says.
		s.stripeScheduleIntentLocked(pi, sc)
		writeRaw(w, http.StatusOK, "application/json", s.stripeIntentJSON(pi, expand))
		return
	}
	s.stripeConfirmLocked(pi, sc)
	if pi.status == stripego.PaymentIntentStatusRequiresPaymentMethod && pi.lastError != nil {
		// A declined confirmation is a 402 card_error carrying the PaymentIntent.
		e := *pi.lastError
		stripeError(w, http.StatusPaymentRequired, e, s.stripeIntentJSON(pi, nil))
		return
	}
	writeRaw(w, http.StatusOK, "application/json", s.stripeIntentJSON(pi, expand))
}

func (s *Sim) stripeIntentGet(w http.ResponseWriter, r *http.Request, f url.Values) {
	stripeGet(s, w, r, f, s.stripe.intents, "payment_intent", "intent", s.stripeIntentJSON)
}

// stripeQueryRE is the one search query form paysim understands:
// metadata['key']:'value' (or double quotes), with backslash escapes.
var stripeQueryRE = regexp.MustCompile(`^metadata\[['"]([^'"]+)['"]\]:(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")$`)

var unescapeQuery = strings.NewReplacer(`\\`, `\`, `\'`, `'`, `\"`, `"`)

func (s *Sim) stripeIntentSearch(w http.ResponseWriter, _ *http.Request, f url.Values) {
	m := stripeQueryRE.FindStringSubmatch(strings.TrimSpace(f.Get("query")))
	if m == nil {
		invalid(w, "query", "paysim's search understands only metadata['key']:'value' queries.")
		return
	}
	if f.Get("page") != "" {
		invalid(w, "page", "paysim's search has a single page.")
		return
	}
	key, value := m[1], unescapeQuery.Replace(m[2]+m[3])
	limit := 10
	if v := f.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			invalid(w, "limit", "limit must be between 1 and 100.")
			return
		}
		limit = n
	}
	var sub []string
	for _, e := range formList(f, "expand") {
		if rest, ok := strings.CutPrefix(e, "data."); ok {
			sub = append(sub, rest)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Searches++
	cutoff := s.now().Add(-s.stripe.searchLag)
	var hits []*stripeIntent
	for _, pi := range s.stripe.intents {
		if pi.metadata[key] == value && !pi.created.After(cutoff) {
			hits = append(hits, pi)
		}
	}
	sort.Slice(hits, func(i, j int) bool { return newerFirst(hits[i].created, hits[i].id, hits[j].created, hits[j].id) })
	out := stripeSearchResult{Object: "search_result", SearchMeta: stripego.SearchMeta{URL: "/v1/payment_intents/search"}, Data: []json.RawMessage{}}
	if len(hits) > limit {
		hits, out.HasMore = hits[:limit], true
	}
	for _, pi := range hits {
		out.Data = append(out.Data, s.stripeIntentJSON(pi, sub))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) stripeIntentCapture(w http.ResponseWriter, r *http.Request, f url.Values) {
	amount, ok := formInt(w, f, "amount_to_capture", false)
	if !ok {
		return
	}
	stripeObject(s, w, r, s.stripe.intents, "payment_intent", "intent", func(_ string, pi *stripeIntent) {
		if pi.status != stripego.PaymentIntentStatusRequiresCapture {
			stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodePaymentIntentUnexpectedState,
				Msg: "This PaymentIntent could not be captured because it has a status of " + string(pi.status) + ". Only a PaymentIntent with one of the following statuses may be captured: requires_capture."}, s.stripeIntentJSON(pi, nil))
			return
		}
		if amount < 0 || amount > pi.capturable {
			stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodeAmountTooLarge, Param: "amount_to_capture",
				Msg: fmt.Sprintf("The amount to capture (%d) must be at most the amount capturable (%d).", amount, pi.capturable)}, nil)
			return
		}
		s.stripeCaptureLocked(pi, amount)
		writeRaw(w, http.StatusOK, "application/json", s.stripeIntentJSON(pi, formList(f, "expand")))
	})
}

func (s *Sim) stripeIntentCancel(w http.ResponseWriter, r *http.Request, f url.Values) {
	reason := stripego.PaymentIntentCancellationReason(f.Get("cancellation_reason"))
	switch reason {
	case "", stripego.PaymentIntentCancellationReasonDuplicate, stripego.PaymentIntentCancellationReasonFraudulent,
		stripego.PaymentIntentCancellationReasonRequestedByCustomer, stripego.PaymentIntentCancellationReasonAbandoned:
	default:
		invalid(w, "cancellation_reason", "Invalid cancellation_reason: "+string(reason))
		return
	}
	stripeObject(s, w, r, s.stripe.intents, "payment_intent", "intent", func(_ string, pi *stripeIntent) {
		if cs := s.stripe.sessions[pi.session]; cs != nil && cs.status == stripego.CheckoutSessionStatusOpen {
			invalid(w, "", "This PaymentIntent belongs to an open Checkout Session and cannot be canceled directly. Expire the Checkout Session instead.")
			return
		}
		if !stripeCancelable(pi.status) {
			stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodePaymentIntentUnexpectedState,
				Msg: "You cannot cancel this PaymentIntent because it has a status of " + string(pi.status) + "."}, s.stripeIntentJSON(pi, nil))
			return
		}
		s.stripe.counters.Cancels++
		s.counters.VoidsByPayment[pi.id]++
		s.stripeCancelLocked(pi, reason)
		writeRaw(w, http.StatusOK, "application/json", s.stripeIntentJSON(pi, formList(f, "expand")))
	})
}

// stripeEvents serves GET /v1/events newest first, like Stripe: created[gte|gt|lte|lt]
// or created=<unix>, type (with * wildcards) or types[], starting_after, limit. Only
// the events of the last StripeEventRetention are listed (Stripe API reference,
// Events, "List all events": "going back up to 30 days"), whatever created asks for.
func (s *Sim) stripeEvents(w http.ResponseWriter, _ *http.Request, f url.Values) {
	if f.Get("ending_before") != "" {
		invalid(w, "ending_before", "paysim pages events with starting_after only.")
		return
	}
	bounds := map[string]int64{}
	for _, op := range []string{"gte", "gt", "lte", "lt"} {
		if v := f.Get("created[" + op + "]"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				invalid(w, "created", "Invalid timestamp: "+v)
				return
			}
			bounds[op] = n
		}
	}
	if v := f.Get("created"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			invalid(w, "created", "Invalid timestamp: "+v)
			return
		}
		bounds["gte"], bounds["lte"] = n, n
	}
	types := formList(f, "types")
	if len(types) > 20 {
		invalid(w, "types", "types can name at most 20 event types.")
		return
	}
	typ := f.Get("type")
	if typ != "" && len(types) > 0 {
		invalid(w, "types", "You may pass either type or types, but not both.")
		return
	}
	limit := pageLimit(&http.Request{URL: &url.URL{RawQuery: "limit=" + url.QueryEscape(f.Get("limit"))}})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.EventListCalls++
	evs := s.events[Stripe]
	retained := s.now().Add(-StripeEventRetention)
	var ids []string
	byID := map[string]*EventRecord{}
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Created.Before(retained) {
			continue
		}
		c := e.Created.Unix()
		if gte, ok := bounds["gte"]; ok && c < gte {
			continue
		}
		if gt, ok := bounds["gt"]; ok && c <= gt {
			continue
		}
		if lte, ok := bounds["lte"]; ok && c > lte {
			continue
		}
		if lt, ok := bounds["lt"]; ok && c >= lt {
			continue
		}
		if len(types) > 0 && !slices.Contains(types, e.Type) || typ != "" && !eventTypeMatches(typ, e.Type) {
			continue
		}
		ids = append(ids, e.ID)
		byID[e.ID] = e
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}, "starting_after": {f.Get("starting_after")}}
	page, more, ok := pageOf(ids, q)
	if !ok {
		invalid(w, "starting_after", "No such event: "+f.Get("starting_after"))
		return
	}
	out := stripeadapter.EventsPage{Object: "list", URL: "/v1/events", HasMore: more, Data: []json.RawMessage{}}
	for _, id := range page {
		out.Data = append(out.Data, byID[id].Raw)
	}
	writeJSON(w, http.StatusOK, out)
}

// eventTypeMatches matches Stripe's type filter, where * is a wildcard
// ("payment_intent.*").
func eventTypeMatches(pattern, typ string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == typ
	}
	re := "^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$"
	ok, _ := regexp.MatchString(re, typ)
	return ok
}

// formCaptureMethod reads the capture method in param (automatic when left
// out); an unknown one is answered invalid, and ok is false.
func formCaptureMethod(w http.ResponseWriter, f url.Values, param string) (capture stripego.PaymentIntentCaptureMethod, ok bool) {
	capture = stripego.PaymentIntentCaptureMethod(f.Get(param))
	switch capture {
	case "":
		return stripego.PaymentIntentCaptureMethodAutomatic, true
	case stripego.PaymentIntentCaptureMethodAutomatic, stripego.PaymentIntentCaptureMethodAutomaticAsync, stripego.PaymentIntentCaptureMethodManual:
		return capture, true
	}
	invalid(w, param, "Invalid capture_method: "+string(capture))
	return "", false
}

// pageOf pages ids (already in list order) with limit and starting_after.
func pageOf(ids []string, f url.Values) (page []string, hasMore, ok bool) {
	start := 0
	if after := f.Get("starting_after"); after != "" {
		i := slices.Index(ids, after)
		if i < 0 {
			return nil, false, false
		}
		start = i + 1
	}
	limit := 10
	if n, err := strconv.Atoi(f.Get("limit")); err == nil && n > 0 && n <= 100 {
		limit = n
	}
	rest := ids[start:]
	if len(rest) > limit {
		return rest[:limit], true, true
	}
	return rest, false, true
}

// newerFirst orders Stripe lists: newest first, ties by id descending.
func newerFirst(ta time.Time, ida string, tb time.Time, idb string) bool {
	if !ta.Equal(tb) {
		return ta.After(tb)
	}
	return ida > idb
}

func (s *Sim) stripeRefundCreate(w http.ResponseWriter, _ *http.Request, f url.Values) {
	amount, ok := formInt(w, f, "amount", false)
	if !ok {
		return
	}
	reason := stripego.RefundReason(f.Get("reason"))
	switch reason {
	case "", stripego.RefundReasonDuplicate, stripego.RefundReasonFraudulent, stripego.RefundReasonRequestedByCustomer:
	default:
		invalid(w, "reason", "Invalid reason: "+string(reason))
		return
	}
	id := f.Get("payment_intent")
	if id == "" {
		invalid(w, "payment_intent", "paysim refunds by payment_intent only: Missing required param: payment_intent.")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.stripe.intents[id]
	if !ok {
		stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodeResourceMissing,
			Param: "payment_intent", Msg: "No such payment_intent: '" + id + "'"}, nil)
		return
	}
	rf, err := s.stripeRefundLocked(pi, amount, reason, formMap(f, "metadata"))
	switch err {
	case nil:
	case errStripeFullyRefunded:
		stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodeChargeAlreadyRefunded, Msg: "Charge has already been refunded."}, nil)
		return
	case errStripeRefundTooLarge:
		stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodeAmountTooLarge, Param: "amount",
			Msg: "Refund amount is greater than unrefunded amount on charge."}, nil)
		return
	default:
		stripeError(w, http.StatusBadRequest, stripego.Error{Type: stripego.ErrorTypeInvalidRequest, Code: stripego.ErrorCodePaymentIntentUnexpectedState, Msg: err.Error()}, nil)
		return
	}
	writeRaw(w, http.StatusOK, "application/json", s.stripeRefundJSON(rf))
}

func (s *Sim) stripeRefundGet(w http.ResponseWriter, r *http.Request, _ url.Values) {
	stripeObject(s, w, r, s.stripe.refunds, "refund", "refund", func(_ string, rf *stripeRefund) {
		writeRaw(w, http.StatusOK, "application/json", s.stripeRefundJSON(rf))
	})
}

func (s *Sim) stripeRefundList(w http.ResponseWriter, _ *http.Request, f url.Values) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []*stripeRefund
	for _, rf := range s.stripe.refunds {
		if pi := f.Get("payment_intent"); pi != "" && rf.intent != pi {
			continue
		}
		all = append(all, rf)
	}
	writeStripeList(w, f, "/v1/refunds", "No such refund: ", all,
		func(rf *stripeRefund) (time.Time, string) { return rf.created, rf.id },
		s.stripeRefundJSON)
}

// stripeControlRoutes: the payer's actions on a Checkout Session, a refund failing,
// the search lag and the Stripe counters.
func (s *Sim) stripeControlRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /_paysim/stripe/checkout/{id}/{action}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			DeclineCode string `json:"declineCode"`
		}
		controlCall(w, r, &body, true, http.StatusConflict, func() error {
			return s.StripePayer(r.PathValue("id"), r.PathValue("action"), body.DeclineCode)
		})
	})
	m.HandleFunc("POST /_paysim/stripe/refunds/{id}/fail", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reason string `json:"reason"`
		}
		controlCall(w, r, &body, true, http.StatusNotFound, func() error { return s.StripeFailRefund(r.PathValue("id"), body.Reason) })
	})
	m.HandleFunc("PUT /_paysim/stripe/search-lag", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Lag string `json:"lag"`
		}
		controlCall(w, r, &body, false, http.StatusBadRequest, func() error {
			d, err := time.ParseDuration(body.Lag)
			if err != nil || d < 0 {
				return fmt.Errorf("lag must be a non-negative Go duration")
			}
			s.SetStripeSearchLag(d)
			return nil
		})
	})
	m.HandleFunc("GET /_paysim/stripe/counters", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.StripeCounters())
	})
}
