package paysim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

var bg = context.Background()

var shopCheckout = &provider.Checkout{ReturnURL: "https://shop.example/return?cart=7", CancelURL: "https://shop.example/cancel"}

func (e *env) createWith(t *testing.T, name string, req provider.CreateRequest) provider.Payment {
	t.Helper()
	if req.Currency == "" {
		req.Currency = "USD"
	}
	p, err := e.p[name].Create(bg, req)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return p
}

// rawCall sends one API request as the adapters do (credentials, JSON body, an
// idempotency header when key is set) and returns the status, headers and body.
func (e *env) rawCall(t *testing.T, prov, method, path, key, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.srv.URL+"/"+prov+path, rd)
	req.Header.Set("Content-Type", "application/json")
	switch prov {
	case paysim.KukoPay:
		req.Header.Set(kukopay.HeaderAPIKey, "kuko-key")
		if key != "" {
			req.Header.Set(kukopay.HeaderIdempotencyKey, key)
		}
	case paysim.PayPal:
		req.Header.Set("Authorization", "Bearer "+paysimtest.PayPalToken(t, e.srv.URL, "pp-id", "pp-secret"))
		if key != "" {
			req.Header.Set(paypal.HeaderRequestID, key)
		}
	default:
		req.Header.Set("Authorization", "Bearer gen-token")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
	}
	return send(t, req)
}

func (e *env) status(t *testing.T, name, id string) provider.Payment {
	t.Helper()
	p, err := e.p[name].Get(bg, id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func eventTypes(e *env, prov, paymentID string) []string {
	var out []string
	for _, ev := range e.sim.Events(prov) {
		if ev.PaymentID == paymentID {
			out = append(out, ev.Type)
		}
	}
	return out
}

func TestPayPalOrderWaitsForTheApprovalControlCall(t *testing.T) {
	e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}})
	control := paysim.NewControlClient(e.srv.URL)
	p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000, Checkout: shopCheckout})
	if p.RawStatus != "PAYER_ACTION_REQUIRED" || p.CustomerAction == nil {
		t.Fatalf("%+v", p)
	}
	if got := e.status(t, paysim.PayPal, p.ID); got.RawStatus != "PAYER_ACTION_REQUIRED" {
		t.Fatalf("an abandoned order moved: %+v", got)
	}
	if err := control.Approve(bg, paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	got := e.status(t, paysim.PayPal, p.ID)
	if got.Status != provider.StatusApproved || got.RawStatus != "APPROVED" {
		t.Fatalf("%+v", got)
	}
	if err := control.Approve(bg, paysim.PayPal, p.ID); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a second approval: %v", err)
	}
	if evs := eventTypes(e, paysim.PayPal, p.ID); len(evs) != 1 || evs[0] != "CHECKOUT.ORDER.APPROVED" {
		t.Fatalf("events %v", evs)
	}
	c := e.sim.Counters()
	if c.Approvals != 1 || c.CapturesByPayment[p.ID] != 0 {
		t.Fatalf("counters %+v", c)
	}
	if err := control.Approve(bg, paysim.PayPal, "NOSUCHORDER"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown order: %v", err)
	}
}

func TestScriptedPayerApprovesAfterADelayAndTheOrderWaitsForTheMerchant(t *testing.T) {
	e := start(t, paysim.Options{TimeFactor: 0.001})
	if err := e.sim.Script(paysim.Rule{Provider: paysim.PayPal, MerchantReference: "ref-approve", Script: paysim.Script{Outcome: paysim.OutcomeApprove, After: 5 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "ref-approve", Amount: 1000})
	if p.Status != provider.StatusPending || p.RawStatus != "CREATED" {
		t.Fatalf("%+v", p)
	}
	eventually(t, "approval", func() bool { return e.status(t, paysim.PayPal, p.ID).Status == provider.StatusApproved })
	// PayPal takes no money without the merchant's call.
	time.Sleep(20 * time.Millisecond)
	if got := e.status(t, paysim.PayPal, p.ID); got.Status != provider.StatusApproved {
		t.Fatalf("an approved order moved on its own: %+v", got)
	}
}

func TestHostedPageApprovesAndSendsThePayerBack(t *testing.T) {
	e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}})
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	// decide posts the payer's decision on the page at link and returns the
	// answer's status and Location (where the payer is sent back).
	decide := func(t *testing.T, link, decision string) (int, string) {
		t.Helper()
		resp, err := noRedirect.PostForm(link, url.Values{"decision": {decision}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Location")
	}
	for _, tt := range []struct {
		prov, param string
		after       provider.Status
	}{
		{paysim.PayPal, "token", provider.StatusApproved},
		{paysim.KukoPay, "payment", provider.StatusSucceeded},
		{paysim.Generic, "payment", provider.StatusSucceeded},
	} {
		t.Run(tt.prov, func(t *testing.T) {
			p := e.createWith(t, tt.prov, provider.CreateRequest{IdempotencyKey: "k-" + tt.prov, MerchantReference: "r-" + tt.prov, Amount: 1000, Checkout: shopCheckout})
			link := p.CustomerAction.URL
			resp, err := http.Get(link)
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !bytes.Contains(page, []byte(`value="approve"`)) || !bytes.Contains(page, []byte(p.ID)) {
				t.Fatalf("page %d %s", resp.StatusCode, page)
			}
			if code, loc := decide(t, link, "cancel"); code != http.StatusSeeOther || loc != "https://shop.example/cancel?"+tt.param+"="+p.ID {
				t.Fatalf("cancel: %d %q", code, loc)
			}
			if got := e.status(t, tt.prov, p.ID); got.CustomerAction == nil {
				t.Fatalf("the payer's cancel changed the payment: %+v", got)
			}
			if code, loc := decide(t, link, "approve"); code != http.StatusSeeOther || loc != "https://shop.example/return?cart=7&"+tt.param+"="+p.ID {
				t.Fatalf("approve: %d %q", code, loc)
			}
			if got := e.status(t, tt.prov, p.ID); got.Status != tt.after {
				t.Fatalf("%+v", got)
			}
		})
	}
}

// TestCaptureHappensOncePerOrderAndReplaysByKey: the same PayPal-Request-Id replays
// the first answer byte for byte; another id is refused with ORDER_ALREADY_CAPTURED.
func TestCaptureHappensOncePerOrderAndReplaysByKey(t *testing.T) {
	e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeApprove}})
	p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000})
	eventually(t, "approval", func() bool { return e.status(t, paysim.PayPal, p.ID).Status == provider.StatusApproved })
	path := "/v2/checkout/orders/" + p.ID + "/capture"
	code1, _, first := e.rawCall(t, paysim.PayPal, http.MethodPost, path, "cap-A", `{}`)
	code2, h2, second := e.rawCall(t, paysim.PayPal, http.MethodPost, path, "cap-A", `{}`)
	if code1 != http.StatusCreated || code2 != http.StatusCreated || !bytes.Equal(first, second) || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %d %d\n%s\n%s", code1, code2, first, second)
	}
	code3, _, third := e.rawCall(t, paysim.PayPal, http.MethodPost, path, "cap-B", `{}`)
	if code3 != http.StatusUnprocessableEntity || paypal.Issue(third) != paypal.IssueOrderAlreadyCaptured {
		t.Fatalf("second capture: %d %s", code3, third)
	}
	code4, _, fourth := e.rawCall(t, paysim.PayPal, http.MethodPost, path, "cap-A", `{"other":"body"}`)
	if code4 != http.StatusUnprocessableEntity || paypal.Issue(fourth) != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("the key with another body: %d %s", code4, fourth)
	}
	c := e.sim.Counters()
	if c.CapturesByPayment[p.ID] != 1 || c.ActionsByKey["paypal/cap-A"] != 3 || c.ActionsByKey["paypal/cap-B"] != 1 {
		t.Fatalf("counters: captures %v, by key %v", c.CapturesByPayment, c.ActionsByKey)
	}
	if evs := eventTypes(e, paysim.PayPal, p.ID); strings.Join(evs, ",") != "CHECKOUT.ORDER.APPROVED,PAYMENT.CAPTURE.COMPLETED" {
		t.Fatalf("events %v", evs)
	}
}

// TestLostCaptureResponseThenReplayReturnsTheSameCapture is the double-charge trap of
// capture: the capture happened and its answer was lost; the replay with the same key
// returns that capture and captures nothing more.
func TestLostCaptureResponseThenReplayReturnsTheSameCapture(t *testing.T) {
	for _, tt := range []struct {
		name, prov, manual string
	}{
		{"paypal order capture", paysim.PayPal, ""},
		{"paypal authorization capture", paysim.PayPal, "manual"},
		{"kukopay capture", paysim.KukoPay, "manual"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeApprove}})
			req := provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000}
			if tt.manual != "" {
				req.CaptureMethod = provider.CaptureManual
			}
			p := e.createWith(t, tt.prov, req)
			var path, body string
			switch {
			case tt.prov == paysim.KukoPay:
				eventually(t, "authorization", func() bool { return e.status(t, tt.prov, p.ID).Status == provider.StatusAuthorized })
				path, body = "/v1/payments/"+p.ID+"/capture", `{"amount_to_capture":600}`
			case tt.manual != "":
				eventually(t, "approval", func() bool { return e.status(t, tt.prov, p.ID).Status == provider.StatusApproved })
				if _, err := e.p[tt.prov].Authorize(bg, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "auth"}); err != nil {
					t.Fatal(err)
				}
				v, _ := e.sim.Payment(tt.prov, p.ID)
				path, body = "/v2/payments/authorizations/"+v.Authorization.ID+"/capture", `{"amount":{"currency_code":"USD","value":"6.00"},"final_capture":true}`
			default:
				eventually(t, "approval", func() bool { return e.status(t, tt.prov, p.ID).Status == provider.StatusApproved })
				path, body = "/v2/checkout/orders/"+p.ID+"/capture", `{}`
			}
			e.sim.SetFaults(paysim.Faults{LostResponseRate: 1, Operations: []string{paysim.OpCapture}})
			if code, _, _ := e.rawCall(t, tt.prov, http.MethodPost, path, "cap-1", body); code != http.StatusInternalServerError {
				t.Fatalf("lost answer: %d", code)
			}
			if got := e.status(t, tt.prov, p.ID); got.Status != provider.StatusSucceeded {
				t.Fatalf("the capture did not take effect: %+v", got)
			}
			e.sim.SetFaults(paysim.Faults{})
			code, h, replay := e.rawCall(t, tt.prov, http.MethodPost, path, "cap-1", body)
			if code/100 != 2 || h.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay %d %s", code, replay)
			}
			v, _ := e.sim.Payment(tt.prov, p.ID)
			if !bytes.Contains(replay, []byte(v.CaptureID)) && !bytes.Contains(replay, []byte(p.ID)) {
				t.Fatalf("the replay is not the capture: %s", replay)
			}
			c := e.sim.Counters()
			if c.CapturesByPayment[p.ID] != 1 || c.APIFaults.LostResponses != 1 || v.Received != 600 && tt.prov == paysim.KukoPay {
				t.Fatalf("captures %v, lost %d, received %d", c.CapturesByPayment, c.APIFaults.LostResponses, v.Received)
			}
		})
	}
}

func TestAuthorizationExpiresOnTheScaledClock(t *testing.T) {
	t.Run("the timer expires it after the scaled period", func(t *testing.T) {
		e := start(t, paysim.Options{TimeFactor: 0.001, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeApprove, AuthorizationPeriod: 10 * time.Minute}})
		pp := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k1", MerchantReference: "r1", Amount: 1000, CaptureMethod: provider.CaptureManual})
		eventually(t, "approval", func() bool { return e.status(t, paysim.PayPal, pp.ID).Status == provider.StatusApproved })
		if _, err := e.p[paysim.PayPal].Authorize(bg, provider.ActionRequest{PaymentID: pp.ID, IdempotencyKey: "a"}); err != nil {
			t.Fatal(err)
		}
		kp := e.createWith(t, paysim.KukoPay, provider.CreateRequest{IdempotencyKey: "k2", MerchantReference: "r2", Amount: 1000, CaptureMethod: provider.CaptureManual})
		for _, tt := range []struct{ prov, id, raw string }{{paysim.PayPal, pp.ID, "COMPLETED/authorization:EXPIRED"}, {paysim.KukoPay, kp.ID, "expired"}} {
			eventually(t, tt.prov+" expiry", func() bool {
				got := e.status(t, tt.prov, tt.id)
				return got.Status == provider.StatusExpired && got.FailureCode == provider.FailureAuthorizationExpired && got.RawStatus == tt.raw
			})
		}
		// Both say so by webhook: KukoPay payment.expired, PayPal the VOIDED it also
		// sends for a merchant's void (TestPayPalAuthorizationAtItsValidityEndIsVoided).
		if evs := eventTypes(e, paysim.KukoPay, kp.ID); evs[len(evs)-1] != "payment.expired" {
			t.Fatalf("kukopay events %v", evs)
		}
		if evs := eventTypes(e, paysim.PayPal, pp.ID); evs[len(evs)-1] != "PAYMENT.AUTHORIZATION.VOIDED" {
			t.Fatalf("paypal events %v", evs)
		}
		// On a scaled clock the event is dated at the simulated expiry, so it
		// never reads as a void before the authorization's end.
		all := e.sim.Events(paysim.PayPal)
		if v, _ := e.sim.Payment(paysim.PayPal, pp.ID); !all[len(all)-1].Created.Equal(v.Authorization.ExpiresAt) {
			t.Fatalf("VOIDED dated %s, the authorization ends %s", all[len(all)-1].Created, v.Authorization.ExpiresAt)
		}
		if _, err := e.p[paysim.PayPal].Capture(bg, provider.ActionRequest{PaymentID: pp.ID, IdempotencyKey: "c"}); !errors.Is(err, provider.ErrNonRetryable) {
			t.Fatalf("capture of an expired authorization: %v", err)
		}
	})
	t.Run("PayPal's 29 days on a clock that tests move", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC))
		e := start(t, paysim.Options{Now: clk.Now, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeApprove}})
		p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000, CaptureMethod: provider.CaptureManual})
		eventually(t, "approval", func() bool { return e.status(t, paysim.PayPal, p.ID).Status == provider.StatusApproved })
		got, err := e.p[paysim.PayPal].Authorize(bg, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "a"})
		if err != nil || !got.AuthorizationExpiresAt.Equal(clk.Now().Add(29*24*time.Hour)) {
			t.Fatalf("%+v %v", got, err)
		}
		clk.Step(29*24*time.Hour - time.Second)
		if got := e.status(t, paysim.PayPal, p.ID); got.Status != provider.StatusAuthorized {
			t.Fatalf("expired early: %+v", got)
		}
		clk.Step(time.Second)
		if got := e.status(t, paysim.PayPal, p.ID); got.Status != provider.StatusExpired {
			t.Fatalf("not expired: %+v", got)
		}
	})
}

func TestKukoPayNeedsActionAndManualCapture(t *testing.T) {
	e := start(t, paysim.Options{TimeFactor: 0.001})
	meta := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	t.Run("needs_action waits for the payer, who completes after the delay", func(t *testing.T) {
		p := e.createWith(t, paysim.KukoPay, provider.CreateRequest{IdempotencyKey: "k1", MerchantReference: "r1", Amount: 1000, Metadata: meta(paysim.MetaOutcome, "needs_action", paysim.MetaAfter, "5s")})
		if p.RawStatus != "requires_action" || p.CustomerAction == nil {
			t.Fatalf("%+v", p)
		}
		eventually(t, "payment", func() bool { return e.status(t, paysim.KukoPay, p.ID).Status == provider.StatusSucceeded })
	})
	t.Run("needs_action without a delay waits for the control call", func(t *testing.T) {
		p := e.createWith(t, paysim.KukoPay, provider.CreateRequest{IdempotencyKey: "k2", MerchantReference: "r2", Amount: 1000, CaptureMethod: provider.CaptureManual, Metadata: meta(paysim.MetaOutcome, "needs_action")})
		time.Sleep(10 * time.Millisecond)
		if got := e.status(t, paysim.KukoPay, p.ID); got.RawStatus != "requires_action" {
			t.Fatalf("%+v", got)
		}
		if err := e.sim.Approve(paysim.KukoPay, p.ID); err != nil {
			t.Fatal(err)
		}
		got := e.status(t, paysim.KukoPay, p.ID)
		if got.Status != provider.StatusAuthorized || got.RawStatus != "requires_capture" || got.Amount != 1000 {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("succeed for a manual-capture payment is its authorization", func(t *testing.T) {
		p := e.createWith(t, paysim.KukoPay, provider.CreateRequest{IdempotencyKey: "k3", MerchantReference: "r3", Amount: 1000, CaptureMethod: provider.CaptureManual, StoredMethod: &provider.StoredMethod{Customer: "cus", PaymentMethod: "pm"}, Metadata: meta(paysim.MetaOutcome, "succeed")})
		eventually(t, "authorization", func() bool { return e.status(t, paysim.KukoPay, p.ID).Status == provider.StatusAuthorized })
	})
	t.Run("a failing capture declines the payment", func(t *testing.T) {
		p := e.createWith(t, paysim.KukoPay, provider.CreateRequest{IdempotencyKey: "k4", MerchantReference: "r4", Amount: 1000, CaptureMethod: provider.CaptureManual, Metadata: meta(paysim.MetaOutcome, "approve", paysim.MetaCapture, "fail", paysim.MetaFailure, "insufficient_funds")})
		eventually(t, "authorization", func() bool { return e.status(t, paysim.KukoPay, p.ID).Status == provider.StatusAuthorized })
		got, err := e.p[paysim.KukoPay].Capture(bg, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap"})
		if err != nil || got.Status != provider.StatusFailed || got.FailureCode != "insufficient_funds" {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("an unpaid checkout expires with its link", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC))
		e := start(t, paysim.Options{Now: clk.Now, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}})
		p := e.createWith(t, paysim.KukoPay, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000, Checkout: shopCheckout})
		if !p.CustomerAction.ExpiresAt.Equal(clk.Now().Add(paysim.DefaultCheckoutTTL)) {
			t.Fatalf("%+v", p.CustomerAction)
		}
		clk.Step(paysim.DefaultCheckoutTTL)
		got := e.status(t, paysim.KukoPay, p.ID)
		if got.Status != provider.StatusExpired || got.CustomerAction != nil || got.FailureCode != "" {
			t.Fatalf("%+v", got)
		}
		if err := e.sim.Approve(paysim.KukoPay, p.ID); err == nil {
			t.Fatal("an expired checkout was approved")
		}
	})
}

// TestRefundsAreIdempotentAndScriptable: a refund key replays its refund; another
// key is another refund; a pending refund settles by the control API.
func TestRefundsAreIdempotentAndScriptable(t *testing.T) {
	e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeSucceed, RefundOutcome: paysim.OutcomePending}})
	control := paysim.NewControlClient(e.srv.URL)
	p := e.createWith(t, paysim.KukoPay, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000})
	eventually(t, "payment", func() bool { return e.status(t, paysim.KukoPay, p.ID).Status == provider.StatusSucceeded })
	body := `{"payment":"` + p.ID + `","amount":300,"metadata":{"reference":"ns.r1"}}`
	code1, _, first := e.rawCall(t, paysim.KukoPay, http.MethodPost, "/v1/refunds", "refund-1", body)
	code2, _, second := e.rawCall(t, paysim.KukoPay, http.MethodPost, "/v1/refunds", "refund-1", body)
	if code1 != 200 || code2 != 200 || !bytes.Equal(first, second) {
		t.Fatalf("%d %d\n%s\n%s", code1, code2, first, second)
	}
	if code, _, b := e.rawCall(t, paysim.KukoPay, http.MethodPost, "/v1/refunds", "refund-1", strings.Replace(body, "300", "301", 1)); code != http.StatusUnprocessableEntity {
		t.Fatalf("the key with another amount: %d %s", code, b)
	}
	var r kukopay.RefundObject
	_ = json.Unmarshal(first, &r)
	if r.Status != "pending" {
		t.Fatalf("%s", first)
	}
	if n := e.sim.Counters().RefundsByPayment[p.ID]; n != 1 {
		t.Fatalf("%d refunds", n)
	}
	// Pending refunds count against what is left.
	if code, _, b := e.rawCall(t, paysim.KukoPay, http.MethodPost, "/v1/refunds", "refund-2", `{"payment":"`+p.ID+`","amount":701}`); code != 400 || !bytes.Contains(b, []byte(kukopay.ErrorCodeAmountTooLarge)) {
		t.Fatalf("%d %s", code, b)
	}
	if err := control.SettleRefund(bg, paysim.KukoPay, r.ID, paysim.OutcomeSucceed); err != nil {
		t.Fatal(err)
	}
	if err := control.SettleRefund(bg, paysim.KukoPay, r.ID, paysim.OutcomeFail); err == nil {
		t.Fatal("a settled refund settled again")
	}
	if got := e.status(t, paysim.KukoPay, p.ID); got.RefundedTotal != 300 {
		t.Fatalf("%+v", got)
	}
	v, err := control.Payment(bg, paysim.KukoPay, p.ID)
	if err != nil || len(v.Refunds) != 1 || v.Refunds[0].Status != "succeeded" || v.Refunds[0].Reference != "ns.r1" {
		t.Fatalf("%+v %v", v, err)
	}
	if evs := eventTypes(e, paysim.KukoPay, p.ID); evs[len(evs)-1] != "refund.succeeded" {
		t.Fatalf("%v", evs)
	}
}

// TestLostRefundResponseThenRetryIsOneRefund is the double-refund trap for every
// provider: the refund was made and its answer lost; the retry with the same key gets
// the same refund back.
func TestLostRefundResponseThenRetryIsOneRefund(t *testing.T) {
	for _, name := range allProviders {
		t.Run(name, func(t *testing.T) {
			e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeSucceed}})
			p := e.createWith(t, name, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000})
			eventually(t, "payment", func() bool { return e.status(t, name, p.ID).Status == provider.StatusSucceeded })
			req := provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "refund-1", Reference: "ns.r", Amount: 400, Currency: "USD"}
			e.sim.SetFaults(paysim.Faults{LostResponseRate: 1, Operations: []string{paysim.OpRefund}})
			if _, err := e.p[name].CreateRefund(bg, req); !errors.Is(err, provider.ErrRetryable) {
				t.Fatalf("%v", err)
			}
			e.sim.SetFaults(paysim.Faults{})
			r, err := e.p[name].CreateRefund(bg, req)
			if err != nil || r.Amount != 400 {
				t.Fatalf("%+v %v", r, err)
			}
			v, _ := e.sim.Payment(name, p.ID)
			c := e.sim.Counters()
			if c.RefundsByPayment[p.ID] != 1 || len(v.Refunds) != 1 || v.Refunds[0].ID != r.ID || v.Refunded != 400 || c.APIFaults.LostResponses != 1 {
				t.Fatalf("refunds %+v, counters %v", v.Refunds, c.RefundsByPayment)
			}
		})
	}
}

func TestFaultOperationsLimitWhereFaultsHit(t *testing.T) {
	e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeSucceed}})
	p := e.createWith(t, paysim.Generic, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000})
	e.sim.SetFaults(paysim.Faults{ServerErrorRate: 1, Operations: []string{paysim.OpRefund}})
	eventually(t, "payment", func() bool { return e.status(t, paysim.Generic, p.ID).Status == provider.StatusSucceeded })
	if _, err := e.p[paysim.Generic].CreateRefund(bg, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "r", Amount: 1, Currency: "USD"}); !errors.Is(err, provider.ErrRetryable) {
		t.Fatalf("%v", err)
	}
	if c := e.sim.Counters(); c.APIFaults.ServerErrors != 1 || c.RefundsByPayment[p.ID] != 0 {
		t.Fatalf("%+v", c.APIFaults)
	}
}

func TestLifecycleControlAPI(t *testing.T) {
	e := start(t, paysim.Options{})
	base := e.srv.URL + "/_paysim"
	if code, body := call(t, "PUT", base+"/faults", `{"lostResponseRate":1,"operations":["capture","refund"]}`); code != 200 || !strings.Contains(body, `"operations":["capture","refund"]`) {
		t.Fatalf("faults: %d %s", code, body)
	}
	if f := e.sim.Faults(); len(f.Operations) != 2 || f.Operations[1] != paysim.OpRefund {
		t.Fatalf("%+v", f)
	}
	if code, _ := call(t, "PUT", base+"/faults", `{"operations":["teleport"]}`); code != 400 {
		t.Fatal("an unknown operation was accepted")
	}
	call(t, "PUT", base+"/faults", `{}`)
	if code, body := call(t, "POST", base+"/scripts", `{"provider":"paypal","script":{"outcome":"approve","after":"1m","captureOutcome":"fail","authorizationPeriod":"72h","refundOutcome":"pending","refundAfter":"5s"}}`); code != 201 ||
		!strings.Contains(body, `"authorizationPeriod":"72h0m0s"`) || !strings.Contains(body, `"captureOutcome":"fail"`) {
		t.Fatalf("scripts: %d %s", code, body)
	}
	for _, bad := range []string{`{"script":{"outcome":"approve","captureOutcome":"explode"}}`, `{"script":{"outcome":"approve","refundOutcome":"processing"}}`} {
		if code, _ := call(t, "POST", base+"/scripts", bad); code != 400 {
			t.Fatalf("accepted %s", bad)
		}
	}
	p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000})
	if code, _ := call(t, "POST", base+"/payments/paypal/"+p.ID+"/approve", ""); code != 204 {
		t.Fatalf("approve %d", code)
	}
	if code, _ := call(t, "POST", base+"/payments/paypal/"+p.ID+"/approve", ""); code != 409 {
		t.Fatalf("approve twice %d", code)
	}
	if code, _ := call(t, "POST", base+"/refunds/paypal/NOPE/settle", `{"outcome":"succeed"}`); code != 409 {
		t.Fatalf("settle unknown %d", code)
	}
	code, body := call(t, "GET", base+"/counters", "")
	for _, field := range []string{`"approvals":1`, `"actionRequests":0`, `"actionsByKey":{}`, `"capturesByPayment":{}`, `"authorizationsByPayment":{}`, `"voidsByPayment":{}`, `"refundsByPayment":{}`} {
		if code != 200 || !strings.Contains(body, field) {
			t.Errorf("counters lack %s: %s", field, body)
		}
	}
	code, body = call(t, "GET", base+"/payments/paypal/"+p.ID, "")
	if code != 200 || !strings.Contains(body, `"state":"approved"`) {
		t.Fatalf("%d %s", code, body)
	}
}

func TestScriptJSONRoundTripsTheLifecycleFields(t *testing.T) {
	in := paysim.Script{Outcome: paysim.OutcomeNeedsAction, After: time.Minute, CaptureOutcome: paysim.OutcomeProcessing, AuthorizationPeriod: time.Hour, RefundOutcome: paysim.OutcomeFail, RefundAfter: 3 * time.Second}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out paysim.Script
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Fatalf("%s -> %+v %v", b, out, err)
	}
}
