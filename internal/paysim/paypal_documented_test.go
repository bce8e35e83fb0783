package paysim_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
)

// PayPal behaviour paysim models from PayPal's documents (docs/providers.md,
// "Documented behaviour"): each test names the behaviour and its source is
// cited next to the code that models it.

// TestPayPalOrderNobodyCompletedExpiresAndIsNotFound: an order that is not
// completed expires after its lifetime (3h by default), counted from its
// creation and again from the payer's approval; then PayPal answers 404
// RESOURCE_NOT_FOUND to a read or a capture, and sends no webhook. A captured
// or authorized order does not expire this way.
func TestPayPalOrderNobodyCompletedExpiresAndIsNotFound(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC))
	e := start(t, paysim.Options{Now: clk.Now, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}})
	pp := e.p[paysim.PayPal]
	waiting := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k1", MerchantReference: "r1", Amount: 1000})
	approved := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k2", MerchantReference: "r2", Amount: 1000})
	captured := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k3", MerchantReference: "r3", Amount: 1000})
	authorized := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k4", MerchantReference: "r4", Amount: 1000, CaptureMethod: provider.CaptureManual})
	for _, id := range []string{captured.ID, authorized.ID} {
		if err := e.sim.Approve(paysim.PayPal, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pp.Capture(bg, provider.ActionRequest{PaymentID: captured.ID, IdempotencyKey: "c3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := pp.Authorize(bg, provider.ActionRequest{PaymentID: authorized.ID, IdempotencyKey: "a4"}); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Hour)
	if err := e.sim.Approve(paysim.PayPal, approved.ID); err != nil {
		t.Fatal(err)
	}

	clk.Step(2*time.Hour - time.Second)
	if got := e.status(t, paysim.PayPal, waiting.ID); got.Status != provider.StatusPending {
		t.Fatalf("a second before its lifetime the order is %+v", got)
	}
	clk.Step(time.Second)
	if _, err := pp.Get(bg, waiting.ID); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("an order not approved within 3h: %v, want not found", err)
	}
	if _, err := pp.Cancel(bg, provider.ActionRequest{PaymentID: waiting.ID, IdempotencyKey: "x1"}); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("cancel of an expired order: %v, want not found", err)
	}
	if err := e.sim.Approve(paysim.PayPal, waiting.ID); err == nil {
		t.Fatal("the payer approved an expired order")
	}
	if got := e.status(t, paysim.PayPal, approved.ID); got.Status != provider.StatusApproved {
		t.Fatalf("approved 2h ago, the order is %+v; its lifetime restarts at the approval", got)
	}
	clk.Step(time.Hour)
	if _, err := pp.Capture(bg, provider.ActionRequest{PaymentID: approved.ID, IdempotencyKey: "c2"}); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("capture 3h after the approval: %v, want not found", err)
	}
	clk.Step(30 * 24 * time.Hour)
	if got := e.status(t, paysim.PayPal, captured.ID); got.Status != provider.StatusSucceeded {
		t.Fatalf("a captured order is %+v", got)
	}
	if got := e.status(t, paysim.PayPal, authorized.ID); got.Status != provider.StatusExpired || got.FailureCode != provider.FailureAuthorizationExpired {
		t.Fatalf("an authorized order ends with its authorization, not its order lifetime: %+v", got)
	}
	if v, _ := e.sim.Payment(paysim.PayPal, waiting.ID); !v.OrderGone || v.State != "expired" {
		t.Fatalf("control view %+v", v)
	}
	if n := e.sim.Counters().OrdersExpired; n != 2 {
		t.Fatalf("%d orders expired, want 2", n)
	}
	for _, id := range []string{waiting.ID, approved.ID} {
		if evs := eventTypes(e, paysim.PayPal, id); len(evs) > 0 && evs[len(evs)-1] != "CHECKOUT.ORDER.APPROVED" {
			t.Fatalf("an order expiry sent %v", evs)
		}
	}
}

// TestPayPalOrderLifetimeRunsOnTheScaledClock: the lifetime is a simulated
// delay like every other (Options.TimeFactor).
func TestPayPalOrderLifetimeRunsOnTheScaledClock(t *testing.T) {
	e := start(t, paysim.Options{TimeFactor: 0.0001, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}})
	p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000})
	eventually(t, "the order to expire", func() bool {
		_, err := e.p[paysim.PayPal].Get(bg, p.ID)
		return errors.Is(err, provider.ErrNotFound)
	})
}

// TestPayPalAuthorizationAtItsValidityEndIsVoided: PayPal sends
// PAYMENT.AUTHORIZATION.VOIDED when an authorization reaches the end of its
// validity, as for a merchant's void (Payments v2 webhook events); the event's
// authorization reads VOIDED, a later read of the order shows it EXPIRED.
func TestPayPalAuthorizationAtItsValidityEndIsVoided(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC))
	e := start(t, paysim.Options{Now: clk.Now, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}})
	p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000, CaptureMethod: provider.CaptureManual})
	if err := e.sim.Approve(paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	auth, err := e.p[paysim.PayPal].Authorize(bg, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "a"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(29 * 24 * time.Hour)
	if got := e.status(t, paysim.PayPal, p.ID); got.Status != provider.StatusExpired || got.RawStatus != "COMPLETED/authorization:EXPIRED" {
		t.Fatalf("after 29 days the order reads %+v", got)
	}
	evs := e.sim.Events(paysim.PayPal)
	last := evs[len(evs)-1]
	if last.Type != "PAYMENT.AUTHORIZATION.VOIDED" || last.PaymentID != p.ID || !last.Created.Equal(auth.AuthorizationExpiresAt) {
		t.Fatalf("last event %s of %s at %s, want PAYMENT.AUTHORIZATION.VOIDED at the expiry %s", last.Type, last.PaymentID, last.Created, auth.AuthorizationExpiresAt)
	}
	var ev struct {
		Resource struct {
			Status string `json:"status"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(last.Raw, &ev); err != nil || ev.Resource.Status != "VOIDED" {
		t.Fatalf("the event's authorization reads %q (%v), want VOIDED", ev.Resource.Status, err)
	}
}

// TestPayPalInstrumentDeclinedSendsThePayerBack: "If your payer's funding
// source fails, the Orders API returns an INSTRUMENT_DECLINED error ... restart
// the payment so the payer can select a different payment option" (PayPal,
// "Handle funding failures"). paysim (captureOutcome instrument_declined)
// refuses the first capture of the approved order with 422
// INSTRUMENT_DECLINED and puts the order back to waiting for the payer; once
// the payer approves again, a capture takes the money, once.
func TestPayPalInstrumentDeclinedSendsThePayerBack(t *testing.T) {
	e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon, CaptureOutcome: paysim.OutcomeInstrumentDeclined}})
	p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000, Checkout: shopCheckout})
	if err := e.sim.Approve(paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	code, _, body := e.rawCall(t, paysim.PayPal, "POST", "/v2/checkout/orders/"+p.ID+"/capture", "capture-1", "{}")
	if code != 422 || !strings.Contains(string(body), `"issue":"INSTRUMENT_DECLINED"`) {
		t.Fatalf("the first capture: %d %s, want 422 INSTRUMENT_DECLINED", code, body)
	}
	back := e.status(t, paysim.PayPal, p.ID)
	if back.Status != provider.StatusPending || back.RawStatus != "PAYER_ACTION_REQUIRED" || back.CustomerAction == nil || back.CustomerAction.URL != p.CustomerAction.URL {
		t.Fatalf("after the decline the order reads %+v, want it waiting for the payer at %+v", back, p.CustomerAction)
	}
	if code, _, body := e.rawCall(t, paysim.PayPal, "POST", "/v2/checkout/orders/"+p.ID+"/capture", "capture-1b", "{}"); code != 422 || !strings.Contains(string(body), "ORDER_NOT_APPROVED") {
		t.Fatalf("a capture before the payer approved again: %d %s", code, body)
	}
	if err := e.sim.Approve(paysim.PayPal, p.ID); err != nil {
		t.Fatalf("the payer approves again: %v", err)
	}
	code, _, body = e.rawCall(t, paysim.PayPal, "POST", "/v2/checkout/orders/"+p.ID+"/capture", "capture-2", "{}")
	if code != 201 || !strings.Contains(string(body), `"status":"COMPLETED"`) {
		t.Fatalf("the capture after the second approval: %d %s", code, body)
	}
	c := e.sim.Counters()
	if c.CapturesByPayment[p.ID] != 1 || c.InstrumentDeclines != 1 || c.Approvals != 2 {
		t.Fatalf("captures %d, declines %d, approvals %d; want 1, 1, 2", c.CapturesByPayment[p.ID], c.InstrumentDeclines, c.Approvals)
	}
	if evs := eventTypes(e, paysim.PayPal, p.ID); strings.Join(evs, " ") != "CHECKOUT.ORDER.APPROVED CHECKOUT.ORDER.APPROVED PAYMENT.CAPTURE.COMPLETED" {
		t.Fatalf("events %v", evs)
	}
}

// TestPayPalHonorPeriodGuaranteesTheFundsForThreeDays: an authorization holds
// the funds for 29 days, but PayPal guarantees them only in the 3-day honor
// period; after it a capture may be declined ("Authorization and honor
// period"). paysim captures within the honor period, and after it does what
// the script's afterHonorPeriod says (fail: DECLINED).
func TestPayPalHonorPeriodGuaranteesTheFundsForThreeDays(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC))
	e := start(t, paysim.Options{Now: clk.Now, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon, AfterHonorPeriod: paysim.OutcomeFail}})
	pp := e.p[paysim.PayPal]
	authorized := func(ref string) provider.Payment {
		p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k-" + ref, MerchantReference: ref, Amount: 1000, CaptureMethod: provider.CaptureManual})
		if err := e.sim.Approve(paysim.PayPal, p.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := pp.Authorize(bg, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "a-" + ref}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	within, after := authorized("within"), authorized("after")
	clk.Step(3*24*time.Hour - time.Second)
	if got, err := pp.Capture(bg, provider.ActionRequest{PaymentID: within.ID, IdempotencyKey: "c-within"}); err != nil || got.Status != provider.StatusSucceeded {
		t.Fatalf("a capture inside the honor period: %+v %v", got, err)
	}
	clk.Step(time.Second)
	if got, err := pp.Capture(bg, provider.ActionRequest{PaymentID: after.ID, IdempotencyKey: "c-after"}); err != nil || got.Status != provider.StatusFailed || got.RawStatus != "COMPLETED/DECLINED" {
		t.Fatalf("a capture after the honor period, scripted to be declined: %+v %v", got, err)
	}
	if n := e.sim.Counters().DeclinedAfterHonorPeriod; n != 1 {
		t.Fatalf("%d captures declined after the honor period, want 1", n)
	}

	// Unscripted, the funds are still there after the honor period.
	e2 := start(t, paysim.Options{Now: clk.Now, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}})
	p := e2.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000, CaptureMethod: provider.CaptureManual})
	if err := e2.sim.Approve(paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e2.p[paysim.PayPal].Authorize(bg, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "a"}); err != nil {
		t.Fatal(err)
	}
	clk.Step(10 * 24 * time.Hour)
	if got, err := e2.p[paysim.PayPal].Capture(bg, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "c"}); err != nil || got.Status != provider.StatusSucceeded {
		t.Fatalf("an unscripted capture on day 10: %+v %v", got, err)
	}
}

// TestPayPalApprovalReversedCancelsTheOrder: an approved order the merchant
// does not capture in time (alternative payment methods) is reversed: PayPal
// sends CHECKOUT.PAYMENT-APPROVAL.REVERSED (the order id and its purchase
// units), cancels the order and refunds the payer ("Handle uncaptured
// payments"). paysim does so on the control call; the order then reads VOIDED
// and can no longer be captured.
func TestPayPalApprovalReversedCancelsTheOrder(t *testing.T) {
	e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}})
	p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000})
	if err := e.sim.ReverseApproval(paysim.PayPal, p.ID); err == nil {
		t.Fatal("an order nobody approved was reversed")
	}
	if err := e.sim.Approve(paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := paysim.NewControlClient(e.srv.URL).ReverseApproval(bg, p.ID); err != nil {
		t.Fatal(err)
	}
	evs := e.sim.Events(paysim.PayPal)
	last := evs[len(evs)-1]
	var ev struct {
		Resource struct {
			OrderID       string `json:"order_id"`
			PurchaseUnits []struct {
				InvoiceID string `json:"invoice_id"`
			} `json:"purchase_units"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(last.Raw, &ev); err != nil || last.Type != "CHECKOUT.PAYMENT-APPROVAL.REVERSED" || ev.Resource.OrderID != p.ID ||
		len(ev.Resource.PurchaseUnits) != 1 || ev.Resource.PurchaseUnits[0].InvoiceID != "r" {
		t.Fatalf("last event %s %s (%v)", last.Type, last.Raw, err)
	}
	if got := e.status(t, paysim.PayPal, p.ID); got.RawStatus != "VOIDED" {
		t.Fatalf("the reversed order reads %+v", got)
	}
	if _, err := e.p[paysim.PayPal].Capture(bg, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "c"}); !errors.Is(err, provider.ErrNonRetryable) {
		t.Fatalf("capture of a reversed order: %v", err)
	}
}

// TestPayPalEventsAreListedNewestFirst: PayPal lists its webhook events
// (Webhooks Management API v1, "List event notifications"): page_size
// (default 10), start_time and end_time (created on or after / on or before),
// event_type; {events, count, links} with the next page behind the link rel
// "next". paysim lists every event it recorded, delivered or lost, newest
// first, byte for byte as delivered, and none older than 30 days.
func TestPayPalEventsAreListedNewestFirst(t *testing.T) {
	t0 := time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0)
	e := start(t, paysim.Options{Now: clk.Now, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}, Faults: paysim.Faults{DropRate: 1}})
	sink := newReceiver(t, e.p[paysim.PayPal], nil, nil)
	if err := e.sim.SetWebhookTarget(paysim.PayPal, sink.srv.URL); err != nil {
		t.Fatal(err)
	}
	// Twelve approvals a minute apart, the last two with one create_time.
	for i := range 12 {
		p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k" + strconv.Itoa(i), MerchantReference: "r" + strconv.Itoa(i), Amount: 1000})
		if err := e.sim.Approve(paysim.PayPal, p.ID); err != nil {
			t.Fatal(err)
		}
		if i < 10 {
			clk.Step(time.Minute)
		}
	}
	recorded := e.sim.Events(paysim.PayPal)
	if len(recorded) != 12 || e.sim.Counters().WebhooksByProvider[paysim.PayPal].Dropped != 12 {
		t.Fatalf("%d events recorded, counters %+v; want 12, every delivery lost", len(recorded), e.sim.Counters().WebhooksByProvider[paysim.PayPal])
	}
	newestFirst := func(evs []paysim.EventRecord) []string {
		var ids []string
		for i := len(evs) - 1; i >= 0; i-- {
			ids = append(ids, evs[i].ID)
		}
		return ids
	}

	list := func(query string) (ids []string, next string) {
		t.Helper()
		code, _, body := e.rawCall(t, paysim.PayPal, "GET", "/v1/notifications/webhooks-events"+query, "", "")
		var l struct {
			Events []json.RawMessage `json:"events"`
			Count  int               `json:"count"`
			Links  []struct{ Href, Rel string }
		}
		if code != 200 || json.Unmarshal(body, &l) != nil || l.Count != len(l.Events) {
			t.Fatalf("list %s: %d %s", query, code, body)
		}
		for _, raw := range l.Events {
			var ev struct{ ID string }
			_ = json.Unmarshal(raw, &ev)
			if rec := recordOf(e.sim.Events(paysim.PayPal), ev.ID); rec == nil || string(rec.Raw) != string(raw) {
				t.Fatalf("listed event %s is not the one delivered: %s", ev.ID, raw)
			}
			ids = append(ids, ev.ID)
		}
		for _, l := range l.Links {
			if l.Rel == "next" {
				next = strings.TrimPrefix(l.Href, e.srv.URL+"/"+paysim.PayPal+"/v1/notifications/webhooks-events")
			}
		}
		return ids, next
	}
	all := func(query string) []string {
		t.Helper()
		var ids []string
		for query != "" {
			page, next := list(query)
			ids = append(ids, page...)
			query = next
		}
		return ids
	}

	if first, next := list(""); !slices.Equal(first, newestFirst(recorded)[:10]) || next == "" {
		t.Errorf("first page without page_size: %v (next %q); want the 10 newest, newest first", first, next)
	}
	since := "?page_size=3&start_time=" + t0.Add(2*time.Minute).Format(time.RFC3339)
	if got, want := all(since), newestFirst(recorded[2:]); !slices.Equal(got, want) {
		t.Errorf("paged from start_time:\n got %v\nwant %v", got, want)
	}
	window := "?page_size=2&start_time=" + t0.Add(2*time.Minute).Format(time.RFC3339) + "&end_time=" + t0.Add(5*time.Minute).Format(time.RFC3339)
	if got, want := all(window), newestFirst(recorded[2:6]); !slices.Equal(got, want) {
		t.Errorf("start_time to end_time:\n got %v\nwant %v", got, want)
	}
	if got := all("?event_type=PAYMENT.CAPTURE.COMPLETED"); len(got) != 0 {
		t.Errorf("event_type filter: %v", got)
	}
	if code, _, body := e.rawCall(t, paysim.PayPal, "GET", "/v1/notifications/webhooks-events?transaction_id=X", "", ""); code != 400 {
		t.Errorf("transaction_id, not modelled: %d %s", code, body)
	}

	// A page's link still leads on after newer events arrive.
	_, next := list("?page_size=4")
	clk.Step(time.Minute)
	newer := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k-new", MerchantReference: "r-new", Amount: 1000})
	if err := e.sim.Approve(paysim.PayPal, newer.ID); err != nil {
		t.Fatal(err)
	}
	if got := all(next); !slices.Equal(got, newestFirst(recorded)[4:]) {
		t.Errorf("the rest after a newer event: %v", got)
	}

	// 30 days on, the first events are gone from the list.
	clk.Step(30*24*time.Hour - 2*time.Minute) // 30 days after the 10th approval
	if got := all("?page_size=100"); len(got) != 4 || got[0] != e.sim.Events(paysim.PayPal)[12].ID {
		t.Errorf("after 30 days: %v; want the 4 events of the last 30 days", got)
	}
}

func recordOf(evs []paysim.EventRecord, id string) *paysim.EventRecord {
	for i := range evs {
		if evs[i].ID == id {
			return &evs[i]
		}
	}
	return nil
}

// TestPayPalDisputeIsResolvedWithItsOutcome: a PayPal dispute ends with
// CUSTOMER.DISPUTE.RESOLVED ("A dispute is resolved", PayPal developer docs,
// "Subscribe to disputes webhooks"), the dispute RESOLVED with its
// dispute_outcome.outcome_code (Customer Disputes API v1, definition
// dispute_outcome); the buyer's favour refunds the disputed amount.
func TestPayPalDisputeIsResolvedWithItsOutcome(t *testing.T) {
	e := start(t, paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomeAbandon}})
	p := e.createWith(t, paysim.PayPal, provider.CreateRequest{IdempotencyKey: "k", MerchantReference: "r", Amount: 1000})
	if err := e.sim.Approve(paysim.PayPal, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.PayPalResolveDispute(p.ID, "RESOLVED_SELLER_FAVOUR"); err == nil {
		t.Fatal("a payment without a dispute had one resolved")
	}
	if _, err := e.p[paysim.PayPal].Capture(bg, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "c"}); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.Dispute(paysim.PayPal, p.ID, "MERCHANDISE_OR_SERVICE_NOT_RECEIVED"); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.PayPalResolveDispute(p.ID, "LOST"); err == nil {
		t.Fatal("an outcome code PayPal does not list was accepted")
	}
	// The control API's way, as the dev environment scripts it.
	resp, err := http.Post(e.srv.URL+"/_paysim/payments/paypal/"+p.ID+"/dispute/resolve", "application/json", strings.NewReader(`{"outcome":"RESOLVED_BUYER_FAVOUR"}`))
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("resolve through the control API: %v %v", resp, err)
	}
	resp.Body.Close()
	if err := e.sim.PayPalResolveDispute(p.ID, "RESOLVED_SELLER_FAVOUR"); err == nil {
		t.Fatal("a resolved dispute was resolved again")
	}
	type dispute struct {
		DisputeID      string `json:"dispute_id"`
		Status         string `json:"status"`
		DisputeOutcome *struct {
			OutcomeCode    string `json:"outcome_code"`
			AmountRefunded *struct {
				Value string `json:"value"`
			} `json:"amount_refunded"`
		} `json:"dispute_outcome"`
		DisputedTransactions []struct {
			InvoiceNumber string `json:"invoice_number"`
		} `json:"disputed_transactions"`
	}
	evs := e.sim.Events(paysim.PayPal)
	var created, resolved struct {
		EventType    string  `json:"event_type"`
		ResourceType string  `json:"resource_type"`
		Resource     dispute `json:"resource"`
	}
	if err := json.Unmarshal(evs[len(evs)-2].Raw, &created); err != nil || created.EventType != "CUSTOMER.DISPUTE.CREATED" || created.Resource.Status != "OPEN" || created.Resource.DisputeOutcome != nil {
		t.Fatalf("the dispute opened: %s (%v)", evs[len(evs)-2].Raw, err)
	}
	if err := json.Unmarshal(evs[len(evs)-1].Raw, &resolved); err != nil || resolved.EventType != "CUSTOMER.DISPUTE.RESOLVED" || resolved.ResourceType != "dispute" {
		t.Fatalf("the dispute resolved: %s (%v)", evs[len(evs)-1].Raw, err)
	}
	r := resolved.Resource
	if r.DisputeID != created.Resource.DisputeID || r.Status != "RESOLVED" || r.DisputeOutcome == nil || r.DisputeOutcome.OutcomeCode != "RESOLVED_BUYER_FAVOUR" ||
		r.DisputeOutcome.AmountRefunded == nil || r.DisputeOutcome.AmountRefunded.Value != "10.00" || len(r.DisputedTransactions) != 1 || r.DisputedTransactions[0].InvoiceNumber != "r" {
		t.Fatalf("resolved dispute %s, want dispute %s RESOLVED in the buyer's favour, 10.00 refunded", evs[len(evs)-1].Raw, created.Resource.DisputeID)
	}
}
