package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/paysim/paysimtest"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providertest"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// Lifecycle tests of the adapter against paysim's Stripe mode, which keeps state
// (stripe-mock does not): sessions and intents move through Stripe's statuses,
// webhooks are signed and retried, faults are injected.

const simKey = paysimtest.StripeKey

type simEnv struct {
	sim *paysim.Sim
	srv *httptest.Server
	a   *stripe.Adapter
}

func startSim(t *testing.T, opts paysim.Options) *simEnv {
	t.Helper()
	sim, srv := paysimtest.ServeStripe(t, opts)
	a, err := stripe.New(provider.Config{
		Name: "ns/stripe", APIURL: srv.URL + "/stripe", Timeout: 5 * time.Second, Now: opts.Now,
		Credentials: map[string][]byte{stripe.CredentialSecretKey: []byte(simKey)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &simEnv{sim: sim, srv: srv, a: a}
}

// webhookSink verifies and parses deliveries with the adapter, like the receiver.
type webhookSink struct {
	t       *testing.T
	a       *stripe.Adapter
	secrets [][]byte
	srv     *httptest.Server

	mu       sync.Mutex
	events   []provider.Event // in arrival order, duplicates included
	rejected int
	headers  []string
}

func (e *simEnv) sink(t *testing.T, secrets ...[]byte) *webhookSink {
	t.Helper()
	s := &webhookSink{t: t, a: e.a, secrets: secrets}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.headers = append(s.headers, r.Header.Get(stripe.HeaderSignature))
		if _, err := s.a.VerifyWebhook(r.Context(), r.Header, body, s.secrets, 5*time.Minute, time.Now()); err != nil {
			s.rejected++
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		ev, err := s.a.ParseEvent(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.events = append(s.events, ev)
	}))
	t.Cleanup(s.srv.Close)
	if err := e.sim.SetWebhookTarget(paysim.Stripe, s.srv.URL, secrets...); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *webhookSink) snapshot() []provider.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]provider.Event(nil), s.events...)
}

// waitTypes waits until every type has arrived at least once.
func (s *webhookSink) waitTypes(types ...string) []provider.Event {
	s.t.Helper()
	fixture.Eventually(s.t, fixture.Timeout, "webhooks "+strings.Join(types, ", "), func() bool {
		seen := map[string]bool{}
		for _, ev := range s.snapshot() {
			seen[ev.Type] = true
		}
		for _, typ := range types {
			if !seen[typ] {
				return false
			}
		}
		return true
	})
	return s.snapshot()
}

func byType(evs []provider.Event, typ string) provider.Event {
	for _, ev := range evs {
		if ev.Type == typ {
			return ev
		}
	}
	return provider.Event{}
}

// paidCheckout is a Checkout Session of 10.00 EUR its payer paid, and the
// payment read after it (its PaymentIntent).
func (e *simEnv) paidCheckout(t *testing.T, key, ref string) (session, paid provider.Payment) {
	t.Helper()
	session = e.create(t, checkoutReq(key, ref, 1000))
	if err := e.sim.StripePayer(session.ID, paysim.PayerPays, ""); err != nil {
		t.Fatal(err)
	}
	paid, err := e.a.Get(ctx, session.ID)
	if err != nil || paid.Status != provider.StatusSucceeded {
		t.Fatalf("the paid session reads %+v %v", paid, err)
	}
	return session, paid
}

func checkoutReq(key, ref string, amount int64) provider.CreateRequest {
	return provider.CreateRequest{
		IdempotencyKey: key, MerchantReference: ref, Amount: amount, Currency: "EUR", Description: "Order " + ref,
		Checkout: &provider.Checkout{ReturnURL: "https://shop.example/ok", CancelURL: "https://shop.example/cancel"},
	}
}

// offSessionReq charges a stored card; paysim scripts it (through the metadata the
// adapter forwards) to go through at once, as a card does.
func offSessionReq(key, ref string, amount int64, capture provider.CaptureMethod) provider.CreateRequest {
	return provider.CreateRequest{
		IdempotencyKey: key, MerchantReference: ref, Amount: amount, Currency: "EUR", CaptureMethod: capture,
		StoredMethod: &provider.StoredMethod{Customer: "cus_paysim", PaymentMethod: "pm_card_visa"},
		Metadata:     map[string]string{paysim.MetaOutcome: string(paysim.OutcomeSucceed)},
	}
}

var ctx = context.Background()

// create creates req through the adapter; the test fails on an error.
func (e *simEnv) create(t *testing.T, req provider.CreateRequest) provider.Payment {
	t.Helper()
	p, err := e.a.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPaysimCheckoutHappyPath(t *testing.T) {
	e := startSim(t, paysim.Options{})
	sink := e.sink(t, []byte("whsec_paysim"))
	p := e.create(t, checkoutReq("key-1", "ORD-1", 1999))
	if !strings.HasPrefix(p.ID, "cs_") || p.CheckoutID != p.ID || p.Status != provider.StatusPending || p.MerchantReference != "ORD-1" {
		t.Fatalf("before the payer acts the session is the payment: %+v", p)
	}
	if p.CustomerAction == nil || !strings.Contains(p.CustomerAction.URL, p.ID) || p.CustomerAction.ExpiresAt.IsZero() {
		t.Fatalf("no payer link: %+v", p.CustomerAction)
	}
	if p.Amount != 1999 || p.Currency != "EUR" {
		t.Fatalf("amount %d %s", p.Amount, p.Currency)
	}
	if err := e.sim.StripePayer(p.ID, paysim.PayerPays, ""); err != nil {
		t.Fatal(err)
	}
	evs := sink.waitTypes("payment_intent.succeeded", "checkout.session.completed")
	got, err := e.a.Get(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.ID, "pi_") || got.CheckoutID != p.ID || got.Status != provider.StatusSucceeded || got.Amount != 1999 || got.CustomerAction != nil {
		t.Fatalf("session read after payment: %+v", got)
	}
	byPI, err := e.a.Get(ctx, got.ID)
	if err != nil || byPI.Status != provider.StatusSucceeded || byPI.MerchantReference != "ORD-1" || byPI.Amount != 1999 {
		t.Fatalf("intent read: %+v %v", byPI, err)
	}
	for _, typ := range []string{"payment_intent.succeeded", "checkout.session.completed"} {
		ev := byType(evs, typ)
		if ev.Status != provider.StatusSucceeded || ev.PaymentID != got.ID || ev.MerchantReference != "ORD-1" || ev.Amount != 1999 {
			t.Errorf("%s: %+v", typ, ev)
		}
	}
	if ev := byType(evs, "checkout.session.completed"); ev.CheckoutID != p.ID {
		t.Errorf("session event names checkout %q", ev.CheckoutID)
	}
	c := e.sim.Counters()
	if c.PaymentsCreated != 1 || c.CreatesByKey["stripe/key-1"] != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestPaysimWebhookLostQuerySettles(t *testing.T) {
	e := startSim(t, paysim.Options{Faults: paysim.Faults{DropRate: 1}})
	sink := e.sink(t, []byte("whsec_paysim"))
	p := e.create(t, checkoutReq("key-lost", "ORD-LOST", 1000))
	if err := e.sim.StripePayer(p.ID, paysim.PayerPays, ""); err != nil {
		t.Fatal(err)
	}
	got, err := e.a.Get(ctx, p.ID)
	if err != nil || got.Status != provider.StatusSucceeded {
		t.Fatalf("the status query settles what no webhook said: %+v %v", got, err)
	}
	if n := len(sink.snapshot()); n != 0 {
		t.Fatalf("%d webhooks arrived although dropped", n)
	}
	if w := e.sim.Counters().WebhooksByProvider[paysim.Stripe]; w.Dropped < 2 {
		t.Fatalf("webhook counters %+v", w)
	}
	// Backfill recovers the dropped events from the events API.
	page, err := e.a.ListEvents(ctx, time.Now().Add(-time.Hour), "")
	if err != nil {
		t.Fatal(err)
	}
	if ev := byType(page.Events, "payment_intent.succeeded"); ev.PaymentID != got.ID || ev.Status != provider.StatusSucceeded {
		t.Fatalf("backfill: %+v", page.Events)
	}
}

func TestPaysimDuplicateAndReorderedWebhooks(t *testing.T) {
	e := startSim(t, paysim.Options{Faults: paysim.Faults{DuplicateRate: 1, ReorderRate: 1, ReorderHold: time.Hour}})
	sink := e.sink(t, []byte("whsec_paysim"))
	p := e.create(t, checkoutReq("key-dup", "ORD-DUP", 1000))
	if err := e.sim.StripePayer(p.ID, paysim.PayerPays, ""); err != nil {
		t.Fatal(err)
	}
	sink.waitTypes("payment_intent.succeeded", "checkout.session.completed")
	fixture.Eventually(t, fixture.Timeout, "duplicates", func() bool { return len(sink.snapshot()) >= 4 })
	evs := sink.snapshot()
	ids := map[string]int{}
	for _, ev := range evs {
		ids[ev.ID]++
	}
	if len(ids) != 2 {
		t.Fatalf("distinct events %v", ids)
	}
	for id, n := range ids {
		if n != 2 {
			t.Errorf("event %s arrived %d times", id, n)
		}
	}
	// paysim emitted payment_intent.succeeded first and held it back: the session
	// event overtakes it.
	if evs[0].Type != "checkout.session.completed" {
		t.Errorf("arrival order %s, %s: not reordered", evs[0].Type, evs[1].Type)
	}
	w := e.sim.Counters().WebhooksByProvider[paysim.Stripe]
	if w.Duplicated != 2 || w.Reordered < 1 {
		t.Fatalf("webhook counters %+v", w)
	}
}

func TestPaysimLostCreateResponse(t *testing.T) {
	for _, tt := range []struct {
		name string
		req  provider.CreateRequest
	}{
		{"checkout session", checkoutReq("key-lr-cs", "ORD-LR-1", 1000)},
		{"off-session intent", offSessionReq("key-lr-pi", "ORD-LR-2", 1000, provider.CaptureAutomatic)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := startSim(t, paysim.Options{Faults: paysim.Faults{LostResponseRate: 1}})
			_, err := e.a.Create(ctx, tt.req)
			providertest.AssertClass(t, err, provider.ErrRetryable)
			e.sim.SetFaults(paysim.Faults{})
			p := e.create(t, tt.req)
			again, err := e.a.Create(ctx, tt.req)
			if err != nil || again.ID != p.ID {
				t.Fatalf("second retry %+v %v", again, err)
			}
			c, sc := e.sim.Counters(), e.sim.StripeCounters()
			if c.PaymentsCreated != 1 || c.CreatesByKey["stripe/"+tt.req.IdempotencyKey] != 3 || sc.Replays != 2 {
				t.Fatalf("double charge? counters %+v %+v", c, sc)
			}
			if tt.req.StoredMethod != nil && (sc.IntentsCreated != 1 || p.Status != provider.StatusSucceeded) {
				t.Fatalf("intents %d, %+v", sc.IntentsCreated, p)
			}
		})
	}
}

// TestPaysimStoredServerErrorIsReplayed: Stripe keeps a 500 under the idempotency key
// for 24h; every retry gets it again (retryable, never a verdict), and the search past
// the window finds nothing because nothing was created.
func TestPaysimStoredServerErrorIsReplayed(t *testing.T) {
	e := startSim(t, paysim.Options{Faults: paysim.Faults{ServerErrorRate: 1}})
	req := offSessionReq("key-500", "ORD-500", 1000, provider.CaptureAutomatic)
	_, err := e.a.Create(ctx, req)
	providertest.AssertClass(t, err, provider.ErrRetryable)
	e.sim.SetFaults(paysim.Faults{})
	for i := 0; i < 2; i++ {
		_, err = e.a.Create(ctx, req)
		providertest.AssertClass(t, err, provider.ErrRetryable)
	}
	if sc := e.sim.StripeCounters(); sc.ReplayedErrors != 2 || sc.IntentsCreated != 0 {
		t.Fatalf("stripe counters %+v", sc)
	}
	_, err = e.a.FindByMerchantReference(ctx, "ORD-500")
	providertest.AssertClass(t, err, provider.ErrNotFound)
	// Another key goes through: the 500 belonged to the key, not to the account.
	req.IdempotencyKey = "key-500-b"
	if p, err := e.a.Create(ctx, req); err != nil || p.Status != provider.StatusSucceeded {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestPaysimIdempotencyKeyReusedWithOtherParameters(t *testing.T) {
	e := startSim(t, paysim.Options{})
	req := offSessionReq("key-reuse", "ORD-R", 1000, provider.CaptureAutomatic)
	e.create(t, req)
	req.Amount = 2000
	_, err := e.a.Create(ctx, req)
	providertest.AssertClass(t, err, provider.ErrKeyConflict)
}

func TestPaysimManualCapture(t *testing.T) {
	clockStart := time.Now()
	e := startSim(t, paysim.Options{})
	sink := e.sink(t, []byte("whsec_paysim"))
	p := e.create(t, offSessionReq("key-mc", "ORD-MC", 1000, provider.CaptureManual))
	if p.Status != provider.StatusAuthorized || p.Amount != 1000 || !strings.HasPrefix(p.ID, "pi_") {
		t.Fatalf("authorized: %+v", p)
	}
	if d := p.AuthorizationExpiresAt.Sub(clockStart); d < 7*24*time.Hour-time.Minute || d > 7*24*time.Hour+time.Minute {
		t.Fatalf("authorization expires at %s", p.AuthorizationExpiresAt)
	}
	if ev := byType(sink.waitTypes("payment_intent.amount_capturable_updated"), "payment_intent.amount_capturable_updated"); ev.Status != provider.StatusAuthorized || ev.PaymentID != p.ID || ev.Amount != 1000 {
		t.Fatalf("event %+v", ev)
	}
	capture := provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "key-mc/capture", Amount: 600, Currency: "EUR"}
	got, err := e.a.Capture(ctx, capture)
	if err != nil || got.Status != provider.StatusSucceeded || got.Amount != 600 {
		t.Fatalf("partial capture: %+v %v", got, err)
	}
	// A retry with the same key is replayed; one with another key finds it captured.
	if again, err := e.a.Capture(ctx, capture); err != nil || again.Amount != 600 {
		t.Fatalf("replayed capture: %+v %v", again, err)
	}
	capture.IdempotencyKey = "key-mc/capture-2"
	if again, err := e.a.Capture(ctx, capture); err != nil || again.Status != provider.StatusSucceeded || again.Amount != 600 {
		t.Fatalf("already captured: %+v %v", again, err)
	}
	if sc := e.sim.StripeCounters(); sc.Captures != 1 {
		t.Fatalf("captures %d", sc.Captures)
	}

	t.Run("checkout with manual capture is authorized when the payer pays", func(t *testing.T) {
		req := checkoutReq("key-mc-cs", "ORD-MC-CS", 2500)
		req.CaptureMethod = provider.CaptureManual
		p := e.create(t, req)
		if err := e.sim.StripePayer(p.ID, paysim.PayerPays, ""); err != nil {
			t.Fatal(err)
		}
		got, err := e.a.Get(ctx, p.ID)
		if err != nil || got.Status != provider.StatusAuthorized || got.Amount != 2500 || got.CheckoutID != p.ID {
			t.Fatalf("%+v %v", got, err)
		}
		// The session id is enough to capture: the adapter finds its PaymentIntent.
		done, err := e.a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "key-mc-cs/capture"})
		if err != nil || done.Status != provider.StatusSucceeded || done.Amount != 2500 || done.ID != got.ID {
			t.Fatalf("%+v %v", done, err)
		}
	})
	t.Run("capturing more than authorized is refused", func(t *testing.T) {
		p := e.create(t, offSessionReq("key-mc-big", "ORD-MC-BIG", 1000, provider.CaptureManual))
		_, err = e.a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "c", Amount: 1001, Currency: "EUR"})
		providertest.AssertClass(t, err, provider.ErrNonRetryable)
	})
}

func TestPaysimAuthorizationExpires(t *testing.T) {
	e := startSim(t, paysim.Options{})
	sink := e.sink(t, []byte("whsec_paysim"))
	p := e.create(t, offSessionReq("key-ae", "ORD-AE", 1000, provider.CaptureManual))
	if err := e.sim.SetOutcome(paysim.Stripe, p.ID, paysim.Script{Outcome: paysim.OutcomeExpire}); err != nil {
		t.Fatal(err)
	}
	ev := byType(sink.waitTypes("payment_intent.canceled"), "payment_intent.canceled")
	if ev.Status != provider.StatusExpired || ev.FailureCode != stripe.FailureAuthorizationExpired {
		t.Fatalf("event %+v", ev)
	}
	got, err := e.a.Get(ctx, p.ID)
	if err != nil || got.Status != provider.StatusExpired || got.FailureCode != stripe.FailureAuthorizationExpired {
		t.Fatalf("%+v %v", got, err)
	}
	_, err = e.a.Capture(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "late"})
	providertest.AssertClass(t, err, provider.ErrNonRetryable)
}

func TestPaysimCancel(t *testing.T) {
	e := startSim(t, paysim.Options{})
	sink := e.sink(t, []byte("whsec_paysim"))

	t.Run("an authorization is voided", func(t *testing.T) {
		p := e.create(t, offSessionReq("key-cn", "ORD-CN", 1000, provider.CaptureManual))
		req := provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "key-cn/cancel", Reason: "requested by customer"}
		got, err := e.a.Cancel(ctx, req)
		if err != nil || got.Status != provider.StatusCanceled {
			t.Fatalf("%+v %v", got, err)
		}
		req.IdempotencyKey = "key-cn/cancel-2"
		if again, err := e.a.Cancel(ctx, req); err != nil || again.Status != provider.StatusCanceled {
			t.Fatalf("already canceled: %+v %v", again, err)
		}
	})
	t.Run("an open checkout is canceled by expiring its session", func(t *testing.T) {
		p := e.create(t, checkoutReq("key-cn-cs", "ORD-CN-CS", 1000))
		got, err := e.a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "key-cn-cs/cancel"})
		if err != nil || got.Status != provider.StatusCanceled || got.CustomerAction != nil {
			t.Fatalf("%+v %v", got, err)
		}
		if read, err := e.a.Get(ctx, p.ID); err != nil || read.Status != provider.StatusExpired {
			t.Fatalf("read back %+v %v", read, err)
		}
		sink.waitTypes("checkout.session.expired")
	})
	t.Run("the PaymentIntent of an open checkout is canceled through its session", func(t *testing.T) {
		p := e.create(t, checkoutReq("key-cn-pi", "ORD-CN-PI", 1000))
		if err := e.sim.StripePayer(p.ID, paysim.PayerFails, "do_not_honor"); err != nil {
			t.Fatal(err)
		}
		failed, err := e.a.Get(ctx, p.ID)
		if err != nil || !strings.HasPrefix(failed.ID, "pi_") {
			t.Fatalf("%+v %v", failed, err)
		}
		got, err := e.a.Cancel(ctx, provider.ActionRequest{PaymentID: failed.ID, IdempotencyKey: "key-cn-pi/cancel"})
		if err != nil || got.Status != provider.StatusCanceled {
			t.Fatalf("%+v %v", got, err)
		}
		if read, err := e.a.Get(ctx, failed.ID); err != nil || read.Status != provider.StatusExpired {
			t.Fatalf("intent read back %+v %v", read, err)
		}
	})
	t.Run("a payment that took money is refused", func(t *testing.T) {
		p := e.create(t, offSessionReq("key-cn-paid", "ORD-CN-PAID", 1000, provider.CaptureAutomatic))
		_, err := e.a.Cancel(ctx, provider.ActionRequest{PaymentID: p.ID, IdempotencyKey: "key-cn-paid/cancel"})
		providertest.AssertClass(t, err, provider.ErrNonRetryable)
	})
}

func TestPaysimSessionExpiry(t *testing.T) {
	e := startSim(t, paysim.Options{})
	sink := e.sink(t, []byte("whsec_paysim"))
	req := checkoutReq("key-exp", "ORD-EXP", 1000)
	req.ExpiresAt = time.Now().Add(10 * time.Minute) // below Stripe's 30 minutes: raised
	p := e.create(t, req)
	if d := time.Until(p.CustomerAction.ExpiresAt); d < 30*time.Minute || d > time.Hour+time.Minute {
		t.Fatalf("session expires in %s", d)
	}
	ev := byType(sink.waitTypes("checkout.session.expired"), "checkout.session.expired")
	if ev.Status != provider.StatusExpired || ev.PaymentID != p.ID || ev.CheckoutID != p.ID || ev.MerchantReference != "ORD-EXP" {
		t.Fatalf("event %+v", ev)
	}
	if got, err := e.a.Get(ctx, p.ID); err != nil || got.Status != provider.StatusExpired || got.CustomerAction != nil {
		t.Fatalf("%+v %v", got, err)
	}

	t.Run("the payer abandons after a failed attempt", func(t *testing.T) {
		p := e.create(t, checkoutReq("key-ab", "ORD-AB", 1000))
		if err := e.sim.StripePayer(p.ID, paysim.PayerFails, ""); err != nil {
			t.Fatal(err)
		}
		if err := e.sim.StripePayer(p.ID, paysim.PayerAbandons, ""); err != nil {
			t.Fatal(err)
		}
		got, err := e.a.Get(ctx, p.ID)
		if err != nil || got.Status != provider.StatusExpired || !strings.HasPrefix(got.ID, "pi_") {
			t.Fatalf("%+v %v", got, err)
		}
		if byPI, err := e.a.Get(ctx, got.ID); err != nil || byPI.Status != provider.StatusExpired {
			t.Fatalf("intent %+v %v", byPI, err)
		}
	})
}

func TestPaysimDeclineWithCode(t *testing.T) {
	e := startSim(t, paysim.Options{})
	sink := e.sink(t, []byte("whsec_paysim"))

	t.Run("a declined checkout attempt is not final", func(t *testing.T) {
		p := e.create(t, checkoutReq("key-dc", "ORD-DC", 1000))
		if err := e.sim.StripePayer(p.ID, paysim.PayerFails, "insufficient_funds"); err != nil {
			t.Fatal(err)
		}
		got, err := e.a.Get(ctx, p.ID)
		if err != nil || got.Status != provider.StatusPending || got.FailureCode != "insufficient_funds" || got.CustomerAction == nil || got.CheckoutID != p.ID {
			t.Fatalf("%+v %v", got, err)
		}
		ev := byType(sink.waitTypes("payment_intent.payment_failed"), "payment_intent.payment_failed")
		if ev.Status != provider.StatusPending || ev.FailureCode != "insufficient_funds" || ev.PaymentID != got.ID {
			t.Fatalf("event %+v", ev)
		}
		// The payer tries another card.
		if err := e.sim.StripePayer(p.ID, paysim.PayerPays, ""); err != nil {
			t.Fatal(err)
		}
		if got, err := e.a.Get(ctx, p.ID); err != nil || got.Status != provider.StatusSucceeded || got.FailureCode != "" {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("an off-session decline fails the create with the decline code", func(t *testing.T) {
		req := offSessionReq("key-dc-off", "ORD-DC-OFF", 1000, provider.CaptureAutomatic)
		req.Metadata = map[string]string{paysim.MetaOutcome: "fail", paysim.MetaFailure: "expired_card"}
		p, err := e.a.Create(ctx, req)
		providertest.AssertClass(t, err, provider.ErrNonRetryable)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Code != "expired_card" || pe.StatusCode != http.StatusPaymentRequired {
			t.Fatalf("err %+v", err)
		}
		if !strings.HasPrefix(p.ID, "pi_") || p.FailureCode != "expired_card" {
			t.Fatalf("the declined PaymentIntent: %+v", p)
		}
		// Stripe stores the 402: a retry with the key gets the same decline.
		_, err = e.a.Create(ctx, req)
		providertest.AssertClass(t, err, provider.ErrNonRetryable)
		if sc := e.sim.StripeCounters(); sc.ReplayedErrors != 1 {
			t.Fatalf("stripe counters %+v", sc)
		}
	})
}

func TestPaysimRotationTwoSecrets(t *testing.T) {
	e := startSim(t, paysim.Options{})
	old, rolled := []byte("whsec_old"), []byte("whsec_new")
	sink := e.sink(t, old, rolled)
	p := e.create(t, offSessionReq("key-rot", "ORD-ROT", 1000, provider.CaptureAutomatic))
	sink.waitTypes("payment_intent.succeeded")
	sink.mu.Lock()
	h := sink.headers[0]
	sink.mu.Unlock()
	if strings.Count(h, "v1=") != 2 {
		t.Fatalf("header %q does not carry one signature per secret", h)
	}
	raw := e.sim.Events(paysim.Stripe)[0].Raw
	// A receiver that knows only one of the secrets accepts it.
	for _, secrets := range [][][]byte{{old}, {rolled}, {[]byte("whsec_other"), rolled}} {
		if _, err := e.a.VerifyWebhook(ctx, http.Header{"Stripe-Signature": {h}}, raw, secrets, 5*time.Minute, time.Now()); err != nil {
			t.Errorf("secrets %q: %v", secrets, err)
		}
	}
	if _, err := e.a.VerifyWebhook(ctx, http.Header{"Stripe-Signature": {h}}, raw, [][]byte{[]byte("whsec_other")}, 5*time.Minute, time.Now()); !errors.Is(err, provider.ErrNoMatchingSignature) {
		t.Fatalf("unknown secret: %v", err)
	}
	if ev := byType(sink.snapshot(), "payment_intent.succeeded"); ev.PaymentID != p.ID {
		t.Fatalf("%+v", ev)
	}
}

// TestPaysimWebhookRetriedUntilAcknowledged: an endpoint that fails is retried on
// Stripe's schedule (scaled) until it answers 2xx.
func TestPaysimWebhookRetriedUntilAcknowledged(t *testing.T) {
	e := startSim(t, paysim.Options{TimeFactor: 0.00001})
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls < 4 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	if err := e.sim.SetWebhookTarget(paysim.Stripe, srv.URL); err != nil {
		t.Fatal(err)
	}
	e.create(t, offSessionReq("key-retry", "ORD-RETRY", 1000, provider.CaptureAutomatic))
	fixture.Eventually(t, fixture.Timeout, "delivery", func() bool { return e.sim.Counters().WebhooksByProvider[paysim.Stripe].Delivered == 1 })
	if w := e.sim.Counters().WebhooksByProvider[paysim.Stripe]; w.Attempts != 4 || w.Failed != 3 {
		t.Fatalf("webhook counters %+v", w)
	}
	var total time.Duration
	for _, d := range paysim.RetrySchedule(paysim.Stripe) {
		total += d
	}
	if total < 60*time.Hour || total > 72*time.Hour {
		t.Fatalf("Stripe retries for %s, not up to three days", total)
	}
}

func TestPaysimRefunds(t *testing.T) {
	e := startSim(t, paysim.Options{})
	sink := e.sink(t, []byte("whsec_paysim"))
	p := e.create(t, offSessionReq("key-rf", "ORD-RF", 1000, provider.CaptureAutomatic))
	req := provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "key-rf/refund-1", Reference: "RF-1", Amount: 300, Currency: "EUR", Reason: "Requested by customer"}
	r, err := e.a.CreateRefund(ctx, req)
	if err != nil || r.Status != provider.RefundSucceeded || r.Amount != 300 || r.PaymentID != p.ID || r.Reference != "RF-1" || !strings.HasPrefix(r.ID, "re_") {
		t.Fatalf("%+v %v", r, err)
	}
	if again, err := e.a.CreateRefund(ctx, req); err != nil || again.ID != r.ID {
		t.Fatalf("replay %+v %v", again, err)
	}
	if got, err := e.a.GetRefund(ctx, p.ID, r.ID); err != nil || got != r {
		t.Fatalf("get %+v %v", got, err)
	}
	if _, err := e.a.GetRefund(ctx, p.ID, "re_missing"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("missing refund: %v", err)
	}
	if _, err := e.a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "key-rf/refund-2", Reference: "RF-2", Amount: 200, Currency: "EUR", Reason: "damaged"}); err != nil {
		t.Fatal(err)
	}
	if found, err := e.a.FindRefund(ctx, p.ID, "RF-1"); err != nil || found.ID != r.ID {
		t.Fatalf("find %+v %v", found, err)
	}
	if _, err := e.a.FindRefund(ctx, p.ID, "RF-9"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("find missing: %v", err)
	}
	got, err := e.a.Get(ctx, p.ID)
	if err != nil || got.Status != provider.StatusRefund || got.RefundedTotal != 500 || got.Amount != 1000 {
		t.Fatalf("payment after refunds %+v %v", got, err)
	}
	_, err = e.a.CreateRefund(ctx, provider.RefundRequest{PaymentID: p.ID, IdempotencyKey: "key-rf/refund-3", Reference: "RF-3", Amount: 600, Currency: "EUR"})
	providertest.AssertClass(t, err, provider.ErrNonRetryable)

	fixture.Eventually(t, fixture.Timeout, "both charge.refunded", func() bool {
		n := 0
		for _, ev := range sink.snapshot() {
			if ev.Type == "charge.refunded" {
				n++
			}
		}
		return n == 2
	})
	var totals []int64
	for _, ev := range sink.snapshot() {
		switch ev.Type {
		case "charge.refunded":
			if ev.Status != provider.StatusRefund || ev.PaymentID != p.ID || ev.MerchantReference != "ORD-RF" {
				t.Errorf("charge.refunded %+v", ev)
			}
			totals = append(totals, ev.RefundedTotal)
		case "refund.created":
			if ev.Refund == nil || ev.Refund.PaymentID != p.ID || ev.PaymentID != p.ID {
				t.Errorf("refund.created %+v", ev)
			}
		}
	}
	sort.Slice(totals, func(i, j int) bool { return totals[i] < totals[j] })
	if len(totals) != 2 || totals[0] != 300 || totals[1] != 500 {
		t.Errorf("cumulative refunded totals %v", totals)
	}

	t.Run("a failed refund", func(t *testing.T) {
		if err := e.sim.StripeFailRefund(r.ID, "expired_or_canceled_card"); err != nil {
			t.Fatal(err)
		}
		ev := byType(sink.waitTypes("refund.failed"), "refund.failed")
		if ev.Refund == nil || ev.Refund.Status != provider.RefundFailed || ev.Refund.FailureCode != "expired_or_canceled_card" {
			t.Fatalf("%+v", ev)
		}
		if got, err := e.a.GetRefund(ctx, p.ID, r.ID); err != nil || got.Status != provider.RefundFailed {
			t.Fatalf("%+v %v", got, err)
		}
		if got, err := e.a.Get(ctx, p.ID); err != nil || got.RefundedTotal != 200 {
			t.Fatalf("%+v %v", got, err)
		}
	})
}

// TestPaysimRefundOfAnotherPaymentIsNotThisOnes: GetRefund reads a refund of
// the payment paywarden recorded; a refund of another PaymentIntent is never
// that payment's (issue 22 point 14): ErrNotFound, whether the payment is
// recorded by its PaymentIntent or by its Checkout Session, so the Refund is
// never settled with someone else's money.
func TestPaysimRefundOfAnotherPaymentIsNotThisOnes(t *testing.T) {
	e := startSim(t, paysim.Options{})
	session, paid := e.paidCheckout(t, "key-own", "ORD-OWN")
	other := e.create(t, offSessionReq("key-other", "ORD-OTHER", 1000, provider.CaptureAutomatic))
	refund := func(paymentID, ref string) provider.Refund {
		t.Helper()
		r, err := e.a.CreateRefund(ctx, provider.RefundRequest{PaymentID: paymentID, IdempotencyKey: "key-" + ref, Reference: ref, Amount: 100, Currency: "EUR"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	own, foreign := refund(session.ID, "RF-OWN"), refund(other.ID, "RF-OTHER")
	for name, id := range map[string]string{"recorded by its session": session.ID, "recorded by its PaymentIntent": paid.ID} {
		t.Run(name, func(t *testing.T) {
			if got, err := e.a.GetRefund(ctx, id, own.ID); err != nil || got.ID != own.ID || got.Status != provider.RefundSucceeded {
				t.Fatalf("its own refund: %+v %v", got, err)
			}
			got, err := e.a.GetRefund(ctx, id, foreign.ID)
			providertest.AssertClass(t, err, provider.ErrNotFound)
			if got != (provider.Refund{}) {
				t.Fatalf("another payment's refund was answered: %+v", got)
			}
		})
	}
}

func TestPaysimDispute(t *testing.T) {
	e := startSim(t, paysim.Options{})
	sink := e.sink(t, []byte("whsec_paysim"))
	p := e.create(t, offSessionReq("key-dp", "ORD-DP", 1000, provider.CaptureAutomatic))
	if err := e.sim.Dispute(paysim.Stripe, p.ID, "product_not_received"); err != nil {
		t.Fatal(err)
	}
	ev := byType(sink.waitTypes("charge.dispute.created"), "charge.dispute.created")
	if ev.Status != provider.StatusDispute || ev.PaymentID != p.ID || ev.Amount != 1000 || ev.FailureCode != "product_not_received" {
		t.Fatalf("%+v", ev)
	}
}

// TestPaysimDisputeOutcomes: Stripe withdraws the disputed funds when a
// dispute opens (charge.dispute.funds_withdrawn), reinstates them when the
// merchant wins (charge.dispute.funds_reinstated), and closes the dispute
// with its status (charge.dispute.closed: won or lost).
func TestPaysimDisputeOutcomes(t *testing.T) {
	for _, won := range []bool{true, false} {
		t.Run(fmt.Sprintf("won=%v", won), func(t *testing.T) {
			e := startSim(t, paysim.Options{})
			sink := e.sink(t, []byte("whsec_paysim"))
			p := e.create(t, offSessionReq(fmt.Sprintf("key-dpo-%v", won), "ORD-DPO", 1000, provider.CaptureAutomatic))
			if err := e.sim.Dispute(paysim.Stripe, p.ID, "fraudulent"); err != nil {
				t.Fatal(err)
			}
			if err := e.sim.StripeCloseDispute(p.ID, won); err != nil {
				t.Fatal(err)
			}
			want := provider.DisputeLost
			if won {
				want = provider.DisputeWon
			}
			evs := sink.waitTypes("charge.dispute.funds_withdrawn", "charge.dispute.closed")
			if ev := byType(evs, "charge.dispute.funds_withdrawn"); ev.Status != provider.StatusDispute || ev.DisputeOutcome != "" {
				t.Errorf("funds withdrawn: %+v, want an open dispute", ev)
			}
			if ev := byType(evs, "charge.dispute.closed"); ev.Status != provider.StatusDispute || ev.PaymentID != p.ID || ev.DisputeOutcome != want {
				t.Errorf("closed: %+v, want outcome %q", ev, want)
			}
			if err := e.sim.StripeCloseDispute(p.ID, won); err == nil {
				t.Error("a closed dispute was closed again")
			}
		})
	}
}

func TestPaysimFindByMerchantReference(t *testing.T) {
	e := startSim(t, paysim.Options{})
	p := e.create(t, offSessionReq("key-find", "ORD-'FIND'", 1000, provider.CaptureAutomatic))
	e.sim.SetStripeSearchLag(time.Hour)
	_, err := e.a.FindByMerchantReference(ctx, "ORD-'FIND'")
	providertest.AssertClass(t, err, provider.ErrNotFound) // not indexed yet: not "no payment"
	e.sim.SetStripeSearchLag(0)
	got, err := e.a.FindByMerchantReference(ctx, "ORD-'FIND'")
	if err != nil || got.ID != p.ID || got.Status != provider.StatusSucceeded {
		t.Fatalf("%+v %v", got, err)
	}
	if _, err := e.a.FindByMerchantReference(ctx, "ORD-'FIND"); !errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("a prefix matched: %v", err)
	}
	// Another attempt at the order (a new key): two PaymentIntents carry the
	// reference, and which is the asker's cannot be told.
	again := e.create(t, offSessionReq("key-find-again", "ORD-'FIND'", 1000, provider.CaptureAutomatic))
	_, err = e.a.FindByMerchantReference(ctx, "ORD-'FIND'")
	providertest.AssertClass(t, err, provider.ErrNonRetryable)
	if err == nil || !strings.Contains(err.Error(), p.ID) || !strings.Contains(err.Error(), again.ID) {
		t.Errorf("the refusal does not name both PaymentIntents: %v", err)
	}
}

// TestPaysimListEventsPages walks the events API back to since, page by page, and
// sees every event once.
func TestPaysimListEventsPages(t *testing.T) {
	e := startSim(t, paysim.Options{})
	since := time.Now().Add(-time.Minute)
	for i := 0; i < 40; i++ {
		p := e.create(t, offSessionReq(fmt.Sprintf("key-ev-%d", i), fmt.Sprintf("ORD-EV-%d", i), 1000, provider.CaptureAutomatic))
		if err := e.sim.Refund(paysim.Stripe, p.ID, 0); err != nil { // refund.created + charge.refunded
			t.Fatal(err)
		}
	}
	want := len(e.sim.Events(paysim.Stripe))
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		page, err := e.a.ListEvents(ctx, since, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, ev := range page.Events {
			if seen[ev.ID] {
				t.Fatalf("event %s twice", ev.ID)
			}
			seen[ev.ID] = true
		}
		if !page.HasMore {
			if page.NextCursor != "" {
				t.Fatal("a cursor without more")
			}
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != want || pages != 2 || want <= 100 {
		t.Fatalf("saw %d of %d events in %d pages", len(seen), want, pages)
	}
	if page, err := e.a.ListEvents(ctx, time.Now().Add(time.Hour), ""); err != nil || len(page.Events) != 0 {
		t.Fatalf("events from the future: %+v %v", page, err)
	}
}

// TestPaysimUnknownParameterIsRefused: paysim answers a misspelt parameter like
// Stripe, so a wire mistake fails against paysim too.
func TestPaysimUnknownParameterIsRefused(t *testing.T) {
	e := startSim(t, paysim.Options{})
	resp, err := http.PostForm(e.srv.URL+"/stripe/v1/payment_intents?", map[string][]string{"amount": {"100"}, "currency": {"eur"}, "merchant_referense": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/stripe/v1/payment_intents", strings.NewReader("amount=100&currency=eur&merchant_referense=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+simKey)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "merchant_referense") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
