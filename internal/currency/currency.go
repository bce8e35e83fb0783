// Package currency is paywarden's one ISO 4217 table: which currency codes exist and how
// many decimals their minor unit has.
//
// Amounts are counted in ISO 4217 minor units everywhere in paywarden (spec, status,
// provider.Payment, provider.Event). Any code that turns minor units into major units
// (display, a provider's decimal strings) must ask this package for the exponent, never
// keep its own list: two tables drift apart, and a drifted exponent moves money by a
// factor of 100.
package currency

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// exponents maps every active ISO 4217 code whose minor unit is defined to that unit's
// exponent (1 major unit = 10^exponent minor units).
//
// Codes whose minor unit ISO lists as "N.A." (precious metals XAU XAG XPT XPD, bond
// market units XBA..XBD, XDR, XSU, XUA, test and no-currency codes XTS XXX) are left
// out on purpose: an amount in minor units means nothing for them, so they can be
// neither displayed nor sent. Codes in a changeover period (ANG and XCG, SLL and SLE,
// ZWL and ZWG, VES and VED) are both listed so payments created on either side of the
// switch keep working; withdrawn codes (HRK, VEF, MRO, STD, ...) are not.
var exponents = map[string]int{
	"AED": 2, // UAE dirham
	"AFN": 2, // Afghani
	"ALL": 2, // Lek
	"AMD": 2, // Armenian dram
	"ANG": 2, // Netherlands Antillean guilder (being replaced by XCG)
	"AOA": 2, // Kwanza
	"ARS": 2, // Argentine peso
	"AUD": 2, // Australian dollar
	"AWG": 2, // Aruban florin
	"AZN": 2, // Azerbaijan manat
	"BAM": 2, // Convertible mark
	"BBD": 2, // Barbados dollar
	"BDT": 2, // Taka
	"BGN": 2, // Bulgarian lev
	"BHD": 3, // Bahraini dinar
	"BIF": 0, // Burundi franc
	"BMD": 2, // Bermudian dollar
	"BND": 2, // Brunei dollar
	"BOB": 2, // Boliviano
	"BOV": 2, // Mvdol (fund code)
	"BRL": 2, // Brazilian real
	"BSD": 2, // Bahamian dollar
	"BTN": 2, // Ngultrum
	"BWP": 2, // Pula
	"BYN": 2, // Belarusian ruble
	"BZD": 2, // Belize dollar
	"CAD": 2, // Canadian dollar
	"CDF": 2, // Congolese franc
	"CHE": 2, // WIR euro (complementary)
	"CHF": 2, // Swiss franc
	"CHW": 2, // WIR franc (complementary)
	"CLF": 4, // Unidad de Fomento (fund code)
	"CLP": 0, // Chilean peso
	"CNY": 2, // Yuan renminbi
	"COP": 2, // Colombian peso
	"COU": 2, // Unidad de Valor Real (fund code)
	"CRC": 2, // Costa Rican colon
	"CUC": 2, // Peso convertible
	"CUP": 2, // Cuban peso
	"CVE": 2, // Cabo Verde escudo
	"CZK": 2, // Czech koruna
	"DJF": 0, // Djibouti franc
	"DKK": 2, // Danish krone
	"DOP": 2, // Dominican peso
	"DZD": 2, // Algerian dinar
	"EGP": 2, // Egyptian pound
	"ERN": 2, // Nakfa
	"ETB": 2, // Ethiopian birr
	"EUR": 2, // Euro
	"FJD": 2, // Fiji dollar
	"FKP": 2, // Falkland Islands pound
	"GBP": 2, // Pound sterling
	"GEL": 2, // Lari
	"GHS": 2, // Ghana cedi
	"GIP": 2, // Gibraltar pound
	"GMD": 2, // Dalasi
	"GNF": 0, // Guinean franc
	"GTQ": 2, // Quetzal
	"GYD": 2, // Guyana dollar
	"HKD": 2, // Hong Kong dollar
	"HNL": 2, // Lempira
	"HTG": 2, // Gourde
	"HUF": 2, // Forint
	"IDR": 2, // Rupiah
	"ILS": 2, // New Israeli sheqel
	"INR": 2, // Indian rupee
	"IQD": 3, // Iraqi dinar
	"IRR": 2, // Iranian rial
	"ISK": 0, // Iceland krona
	"JMD": 2, // Jamaican dollar
	"JOD": 3, // Jordanian dinar
	"JPY": 0, // Yen
	"KES": 2, // Kenyan shilling
	"KGS": 2, // Som
	"KHR": 2, // Riel
	"KMF": 0, // Comorian franc
	"KPW": 2, // North Korean won
	"KRW": 0, // Won
	"KWD": 3, // Kuwaiti dinar
	"KYD": 2, // Cayman Islands dollar
	"KZT": 2, // Tenge
	"LAK": 2, // Lao kip
	"LBP": 2, // Lebanese pound
	"LKR": 2, // Sri Lanka rupee
	"LRD": 2, // Liberian dollar
	"LSL": 2, // Loti
	"LYD": 3, // Libyan dinar
	"MAD": 2, // Moroccan dirham
	"MDL": 2, // Moldovan leu
	"MGA": 2, // Malagasy ariary
	"MKD": 2, // Denar
	"MMK": 2, // Kyat
	"MNT": 2, // Tugrik
	"MOP": 2, // Pataca
	"MRU": 2, // Ouguiya
	"MUR": 2, // Mauritius rupee
	"MVR": 2, // Rufiyaa
	"MWK": 2, // Malawi kwacha
	"MXN": 2, // Mexican peso
	"MXV": 2, // Mexican Unidad de Inversion (fund code)
	"MYR": 2, // Malaysian ringgit
	"MZN": 2, // Mozambique metical
	"NAD": 2, // Namibia dollar
	"NGN": 2, // Naira
	"NIO": 2, // Cordoba oro
	"NOK": 2, // Norwegian krone
	"NPR": 2, // Nepalese rupee
	"NZD": 2, // New Zealand dollar
	"OMR": 3, // Rial Omani
	"PAB": 2, // Balboa
	"PEN": 2, // Sol
	"PGK": 2, // Kina
	"PHP": 2, // Philippine peso
	"PKR": 2, // Pakistan rupee
	"PLN": 2, // Zloty
	"PYG": 0, // Guarani
	"QAR": 2, // Qatari rial
	"RON": 2, // Romanian leu
	"RSD": 2, // Serbian dinar
	"RUB": 2, // Russian ruble
	"RWF": 0, // Rwanda franc
	"SAR": 2, // Saudi riyal
	"SBD": 2, // Solomon Islands dollar
	"SCR": 2, // Seychelles rupee
	"SDG": 2, // Sudanese pound
	"SEK": 2, // Swedish krona
	"SGD": 2, // Singapore dollar
	"SHP": 2, // Saint Helena pound
	"SLE": 2, // Leone
	"SLL": 2, // Leone (old, being replaced by SLE)
	"SOS": 2, // Somali shilling
	"SRD": 2, // Surinam dollar
	"SSP": 2, // South Sudanese pound
	"STN": 2, // Dobra
	"SVC": 2, // El Salvador colon
	"SYP": 2, // Syrian pound
	"SZL": 2, // Lilangeni
	"THB": 2, // Baht
	"TJS": 2, // Somoni
	"TMT": 2, // Turkmenistan new manat
	"TND": 3, // Tunisian dinar
	"TOP": 2, // Pa'anga
	"TRY": 2, // Turkish lira
	"TTD": 2, // Trinidad and Tobago dollar
	"TWD": 2, // New Taiwan dollar
	"TZS": 2, // Tanzanian shilling
	"UAH": 2, // Hryvnia
	"UGX": 0, // Uganda shilling
	"USD": 2, // US dollar
	"USN": 2, // US dollar next day (fund code)
	"UYI": 0, // Uruguay peso en unidades indexadas (fund code)
	"UYU": 2, // Peso uruguayo
	"UYW": 4, // Unidad previsional
	"UZS": 2, // Uzbekistan sum
	"VED": 2, // Bolivar soberano (digital)
	"VES": 2, // Bolivar soberano
	"VND": 0, // Dong
	"VUV": 0, // Vatu
	"WST": 2, // Tala
	"XAF": 0, // CFA franc BEAC
	"XCD": 2, // East Caribbean dollar
	"XCG": 2, // Caribbean guilder
	"XOF": 0, // CFA franc BCEAO
	"XPF": 0, // CFP franc
	"YER": 2, // Yemeni rial
	"ZAR": 2, // Rand
	"ZMW": 2, // Zambian kwacha
	"ZWG": 2, // Zimbabwe gold
	"ZWL": 2, // Zimbabwe dollar (being replaced by ZWG)
}

// Exponent returns the ISO 4217 minor-unit exponent of code (0, 2, 3 or 4); ok is false
// for a code that is not in the table. Codes are matched exactly: ISO codes are upper
// case, and the API validates ^[A-Z]{3}$, so "usd" is not a currency.
func Exponent(code string) (exp int, ok bool) {
	exp, ok = exponents[code]
	return exp, ok
}

// Known reports whether code is an active ISO 4217 code with a minor unit.
func Known(code string) bool {
	_, ok := exponents[code]
	return ok
}

// Codes returns every code in the table, sorted.
func Codes() []string {
	out := make([]string, 0, len(exponents))
	for c := range exponents {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// Pow10 returns 10^exp for the exponents in the table (0..4).
func Pow10(exp int) int64 {
	n := int64(1)
	for range exp {
		n *= 10
	}
	return n
}

// FormatMinor renders minor units as a plain decimal number with exp decimals
// ("1999", 2 -> "19.99"; "-5", 2 -> "-0.05"; "1999", 0 -> "1999"). It never rounds.
func FormatMinor(minor int64, exp int) string {
	neg := minor < 0
	s := strconv.FormatInt(minor, 10)
	if neg {
		s = s[1:] // the digits of the magnitude; also right for math.MinInt64
	}
	if exp > 0 {
		if len(s) <= exp {
			s = strings.Repeat("0", exp-len(s)+1) + s
		}
		s = s[:len(s)-exp] + "." + s[len(s)-exp:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// ErrAmount is the class of every error ParseMajor returns.
var ErrAmount = errors.New("invalid amount")

// ParseMajor reads an amount a person wrote in major units of code ("30.00"
// USD, "1999" JPY, "1.250" BHD) as minor units (3000, 1999, 1250). It is
// strict, because a misread amount moves the wrong money: a plain decimal
// number, no sign, exponent, thousands separator, decimal comma or currency
// code; at most as many decimals as the currency has ("30.001" USD and "30.5"
// JPY are errors, never rounded); more than zero.
func ParseMajor(s, code string) (int64, error) {
	exp, ok := Exponent(code)
	if !ok {
		return 0, fmt.Errorf("%w: %q is not an ISO 4217 currency with a minor unit", ErrAmount, code)
	}
	example := FormatMinor(3000*Pow10(exp)/100, exp)
	if exp == 0 {
		example = "3000"
	}
	whole, frac, dotted := strings.Cut(s, ".")
	if !onlyDigits(whole) || dotted && !onlyDigits(frac) {
		return 0, fmt.Errorf("%w: %q is not an amount in %s major units (write it like %s)", ErrAmount, s, code, example)
	}
	if len(frac) > exp {
		if exp == 0 {
			return 0, fmt.Errorf("%w: %q has decimals, but %s has none (write it like %s)", ErrAmount, s, code, example)
		}
		return 0, fmt.Errorf("%w: %q has %d decimals, but %s has %d (write it like %s)", ErrAmount, s, len(frac), code, exp, example)
	}
	frac += strings.Repeat("0", exp-len(frac))
	units, err1 := strconv.ParseInt(whole, 10, 64)
	cents, err2 := strconv.ParseInt("0"+frac, 10, 64)
	scale := Pow10(exp)
	if err1 != nil || err2 != nil || units > (math.MaxInt64-cents)/scale {
		return 0, fmt.Errorf("%w: %q is too large", ErrAmount, s)
	}
	minor := units*scale + cents
	if minor == 0 {
		return 0, fmt.Errorf("%w: %q is zero; give an amount of more than zero %s", ErrAmount, s, code)
	}
	return minor, nil
}

// onlyDigits: one or more ASCII digits and nothing else.
func onlyDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}
