package paysim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v84"
	"github.com/stripe/stripe-go/v84/webhook"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
)

const stripeKey = paysimtest.StripeKey

type stripeEnv struct {
	sim *paysim.Sim
	srv *httptest.Server
}

func startStripe(t *testing.T, opts paysim.Options) *stripeEnv {
	t.Helper()
	sim, srv := paysimtest.ServeStripe(t, opts)
	return &stripeEnv{sim: sim, srv: srv}
}

// do sends one Stripe API request the way stripe-go does (form body, bearer key).
func (e *stripeEnv) do(t *testing.T, method, path, key string, form url.Values) (int, http.Header, []byte) {
	t.Helper()
	var body io.Reader
	target := e.srv.URL + "/stripe" + path
	if method == http.MethodGet {
		target += "?" + form.Encode()
	} else {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+stripeKey)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return send(t, req)
}

func intentForm(amount, ref string) url.Values {
	return url.Values{
		"amount": {amount}, "currency": {"eur"}, "confirm": {"true"}, "off_session": {"true"},
		"customer": {"cus_1"}, "payment_method": {"pm_1"}, "metadata[merchant_reference]": {ref},
		"metadata[paysim.outcome]": {"succeed"},
	}
}

func sessionForm(ref string) url.Values {
	return url.Values{
		"mode": {"payment"}, "line_items[0][quantity]": {"1"}, "line_items[0][price_data][currency]": {"eur"},
		"line_items[0][price_data][unit_amount]": {"1500"}, "line_items[0][price_data][product_data][name]": {"Order"},
		"client_reference_id": {ref}, "metadata[merchant_reference]": {ref}, "payment_intent_data[metadata][merchant_reference]": {ref},
		"success_url": {"https://shop.example/ok"},
	}
}

func TestStripeIdempotency(t *testing.T) {
	e := startStripe(t, paysim.Options{})
	code, _, first := e.do(t, "POST", "/v1/payment_intents", "k1", intentForm("1000", "ORD-1"))
	if code != 200 {
		t.Fatalf("%d %s", code, first)
	}
	code, h, again := e.do(t, "POST", "/v1/payment_intents", "k1", intentForm("1000", "ORD-1"))
	if code != 200 || string(again) != string(first) || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %v", code, h)
	}
	t.Run("same key, other parameters", func(t *testing.T) {
		code, _, body := e.do(t, "POST", "/v1/payment_intents", "k1", intentForm("2000", "ORD-1"))
		if code != 400 || !strings.Contains(string(body), `"idempotency_error"`) {
			t.Fatalf("%d %s", code, body)
		}
	})
	t.Run("same key, other endpoint", func(t *testing.T) {
		code, _, body := e.do(t, "POST", "/v1/refunds", "k1", url.Values{"payment_intent": {"pi_x"}})
		if code != 400 || !strings.Contains(string(body), `"idempotency_error"`) {
			t.Fatalf("%d %s", code, body)
		}
	})
	t.Run("a validation error is not stored", func(t *testing.T) {
		bad := intentForm("1000", "ORD-2")
		bad.Set("capture_method", "whenever")
		if code, _, _ := e.do(t, "POST", "/v1/payment_intents", "k2", bad); code != 400 {
			t.Fatal(code)
		}
		if code, _, body := e.do(t, "POST", "/v1/payment_intents", "k2", intentForm("1000", "ORD-2")); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	})
	t.Run("a rate limit is not stored", func(t *testing.T) {
		e.sim.SetFaults(paysim.Faults{TooManyRequestsRate: 1, RetryAfter: 3 * time.Second})
		code, h, _ := e.do(t, "POST", "/v1/payment_intents", "k3", intentForm("1000", "ORD-3"))
		if code != 429 || h.Get("Retry-After") != "3" {
			t.Fatalf("%d %v", code, h)
		}
		e.sim.SetFaults(paysim.Faults{})
		if code, _, body := e.do(t, "POST", "/v1/payment_intents", "k3", intentForm("1000", "ORD-3")); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	})
	t.Run("a 500 is stored and replayed", func(t *testing.T) {
		e.sim.SetFaults(paysim.Faults{ServerErrorRate: 1})
		if code, _, _ := e.do(t, "POST", "/v1/payment_intents", "k4", intentForm("1000", "ORD-4")); code != 500 {
			t.Fatal(code)
		}
		e.sim.SetFaults(paysim.Faults{})
		code, h, _ := e.do(t, "POST", "/v1/payment_intents", "k4", intentForm("1000", "ORD-4"))
		if code != 500 || h.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%d %v", code, h)
		}
	})
	c, sc := e.sim.Counters(), e.sim.StripeCounters()
	if c.CreatesByKey["stripe/k1"] != 3 || sc.Replays != 2 || sc.ReplayedErrors != 1 || sc.IdempotencyErrors != 2 || sc.IntentsCreated != 3 {
		t.Fatalf("counters %+v %+v", c.CreatesByKey, sc)
	}
}

func TestStripeParametersAndRoutes(t *testing.T) {
	e := startStripe(t, paysim.Options{})
	for _, tt := range []struct {
		name, method, path string
		form               url.Values
		code               int
		contains           string
	}{
		{"unknown parameter", "POST", "/v1/payment_intents", url.Values{"amount": {"1"}, "currency": {"eur"}, "amout": {"1"}}, 400, "Received unknown parameter: amout"},
		{"upper-case currency", "POST", "/v1/payment_intents", url.Values{"amount": {"1"}, "currency": {"EUR"}}, 400, "lower-case"},
		{"confirm without a payment method", "POST", "/v1/payment_intents", url.Values{"amount": {"1"}, "currency": {"eur"}, "confirm": {"true"}}, 400, "missing a payment method"},
		{"session expiring too soon", "POST", "/v1/checkout/sessions", func() url.Values {
			f := sessionForm("ORD-1")
			f.Set("expires_at", "1")
			return f
		}(), 400, "at least 30 minutes"},
		{"missing object", "GET", "/v1/payment_intents/pi_nope", nil, 404, "resource_missing"},
		{"unknown route", "GET", "/v1/payment_intent/pi_1", nil, 404, "Unrecognized request URL"},
		{"search query paysim cannot run", "GET", "/v1/payment_intents/search", url.Values{"query": {"amount>5"}}, 400, "metadata"},
		{"events paged backwards", "GET", "/v1/events", url.Values{"ending_before": {"evt_1"}}, 400, "starting_after"},
		{"events after an unknown cursor", "GET", "/v1/events", url.Values{"starting_after": {"evt_nope"}}, 400, "No such event"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := e.do(t, tt.method, tt.path, "", tt.form)
			if code != tt.code || !strings.Contains(string(body), tt.contains) {
				t.Fatalf("%d %s", code, body)
			}
			var env struct {
				Error *stripego.Error `json:"error"`
			}
			if err := json.Unmarshal(body, &env); err != nil || env.Error == nil || env.Error.Type == "" {
				t.Fatalf("not Stripe's error envelope: %s", body)
			}
		})
	}
	t.Run("wrong key", func(t *testing.T) {
		req, _ := http.NewRequest("GET", e.srv.URL+"/stripe/v1/payment_intents/pi_1", nil)
		req.Header.Set("Authorization", "Bearer sk_test_wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 || e.sim.Counters().Unauthorized != 1 {
			t.Fatalf("%d", resp.StatusCode)
		}
	})
}

// TestStripeObjectsDecodeWithStripeGo: what paysim writes is what stripe-go reads,
// expansions included.
func TestStripeObjectsDecodeWithStripeGo(t *testing.T) {
	e := startStripe(t, paysim.Options{})
	code, _, body := e.do(t, "POST", "/v1/checkout/sessions", "s1", sessionForm("ORD-1"))
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var cs stripego.CheckoutSession
	if err := json.Unmarshal(body, &cs); err != nil || cs.Status != stripego.CheckoutSessionStatusOpen || cs.URL == "" || cs.AmountTotal != 1500 || cs.PaymentIntent != nil {
		t.Fatalf("%+v %v", cs, err)
	}
	if err := e.sim.StripePayer(cs.ID, paysim.PayerPays, ""); err != nil {
		t.Fatal(err)
	}
	_, _, body = e.do(t, "GET", "/v1/checkout/sessions/"+cs.ID, "", url.Values{"expand[0]": {"payment_intent.latest_charge"}})
	if err := json.Unmarshal(body, &cs); err != nil {
		t.Fatal(err)
	}
	pi := cs.PaymentIntent
	if cs.Status != stripego.CheckoutSessionStatusComplete || cs.URL != "" || pi == nil || pi.Status != stripego.PaymentIntentStatusSucceeded ||
		pi.LatestCharge == nil || pi.LatestCharge.AmountCaptured != 1500 || pi.Metadata["merchant_reference"] != "ORD-1" {
		t.Fatalf("%s", body)
	}
	// Not expanded: references are ids.
	_, _, body = e.do(t, "GET", "/v1/payment_intents/"+pi.ID, "", nil)
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil || raw["latest_charge"] != pi.LatestCharge.ID {
		t.Fatalf("latest_charge %v", raw["latest_charge"])
	}
	if v, ok := e.sim.Payment(paysim.Stripe, pi.ID); !ok || v.State != "succeeded" || v.Received != 1500 {
		t.Fatalf("view %+v", v)
	}
}

// TestStripeWebhooksConstructWithStripeGo: a delivery is what stripe-go's own
// webhook.ConstructEvent accepts (signature, tolerance, API version), with one v1 per
// secret during a rotation.
func TestStripeWebhooksConstructWithStripeGo(t *testing.T) {
	e := startStripe(t, paysim.Options{})
	var mu sync.Mutex
	var got []stripego.Event
	var headers []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := webhook.ConstructEvent(body, r.Header.Get("Stripe-Signature"), "whsec_new")
		mu.Lock()
		defer mu.Unlock()
		headers = append(headers, r.Header.Get("Stripe-Signature"))
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		got = append(got, ev)
	}))
	t.Cleanup(rcv.Close)
	if err := e.sim.SetWebhookTarget(paysim.Stripe, rcv.URL, []byte("whsec_old"), []byte("whsec_new")); err != nil {
		t.Fatal(err)
	}
	if code, _, body := e.do(t, "POST", "/v1/payment_intents", "w1", intentForm("1000", "ORD-W")); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	eventually(t, "delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if got[0].Type != stripego.EventTypePaymentIntentSucceeded || strings.Count(headers[0], "v1=") != 2 {
		t.Fatalf("%s %q", got[0].Type, headers[0])
	}
}

func TestStripeEventsList(t *testing.T) {
	e := startStripe(t, paysim.Options{})
	for _, ref := range []string{"A", "B", "C"} {
		if code, _, body := e.do(t, "POST", "/v1/payment_intents", "ev-"+ref, intentForm("1000", ref)); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	page := func(f url.Values) (ids []string, more bool) {
		t.Helper()
		code, _, body := e.do(t, "GET", "/v1/events", "", f)
		var l struct {
			Data    []stripego.Event `json:"data"`
			HasMore bool             `json:"has_more"`
		}
		if code != 200 || json.Unmarshal(body, &l) != nil {
			t.Fatalf("%d %s", code, body)
		}
		for _, ev := range l.Data {
			ids = append(ids, ev.ID)
		}
		return ids, l.HasMore
	}
	all := e.sim.Events(paysim.Stripe)
	if len(all) != 3 {
		t.Fatalf("%d events", len(all))
	}
	first, more := page(url.Values{"limit": {"2"}})
	if len(first) != 2 || !more || first[0] != all[2].ID || first[1] != all[1].ID {
		t.Fatalf("newest first: %v %v", first, more)
	}
	rest, more := page(url.Values{"limit": {"2"}, "starting_after": {first[1]}})
	if len(rest) != 1 || more || rest[0] != all[0].ID {
		t.Fatalf("next page %v %v", rest, more)
	}
	if ids, _ := page(url.Values{"types[0]": {"charge.refunded"}}); len(ids) != 0 {
		t.Fatalf("types filter %v", ids)
	}
	if ids, _ := page(url.Values{"type": {"payment_intent.*"}}); len(ids) != 3 {
		t.Fatalf("type wildcard %v", ids)
	}
	future := strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)
	if ids, _ := page(url.Values{"created[gte]": {future}}); len(ids) != 0 {
		t.Fatalf("created filter %v", ids)
	}
	if c := e.sim.Counters(); c.EventListCalls != 5 {
		t.Fatalf("event list calls %d", c.EventListCalls)
	}
}

func TestStripeControlAPI(t *testing.T) {
	e := startStripe(t, paysim.Options{})
	base := e.srv.URL + "/_paysim/stripe"
	code, _, body := e.do(t, "POST", "/v1/checkout/sessions", "c1", sessionForm("ORD-C"))
	var cs stripego.CheckoutSession
	if code != 200 || json.Unmarshal(body, &cs) != nil {
		t.Fatalf("%d %s", code, body)
	}
	post := func(path, body string) int {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post("/checkout/"+cs.ID+"/fails", `{"declineCode":"insufficient_funds"}`); c != 204 {
		t.Fatal(c)
	}
	if v, _ := e.sim.Payment(paysim.Stripe, cs.ID); v.State != "open" {
		t.Fatalf("a failed attempt leaves the session open: %+v", v)
	}
	if c := post("/checkout/"+cs.ID+"/dances", ``); c != 409 {
		t.Fatal(c)
	}
	if c := post("/checkout/"+cs.ID+"/abandons", ``); c != 204 {
		t.Fatal(c)
	}
	if c := post("/checkout/"+cs.ID+"/pays", ``); c != 409 {
		t.Fatalf("paid an expired session: %d", c)
	}
	if c := post("/refunds/re_nope/fail", ``); c != 404 {
		t.Fatal(c)
	}
	req, _ := http.NewRequest("PUT", base+"/search-lag", strings.NewReader(`{"lag":"1m"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Get(base + "/counters")
	if err != nil {
		t.Fatal(err)
	}
	var sc paysim.StripeCounters
	if err := json.NewDecoder(resp.Body).Decode(&sc); err != nil || sc.SessionsCreated != 1 || sc.SessionsExpired != 1 || sc.Declines != 1 {
		t.Fatalf("%+v %v", sc, err)
	}
	resp.Body.Close()
	resp, err = http.Get(e.srv.URL + "/stripe/checkout/" + cs.ID)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("payer page %v %v", resp, err)
	}
	resp.Body.Close()
}

// The session's url is a payer page a person (or the dev environment) can act on.
func TestStripePayerPage(t *testing.T) {
	e := startStripe(t, paysim.Options{})
	code, _, body := e.do(t, "POST", "/v1/checkout/sessions", "p1", sessionForm("ORD-P"))
	var cs stripego.CheckoutSession
	if code != 200 || json.Unmarshal(body, &cs) != nil {
		t.Fatalf("%d %s", code, body)
	}
	page := e.srv.URL + "/stripe/checkout/" + cs.ID
	post := func(decision string) int {
		resp, err := http.PostForm(page, url.Values{"decision": {decision}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post("dance"); c != http.StatusBadRequest {
		t.Fatalf("unknown decision: %d", c)
	}
	if v, _ := e.sim.Payment(paysim.Stripe, cs.ID); v.State != "open" {
		t.Fatalf("a refused decision changes nothing: %+v", v)
	}
	if c := post("approve"); c != http.StatusOK {
		t.Fatalf("approve: %d", c)
	}
	if v, _ := e.sim.Payment(paysim.Stripe, cs.ID); v.State != "complete/paid" {
		t.Fatalf("the payer paid: %+v", v)
	}
	if c := post("approve"); c != http.StatusConflict {
		t.Fatalf("a completed session cannot be paid again: %d", c)
	}
}

// TestStripeEventsGoBackThirtyDays: GET /v1/events lists the events of the last
// 30 days only ("List events, going back up to 30 days", Stripe API reference,
// Events, "List all events"), whatever created[gte] asks for; a page cursor that
// names an event past that is no such event.
func TestStripeEventsGoBackThirtyDays(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := startStripe(t, paysim.Options{Now: clk.Now})
	for _, ref := range []string{"OLD", "NEW"} {
		if code, _, body := e.do(t, "POST", "/v1/payment_intents", "ev-"+ref, intentForm("1000", ref)); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		clk.Step(20 * 24 * time.Hour)
	}
	// Now: OLD is 40 days old, NEW 20 days.
	all := e.sim.Events(paysim.Stripe)
	if len(all) != 2 {
		t.Fatalf("%d events", len(all))
	}
	code, _, body := e.do(t, "GET", "/v1/events", "", url.Values{"created[gte]": {strconv.FormatInt(all[0].Created.Unix(), 10)}})
	var l struct {
		Data []stripego.Event `json:"data"`
	}
	if code != 200 || json.Unmarshal(body, &l) != nil || len(l.Data) != 1 || l.Data[0].ID != all[1].ID {
		t.Fatalf("events of the last 30 days: %d %s; want only %s", code, body, all[1].ID)
	}
	if code, _, body := e.do(t, "GET", "/v1/events", "", url.Values{"starting_after": {all[0].ID}}); code != 400 {
		t.Fatalf("a cursor past the 30 days: %d %s", code, body)
	}
}

// Stripe's captures, cancels and refunds are counted per PaymentIntent like the
// other providers' (capturesByPayment, voidsByPayment, refundsByPayment, and the
// calls per idempotency key), and the control API's view shows the
// authorization, the charge and the refunds with paywarden's reference.
func TestStripeCountersAndViewPerPayment(t *testing.T) {
	e := startStripe(t, paysim.Options{})
	manual := func(ref string) stripego.PaymentIntent {
		f := intentForm("1000", ref)
		f.Set("capture_method", "manual")
		code, _, body := e.do(t, "POST", "/v1/payment_intents", "create-"+ref, f)
		var pi stripego.PaymentIntent
		if code != 200 || json.Unmarshal(body, &pi) != nil || pi.Status != stripego.PaymentIntentStatusRequiresCapture {
			t.Fatalf("create %s: %d %s", ref, code, body)
		}
		return pi
	}
	captured, voided := manual("ORD-CAP"), manual("ORD-VOID")
	if v, _ := e.sim.Payment(paysim.Stripe, captured.ID); v.Authorization == nil || v.Authorization.Amount != 1000 || v.Authorization.Status != "CREATED" || !v.ManualCapture {
		t.Fatalf("authorized intent's view: %+v", v)
	}
	for i := 0; i < 2; i++ { // the second is replayed, not captured again
		if code, _, body := e.do(t, "POST", "/v1/payment_intents/"+captured.ID+"/capture", "capture-1", url.Values{"amount_to_capture": {"600"}}); code != 200 {
			t.Fatalf("capture: %d %s", code, body)
		}
	}
	if code, _, body := e.do(t, "POST", "/v1/payment_intents/"+voided.ID+"/cancel", "cancel-1", nil); code != 200 {
		t.Fatalf("cancel: %d %s", code, body)
	}
	refund := url.Values{"payment_intent": {captured.ID}, "amount": {"200"}, "metadata[reference]": {"shop/r1/uid-1"}}
	for i := 0; i < 2; i++ {
		if code, _, body := e.do(t, "POST", "/v1/refunds", "refund-1", refund); code != 200 {
			t.Fatalf("refund: %d %s", code, body)
		}
	}
	c := e.sim.Counters()
	if c.CapturesByPayment[captured.ID] != 1 || c.VoidsByPayment[voided.ID] != 1 || c.RefundsByPayment[captured.ID] != 1 ||
		c.CapturesByPayment[voided.ID] != 0 || c.ActionsByKey["stripe/capture-1"] != 2 || c.ActionsByKey["stripe/refund-1"] != 2 ||
		c.ActionsByKey["stripe/cancel-1"] != 1 || c.ActionsByKey["stripe/create-ORD-CAP"] != 0 {
		t.Errorf("counters: captures %v, voids %v, refunds %v, actions %v", c.CapturesByPayment, c.VoidsByPayment, c.RefundsByPayment, c.ActionsByKey)
	}
	v, _ := e.sim.Payment(paysim.Stripe, captured.ID)
	if v.Received != 600 || v.Refunded != 200 || v.Authorization == nil || v.Authorization.Status != "CAPTURED" || v.CaptureID == "" ||
		len(v.Refunds) != 1 || v.Refunds[0].Reference != "shop/r1/uid-1" || v.Refunds[0].Status != "succeeded" || v.Refunds[0].Amount != 200 {
		t.Errorf("captured intent's view: %+v", v)
	}
	if err := e.sim.StripeFailRefund(v.Refunds[0].ID, ""); err != nil {
		t.Fatal(err)
	}
	if v, _ := e.sim.Payment(paysim.Stripe, captured.ID); v.Refunded != 0 || v.Refunds[0].Status != "failed" {
		t.Errorf("after the refund failed: %+v", v)
	}
	if v, _ := e.sim.Payment(paysim.Stripe, voided.ID); v.State != "canceled" || v.Authorization == nil || v.Authorization.Status != "VOIDED" {
		t.Errorf("canceled intent's view: %+v", v)
	}
	// The control API's list reads back into PaymentViews (a client of it
	// checks the scripts it decodes).
	resp, err := http.Get(e.srv.URL + "/_paysim/payments/stripe")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var views []paysim.PaymentView
	if err := json.NewDecoder(resp.Body).Decode(&views); err != nil || len(views) != 2 {
		t.Errorf("GET /_paysim/payments/stripe: %d views, %v", len(views), err)
	}
}
