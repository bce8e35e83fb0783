package paypal

import (
	"fmt"
	"strconv"
	"strings"
)

// exponents lists the currencies whose minor unit is not 1/100. PayPal sends amounts as
// decimal strings, while paywarden counts minor units, so the conversion must know the
// ISO 4217 exponent.
var exponents = map[string]int{
	"JPY": 0, "HUF": 0, "TWD": 0, "KRW": 0, "CLP": 0, "VND": 0, "ISK": 0, "UGX": 0, "XAF": 0, "XOF": 0,
	"BHD": 3, "KWD": 3, "OMR": 3, "JOD": 3, "TND": 3, "LYD": 3, "IQD": 3,
}

// Exponent is the number of decimals of currency (2 unless listed).
func Exponent(currency string) int {
	if e, ok := exponents[strings.ToUpper(currency)]; ok {
		return e
	}
	return 2
}

// FormatAmount renders minor units as PayPal's decimal string ("1999" USD -> "19.99").
func FormatAmount(minor int64, currency string) string {
	exp := Exponent(currency)
	s := strconv.FormatInt(minor, 10)
	if exp == 0 {
		return s
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for len(s) <= exp {
		s = "0" + s
	}
	out := s[:len(s)-exp] + "." + s[len(s)-exp:]
	if neg {
		out = "-" + out
	}
	return out
}

// ParseAmount converts PayPal's decimal string to minor units. More decimals than the
// currency has is an error rather than a rounding: money must not be rounded silently.
func ParseAmount(v, currency string) (int64, error) {
	exp := Exponent(currency)
	s := strings.TrimSpace(v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || !digits(whole) || (hasDot && (frac == "" || !digits(frac))) {
		return 0, fmt.Errorf("amount %q is not a decimal number", v)
	}
	if len(frac) > exp {
		return 0, fmt.Errorf("amount %q has more than %d decimals for %s", v, exp, currency)
	}
	frac += strings.Repeat("0", exp-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %w", v, err)
	}
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
