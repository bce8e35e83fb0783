package provider

import (
	"strconv"

	"github.com/paywarden/paywarden/internal/currency"
)

// CheckISOAmount refuses, before any request, an amount an API that takes ISO 4217
// minor units as integers cannot represent: every amount of an ISO currency is
// representable as is; an unknown currency code is not.
func CheckISOAmount(providerName string, req CreateRequest) error {
	if !currency.Known(req.Currency) {
		return AmountNotRepresentable(providerName, "create",
			"currency "+strconv.Quote(req.Currency)+" is not an ISO 4217 currency with a minor unit")
	}
	return nil
}
