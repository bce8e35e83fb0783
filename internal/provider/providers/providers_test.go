package providers_test

import (
	"strings"
	"testing"

	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
)

func TestNew(t *testing.T) {
	creds := map[string][]byte{"apiKey": []byte("k"), "clientID": []byte("i"), "clientSecret": []byte("s"), "token": []byte("t")}
	for _, typ := range providers.Types() {
		t.Run(typ+" builds", func(t *testing.T) {
			p, err := providers.New(typ, provider.Config{Name: "ns/p", APIURL: "https://api.example.com", Credentials: creds})
			if err != nil || p == nil {
				t.Fatalf("%v %v", p, err)
			}
		})
		t.Run(typ+" without credentials fails with a nil provider", func(t *testing.T) {
			p, err := providers.New(typ, provider.Config{Name: "ns/p", APIURL: "https://api.example.com"})
			if err == nil || p != nil {
				t.Fatalf("%v %v", p, err)
			}
		})
	}
	t.Run("unknown type names the type and the provider", func(t *testing.T) {
		p, err := providers.New("stripe", provider.Config{Name: "ns/p", APIURL: "https://x"})
		if err == nil || p != nil || !strings.Contains(err.Error(), `"stripe"`) || !strings.Contains(err.Error(), "ns/p") {
			t.Fatalf("%v %v", p, err)
		}
	})
}
