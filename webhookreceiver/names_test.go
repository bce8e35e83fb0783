package webhookreceiver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
)

// The longest provider name admission allows is routable (the path's name is
// parsed as a DNS subdomain) and its events, named at the 253-character
// limit, are stored.
func TestLongestProviderNameReceivesWebhooks(t *testing.T) {
	name := strings.Repeat("k", v1alpha1.MaxPaymentProviderNameLength)
	k := newKukoPay(t, func(p *fixture.Provider) { p.Name = name })
	k.name = name
	p := k.payment(t, "order-long", "order-long", "pay_long", 100)
	wantCode(t, k.deliver(t, k.event("evt_long", "payment.succeeded", "succeeded", p)), http.StatusOK)
	e := fixture.WaitEventResult(t, env.Client, k.ns, name, "evt_long", "", fixture.Timeout)
	if e == nil || len(e.Name) != 253 || e.Status.Result != v1alpha1.ResultApplied {
		t.Fatalf("event %+v, want stored under a 253-character name and applied", e)
	}
}
