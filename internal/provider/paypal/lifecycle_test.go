package paypal_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

var simNow = time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)

// simAdapter runs paysim (orders wait for the payer unless opts scripts otherwise) and
// a PayPal adapter against it.
func simAdapter(t *testing.T, opts paysim.Options) (*paysimtest.Server, *paypal.Adapter) {
	t.Helper()
	srv := paysimtest.StartAt(t, opts, simNow)
	a, err := paypal.New(provider.Config{
		Name: "ns/pp", APIURL: srv.URL + "/paypal", WebhookID: paysim.DefaultPayPalWebhookID, Timeout: 2 * time.Second,
		Credentials: map[string][]byte{"clientID": []byte("id"), "clientSecret": []byte("secret")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, a
}

// key returns a fresh idempotency key.
var key = new(providertest.Keys).Next

func createOrder(t *testing.T, a *paypal.Adapter, capture provider.CaptureMethod, amount int64, currency string) provider.Payment {
	t.Helper()
	p, err := a.Create(ctx, provider.CreateRequest{
		IdempotencyKey: key("create"), MerchantReference: "ref-1", Amount: amount, Currency: currency,
		CaptureMethod: capture, Checkout: &provider.Checkout{ReturnURL: "https://shop.example/return", CancelURL: "https://shop.example/cancel"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// posts returns the recorded POSTs whose path ends with suffix.
func posts(srv *paysimtest.Server, suffix string) []paysimtest.Request {
	var out []paysimtest.Request
	for _, r := range srv.Requests(false) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, suffix) {
			out = append(out, r)
		}
	}
	return out
}

func wantOnePost(t *testing.T, srv *paysimtest.Server, path, key, body string) {
	t.Helper()
	got := posts(srv, path)
	if len(got) != 1 {
		t.Fatalf("%d POST %s, want 1 (requests %v)", len(got), path, srv.Requests(false))
	}
	if k := got[0].Header.Get(paypal.HeaderRequestID); k != key {
		t.Errorf("PayPal-Request-Id = %q, want %q", k, key)
	}
	if body != "-" && string(got[0].Body) != body {
		t.Errorf("body\n got  %s\n want %s", got[0].Body, body)
	}
}

func TestCreateSendsIntentAndExperienceContext(t *testing.T) {
	tests := []struct {
		name     string
		capture  provider.CaptureMethod
		checkout *provider.Checkout
		body     string
		status   string
		rel      string
	}{
		{"automatic capture without checkout is intent CAPTURE, CREATED with an approve link", "", nil,
			`{"intent":"CAPTURE","purchase_units":[{"reference_id":"default","invoice_id":"ref-1","custom_id":"ref-1","description":"d","amount":{"currency_code":"USD","value":"19.99"}}]}`,
			"CREATED", "approve"},
		{"automatic capture with checkout sends return and cancel URLs and PAY_NOW", provider.CaptureAutomatic, &provider.Checkout{ReturnURL: "https://shop.example/r", CancelURL: "https://shop.example/c"},
			`{"intent":"CAPTURE","purchase_units":[{"reference_id":"default","invoice_id":"ref-1","custom_id":"ref-1","description":"d","amount":{"currency_code":"USD","value":"19.99"}}],"payment_source":{"paypal":{"experience_context":{"return_url":"https://shop.example/r","cancel_url":"https://shop.example/c","user_action":"PAY_NOW"}}}}`,
			"PAYER_ACTION_REQUIRED", "payer-action"},
		{"manual capture is intent AUTHORIZE without PAY_NOW", provider.CaptureManual, &provider.Checkout{ReturnURL: "https://shop.example/r"},
			`{"intent":"AUTHORIZE","purchase_units":[{"reference_id":"default","invoice_id":"ref-1","custom_id":"ref-1","description":"d","amount":{"currency_code":"USD","value":"19.99"}}],"payment_source":{"paypal":{"experience_context":{"return_url":"https://shop.example/r"}}}}`,
			"PAYER_ACTION_REQUIRED", "payer-action"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, a := simAdapter(t, paysim.Options{})
			p, err := a.Create(ctx, provider.CreateRequest{
				IdempotencyKey: "k-1", MerchantReference: "ref-1", Description: "d", Amount: 1999, Currency: "USD",
				CaptureMethod: tt.capture, Checkout: tt.checkout,
			})
			if err != nil {
				t.Fatal(err)
			}
			wantOnePost(t, srv, "/v2/checkout/orders", "k-1", tt.body)
			if p.Status != provider.StatusPending || p.RawStatus != tt.status {
				t.Fatalf("status %s %q, want Pending %q", p.Status, p.RawStatus, tt.status)
			}
			want := srv.URL + "/paypal/checkoutnow?token=" + p.ID
			if p.CustomerAction == nil || p.CustomerAction.URL != want || !p.CustomerAction.ExpiresAt.IsZero() {
				t.Fatalf("CustomerAction %+v, want %s without expiry (PayPal does not say)", p.CustomerAction, want)
			}
			// The order as paysim renders it carries the link under PayPal's rel.
			code, raw := rawCall(t, srv, http.MethodGet, "/v2/checkout/orders/"+p.ID, "")
			var o paypal.Order
			if err := json.Unmarshal(raw, &o); code != 200 || err != nil {
				t.Fatalf("%d %s", code, raw)
			}
			found := false
			for _, l := range o.Links {
				found = found || (l.Rel == tt.rel && l.Href == want)
			}
			if !found {
				t.Fatalf("no %s link in %+v", tt.rel, o.Links)
			}
		})
	}
	t.Run("a stored payment method is refused before any request", func(t *testing.T) {
		srv, a := simAdapter(t, paysim.Options{})
		_, err := a.Create(ctx, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 100, Currency: "USD", StoredMethod: &provider.StoredMethod{Customer: "c", PaymentMethod: "pm"}})
		if !errors.Is(err, provider.ErrNonRetryable) || len(srv.Requests(true)) != 0 {
			t.Fatalf("err %v, %d requests", err, len(srv.Requests(true)))
		}
	})
}

func TestCaptureOfAnApprovedCaptureIntentOrder(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	p := createOrder(t, a, provider.CaptureAutomatic, 1999, "USD")
	if _, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-0"}); !errors.Is(err, provider.ErrNonRetryable) {
		t.Fatalf("capture before the payer approved: %v", err)
	}
	if err := srv.Sim.Approve(paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Get(ctx, p.ID); err != nil || got.Status != provider.StatusApproved || got.CustomerAction != nil {
		t.Fatalf("approved order reads %+v %v", got, err)
	}
	srv.Reset()
	got, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-1"})
	if err != nil || got.Status != provider.StatusSucceeded || got.Amount != 1999 || got.RawStatus != "COMPLETED/COMPLETED" {
		t.Fatalf("capture: %+v %v", got, err)
	}
	wantOnePost(t, srv, "/v2/checkout/orders/"+p.ID+"/capture", "cap-1", `{}`)
	if n := srv.Sim.Counters().CapturesByPayment[p.ID]; n != 1 {
		t.Fatalf("captured %d times", n)
	}

	t.Run("an already captured order is returned as state, without a second capture", func(t *testing.T) {
		srv.Reset()
		again, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-2"})
		if err != nil || again.Status != provider.StatusSucceeded {
			t.Fatalf("%+v %v", again, err)
		}
		if len(posts(srv, "/capture")) != 0 || srv.Sim.Counters().CapturesByPayment[p.ID] != 1 {
			t.Fatal("captured again")
		}
	})
	t.Run("PayPal's ORDER_ALREADY_CAPTURED answer is state, not an error", func(t *testing.T) {
		// A second capture with another request id reaches paysim directly.
		code, body := rawCall(t, srv, http.MethodPost, "/v2/checkout/orders/"+p.ID+"/capture", "cap-3")
		if code != http.StatusUnprocessableEntity || paypal.Issue(body) != paypal.IssueOrderAlreadyCaptured {
			t.Fatalf("paysim answered %d %s", code, body)
		}
	})
}

// rawCall sends an authenticated request to paysim's PayPal API at path (a POST with
// {} and a PayPal-Request-Id when key is set) and returns the answer.
func rawCall(t *testing.T, srv *paysimtest.Server, method, path, key string) (int, []byte) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(`{}`)
	}
	req, _ := http.NewRequest(method, srv.URL+"/paypal"+path, body)
	req.Header.Set("Authorization", "Bearer "+paysimtest.PayPalToken(t, srv.URL, "id", "secret"))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(paypal.HeaderRequestID, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// approvedOrder creates an order of amount in currency, with capture, and has
// its payer approve it.
func approvedOrder(t *testing.T, srv *paysimtest.Server, a *paypal.Adapter, capture provider.CaptureMethod, amount int64, currency string) provider.Payment {
	t.Helper()
	p := createOrder(t, a, capture, amount, currency)
	if err := srv.Sim.Approve(paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	return p
}

func authorizedOrder(t *testing.T, srv *paysimtest.Server, a *paypal.Adapter, amount int64, currency string) provider.Payment {
	t.Helper()
	p := approvedOrder(t, srv, a, provider.CaptureManual, amount, currency)
	got, err := a.Authorize(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "auth-" + p.ID})
	if err != nil || got.Status != provider.StatusAuthorized {
		t.Fatalf("authorize: %+v %v", got, err)
	}
	return got
}

func TestAuthorizeAnApprovedAuthorizeIntentOrder(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	p := approvedOrder(t, srv, a, provider.CaptureManual, 1999, "USD")
	got, err := a.Get(ctx, p.ID)
	if err != nil || got.Status != provider.StatusApproved {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap"}); !errors.Is(err, provider.ErrNonRetryable) || len(posts(srv, "/capture")) != 0 {
		t.Fatalf("capture of an approved AUTHORIZE order before its authorization: %v", err)
	}
	srv.Reset()
	got, err = a.Authorize(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "auth-1"})
	if err != nil || got.Status != provider.StatusAuthorized || got.Amount != 1999 || got.RawStatus != "COMPLETED/authorization:CREATED" {
		t.Fatalf("authorize: %+v %v", got, err)
	}
	if want := simNow.Add(29 * 24 * time.Hour); !got.AuthorizationExpiresAt.Equal(want) {
		t.Errorf("AuthorizationExpiresAt %v, want %v (PayPal's 29 days)", got.AuthorizationExpiresAt, want)
	}
	wantOnePost(t, srv, "/v2/checkout/orders/"+p.ID+"/authorize", "auth-1", `{}`)
	if got := posts(srv, "/authorize")[0].Header.Get("Prefer"); got != "return=representation" {
		t.Errorf("Prefer %q", got)
	}

	t.Run("ORDER_ALREADY_AUTHORIZED is state, not an error", func(t *testing.T) {
		again, err := a.Authorize(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "auth-2"})
		if err != nil || again.Status != provider.StatusAuthorized {
			t.Fatalf("%+v %v", again, err)
		}
		if n := srv.Sim.Counters().AuthorizationsByPayment[p.ID]; n != 1 {
			t.Fatalf("%d authorizations", n)
		}
	})
	t.Run("authorizing an order with intent CAPTURE is refused", func(t *testing.T) {
		c := createOrder(t, a, provider.CaptureAutomatic, 100, "USD")
		_ = srv.Sim.Approve(paysim.PayPal, c.ID)
		var pe *provider.Error
		_, err := a.Authorize(ctx, provider.ActionRequest{PaymentID: c.ID, IdempotencyKey: "x"})
		if !errors.Is(err, provider.ErrNonRetryable) || !errors.As(err, &pe) || pe.Code != paypal.IssueActionDoesNotMatchIntent {
			t.Fatalf("%v", err)
		}
	})
}

func TestCaptureOfAnAuthorizationIsPartialInPayPalDecimals(t *testing.T) {
	// HUF: ISO has two decimals, PayPal none. 199900 minor units are "1999" at PayPal.
	srv, a := simAdapter(t, paysim.Options{})
	p := authorizedOrder(t, srv, a, 199900, "HUF")
	authID := mustView(t, srv, p.ID).Authorization.ID
	srv.Reset()
	got, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-1", Amount: 100000, Currency: "HUF"})
	if err != nil || got.Status != provider.StatusSucceeded || got.Amount != 100000 || got.Currency != "HUF" {
		t.Fatalf("capture: %+v %v", got, err)
	}
	wantOnePost(t, srv, "/v2/payments/authorizations/"+authID+"/capture", "cap-1", `{"amount":{"currency_code":"HUF","value":"1000"},"final_capture":true}`)
	// One GET found the authorization id; nothing else was asked.
	if reqs := srv.Requests(false); len(reqs) != 2 || reqs[0].Method != http.MethodGet || reqs[0].Path != "/paypal/v2/checkout/orders/"+p.ID {
		t.Fatalf("requests %v", reqs)
	}
	// What Capture returned is what Get reads.
	if read, err := a.Get(ctx, p.ID); err != nil || read.Status != got.Status || read.Amount != got.Amount || read.RawStatus != got.RawStatus {
		t.Fatalf("Get %+v, Capture %+v", read, got)
	}

	t.Run("a whole capture sends no amount", func(t *testing.T) {
		p := authorizedOrder(t, srv, a, 2500, "USD")
		srv.Reset()
		got, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-all"})
		if err != nil || got.Status != provider.StatusSucceeded || got.Amount != 2500 {
			t.Fatalf("%+v %v", got, err)
		}
		wantOnePost(t, srv, "/capture", "cap-all", `{"final_capture":true}`)
	})
	t.Run("an amount above the authorized one is refused before the capture call", func(t *testing.T) {
		p := authorizedOrder(t, srv, a, 2500, "USD")
		srv.Reset()
		_, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-more", Amount: 2501, Currency: "USD"})
		if !errors.Is(err, provider.ErrNonRetryable) || len(posts(srv, "/capture")) != 0 {
			t.Fatalf("%v, %d capture calls", err, len(posts(srv, "/capture")))
		}
	})
	t.Run("an amount PayPal cannot represent is refused before any request", func(t *testing.T) {
		srv.Reset()
		_, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-f", Amount: 150, Currency: "HUF"})
		if !errors.Is(err, provider.ErrAmountNotRepresentable) || len(srv.Requests(true)) != 0 {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a partial capture of an order with intent CAPTURE is refused", func(t *testing.T) {
		c := createOrder(t, a, provider.CaptureAutomatic, 1000, "USD")
		_ = srv.Sim.Approve(paysim.PayPal, c.ID)
		srv.Reset()
		_, err := a.Capture(ctx, provider.ActionRequest{PaymentID: c.ID, IdempotencyKey: "cap-p", Amount: 500, Currency: "USD"})
		if !errors.Is(err, provider.ErrNonRetryable) || len(posts(srv, "/capture")) != 0 {
			t.Fatalf("%v", err)
		}
	})
}

func mustView(t *testing.T, srv *paysimtest.Server, id string) paysim.PaymentView {
	t.Helper()
	v, ok := srv.Sim.Payment(paysim.PayPal, id)
	if !ok {
		t.Fatalf("paysim has no order %s", id)
	}
	return v
}

func TestCancel(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	t.Run("an authorized order is voided with PayPal-Request-Id", func(t *testing.T) {
		p := authorizedOrder(t, srv, a, 1999, "USD")
		authID := mustView(t, srv, p.ID).Authorization.ID
		srv.Reset()
		got, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "void-1", Reason: "out of stock"})
		if err != nil || got.Status != provider.StatusCanceled || got.RawStatus != "COMPLETED/authorization:VOIDED" {
			t.Fatalf("%+v %v", got, err)
		}
		wantOnePost(t, srv, "/v2/payments/authorizations/"+authID+"/void", "void-1", "")
		if n := srv.Sim.Counters().VoidsByPayment[p.ID]; n != 1 {
			t.Fatalf("%d voids", n)
		}
		srv.Reset()
		again, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "void-2"})
		if err != nil || again.Status != provider.StatusCanceled || len(posts(srv, "/void")) != 0 {
			t.Fatalf("an already voided order: %+v %v", again, err)
		}
		if _, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("cap")}); !errors.Is(err, provider.ErrNonRetryable) {
			t.Fatalf("capture of a voided authorization: %v", err)
		}
	})
	for _, tt := range []struct {
		name    string
		capture provider.CaptureMethod
		approve bool
		raw     string
	}{
		{"an order the payer has not approved is abandoned without a call", provider.CaptureAutomatic, false, "PAYER_ACTION_REQUIRED/abandoned"},
		{"an approved CAPTURE order is abandoned without a call", provider.CaptureAutomatic, true, "APPROVED/abandoned"},
		{"an approved AUTHORIZE order not yet authorized is abandoned without a call", provider.CaptureManual, true, "APPROVED/abandoned"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := createOrder(t, a, tt.capture, 500, "USD")
			if tt.approve {
				_ = srv.Sim.Approve(paysim.PayPal, p.ID)
			}
			srv.Reset()
			got, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("c")})
			if err != nil || got.Status != provider.StatusCanceled || got.RawStatus != tt.raw || got.CustomerAction != nil {
				t.Fatalf("%+v %v", got, err)
			}
			if reqs := srv.Requests(false); len(reqs) != 1 || reqs[0].Method != http.MethodGet {
				t.Fatalf("requests %v: PayPal has no order cancel API", reqs)
			}
		})
	}
	t.Run("a captured order is refused: refund instead", func(t *testing.T) {
		p := createOrder(t, a, provider.CaptureAutomatic, 500, "USD")
		_ = srv.Sim.Approve(paysim.PayPal, p.ID)
		if _, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("cap")}); err != nil {
			t.Fatal(err)
		}
		srv.Reset()
		_, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("c")})
		if !errors.Is(err, provider.ErrNonRetryable) || !strings.Contains(err.Error(), "refund instead") || len(posts(srv, "")) != 0 {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a captured authorization is refused: refund instead", func(t *testing.T) {
		p := authorizedOrder(t, srv, a, 500, "USD")
		if _, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("cap")}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("c")}); !errors.Is(err, provider.ErrNonRetryable) {
			t.Fatalf("%v", err)
		}
	})
}

func capturedOrder(t *testing.T, srv *paysimtest.Server, a *paypal.Adapter, amount int64) provider.Payment {
	t.Helper()
	p := approvedOrder(t, srv, a, provider.CaptureAutomatic, amount, "USD")
	got, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-" + p.ID})
	if err != nil || got.Status != provider.StatusSucceeded {
		t.Fatalf("%+v %v", got, err)
	}
	return got
}

func TestRefunds(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	p := capturedOrder(t, srv, a, 1999)
	captureID := mustView(t, srv, p.ID).CaptureID
	srv.Reset()
	r, err := a.CreateRefund(ctx, provider.RefundRequest{
		PaymentID: p.ID, IdempotencyKey: "refund-1", Reference: "ns.refund-1", Amount: 500, Currency: "USD", Reason: "customer asked",
	})
	want := provider.Refund{ID: r.ID, PaymentID: p.ID, Reference: "ns.refund-1", Status: provider.RefundSucceeded, RawStatus: "COMPLETED", Amount: 500, Currency: "USD"}
	if err != nil || r.ID == "" || r != want {
		t.Fatalf("refund %+v %v", r, err)
	}
	wantOnePost(t, srv, "/v2/payments/captures/"+captureID+"/refund", "refund-1",
		`{"amount":{"currency_code":"USD","value":"5.00"},"invoice_id":"ns.refund-1","custom_id":"ref-1","note_to_payer":"customer asked"}`)
	if got, err := a.GetRefund(ctx, p.ID, r.ID); err != nil || got != want {
		t.Fatalf("GetRefund %+v %v", got, err)
	}
	if got, err := a.Get(ctx, p.ID); err != nil || got.Status != provider.StatusRefund || got.RefundedTotal != 500 {
		t.Fatalf("order after the refund %+v %v", got, err)
	}
	if _, err := a.FindRefund(ctx, p.ID, "ns.refund-1"); !errors.Is(err, provider.ErrUnsupported) {
		t.Fatalf("FindRefund: %v", err)
	}
	if _, err := a.GetRefund(ctx, p.ID, "NOSUCHREFUND"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("GetRefund of an unknown refund: %v", err)
	}

	t.Run("the rest is refunded without an amount", func(t *testing.T) {
		srv.Reset()
		r, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "refund-2", Reference: "ns.refund-2"})
		if err != nil || r.Amount != 1499 {
			t.Fatalf("%+v %v", r, err)
		}
		wantOnePost(t, srv, "/refund", "refund-2", `{"invoice_id":"ns.refund-2","custom_id":"ref-1"}`)
	})
	t.Run("an over-refund is PayPal's refusal", func(t *testing.T) {
		var pe *provider.Error
		_, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "refund-3", Amount: 1, Currency: "USD"})
		if !errors.Is(err, provider.ErrNonRetryable) || !errors.As(err, &pe) || pe.Code != paypal.IssueCaptureFullyRefunded {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a known capture is refunded without reading the order, with the same call", func(t *testing.T) {
		q := capturedOrder(t, srv, a, 1000)
		if want := mustView(t, srv, q.ID).CaptureID; q.CaptureID != want || want == "" {
			t.Fatalf("the capture's answer names capture %q, paysim %q", q.CaptureID, want)
		}
		req := provider.RefundRequest{PaymentID: q.ID, IdempotencyKey: "refund-k", Reference: "ns.refund-k", Amount: 300, Currency: "USD",
			Reason: "late", MerchantReference: "ref-1"}
		srv.Reset()
		read, err := a.CreateRefund(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		first := srv.Requests(false)
		srv.Reset()
		req.CaptureID = q.CaptureID
		known, err := a.CreateRefund(ctx, req)
		if err != nil || known != read {
			t.Fatalf("with the capture known: %+v %v; read first: %+v", known, err, read)
		}
		again := srv.Requests(false)
		if len(first) != 2 || first[0].Method != http.MethodGet || len(again) != 1 {
			t.Fatalf("requests: read first %v, capture known %v; want GET then POST, and the POST alone", first, again)
		}
		p1, p2 := first[1], again[0]
		if p1.Method != p2.Method || p1.Path != p2.Path || string(p1.Body) != string(p2.Body) ||
			p1.Header.Get(paypal.HeaderRequestID) != p2.Header.Get(paypal.HeaderRequestID) {
			t.Fatalf("the refund call differs:\n read first    %s %s %s\n capture known %s %s %s", p1.Method, p1.Path, p1.Body, p2.Method, p2.Path, p2.Body)
		}
		if rs := mustView(t, srv, q.ID).Refunds; len(rs) != 1 || rs[0].Amount != 300 {
			t.Fatalf("PayPal made refunds %+v, want one of 300 (the second call is its replay)", rs)
		}
	})
	t.Run("an order without a capture is refused before the refund call", func(t *testing.T) {
		o := createOrder(t, a, provider.CaptureAutomatic, 100, "USD")
		srv.Reset()
		_, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: o.ID, IdempotencyKey: "r", Amount: 100, Currency: "USD"})
		if !errors.Is(err, provider.ErrNonRetryable) || len(posts(srv, "/refund")) != 0 {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a pending refund is Pending until it settles", func(t *testing.T) {
		srv2, a2 := simAdapter(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon, RefundOutcome: paysim.OutcomePending}})
		p := capturedOrder(t, srv2, a2, 1000)
		r, err := a2.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "r", Reference: "ref-r", Amount: 400, Currency: "USD"})
		if err != nil || r.Status != provider.RefundPending || r.RawStatus != "PENDING" {
			t.Fatalf("%+v %v", r, err)
		}
		if err := srv2.Sim.SettleRefund(paysim.PayPal, r.ID, paysim.OutcomeFail); err != nil {
			t.Fatal(err)
		}
		got, err := a2.GetRefund(ctx, p.ID, r.ID)
		if err != nil || got.Status != provider.RefundFailed || got.RawStatus != "FAILED" || got.FailureCode == "" || got.Reference != "ref-r" {
			t.Fatalf("%+v %v", got, err)
		}
		if o, _ := a2.Get(ctx, p.ID); o.Status != provider.StatusSucceeded || o.RefundedTotal != 0 {
			t.Fatalf("a failed refund moved money: %+v", o)
		}
	})
}

// TestLostCaptureAnswerThenRetryCapturesOnce: the capture happened, its answer was
// lost; the retry with the same key reads the order, sees the capture and does not
// capture again.
func TestLostCaptureAnswerThenRetryCapturesOnce(t *testing.T) {
	for _, manual := range []bool{false, true} {
		t.Run(fmt.Sprintf("manual=%v", manual), func(t *testing.T) {
			srv, a := simAdapter(t, paysim.Options{})
			var p provider.Payment
			if manual {
				p = authorizedOrder(t, srv, a, 1000, "USD")
			} else {
				p = createOrder(t, a, provider.CaptureAutomatic, 1000, "USD")
				_ = srv.Sim.Approve(paysim.PayPal, p.ID)
			}
			srv.Sim.SetFaults(paysim.Faults{LostResponseRate: 1, Operations: []string{paysim.OpCapture}})
			req := provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-lost"}
			if _, err := a.Capture(ctx, req); !errors.Is(err, provider.ErrRetryable) {
				t.Fatalf("a lost answer must be retryable: %v", err)
			}
			srv.Sim.SetFaults(paysim.Faults{})
			got, err := a.Capture(ctx, req)
			if err != nil || got.Status != provider.StatusSucceeded {
				t.Fatalf("retry: %+v %v", got, err)
			}
			if n := srv.Sim.Counters().CapturesByPayment[p.ID]; n != 1 {
				t.Fatalf("captured %d times", n)
			}
		})
	}
}

// TestLostRefundAnswerThenRetryRefundsOnce: the refund happened, its answer was lost;
// the retry with the same PayPal-Request-Id gets the same refund back.
func TestLostRefundAnswerThenRetryRefundsOnce(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	p := capturedOrder(t, srv, a, 1000)
	r := paysimtest.LostRefundAnswerRefundsOnce(t, srv, a, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "refund-lost", Reference: "ref", Amount: 1000, Currency: "USD"})
	if v := mustView(t, srv, p.ID); len(v.Refunds) != 1 || v.Refunds[0].ID != r.ID {
		t.Fatalf("refunds %+v", v.Refunds)
	}
}

// TestLifecycleEventsNameTheOrder: every event of the lifecycle, as paysim sends it,
// parses to its status with the order id, never an authorization, capture or refund id.
func TestLifecycleEventsNameTheOrder(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	p := authorizedOrder(t, srv, a, 1000, "USD")
	if _, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap", Amount: 800, Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	r, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "ref", Reference: "ns.r1", Amount: 300, Currency: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	v := authorizedOrder(t, srv, a, 500, "USD")
	if _, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: v.ID, IdempotencyKey: "void"}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		typ    string
		order  string
		status provider.Status
		amount int64
	}{
		{"CHECKOUT.ORDER.APPROVED", p.ID, provider.StatusApproved, 1000},
		{"PAYMENT.AUTHORIZATION.CREATED", p.ID, provider.StatusAuthorized, 1000},
		{"PAYMENT.CAPTURE.COMPLETED", p.ID, provider.StatusSucceeded, 800},
		{"PAYMENT.CAPTURE.REFUNDED", p.ID, provider.StatusRefund, 300},
		{"CHECKOUT.ORDER.APPROVED", v.ID, provider.StatusApproved, 500},
		{"PAYMENT.AUTHORIZATION.CREATED", v.ID, provider.StatusAuthorized, 500},
		{"PAYMENT.AUTHORIZATION.VOIDED", v.ID, provider.StatusCanceled, 500},
	}
	evs := srv.Sim.Events(paysim.PayPal)
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, w := range want {
		ev, err := paypal.ParseEvent(evs[i].Raw)
		if err != nil || !ev.Supported || ev.Type != w.typ || ev.Status != w.status || ev.PaymentID != w.order || ev.Amount != w.amount || ev.MerchantReference != "ref-1" {
			t.Errorf("event %d: %+v %v, want %s %s for %s (%d)", i, ev, err, w.typ, w.status, w.order, w.amount)
		}
	}
	ev, _ := paypal.ParseEvent(evs[3].Raw)
	if ev.Refund == nil || ev.Refund.ID != r.ID || ev.Refund.Reference != "ns.r1" || ev.Refund.Status != provider.RefundSucceeded || ev.RefundedTotal != 300 {
		t.Fatalf("refund event %+v %+v", ev, ev.Refund)
	}
}
