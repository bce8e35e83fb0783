package stripe

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/provider"
)

// Stripe counts amounts in "the smallest currency unit", which is not always the
// ISO 4217 minor unit. Stripe documents (https://docs.stripe.com/currencies, sections
// "Zero-decimal currencies", "Three-decimal currencies" and "Special cases"):
//
//   - Zero-decimal currencies: BIF CLP DJF GNF JPY KMF KRW MGA PYG RWF UGX VND VUV XAF
//     XOF XPF. "The charge and the amount are the same, without requiring
//     multiplication": 500 JPY is amount 500. All of them have ISO exponent 0 except
//     MGA (ISO exponent 2), so an MGA amount is sent as whole ariary and only ISO
//     amounts divisible by 100 can be sent.
//   - Three-decimal currencies (BHD JOD KWD OMR TND): amounts are in thousandths, but
//     "the least-significant (last) digit" must be 0 for compatibility with Stripe's
//     payment partners: 5.124 KWD cannot be charged, 5.120 can. Every currency with
//     ISO exponent 3 is held to that rule.
//   - ISK: ISO exponent 0, but "backwards compatibility requires you to represent it
//     as a two-decimal value, where the decimal amount is always 00": 5 ISK is amount
//     500, and amounts must be divisible by 100.
//   - HUF and TWD: zero-decimal for payouts only; charges, refunds and captures take
//     two decimals, so they are ordinary two-decimal currencies here.
//
// Every other currency uses its ISO exponent when that is 2. Currencies whose ISO
// exponent is 0 or 4 and that Stripe does not list (fund codes such as UYI, CLF, UYW)
// have no documented representation and are refused, as are codes that are not in the
// ISO table.

// zeroDecimal lists Stripe's zero-decimal currencies.
var zeroDecimal = map[string]bool{
	"BIF": true, "CLP": true, "DJF": true, "GNF": true, "JPY": true, "KMF": true, "KRW": true, "MGA": true,
	"PYG": true, "RWF": true, "UGX": true, "VND": true, "VUV": true, "XAF": true, "XOF": true, "XPF": true,
}

// twoDecimalWholeUnits lists currencies Stripe represents with two decimals although
// only whole units can be charged (amount divisible by 100).
var twoDecimalWholeUnits = map[string]bool{"ISK": true}

// representation says how Stripe writes amounts of one currency relative to its ISO
// minor unit.
type representation struct {
	// shift is Stripe's exponent minus the ISO exponent: +2 for ISK (Stripe amount =
	// ISO amount * 100), -2 for MGA (ISO amount / 100), 0 elsewhere.
	shift int
	// multipleOf is what a Stripe amount must be divisible by (10 for three-decimal
	// currencies, 100 for ISK, 1 otherwise).
	multipleOf int64
}

// stripeRepresentation looks up code (ISO upper case).
func stripeRepresentation(code string) (representation, error) {
	iso, ok := currency.Exponent(code)
	if !ok {
		return representation{}, fmt.Errorf("currency %s is not an ISO 4217 currency with a minor unit", strconv.Quote(code))
	}
	switch {
	case zeroDecimal[code]:
		return representation{shift: -iso, multipleOf: 1}, nil
	case twoDecimalWholeUnits[code]:
		return representation{shift: 2 - iso, multipleOf: 100}, nil
	case iso == 2:
		return representation{shift: 0, multipleOf: 1}, nil
	case iso == 3:
		return representation{shift: 0, multipleOf: 10}, nil
	default:
		return representation{}, fmt.Errorf("Stripe documents no amount representation for %s (ISO exponent %d)", code, iso)
	}
}

// ToStripe converts ISO 4217 minor units into Stripe's amount for code (ISO upper
// case). It fails for a currency Stripe cannot express and for an amount that would
// need a fraction Stripe refuses (a fraction of an ariary, a last KWD digit other
// than 0).
func ToStripe(minor int64, code string) (int64, error) {
	r, err := stripeRepresentation(code)
	if err != nil {
		return 0, err
	}
	var out int64
	switch {
	case r.shift > 0:
		f := currency.Pow10(r.shift)
		if minor > math.MaxInt64/f || minor < math.MinInt64/f {
			return 0, fmt.Errorf("%d %s overflows Stripe's amount", minor, code)
		}
		out = minor * f
	case r.shift < 0:
		f := currency.Pow10(-r.shift)
		if minor%f != 0 {
			return 0, fmt.Errorf("%s is a zero-decimal currency at Stripe: %d minor units is not a whole unit", code, minor)
		}
		out = minor / f
	default:
		out = minor
	}
	if out%r.multipleOf != 0 {
		return 0, fmt.Errorf("Stripe takes %s amounts only as multiples of %d: %d is not", code, r.multipleOf, out)
	}
	return out, nil
}

// FromStripe converts Stripe's amount in currency (either case, as Stripe writes it in
// lower case) back into ISO 4217 minor units. It refuses rather than rounds an amount
// that has no exact ISO equivalent.
func FromStripe(amount int64, cur string) (int64, error) {
	code := strings.ToUpper(cur)
	r, err := stripeRepresentation(code)
	if err != nil {
		return 0, err
	}
	switch {
	case r.shift > 0:
		f := currency.Pow10(r.shift)
		if amount%f != 0 {
			return 0, fmt.Errorf("Stripe amount %d %s has a fraction of the ISO minor unit", amount, code)
		}
		return amount / f, nil
	case r.shift < 0:
		f := currency.Pow10(-r.shift)
		if amount > math.MaxInt64/f || amount < math.MinInt64/f {
			return 0, fmt.Errorf("Stripe amount %d %s overflows", amount, code)
		}
		return amount * f, nil
	}
	return amount, nil
}

// wireCurrency is the currency as Stripe wants it in requests: lower case.
func wireCurrency(code string) string { return strings.ToLower(code) }

// isoCurrency is the currency as paywarden records it: ISO upper case.
func isoCurrency(cur string) string { return strings.ToUpper(cur) }

// notRepresentable is the error for an amount refused before any call.
func notRepresentable(name, op string, err error) error {
	return provider.AmountNotRepresentable(name, op, err.Error())
}
