package generic_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/providertest"
)

var (
	now    = time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)
	oldKey = []byte("whsec_" + base64.StdEncoding.EncodeToString([]byte("old signing key bytes")))
	newKey = []byte("whsec_" + base64.StdEncoding.EncodeToString([]byte("new signing key bytes")))
	body   = []byte(`{"id":"msg_1","type":"job.succeeded","timestamp":"2026-09-21T12:00:00Z","data":{"jobId":"job_1","correlationId":"ref-1","jobStatus":"succeeded","amount":{"value":1999,"currency":"USD"}}}`)
)

// TestStandardWebhooksSpecVector checks Sign against the example in the Standard
// Webhooks specification, so paysim and the adapter cannot agree on a wrong scheme.
func TestStandardWebhooksSpecVector(t *testing.T) {
	key, err := generic.DecodeSecret([]byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
	if err != nil {
		t.Fatal(err)
	}
	got := generic.Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func headers(t *testing.T, id string, ts time.Time, secrets ...[]byte) http.Header {
	t.Helper()
	h, err := generic.SignHeaders(id, ts, body, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func sig(t *testing.T, secret []byte, ts time.Time) string {
	k, err := generic.DecodeSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	return generic.Sign(k, "msg_1", ts.Unix(), body)
}

// TestSignatureVectors is the vector list of issue 3 for Standard Webhooks.
func TestSignatureVectors(t *testing.T) {
	wrong := []byte("whsec_" + base64.StdEncoding.EncodeToString([]byte("attacker")))
	with := func(sigHeader string) http.Header {
		return http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sigHeader}}
	}
	// padded is a valid signature header grown to n bytes by an ignored v1a entry.
	padded := func(n int) string {
		h := "v1," + sig(t, newKey, now) + " v1a,"
		return h + strings.Repeat("A", n-len(h))
	}
	without := func(name string) http.Header {
		h := headers(t, "msg_1", now, newKey)
		h.Del(name)
		return h
	}
	tests := []struct {
		name    string
		h       http.Header
		body    []byte
		secrets [][]byte
		reason  error
	}{
		{"valid", headers(t, "msg_1", now, newKey), body, [][]byte{newKey}, nil},
		{"tampered body", headers(t, "msg_1", now, newKey), []byte(strings.Replace(string(body), "1999", "9999", 1)), [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"tampered webhook-id", func() http.Header { h := headers(t, "msg_1", now, newKey); h.Set("webhook-id", "msg_2"); return h }(), body, [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"wrong secret", headers(t, "msg_1", now, wrong), body, [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"two signatures only the second valid", with("v1," + sig(t, wrong, now) + " v1," + sig(t, newKey, now)), body, [][]byte{newKey}, nil},
		{"only the old secret valid during rotation", with("v1," + sig(t, oldKey, now)), body, [][]byte{oldKey, newKey}, nil},
		{"rotation headers signed by both secrets", headers(t, "msg_1", now, oldKey, newKey), body, [][]byte{newKey}, nil},
		{"timestamp six minutes old", headers(t, "msg_1", now.Add(-6*time.Minute), newKey), body, [][]byte{newKey}, provider.ErrTimestampTolerance},
		{"timestamp six minutes in the future", headers(t, "msg_1", now.Add(6*time.Minute), newKey), body, [][]byte{newKey}, provider.ErrTimestampTolerance},
		{"missing webhook-signature", without("webhook-signature"), body, [][]byte{newKey}, provider.ErrMissingHeader},
		{"missing webhook-id", without("webhook-id"), body, [][]byte{newKey}, provider.ErrMissingHeader},
		{"missing webhook-timestamp", without("webhook-timestamp"), body, [][]byte{newKey}, provider.ErrMissingHeader},
		{"malformed signature entry without version", with(sig(t, newKey, now)), body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"malformed timestamp", func() http.Header {
			h := headers(t, "msg_1", now, newKey)
			h.Set("webhook-timestamp", "2026-09-21")
			return h
		}(), body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"entries in another order", with("v1a,c2lnbmF0dXJl v1," + sig(t, wrong, now) + " v1," + sig(t, newKey, now)), body, [][]byte{newKey}, nil},
		{"unknown schemes are ignored", with("v2," + sig(t, newKey, now) + " v1a,xyz v1," + sig(t, newKey, now)), body, [][]byte{newKey}, nil},
		{"only unknown schemes is no match", with("v1a," + sig(t, newKey, now)), body, [][]byte{newKey}, provider.ErrNoMatchingSignature},
		{"raw secret without prefix", headers(t, "msg_1", now, []byte("plain-secret")), body, [][]byte{[]byte("plain-secret")}, nil},
		{"a broken secret does not block the good one", headers(t, "msg_1", now, newKey), body, [][]byte{[]byte("whsec_!!!notbase64"), newKey}, nil},
		{"no secrets configured", headers(t, "msg_1", now, newKey), body, nil, provider.ErrNoMatchingSignature},
		{"a blank webhook-signature is a missing header", with("   "), body, [][]byte{newKey}, provider.ErrMissingHeader},
		{"an entry with an empty version is malformed", with("," + sig(t, newKey, now)), body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"a negative timestamp is malformed", func() http.Header {
			h := headers(t, "msg_1", now, newKey)
			h.Set("webhook-timestamp", "-"+strconv.FormatInt(now.Unix(), 10))
			return h
		}(), body, [][]byte{newKey}, provider.ErrMalformedHeader},
		{"a webhook-signature of exactly 4096 bytes is read", with(padded(4096)), body, [][]byte{newKey}, nil},
		{"a webhook-signature of 4097 bytes is refused before any HMAC", with(padded(4097)), body, [][]byte{newKey}, provider.ErrMalformedHeader},
	}
	a := providertest.At(t, providertest.Unreachable, newAdapter)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scheme, err := a.VerifyWebhook(context.Background(), tt.h, tt.body, tt.secrets, 5*time.Minute, now)
			providertest.AssertVerdict(t, scheme, provider.SchemeStandardWebhooks, err, tt.reason)
		})
	}
}

// TestBlankSecretsAreNeverKeys: DecodeSecret hands a secret without the whsec_
// prefix back as raw bytes, so a blank one would be an HMAC key anyone can use.
func TestBlankSecretsAreNeverKeys(t *testing.T) {
	a := providertest.At(t, providertest.Unreachable, newAdapter)
	providertest.BlankSecretsRefused(t, provider.SchemeStandardWebhooks, newKey,
		func(t *testing.T, secret []byte) http.Header { return headers(t, "msg_1", now, secret) },
		func(h http.Header, secrets [][]byte) (string, error) {
			return a.VerifyWebhook(context.Background(), h, body, secrets, 5*time.Minute, now)
		})
	t.Run("a blank secret beside an undecodable one is no usable secret", func(t *testing.T) {
		_, err := a.VerifyWebhook(context.Background(), headers(t, "msg_1", now, newKey), body, [][]byte{[]byte(" "), []byte("whsec_!!!")}, 5*time.Minute, now)
		providertest.AssertRejected(t, err, provider.ErrNoMatchingSignature)
	})
}

func TestDecodeSecret(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
		wantErr  bool
	}{
		{"whsec base64 is decoded", "whsec_" + base64.StdEncoding.EncodeToString([]byte("key")), "key", false},
		{"trailing newline from a file is trimmed", "whsec_" + base64.StdEncoding.EncodeToString([]byte("key")) + "\n", "key", false},
		{"missing padding is accepted", "whsec_" + base64.RawStdEncoding.EncodeToString([]byte("keyy")), "keyy", false},
		{"no prefix is used raw", "raw key", "raw key", false},
		{"a raw secret is used byte for byte, whitespace included", " raw key\n", " raw key\n", false},
		{"whitespace before the prefix is trimmed", " \twhsec_" + base64.StdEncoding.EncodeToString([]byte("key")), "key", false},
		{"padding cut short is accepted", "whsec_" + strings.TrimSuffix(base64.StdEncoding.EncodeToString([]byte("keyy")), "="), "keyy", false},
		{"invalid base64 is an error", "whsec_***", "", true},
		{"empty after prefix is an error", "whsec_", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := generic.DecodeSecret([]byte(tt.in))
			if (err != nil) != tt.wantErr || string(got) != tt.want {
				t.Fatalf("got %q, %v", got, err)
			}
		})
	}
}

// TestVerificationKeys: Verify tries every key a secret stands for. An
// unprefixed secret is its bytes as they are (providers that hand out plain
// secrets) and, when it is base64, the key it encodes (the official libraries
// read a bare base64 secret as the whsec_ one); a whsec_ secret is only the
// key it encodes.
func TestVerificationKeys(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("key!"))
	tests := []struct {
		name, in string
		want     []string
		wantErr  bool
	}{
		{"a whsec_ secret is the key it encodes", "whsec_" + b64, []string{"key!"}, false},
		{"a bare base64 secret is its bytes and the key it encodes", b64, []string{b64, "key!"}, false},
		{"a bare base64 secret with a newline: its bytes as written, the key it encodes", b64 + "\n", []string{b64 + "\n", "key!"}, false},
		{"a bare base64 secret without its padding", strings.TrimRight(base64.StdEncoding.EncodeToString([]byte("keyy")), "="), []string{"a2V5eQ", "keyy"}, false},
		{"a raw secret that is not base64 is only its bytes", "raw key", []string{"raw key"}, false},
		{"an ed25519 key is refused", "whpk_" + b64, nil, true},
		{"a whsec_ secret that is not base64 is refused", "whsec_***", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := generic.VerificationKeys([]byte(tt.in))
			var got []string
			for _, k := range keys {
				got = append(got, string(k))
			}
			if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
			if cerr := generic.CheckSecret([]byte(tt.in)); (cerr != nil) != tt.wantErr {
				t.Errorf("CheckSecret: %v, VerificationKeys: %v", cerr, err)
			}
		})
	}
}

func TestJobStatusTable(t *testing.T) {
	want := map[string]provider.Status{
		"processing": provider.StatusProcessing, "succeeded": provider.StatusSucceeded, "failed": provider.StatusFailed,
		"unknown": provider.StatusUnknown, "expired": provider.StatusExpired,
		"partially_refunded": provider.StatusRefund, "refunded": provider.StatusRefund,
	}
	providertest.StatusTable(t, "jobStatus", want, generic.JobStatuses(),
		func(_ *testing.T, raw string) provider.Status { return generic.MapJobStatus(raw) }, "paused")
}

func TestEventTypeTable(t *testing.T) {
	want := map[string]provider.Status{
		"job.processing": provider.StatusProcessing, "job.succeeded": provider.StatusSucceeded, "job.failed": provider.StatusFailed,
		"job.expired": provider.StatusExpired, "job.refunded": provider.StatusRefund, "job.disputed": provider.StatusDispute,
		"job.refund_failed": provider.StatusRefund,
	}
	providertest.EventTypeTable(t, want, generic.EventStatuses(), generic.MapEventType, "job.unknown")
}

func TestParseEvent(t *testing.T) {
	ev, err := generic.ParseEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	want := provider.Event{ID: "msg_1", Type: "job.succeeded", Status: provider.StatusSucceeded, Supported: true,
		OccurredAt: now, PaymentID: "job_1", MerchantReference: "ref-1", Amount: 1999, Currency: "USD", Raw: body}
	if fmt.Sprintf("%+v", ev) != fmt.Sprintf("%+v", want) {
		t.Fatalf("got  %+v\nwant %+v", ev, want)
	}
	refund := `{"id":"msg_2","type":"job.refunded","timestamp":"2026-09-21T12:00:00Z","data":{"jobId":"job_1","correlationId":"ref-1","jobStatus":"partially_refunded","amount":{"value":1999,"currency":"USD"},"amountReceived":{"value":1999,"currency":"USD"},"amountRefunded":{"value":500,"currency":"USD"}}}`
	ev, err = generic.ParseEvent([]byte(refund))
	if err != nil || ev.Status != provider.StatusRefund || ev.RefundedTotal != 500 || ev.Amount != 1999 {
		t.Fatalf("refund: %+v %v", ev, err)
	}
	failed := `{"id":"msg_3","type":"job.failed","timestamp":"2026-09-21T12:00:00Z","data":{"jobId":"job_2","correlationId":"ref-2","jobStatus":"failed","amount":{"value":5,"currency":"EUR"},"failure":{"code":"insufficient_funds","message":"nope"}}}`
	ev, err = generic.ParseEvent([]byte(failed))
	if err != nil || ev.Status != provider.StatusFailed || ev.FailureCode != "insufficient_funds" || ev.FailureMessage != "nope" {
		t.Fatalf("failed: %+v %v", ev, err)
	}
	for _, bad := range []string{``, `"x"`, `{"type":"job.failed"}`, `{"id":"m","type":"job.failed"}`, `{"id":"m","type":"job.failed","data":[]}`,
		`{"type":"job.created","data":{"jobId":"job_1"}}`, `{"id":"m","data":{"jobId":"job_1"}}`, `{"id":"m","type":"job.failed","data":null}`} {
		if _, err := generic.ParseEvent([]byte(bad)); !errors.Is(err, provider.ErrMalformedEvent) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

// TestEventsPaywardenCannotStoreAreMalformed: a Payment's status takes only a
// currency of three letters A-Z and a time in the years 0000-9999 (RFC 3339, in
// UTC). An event carrying anything else was answered 200 and then never
// applied: the API server refused every status write, and the provider, told
// the event arrived, never sent it again. A currency in lower case is the ISO
// code it spells; anything else is malformed (400), nothing stored.
func TestEventsPaywardenCannotStoreAreMalformed(t *testing.T) {
	event := func(typ, ts, data string) string {
		return `{"id":"msg_1","type":"` + typ + `","timestamp":"` + ts + `","data":` + data + `}`
	}
	succeeded := func(cur string) string {
		return event("job.succeeded", "2026-09-21T12:00:00Z", `{"jobId":"job_1","jobStatus":"succeeded","amount":{"value":1999,"currency":"USD"},"amountReceived":{"value":1999,"currency":"`+cur+`"}}`)
	}
	t.Run("a currency in lower case is read as its ISO code", func(t *testing.T) {
		ev, err := generic.ParseEvent([]byte(succeeded("usd")))
		if err != nil || ev.Currency != "USD" {
			t.Fatalf("%+v, %v: want USD", ev, err)
		}
		refund := event("job.refunded", "2026-09-21T12:00:00Z", `{"jobId":"job_1","jobStatus":"refunded","amount":{"value":1999,"currency":"eur"},"refund":{"refundId":"rf_1","refundStatus":"succeeded","amount":{"value":1999,"currency":"Eur"}}}`)
		ev, err = generic.ParseEvent([]byte(refund))
		if err != nil || ev.Currency != "EUR" || ev.Refund == nil || ev.Refund.Currency != "EUR" {
			t.Fatalf("%+v, %v: want EUR on the event and its refund", ev, err)
		}
	})
	providertest.MalformedEvents(t, generic.ParseEvent,
		succeeded("US"), succeeded("USDT"), succeeded("u$d"), succeeded("usd "), succeeded("ÜSD"),
		event("job.processing", "2026-09-21T12:00:00Z", `{"jobId":"job_1","jobStatus":"processing","amount":{"value":1999,"currency":"12E"}}`),
		event("job.refund_failed", "2026-09-21T12:00:00Z", `{"jobId":"job_1","jobStatus":"succeeded","refund":{"refundId":"rf_1","refundStatus":"failed","amount":{"value":1,"currency":"EURO"}}}`),
		event("job.succeeded", "9999-12-31T23:59:59-01:00", `{"jobId":"job_1","jobStatus":"succeeded"}`),
		event("job.succeeded", "0000-01-01T00:00:00+01:00", `{"jobId":"job_1","jobStatus":"succeeded"}`),
		event("job.processing", "2026-09-21T12:00:00Z", `{"jobId":"job_1","jobStatus":"processing","action":{"url":"https://pay.example/a","expiresAt":"9999-12-31T23:00:00-02:00"}}`),
	)
}

// TestParseEventRefundAndUnknownTypes: the Refund an event settles, and event types
// paywarden does not act on, which parse (to be acknowledged and stored Ignored)
// whatever their data.
func TestParseEventRefundAndUnknownTypes(t *testing.T) {
	const head = `{"id":"msg_9","type":"%s","timestamp":"2026-09-21T12:00:00Z","data":%s}`
	const job = `{"jobId":"job_1","correlationId":"ref-1","jobStatus":"partially_refunded","amount":{"value":1999,"currency":"USD"},"refund":%s}`
	tests := []struct {
		name, typ, data string
		supported       bool
		refund          *provider.Refund
	}{
		{"a refund without a job id is the event's job's", "job.refunded", fmt.Sprintf(job, `{"refundId":"rf_1","refundStatus":"succeeded","amount":{"value":500,"currency":"USD"}}`), true,
			&provider.Refund{ID: "rf_1", PaymentID: "job_1", Status: provider.RefundSucceeded, RawStatus: "succeeded", Amount: 500, Currency: "USD"}},
		{"a refund keeps its own job id", "job.refund_failed", fmt.Sprintf(job, `{"refundId":"rf_2","jobId":"job_7","refundStatus":"failed","amount":{"value":500,"currency":"USD"}}`), true,
			&provider.Refund{ID: "rf_2", PaymentID: "job_7", Status: provider.RefundFailed, RawStatus: "failed", Amount: 500, Currency: "USD"}},
		{"a refund without a refund id settles no Refund", "job.refunded", fmt.Sprintf(job, `{"refundStatus":"succeeded","amount":{"value":500,"currency":"USD"}}`), true, nil},
		{"an unknown type with data of another shape", "job.created", `[]`, false, nil},
		{"an unknown type with null data", "job.created", `null`, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := generic.ParseEvent([]byte(fmt.Sprintf(head, tt.typ, tt.data)))
			if err != nil || ev.Supported != tt.supported || ev.ID != "msg_9" || ev.Type != tt.typ {
				t.Fatalf("%+v %v", ev, err)
			}
			if !reflect.DeepEqual(ev.Refund, tt.refund) {
				t.Fatalf("refund %+v, want %+v", ev.Refund, tt.refund)
			}
		})
	}
}

// TestEventsThatNameNoJobAreMalformed: an event's data is the job, known by its
// jobId and correlationId. A supported event whose data names neither could only
// wait Orphaned: it is malformed (400), like one with null data. Either alone is
// enough.
func TestEventsThatNameNoJobAreMalformed(t *testing.T) {
	for typ := range generic.EventStatuses() {
		raw := func(data string) []byte {
			return []byte(`{"id":"msg_1","type":"` + typ + `","timestamp":"2026-09-21T12:00:00Z","data":` + data + `}`)
		}
		for _, data := range []string{
			`{}`,
			`{"jobStatus":"succeeded","amount":{"value":1999,"currency":"USD"},"amountReceived":{"value":1999,"currency":"USD"}}`,
			`{"jobStatus":"partially_refunded","amount":{"value":1999,"currency":"USD"},"refund":{"refundId":"rf_1","refundStatus":"succeeded","amount":{"value":500,"currency":"USD"}}}`,
		} {
			t.Run(typ+" with "+data+" is malformed", func(t *testing.T) {
				ev, err := generic.ParseEvent(raw(data))
				if !errors.Is(err, provider.ErrMalformedEvent) || !strings.Contains(err.Error(), "names no job") {
					t.Fatalf("%+v, err = %v: want malformed for want of a job", ev, err)
				}
			})
		}
		for _, data := range []string{`{"jobId":"job_1"}`, `{"correlationId":"ref-1"}`} {
			t.Run(typ+" with "+data+" is kept", func(t *testing.T) {
				ev, err := generic.ParseEvent(raw(data))
				if err != nil || !ev.Supported || !ev.NamesPayment() {
					t.Fatalf("%+v, err = %v: want it parsed", ev, err)
				}
			})
		}
	}
	t.Run("an unsupported type with empty data parses unsupported", func(t *testing.T) {
		ev, err := generic.ParseEvent([]byte(`{"id":"msg_1","type":"job.unknown","data":{}}`))
		if err != nil || ev.Supported {
			t.Fatalf("%+v %v", ev, err)
		}
	})
}

func FuzzParseSignatureHeader(f *testing.F) {
	for _, s := range []string{"v1,abc", "v1,a v1,b", "v1a,x v1,y", "", "   ", "v1", ",abc", "v1,", "v1,a,b"} {
		f.Add(s, "1758456000")
	}
	f.Add("v1,abc", "-1")
	f.Add("v1,abc", "+1")
	f.Add("v1,abc", "99999999999999999999")
	f.Fuzz(func(t *testing.T, sigHeader, ts string) {
		sigs, err := generic.ParseSignatureHeader(sigHeader)
		if err != nil && !errors.Is(err, provider.ErrInvalidSignature) {
			t.Fatalf("error not classified: %v", err)
		}
		for _, s := range sigs {
			if s == "" {
				t.Fatal("empty signature kept")
			}
		}
		if _, err := generic.ParseTimestamp(ts); err != nil && !errors.Is(err, provider.ErrInvalidSignature) {
			t.Fatalf("error not classified: %v", err)
		}
		h := http.Header{"Webhook-Id": {"msg"}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sigHeader}}
		if err := generic.Verify(h, body, [][]byte{[]byte("unknown to the fuzzer")}, time.Minute, now); err == nil {
			t.Fatalf("fuzzed header verified: %q", sigHeader)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	f.Add(body)
	f.Add([]byte(`{"id":"m","type":"job.unknown","timestamp":"x","data":null}`))
	f.Add([]byte(`{"id":"m","type":"job.refunded","data":{"amountRefunded":null}}`))
	f.Add([]byte(`{"id":"m","type":"job.succeeded","data":{"refund":{"jobId":"job_1"}}}`))
	f.Add([]byte(`{"id":"m","type":"job.succeeded","timestamp":"9999-12-31T23:59:59-01:00","data":{"jobId":"j","amount":{"value":1,"currency":"usd"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		providertest.FuzzedEvent(t, b, generic.ParseEvent)
		// Every documented object names its payment: a supported event that
		// names none is refused, never stored to wait Orphaned.
		ev, err := generic.ParseEvent(b)
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
