package payment_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/payment"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// Behaviour the providers document (docs/providers.md, "Documented
// behaviour", issue 22): each rule is decided here, from the facts, by the
// pure core.

// TestCreateKeyWindowIsTheProviders: PayPal keeps a create's PayPal-Request-Id
// for 6 hours (Orders v2 API reference, "Create order", PayPal-Request-Id), so
// an unset spec.idempotencyWindow is 6h for a PayPal account: past it less the
// margin the create is no longer repeated with its key (it would make a second
// order) but looked up. A window the operator sets wins; a provider that
// documents none keeps 24h.
func TestCreateKeyWindowIsTheProviders(t *testing.T) {
	hours := func(h int) *metav1.Duration { return &metav1.Duration{Duration: time.Duration(h) * time.Hour} }
	for _, tc := range []struct {
		name   string
		spec   *metav1.Duration
		caps   provider.Capabilities
		lookup time.Duration // after the marker
	}{
		{name: "paypal, unset: 6h less 10%", caps: paypal.Capabilities(), lookup: 6 * time.Hour * 90 / 100},
		{name: "paypal, 72h enabled for the account and set", spec: hours(72), caps: paypal.Capabilities(), lookup: 72 * time.Hour * 90 / 100},
		{name: "a type that documents no window, unset: 24h less 10%", caps: provider.Capabilities{Type: "generic", LookupByReference: true}, lookup: 24 * time.Hour * 90 / 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1alpha1.PaymentProviderSpec{IdempotencyWindow: tc.spec}
			pol := payment.PolicyFor(spec).WithCapabilities(spec, tc.caps)
			pol.JitterPercent = 0
			p := newPay("window")
			p = store(p, planned(p, pol, t0).Outcome)
			if got := planned(p, pol, t0.Add(tc.lookup-time.Second)).Action; got != payment.Create {
				t.Errorf("a second before %v: %v, want the create repeated with its key", tc.lookup, got)
			}
			if got := planned(p, pol, t0.Add(tc.lookup)).Action; got != payment.Lookup {
				t.Errorf("at %v: %v, want the create looked up, not repeated", tc.lookup, got)
			}
		})
	}
}
