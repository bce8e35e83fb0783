package paypal_test

import (
	"errors"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// PayPal behaviour as PayPal documents it and paysim models it
// (docs/providers.md, "Documented behaviour"): what the adapter reports.

// TestExpiredOrderIsNotFoundToEveryCall: PayPal deletes an order nobody
// completed after paypal.OrderLifetime; the adapter reports every call about
// it as ErrNotFound (never a refusal), which is what the core needs to decide
// that it expired.
func TestExpiredOrderIsNotFoundToEveryCall(t *testing.T) {
	if got := paypal.Capabilities().Lifecycle.OrderLifetime; got != 3*time.Hour {
		t.Fatalf("OrderLifetime %v, want PayPal's 3h", got)
	}
	clk := clocktesting.NewFakeClock(simNow)
	srv, a := simAdapter(t, paysim.Options{Now: clk.Now})
	waiting := createOrder(t, a, provider.CaptureAutomatic, 1000, "USD")
	approved := approvedOrder(t, srv, a, provider.CaptureManual, 1000, "USD")
	clk.Step(paypal.OrderLifetime)
	for name, call := range map[string]func(id string) error{
		"get": func(id string) error { _, err := a.Get(ctx, id); return err },
		"capture": func(id string) error {
			_, err := a.Capture(ctx, provider.ActionRequest{PaymentID: id, IdempotencyKey: key("c")})
			return err
		},
		"authorize": func(id string) error {
			_, err := a.Authorize(ctx, provider.ActionRequest{PaymentID: id, IdempotencyKey: key("a")})
			return err
		},
		"cancel": func(id string) error {
			_, err := a.Cancel(ctx, provider.ActionRequest{PaymentID: id, IdempotencyKey: key("v")})
			return err
		},
	} {
		for _, id := range []string{waiting.ID, approved.ID} {
			if err := call(id); !errors.Is(err, provider.ErrNotFound) || errors.Is(err, provider.ErrNonRetryable) {
				t.Errorf("%s of expired order %s: %v, want ErrNotFound", name, id, err)
			}
		}
	}
}

// TestVoidedAtTheEndOfValidity: PayPal sends PAYMENT.AUTHORIZATION.VOIDED when
// an authorization reaches the end of its validity as for a void (Payments v2
// webhook events). The adapter reports the event paysim sends then with the
// order id and the event's time (the core tells the expiry from a void by
// that time), and reports a VOIDED event whose authorization reads EXPIRED as
// Expired.
func TestVoidedAtTheEndOfValidity(t *testing.T) {
	clk := clocktesting.NewFakeClock(simNow)
	srv, a := simAdapter(t, paysim.Options{Now: clk.Now})
	auth := authorizedOrder(t, srv, a, 1000, "USD")
	clk.Step(29 * 24 * time.Hour)
	if got, err := a.Get(ctx, auth.ID); err != nil || got.Status != provider.StatusExpired {
		t.Fatalf("after 29 days: %+v %v", got, err)
	}
	evs := srv.Sim.Events(paysim.PayPal)
	rec := evs[len(evs)-1]
	ev, err := a.ParseEvent(rec.Raw)
	if err != nil || rec.Type != "PAYMENT.AUTHORIZATION.VOIDED" {
		t.Fatalf("paysim's last event %s: %v", rec.Type, err)
	}
	if ev.Status != provider.StatusCanceled || ev.PaymentID != auth.ID || !ev.OccurredAt.Equal(auth.AuthorizationExpiresAt) {
		t.Fatalf("parsed %s for %s at %s; want Canceled for %s at the authorization's end %s", ev.Status, ev.PaymentID, ev.OccurredAt, auth.ID, auth.AuthorizationExpiresAt)
	}

	expired := []byte(`{"id":"WH-EXP","event_type":"PAYMENT.AUTHORIZATION.VOIDED","create_time":"2026-10-20T12:00:00Z","resource_type":"authorization",` +
		`"resource":{"id":"AUTH1","status":"EXPIRED","amount":{"currency_code":"USD","value":"10.00"},"custom_id":"ref-1",` +
		`"supplementary_data":{"related_ids":{"order_id":"ORDER1"}}}}`)
	ev, err = paypal.ParseEvent(expired)
	if err != nil || ev.Status != provider.StatusExpired || ev.FailureCode != provider.FailureAuthorizationExpired || ev.PaymentID != "ORDER1" {
		t.Fatalf("a VOIDED event whose authorization reads EXPIRED: %+v %v", ev, err)
	}
}

// TestInstrumentDeclinedIsThePayersTurnAgain: PayPal refuses the capture of
// an approved order INSTRUMENT_DECLINED when the payer's funding source fails
// ("Handle funding failures": restart the payment so the payer can choose
// another). The adapter answers the capture with the order waiting for its
// payer (Pending, the payer-action link, FailureCode INSTRUMENT_DECLINED), no
// error; after the payer approves again, a capture with a new key takes the
// money once.
func TestInstrumentDeclinedIsThePayersTurnAgain(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon, CaptureOutcome: paysim.OutcomeInstrumentDeclined}})
	p := approvedOrder(t, srv, a, provider.CaptureAutomatic, 1000, "USD")
	got, err := a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "k/capture"})
	if err != nil {
		t.Fatalf("a declined funding source is the payer's turn, not an error: %v", err)
	}
	if got.Status != provider.StatusPending || got.FailureCode != paypal.IssueInstrumentDeclined || got.RawStatus != "PAYER_ACTION_REQUIRED/INSTRUMENT_DECLINED" ||
		got.CustomerAction == nil || got.CustomerAction.URL != p.CustomerAction.URL {
		t.Fatalf("capture answered %+v; want Pending with the payer's link %+v", got, p.CustomerAction)
	}
	if err := srv.Sim.Approve(paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	got, err = a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "k/capture/2"})
	if err != nil || got.Status != provider.StatusSucceeded {
		t.Fatalf("the capture after the second approval: %+v %v", got, err)
	}
	if n := srv.Sim.Counters().CapturesByPayment[p.ID]; n != 1 {
		t.Fatalf("%d captures took effect, want 1", n)
	}
}

// TestFundsGuaranteedForTheHonorPeriod: a PayPal authorization is valid for 29
// days, its funds guaranteed for the first 3 ("Authorization and honor
// period"). The adapter reports both: AuthorizationExpiresAt is the
// authorization's expiration_time, FundsGuaranteedUntil its create_time plus
// the honor period.
func TestFundsGuaranteedForTheHonorPeriod(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	got := authorizedOrder(t, srv, a, 1000, "USD")
	if !got.AuthorizationExpiresAt.Equal(simNow.Add(29*24*time.Hour)) || !got.FundsGuaranteedUntil.Equal(simNow.Add(paypal.HonorPeriod)) {
		t.Fatalf("authorized until %s, funds guaranteed until %s; want 29 days and 3 days after %s", got.AuthorizationExpiresAt, got.FundsGuaranteedUntil, simNow)
	}
	read, err := a.Get(ctx, got.ID)
	if err != nil || !read.FundsGuaranteedUntil.Equal(got.FundsGuaranteedUntil) {
		t.Fatalf("a read: %+v %v", read, err)
	}
	// An authorization shorter than the honor period is guaranteed to its end.
	o := paypal.Order{ID: "O1", Status: "COMPLETED", PurchaseUnits: []paypal.PurchaseUnit{{
		Amount: paypal.Money{CurrencyCode: "USD", Value: "10.00"},
		Payments: &paypal.Payments{Authorizations: []paypal.Authorization{{
			ID: "A1", Status: "CREATED", Amount: paypal.Money{CurrencyCode: "USD", Value: "10.00"},
			CreateTime: "2026-09-21T12:00:00Z", ExpirationTime: "2026-09-22T12:00:00Z",
		}}},
	}}}
	if p := paypal.NormalizeOrder(o); !p.FundsGuaranteedUntil.Equal(p.AuthorizationExpiresAt) {
		t.Fatalf("guaranteed until %s, the authorization ends %s", p.FundsGuaranteedUntil, p.AuthorizationExpiresAt)
	}
}

// TestApprovalReversedIsExpired: CHECKOUT.PAYMENT-APPROVAL.REVERSED says PayPal
// canceled an approved order the merchant did not capture within the capture
// window (3 hours by default) and refunded the payer ("Handle uncaptured
// payments"): nothing was taken, the window ran out. The adapter reads it as
// Expired for the order, found by its merchant reference too, with FailureCode
// PAYMENT_APPROVAL_REVERSED.
func TestApprovalReversedIsExpired(t *testing.T) {
	srv, a := simAdapter(t, paysim.Options{})
	p := approvedOrder(t, srv, a, provider.CaptureAutomatic, 1000, "USD")
	if err := srv.Sim.ReverseApproval(paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	evs := srv.Sim.Events(paysim.PayPal)
	ev, err := a.ParseEvent(evs[len(evs)-1].Raw)
	if err != nil || !ev.Supported || ev.Status != provider.StatusExpired || ev.PaymentID != p.ID || ev.MerchantReference != "ref-1" ||
		ev.FailureCode != paypal.FailureApprovalReversed || ev.OccurredAt.IsZero() {
		t.Fatalf("parsed %+v %v", ev, err)
	}
}

// TestListEventsReadsEveryEventNewestFirst: PayPal lists its webhook events
// (Webhooks Management API v1, "List event notifications") newest first, as
// paysim models it, the next page behind the link rel "next". ListEvents
// reads every event created since the time asked, each once, exactly as
// delivered, over pages of EventsPageSize; nothing older; and the adapter
// says what the backfill needs: an events API, newest first, 30 days.
func TestListEventsReadsEveryEventNewestFirst(t *testing.T) {
	caps := paypal.Capabilities()
	if !caps.EventsAPI || !caps.EventsNewestFirst || caps.EventsRetention != 30*24*time.Hour {
		t.Fatalf("capabilities %+v: want an events API, newest first, 30 days", caps)
	}
	clk := clocktesting.NewFakeClock(simNow)
	srv, a := simAdapter(t, paysim.Options{Now: clk.Now, Faults: paysim.Faults{DropRate: 1}})
	before := capturedOrder(t, srv, a, 1000)
	clk.Step(time.Minute)
	since := clk.Now()
	var orders []string
	for range 60 { // 120 events: more than one page
		orders = append(orders, capturedOrder(t, srv, a, 1000).ID)
		clk.Step(time.Second)
	}
	if err := srv.Sim.Refund(paysim.PayPal, orders[0], 300); err != nil {
		t.Fatal(err)
	}
	recorded := map[string]paysim.EventRecord{}
	for _, e := range srv.Sim.Events(paysim.PayPal) {
		recorded[e.ID] = e
	}

	var got []provider.Event
	cursor, pages := "", 0
	for {
		page, err := a.ListEvents(ctx, since, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		got = append(got, page.Events...)
		if !page.HasMore {
			break
		}
		cursor = page.NextCursor
	}
	if len(got) != 121 || pages != 2 {
		t.Fatalf("%d events in %d pages, want 121 in 2", len(got), pages)
	}
	seen := map[string]bool{}
	for i, ev := range got {
		rec, ok := recorded[ev.ID]
		switch {
		case !ok || seen[ev.ID] || string(ev.Raw) != string(rec.Raw) || ev.PaymentID != rec.PaymentID || !ev.Supported:
			t.Fatalf("event %d %+v is not paysim's %+v, or read twice", i, ev, rec)
		case rec.PaymentID == before.ID:
			t.Fatalf("event %s is older than %s", ev.ID, since)
		case i > 0 && ev.OccurredAt.After(got[i-1].OccurredAt):
			t.Fatalf("event %d (%s) is newer than the one before it (%s)", i, ev.OccurredAt, got[i-1].OccurredAt)
		}
		seen[ev.ID] = true
	}
	if got[0].Type != "PAYMENT.CAPTURE.REFUNDED" || got[0].PaymentID != orders[0] || got[0].RefundedTotal != 300 {
		t.Fatalf("newest event %+v, want the refund", got[0])
	}
}

// TestListEventsFollowsTheNextLinkOnTheAPIURL: the next page is asked for
// with the query of the link rel "next", on the configured API URL (the token
// never goes to a host a link names); event types paywarden does not act on
// are left out of the page.
func TestListEventsFollowsTheNextLinkOnTheAPIURL(t *testing.T) {
	var queries []string
	a := fakeAdapter(t, &fakePayPal{token: issueToken, api: func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.Path+"?"+r.URL.RawQuery)
		_, _ = io.WriteString(w, `{"events":[`+webhookEvent+`,{"id":"WH-OTHER","create_time":"2026-09-21T11:00:00Z","event_type":"BILLING.PLAN.CREATED","resource":{}}],"count":2,`+
			`"links":[{"href":"https://api-m.paypal.example/v1/notifications/webhooks-events/?start_time=2026-09-21T10:00:00Z&page_size=100&move_to=next&index_time=2026-09-21T11:00:00Z&index_id=3","rel":"next","method":"GET"}]}`)
	}})
	page, err := a.ListEvents(ctx, parseTime(t, "2026-09-21T10:00:00Z"), "")
	if err != nil || len(page.Events) != 1 || page.Events[0].Type != "PAYMENT.CAPTURE.COMPLETED" || !page.HasMore {
		t.Fatalf("%+v %v", page, err)
	}
	if _, err := a.ListEvents(ctx, parseTime(t, "2026-09-21T10:00:00Z"), page.NextCursor); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/v1/notifications/webhooks-events?page_size=100&start_time=2026-09-21T10%3A00%3A00Z",
		"/v1/notifications/webhooks-events?index_id=3&index_time=2026-09-21T11%3A00%3A00Z&move_to=next&page_size=100&start_time=2026-09-21T10%3A00%3A00Z",
	}
	if !slices.Equal(queries, want) {
		t.Fatalf("requests %q, want %q", queries, want)
	}
}

// TestDisputeResolvedSaysHowItEnded: CUSTOMER.DISPUTE.RESOLVED ("A dispute is
// resolved", "Subscribe to disputes webhooks") is a Dispute event whose
// DisputeOutcome is won for the outcome codes that leave the money with the
// merchant (the seller's favour, the buyer canceling) and lost for every
// other code PayPal lists (Customer Disputes API v1, dispute_outcome) or none:
// PayPal defines none of them, and a lost outcome only asks a human to look.
// The dispute's opening stays an open dispute.
func TestDisputeResolvedSaysHowItEnded(t *testing.T) {
	want := map[string]string{
		"RESOLVED_SELLER_FAVOUR": provider.DisputeWon, "CANCELED_BY_BUYER": provider.DisputeWon,
		"RESOLVED_BUYER_FAVOUR": provider.DisputeLost, "ACCEPTED": provider.DisputeLost, "RESOLVED_WITH_PAYOUT": provider.DisputeLost,
		"DENIED": provider.DisputeLost, "NONE": provider.DisputeLost, "": provider.DisputeLost,
	}
	if len(want) != len(paypal.DisputeOutcomeCodes())+1 {
		t.Fatalf("the test covers %d codes, PayPal lists %v", len(want)-1, paypal.DisputeOutcomeCodes())
	}
	for code, outcome := range want {
		t.Run(code+" is "+outcome, func(t *testing.T) {
			res := `{"dispute_id":"PP-D-1","status":"RESOLVED","dispute_amount":{"currency_code":"USD","value":"19.99"},"disputed_transactions":[{"invoice_number":"ref-1"}]`
			if code != "" {
				res += `,"dispute_outcome":{"outcome_code":"` + code + `"}`
			}
			ev, err := paypal.ParseEvent([]byte(`{"id":"WH-R","create_time":"2026-09-21T12:00:00Z","event_type":"CUSTOMER.DISPUTE.RESOLVED","resource":` + res + `}}`))
			if err != nil || !ev.Supported || ev.Status != provider.StatusDispute || ev.DisputeOutcome != outcome || ev.MerchantReference != "ref-1" || ev.Amount != 1999 {
				t.Fatalf("%+v %v", ev, err)
			}
		})
	}

	t.Run("paysim's dispute, opened and resolved", func(t *testing.T) {
		srv, a := simAdapter(t, paysim.Options{})
		p := capturedOrder(t, srv, a, 1999)
		if err := srv.Sim.Dispute(paysim.PayPal, p.ID, "MERCHANDISE_OR_SERVICE_NOT_RECEIVED"); err != nil {
			t.Fatal(err)
		}
		if err := srv.Sim.PayPalResolveDispute(p.ID, paypal.OutcomeBuyerFavour); err != nil {
			t.Fatal(err)
		}
		evs := srv.Sim.Events(paysim.PayPal)
		for i, outcome := range map[int]string{len(evs) - 2: "", len(evs) - 1: provider.DisputeLost} {
			ev, err := a.ParseEvent(evs[i].Raw)
			if err != nil || ev.Status != provider.StatusDispute || ev.DisputeOutcome != outcome || ev.MerchantReference != "ref-1" {
				t.Fatalf("%s: %+v %v; want outcome %q", evs[i].Type, ev, err, outcome)
			}
		}
	})
}
