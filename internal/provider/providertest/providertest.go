// Package providertest holds the checks the provider adapters' tests share:
// error classes, signature verdicts and signed vectors, verdicts against a
// reference library, the timestamp tolerance around a fixed vector, the event
// and status tables, the ISO currency round trip; and their scaffolding: the
// adapter under test against a fake server, canned answers, idempotency keys.
// Only test files import it.
package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/provider"
)

// AssertClass fails unless err matches class and no other class.
func AssertClass(t testing.TB, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Fatalf("err = %v, want class %v", err, class)
	}
	for _, other := range provider.Classes() {
		if other != class && errors.Is(err, other) {
			t.Errorf("err %v also matches %v", err, other)
		}
	}
}

// AssertRejected fails unless err rejects a webhook signature
// (provider.ErrInvalidSignature) for reason.
func AssertRejected(t testing.TB, err, reason error) {
	t.Helper()
	if !errors.Is(err, provider.ErrInvalidSignature) || !errors.Is(err, reason) {
		t.Fatalf("err = %v, want %v", err, reason)
	}
}

// AssertVerdict checks a webhook verification: the scheme must be scheme, and
// err nil when reason is nil, else a rejection for reason.
func AssertVerdict(t testing.TB, gotScheme, scheme string, err, reason error) {
	t.Helper()
	if gotScheme != scheme {
		t.Errorf("scheme = %q", gotScheme)
	}
	if reason == nil {
		if err != nil {
			t.Fatalf("want valid, got %v", err)
		}
		return
	}
	AssertRejected(t, err, reason)
}

// BlankSecretsRefused checks that an adapter never uses an empty or
// whitespace-only signing secret as a key, whatever it is handed: a request
// signed with one is rejected, alone or beside the real secret; the real secret
// beside a blank one still verifies (a blank key does not block a rotation);
// and with only blank secrets the rejection says the secret is blank. sign
// signs this test's request with a secret as the sender would (with the key the
// adapter would derive from it); verify is the adapter's VerifyWebhook, which
// must name scheme. good is a real secret.
func BlankSecretsRefused(t *testing.T, scheme string, good []byte, sign func(t *testing.T, secret []byte) http.Header, verify func(h http.Header, secrets [][]byte) (string, error)) {
	t.Helper()
	for _, blank := range []string{"", " ", "\n", " \t\r\n"} {
		b, q := []byte(blank), strconv.Quote(blank)
		tests := []struct {
			name      string
			signedBy  []byte
			secrets   [][]byte
			ok        bool
			saysBlank bool
		}{
			{"a request signed with " + q + " is refused when it is the only secret", b, [][]byte{b}, false, true},
			{"a genuine request is refused when " + q + " is the only secret", good, [][]byte{b}, false, true},
			{"a request signed with " + q + " is refused beside the real secret", b, [][]byte{b, good}, false, false},
			{"a request signed with " + q + " is refused beside the real secret listed first", b, [][]byte{good, b}, false, false},
			{q + " beside the real secret does not block it", good, [][]byte{b, good}, true, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				gotScheme, err := verify(sign(t, tt.signedBy), tt.secrets)
				if tt.ok {
					AssertVerdict(t, gotScheme, scheme, err, nil)
					return
				}
				AssertVerdict(t, gotScheme, scheme, err, provider.ErrNoMatchingSignature)
				if tt.saysBlank && !strings.Contains(err.Error(), "blank") {
					t.Errorf("err = %v, want it to say the secret is blank", err)
				}
			})
		}
	}
}

// ClockCase is our clock at now against a signed timestamp; ok says whether
// the timestamp is within the tolerance.
type ClockCase struct {
	Name string
	Now  time.Time
	OK   bool
}

// EachTolerance moves our clock around the signed time ts, for a tolerance of
// 5 minutes and of 30 seconds, and runs check in a subtest per clock: a
// timestamp ahead of our clock is as acceptable as one behind it, up to the
// tolerance inclusive. what names the signed time in the subtests' names
// ("timestamp").
func EachTolerance(t *testing.T, what string, ts time.Time, check func(t *testing.T, tol time.Duration, c ClockCase)) {
	t.Helper()
	for _, tol := range []time.Duration{5 * time.Minute, 30 * time.Second} {
		tests := []ClockCase{
			{"same second", ts, true},
			{"exactly +tolerance (" + what + " ahead of our clock)", ts.Add(-tol), true},
			{"exactly -tolerance (" + what + " behind our clock)", ts.Add(tol), true},
			{"tolerance+1s ahead", ts.Add(-tol - time.Second), false},
			{"tolerance+1s behind", ts.Add(tol + time.Second), false},
		}
		if tol == 5*time.Minute {
			tests = append(tests, ClockCase{"4 minutes ahead", ts.Add(-4 * time.Minute), true}, ClockCase{"4 minutes behind", ts.Add(4 * time.Minute), true})
		}
		for _, c := range tests {
			t.Run(tol.String()+" "+c.Name, func(t *testing.T) { check(t, tol, c) })
		}
	}
}

// ToleranceBothDirections is EachTolerance for a verification at a clock:
// verify with the tolerance at our clock now is accepted within the
// tolerance, else rejected for it.
func ToleranceBothDirections(t *testing.T, what string, ts time.Time, verify func(tol time.Duration, now time.Time) error) {
	t.Helper()
	EachTolerance(t, what, ts, func(t *testing.T, tol time.Duration, c ClockCase) {
		AssertTolerance(t, verify(tol, c.Now), c.OK)
	})
}

// ChangeRejected checks, in a subtest, that a change (named change) to the
// independently signed webhook vector makes its verification fail (err) for
// no matching signature.
func ChangeRejected(t *testing.T, vector, change string, err error) {
	t.Helper()
	t.Run(vector+" rejected with "+change, func(t *testing.T) {
		AssertRejected(t, err, provider.ErrNoMatchingSignature)
	})
}

// Flip changes one byte of s (the middle one, by one bit).
func Flip(s string) string {
	b := []byte(s)
	b[len(b)/2] ^= 0x01
	return string(b)
}

// AssertTolerance checks a verification at a clock: accepted when ok, else
// rejected for the timestamp tolerance.
func AssertTolerance(t testing.TB, err error, ok bool) {
	t.Helper()
	if ok && err != nil {
		t.Fatalf("rejected: %v", err)
	}
	if !ok && (!errors.Is(err, provider.ErrInvalidSignature) || !errors.Is(err, provider.ErrTimestampTolerance)) {
		t.Fatalf("err = %v, want a tolerance rejection", err)
	}
}

// SameVerdict checks that an adapter judges a signed request as a reference
// library (the provider's own, or the scheme's official one) does. The library
// reads the wall clock and the request carries whole seconds, so verify (the
// adapter at our clock now) is asked at the instants just before and just after
// library runs: when the two agree, the library, whose clock lay in between,
// must agree with them; when they differ, the tolerance edge fell within the call
// and either verdict is the library's at some instant of it. want is the
// library's verdict, stated so that a table reads as a list of rules; rejects,
// when set, says why the adapter rejects by design what the library accepts.
func SameVerdict(t testing.TB, library func() error, verify func(now time.Time) error, want bool, rejects string) {
	t.Helper()
	before := time.Now()
	lib := library()
	after := time.Now()
	got := verify(before)
	if gotAfter := verify(after); (got == nil) != (gotAfter == nil) {
		t.Logf("the tolerance edge fell within the library's call (%v, then %v); library: %v", got, gotAfter, lib)
		return
	}
	if (lib == nil) != want {
		t.Fatalf("library: %v, want accepted=%v", lib, want)
	}
	if rejects != "" {
		if got == nil {
			t.Fatalf("accepted; the table says it is rejected because %s", rejects)
		}
		t.Logf("library accepts, rejected (%v) by design: %s", got, rejects)
		return
	}
	if (got == nil) != (lib == nil) {
		t.Fatalf("library: %v, adapter: %v", lib, got)
	}
}

// EventTypeTable checks an adapter's event type table (table) against want,
// row by row through mapType, and that the event types unsupported are
// acknowledged but not acted on.
func EventTypeTable(t *testing.T, want, table map[string]provider.Status, mapType func(string) (provider.Status, bool), unsupported ...string) {
	t.Helper()
	if len(table) != len(want) {
		t.Errorf("table has %d rows, test covers %d", len(table), len(want))
	}
	for typ, st := range want {
		t.Run(fmt.Sprintf("%s is supported as %s", typ, st), func(t *testing.T) {
			if got, ok := mapType(typ); !ok || got != st {
				t.Fatalf("got %s %v", got, ok)
			}
		})
	}
	for _, typ := range unsupported {
		t.Run(typ+" is acknowledged but not acted on", func(t *testing.T) {
			if _, ok := mapType(typ); ok {
				t.Fatal("supported")
			}
		})
	}
}

// ISOEcho is an adapter for an API that takes ISO 4217 minor units as integers,
// in front of a fake that answers a create with a succeeded payment for the
// amount it was sent.
type ISOEcho struct {
	serve     func(t *testing.T, h http.HandlerFunc) provider.Provider
	fake      EchoFake
	reference string
	event     func(wire, code string) (provider.Event, error)
}

// NewISOEcho is the adapter serve builds against a new fake, its creates made
// with the merchant reference reference; event parses the provider's succeeded
// webhook event for the amount wire (as it was sent) of code.
func NewISOEcho[P provider.Provider](serve func(t *testing.T, h http.HandlerFunc) P, fake EchoFake, reference string,
	event func(wire, code string) (provider.Event, error)) ISOEcho {
	return ISOEcho{
		serve: func(t *testing.T, h http.HandlerFunc) provider.Provider { return serve(t, h) },
		fake:  fake, reference: reference, event: event,
	}
}

// EchoFake is the provider's side of an ISOEcho: where a create body carries
// the amount, and the answer to a create.
type EchoFake struct {
	// Amount is the path of the amount's number in a create's JSON body
	// ("amount", "value" for {"amount":{"value":1999}}).
	Amount []string
	// Answer is the status and the object the fake answers a create body with
	// (a succeeded payment for the amount it was sent); an error is answered
	// 400.
	Answer func(body []byte) (status int, object any, err error)
}

// echoServer is an EchoFake at work: it records how many requests came and
// the last amount exactly as it appeared on the wire.
type echoServer struct {
	EchoFake
	requests atomic.Int32
	wire     json.Number
}

func (s *echoServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	b, _ := io.ReadAll(r.Body)
	wire, err := numberAt(b, s.Amount)
	var status int
	var object any
	if err == nil {
		status, object, err = s.Answer(b)
	}
	if err != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	s.wire = wire
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(object)
}

// numberAt is the number at path in the JSON document b, as it is written
// there; "" when a member on the way is absent or null.
func numberAt(b []byte, path []string) (json.Number, error) {
	raw := json.RawMessage(b)
	for _, name := range path {
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return "", err
		}
		if raw = members[name]; raw == nil {
			return "", nil
		}
	}
	var n json.Number
	err := json.Unmarshal(raw, &n)
	return n, err
}

// create creates a payment of minor units of code with a new fake, and returns
// the adapter's answer and what the fake saw.
func (e ISOEcho) create(t *testing.T, minor int64, code string) (p provider.Payment, wire string, requests int32, err error) {
	srv := &echoServer{EchoFake: e.fake}
	p, err = e.serve(t, srv.ServeHTTP).Create(context.Background(), provider.CreateRequest{IdempotencyKey: "k", MerchantReference: e.reference, Amount: minor, Currency: code})
	return p, srv.wire.String(), srv.requests.Load(), err
}

// EveryISOCurrencyRoundTrips checks that every ISO currency goes out and comes
// back (create answer and webhook event) unchanged, including amounts past 2^53
// that a float64 on the way would corrupt.
func EveryISOCurrencyRoundTrips(t *testing.T, e ISOEcho) {
	t.Helper()
	for _, code := range currency.Codes() {
		for _, minor := range []int64{1, 1999, 199900, 9007199254740993} {
			t.Run(fmt.Sprintf("%d %s", minor, code), func(t *testing.T) {
				p, wire, _, err := e.create(t, minor, code)
				if err != nil {
					t.Fatal(err)
				}
				if wire != fmt.Sprint(minor) {
					t.Errorf("sent amount %s", wire)
				}
				if p.Amount != minor || p.Currency != code {
					t.Errorf("read back %d %s", p.Amount, p.Currency)
				}
				ev, err := e.event(wire, code)
				if err != nil || ev.Amount != minor || ev.Currency != code {
					t.Errorf("event read back %d %s %v", ev.Amount, ev.Currency, err)
				}
			})
		}
	}
}

// CreateRefusesUnknownCurrencies checks that a create in a code that is not an
// ISO currency with a minor unit is refused (NonRetryable,
// ErrAmountNotRepresentable) before any request.
func CreateRefusesUnknownCurrencies(t *testing.T, e ISOEcho) {
	t.Helper()
	for _, code := range []string{"XYZ", "usd", "", "US", "HRK", "XAU", "XDR"} {
		t.Run(fmt.Sprintf("%q", code), func(t *testing.T) {
			_, _, n, err := e.create(t, 100, code)
			AssertClass(t, err, provider.ErrNonRetryable)
			if !errors.Is(err, provider.ErrAmountNotRepresentable) {
				t.Errorf("err %v does not wrap ErrAmountNotRepresentable", err)
			}
			if n != 0 {
				t.Errorf("%d requests sent", n)
			}
		})
	}
}

// StatusTable checks an adapter's status table (table) against want, row by
// row, and the adapter's mapping of each raw status through mapStatus; a
// status the table does not list (unlisted) maps to Unknown, never to a final
// status. what names the raw status in the subtests' names ("jobStatus").
func StatusTable(t *testing.T, what string, want, table map[string]provider.Status, mapStatus func(t *testing.T, raw string) provider.Status, unlisted string) {
	t.Helper()
	statusTable(t, what, want, table, mapStatus, unlisted, provider.StatusUnknown)
}

// RefundStatusTable is StatusTable for an adapter's refund status table: a
// refund status the table does not list (unlisted) maps to RefundUnknown.
func RefundStatusTable(t *testing.T, want, table map[string]provider.RefundStatus, mapStatus func(raw string) provider.RefundStatus, unlisted string) {
	t.Helper()
	statusTable(t, "refund status", want, table, func(_ *testing.T, raw string) provider.RefundStatus { return mapStatus(raw) }, unlisted, provider.RefundUnknown)
}

func statusTable[S ~string](t *testing.T, what string, want, table map[string]S, mapStatus func(t *testing.T, raw string) S, unlisted string, unknown S) {
	t.Helper()
	if len(table) != len(want) {
		t.Errorf("table has %d rows, test covers %d", len(table), len(want))
	}
	for raw, st := range want {
		t.Run(fmt.Sprintf("%s %s is %s", what, raw, st), func(t *testing.T) {
			if table[raw] != st {
				t.Errorf("table says %s", table[raw])
			}
			if got := mapStatus(t, raw); got != st {
				t.Fatalf("got %s", got)
			}
		})
	}
	t.Run("an unlisted "+what+" is "+string(unknown)+", never final", func(t *testing.T) {
		if got := mapStatus(t, unlisted); got != unknown {
			t.Fatalf("got %s", got)
		}
	})
}

// ParsedEvent checks an adapter's ParseEvent (parse) on the webhook body raw:
// the event is want, occurred at occurredAt, with raw unaltered as Raw.
func ParsedEvent(t testing.TB, parse func([]byte) (provider.Event, error), raw string, occurredAt time.Time, want provider.Event) {
	t.Helper()
	got, err := parse([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Raw) != raw {
		t.Error("Raw is not the exact input")
	}
	if !got.OccurredAt.Equal(occurredAt) {
		t.Errorf("OccurredAt = %v", got.OccurredAt)
	}
	got.Raw, got.OccurredAt = nil, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// MalformedEvents checks that an adapter's ParseEvent (parse) refuses every
// body of malformed as provider.ErrMalformedEvent, in a subtest each.
func MalformedEvents(t *testing.T, parse func([]byte) (provider.Event, error), malformed ...string) {
	t.Helper()
	for _, bad := range malformed {
		t.Run("malformed "+bad, func(t *testing.T) {
			if _, err := parse([]byte(bad)); !errors.Is(err, provider.ErrMalformedEvent) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// SetAside checks an events page read with one unreadable event among the
// events of the list (ListEvents' answer page, err): it holds the one event
// good, sets the event bad aside as provider.ErrMalformedEvent, and has more
// to read from the cursor next, so the unreadable event stops nothing behind
// it.
func SetAside(t testing.TB, page provider.EventPage, err error, good, bad, next string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 1 || page.Events[0].ID != good || len(page.Unreadable) != 1 || page.Unreadable[0].ID != bad ||
		!errors.Is(page.Unreadable[0].Err, provider.ErrMalformedEvent) || page.NextCursor != next || !page.HasMore {
		t.Fatalf("%+v", page)
	}
}

// FuzzedEvent is the check of an adapter's FuzzParseEvent on the fuzzed body
// b: ParseEvent (parse) refuses it as provider.ErrMalformedEvent, or accepts
// an event with an id and a type, b unaltered as Raw, and a status exactly
// when it is supported.
func FuzzedEvent(t *testing.T, b []byte, parse func([]byte) (provider.Event, error)) {
	t.Helper()
	ev, err := parse(b)
	if err != nil {
		if !errors.Is(err, provider.ErrMalformedEvent) {
			t.Fatalf("error not classified: %v", err)
		}
		return
	}
	if ev.ID == "" || ev.Type == "" || string(ev.Raw) != string(b) {
		t.Fatalf("accepted event without id/type or altered raw: %+v", ev)
	}
	if ev.Supported == (ev.Status == "") {
		t.Fatalf("supported=%v with status %q", ev.Supported, ev.Status)
	}
}

// WaitRefund polls the refund refundID of paymentID through a until it is
// want, for at most 10 seconds, and returns it.
func WaitRefund(t testing.TB, a provider.Provider, paymentID, refundID string, want provider.RefundStatus) provider.Refund {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := a.GetRefund(context.Background(), paymentID, refundID)
		if err == nil && r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("refund %s: %+v %v, want %s", refundID, r, err, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
