package stripe_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

func event(typ, object string) []byte {
	return []byte(`{"id":"evt_1","object":"event","api_version":"` + stripego.APIVersion + `","type":"` + typ + `","created":1767225600,"data":{"object":` + object + `}}`)
}

const (
	pi  = "pi_3QaZ"
	cs  = "cs_test_a1"
	ref = `"metadata":{"merchant_reference":"ORD-1"}`
)

func intent(status, extra string) string {
	return `{"id":"` + pi + `","object":"payment_intent","amount":1000,"amount_capturable":0,"amount_received":0,"currency":"eur","status":"` + status + `",` + ref + extra + `}`
}

// TestEvents: what each supported event means, and that it names the PaymentIntent
// (the id paywarden records once it exists), the session where there is one, and the
// merchant reference.
func TestEvents(t *testing.T) {
	tests := []struct {
		typ, object string
		status      provider.Status
		paymentID   string
		checkoutID  string
		ref         string
		amount      int64
		refunded    int64
		failure     string
	}{
		{"payment_intent.succeeded", intent("succeeded", `,"amount_received":1000,"latest_charge":"ch_1"`), provider.StatusSucceeded, pi, "", "ORD-1", 1000, 0, ""},
		{"payment_intent.payment_failed", intent("requires_payment_method", `,"last_payment_error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds."}`), provider.StatusPending, pi, "", "ORD-1", 1000, 0, "insufficient_funds"},
		{"payment_intent.processing", intent("processing", ""), provider.StatusProcessing, pi, "", "ORD-1", 1000, 0, ""},
		{"payment_intent.canceled", intent("canceled", `,"cancellation_reason":"requested_by_customer"`), provider.StatusCanceled, pi, "", "ORD-1", 1000, 0, ""},
		{"payment_intent.canceled", intent("canceled", `,"cancellation_reason":"automatic"`), provider.StatusExpired, pi, "", "ORD-1", 1000, 0, stripe.FailureAuthorizationExpired},
		{"payment_intent.amount_capturable_updated", intent("requires_capture", `,"amount_capturable":1000`), provider.StatusAuthorized, pi, "", "ORD-1", 1000, 0, ""},
		{"payment_intent.requires_action", intent("requires_action", `,"next_action":{"type":"redirect_to_url","redirect_to_url":{"url":"https://hooks.stripe.com/3ds"}}`), provider.StatusPending, pi, "", "ORD-1", 1000, 0, ""},
		{"checkout.session.completed", `{"id":"` + cs + `","object":"checkout.session","status":"complete","payment_status":"paid","amount_total":1000,"currency":"eur","payment_intent":"` + pi + `","client_reference_id":"ORD-1",` + ref + `}`, provider.StatusSucceeded, pi, cs, "ORD-1", 1000, 0, ""},
		{"checkout.session.completed", `{"id":"` + cs + `","object":"checkout.session","status":"complete","payment_status":"unpaid","amount_total":1000,"currency":"eur","payment_intent":"` + pi + `",` + ref + `}`, provider.StatusProcessing, pi, cs, "ORD-1", 1000, 0, ""},
		{"checkout.session.expired", `{"id":"` + cs + `","object":"checkout.session","status":"expired","payment_status":"unpaid","amount_total":1000,"currency":"eur","payment_intent":null,"client_reference_id":"ORD-1"}`, provider.StatusExpired, cs, cs, "ORD-1", 1000, 0, ""},
		{"checkout.session.async_payment_succeeded", `{"id":"` + cs + `","object":"checkout.session","status":"complete","payment_status":"paid","amount_total":1000,"currency":"eur","payment_intent":"` + pi + `",` + ref + `}`, provider.StatusSucceeded, pi, cs, "ORD-1", 1000, 0, ""},
		{"checkout.session.async_payment_failed", `{"id":"` + cs + `","object":"checkout.session","status":"complete","payment_status":"unpaid","amount_total":1000,"currency":"eur","payment_intent":"` + pi + `",` + ref + `}`, provider.StatusFailed, pi, cs, "ORD-1", 1000, 0, ""},
		{"charge.refunded", `{"id":"ch_1","object":"charge","amount":1000,"amount_captured":1000,"amount_refunded":300,"currency":"eur","payment_intent":"` + pi + `",` + ref + `}`, provider.StatusRefund, pi, "", "ORD-1", 1000, 300, ""},
		{"refund.created", `{"id":"re_1","object":"refund","amount":300,"currency":"eur","status":"succeeded","payment_intent":"` + pi + `","charge":"ch_1","metadata":{"reference":"RF-1"}}`, provider.StatusUnknown, pi, "", "", 300, 0, ""},
		{"refund.updated", `{"id":"re_1","object":"refund","amount":300,"currency":"eur","status":"pending","payment_intent":"` + pi + `","metadata":{"reference":"RF-1"}}`, provider.StatusUnknown, pi, "", "", 300, 0, ""},
		{"refund.failed", `{"id":"re_1","object":"refund","amount":300,"currency":"eur","status":"failed","failure_reason":"lost_or_stolen_card","payment_intent":"` + pi + `","metadata":{"reference":"RF-1"}}`, provider.StatusUnknown, pi, "", "", 300, 0, "lost_or_stolen_card"},
		{"charge.dispute.created", `{"id":"dp_1","object":"dispute","amount":1000,"currency":"eur","charge":"ch_1","payment_intent":"` + pi + `","reason":"fraudulent","status":"needs_response"}`, provider.StatusDispute, pi, "", "", 1000, 0, "fraudulent"},
		{"charge.dispute.funds_withdrawn", `{"id":"dp_1","object":"dispute","amount":1000,"currency":"eur","charge":"ch_1","payment_intent":"` + pi + `","reason":"fraudulent","status":"needs_response"}`, provider.StatusDispute, pi, "", "", 1000, 0, "fraudulent"},
		{"charge.dispute.funds_reinstated", `{"id":"dp_1","object":"dispute","amount":1000,"currency":"eur","charge":"ch_1","payment_intent":"` + pi + `","reason":"fraudulent","status":"won"}`, provider.StatusDispute, pi, "", "", 1000, 0, "fraudulent"},
		{"charge.dispute.closed", `{"id":"dp_1","object":"dispute","amount":1000,"currency":"eur","charge":"ch_1","payment_intent":"` + pi + `","reason":"fraudulent","status":"lost"}`, provider.StatusDispute, pi, "", "", 1000, 0, "fraudulent"},
	}
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.typ] = true
		t.Run(tt.typ+" "+string(tt.status), func(t *testing.T) {
			raw := event(tt.typ, tt.object)
			ev, err := stripe.ParseEvent(raw)
			if err != nil || !ev.Supported {
				t.Fatalf("%+v %v", ev, err)
			}
			if ev.Status != tt.status || ev.PaymentID != tt.paymentID || ev.CheckoutID != tt.checkoutID || ev.MerchantReference != tt.ref {
				t.Fatalf("status %s id %q checkout %q ref %q", ev.Status, ev.PaymentID, ev.CheckoutID, ev.MerchantReference)
			}
			if ev.Amount != tt.amount || ev.Currency != "EUR" || ev.RefundedTotal != tt.refunded || ev.FailureCode != tt.failure {
				t.Fatalf("amount %d %s refunded %d failure %q", ev.Amount, ev.Currency, ev.RefundedTotal, ev.FailureCode)
			}
			if ev.ID != "evt_1" || !ev.OccurredAt.Equal(time.Unix(1767225600, 0)) || string(ev.Raw) != string(raw) {
				t.Fatalf("envelope %+v", ev)
			}
		})
	}
	for typ := range stripe.EventStatuses() {
		if !covered[typ] {
			t.Errorf("supported event type %s has no case", typ)
		}
	}
	t.Run("events rendered in another API version are recorded, not acted on", func(t *testing.T) {
		raw := []byte(`{"id":"evt_1","object":"event","api_version":"2020-08-27","type":"charge.refunded","created":1767225600,"data":{"object":{"id":"ch_1","object":"charge","amount":1000,"amount_refunded":300,"currency":"eur","payment_intent":"` + pi + `"}}}`)
		ev, err := stripe.ParseEvent(raw)
		if err != nil || ev.Supported || ev.Status != "" || !strings.Contains(ev.NotActedOn, "2020-08-27") || !strings.Contains(ev.NotActedOn, stripego.APIVersion) {
			t.Fatalf("%+v %v: want it unsupported, saying which versions", ev, err)
		}
		if ev.RefundedTotal != 0 || ev.PaymentID != "" {
			t.Errorf("fields read from an event in another version: %+v", ev)
		}
		ev, err = stripe.ParseEvent(event("charge.refunded", `{"id":"ch_1","object":"charge","amount":1000,"amount_refunded":300,"currency":"eur","payment_intent":"`+pi+`"}`))
		if err != nil || !ev.Supported || ev.NotActedOn != "" {
			t.Fatalf("an event in paywarden's version: %+v %v", ev, err)
		}
	})
	t.Run("dispute events say how the dispute ended", func(t *testing.T) {
		for _, tc := range []struct{ typ, status, want string }{
			{"charge.dispute.created", "needs_response", ""},
			{"charge.dispute.funds_withdrawn", "needs_response", ""},
			{"charge.dispute.funds_reinstated", "won", provider.DisputeWon},
			{"charge.dispute.closed", "won", provider.DisputeWon},
			{"charge.dispute.closed", "warning_closed", provider.DisputeWon},
			{"charge.dispute.closed", "lost", provider.DisputeLost},
		} {
			ev, err := stripe.ParseEvent(event(tc.typ, `{"id":"dp_1","object":"dispute","amount":1000,"currency":"eur","payment_intent":"`+pi+`","status":"`+tc.status+`"}`))
			if err != nil || ev.DisputeOutcome != tc.want {
				t.Errorf("%s %s: outcome %q (%v), want %q", tc.typ, tc.status, ev.DisputeOutcome, err, tc.want)
			}
		}
	})
	t.Run("refund events carry the refund", func(t *testing.T) {
		ev, err := stripe.ParseEvent(event("refund.failed", `{"id":"re_1","object":"refund","amount":300,"currency":"eur","status":"failed","failure_reason":"expired_or_canceled_card","payment_intent":"`+pi+`","metadata":{"reference":"RF-1"}}`))
		if err != nil || ev.Refund == nil {
			t.Fatalf("%+v %v", ev, err)
		}
		r := *ev.Refund
		if r.ID != "re_1" || r.PaymentID != pi || r.Reference != "RF-1" || r.Status != provider.RefundFailed || r.Amount != 300 || r.Currency != "EUR" || r.FailureCode != "expired_or_canceled_card" {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("requires_action carries the payer's link", func(t *testing.T) {
		p, err := stripe.ParseEvent(event("payment_intent.requires_action", intent("requires_action", `,"next_action":{"type":"redirect_to_url","redirect_to_url":{"url":"https://hooks.stripe.com/3ds"}}`)))
		if err != nil || p.Status != provider.StatusPending {
			t.Fatal(err)
		}
	})
	t.Run("EventTypes fits Stripe's limit of 20 types per list call", func(t *testing.T) {
		if n := len(stripe.EventTypes()); n == 0 || n > 20 {
			t.Fatal(n)
		}
	})
}

func TestEventEnvelope(t *testing.T) {
	t.Run("unknown types parse unsupported", func(t *testing.T) {
		ev, err := stripe.ParseEvent(event("customer.created", `{"id":"cus_1","object":"customer"}`))
		if err != nil || ev.Supported || ev.ID != "evt_1" || ev.Type != "customer.created" {
			t.Fatalf("%+v %v", ev, err)
		}
	})
	for name, raw := range map[string]string{
		"not JSON":                          `{"id":`,
		"no id":                             `{"object":"event","type":"payment_intent.succeeded","data":{"object":{}}}`,
		"no type":                           `{"id":"evt_1","object":"event","data":{"object":{}}}`,
		"no id on a type paywarden ignores": `{"object":"event","type":"customer.created","data":{"object":{"id":"cus_1"}}}`,
		"a session event with null":         `{"id":"evt_1","object":"event","type":"checkout.session.completed","data":{"object":null}}`,
		"supported type without object":     `{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{}}`,
		"supported type with null":          `{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{"object":null}}`,
		"object of the wrong shape":         `{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{"object":{"amount":"many"}}}`,
		"an amount with no ISO meaning":     `{"id":"evt_1","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":550,"amount_received":550,"currency":"isk","status":"succeeded"}}}`,
		"a currency Stripe cannot write":    `{"id":"evt_1","object":"event","type":"charge.refunded","data":{"object":{"id":"ch_1","amount":5,"amount_refunded":5,"currency":"xyz"}}}`,
		// A Payment's status.lastEvent.time is RFC 3339: years 0000-9999
		// only. Acknowledged, such an event was never applied (the API
		// server refused every status write), so it is refused here.
		"created in the year 10000":                                  strings.Replace(string(event("payment_intent.succeeded", intent("succeeded", ""))), "1767225600", "253402300800", 1),
		"created before the year 0000":                               strings.Replace(string(event("payment_intent.succeeded", intent("succeeded", ""))), "1767225600", "-62167219201", 1),
		"created at int64's last second":                             strings.Replace(string(event("payment_intent.succeeded", intent("succeeded", ""))), "1767225600", "9223372036854775807", 1),
		"an ignored type created in RFC 3339, the year 10000 in UTC": strings.Replace(string(event("customer.created", `{"id":"cus_1"}`)), "1767225600", `"9999-12-31T23:59:59-01:00"`, 1),
		"an ignored type created in the year 10000":                  strings.Replace(string(event("customer.created", `{"id":"cus_1"}`)), "1767225600", "253402300800", 1),
		"capture_before in the year 10000":                           string(event("payment_intent.amount_capturable_updated", intent("requires_capture", `,"latest_charge":{"id":"ch_1","payment_method_details":{"card":{"capture_before":253402300800}}}`))),
		"a session's page expiring in the year 10000":                string(event("checkout.session.completed", `{"id":"cs_1","status":"open","url":"https://checkout.stripe.com/c/pay/cs_1","expires_at":253402300800,"amount_total":1000,"currency":"eur"}`)),
	} {
		t.Run(name+" is malformed", func(t *testing.T) {
			if _, err := stripe.ParseEvent([]byte(raw)); !errors.Is(err, provider.ErrMalformedEvent) {
				t.Fatalf("err = %v", err)
			}
		})
	}
	for _, created := range []string{"253402300799", "-62167219200", "0"} {
		raw := strings.Replace(string(event("payment_intent.succeeded", intent("succeeded", ""))), "1767225600", created, 1)
		if ev, err := stripe.ParseEvent([]byte(raw)); err != nil || strconv.FormatInt(ev.OccurredAt.Unix(), 10) != created {
			t.Errorf("created %s, the edge of the years 0000-9999: %v, %v", created, ev.OccurredAt, err)
		}
	}
	// Like a null object: a session object without its id is no session, and
	// stored it would wait Orphaned for a payment it can never match.
	for _, typ := range []string{"checkout.session.completed", "checkout.session.expired", "checkout.session.async_payment_succeeded", "checkout.session.async_payment_failed"} {
		for what, object := range map[string]string{
			"an empty object":          `{}`,
			"a session without its id": `{"object":"checkout.session","status":"complete","payment_status":"paid","amount_total":1000,"currency":"eur","client_reference_id":"ORD-1","payment_intent":"` + pi + `"}`,
		} {
			t.Run(typ+" with "+what+" is malformed", func(t *testing.T) {
				ev, err := stripe.ParseEvent(event(typ, object))
				if !errors.Is(err, provider.ErrMalformedEvent) || !strings.Contains(err.Error(), "no Checkout Session id") {
					t.Fatalf("%+v, err = %v: want malformed for want of the session id", ev, err)
				}
			})
		}
	}
}

// TestEventsThatIdentifyNothingAreMalformed: every object paywarden acts on has an
// id of its own in Stripe's API reference, and its link to a payment
// (payment_intent) may be null. An object with neither id nor link nor merchant
// reference is no Stripe object and could only wait Orphaned: it is malformed (400).
// One that carries a usable id is kept.
func TestEventsThatIdentifyNothingAreMalformed(t *testing.T) {
	nothing := map[string][]string{
		"payment_intent.succeeded":                 {`{"currency":"eur"}`, `{"object":"payment_intent","amount":1000,"amount_received":1000,"currency":"eur","status":"succeeded"}`},
		"payment_intent.payment_failed":            {`{"currency":"eur"}`},
		"payment_intent.processing":                {`{"currency":"eur","status":"processing"}`},
		"payment_intent.canceled":                  {`{"currency":"eur","status":"canceled","cancellation_reason":"abandoned"}`},
		"payment_intent.amount_capturable_updated": {`{"currency":"eur","status":"requires_capture","amount_capturable":1000}`},
		"payment_intent.requires_action":           {`{"currency":"eur"}`},
		"charge.refunded":                          {`{"currency":"eur"}`, `{"object":"charge","amount":1000,"amount_refunded":300,"currency":"eur","payment_intent":null,"metadata":{}}`},
		"refund.created":                           {`{"object":"refund","amount":300,"currency":"eur","status":"succeeded","payment_intent":null}`},
		"refund.updated":                           {`{"amount":300,"currency":"eur","status":"pending"}`},
		"refund.failed":                            {`{"amount":300,"currency":"eur","status":"failed"}`},
		"charge.dispute.created":                   {`{"object":"dispute","amount":1000,"currency":"eur","reason":"fraudulent","status":"needs_response"}`},
		"charge.dispute.funds_withdrawn":           {`{"amount":1000,"currency":"eur"}`},
		"charge.dispute.funds_reinstated":          {`{"amount":1000,"currency":"eur","status":"won"}`},
		"charge.dispute.closed":                    {`{"amount":1000,"currency":"eur","status":"lost"}`},
	}
	for typ := range stripe.EventStatuses() {
		if _, ok := nothing[typ]; !ok && !strings.HasPrefix(typ, "checkout.session.") { // sessions: TestEventEnvelope
			t.Errorf("supported event type %s has no case", typ)
		}
	}
	for typ, objects := range nothing {
		for _, object := range objects {
			t.Run(typ+" with "+object+" is malformed", func(t *testing.T) {
				ev, err := stripe.ParseEvent(event(typ, object))
				if !errors.Is(err, provider.ErrMalformedEvent) || !strings.Contains(err.Error(), "no id") {
					t.Fatalf("%+v, err = %v: want malformed for want of any id", ev, err)
				}
			})
		}
	}
	kept := []struct {
		name, typ, object string
		paymentID, ref    string
	}{
		// A charge made without a PaymentIntent (legacy flows) is a documented
		// Charge: it names no payment of paywarden's, but it is not malformed.
		{"a charge with its id and a null payment_intent", "charge.refunded", `{"id":"ch_1","object":"charge","amount":1000,"amount_refunded":300,"currency":"eur","payment_intent":null}`, "", ""},
		{"a charge without its id that names its PaymentIntent", "charge.refunded", `{"amount":1000,"amount_refunded":300,"currency":"eur","payment_intent":"` + pi + `"}`, pi, ""},
		{"a charge without its id that carries the merchant reference", "charge.refunded", `{"amount":1000,"amount_refunded":300,"currency":"eur",` + ref + `}`, "", "ORD-1"},
		{"a PaymentIntent without its id that carries the merchant reference", "payment_intent.succeeded", `{"amount":1000,"amount_received":1000,"currency":"eur","status":"succeeded",` + ref + `}`, "", "ORD-1"},
		{"a PaymentIntent with nothing but its id", "payment_intent.processing", `{"id":"` + pi + `","currency":"eur"}`, pi, ""},
		{"a refund with its id and a null payment_intent", "refund.updated", `{"id":"re_1","amount":300,"currency":"eur","status":"pending","payment_intent":null}`, "", ""},
		{"a dispute with its id and a null payment_intent", "charge.dispute.created", `{"id":"dp_1","amount":1000,"currency":"eur","charge":"ch_1","payment_intent":null,"status":"needs_response"}`, "", ""},
	}
	for _, tt := range kept {
		t.Run(tt.name+" is kept", func(t *testing.T) {
			ev, err := stripe.ParseEvent(event(tt.typ, tt.object))
			if err != nil || !ev.Supported || ev.PaymentID != tt.paymentID || ev.MerchantReference != tt.ref {
				t.Fatalf("%+v, err = %v: want it parsed with payment id %q and reference %q", ev, err, tt.paymentID, tt.ref)
			}
		})
	}
}

// TestSessionExpiry: the bounds count from the create marker's time (now here); that
// retries send the same value is TestSessionCreateRetriedLaterSendsTheSameParameters.
func TestSessionExpiry(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 7, 0, time.UTC)
	tests := []struct {
		name string
		want time.Time
		ok   bool
		at   time.Time
	}{
		{"none asked: Stripe's default", time.Time{}, false, time.Time{}},
		{"inside the bounds is sent as is", now.Add(2 * time.Hour), true, now.Add(2 * time.Hour)},
		{"beyond 24h is Stripe's default (24h)", now.Add(30 * time.Hour), false, time.Time{}},
		{"exactly 24h is Stripe's default", now.Add(24 * time.Hour), false, time.Time{}},
		{"too soon is raised to 31 minutes, rounded up to the half hour", now.Add(5 * time.Minute), true, time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)},
		{"in the past is raised too", now.Add(-time.Hour), true, time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := stripe.SessionExpiry(tt.want, now)
			if ok != tt.ok || !got.Equal(tt.at) {
				t.Fatalf("SessionExpiry = %s %v, want %s %v", got, ok, tt.at, tt.ok)
			}
			if ok && (got.Before(now.Add(30*time.Minute)) || got.After(now.Add(24*time.Hour))) {
				t.Fatalf("%s is outside Stripe's bounds", got)
			}
		})
	}
}

func TestSearchQuery(t *testing.T) {
	for ref, want := range map[string]string{
		"ORD-1":      `metadata['merchant_reference']:'ORD-1'`,
		`O'Brien\1`:  `metadata['merchant_reference']:'O\'Brien\\1'`,
		"with space": `metadata['merchant_reference']:'with space'`,
	} {
		if got := stripe.SearchQuery(ref); got != want {
			t.Errorf("SearchQuery(%q) = %s, want %s", ref, got, want)
		}
	}
}
