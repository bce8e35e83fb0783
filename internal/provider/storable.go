package provider

import (
	"fmt"
	"time"
)

// What paywarden reads from a provider ends up in a Payment's or Refund's
// status, whose schema the API server enforces: a currency matches
// ^[A-Z]{3}$, a time is an RFC 3339 date-time (a four-digit year). A value
// outside that could never be written: an answer carrying it would be retried
// for ever, an event acknowledged with it never applied. The adapters read
// such values through these functions, which refuse them with an error (a
// malformed event, 400; an unreadable answer).

// Currency is a currency code as paywarden stores it, for an amount of
// amount minor units: the code in upper case (an ISO 4217 code written in
// lower case, as Stripe writes them, is the same code), or "" for an object
// that states neither amount nor currency. A code that is not three letters,
// or an amount without a currency (which no check of the amount could then
// compare with the payment's), is an error.
func Currency(amount int64, code string) (string, error) {
	if code == "" {
		if amount != 0 {
			return "", fmt.Errorf("amount %d without a currency", amount)
		}
		return "", nil
	}
	up := []byte(code)
	for i, b := range up {
		if 'a' <= b && b <= 'z' {
			up[i] = b - 'a' + 'A'
		}
	}
	if len(up) != 3 {
		return "", fmt.Errorf("currency %q is not an ISO 4217 code (three letters A-Z)", code)
	}
	for _, b := range up {
		if b < 'A' || b > 'Z' {
			return "", fmt.Errorf("currency %q is not an ISO 4217 code (three letters A-Z)", code)
		}
	}
	return string(up), nil
}

// StorableTime is t in UTC, or an error naming field when its year in UTC
// is outside 0000-9999 (an offset can carry "9999-12-31T23:59:59-01:00"
// past it).
func StorableTime(field string, t time.Time) (time.Time, error) {
	if t = t.UTC(); t.Year() < 0 || t.Year() > 9999 {
		return time.Time{}, fmt.Errorf("%s %s is outside the years 0000-9999 in UTC", field, t.Format(time.RFC3339))
	}
	return t, nil
}

// UnixTime is the UTC time of unix seconds secs of field, or an error
// outside the years 0000-9999.
func UnixTime(field string, secs int64) (time.Time, error) {
	const first, last = -62167219200, 253402300799 // 0000-01-01T00:00:00Z, 9999-12-31T23:59:59Z
	if secs < first || secs > last {
		return time.Time{}, fmt.Errorf("%s %d is outside the years 0000-9999", field, secs)
	}
	return time.Unix(secs, 0).UTC(), nil
}
