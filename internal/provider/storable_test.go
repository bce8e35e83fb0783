package provider_test

import (
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/provider"
)

// TestStorableValues: what an adapter reads is what a status can hold
// (^[A-Z]{3}$ currencies, four-digit years), or an error.
func TestStorableValues(t *testing.T) {
	for _, tc := range []struct {
		amount int64
		code   string
		want   string
		ok     bool
	}{
		{1999, "USD", "USD", true},
		{1999, "usd", "USD", true},
		{1999, "uSd", "USD", true},
		{0, "", "", true},
		{1, "", "", false}, // an amount without a currency
		{1999, "US", "", false},
		{1999, "USDT", "", false},
		{1999, "U$D", "", false},
		{1999, "ÜSD", "", false},
		{0, "usd ", "", false},
	} {
		got, err := provider.Currency(tc.amount, tc.code)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("Currency(%d, %q) = %q, %v; want %q, ok %v", tc.amount, tc.code, got, err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		secs int64
		ok   bool
	}{
		{0, true},
		{1700000000, true},
		{253402300799, true},  // 9999-12-31T23:59:59Z
		{253402300800, false}, // the year 10000
		{-62167219200, true},  // 0000-01-01T00:00:00Z
		{-62167219201, false},
	} {
		if _, err := provider.UnixTime("created", tc.secs); (err == nil) != tc.ok {
			t.Errorf("UnixTime(%d): %v, want ok %v", tc.secs, err, tc.ok)
		}
	}
	late, _ := time.Parse(time.RFC3339, "9999-12-31T23:59:59-01:00")
	if _, err := provider.StorableTime("timestamp", late); err == nil {
		t.Error("9999-12-31T23:59:59-01:00 is the year 10000 in UTC: want an error")
	}
	if got, err := provider.StorableTime("timestamp", time.Date(2026, 12, 4, 1, 0, 0, 0, time.FixedZone("", 3600))); err != nil || got.Location() != time.UTC || got.Hour() != 0 {
		t.Errorf("StorableTime: %v, %v; want 00:00 UTC", got, err)
	}
}
