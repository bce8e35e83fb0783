package generic

import (
	"strconv"

	"github.com/paywarden/paywarden/internal/currency"
	"github.com/paywarden/paywarden/internal/provider"
)

// checkAmount refuses, before any request, an amount this API cannot represent. It
// takes ISO 4217 minor units as integers, so every amount of an ISO currency is
// representable as is; an unknown currency code is not.
func checkAmount(providerName string, req provider.CreateRequest) error {
	if !currency.Known(req.Currency) {
		return provider.AmountNotRepresentable(providerName, "create",
			"currency "+strconv.Quote(req.Currency)+" is not an ISO 4217 currency with a minor unit")
	}
	return nil
}
