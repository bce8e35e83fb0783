package generic_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

var ctx = context.Background()

// key returns a fresh idempotency key.
var key = new(providertest.Keys).Next

func simAdapter(t *testing.T, opts paysim.Options) (*paysimtest.Server, *generic.Adapter) {
	t.Helper()
	srv := paysimtest.StartAt(t, opts, now)
	a, err := generic.New(provider.Config{Name: "ns/gen", APIURL: srv.URL + "/generic", Credentials: map[string][]byte{"token": []byte("tok")}, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return srv, a
}

func onlyRequest(t *testing.T, srv *paysimtest.Server, method, path string) paysimtest.Request {
	t.Helper()
	r := srv.Only(t, method, path)
	if got := r.Header.Get("Authorization"); got != "Bearer tok" {
		t.Errorf("Authorization %q", got)
	}
	return r
}

func TestCreateSendsCheckoutAndSurfacesTheAction(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	p, err := a.Create(ctx, provider.CreateRequest{
		IdempotencyKey: "k-1", MerchantReference: "ref-1", Amount: 1999, Currency: "USD",
		Checkout:  &provider.Checkout{ReturnURL: "https://shop.example/r", CancelURL: "https://shop.example/c"},
		ExpiresAt: now.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	r := onlyRequest(t, srv, http.MethodPost, "/generic/jobs")
	if want := `{"correlationId":"ref-1","amount":{"value":1999,"currency":"USD"},"returnUrl":"https://shop.example/r","cancelUrl":"https://shop.example/c","expiresAt":"2026-09-21T13:00:00Z"}`; string(r.Body) != want {
		t.Errorf("body\n got  %s\n want %s", r.Body, want)
	}
	want := provider.CustomerAction{URL: srv.URL + "/generic/actions/" + p.ID, ExpiresAt: now.Add(time.Hour)}
	if p.Status != provider.StatusProcessing || p.RawStatus != "processing/awaiting_customer" || p.CustomerAction == nil || *p.CustomerAction != want {
		t.Fatalf("%+v %+v", p, p.CustomerAction)
	}
	if err := srv.Sim.Approve(paysim.Generic, p.ID); err != nil {
		t.Fatal(err)
	}
	got, err := a.Get(ctx, p.ID)
	if err != nil || got.Status != provider.StatusSucceeded || got.CustomerAction != nil {
		t.Fatalf("after approval %+v %v", got, err)
	}
}

func paidJob(t *testing.T, srv *paysimtest.Server, a *generic.Adapter, amount int64) provider.Payment {
	t.Helper()
	p, err := a.Create(ctx, provider.CreateRequest{IdempotencyKey: key("create"), MerchantReference: key("ref"), Amount: amount, Currency: "USD", Checkout: &provider.Checkout{ReturnURL: "https://shop.example/r"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Sim.Approve(paysim.Generic, p.ID); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRefunds(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	p := paidJob(t, srv, a, 1000)
	srv.Reset()
	r, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "refund-1", Reference: "ns.refund-1", Amount: 300, Currency: "USD", Reason: "damaged"})
	want := provider.Refund{ID: r.ID, PaymentID: p.ID, Reference: "ns.refund-1", Status: provider.RefundSucceeded, RawStatus: "succeeded", Amount: 300, Currency: "USD"}
	if err != nil || r.ID == "" || r != want {
		t.Fatalf("%+v %v", r, err)
	}
	req := onlyRequest(t, srv, http.MethodPost, "/generic/jobs/"+p.ID+"/refunds")
	if req.Header.Get(generic.HeaderIdempotencyKey) != "refund-1" || string(req.Body) != `{"amount":{"value":300,"currency":"USD"},"reference":"ns.refund-1","reason":"damaged"}` {
		t.Errorf("request %s %s", req.Header, req.Body)
	}
	srv.Reset()
	if got, err := a.GetRefund(ctx, p.ID, r.ID); err != nil || got != want {
		t.Fatalf("GetRefund %+v %v", got, err)
	}
	onlyRequest(t, srv, http.MethodGet, "/generic/jobs/"+p.ID+"/refunds/"+r.ID)
	if got, err := a.Get(ctx, p.ID); err != nil || got.Status != provider.StatusRefund || got.RefundedTotal != 300 {
		t.Fatalf("job %+v %v", got, err)
	}
	for _, tt := range []struct {
		name  string
		req   provider.RefundRequest
		class error
	}{
		{"a refund above what is left is refused", provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("r"), Amount: 701, Currency: "USD"}, provider.ErrNonRetryable},
		{"a refund of an unknown job is not found", provider.RefundRequest{PaymentID: "job_missing", IdempotencyKey: key("r"), Amount: 1, Currency: "USD"}, provider.ErrNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := a.CreateRefund(ctx, tt.req); !errors.Is(err, tt.class) {
				t.Fatalf("%v", err)
			}
		})
	}
	t.Run("a refund of another job is not found", func(t *testing.T) {
		q := paidJob(t, srv, a, 100)
		if _, err := a.GetRefund(ctx, q.ID, r.ID); !errors.Is(err, provider.ErrNotFound) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("without an amount the rest is refunded", func(t *testing.T) {
		r, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("r")})
		if err != nil || r.Amount != 700 {
			t.Fatalf("%+v %v", r, err)
		}
	})
}

func TestRefundsSettleLaterWithEvents(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{TimeFactor: 0.001, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon, RefundAfter: time.Second}})
	p := paidJob(t, srv, a, 1000)
	r, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("r"), Reference: "ns.later", Amount: 250, Currency: "USD"})
	if err != nil || r.Status != provider.RefundProcessing || r.RawStatus != "processing" {
		t.Fatalf("%+v %v", r, err)
	}
	providertest.WaitRefund(t, a, p.ID, r.ID, provider.RefundSucceeded)
	if err := srv.Sim.SetOutcome(paysim.Generic, p.ID, paysim.Script{Outcome: paysim.OutcomeAbandon, RefundOutcome: paysim.OutcomeFail}); err != nil {
		t.Fatal(err)
	}
	failed, err := a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: key("r"), Reference: "ns.fails", Amount: 100, Currency: "USD"})
	if err != nil || failed.Status != provider.RefundFailed || failed.FailureCode == "" {
		t.Fatalf("%+v %v", failed, err)
	}
	refunds := paysimtest.Events(t, srv.Sim, paysim.Generic, generic.ParseEvent, func(ev provider.Event) bool { return ev.Refund != nil })
	if len(refunds) != 2 {
		t.Fatalf("%d refund events", len(refunds))
	}
	if ev := refunds[0]; ev.Type != "job.refunded" || ev.PaymentID != p.ID || ev.RefundedTotal != 250 || ev.Refund.ID != r.ID || ev.Refund.Reference != "ns.later" || ev.Refund.Status != provider.RefundSucceeded {
		t.Errorf("%+v %+v", ev, ev.Refund)
	}
	if ev := refunds[1]; ev.Type != "job.refund_failed" || !ev.Supported || ev.PaymentID != p.ID || ev.RefundedTotal != 250 || ev.Refund.ID != failed.ID || ev.Refund.Status != provider.RefundFailed {
		t.Errorf("%+v %+v", ev, ev.Refund)
	}
}

func TestLostRefundAnswerThenRetryRefundsOnce(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	p := paidJob(t, srv, a, 1000)
	paysimtest.LostRefundAnswerRefundsOnce(t, srv, a, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "refund-lost", Reference: "ns.lost", Amount: 1000, Currency: "USD"})
}

func TestLifecycleCapabilities(t *testing.T) {
	if got, want := generic.Capabilities().Lifecycle, (provider.Lifecycle{Checkout: true, Refunds: true}); got != want {
		t.Fatalf("%+v", got)
	}
	a, err := generic.New(provider.Config{Name: "ns/gen", APIURL: "http://127.0.0.1:1", Credentials: map[string][]byte{"token": []byte("t")}})
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"authorize":   func() error { _, err := a.Authorize(ctx, provider.ActionRequest{PaymentID: "j"}); return err },
		"capture":     func() error { _, err := a.Capture(ctx, provider.ActionRequest{PaymentID: "j"}); return err },
		"cancel":      func() error { _, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: "j"}); return err },
		"find refund": func() error { _, err := a.FindRefund(ctx, "j", "r"); return err },
	} {
		if err := call(); !errors.Is(err, provider.ErrUnsupported) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
