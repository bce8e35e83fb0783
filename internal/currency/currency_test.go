package currency_test

import (
	"errors"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/currency"
)

func TestExponents(t *testing.T) {
	tests := []struct {
		code string
		exp  int
	}{
		{"USD", 2}, {"EUR", 2}, {"GBP", 2}, {"CNY", 2},
		// ISO says 2 even where PayPal uses 0: the provider adapter converts, the table
		// does not bend.
		{"HUF", 2}, {"TWD", 2},
		{"JPY", 0}, {"KRW", 0}, {"CLP", 0}, {"ISK", 0}, {"VND", 0}, {"XAF", 0}, {"XOF", 0}, {"XPF", 0},
		{"BIF", 0}, {"DJF", 0}, {"GNF", 0}, {"KMF", 0}, {"PYG", 0}, {"RWF", 0}, {"UGX", 0}, {"UYI", 0}, {"VUV", 0},
		{"BHD", 3}, {"IQD", 3}, {"JOD", 3}, {"KWD", 3}, {"LYD", 3}, {"OMR", 3}, {"TND", 3},
		{"CLF", 4}, {"UYW", 4},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			got, ok := currency.Exponent(tt.code)
			if !ok || got != tt.exp {
				t.Fatalf("Exponent(%s) = %d, %v; want %d", tt.code, got, ok, tt.exp)
			}
		})
	}
}

func TestUnknownCodes(t *testing.T) {
	for _, code := range []string{
		"", "US", "USDD", "usd", "Usd", "ABC", "ZZZ",
		"HRK", "VEF", "MRO", // withdrawn
		"XAU", "XDR", "XTS", "XXX", // no minor unit
	} {
		t.Run("rejects "+code, func(t *testing.T) {
			if currency.Known(code) {
				t.Fatal("known")
			}
			if _, ok := currency.Exponent(code); ok {
				t.Fatal("has an exponent")
			}
		})
	}
}

func TestTableShape(t *testing.T) {
	codes := currency.Codes()
	// ISO 4217 lists about 180 codes, about a dozen of them without a minor unit.
	if len(codes) < 165 || len(codes) > 175 {
		t.Errorf("%d codes; the table looks truncated or padded", len(codes))
	}
	upper := regexp.MustCompile(`^[A-Z]{3}$`)
	for i, c := range codes {
		if !upper.MatchString(c) {
			t.Errorf("code %q is not three upper-case letters", c)
		}
		if i > 0 && codes[i-1] >= c {
			t.Errorf("Codes() not sorted or not unique at %q", c)
		}
		exp, ok := currency.Exponent(c)
		if !ok || (exp != 0 && exp != 2 && exp != 3 && exp != 4) {
			t.Errorf("%s: exponent %d %v", c, exp, ok)
		}
	}
}

func TestFormatMinor(t *testing.T) {
	tests := []struct {
		minor int64
		exp   int
		want  string
	}{
		{1999, 2, "19.99"}, {5, 2, "0.05"}, {0, 2, "0.00"}, {-150, 2, "-1.50"}, {-5, 2, "-0.05"},
		{1999, 0, "1999"}, {-7, 0, "-7"}, {1234, 3, "1.234"}, {1, 4, "0.0001"}, {123456, 4, "12.3456"},
		{math.MaxInt64, 2, "92233720368547758.07"}, {math.MinInt64, 2, "-92233720368547758.08"},
	}
	for _, tt := range tests {
		if got := currency.FormatMinor(tt.minor, tt.exp); got != tt.want {
			t.Errorf("FormatMinor(%d, %d) = %q, want %q", tt.minor, tt.exp, got, tt.want)
		}
	}
}

// TestFormatAmountUsesTheTable guards the printer column against a second, drifting
// exponent table: the API's FormatAmount must agree with this package for every code.
func TestFormatAmountUsesTheTable(t *testing.T) {
	for _, c := range currency.Codes() {
		exp, _ := currency.Exponent(c)
		want := currency.FormatMinor(199900, exp) + " " + c
		if got := v1alpha1.FormatAmount(199900, c); got != want {
			t.Errorf("FormatAmount(199900, %s) = %q, want %q", c, got, want)
		}
	}
	for _, tt := range []struct {
		value    int64
		currency string
		want     string
	}{
		{199900, "HUF", "1999.00 HUF"},
		{1999, "JPY", "1999 JPY"},
		{1999, "USD", "19.99 USD"},
		{1234, "KWD", "1.234 KWD"},
		{10000, "CLF", "1.0000 CLF"},
		// An unknown code is still displayed, with two decimals, rather than hidden.
		{1999, "ZZZ", "19.99 ZZZ"},
	} {
		if got := v1alpha1.FormatAmount(tt.value, tt.currency); got != tt.want {
			t.Errorf("FormatAmount(%d, %s) = %q, want %q", tt.value, tt.currency, got, tt.want)
		}
	}
}

// TestParseMajorIsStrict: an amount a person writes is read in the
// currency's major units or refused; it is never rounded or guessed.
func TestParseMajorIsStrict(t *testing.T) {
	for _, tt := range []struct {
		in, code string
		want     int64
		err      string
	}{
		{"30.00", "USD", 3000, ""},
		{"30", "USD", 3000, ""},
		{"30.5", "USD", 3050, ""},
		{"0.01", "USD", 1, ""},
		{"1999", "JPY", 1999, ""},
		{"1.250", "BHD", 1250, ""},
		{"1.2345", "CLF", 12345, ""},
		{"30.001", "USD", 0, `"30.001" has 3 decimals, but USD has 2 (write it like 30.00)`},
		{"30.5", "JPY", 0, `"30.5" has decimals, but JPY has none (write it like 3000)`},
		{"1.2345", "BHD", 0, "has 4 decimals, but BHD has 3 (write it like 30.000)"},
		{"0", "USD", 0, "is zero"},
		{"0.00", "USD", 0, "is zero"},
		{"-5.00", "USD", 0, "not an amount in USD major units"},
		{"+5.00", "USD", 0, "not an amount"},
		{"1e2", "USD", 0, "not an amount"},
		{"30,00", "USD", 0, "not an amount"},
		{"1,000.00", "USD", 0, "not an amount"},
		{"30.00 USD", "USD", 0, "not an amount"},
		{" 30.00", "USD", 0, "not an amount"},
		{".50", "USD", 0, "not an amount"},
		{"30.", "USD", 0, "not an amount"},
		{"", "USD", 0, "not an amount"},
		{"92233720368547758.07", "USD", math.MaxInt64, ""},
		{"92233720368547758.08", "USD", 0, "too large"},
		{"99999999999999999999", "JPY", 0, "too large"},
		{"30.00", "XAU", 0, "not an ISO 4217 currency"},
	} {
		got, err := currency.ParseMajor(tt.in, tt.code)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("ParseMajor(%q, %s) = %d, %v; want %d", tt.in, tt.code, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, currency.ErrAmount)):
			t.Errorf("ParseMajor(%q, %s) = %d, %v; want an ErrAmount containing %q", tt.in, tt.code, got, err, tt.err)
		}
	}
}

// TestParseMajorReadsWhatFormatMinorWrites: every amount paywarden displays
// reads back as the same minor units.
func TestParseMajorReadsWhatFormatMinorWrites(t *testing.T) {
	for _, c := range currency.Codes() {
		exp, _ := currency.Exponent(c)
		for _, v := range []int64{1, 5, 99, 1999, 100000, math.MaxInt64} {
			if got, err := currency.ParseMajor(currency.FormatMinor(v, exp), c); err != nil || got != v {
				t.Errorf("%s: ParseMajor(FormatMinor(%d)) = %d, %v", c, v, got, err)
			}
		}
	}
}
