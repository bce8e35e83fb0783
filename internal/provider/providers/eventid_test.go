package providers_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
)

// TestEventsNameThePaymentCreateReturned drives one payment per type through paysim
// (created by the adapter, then paid, refunded, disputed) and parses every event it
// emits: each must name the id Create returned, the id paywarden records, or no id at
// all (a PayPal dispute names only the capture). Another id would raise a false
// DuplicatePayment review in the core.
func TestEventsNameThePaymentCreateReturned(t *testing.T) {
	sim := paysim.New(paysim.Options{DefaultScript: &paysim.Script{Outcome: paysim.OutcomePending}})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { sim.Close(); srv.Close() })
	creds := map[string][]byte{"apiKey": []byte("k"), "clientID": []byte("i"), "clientSecret": []byte("s"), "token": []byte("t"), "secretKey": []byte("sk")}
	// Only the PayPal dispute is allowed to name no payment.
	noID := map[string]bool{providers.TypePayPal + "/CUSTOMER.DISPUTE.CREATED": true}
	// Stripe's refund and dispute objects do not carry the PaymentIntent's metadata:
	// they are found by the payment id.
	noRef := map[string]bool{providers.TypeStripe + "/refund.created": true, providers.TypeStripe + "/charge.dispute.created": true, providers.TypeStripe + "/charge.dispute.funds_withdrawn": true}

	for _, typ := range providers.Types() {
		t.Run(typ, func(t *testing.T) {
			a, err := providers.New(typ, provider.Config{Name: "ns/" + typ, APIURL: srv.URL + "/" + typ, Credentials: creds, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Create(context.Background(), provider.CreateRequest{IdempotencyKey: "key-" + typ, MerchantReference: "ref-" + typ, Amount: 1999, Currency: "USD"})
			if err != nil || p.ID == "" {
				t.Fatalf("create: %+v %v", p, err)
			}
			if err := sim.SetOutcome(typ, p.ID, paysim.Script{Outcome: paysim.OutcomeSucceed}); err != nil {
				t.Fatal(err)
			}
			waitEvents(t, sim, typ, 1)
			if err := sim.Refund(typ, p.ID, 500); err != nil {
				t.Fatal(err)
			}
			if err := sim.Dispute(typ, p.ID, ""); err != nil {
				t.Fatal(err)
			}
			records := waitEvents(t, sim, typ, 3)
			for _, rec := range records {
				ev, err := a.ParseEvent(rec.Raw)
				if err != nil {
					t.Fatalf("%s: %v", rec.Type, err)
				}
				want := p.ID
				if noID[typ+"/"+ev.Type] {
					want = ""
				}
				if ev.PaymentID != want {
					t.Errorf("%s names payment %q, Create returned %q", ev.Type, ev.PaymentID, p.ID)
				}
				if ev.MerchantReference != "ref-"+typ && !noRef[typ+"/"+ev.Type] {
					t.Errorf("%s names merchant reference %q", ev.Type, ev.MerchantReference)
				}
			}
		})
	}
}

// waitEvents waits (briefly: paysim settles a zero-delay outcome on its own goroutine)
// until provider has recorded n events.
func waitEvents(t *testing.T, sim *paysim.Sim, typ string, n int) []paysim.EventRecord {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		evs := sim.Events(typ)
		if len(evs) >= n {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d events, want %d", typ, len(evs), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
