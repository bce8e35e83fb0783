// Package providers is the registry of adapter types: it builds a provider.Provider from
// a PaymentProvider's type and tells callers what each type needs and can do, so
// nothing outside internal/provider switches on the type. Adding a provider type is one
// entry in registrations.
package providers

import (
	"fmt"
	"strings"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/internal/provider/stripe"
)

// Provider types accepted by New.
const (
	TypeKukoPay = kukopay.Type
	TypePayPal  = paypal.Type
	TypeGeneric = generic.Type
	TypeStripe  = stripe.Type
)

// registration is one adapter type: its capabilities and its constructor.
type registration struct {
	caps func() provider.Capabilities
	new  func(provider.Config) (provider.Provider, error)
}

// registrations lists every adapter type, in the order Types reports them. A function
// rather than a package variable, so no caller can change the registry.
func registrations() []registration {
	return []registration{
		{kukopay.Capabilities, func(c provider.Config) (provider.Provider, error) { return orNil(kukopay.New(c)) }},
		{paypal.Capabilities, func(c provider.Config) (provider.Provider, error) { return orNil(paypal.New(c)) }},
		{generic.Capabilities, func(c provider.Config) (provider.Provider, error) { return orNil(generic.New(c)) }},
		{stripe.Capabilities, func(c provider.Config) (provider.Provider, error) { return orNil(stripe.New(c)) }},
	}
}

func lookup(typ string) (registration, bool) {
	for _, r := range registrations() {
		if r.caps().Type == typ {
			return r, true
		}
	}
	return registration{}, false
}

// Types lists the supported provider types.
func Types() []string {
	var out []string
	for _, r := range registrations() {
		out = append(out, r.caps().Type)
	}
	return out
}

// Lookup returns what typ needs and can do; ok is false for an unknown type.
func Lookup(typ string) (caps provider.Capabilities, ok bool) {
	r, ok := lookup(typ)
	if !ok {
		return provider.Capabilities{}, false
	}
	return r.caps(), true
}

// New builds the adapter for typ. It fails, naming the key, when cfg.Credentials lacks
// one of the type's CredentialKeys.
func New(typ string, cfg provider.Config) (provider.Provider, error) {
	r, ok := lookup(typ)
	if !ok {
		return nil, fmt.Errorf("provider %s: unknown provider type %q (supported: %s)", cfg.Name, typ, strings.Join(Types(), ", "))
	}
	return r.new(cfg)
}

// orNil converts an adapter constructor's result, returning a nil interface on error:
// a nil *Adapter inside a provider.Provider would not compare equal to nil.
func orNil[T provider.Provider](a T, err error) (provider.Provider, error) {
	if err != nil {
		return nil, err
	}
	return a, nil
}
