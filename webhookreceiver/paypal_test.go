package webhookreceiver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/webhookreceiver"
)

// payPal is a PayPal provider backed by paysim, whose verify endpoint counts
// the calls the receiver makes.
type payPal struct {
	ns, name string
	sim      *paysim.Sim
	secret   []byte
}

func newPayPal(t *testing.T) payPal {
	t.Helper()
	ctx := context.Background()
	p := payPal{ns: fixture.Namespace(t, env.Client, "paypal"), name: "paypal", secret: []byte("paypal-sim-secret")}
	p.sim = paysim.New(paysim.Options{})
	srv := httptest.NewServer(p.sim.Handler())
	t.Cleanup(func() { srv.Close(); p.sim.Close() })
	if err := p.sim.SetWebhookTarget(paysim.PayPal, "", p.secret); err != nil {
		t.Fatal(err)
	}
	creds := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: "paypal-credentials"},
		StringData: map[string]string{paypal.CredentialClientID: "id", paypal.CredentialClientSecret: "secret"},
	}
	if err := env.Client.Create(ctx, creds); err != nil {
		t.Fatal(err)
	}
	prov := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: v1alpha1.ProviderPayPal, APIURL: srv.URL + "/paypal",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: creds.Name},
			Webhook:              v1alpha1.WebhookConfig{PayPalWebhookID: p.sim.PayPalWebhookID()},
		},
	}
	if err := env.Client.Create(ctx, prov); err != nil {
		t.Fatal(err)
	}
	// The provider and its bundle, which carries the credentials PayPal's
	// verification needs: the receiver reads no tenant Secret.
	fixture.WaitCached(t, rcv.Cache, prov)
	return p
}

func (p payPal) verifyCalls() int { return p.sim.Counters().VerifyCalls }

// event is a PAYMENT.CAPTURE.COMPLETED event as PayPal sends it.
func (p payPal) event(t *testing.T, id string) []byte {
	t.Helper()
	capture, err := json.Marshal(paypal.Capture{
		ID: "CAP-" + id, Status: "COMPLETED", Amount: paypal.Money{CurrencyCode: "USD", Value: "10.00"}, InvoiceID: "order-" + id,
		SupplementaryData: &paypal.SupplementaryData{RelatedIDs: paypal.RelatedIDs{OrderID: "ORDER-" + id}},
	})
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(paypal.WebhookEvent{
		ID: id, EventType: "PAYMENT.CAPTURE.COMPLETED", CreateTime: time.Now().UTC().Format(time.RFC3339),
		ResourceType: "capture", Resource: capture,
	})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// headers are the PAYPAL-* transmission headers of body, signed with secret
// (paysim's stand-in for PayPal's certificate) at time at.
func (p payPal) headers(transmissionID string, at time.Time, body, secret []byte) http.Header {
	ts := at.UTC().Format(time.RFC3339)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(paypal.HeaderTransmissionID, transmissionID)
	h.Set(paypal.HeaderTransmissionTime, ts)
	h.Set(paypal.HeaderTransmissionSig, paypal.SignTransmission(secret, transmissionID, ts, p.sim.PayPalWebhookID(), body))
	h.Set(paypal.HeaderCertURL, "https://api.paypal.com/v1/notifications/certs/CERT-360caa42-fca2a594-1d93a270")
	h.Set(paypal.HeaderAuthAlgo, paypal.SimAuthAlgo)
	return h
}

// Forged PayPal webhooks (well-formed, in the tolerance window, wrong
// signature) cost at most the verify bucket's budget of calls to PayPal; a
// verdict is remembered per exact transmission, a forgery cannot poison the
// genuine request that shares its transmission id, a remembered verdict does
// not outlive the tolerance, and genuine deliveries are accepted.
func TestForgedPayPalRequestsCostAtMostTheVerifyBudget(t *testing.T) {
	const (
		forged = 500
		qps    = 1
		burst  = 5
	)
	p := newPayPal(t)
	// The receiver's clock is frozen, so the bucket refills only when the
	// test says so and the budget is exact.
	clk := clocktesting.NewFakePassiveClock(time.Now())
	base := startServer(t, webhookreceiver.Options{Clock: clk, VerifyQPS: qps, VerifyBurst: burst, RetryAfter: 3 * time.Second})
	url := base + "/webhooks/" + p.ns + "/" + p.name
	attacker := []byte("attacker")
	calls := p.verifyCalls()
	callsSince := func() int {
		n := p.verifyCalls() - calls
		calls = p.verifyCalls()
		return n
	}

	genuineBody := p.event(t, "WH-GENUINE-1")
	genuine := p.headers("tx-shared", clk.Now(), genuineBody, p.secret)
	forgedBody := p.event(t, "WH-FORGED-1")
	forgery := p.headers("tx-shared", clk.Now(), forgedBody, attacker)

	t.Run("a forgery's verdict is remembered", func(t *testing.T) {
		for i := range 10 {
			wantCode(t, fixture.Send(t, "POST", url, forgedBody, forgery), http.StatusUnauthorized)
			want := 0
			if i == 0 {
				want = 1
			}
			if n := callsSince(); n != want {
				t.Fatalf("copy %d of one forgery made %d verify calls, want 1 for the first and none after", i+1, n)
			}
		}
	})
	t.Run("a forgery with a genuine transmission id does not poison it", func(t *testing.T) {
		r := fixture.Send(t, "POST", url, genuineBody, genuine)
		wantCode(t, r, http.StatusOK)
		if n := callsSince(); n != 1 {
			t.Fatalf("%d verify calls for the genuine transmission, want its own 1", n)
		}
		if e := fixture.WebhookEventFor(t, env.Client, p.ns, p.name, "WH-GENUINE-1"); e == nil {
			t.Fatal("genuine event not stored")
		}
		// PayPal redelivers the same transmission: the verdict is remembered.
		r = fixture.Send(t, "POST", url, genuineBody, genuine)
		wantCode(t, r, http.StatusOK)
		if n := callsSince(); n != 0 {
			t.Fatalf("%d verify calls for a redelivered transmission, want 0", n)
		}
	})

	t.Run(strconv.Itoa(forged)+" distinct forgeries", func(t *testing.T) {
		budget := burst - 2 // the bucket has spent one call on the forgery, one on the genuine request
		codes := make([]int, forged)
		var wg sync.WaitGroup
		work := make(chan int)
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					body := p.event(t, fmt.Sprintf("WH-FORGED-%d", i))
					codes[i] = fixture.Send(t, "POST", url, body, p.headers(fmt.Sprintf("tx-forged-%d", i), clk.Now(), body, attacker)).Code
				}
			}()
		}
		for i := range forged {
			work <- i
		}
		close(work)
		wg.Wait()
		n := callsSince()
		count := map[int]int{}
		for _, c := range codes {
			count[c]++
		}
		t.Logf("%d forged PayPal requests: %d verify calls; answers %v", forged, n, count)
		if n > budget {
			t.Errorf("%d verify calls, want at most the bucket's remaining %d", n, budget)
		}
		if count[http.StatusUnauthorized] != n || count[http.StatusServiceUnavailable] != forged-n {
			t.Errorf("answers %v, want 401 for each verified forgery and 503 for the rest", count)
		}
		wantNoEventsExcept(t, p.ns, "WH-GENUINE-1")
	})

	t.Run("a genuine delivery after the flood", func(t *testing.T) {
		body := p.event(t, "WH-GENUINE-2")
		h := p.headers("tx-genuine-2", clk.Now(), body, p.secret)
		r := fixture.Send(t, "POST", url, body, h)
		if r.Code != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "3" {
			t.Fatalf("with the bucket empty: %d, Retry-After %q; want 503 with Retry-After 3", r.Code, r.Header.Get("Retry-After"))
		}
		// PayPal delivers again later; by then the bucket has a token.
		clk.SetTime(clk.Now().Add(time.Second / qps))
		wantCode(t, fixture.Send(t, "POST", url, body, h), http.StatusOK)
		if n := callsSince(); n != 1 {
			t.Errorf("%d verify calls, want 1", n)
		}
		if e := fixture.WebhookEventFor(t, env.Client, p.ns, p.name, "WH-GENUINE-2"); e == nil {
			t.Fatal("genuine event not stored")
		}
	})

	t.Run("a remembered verdict does not outlive the tolerance", func(t *testing.T) {
		clk.SetTime(clk.Now().Add(6 * time.Minute))
		wantCode(t, fixture.Send(t, "POST", url, genuineBody, genuine), http.StatusUnauthorized)
		if n := callsSince(); n != 0 {
			t.Errorf("%d verify calls for a transmission outside the tolerance, want 0", n)
		}
	})
}

func wantNoEventsExcept(t *testing.T, ns string, eventIDs ...string) {
	t.Helper()
	allowed := map[string]bool{}
	for _, id := range eventIDs {
		allowed[id] = true
	}
	for _, e := range fixture.WebhookEvents(t, env.Client, ns) {
		if !allowed[e.Spec.EventID] {
			t.Errorf("event %s stored for a rejected request", e.Spec.EventID)
		}
	}
}
