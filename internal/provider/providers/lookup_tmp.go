package providers

import (
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// Lookup returns the capabilities of a provider type.
func Lookup(typ string) (provider.Capabilities, bool) {
	switch typ {
	case TypeKukoPay:
		return provider.Capabilities{Type: typ, CredentialKeys: []string{kukopay.CredentialAPIKey}, EventsAPI: true, LookupByReference: true,
			Verification: provider.Verification{SigningSecret: true}}, true
	case TypePayPal:
		return provider.Capabilities{Type: typ, CredentialKeys: []string{paypal.CredentialClientID, paypal.CredentialClientSecret},
			Verification: provider.Verification{Credentials: true, WebhookID: true}}, true
	case TypeGeneric:
		return provider.Capabilities{Type: typ, CredentialKeys: []string{generic.CredentialToken}, EventsAPI: true, LookupByReference: true,
			Verification: provider.Verification{SigningSecret: true, CheckSecret: func(b []byte) error { _, err := generic.DecodeSecret(b); return err }}}, true
	}
	return provider.Capabilities{}, false
}
