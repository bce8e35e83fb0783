package kukopay_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

var (
	now    = time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)
	oldKey = []byte("whk_old_secret")
	newKey = []byte("whk_new_secret")
	body   = []byte(`{"id":"evt_1","object":"event","type":"payment.succeeded","created":1758456000,"data":{"object":{"id":"pay_1"}}}`)
)

func hdr(t time.Time, secrets ...[]byte) string {
	return kukopay.SignatureHeaderValue(t, body, secrets...)
}

// signedOver is the v1 signature as the scheme defines it, computed here
// rather than by the package: hex(HMAC-SHA256(secret, "<t>.<raw body>")), t
// being the characters the header carries.
func signedOver(secret []byte, t string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(t + "." + string(body)))
	return hex.EncodeToString(m.Sum(nil))
}

// TestSignatureVectors is the vector list of issue 3 for the KukoPay scheme.
func TestSignatureVectors(t *testing.T) {
	ts := now.Unix()
	sigNew := kukopay.Sign(newKey, ts, body)
	sigOld := kukopay.Sign(oldKey, ts, body)
	sigWrong := kukopay.Sign([]byte("someone else"), ts, body)
	// padded is a valid header grown to n bytes by an ignored v0 field.
	padded := func(n int) string {
		h := fmt.Sprintf("t=%d,v1=%s,v0=", ts, sigNew)
		return h + strings.Repeat("0", n-len(h))
	}
	tests := []struct {
		name    string
		header  string
		body    []byte
		secrets [][]byte
		reason  error // nil = valid
	}{
		{"valid", hdr(now, newKey), body, [][]byte{newKey}, nil},
		{"tampered body", hdr(now, newKey), append([]byte(" "), body...), [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"wrong secret", hdr(now, []byte("someone else")), body, [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"two signatures only the second valid", fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, sigWrong, sigNew), body, [][]byte{newKey}, nil},
		{"only the old secret valid during rotation", fmt.Sprintf("t=%d,v1=%s", ts, sigOld), body, [][]byte{oldKey, newKey}, nil},
		{"rotation header signed by both secrets", hdr(now, oldKey, newKey), body, [][]byte{newKey}, nil},
		{"timestamp six minutes old", hdr(now.Add(-6*time.Minute), newKey), body, [][]byte{newKey}, provider.ErrTimestampTolerance},
		{"timestamp six minutes in the future", hdr(now.Add(6*time.Minute), newKey), body, [][]byte{newKey}, provider.ErrTimestampTolerance},
		{"timestamp four minutes old is inside tolerance", hdr(now.Add(-4*time.Minute), newKey), body, [][]byte{newKey}, nil},
		{"missing header", "", body, [][]byte{newKey}, provider.ErrMissingHeader},
		{"malformed header without t", "v1=" + sigNew, body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"malformed header with a non-numeric t", "t=yesterday,v1=" + sigNew, body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"malformed header field without =", fmt.Sprintf("t=%d,v1", ts), body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"malformed header with two t", fmt.Sprintf("t=%d,t=%d,v1=%s", ts, ts+1, sigNew), body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"header fields in another order", fmt.Sprintf("v1=%s,t=%d", sigNew, ts), body, [][]byte{newKey}, nil},
		{"spaces around fields are tolerated", fmt.Sprintf(" t=%d , v1=%s ", ts, sigNew), body, [][]byte{newKey}, nil},
		{"unknown schemes are ignored", fmt.Sprintf("t=%d,v0=%s,v2=abc,v1=%s", ts, sigWrong, sigNew), body, [][]byte{newKey}, nil},
		{"only unknown schemes is no match", fmt.Sprintf("t=%d,v0=%s", ts, sigNew), body, [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"upper-case hex still matches", fmt.Sprintf("t=%d,v1=%X", ts, mustHex(sigNew)), body, [][]byte{newKey}, nil},
		{"no secrets configured", hdr(now, newKey), body, nil, provider.ErrNoMatchingSignature},
		{"a truncated signature is no match", fmt.Sprintf("t=%d,v1=%s", ts, sigNew[:32]), body, [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"a signature with a digit appended is no match", fmt.Sprintf("t=%d,v1=%s0", ts, sigNew), body, [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"a blank header is a missing header", "   ", body, [][]byte{newKey}, provider.ErrMissingHeader},
		{"a t with a plus sign is malformed", fmt.Sprintf("t=+%d,v1=%s", ts, sigNew), body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"a negative t is malformed", fmt.Sprintf("t=-%d,v1=%s", ts, sigNew), body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"a t with a leading zero is signed as the header writes it", fmt.Sprintf("t=0%d,v1=%s", ts, signedOver(newKey, fmt.Sprintf("0%d", ts), body)), body, [][]byte{newKey}, nil},
		{"a signature over the t written without its leading zero is no match", fmt.Sprintf("t=0%d,v1=%s", ts, sigNew), body, [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"spaces around = are tolerated", fmt.Sprintf("t = %d,v1 = %s", ts, sigNew), body, [][]byte{newKey}, nil},
		{"empty fields are skipped", fmt.Sprintf(",t=%d,,v1=%s,", ts, sigNew), body, [][]byte{newKey}, nil},
		{"a field of only spaces is skipped", fmt.Sprintf("t=%d, ,v1=%s", ts, sigNew), body, [][]byte{newKey}, nil},
		{"a header of exactly 4096 bytes is read", padded(4096), body, [][]byte{newKey}, nil},
		{"a header of 4097 bytes is refused before any HMAC", padded(4097), body, [][]byte{newKey}, provider.ErrMalformedHeader},
	}
	a := adapter(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set(kukopay.HeaderSignature, tt.header)
			}
			scheme, err := a.VerifyWebhook(context.Background(), h, tt.body, tt.secrets, 5*time.Minute, now)
			providertest.AssertVerdict(t, scheme, provider.SchemeKukoPay, err, tt.reason)
		})
	}
}

// TestBlankSecretsAreNeverKeys: the receiver drops empty secrets but not
// whitespace-only ones, and an HMAC under either is one anyone can compute.
func TestBlankSecretsAreNeverKeys(t *testing.T) {
	a := adapter(t)
	providertest.BlankSecretsRefused(t, provider.SchemeKukoPay, newKey,
		func(_ *testing.T, secret []byte) http.Header {
			h := http.Header{}
			h.Set(kukopay.HeaderSignature, hdr(now, secret))
			return h
		},
		func(h http.Header, secrets [][]byte) (string, error) {
			return a.VerifyWebhook(context.Background(), h, body, secrets, 5*time.Minute, now)
		})
}

func mustHex(s string) []byte {
	b := make([]byte, len(s)/2)
	fmt.Sscanf(s, "%x", &b)
	return b
}

func TestNewRequiresAPIKey(t *testing.T) {
	if _, err := kukopay.New(provider.Config{Name: "ns/kuko", APIURL: "http://x"}); err == nil {
		t.Fatal("missing apiKey accepted")
	}
}

func TestPaymentStatusTable(t *testing.T) {
	want := map[string]provider.Status{
		"pending": provider.StatusPending, "processing": provider.StatusProcessing, "succeeded": provider.StatusSucceeded,
		"failed": provider.StatusFailed, "expired": provider.StatusExpired,
		"partially_refunded": provider.StatusRefund, "refunded": provider.StatusRefund,
		"requires_action": provider.StatusPending, "requires_capture": provider.StatusAuthorized, "canceled": provider.StatusCanceled,
	}
	providertest.StatusTable(t, "status", want, kukopay.PaymentStatuses(),
		func(_ *testing.T, raw string) provider.Status { return kukopay.MapPaymentStatus(raw) }, "on_hold")
}

func TestEventTypeTable(t *testing.T) {
	want := map[string]provider.Status{
		"payment.succeeded": provider.StatusSucceeded, "payment.failed": provider.StatusFailed,
		"payment.expired": provider.StatusExpired, "refund.succeeded": provider.StatusRefund,
		"dispute.created": provider.StatusDispute, "payment.authorized": provider.StatusAuthorized,
		"payment.canceled": provider.StatusCanceled, "refund.failed": provider.StatusRefund,
	}
	providertest.EventTypeTable(t, want, kukopay.EventStatuses(), kukopay.MapEventType, "payment.requires_action", "payment.created", "customer.updated")
}

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want provider.Event
	}{
		{"succeeded payment carries the received amount",
			`{"id":"evt_1","object":"event","type":"payment.succeeded","created":1758456000,"data":{"object":{"id":"pay_1","object":"payment","out_trade_no":"ORD-1","amount":1000,"amount_received":990,"currency":"CNY","status":"succeeded"}}}`,
			provider.Event{ID: "evt_1", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true, PaymentID: "pay_1", MerchantReference: "ORD-1", Amount: 990, Currency: "CNY"}},
		{"failed payment carries the failure",
			`{"id":"evt_2","type":"payment.failed","created":1758456000,"data":{"object":{"id":"pay_2","out_trade_no":"ORD-2","amount":500,"currency":"CNY","status":"failed","failure_code":"card_declined","failure_message":"no"}}}`,
			provider.Event{ID: "evt_2", Type: "payment.failed", Status: provider.StatusFailed, Supported: true, PaymentID: "pay_2", MerchantReference: "ORD-2", Amount: 500, Currency: "CNY", FailureCode: "card_declined", FailureMessage: "no"}},
		{"refund carries the cumulative refunded total",
			`{"id":"evt_3","type":"refund.succeeded","created":1758456000,"data":{"object":{"id":"re_1","object":"refund","payment":"pay_1","out_trade_no":"ORD-1","amount":300,"currency":"CNY","status":"succeeded","payment_amount_refunded":500}}}`,
			provider.Event{ID: "evt_3", Type: "refund.succeeded", Status: provider.StatusRefund, Supported: true, PaymentID: "pay_1", MerchantReference: "ORD-1", Amount: 300, Currency: "CNY", RefundedTotal: 500,
				Refund: &provider.Refund{ID: "re_1", PaymentID: "pay_1", Status: provider.RefundSucceeded, RawStatus: "succeeded", Amount: 300, Currency: "CNY"}}},
		{"failed refund carries the refund and leaves the cumulative total as it was",
			`{"id":"evt_6","type":"refund.failed","created":1758456000,"data":{"object":{"id":"re_2","object":"refund","payment":"pay_1","out_trade_no":"ORD-1","amount":200,"currency":"CNY","status":"failed","failure_code":"expired_card","metadata":{"reference":"ns.refund-2"},"payment_amount_refunded":500}}}`,
			provider.Event{ID: "evt_6", Type: "refund.failed", Status: provider.StatusRefund, Supported: true, PaymentID: "pay_1", MerchantReference: "ORD-1", Amount: 200, Currency: "CNY", RefundedTotal: 500, FailureCode: "expired_card",
				Refund: &provider.Refund{ID: "re_2", PaymentID: "pay_1", Reference: "ns.refund-2", Status: provider.RefundFailed, RawStatus: "failed", Amount: 200, Currency: "CNY", FailureCode: "expired_card"}}},
		{"authorized payment carries the capturable amount",
			`{"id":"evt_7","type":"payment.authorized","created":1758456000,"data":{"object":{"id":"pay_7","object":"payment","out_trade_no":"ORD-7","amount":1000,"amount_capturable":1000,"currency":"EUR","status":"requires_capture","capture_method":"manual","capture_before":1759060800}}}`,
			provider.Event{ID: "evt_7", Type: "payment.authorized", Status: provider.StatusAuthorized, Supported: true, PaymentID: "pay_7", MerchantReference: "ORD-7", Amount: 1000, Currency: "EUR"}},
		{"canceled payment names the payment",
			`{"id":"evt_8","type":"payment.canceled","created":1758456000,"data":{"object":{"id":"pay_8","object":"payment","out_trade_no":"ORD-8","amount":1000,"currency":"EUR","status":"canceled","cancellation_reason":"requested_by_customer"}}}`,
			provider.Event{ID: "evt_8", Type: "payment.canceled", Status: provider.StatusCanceled, Supported: true, PaymentID: "pay_8", MerchantReference: "ORD-8", Amount: 1000, Currency: "EUR"}},
		{"expired authorization is Expired with the AuthorizationExpired code",
			`{"id":"evt_9","type":"payment.expired","created":1758456000,"data":{"object":{"id":"pay_9","object":"payment","out_trade_no":"ORD-9","amount":1000,"currency":"EUR","status":"expired","capture_method":"manual","cancellation_reason":"authorization_expired"}}}`,
			provider.Event{ID: "evt_9", Type: "payment.expired", Status: provider.StatusExpired, Supported: true, PaymentID: "pay_9", MerchantReference: "ORD-9", Amount: 1000, Currency: "EUR", FailureCode: provider.FailureAuthorizationExpired, FailureMessage: "the authorization expired before it was captured"}},
		{"dispute names the payment",
			`{"id":"evt_4","type":"dispute.created","created":1758456000,"data":{"object":{"id":"dp_1","object":"dispute","payment":"pay_1","out_trade_no":"ORD-1","amount":990,"currency":"CNY","reason":"fraudulent"}}}`,
			provider.Event{ID: "evt_4", Type: "dispute.created", Status: provider.StatusDispute, Supported: true, PaymentID: "pay_1", MerchantReference: "ORD-1", Amount: 990, Currency: "CNY", FailureCode: "fraudulent"}},
		{"unknown type parses unsupported",
			`{"id":"evt_5","type":"customer.updated","created":1758456000,"data":{"object":{"weird":true}}}`,
			provider.Event{ID: "evt_5", Type: "customer.updated"}},
		{"an unknown type without data.object parses unsupported",
			`{"id":"evt_10","type":"customer.updated","created":1758456000,"data":{}}`,
			provider.Event{ID: "evt_10", Type: "customer.updated"}},
		{"an unknown payment type with an object of another shape parses unsupported",
			`{"id":"evt_11","type":"payment.requires_action","created":1758456000,"data":{"object":{"id":"pay_11","amount":"many"}}}`,
			provider.Event{ID: "evt_11", Type: "payment.requires_action"}},
		{"a succeeded payment without amount_received carries its amount",
			`{"id":"evt_12","type":"payment.succeeded","created":1758456000,"data":{"object":{"id":"pay_12","out_trade_no":"ORD-12","amount":1000,"currency":"EUR","status":"succeeded"}}}`,
			provider.Event{ID: "evt_12", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true, PaymentID: "pay_12", MerchantReference: "ORD-12", Amount: 1000, Currency: "EUR"}},
		{"an authorized payment without amount_capturable carries its amount",
			`{"id":"evt_13","type":"payment.authorized","created":1758456000,"data":{"object":{"id":"pay_13","out_trade_no":"ORD-13","amount":1000,"currency":"EUR","status":"requires_capture"}}}`,
			provider.Event{ID: "evt_13", Type: "payment.authorized", Status: provider.StatusAuthorized, Supported: true, PaymentID: "pay_13", MerchantReference: "ORD-13", Amount: 1000, Currency: "EUR"}},
		{"a currency in lower case is read as its ISO code",
			`{"id":"evt_15","type":"payment.succeeded","created":1758456000,"data":{"object":{"id":"pay_15","out_trade_no":"ORD-15","amount":1999,"currency":"usd","status":"succeeded"}}}`,
			provider.Event{ID: "evt_15", Type: "payment.succeeded", Status: provider.StatusSucceeded, Supported: true, PaymentID: "pay_15", MerchantReference: "ORD-15", Amount: 1999, Currency: "USD"}},
		{"a refund's currency in lower case is read as its ISO code, on the refund too",
			`{"id":"evt_16","type":"refund.succeeded","created":1758456000,"data":{"object":{"id":"re_16","payment":"pay_1","out_trade_no":"ORD-1","amount":300,"currency":"eUr","status":"succeeded","payment_amount_refunded":300}}}`,
			provider.Event{ID: "evt_16", Type: "refund.succeeded", Status: provider.StatusRefund, Supported: true, PaymentID: "pay_1", MerchantReference: "ORD-1", Amount: 300, Currency: "EUR", RefundedTotal: 300,
				Refund: &provider.Refund{ID: "re_16", PaymentID: "pay_1", Status: provider.RefundSucceeded, RawStatus: "succeeded", Amount: 300, Currency: "EUR"}}},
		{"a dispute's currency in lower case is read as its ISO code",
			`{"id":"evt_17","type":"dispute.created","created":1758456000,"data":{"object":{"id":"dp_17","payment":"pay_1","out_trade_no":"ORD-1","amount":990,"currency":"cny","reason":"fraudulent"}}}`,
			provider.Event{ID: "evt_17", Type: "dispute.created", Status: provider.StatusDispute, Supported: true, PaymentID: "pay_1", MerchantReference: "ORD-1", Amount: 990, Currency: "CNY", FailureCode: "fraudulent"}},
		{"a refund object without an id settles no Refund",
			`{"id":"evt_14","type":"refund.succeeded","created":1758456000,"data":{"object":{"payment":"pay_1","out_trade_no":"ORD-1","amount":300,"currency":"CNY","status":"succeeded","payment_amount_refunded":300}}}`,
			provider.Event{ID: "evt_14", Type: "refund.succeeded", Status: provider.StatusRefund, Supported: true, PaymentID: "pay_1", MerchantReference: "ORD-1", Amount: 300, Currency: "CNY", RefundedTotal: 300}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			providertest.ParsedEvent(t, kukopay.ParseEvent, tt.raw, time.Unix(1758456000, 0), tt.want)
		})
	}
	providertest.MalformedEvents(t, kukopay.ParseEvent, ``, `[]`, `{"id":"e"}`, `{"type":"payment.succeeded"}`, `{"id":"e","type":"payment.succeeded"}`, `{"id":"e","type":"payment.succeeded","data":{"object":[1]}}`, `{"id":"e","type":"payment.succeeded","created":"x"}`,
		`{"type":"customer.updated","created":1758456000,"data":{"object":{}}}`, `{"id":"e","type":"payment.succeeded","data":{"object":null}}`)
}

// TestEventsPaywardenCannotStoreAreMalformed: a Payment's status takes only a
// currency of three letters A-Z and a time in the years 0000-9999 (RFC 3339).
// An event carrying anything else was answered 200 and then never applied:
// the API server refused every status write, and the provider, told the event
// arrived, never sent it again. It is malformed (400) instead, so the
// provider's delivery log shows it; nothing is stored.
func TestEventsPaywardenCannotStoreAreMalformed(t *testing.T) {
	event := func(typ, created, object string) string {
		return `{"id":"evt_1","object":"event","type":"` + typ + `","created":` + created + `,"data":{"object":` + object + `}}`
	}
	paid := func(cur string) string {
		return event("payment.succeeded", "1758456000", `{"id":"pay_1","out_trade_no":"ORD-1","amount":1999,"currency":"`+cur+`","status":"succeeded"}`)
	}
	providertest.MalformedEvents(t, kukopay.ParseEvent,
		paid("US"), paid("USDT"), paid("us$"), paid(" usd"), paid("ÜSD"),
		event("refund.succeeded", "1758456000", `{"id":"re_1","payment":"pay_1","amount":300,"currency":"eu","status":"succeeded"}`),
		event("dispute.created", "1758456000", `{"id":"dp_1","payment":"pay_1","amount":300,"currency":"E1R"}`),
		event("payment.succeeded", "253402300800", `{"id":"pay_1","amount":1999,"currency":"USD","status":"succeeded"}`),        // 10000-01-01
		event("payment.succeeded", "-62167219201", `{"id":"pay_1","amount":1999,"currency":"USD","status":"succeeded"}`),        // before 0000-01-01
		event("payment.succeeded", "9223372036854775807", `{"id":"pay_1","amount":1999,"currency":"USD","status":"succeeded"}`), // int64's last second
		event("payment.authorized", "1758456000", `{"id":"pay_1","amount":1999,"currency":"USD","status":"requires_capture","capture_before":253402300800}`),
	)
	for _, created := range []int64{253402300799, -62167219200, 0} {
		raw := event("payment.succeeded", strconv.FormatInt(created, 10), `{"id":"pay_1","amount":1999,"currency":"USD","status":"succeeded"}`)
		if ev, err := kukopay.ParseEvent([]byte(raw)); err != nil || ev.OccurredAt.Unix() != created {
			t.Errorf("created %d, the edge of the years 0000-9999: %+v, %v", created, ev.OccurredAt, err)
		}
	}
}

// TestEventsThatNameNoPaymentAreMalformed: every object KukoPay documents names
// its payment (a payment by its id, a refund or dispute by payment, all by
// out_trade_no). A supported event whose object names none could only wait
// Orphaned: it is malformed (400), like one with a null object. Either name
// alone is enough.
func TestEventsThatNameNoPaymentAreMalformed(t *testing.T) {
	objects := map[string][]string{
		"payment": {`{}`, `{"object":"payment","amount":1000,"currency":"EUR","status":"succeeded"}`},
		"refund":  {`{}`, `{"id":"re_1","object":"refund","amount":300,"currency":"EUR","status":"succeeded","payment_amount_refunded":300}`},
		"dispute": {`{}`, `{"id":"dp_1","object":"dispute","amount":1000,"currency":"EUR","reason":"fraudulent"}`},
	}
	named := map[string][]string{
		"payment": {`{"id":"pay_1"}`, `{"out_trade_no":"ORD-1"}`},
		"refund":  {`{"payment":"pay_1"}`, `{"out_trade_no":"ORD-1"}`},
		"dispute": {`{"payment":"pay_1"}`, `{"out_trade_no":"ORD-1"}`},
	}
	for typ := range kukopay.EventStatuses() {
		kind, _, _ := strings.Cut(typ, ".")
		raw := func(object string) []byte {
			return []byte(`{"id":"evt_1","object":"event","type":"` + typ + `","created":1758456000,"data":{"object":` + object + `}}`)
		}
		if objects[kind] == nil {
			t.Errorf("supported event type %s has no case", typ)
		}
		for _, object := range objects[kind] {
			t.Run(typ+" with "+object+" is malformed", func(t *testing.T) {
				ev, err := kukopay.ParseEvent(raw(object))
				if !errors.Is(err, provider.ErrMalformedEvent) || !strings.Contains(err.Error(), "names no payment") {
					t.Fatalf("%+v, err = %v: want malformed for want of a payment", ev, err)
				}
			})
		}
		for _, object := range named[kind] {
			t.Run(typ+" with "+object+" is kept", func(t *testing.T) {
				ev, err := kukopay.ParseEvent(raw(object))
				if err != nil || !ev.Supported || !ev.NamesPayment() {
					t.Fatalf("%+v, err = %v: want it parsed", ev, err)
				}
			})
		}
	}
	t.Run("an unsupported type with an empty object parses unsupported", func(t *testing.T) {
		ev, err := kukopay.ParseEvent([]byte(`{"id":"evt_1","type":"payment.requires_action","data":{"object":{}}}`))
		if err != nil || ev.Supported {
			t.Fatalf("%+v %v", ev, err)
		}
	})
}

func FuzzParseSignatureHeader(f *testing.F) {
	ts := now.Unix()
	for _, s := range []string{hdr(now, newKey), hdr(now, oldKey, newKey), fmt.Sprintf("v1=ab,t=%d", ts), "t=1,v0=x,v1=", "", ",,,", "t=,v1=", "t=-1", "t=+5,v1=a", "t=99999999999999999999,v1=a", "=,=", "t=1=2,v1=3=4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		ps, err := kukopay.ParseSignatureHeader(h)
		if err != nil {
			if !errors.Is(err, provider.ErrInvalidSignature) {
				t.Fatalf("error not classified: %v", err)
			}
			return
		}
		if ps.Timestamp < 0 {
			t.Fatalf("negative timestamp from %q", h)
		}
		// Verification must not panic either, and a fuzzed header never verifies
		// against a secret it could not know.
		if err := kukopay.Verify(h, body, [][]byte{[]byte("fuzz-secret-unknown")}, time.Minute, now); err == nil {
			t.Fatalf("header %q verified", h)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(body))
	f.Add([]byte(`{"id":"evt_3","type":"refund.succeeded","created":1,"data":{"object":{"payment":"p","amount":1,"payment_amount_refunded":2}}}`))
	f.Add([]byte(`{"id":"e","type":"dispute.created","data":{"object":null}}`))
	f.Add([]byte(`{"id":"e","type":"x.y","created":-9223372036854775808,"data":{"object":"s"}}`))
	f.Add([]byte(`{"id":"e","type":"refund.failed","data":{"object":{"id":"re_1","currency":"EUR"}}}`))
	f.Add([]byte(`{"id":"e","type":"payment.succeeded","created":253402300800,"data":{"object":{"id":"p","currency":"usd"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		providertest.FuzzedEvent(t, b, kukopay.ParseEvent)
		// Every documented object names its payment: a supported event that
		// names none is refused, never stored to wait Orphaned.
		ev, err := kukopay.ParseEvent(b)
		if err == nil && ev.Supported && !ev.NamesPayment() {
			t.Fatalf("supported event that names no payment accepted: %+v", ev)
		}
		// What an accepted event carries into a status, the status can hold.
		if y := ev.OccurredAt.Year(); err == nil && (y < 0 || y > 9999 || !storableCurrency(ev.Currency)) {
			t.Fatalf("accepted event with a time or currency no status holds: %v %q", ev.OccurredAt, ev.Currency)
		}
	})
}

// storableCurrency reports whether a Payment's status takes cur: none, or
// three letters A-Z.
func storableCurrency(cur string) bool {
	if cur == "" {
		return true
	}
	return len(cur) == 3 && strings.Trim(cur, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}

// TestASecretWithANewlineStillVerifies: a signing Secret written from a file
// or with echo ends in a newline KukoPay never signed with. The value is
// tried as written and trimmed, so genuine webhooks verify (before, every one
// was 401 while the provider showed Ready); a wrong secret still does not.
func TestASecretWithANewlineStillVerifies(t *testing.T) {
	a := adapter(t)
	h := http.Header{}
	h.Set(kukopay.HeaderSignature, hdr(now, []byte("whk_live_s3cret")))
	if _, err := a.VerifyWebhook(context.Background(), h, body, [][]byte{[]byte("whk_live_s3cret\n")}, 5*time.Minute, now); err != nil {
		t.Errorf("signed with the secret, configured with a trailing newline: %v", err)
	}
	h.Set(kukopay.HeaderSignature, hdr(now, []byte(" padded ")))
	if _, err := a.VerifyWebhook(context.Background(), h, body, [][]byte{[]byte(" padded ")}, 5*time.Minute, now); err != nil {
		t.Errorf("signed with a secret that has spaces, configured as such: %v", err)
	}
	h.Set(kukopay.HeaderSignature, hdr(now, []byte("another")))
	if _, err := a.VerifyWebhook(context.Background(), h, body, [][]byte{[]byte("whk_live_s3cret\n")}, 5*time.Minute, now); err == nil {
		t.Error("signed with another secret: verified")
	}
}
