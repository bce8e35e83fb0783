package webhookreceiver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
)

// A PayPal request that the adapter itself rejects without asking PayPal (here:
// a body that is not JSON, which PayPal never signed) does not spend the
// provider's verification budget, so a flood of such forgeries cannot turn the
// genuine webhook that follows into a 503.
//
// Scenario:
//  1. The provider's verification bucket holds one token (burst 1).
//  2. A forger sends well-formed PAYPAL-* headers with a current transmission
//     time and the body "not json". PayPal's adapter refuses it locally
//     (signature.go: "body is not JSON, so PayPal did not sign it"): no call.
//  3. PayPal delivers a genuine event. It needs the one call the budget allows.
//
// Expected: step 2 is 401 without a call and without a token (verify.go's own
// rule: "Requests the adapter rejects without a call ... never take a token from
// the provider's bucket", TestAPIVerificationBudgetIsSpentOnCallsOnly), step 3 is
// verified. A token taken before the adapter's local checks would answer
// step 3 with errVerifyBudget → 503 (SPEC §6: a forged request must not keep
// a genuine one out; PayPal retries, but a steady trickle of junk bodies would
// keep every genuine delivery out).
func TestPayPalRequestRejectedLocallyDoesNotSpendTheVerifyBudget(t *testing.T) {
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/oauth2/token":
			_, _ = w.Write([]byte(`{"access_token":"tok","token_type":"Bearer","expires_in":3600}`))
		case "/v1/notifications/verify-webhook-signature":
			calls.Add(1)
			_, _ = w.Write([]byte(`{"verification_status":"SUCCESS"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	a, err := paypal.New(provider.Config{
		Name: "shop/pp", APIURL: api.URL, WebhookID: "WH-1",
		Credentials: map[string][]byte{paypal.CredentialClientID: []byte("id"), paypal.CredentialClientSecret: []byte("secret")},
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Date(2026, 9, 21, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(sent.Add(time.Second))
	v := newAPIVerification(0.001, 1, 10, clk)
	shop := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "pp"}}
	headers := func(txID string) http.Header {
		h := http.Header{}
		h.Set(paypal.HeaderTransmissionID, txID)
		h.Set(paypal.HeaderTransmissionTime, sent.Format(time.RFC3339))
		h.Set(paypal.HeaderTransmissionSig, "c2lnbmF0dXJl")
		h.Set(paypal.HeaderCertURL, "https://api.paypal.com/v1/notifications/certs/CERT-1")
		h.Set(paypal.HeaderAuthAlgo, "SHA256withRSA")
		return h
	}
	const tolerance = 5 * time.Minute

	_, err = v.do(context.Background(), a, a, shop, headers("tx-forged"), []byte("not json"), nil, tolerance, clk.Now())
	if !errors.Is(err, provider.ErrInvalidSignature) || calls.Load() != 0 {
		t.Fatalf("forged non-JSON body: %v after %d calls; want a local 401 without a call", err, calls.Load())
	}
	_, err = v.do(context.Background(), a, a, shop, headers("tx-genuine"), []byte(`{"id":"WH-EVT-1","event_type":"PAYMENT.CAPTURE.COMPLETED"}`), nil, tolerance, clk.Now())
	if errors.Is(err, errVerifyBudget) {
		t.Fatalf("genuine request after one locally rejected forgery: %v (503); the forgery took the only token without a call (%d calls made)", err, calls.Load())
	}
	if err != nil || calls.Load() != 1 {
		t.Fatalf("genuine request: %v after %d calls; want verified with one call", err, calls.Load())
	}
}
