package providers_test

import (
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
)

func cfgWith(creds map[string][]byte) provider.Config {
	return provider.Config{Name: "ns/p", APIURL: "https://api.example.com", Credentials: creds}
}

// TestEveryTypeNeedsExactlyItsCredentialKeys builds each type with exactly the keys its
// Capabilities declare, then with each key missing or empty: the declared list and the
// constructor must agree, or the PaymentProvider's Ready condition would lie.
func TestEveryTypeNeedsExactlyItsCredentialKeys(t *testing.T) {
	for _, typ := range providers.Types() {
		caps, ok := providers.Lookup(typ)
		if !ok {
			t.Fatalf("Types lists %q but Lookup does not know it", typ)
		}
		if caps.Type != typ {
			t.Errorf("Lookup(%q).Type = %q", typ, caps.Type)
		}
		if len(caps.CredentialKeys) == 0 {
			t.Errorf("%s declares no credential keys", typ)
		}
		exact := map[string][]byte{}
		for _, k := range caps.CredentialKeys {
			exact[k] = []byte("value-of-" + k)
		}
		t.Run(typ+" builds with exactly its credential keys", func(t *testing.T) {
			p, err := providers.New(typ, cfgWith(exact))
			if err != nil || p == nil {
				t.Fatalf("%v %v", p, err)
			}
			if got := p.Capabilities(); got.Type != typ || !slices.Equal(got.CredentialKeys, caps.CredentialKeys) {
				t.Errorf("adapter Capabilities %+v differ from the registry's %+v", got, caps)
			}
			if missing := caps.MissingCredentials(exact); missing != nil {
				t.Errorf("MissingCredentials = %v", missing)
			}
		})
		for _, key := range caps.CredentialKeys {
			for _, how := range []string{"missing", "empty", "blank"} {
				t.Run(typ+" without "+key+" ("+how+") fails naming it", func(t *testing.T) {
					creds := map[string][]byte{}
					for k, v := range exact {
						creds[k] = v
					}
					switch how {
					case "missing":
						delete(creds, key)
					case "blank":
						creds[key] = []byte(" \t\n")
					default:
						creds[key] = nil
					}
					p, err := providers.New(typ, cfgWith(creds))
					if err == nil || p != nil {
						t.Fatalf("%v %v", p, err)
					}
					if !strings.Contains(err.Error(), strconv.Quote(key)) || !strings.Contains(err.Error(), "ns/p") {
						t.Errorf("error %q does not name the key %q and the provider", err, key)
					}
					for k, v := range exact {
						if k != key && strings.Contains(err.Error(), strconv.Quote(k)) {
							t.Errorf("error %q names %q, which is present", err, k)
						}
						if strings.Contains(err.Error(), string(v)) {
							t.Errorf("error %q leaks a credential value", err)
						}
					}
					if got := caps.MissingCredentials(creds); !slices.Equal(got, []string{key}) {
						t.Errorf("MissingCredentials = %v", got)
					}
				})
			}
		}
		t.Run(typ+" without any credentials fails with a nil provider", func(t *testing.T) {
			p, err := providers.New(typ, cfgWith(nil))
			if err == nil || p != nil {
				t.Fatalf("%v %v", p, err)
			}
		})
	}
}

func TestCapabilities(t *testing.T) {
	tests := []struct {
		typ                        string
		keys                       []string
		events, lookup             bool
		signingSecret, creds, whID bool
		checksSecret               bool
	}{
		{providers.TypeKukoPay, []string{"apiKey"}, true, true, true, false, false, false},
		{providers.TypePayPal, []string{"clientID", "clientSecret"}, true, false, false, true, true, false},
		{providers.TypeGeneric, []string{"token"}, true, true, true, false, false, true},
		{providers.TypeStripe, []string{"secretKey"}, true, true, true, false, false, true},
	}
	if len(tests) != len(providers.Types()) {
		t.Errorf("registry has %v, test covers %d types", providers.Types(), len(tests))
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			c, ok := providers.Lookup(tt.typ)
			if !ok {
				t.Fatal("unknown")
			}
			v := c.Verification
			if !slices.Equal(c.CredentialKeys, tt.keys) || c.EventsAPI != tt.events || c.LookupByReference != tt.lookup ||
				v.SigningSecret != tt.signingSecret || v.Credentials != tt.creds || v.WebhookID != tt.whID || (v.CheckSecret != nil) != tt.checksSecret {
				t.Fatalf("got %+v", c)
			}
		})
	}
	t.Run("unknown type", func(t *testing.T) {
		if _, ok := providers.Lookup("adyen"); ok {
			t.Fatal("adyen is not a provider type")
		}
	})
	t.Run("Lookup hands out a copy", func(t *testing.T) {
		c, _ := providers.Lookup(providers.TypeKukoPay)
		c.CredentialKeys[0] = "changed"
		if c2, _ := providers.Lookup(providers.TypeKukoPay); c2.CredentialKeys[0] != "apiKey" {
			t.Fatal("a caller changed the registry")
		}
	})
}

func TestGenericCheckSecret(t *testing.T) {
	c, _ := providers.Lookup(providers.TypeGeneric)
	for _, tt := range []struct {
		name, secret string
		ok           bool
	}{
		{"whsec base64", "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef")), true},
		{"whsec base64 with a trailing newline", "whsec_" + base64.StdEncoding.EncodeToString([]byte("k")) + "\n", true},
		{"raw secret without prefix", "plain-secret", true},
		{"whsec with invalid base64", "whsec_***", false},
		{"whsec with nothing after the prefix", "whsec_", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.Verification.CheckSigningSecret([]byte(tt.secret)); (err == nil) != tt.ok {
				t.Fatalf("CheckSigningSecret(%q) = %v", tt.secret, err)
			}
		})
	}
}

// Every type that verifies with the signing Secret refuses a blank value of
// it, whose VerifyWebhook would never use it as a key: the PaymentProvider
// is not Ready instead of answering every webhook 401. A type that does not
// use the Secret does not judge it. Likewise a blank webhook id for the type
// that needs one.
func TestBlankVerificationConfigIsRefused(t *testing.T) {
	blanks := []string{"", " ", "\n", " \t\r\n"}
	for _, typ := range providers.Types() {
		v, _ := providers.Lookup(typ)
		t.Run(typ, func(t *testing.T) {
			for _, b := range blanks {
				err := v.Verification.CheckSigningSecret([]byte(b))
				if v.Verification.SigningSecret && !errors.Is(err, provider.ErrBlankSecret) {
					t.Errorf("signing secret %q: err = %v, want ErrBlankSecret", b, err)
				}
				if !v.Verification.SigningSecret && err != nil {
					t.Errorf("signing secret %q: err = %v for a type that does not use the signing Secret", b, err)
				}
				err = v.Verification.CheckWebhookID(b)
				if v.Verification.WebhookID && !errors.Is(err, provider.ErrBlankWebhookID) {
					t.Errorf("webhook id %q: err = %v, want ErrBlankWebhookID", b, err)
				}
				if !v.Verification.WebhookID && err != nil {
					t.Errorf("webhook id %q: err = %v for a type that needs none", b, err)
				}
			}
			if err := v.Verification.CheckSigningSecret([]byte(" s3cret\n")); err != nil {
				t.Errorf("a secret with whitespace around it: %v", err)
			}
			if err := v.Verification.CheckWebhookID("WH-1"); err != nil {
				t.Errorf("webhook id WH-1: %v", err)
			}
		})
	}
}

func TestUnknownTypeNamesTheTypeAndTheProvider(t *testing.T) {
	p, err := providers.New("adyen", provider.Config{Name: "ns/p", APIURL: "https://x"})
	if err == nil || p != nil || !strings.Contains(err.Error(), `"adyen"`) || !strings.Contains(err.Error(), "ns/p") {
		t.Fatalf("%v %v", p, err)
	}
	for _, typ := range providers.Types() {
		if !strings.Contains(err.Error(), typ) {
			t.Errorf("error %q does not list %s", err, typ)
		}
	}
}

// An adapter that verifies webhooks through its provider's API
// (Verification.Credentials) must say what one exact request is, or the
// receiver would call the provider for every copy of every forgery; one that
// verifies locally has nothing to remember.
func TestAdaptersThatVerifyThroughTheAPIAreRemoteVerifiers(t *testing.T) {
	for _, typ := range providers.Types() {
		caps, _ := providers.Lookup(typ)
		creds := map[string][]byte{}
		for _, k := range caps.CredentialKeys {
			creds[k] = []byte("value-of-" + k)
		}
		p, err := providers.New(typ, cfgWith(creds))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.(provider.RemoteVerifier); ok != caps.Verification.Credentials {
			t.Errorf("%s: implements provider.RemoteVerifier: %v; Verification.Credentials: %v", typ, ok, caps.Verification.Credentials)
		}
	}
}
