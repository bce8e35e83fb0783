package kukopay_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

var ctx = context.Background()

// key returns a fresh idempotency key.
var key = new(providertest.Keys).Next

// simAdapter runs paysim (payments wait for the payer unless opts scripts otherwise)
// and a KukoPay adapter against it, both on clk.
func simAdapter(t *testing.T, opts paysim.Options) (*paysimtest.Server, *kukopay.Adapter, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(now)
	opts.Now = clk.Now
	srv := paysimtest.StartAt(t, opts, now)
	a, err := kukopay.New(provider.Config{
		Name: "ns/kuko", APIURL: srv.URL + "/kukopay", Credentials: map[string][]byte{"apiKey": []byte("k")},
		Timeout: 2 * time.Second, Now: clk.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, a, clk
}

func wantRequest(t *testing.T, srv *paysimtest.Server, method, path, idemKey, body string) paysimtest.Request {
	t.Helper()
	r := srv.Only(t, method, path)
	if got := r.Header.Get(kukopay.HeaderIdempotencyKey); got != idemKey {
		t.Errorf("Idempotency-Key %q, want %q", got, idemKey)
	}
	if got := r.Header.Get(kukopay.HeaderAPIKey); got != "k" {
		t.Errorf("X-Api-Key %q", got)
	}
	if body != "-" && string(r.Body) != body {
		t.Errorf("body\n got  %s\n want %s", r.Body, body)
	}
	return r
}

func create(t *testing.T, a *kukopay.Adapter, req provider.CreateRequest) provider.Payment {
	t.Helper()
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = key("create")
	}
	if req.MerchantReference == "" {
		req.MerchantReference = key("ORD")
	}
	if req.Currency == "" {
		req.Currency = "EUR"
	}
	p, err := a.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var shop = &provider.Checkout{ReturnURL: "https://shop.example/r", CancelURL: "https://shop.example/c"}

func TestCreateSendsCaptureMethodCheckoutAndStoredMethod(t *testing.T) {
	tests := []struct {
		name    string
		req     provider.CreateRequest
		body    string
		status  provider.Status
		raw     string
		expires time.Time // of the CustomerAction; zero: none
	}{
		{"automatic capture without checkout is a plain payment",
			provider.CreateRequest{Amount: 1000},
			`{"out_trade_no":"ORD-1","amount":1000,"currency":"EUR","description":"d","capture_method":"automatic"}`,
			provider.StatusPending, "pending", time.Time{}},
		{"a hosted checkout with manual capture waits for the payer until expires_at",
			provider.CreateRequest{Amount: 1000, CaptureMethod: provider.CaptureManual, Checkout: shop, ExpiresAt: now.Add(2 * time.Hour)},
			fmt.Sprintf(`{"out_trade_no":"ORD-1","amount":1000,"currency":"EUR","description":"d","capture_method":"manual","return_url":"https://shop.example/r","cancel_url":"https://shop.example/c","expires_at":%d}`, now.Add(2*time.Hour).Unix()),
			provider.StatusPending, "requires_action", now.Add(2 * time.Hour)},
		{"a checkout expiry under 30 minutes is raised to KukoPay's minimum",
			provider.CreateRequest{Amount: 1000, Checkout: shop, ExpiresAt: now.Add(10 * time.Minute)},
			fmt.Sprintf(`{"out_trade_no":"ORD-1","amount":1000,"currency":"EUR","description":"d","capture_method":"automatic","return_url":"https://shop.example/r","cancel_url":"https://shop.example/c","expires_at":%d}`, now.Add(30*time.Minute).Unix()),
			provider.StatusPending, "requires_action", now.Add(30 * time.Minute)},
		{"a checkout expiry beyond 24 hours is lowered to KukoPay's maximum",
			provider.CreateRequest{Amount: 1000, Checkout: shop, ExpiresAt: now.Add(72 * time.Hour)},
			fmt.Sprintf(`{"out_trade_no":"ORD-1","amount":1000,"currency":"EUR","description":"d","capture_method":"automatic","return_url":"https://shop.example/r","cancel_url":"https://shop.example/c","expires_at":%d}`, now.Add(24*time.Hour).Unix()),
			provider.StatusPending, "requires_action", now.Add(24 * time.Hour)},
		{"a checkout without an expiry gets paysim's default lifetime",
			provider.CreateRequest{Amount: 1000, Checkout: shop},
			`{"out_trade_no":"ORD-1","amount":1000,"currency":"EUR","description":"d","capture_method":"automatic","return_url":"https://shop.example/r","cancel_url":"https://shop.example/c"}`,
			provider.StatusPending, "requires_action", now.Add(paysim.DefaultCheckoutTTL)},
		{"a stored payment method is charged without the payer",
			provider.CreateRequest{Amount: 1000, StoredMethod: &provider.StoredMethod{Customer: "cus_1", PaymentMethod: "pm_1"}},
			`{"out_trade_no":"ORD-1","amount":1000,"currency":"EUR","description":"d","capture_method":"automatic","customer":"cus_1","payment_method":"pm_1"}`,
			provider.StatusPending, "pending", time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, a, _ := simAdapter(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomePending}})
			tt.req.IdempotencyKey, tt.req.MerchantReference, tt.req.Currency, tt.req.Description = "k-1", "ORD-1", "EUR", "d"
			p, err := a.Create(ctx, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			wantRequest(t, srv, http.MethodPost, "/kukopay/v1/payments", "k-1", tt.body)
			if p.Status != tt.status || p.RawStatus != tt.raw {
				t.Fatalf("status %s %q", p.Status, p.RawStatus)
			}
			if tt.expires.IsZero() {
				if p.CustomerAction != nil {
					t.Fatalf("unexpected action %+v", p.CustomerAction)
				}
				return
			}
			want := provider.CustomerAction{URL: srv.URL + "/kukopay/checkout/" + p.ID, ExpiresAt: tt.expires}
			if p.CustomerAction == nil || *p.CustomerAction != want {
				t.Fatalf("action %+v, want %+v", p.CustomerAction, want)
			}
		})
	}
}

// authorized returns a manual-capture payment the payer approved: requires_capture.
func authorized(t *testing.T, srv *paysimtest.Server, a *kukopay.Adapter, amount int64) provider.Payment {
	t.Helper()
	return approved(t, srv, a, amount, provider.CaptureManual, provider.StatusAuthorized)
}

// approved returns a checkout payment of amount, with capture, that the payer
// approved; the adapter must then read it as want.
func approved(t *testing.T, srv *paysimtest.Server, a *kukopay.Adapter, amount int64, capture provider.CaptureMethod, want provider.Status) provider.Payment {
	t.Helper()
	p := create(t, a, provider.CreateRequest{Amount: amount, CaptureMethod: capture, Checkout: shop})
	if err := srv.Sim.Approve(paysim.KukoPay, p.ID); err != nil {
		t.Fatal(err)
	}
	got, err := a.Get(ctx, p.ID)
	if err != nil || got.Status != want {
		t.Fatalf("%+v %v", got, err)
	}
	return got
}

func TestManualCapture(t *testing.T) {
	srv, a, _ := simAdapter(t, paysim.Options{})
	p := authorized(t, srv, a, 1000)
	if p.Amount != 1000 || !p.AuthorizationExpiresAt.Equal(now.Add(7*24*time.Hour)) || p.RawStatus != "requires_capture" {
		t.Fatalf("authorized %+v", p)
	}
	srv.Reset()
	got, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-1", Amount: 600, Currency: "EUR"})
	if err != nil || got.Status != provider.StatusSucceeded || got.Amount != 600 {
		t.Fatalf("partial capture %+v %v", got, err)
	}
	wantRequest(t, srv, http.MethodPost, "/kukopay/v1/payments/"+p.ID+"/capture", "cap-1", `{"amount_to_capture":600}`)
	if n := srv.Sim.Counters().CapturesByPayment[p.ID]; n != 1 {
		t.Fatalf("%d captures", n)
	}

	t.Run("an already captured payment is returned as state", func(t *testing.T) {
		again, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-2"})
		if err != nil || again.Status != provider.StatusSucceeded || again.Amount != 600 {
			t.Fatalf("%+v %v", again, err)
		}
		if n := srv.Sim.Counters().CapturesByPayment[p.ID]; n != 1 {
			t.Fatalf("%d captures", n)
		}
	})
	t.Run("a whole capture sends no amount", func(t *testing.T) {
		p := authorized(t, srv, a, 700)
		srv.Reset()
		got, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cap-3"})
		if err != nil || got.Amount != 700 {
			t.Fatalf("%+v %v", got, err)
		}
		wantRequest(t, srv, http.MethodPost, "/kukopay/v1/payments/"+p.ID+"/capture", "cap-3", `{}`)
	})
	for _, tt := range []struct {
		name   string
		amount int64
		prep   func() provider.Payment
		code   string
	}{
		{"capture of a payment the payer has not approved is refused", 0, func() provider.Payment {
			return create(t, a, provider.CreateRequest{Amount: 100, CaptureMethod: provider.CaptureManual, Checkout: shop})
		}, kukopay.ErrorCodeNotCapturable},
		{"capture above amount_capturable is refused", 1001, func() provider.Payment { return authorized(t, srv, a, 1000) }, kukopay.ErrorCodeAmountTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.prep()
			_, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("cap"), Amount: tt.amount, Currency: "EUR"})
			var pe *provider.Error
			if !errors.Is(err, provider.ErrNonRetryable) || !errors.As(err, &pe) || pe.Code != tt.code {
				t.Fatalf("%v", err)
			}
		})
	}
	t.Run("an unknown currency is refused before any request", func(t *testing.T) {
		srv.Reset()
		_, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "x", Amount: 5, Currency: "XXY"})
		if !errors.Is(err, provider.ErrAmountNotRepresentable) || len(srv.Requests(true)) != 0 {
			t.Fatalf("%v", err)
		}
	})
}

func TestCancel(t *testing.T) {
	srv, a, _ := simAdapter(t, paysim.Options{})
	t.Run("an authorized payment is canceled with its reason", func(t *testing.T) {
		p := authorized(t, srv, a, 1000)
		srv.Reset()
		got, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cancel-1", Reason: "out of stock"})
		if err != nil || got.Status != provider.StatusCanceled || got.RawStatus != "canceled" {
			t.Fatalf("%+v %v", got, err)
		}
		wantRequest(t, srv, http.MethodPost, "/kukopay/v1/payments/"+p.ID+"/cancel", "cancel-1", `{"cancellation_reason":"out of stock"}`)
		if n := srv.Sim.Counters().VoidsByPayment[p.ID]; n != 1 {
			t.Fatalf("%d cancels", n)
		}
		again, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "cancel-2"})
		if err != nil || again.Status != provider.StatusCanceled {
			t.Fatalf("an already canceled payment: %+v %v", again, err)
		}
	})
	t.Run("a payment waiting for the payer is canceled", func(t *testing.T) {
		p := create(t, a, provider.CreateRequest{Amount: 100, Checkout: shop})
		got, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("c")})
		if err != nil || got.Status != provider.StatusCanceled || got.CustomerAction != nil {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("a captured payment is refused: refund instead", func(t *testing.T) {
		p := authorized(t, srv, a, 1000)
		if _, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("cap")}); err != nil {
			t.Fatal(err)
		}
		_, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("c")})
		var pe *provider.Error
		if !errors.Is(err, provider.ErrNonRetryable) || !errors.As(err, &pe) || pe.Code != kukopay.ErrorCodeNotCancelable || !strings.Contains(err.Error(), "refund instead") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("a failed payment has nothing to cancel: its state, not an error", func(t *testing.T) {
		p := create(t, a, provider.CreateRequest{Amount: 100, Metadata: map[string]string{paysim.MetaOutcome: "fail"}})
		var got provider.Payment
		for range 500 {
			if got, _ = a.Get(ctx, p.ID); got.Status == provider.StatusFailed {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		got, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("c")})
		if err != nil || got.Status != provider.StatusFailed {
			t.Fatalf("%+v %v", got, err)
		}
	})
}

// paid returns a payment charged through a stored payment method.
func paid(t *testing.T, srv *paysimtest.Server, a *kukopay.Adapter, amount int64) provider.Payment {
	t.Helper()
	return approved(t, srv, a, amount, "", provider.StatusSucceeded)
}

func TestRefunds(t *testing.T) {
	srv, a, _ := simAdapter(t, paysim.Options{})
	p := paid(t, srv, a, 1000)
	srv.Reset()
	r, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "refund-1", Reference: "ns.refund-1", Amount: 300, Currency: "EUR", Reason: "requested_by_customer"})
	want := provider.Refund{ID: r.ID, PaymentID: p.ID, Reference: "ns.refund-1", Status: provider.RefundSucceeded, RawStatus: "succeeded", Amount: 300, Currency: "EUR"}
	if err != nil || !strings.HasPrefix(r.ID, "re_") || r != want {
		t.Fatalf("%+v %v", r, err)
	}
	wantRequest(t, srv, http.MethodPost, "/kukopay/v1/refunds", "refund-1", `{"payment":"`+p.ID+`","amount":300,"reason":"requested_by_customer","metadata":{"reference":"ns.refund-1"}}`)
	if got, err := a.GetRefund(ctx, p.ID, r.ID); err != nil || got != want {
		t.Fatalf("GetRefund %+v %v", got, err)
	}
	srv.Reset()
	if got, err := a.FindRefund(ctx, p.ID, "ns.refund-1"); err != nil || got != want {
		t.Fatalf("FindRefund %+v %v", got, err)
	}
	if q := srv.Only(t, http.MethodGet, "/kukopay/v1/refunds").RawQuery; q != "payment="+p.ID+"&reference=ns.refund-1" {
		t.Errorf("query %q", q)
	}
	if _, err := a.FindRefund(ctx, p.ID, "ns.other"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("FindRefund of an unknown reference: %v", err)
	}
	other := paid(t, srv, a, 500)
	if _, err := a.GetRefund(ctx, other.ID, r.ID); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("GetRefund of another payment's refund: %v", err)
	}
	if got, err := a.Get(ctx, p.ID); err != nil || got.Status != provider.StatusRefund || got.RefundedTotal != 300 {
		t.Fatalf("payment %+v %v", got, err)
	}
	t.Run("a refund above what is left is refused", func(t *testing.T) {
		var pe *provider.Error
		_, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("r"), Amount: 701, Currency: "EUR"})
		if !errors.Is(err, provider.ErrNonRetryable) || !errors.As(err, &pe) || pe.Code != kukopay.ErrorCodeAmountTooLarge {
			t.Fatalf("%v", err)
		}
	})
	t.Run("without an amount the rest is refunded", func(t *testing.T) {
		r, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("r"), Reference: "ns.rest"})
		if err != nil || r.Amount != 700 {
			t.Fatalf("%+v %v", r, err)
		}
	})
	t.Run("a payment that took no money is not refundable", func(t *testing.T) {
		q := create(t, a, provider.CreateRequest{Amount: 100})
		var pe *provider.Error
		_, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: q.ID, IdempotencyKey: key("r"), Amount: 100, Currency: "EUR"})
		if !errors.Is(err, provider.ErrNonRetryable) || !errors.As(err, &pe) || pe.Code != kukopay.ErrorCodeNotRefundable {
			t.Fatalf("%v", err)
		}
	})
}

// TestRefundOutcomesAndEvents: a refund scripted to settle later is pending in the
// create answer; refund.succeeded and refund.failed carry the refund and the payment's
// cumulative refunded amount.
func TestRefundOutcomesAndEvents(t *testing.T) {
	srv, a, _ := simAdapter(t, paysim.Options{TimeFactor: 0.001})
	ok := paid(t, srv, a, 1000)
	if err := srv.Sim.SetOutcome(paysim.KukoPay, ok.ID, paysim.Script{Outcome: paysim.OutcomeAbandon, RefundAfter: time.Second}); err != nil {
		t.Fatal(err)
	}
	r1, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: ok.ID, IdempotencyKey: key("r"), Reference: "ns.r1", Amount: 400, Currency: "EUR"})
	if err != nil || r1.Status != provider.RefundPending {
		t.Fatalf("%+v %v", r1, err)
	}
	providertest.WaitRefund(t, a, ok.ID, r1.ID, provider.RefundSucceeded)
	if err := srv.Sim.SetOutcome(paysim.KukoPay, ok.ID, paysim.Script{Outcome: paysim.OutcomeAbandon, RefundOutcome: paysim.OutcomeFail}); err != nil {
		t.Fatal(err)
	}
	r2, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: ok.ID, IdempotencyKey: key("r"), Reference: "ns.r2", Amount: 100, Currency: "EUR"})
	if err != nil || r2.Status != provider.RefundFailed || r2.FailureCode == "" {
		t.Fatalf("%+v %v", r2, err)
	}
	got := paysimtest.Events(t, srv.Sim, paysim.KukoPay, kukopay.ParseEvent, func(ev provider.Event) bool { return strings.HasPrefix(ev.Type, "refund.") })
	if len(got) != 2 {
		t.Fatalf("%d refund events", len(got))
	}
	if ev := got[0]; ev.Type != "refund.succeeded" || ev.PaymentID != ok.ID || ev.RefundedTotal != 400 || ev.Refund == nil || ev.Refund.ID != r1.ID || ev.Refund.Reference != "ns.r1" || ev.Refund.Status != provider.RefundSucceeded {
		t.Errorf("succeeded event %+v %+v", ev, ev.Refund)
	}
	if ev := got[1]; ev.Type != "refund.failed" || !ev.Supported || ev.Status != provider.StatusRefund || ev.PaymentID != ok.ID || ev.RefundedTotal != 400 || ev.Refund == nil || ev.Refund.ID != r2.ID || ev.Refund.Status != provider.RefundFailed {
		t.Errorf("failed event %+v %+v", ev, ev.Refund)
	}
}

// TestLostRefundAnswerThenRetryRefundsOnce is the double-refund trap: the refund was
// made, its answer lost; the retry with the same Idempotency-Key gets the same refund.
func TestLostRefundAnswerThenRetryRefundsOnce(t *testing.T) {
	srv, a, _ := simAdapter(t, paysim.Options{})
	p := paid(t, srv, a, 1000)
	paysimtest.LostRefundAnswerRefundsOnce(t, srv, a, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "refund-lost", Reference: "ns.lost", Amount: 1000, Currency: "EUR"})
}

func TestAuthorizationExpiresUncaptured(t *testing.T) {
	srv, a, clk := simAdapter(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon, AuthorizationPeriod: time.Hour}})
	p := authorized(t, srv, a, 1000)
	if !p.AuthorizationExpiresAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("expires %v", p.AuthorizationExpiresAt)
	}
	clk.Step(time.Hour)
	got, err := a.Get(ctx, p.ID)
	if err != nil || got.Status != provider.StatusExpired || got.FailureCode != provider.FailureAuthorizationExpired {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("cap")}); !errors.Is(err, provider.ErrNonRetryable) {
		t.Fatalf("capture of an expired authorization: %v", err)
	}
	evs := srv.Sim.Events(paysim.KukoPay)
	ev, err := kukopay.ParseEvent(evs[len(evs)-1].Raw)
	if err != nil || ev.Type != "payment.expired" || ev.FailureCode != provider.FailureAuthorizationExpired || ev.PaymentID != p.ID {
		t.Fatalf("%+v %v", ev, err)
	}
}

func TestLifecycleEventsNameThePayment(t *testing.T) {
	srv, a, _ := simAdapter(t, paysim.Options{})
	p := authorized(t, srv, a, 1000)
	if _, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: key("c")}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		typ    string
		status provider.Status
	}{{"payment.authorized", provider.StatusAuthorized}, {"payment.canceled", provider.StatusCanceled}}
	evs := srv.Sim.Events(paysim.KukoPay)
	if len(evs) != len(want) {
		t.Fatalf("%d events", len(evs))
	}
	for i, w := range want {
		ev, err := kukopay.ParseEvent(evs[i].Raw)
		if err != nil || ev.Type != w.typ || ev.Status != w.status || ev.PaymentID != p.ID || !ev.Supported {
			t.Errorf("event %d: %+v %v", i, ev, err)
		}
	}
}

func TestLifecycleCapabilities(t *testing.T) {
	want := provider.Lifecycle{Checkout: true, StoredMethod: true, ManualCapture: true, PartialCapture: true, Cancel: true, Refunds: true, RefundLookup: true}
	if got := kukopay.Capabilities().Lifecycle; got != want {
		t.Fatalf("%+v", got)
	}
	if _, err := adapter(t).Authorize(ctx, provider.ActionRequest{PaymentID: "p"}); !errors.Is(err, provider.ErrUnsupported) {
		t.Fatalf("Authorize: %v", err)
	}
}
