// Package providers builds a provider.Provider from a PaymentProvider's type. It is the
// only place that knows every adapter, so adding a provider type touches one switch.
package providers

import (
	"fmt"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// Provider types accepted by New.
const (
	TypeKukoPay = "kukopay"
	TypePayPal  = "paypal"
	TypeGeneric = "generic"
)

// Types lists the supported provider types.
func Types() []string { return []string{TypeKukoPay, TypePayPal, TypeGeneric} }

// New builds the adapter for typ.
func New(typ string, cfg provider.Config) (provider.Provider, error) {
	switch typ {
	case TypeKukoPay:
		return orNil(kukopay.New(cfg))
	case TypePayPal:
		return orNil(paypal.New(cfg))
	case TypeGeneric:
		return orNil(generic.New(cfg))
	default:
		return nil, fmt.Errorf("provider %s: unknown provider type %q (supported: kukopay, paypal, generic)", cfg.Name, typ)
	}
}

// orNil converts an adapter constructor's result, returning a nil interface on error:
// a nil *Adapter inside a provider.Provider would not compare equal to nil.
func orNil[T provider.Provider](a T, err error) (provider.Provider, error) {
	if err != nil {
		return nil, err
	}
	return a, nil
}
