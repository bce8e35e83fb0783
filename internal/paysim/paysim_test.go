package paysim_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
)

func TestIdempotentCreateReplaysAndCreatesOnePayment(t *testing.T) {
	for _, name := range allProviders {
		t.Run(name, func(t *testing.T) {
			e := start(t, paysim.Options{})
			first := e.create(t, name, "key-1", "ref-1", 1999, nil)
			second := e.create(t, name, "key-1", "ref-1", 1999, nil)
			if first.ID == "" || first.ID != second.ID {
				t.Fatalf("same key gave %q and %q", first.ID, second.ID)
			}
			c := e.sim.Counters()
			if c.CreatesByKey[name+"/key-1"] != 2 || c.PaymentsCreatedByProvider[name] != 1 || c.PaymentsCreated != 1 {
				t.Fatalf("counters: creates by key %v, created %d", c.CreatesByKey, c.PaymentsCreated)
			}
			if first.MerchantReference != "ref-1" || first.Amount != 1999 || first.Currency != "USD" {
				t.Errorf("payment = %+v", first)
			}
		})
	}
}

// TestIdempotencyKeyReusedForAnotherRequestIsRejected: the simulator refuses a key
// reused with another body; KukoPay's adapter reads that 422 idempotency_error as a
// key conflict of the call (SPEC §12.1), the others as a refusal.
func TestIdempotencyKeyReusedForAnotherRequestIsRejected(t *testing.T) {
	for _, name := range allProviders {
		t.Run(name, func(t *testing.T) {
			e := start(t, paysim.Options{})
			e.create(t, name, "key-1", "ref-1", 1999, nil)
			_, err := e.p[name].Create(context.Background(), provider.CreateRequest{IdempotencyKey: "key-1", MerchantReference: "ref-1", Amount: 5, Currency: "USD"})
			want := provider.ErrNonRetryable
			if name == paysim.KukoPay {
				want = provider.ErrKeyConflict
			}
			if !errors.Is(err, want) {
				t.Fatalf("err = %v, want class %v", err, want)
			}
			if c := e.sim.Counters(); c.PaymentsCreated != 1 {
				t.Fatalf("created %d", c.PaymentsCreated)
			}
		})
	}
}

func TestKukoPayOutTradeNoIsIdempotentBeyondTheKey(t *testing.T) {
	e := start(t, paysim.Options{})
	a := e.create(t, paysim.KukoPay, "key-1", "ORD-1", 1000, nil)
	b := e.create(t, paysim.KukoPay, "key-2", "ORD-1", 1000, nil)
	if a.ID != b.ID || e.sim.Counters().PaymentsCreated != 1 {
		t.Fatalf("a=%s b=%s", a.ID, b.ID)
	}
}

func TestIdempotencyWindowExpires(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC))
	e := start(t, paysim.Options{Now: clk.Now, IdempotencyWindow: time.Hour})
	a := e.create(t, paysim.Generic, "key-1", "ref-1", 1000, nil)
	clk.Step(2 * time.Hour)
	b := e.create(t, paysim.Generic, "key-1", "ref-1", 1000, nil)
	if a.ID == b.ID || e.sim.Counters().PaymentsCreated != 2 {
		t.Fatal("an expired key must not replay")
	}
}

// PayPal keeps a create's PayPal-Request-Id for 6 hours (Orders v2 reference,
// "Create order", PayPal-Request-Id), not for paysim's generic 24h.
func TestPayPalCreateKeyReplaysForSixHours(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC))
	e := start(t, paysim.Options{Now: clk.Now})
	a := e.create(t, paysim.PayPal, "key-1", "ref-1", 1000, nil)
	clk.Step(6*time.Hour - time.Minute)
	if b := e.create(t, paysim.PayPal, "key-1", "ref-1", 1000, nil); b.ID != a.ID {
		t.Fatalf("inside 6h the key must replay: %s then %s", a.ID, b.ID)
	}
	clk.Step(2 * time.Minute)
	if c := e.create(t, paysim.PayPal, "key-1", "ref-1", 1000, nil); c.ID == a.ID || e.sim.Counters().PaymentsCreated != 2 {
		t.Fatalf("past 6h the key is forgotten: got %s again", c.ID)
	}
}

// TestLostResponseThenRetryWithSameKeyIsNoDoubleCharge is the scenario §2.3 exists for:
// the create took effect, the answer was lost, the retry must not create a second payment.
func TestLostResponseThenRetryWithSameKeyIsNoDoubleCharge(t *testing.T) {
	for _, name := range allProviders {
		t.Run(name, func(t *testing.T) {
			e := start(t, paysim.Options{})
			// PayPal needs a token first, so the fault hits the create and not the token call.
			if _, err := e.p[name].Get(context.Background(), "warm-up"); !errors.Is(err, provider.ErrNotFound) {
				t.Fatalf("warm-up: %v", err)
			}
			e.sim.SetFaults(paysim.Faults{LostResponseRate: 1})
			_, err := e.p[name].Create(context.Background(), createReq("k", "r", 100, nil))
			if !errors.Is(err, provider.ErrRetryable) {
				t.Fatalf("lost response must be retryable, got %v", err)
			}
			e.sim.SetFaults(paysim.Faults{})
			p := e.create(t, name, "k", "r", 100, nil)
			c := e.sim.Counters()
			if c.PaymentsCreated != 1 || c.CreatesByKey[name+"/k"] != 2 || c.APIFaults.LostResponses != 1 {
				t.Fatalf("counters %+v", c)
			}
			if v, ok := e.sim.Payment(name, p.ID); !ok || v.MerchantReference != "r" {
				t.Fatalf("payment %q not the one created", p.ID)
			}
		})
	}
}

func TestScriptedOutcomes(t *testing.T) {
	type want struct {
		status   provider.Status
		mismatch bool
	}
	outcomes := map[paysim.Outcome]map[string]want{
		paysim.OutcomeSucceed:    {paysim.KukoPay: {provider.StatusSucceeded, false}, paysim.PayPal: {provider.StatusSucceeded, false}, paysim.Generic: {provider.StatusSucceeded, false}},
		paysim.OutcomeFail:       {paysim.KukoPay: {provider.StatusFailed, false}, paysim.PayPal: {provider.StatusFailed, false}, paysim.Generic: {provider.StatusFailed, false}},
		paysim.OutcomeExpire:     {paysim.KukoPay: {provider.StatusExpired, false}, paysim.PayPal: {provider.StatusExpired, false}, paysim.Generic: {provider.StatusExpired, false}},
		paysim.OutcomeProcessing: {paysim.KukoPay: {provider.StatusProcessing, false}, paysim.PayPal: {provider.StatusProcessing, false}, paysim.Generic: {provider.StatusProcessing, false}},
		// The generic API has no pending state: a queued job is "processing".
		paysim.OutcomePending:  {paysim.KukoPay: {provider.StatusPending, false}, paysim.PayPal: {provider.StatusPending, false}, paysim.Generic: {provider.StatusProcessing, false}},
		paysim.OutcomeMismatch: {paysim.KukoPay: {provider.StatusSucceeded, true}, paysim.PayPal: {provider.StatusSucceeded, true}, paysim.Generic: {provider.StatusSucceeded, true}},
		paysim.OutcomeUnknown:  {paysim.KukoPay: {provider.StatusUnknown, false}, paysim.PayPal: {provider.StatusUnknown, false}, paysim.Generic: {provider.StatusUnknown, false}},
	}
	// Each outcome is scripted three ways: metadata (not for PayPal, whose orders carry
	// none), an amount rule, and a control call on an existing payment.
	for outcome, perProvider := range outcomes {
		for _, name := range allProviders {
			for _, how := range []string{"metadata", "amount rule", "control call"} {
				if how == "metadata" && name == paysim.PayPal {
					continue
				}
				w := perProvider[name]
				t.Run(fmt.Sprintf("%s by %s on %s is %s", outcome, how, name, w.status), func(t *testing.T) {
					e := start(t, paysim.Options{TimeFactor: 0.001})
					var meta map[string]string
					switch how {
					case "metadata":
						meta = map[string]string{paysim.MetaOutcome: string(outcome), paysim.MetaAfter: "1s"}
					case "amount rule":
						if err := e.sim.Script(paysim.Rule{Amount: 4242, Script: paysim.Script{Outcome: outcome, After: time.Second}}); err != nil {
							t.Fatal(err)
						}
					}
					p := e.create(t, name, "k", "ref", 4242, meta)
					if how == "control call" {
						if err := e.sim.SetOutcome(name, p.ID, paysim.Script{Outcome: outcome}); err != nil {
							t.Fatal(err)
						}
					}
					var got provider.Payment
					eventually(t, "status "+string(w.status), func() bool {
						var err error
						got, err = e.p[name].Get(context.Background(), p.ID)
						return err == nil && got.Status == w.status
					})
					if w.mismatch != (got.Amount != 4242) {
						t.Fatalf("amount %d (mismatch expected: %v)", got.Amount, w.mismatch)
					}
					if got.Status == provider.StatusFailed && got.FailureCode == "" {
						t.Error("failure without a code")
					}
				})
			}
		}
	}
}

func TestWebhooksAreSignedVerifiedAndParsed(t *testing.T) {
	for _, name := range allProviders {
		t.Run(name, func(t *testing.T) {
			e := start(t, paysim.Options{TimeFactor: 0.001})
			secret := []byte("s3cret-" + name)
			if name == paysim.Generic {
				secret = []byte("whsec_c2VjcmV0LWtleS1ieXRlcw==")
			}
			rcv := newReceiver(t, e.p[name], [][]byte{secret}, nil)
			if err := e.sim.SetWebhookTarget(name, rcv.srv.URL, secret); err != nil {
				t.Fatal(err)
			}
			p := e.create(t, name, "k", "ref-w", 1500, nil)
			if err := e.sim.SetOutcome(name, p.ID, paysim.Script{Outcome: paysim.OutcomeSucceed}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "delivery", func() bool { return e.sim.Counters().Webhooks.Delivered == 1 })
			d := rcv.deliveries()
			if len(d) != 1 {
				t.Fatalf("%d deliveries", len(d))
			}
			if d[0].verifyErr != nil || d[0].parseErr != nil {
				t.Fatalf("verify: %v, parse: %v", d[0].verifyErr, d[0].parseErr)
			}
			ev := d[0].event
			if ev.Status != provider.StatusSucceeded || !ev.Supported || ev.PaymentID != p.ID || ev.MerchantReference != "ref-w" || ev.Amount != 1500 {
				t.Fatalf("event %+v", ev)
			}
			// The events list holds the same object that was delivered.
			evs := e.sim.Events(name)
			if len(evs) != 1 || string(evs[0].Raw) != string(d[0].body) || evs[0].ID != ev.ID {
				t.Fatal("events list differs from the delivered event")
			}
			// A receiver with another secret rejects it.
			_, err := e.p[name].VerifyWebhook(context.Background(), d[0].header, d[0].body, [][]byte{[]byte("other")}, 5*time.Minute, time.Now())
			if name != paysim.PayPal && !errors.Is(err, provider.ErrInvalidSignature) {
				t.Fatalf("wrong secret accepted: %v", err)
			}
		})
	}
}

func TestRotationSignsWithEverySecret(t *testing.T) {
	for _, name := range []string{paysim.KukoPay, paysim.Generic} {
		t.Run(name, func(t *testing.T) {
			e := start(t, paysim.Options{TimeFactor: 0.001})
			old, cur := []byte("whsec_b2xkLXNlY3JldA=="), []byte("whsec_bmV3LXNlY3JldA==")
			rcv := newReceiver(t, e.p[name], [][]byte{old}, nil)
			if err := e.sim.SetWebhookTarget(name, rcv.srv.URL, old, cur); err != nil {
				t.Fatal(err)
			}
			p := e.create(t, name, "k", "r", 100, map[string]string{paysim.MetaOutcome: "succeed"})
			_ = p
			eventually(t, "delivery", func() bool { return rcv.count() == 1 })
			d := rcv.deliveries()[0]
			for _, secrets := range [][][]byte{{old}, {cur}, {cur, old}} {
				if _, err := e.p[name].VerifyWebhook(context.Background(), d.header, d.body, secrets, 5*time.Minute, time.Now()); err != nil {
					t.Errorf("secrets %q: %v", secrets, err)
				}
			}
		})
	}
}

func TestRetryScheduleRunsToExhaustion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts int
	}{{paysim.KukoPay, 6}, {paysim.Generic, 8}, {paysim.PayPal, 25}} {
		t.Run(fmt.Sprintf("%s tries %d times", tc.name, tc.attempts), func(t *testing.T) {
			if got := len(paysim.RetrySchedule(tc.name)); got != tc.attempts {
				t.Fatalf("schedule has %d attempts", got)
			}
			if tc.name == paysim.PayPal {
				total := time.Duration(0)
				for _, d := range paysim.RetrySchedule(tc.name) {
					total += d
				}
				if total < 70*time.Hour || total > 74*time.Hour {
					t.Fatalf("PayPal schedule spans %v, want about 3 days", total)
				}
				return // 3 days is too long to run even scaled; the span is what matters
			}
			e := start(t, paysim.Options{TimeFactor: 0.00002})
			rcv := newReceiver(t, e.p[tc.name], nil, func(int) int { return http.StatusInternalServerError })
			if err := e.sim.SetWebhookTarget(tc.name, rcv.srv.URL); err != nil {
				t.Fatal(err)
			}
			e.create(t, tc.name, "k", "r", 100, map[string]string{paysim.MetaOutcome: "fail"})
			eventually(t, "exhaustion", func() bool { return e.sim.Counters().Webhooks.Exhausted == 1 })
			w := e.sim.Counters().WebhooksByProvider[tc.name]
			if w.Attempts != tc.attempts || w.Failed != tc.attempts || w.Delivered != 0 || rcv.count() != tc.attempts {
				t.Fatalf("counters %+v, received %d", w, rcv.count())
			}
			d := rcv.deliveries()
			ids := map[string]bool{}
			for i := range d {
				ids[d[i].event.ID] = true
				if i > 0 && d[i].at.Before(d[i-1].at) {
					t.Fatal("attempts out of order")
				}
			}
			if len(ids) != 1 {
				t.Fatalf("retries must keep the event id, got %v", ids)
			}
		})
	}
}

func TestRedirectIsAFailedDeliveryAndIsNotFollowed(t *testing.T) {
	e := start(t, paysim.Options{TimeFactor: 0.0001})
	rcv := newReceiver(t, e.p[paysim.KukoPay], nil, func(n int) int {
		if n == 0 {
			return http.StatusFound
		}
		return http.StatusOK
	})
	if err := e.sim.SetWebhookTarget(paysim.KukoPay, rcv.srv.URL); err != nil {
		t.Fatal(err)
	}
	e.create(t, paysim.KukoPay, "k", "r", 100, map[string]string{paysim.MetaOutcome: "succeed"})
	eventually(t, "delivery", func() bool { return e.sim.Counters().Webhooks.Delivered == 1 })
	w := e.sim.Counters().Webhooks
	// Following the redirect would have produced a request to /moved.
	if w.Attempts != 2 || w.Failed != 1 || rcv.count() != 2 {
		t.Fatalf("counters %+v, received %d", w, rcv.count())
	}
}

func TestSlowReceiverTimesOut(t *testing.T) {
	block := make(chan struct{})
	e := start(t, paysim.Options{TimeFactor: 0.0001, DeliveryTimeout: 50 * time.Millisecond})
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client hanging up.
		_, _ = io.Copy(io.Discard, r.Body)
		if n.Add(1) == 1 {
			select {
			case <-block:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	defer close(block) // before srv.Close, which waits for the handler
	if err := e.sim.SetWebhookTarget(paysim.Generic, srv.URL); err != nil {
		t.Fatal(err)
	}
	e.create(t, paysim.Generic, "k", "r", 100, map[string]string{paysim.MetaOutcome: "succeed"})
	eventually(t, "delivery", func() bool { return e.sim.Counters().Webhooks.Delivered == 1 })
	if w := e.sim.Counters().Webhooks; w.Failed != 1 || w.Attempts != 2 {
		t.Fatalf("counters %+v", w)
	}
}

func TestWebhookFaultsAreCounted(t *testing.T) {
	t.Run("dropped events are never sent but stay in the events list", func(t *testing.T) {
		e := start(t, paysim.Options{TimeFactor: 0.0001})
		rcv := newReceiver(t, e.p[paysim.Generic], nil, nil)
		_ = e.sim.SetWebhookTarget(paysim.Generic, rcv.srv.URL)
		e.sim.SetFaults(paysim.Faults{DropRate: 1})
		p := e.create(t, paysim.Generic, "k", "r", 100, map[string]string{paysim.MetaOutcome: "succeed"})
		eventually(t, "drop", func() bool { return e.sim.Counters().Webhooks.Dropped == 1 })
		page, err := e.p[paysim.Generic].ListEvents(context.Background(), time.Now().Add(-time.Hour), "")
		if err != nil || len(page.Events) != 1 || page.Events[0].PaymentID != p.ID {
			t.Fatalf("backfill must find the dropped event: %+v %v", page, err)
		}
		if rcv.count() != 0 {
			t.Fatal("dropped event was sent")
		}
	})
	t.Run("duplicated events arrive twice with one id", func(t *testing.T) {
		e := start(t, paysim.Options{TimeFactor: 0.0001})
		rcv := newReceiver(t, e.p[paysim.KukoPay], nil, nil)
		_ = e.sim.SetWebhookTarget(paysim.KukoPay, rcv.srv.URL)
		e.sim.SetFaults(paysim.Faults{DuplicateRate: 1})
		e.create(t, paysim.KukoPay, "k", "r", 100, map[string]string{paysim.MetaOutcome: "succeed"})
		eventually(t, "two copies", func() bool { return rcv.count() == 2 })
		d := rcv.deliveries()
		if d[0].event.ID != d[1].event.ID || d[0].event.ID == "" {
			t.Fatal("copies differ")
		}
		if w := e.sim.Counters().Webhooks; w.Duplicated != 1 || w.Delivered != 1 || w.Attempts != 2 {
			t.Fatalf("counters %+v", w)
		}
	})
	t.Run("reordered events arrive after the next one", func(t *testing.T) {
		e := start(t, paysim.Options{TimeFactor: 0.0001, Faults: paysim.Faults{ReorderRate: 1, ReorderHold: time.Hour}})
		rcv := newReceiver(t, e.p[paysim.KukoPay], nil, nil)
		_ = e.sim.SetWebhookTarget(paysim.KukoPay, rcv.srv.URL)
		first := e.create(t, paysim.KukoPay, "k1", "r1", 100, map[string]string{paysim.MetaOutcome: "succeed"})
		eventually(t, "first event", func() bool { return len(e.sim.Events(paysim.KukoPay)) == 1 })
		second := e.create(t, paysim.KukoPay, "k2", "r2", 100, map[string]string{paysim.MetaOutcome: "fail"})
		eventually(t, "both deliveries", func() bool { return rcv.count() == 2 })
		d := rcv.deliveries()
		if d[0].event.PaymentID != second.ID || d[1].event.PaymentID != first.ID {
			t.Fatalf("order: %s, %s", d[0].event.PaymentID, d[1].event.PaymentID)
		}
		eventually(t, "both acknowledged", func() bool { return e.sim.Counters().Webhooks.Delivered == 2 })
		if w := e.sim.Counters().Webhooks; w.Reordered != 1 {
			t.Fatalf("counters %+v", w)
		}
	})
	t.Run("a held event is released by the hold timer", func(t *testing.T) {
		e := start(t, paysim.Options{TimeFactor: 0.0001, Faults: paysim.Faults{ReorderRate: 1, ReorderHold: time.Second}})
		rcv := newReceiver(t, e.p[paysim.KukoPay], nil, nil)
		_ = e.sim.SetWebhookTarget(paysim.KukoPay, rcv.srv.URL)
		e.create(t, paysim.KukoPay, "k1", "r1", 100, map[string]string{paysim.MetaOutcome: "succeed"})
		eventually(t, "release", func() bool { return rcv.count() == 1 })
	})
	t.Run("delayed events still arrive", func(t *testing.T) {
		e := start(t, paysim.Options{TimeFactor: 0.001, Faults: paysim.Faults{DelayRate: 1, WebhookDelay: 50 * time.Second}})
		rcv := newReceiver(t, e.p[paysim.Generic], nil, nil)
		_ = e.sim.SetWebhookTarget(paysim.Generic, rcv.srv.URL)
		start := time.Now()
		e.create(t, paysim.Generic, "k", "r", 100, map[string]string{paysim.MetaOutcome: "succeed"})
		eventually(t, "delivery", func() bool { return rcv.count() == 1 })
		if time.Since(start) < 50*time.Millisecond {
			t.Fatal("not delayed")
		}
		eventually(t, "acknowledged", func() bool { return e.sim.Counters().Webhooks.Delivered == 1 })
		if w := e.sim.Counters().Webhooks; w.Delayed != 1 {
			t.Fatalf("counters %+v", w)
		}
	})
}

func TestAPIFaultsAreClassifiedAndCounted(t *testing.T) {
	for _, name := range allProviders {
		t.Run(name, func(t *testing.T) {
			e := start(t, paysim.Options{})
			p := e.create(t, name, "k", "r", 100, nil)

			e.sim.SetFaults(paysim.Faults{ServerErrorRate: 1})
			_, err := e.p[name].Get(context.Background(), p.ID)
			var pe *provider.Error
			if !errors.Is(err, provider.ErrRetryable) || !errors.As(err, &pe) || pe.StatusCode != 500 {
				t.Fatalf("5xx: %v", err)
			}

			e.sim.SetFaults(paysim.Faults{TooManyRequestsRate: 1, RetryAfter: 3 * time.Second})
			_, err = e.p[name].Get(context.Background(), p.ID)
			if d, ok := provider.RetryAfter(err); !errors.Is(err, provider.ErrRetryable) || !ok || d != 3*time.Second {
				t.Fatalf("429: %v (retry after %v)", err, d)
			}

			e.sim.SetFaults(paysim.Faults{SlowRate: 1, SlowDelay: 5 * time.Second})
			slow := e.adapter(t, name, 100*time.Millisecond, nil)
			if name == paysim.PayPal {
				// The token call would be the slow one; warm the cache first.
				e.sim.SetFaults(paysim.Faults{})
				if _, err := slow.Get(context.Background(), p.ID); err != nil {
					t.Fatal(err)
				}
				e.sim.SetFaults(paysim.Faults{SlowRate: 1, SlowDelay: 5 * time.Second})
			}
			_, err = slow.Get(context.Background(), p.ID)
			if !errors.Is(err, provider.ErrRetryable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("slow: %v", err)
			}

			c := e.sim.Counters()
			if c.APIFaults.ServerErrors != 1 || c.APIFaults.TooManyRequests != 1 || c.APIFaults.Slow != 1 {
				t.Fatalf("fault counters %+v", c.APIFaults)
			}
			// Injected errors happen before processing: no query was served.
			wantQueries := 0
			if name == paysim.PayPal {
				wantQueries = 1 // the warm-up
			}
			if c.QueriesByPayment[p.ID] != wantQueries {
				t.Fatalf("queries %d", c.QueriesByPayment[p.ID])
			}
		})
	}
}

func TestGenericProblemDetailsCarryRetryHints(t *testing.T) {
	e := start(t, paysim.Options{Faults: paysim.Faults{TooManyRequestsRate: 1, RetryAfter: 4 * time.Second}})
	_, err := e.p[paysim.Generic].Get(context.Background(), "job_x")
	var pe *provider.Error
	if !errors.As(err, &pe) || pe.Problem == nil || pe.Problem.Retryable == nil || !*pe.Problem.Retryable {
		t.Fatalf("err = %v", err)
	}
	if d, ok := pe.Problem.RetryAfterDelay(time.Now()); !ok || d != 4*time.Second {
		t.Fatalf("retryAfter %v", d)
	}
	e.sim.SetFaults(paysim.Faults{})
	_, err = e.p[paysim.Generic].Get(context.Background(), "job_missing")
	if !errors.As(err, &pe) || !errors.Is(err, provider.ErrNotFound) || pe.Problem == nil || pe.Problem.JobID != "job_missing" {
		t.Fatalf("not found: %v", err)
	}
}

func TestFaultsAreReproducibleWithASeed(t *testing.T) {
	pattern := func(seed uint64) []bool {
		e := start(t, paysim.Options{Seed: seed, Faults: paysim.Faults{ServerErrorRate: 0.5}})
		var out []bool
		for range 40 {
			_, err := e.p[paysim.KukoPay].Get(context.Background(), "pay_x")
			out = append(out, errors.Is(err, provider.ErrRetryable))
		}
		return out
	}
	a, b, c := pattern(7), pattern(7), pattern(8)
	if !slices.Equal(a, b) {
		t.Fatal("same seed, different faults")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds, same 40 decisions")
	}
}

func TestGetUnknownPaymentIsNotFound(t *testing.T) {
	e := start(t, paysim.Options{})
	for _, name := range allProviders {
		if _, err := e.p[name].Get(context.Background(), "nope"); !errors.Is(err, provider.ErrNotFound) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestFindByMerchantReference(t *testing.T) {
	e := start(t, paysim.Options{})
	for _, name := range []string{paysim.KukoPay, paysim.Generic} {
		p := e.create(t, name, "k", "ref-find", 100, nil)
		e.create(t, name, "k2", "ref-other", 100, nil)
		got, err := e.p[name].FindByMerchantReference(context.Background(), "ref-find")
		if err != nil || got.ID != p.ID {
			t.Errorf("%s: %+v %v", name, got, err)
		}
		if _, err := e.p[name].FindByMerchantReference(context.Background(), "ref-none"); !errors.Is(err, provider.ErrNotFound) {
			t.Errorf("%s missing: %v", name, err)
		}
	}
	if _, err := e.p[paysim.PayPal].FindByMerchantReference(context.Background(), "x"); !errors.Is(err, provider.ErrUnsupported) {
		t.Errorf("paypal: %v", err)
	}
}

func TestListEventsPagesAndFiltersBySince(t *testing.T) {
	for _, name := range []string{paysim.KukoPay, paysim.Generic} {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC))
			e := start(t, paysim.Options{Now: clk.Now})
			old := e.create(t, name, "old", "ref-old", 100, nil)
			if err := e.sim.SetOutcome(name, old.ID, paysim.Script{Outcome: paysim.OutcomeSucceed}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "old event", func() bool { return len(e.sim.Events(name)) == 1 })
			clk.Step(time.Hour)
			since := clk.Now()
			const n = 105 // more than one page of 100
			for i := range n {
				p := e.create(t, name, fmt.Sprint("k", i), fmt.Sprint("ref-", i), 100, nil)
				if err := e.sim.SetOutcome(name, p.ID, paysim.Script{Outcome: paysim.OutcomeFail}); err != nil {
					t.Fatal(err)
				}
			}
			eventually(t, "events", func() bool { return len(e.sim.Events(name)) == n+1 })
			var all []provider.Event
			cursor, pages := "", 0
			for {
				page, err := e.p[name].ListEvents(context.Background(), since, cursor)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				all = append(all, page.Events...)
				if !page.HasMore {
					if page.NextCursor != "" {
						t.Error("cursor on the last page")
					}
					break
				}
				cursor = page.NextCursor
			}
			if len(all) != n || pages != 2 {
				t.Fatalf("%d events in %d pages", len(all), pages)
			}
			seen := map[string]bool{}
			for _, ev := range all {
				if seen[ev.ID] || ev.PaymentID == old.ID || ev.Status != provider.StatusFailed || len(ev.Raw) == 0 {
					t.Fatalf("bad event %+v", ev)
				}
				seen[ev.ID] = true
			}
		})
	}
}

func TestRefundAndDispute(t *testing.T) {
	for _, name := range allProviders {
		t.Run(name, func(t *testing.T) {
			e := start(t, paysim.Options{TimeFactor: 0.001})
			rcv := newReceiver(t, e.p[name], nil, nil)
			_ = e.sim.SetWebhookTarget(name, rcv.srv.URL)
			p := e.create(t, name, "k", "ref-r", 1000, nil)
			if err := e.sim.Refund(name, p.ID, 100); err == nil {
				t.Fatal("refund of an unpaid payment accepted")
			}
			_ = e.sim.SetOutcome(name, p.ID, paysim.Script{Outcome: paysim.OutcomeSucceed})
			eventually(t, "success", func() bool { return rcv.count() == 1 })
			if err := e.sim.Refund(name, p.ID, 300); err != nil {
				t.Fatal(err)
			}
			eventually(t, "refund event", func() bool { return rcv.count() == 2 })
			ev := rcv.deliveries()[1].event
			if ev.Status != provider.StatusRefund || ev.RefundedTotal != 300 || ev.MerchantReference != "ref-r" {
				t.Fatalf("refund event %+v", ev)
			}
			got, err := e.p[name].Get(context.Background(), p.ID)
			if err != nil || got.Status != provider.StatusRefund || got.RefundedTotal != 300 {
				t.Fatalf("after refund %+v %v", got, err)
			}
			if err := e.sim.Dispute(name, p.ID, "fraudulent"); err != nil {
				t.Fatal(err)
			}
			eventually(t, "dispute event", func() bool { return rcv.count() == 3 })
			if ev := rcv.deliveries()[2].event; ev.Status != provider.StatusDispute || ev.MerchantReference != "ref-r" {
				t.Fatalf("dispute event %+v", ev)
			}
		})
	}
}

func TestPayPalTokenIsCachedUntilExpiry(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC))
	e := start(t, paysim.Options{Now: clk.Now, PayPalTokenTTL: time.Hour})
	pp := e.p[paysim.PayPal]
	p := e.create(t, paysim.PayPal, "k", "r", 100, nil)
	for range 3 {
		if _, err := pp.Get(context.Background(), p.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.sim.Counters().TokensIssued; n != 1 {
		t.Fatalf("%d tokens for 4 calls", n)
	}
	clk.Step(58 * time.Minute) // inside the refresh margin
	if _, err := pp.Get(context.Background(), p.ID); err != nil {
		t.Fatal(err)
	}
	if n := e.sim.Counters().TokensIssued; n != 2 {
		t.Fatalf("token not refreshed before expiry: %d", n)
	}
	e.sim.RevokePayPalTokens()
	if _, err := pp.Get(context.Background(), p.ID); err != nil {
		t.Fatalf("a revoked token must be replaced transparently: %v", err)
	}
	if n := e.sim.Counters().TokensIssued; n != 3 {
		t.Fatalf("tokens %d", n)
	}
}

func TestWrongCredentialsAreNotRetryable(t *testing.T) {
	e := start(t, paysim.Options{})
	for _, name := range allProviders {
		bad := map[string][]byte{}
		for k := range creds[name] {
			bad[k] = []byte("wrong")
		}
		a, err := newAdapter(name, e.srv.URL, bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Get(context.Background(), "x"); !errors.Is(err, provider.ErrProviderConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := e.sim.Counters().Unauthorized; n != 3 {
		t.Fatalf("unauthorized %d", n)
	}
}

func TestCloseStopsPendingDeliveries(t *testing.T) {
	e := start(t, paysim.Options{TimeFactor: 1})
	rcv := newReceiver(t, e.p[paysim.KukoPay], nil, func(int) int { return http.StatusServiceUnavailable })
	_ = e.sim.SetWebhookTarget(paysim.KukoPay, rcv.srv.URL)
	e.create(t, paysim.KukoPay, "k", "r", 100, map[string]string{paysim.MetaOutcome: "succeed"})
	e.create(t, paysim.KukoPay, "k2", "r2", 100, map[string]string{paysim.MetaOutcome: "succeed", paysim.MetaAfter: "1h"})
	eventually(t, "first attempt", func() bool { return rcv.count() == 1 })
	done := make(chan struct{})
	go func() { e.sim.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked on a 30s retry wait or a 1h outcome timer")
	}
	if rcv.count() != 1 {
		t.Fatal("delivered after Close")
	}
}
