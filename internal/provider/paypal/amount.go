package paypal

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/provider"
)

// decimals lists the currencies PayPal's REST API accepts and the number of decimals
// PayPal uses in their amount strings. It is PayPal's own table and differs from ISO
// 4217 on purpose: HUF and TWD have two decimals in ISO but PayPal takes whole units
// only. Conversions always go through ISO minor units (internal/currency), so 199900
// HUF minor units (1 999.00 Ft) is sent as "1999", never as "199900".
var decimals = map[string]int{
	"AUD": 2, "BRL": 2, "CAD": 2, "CHF": 2, "CNY": 2, "CZK": 2, "DKK": 2, "EUR": 2,
	"GBP": 2, "HKD": 2, "HUF": 0, "ILS": 2, "JPY": 0, "MXN": 2, "MYR": 2, "NOK": 2,
	"NZD": 2, "PHP": 2, "PLN": 2, "SEK": 2, "SGD": 2, "THB": 2, "TWD": 0, "USD": 2,
}

// Decimals returns the number of decimals PayPal uses for code; ok is false for a
// currency PayPal does not accept.
func Decimals(code string) (n int, ok bool) {
	n, ok = decimals[code]
	return n, ok
}

// Currencies returns the currencies PayPal accepts, sorted.
func Currencies() []string {
	out := make([]string, 0, len(decimals))
	for c := range decimals {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// scale is how many ISO minor units one unit of PayPal's last decimal is worth (1 for
// USD and JPY, 100 for HUF and TWD).
func scale(code string) (int64, int, error) {
	d, ok := decimals[code]
	if !ok {
		return 0, 0, fmt.Errorf("PayPal does not accept currency %q", code)
	}
	iso, ok := currency.Exponent(code)
	if !ok || iso < d {
		// Every PayPal currency is an ISO currency with at least PayPal's decimals;
		// this guards the two tables against each other.
		return 0, 0, fmt.Errorf("currency %q has no usable ISO 4217 exponent", code)
	}
	return currency.Pow10(iso - d), d, nil
}

// ToMoney converts ISO minor units to PayPal's Money. An amount PayPal cannot express
// exactly (an unsupported currency, HUF or TWD with a fraction of a unit) is an error
// wrapping provider.ErrAmountNotRepresentable: money is never rounded.
func ToMoney(minor int64, code string) (Money, error) {
	s, d, err := scale(code)
	if err != nil {
		return Money{}, fmt.Errorf("%w: %w", provider.ErrAmountNotRepresentable, err)
	}
	if minor%s != 0 {
		iso, _ := currency.Exponent(code)
		return Money{}, fmt.Errorf("%w: %s %s: PayPal takes %s in whole units only (the amount must be a multiple of %d minor units)",
			provider.ErrAmountNotRepresentable, currency.FormatMinor(minor, iso), code, code, s)
	}
	return Money{CurrencyCode: code, Value: currency.FormatMinor(minor/s, d)}, nil
}

// FromMoney converts PayPal's Money to ISO minor units (see ParseAmount).
func FromMoney(m Money) (int64, error) { return ParseAmount(m.Value, m.CurrencyCode) }

// FormatAmount renders ISO minor units as PayPal's decimal string ("1999" USD ->
// "19.99", 199900 HUF -> "1999"). It never rounds: an amount ToMoney refuses is
// rendered with its ISO decimals (two when the currency is unknown), which PayPal and
// ParseAmount reject. Adapters send through ToMoney; this is for paysim and display.
func FormatAmount(minor int64, code string) string {
	if m, err := ToMoney(minor, code); err == nil {
		return m.Value
	}
	exp, ok := currency.Exponent(code)
	if !ok {
		exp = 2
	}
	return currency.FormatMinor(minor, exp)
}

// ParseAmount converts PayPal's decimal string to ISO minor units ("19.99" USD -> 1999,
// "1999" HUF -> 199900). It accepts at most PayPal's decimals for the currency
// (trailing zeros aside: "1999.00" HUF is 199900) and refuses anything else rather
// than rounding: money must not be rounded silently.
func ParseAmount(v, code string) (int64, error) {
	s, d, err := scale(code)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", v, err)
	}
	str := strings.TrimSpace(v)
	neg := strings.HasPrefix(str, "-")
	str = strings.TrimPrefix(str, "-")
	whole, frac, hasDot := strings.Cut(str, ".")
	if !digits(whole) || (hasDot && !digits(frac)) {
		return 0, fmt.Errorf("amount %q is not a decimal number", v)
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > d {
		return 0, fmt.Errorf("amount %q has more than the %d decimals PayPal uses for %s", v, d, code)
	}
	frac += strings.Repeat("0", d-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", v, err)
	}
	if n > (1<<63-1)/s {
		return 0, fmt.Errorf("amount %q is too large", v)
	}
	n *= s
	if neg {
		n = -n
	}
	return n, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
