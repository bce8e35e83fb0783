package webhookreceiver_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
	"github.com/paywarden/paywarden/webhookreceiver"
)

// outage makes the receiver's inbox writes fail the way an unavailable API
// server does: an immediate 503, or no answer until the caller gives up.
type outage struct {
	client.Client
	mode atomic.Int32
}

const (
	up = iota
	serviceUnavailable
	hanging
)

func (o *outage) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, ok := obj.(*v1alpha1.WebhookEvent); ok {
		switch o.mode.Load() {
		case serviceUnavailable:
			return apierrors.NewServiceUnavailable("etcdserver: leader changed")
		case hanging:
			<-ctx.Done()
			return apierrors.NewTimeoutError("request did not complete within the allowed duration", 1)
		}
	}
	return o.Client.Create(ctx, obj, opts...)
}

// Issue 5, test 8: paysim delivers while the API server is away; the receiver
// answers 503 with Retry-After and stores nothing; paysim's next retry after
// the recovery is stored and applied exactly once.
func TestAPIServerUnavailable(t *testing.T) {
	var broken *outage
	r2, err := fixture.NewReceiver(env.Config, env.Scheme, fixture.ReceiverOptions{
		Options: webhookreceiver.Options{StoreTimeout: 300 * time.Millisecond, RetryAfter: 7 * time.Second},
		WrapClient: func(c client.Client) client.Client {
			broken = &outage{Client: c}
			return broken
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r2.Stop() })

	const secret = "secret-8"
	sim := paysim.New(paysim.Options{
		TimeFactor: 0.001, KukoPayAPIKey: "test-key",
		WebhookSecrets: map[string][][]byte{paysim.KukoPay: {[]byte(secret)}},
	})
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(simSrv.Close)
	t.Cleanup(sim.Close)

	ns := fixture.Namespace(t, env.Client, "outage")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay, APIURL: simSrv.URL + "/kukopay",
		SigningSecrets: map[string]string{"current": secret},
	})
	fixture.WaitCached(t, r2.Cache, prov)
	url := r2.WebhookURL(ns, prov.Name)

	for _, mode := range []struct {
		name string
		mode int32
	}{{"service unavailable", serviceUnavailable}, {"store times out", hanging}} {
		t.Run("direct delivery while "+mode.name, func(t *testing.T) {
			broken.mode.Store(mode.mode)
			before := webhookCount(t, prov.Namespace, prov.Name, metrics.WebhookUnavailable)
			ev := fixture.KukoPayEvent{ID: "evt_direct_" + strconv.Itoa(int(mode.mode)), Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_x", MerchantRef: "order-x", Amount: 1, Currency: "USD"}
			body := ev.Body(t)
			resp := fixture.Send(t, "POST", url, body, fixture.KukoPayHeader(body, time.Now(), secret))
			wantCode(t, resp, http.StatusServiceUnavailable)
			if got := resp.Header.Get("Retry-After"); got != "7" {
				t.Errorf("Retry-After %q, want 7", got)
			}
			if d := webhookCount(t, prov.Namespace, prov.Name, metrics.WebhookUnavailable) - before; d != 1 {
				t.Errorf("unavailable counter moved by %v, want 1", d)
			}
			wantNoEvents(t, ns)
		})
	}

	// paysim's own delivery, retried on KukoPay's schedule (scaled).
	broken.mode.Store(serviceUnavailable)
	if err := sim.SetWebhookTarget(paysim.KukoPay, url); err != nil {
		t.Fatal(err)
	}
	adapter, err := providers.New(providers.TypeKukoPay, provider.Config{Name: ns + "/kukopay", APIURL: simSrv.URL + "/kukopay", Credentials: map[string][]byte{"apiKey": []byte("test-key")}})
	if err != nil {
		t.Fatal(err)
	}
	created, err := adapter.Create(context.Background(), provider.CreateRequest{
		IdempotencyKey: "idem-8", MerchantReference: "order-8", Amount: 800, Currency: "USD",
		Metadata: map[string]string{paysim.MetaOutcome: string(paysim.OutcomeSucceed), paysim.MetaAfter: "1s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-8", Provider: prov.Name, MerchantReference: "order-8", ProviderPaymentID: created.ID, Amount: 800, Currency: "USD"})
	fixture.WaitCached(t, r2.Cache, p)

	fixture.Eventually(t, fixture.Timeout, "paysim to see a failed delivery", func() (bool, string) {
		c := sim.Counters().WebhooksByProvider[paysim.KukoPay]
		return c.Failed >= 1, "paysim has not seen a failed delivery yet"
	})
	wantNoEvents(t, ns)
	broken.mode.Store(up)

	fixture.Eventually(t, fixture.Timeout, "the payment to succeed", func() (bool, string) {
		got := fixture.GetPayment(t, env.Client, p)
		return got.Status.Phase == v1alpha1.PhaseSucceeded, "payment is " + string(got.Status.Phase)
	})
	// paysim counts the delivery once it has read the answer, just after
	// the payment moved.
	fixture.Eventually(t, fixture.Timeout, "paysim to count the delivery", func() (bool, string) {
		return sim.Counters().WebhooksByProvider[paysim.KukoPay].Delivered >= 1, "paysim has not counted the delivery"
	})
	c := sim.Counters().WebhooksByProvider[paysim.KukoPay]
	if c.Delivered != 1 || c.Exhausted != 0 || c.Failed < 1 {
		t.Errorf("paysim deliveries %+v, want failures then exactly one delivery", c)
	}
	evs := fixture.WebhookEvents(t, env.Client, ns)
	if len(evs) == 1 {
		fixture.WaitEventResult(t, env.Client, ns, evs[0].Spec.Provider, evs[0].Spec.EventID, "", fixture.Timeout)
		evs = fixture.WebhookEvents(t, env.Client, ns)
	}
	if len(evs) != 1 || evs[0].Status.Result != v1alpha1.ResultApplied || evs[0].Status.Attempts != 1 {
		t.Fatalf("events %+v, want exactly one, Applied on its first attempt", evs)
	}
	if got := fixture.GetPayment(t, env.Client, p); fixture.Transitions(got) != 1 {
		t.Errorf("%d transitions, want 1", fixture.Transitions(got))
	}
}
