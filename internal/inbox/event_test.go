package inbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
)

var testProvider = &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kukopay"}}

func TestNewEvent(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	raw := []byte(`{"id":"evt_1"}`)
	ev := provider.Event{ID: "evt_1", Type: "payment.succeeded", PaymentID: "pay_1", MerchantReference: "order-1", Raw: raw}

	t.Run("name is derived from provider and event id, so a second copy collides", func(t *testing.T) {
		a, err := NewEvent(testProvider, ev, v1alpha1.ViaWebhook, provider.SchemeKukoPay, now)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := NewEvent(testProvider, ev, v1alpha1.ViaBackfill, "", now.Add(time.Hour))
		if a.Name != b.Name || a.Name != v1alpha1.WebhookEventName("kukopay", "evt_1") || a.Namespace != "shop" {
			t.Fatalf("webhook copy %s/%s and backfill copy %s/%s must share the deterministic name", a.Namespace, a.Name, b.Namespace, b.Name)
		}
		sum := sha256.Sum256(raw)
		if a.Spec.Payload != string(raw) || a.Spec.PayloadTruncated || a.Spec.PayloadSHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("payload %q truncated=%v sha=%s", a.Spec.Payload, a.Spec.PayloadTruncated, a.Spec.PayloadSHA256)
		}
	})

	t.Run("a payload over 64 KiB is cut on a rune boundary, flagged and hashed whole", func(t *testing.T) {
		big := []byte(strings.Repeat("a", v1alpha1.MaxStoredPayload-1) + "é" + strings.Repeat("b", 100))
		e := ev
		e.Raw = big
		got, err := NewEvent(testProvider, e, v1alpha1.ViaWebhook, "", now)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(big)
		if !got.Spec.PayloadTruncated || len(got.Spec.Payload) > v1alpha1.MaxStoredPayload || !utf8.ValidString(got.Spec.Payload) {
			t.Fatalf("truncated=%v len=%d valid=%v", got.Spec.PayloadTruncated, len(got.Spec.Payload), utf8.ValidString(got.Spec.Payload))
		}
		if got.Spec.PayloadSHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("sha256 is not of the whole body")
		}
		if _, err := Reparse(nil, got); !errors.Is(err, ErrNotReparsable) {
			t.Errorf("a truncated payload must not be parsed again: %v", err)
		}
	})

	t.Run("a payload is cut only past 64 KiB, and then to 64 KiB where a rune starts there", func(t *testing.T) {
		for _, tc := range []struct {
			name      string
			raw       []byte
			keep      int
			truncated bool
		}{
			{"exactly 64 KiB: kept whole", []byte(strings.Repeat("a", v1alpha1.MaxStoredPayload)), v1alpha1.MaxStoredPayload, false},
			{"one byte over: cut to 64 KiB", []byte(strings.Repeat("a", v1alpha1.MaxStoredPayload+1)), v1alpha1.MaxStoredPayload, true},
			// No rune starts anywhere in it: nothing of it is text to keep.
			{"over and no text at all: cut to nothing", bytes.Repeat([]byte{0x80}, v1alpha1.MaxStoredPayload+1), 0, true},
		} {
			e := ev
			e.Raw = tc.raw
			got, err := NewEvent(testProvider, e, v1alpha1.ViaWebhook, "", now)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if len(got.Spec.Payload) != tc.keep || got.Spec.PayloadTruncated != tc.truncated {
				t.Errorf("%s: kept %d bytes, truncated=%v; want %d, %v", tc.name, len(got.Spec.Payload), got.Spec.PayloadTruncated, tc.keep, tc.truncated)
			}
		}
	})

	for name, mutate := range map[string]func(*provider.Event){
		"an event without an id":                  func(e *provider.Event) { e.ID = "" },
		"an id longer than the schema":            func(e *provider.Event) { e.ID = strings.Repeat("x", 513) },
		"a type over 256":                         func(e *provider.Event) { e.Type = strings.Repeat("x", 257) },
		"a provider payment id over 255":          func(e *provider.Event) { e.PaymentID = strings.Repeat("x", 256) },
		"a merchant reference over 255":           func(e *provider.Event) { e.MerchantReference = strings.Repeat("x", 256) },
		"a merchant reference of 256 characters":  func(e *provider.Event) { e.MerchantReference = strings.Repeat("é", 256) },
		"a provider refund id over 255":           func(e *provider.Event) { e.Refund = &provider.Refund{ID: strings.Repeat("x", 256)} },
		"a refund reference over 512":             func(e *provider.Event) { e.Refund = &provider.Refund{Reference: strings.Repeat("x", 513)} },
		"an event id that is not UTF-8":           func(e *provider.Event) { e.ID = "evt_\xff" },
		"a provider payment id that is not UTF-8": func(e *provider.Event) { e.PaymentID = "\xff" },
		"a merchant reference that is not UTF-8":  func(e *provider.Event) { e.MerchantReference = "\xff" },
	} {
		t.Run(name+" cannot be stored", func(t *testing.T) {
			e := ev
			mutate(&e)
			if _, err := NewEvent(testProvider, e, v1alpha1.ViaWebhook, "", now); !errors.Is(err, ErrInvalidEvent) {
				t.Fatalf("err %v, want ErrInvalidEvent", err)
			}
		})
	}

	// The checks are the schema's limits, not tighter: what the API server
	// would store is stored.
	for name, mutate := range map[string]func(*provider.Event){
		"an id of 512":                 func(e *provider.Event) { e.ID = strings.Repeat("x", 512) },
		"a type of 256":                func(e *provider.Event) { e.Type = strings.Repeat("x", 256) },
		"a provider payment id of 255": func(e *provider.Event) { e.PaymentID = strings.Repeat("x", 255) },
		"a merchant reference of 255":  func(e *provider.Event) { e.MerchantReference = strings.Repeat("x", 255) },
		// The schema counts characters, as the API server does: a Payment's
		// merchant reference of 64 four-byte characters (its limit) is 256
		// bytes, and its events are stored.
		"a merchant reference of 64 four-byte characters": func(e *provider.Event) { e.MerchantReference = strings.Repeat("💳", 64) },
		"an id of 512 two-byte characters":                func(e *provider.Event) { e.ID = strings.Repeat("é", 512) },
		"a refund reference of 512 two-byte characters": func(e *provider.Event) {
			e.Refund = &provider.Refund{ID: "re_1", Reference: strings.Repeat("é", 512)}
		},
		"a provider refund id of 255": func(e *provider.Event) {
			e.Refund = &provider.Refund{ID: strings.Repeat("x", 255), Reference: "shop/r1/uid"}
		},
		// A refund made in the provider's dashboard keeps whatever reference
		// was typed there, up to what the provider allows.
		"a refund reference of 512": func(e *provider.Event) { e.Refund = &provider.Refund{ID: "re_1", Reference: strings.Repeat("x", 512)} },
	} {
		t.Run(name+" is stored", func(t *testing.T) {
			e := ev
			mutate(&e)
			if _, err := NewEvent(testProvider, e, v1alpha1.ViaWebhook, "", now); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReparseRefusesAPayloadThatIsNotTheStoredEvent: the record's name was
// derived from spec.eventID, so a payload carrying another id was not written
// by the receiver and must not move a payment.
func TestReparseRefusesAPayloadThatIsNotTheStoredEvent(t *testing.T) {
	adapter := fakeParser{}
	evt := &v1alpha1.WebhookEvent{Spec: v1alpha1.WebhookEventSpec{EventID: "evt_stored", Payload: `{"id":"evt_other"}`}}
	if _, err := Reparse(adapter, evt); !errors.Is(err, ErrNotReparsable) || !strings.Contains(err.Error(), "evt_other") {
		t.Fatalf("payload with another id: err %v, want ErrNotReparsable naming the id", err)
	}
	evt.Spec.Payload = `{"id":"evt_stored"}`
	if ev, err := Reparse(adapter, evt); err != nil || ev.ID != "evt_stored" {
		t.Fatalf("matching payload: %+v %v", ev, err)
	}
	// A payload the adapter cannot parse says why, in the adapter's terms.
	evt.Spec.Payload = `{"id":`
	if _, err := Reparse(adapter, evt); !errors.Is(err, ErrNotReparsable) || !errors.Is(err, provider.ErrMalformedEvent) {
		t.Fatalf("unparsable payload: err %v, want ErrNotReparsable carrying the adapter's ErrMalformedEvent", err)
	}
}

// fakeParser parses {"id": ...} bodies; only ParseEvent is used by Reparse.
type fakeParser struct{ provider.Provider }

func (fakeParser) ParseEvent(raw []byte) (provider.Event, error) {
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return provider.Event{}, provider.MalformedEvent("not json", err)
	}
	return provider.Event{ID: v.ID, Raw: raw}, nil
}
