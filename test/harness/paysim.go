package harness

import (
	"net/http"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
)

// Paysim talks to a paysim process's control API (docs/paysim.md) through
// paysim's own ControlClient.
type Paysim struct {
	// URL is the paysim server; each provider's API is below it
	// (URL + "/kukopay", ...).
	URL string
	*paysim.ControlClient
}

// newPaysim is the control client of the paysim at url. Its calls may wait
// for a loaded paysim (a soak's), so they time out late.
func newPaysim(url string) Paysim {
	return Paysim{URL: url, ControlClient: &paysim.ControlClient{BaseURL: url, HTTP: &http.Client{Timeout: 60 * time.Second}}}
}

// ProviderCalls counts the API calls paysim processed: creates, status
// reads, look-ups, event pages, PayPal tokens and verifications.
func ProviderCalls(c paysim.Counters) int {
	n := c.CreateRequests + c.Searches + c.EventListCalls + c.TokensIssued + c.VerifyCalls
	for _, q := range c.QueriesByPayment {
		n += q
	}
	return n
}
