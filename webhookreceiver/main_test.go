package webhookreceiver_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/metrics"
	"github.com/paywarden/paywarden/internal/testenv"
)

// The suite shares one control plane and one receiver (its own manager, as
// in production); every test works in namespaces of its own.
var (
	env *testenv.Env
	rcv *fixture.Receiver
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Errors only, unless asked: rejected requests log at info by design.
	level := zapcore.ErrorLevel
	if os.Getenv("PAYWARDEN_TEST_DEBUG") != "" {
		level = zapcore.DebugLevel
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(level)))
	var err error
	env, err = testenv.Start()
	if err != nil {
		// A missing control plane fails the suite; it never skips it.
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	rcv, err = fixture.NewReceiver(env.Config, env.Scheme, fixture.ReceiverOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = rcv.Stop() }()
	return m.Run()
}

// kukoPay is a KukoPay provider in a fresh namespace.
type kukoPay struct {
	ns     string
	name   string
	secret string
	prov   *v1alpha1.PaymentProvider
}

func newKukoPay(t *testing.T, mods ...func(*fixture.Provider)) kukoPay {
	t.Helper()
	k := kukoPay{ns: fixture.Namespace(t, env.Client, "recv"), name: "kukopay", secret: "whsec-current"}
	p := fixture.Provider{Namespace: k.ns, Name: k.name, Type: v1alpha1.ProviderKukoPay, SigningSecrets: map[string]string{"current": k.secret}}
	for _, m := range mods {
		m(&p)
	}
	k.prov = fixture.CreateProvider(t, env.Client, p)
	waitProviderCached(t, k.prov)
	return k
}

// waitProviderCached waits until the receiver's cache holds the provider and
// the verification bundle the manager keeps for it, so the first request is
// judged on its secrets.
func waitProviderCached(t *testing.T, prov *v1alpha1.PaymentProvider) {
	t.Helper()
	fixture.WaitCached(t, rcv.Cache, prov)
}

func (k kukoPay) url() string { return rcv.WebhookURL(k.ns, k.name) }

// payment creates a tracked payment and waits for the receiver to see it.
func (k kukoPay) payment(t *testing.T, name, ref, providerID string, amount int64) *v1alpha1.Payment {
	t.Helper()
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: k.ns, Name: name, Provider: k.name, MerchantReference: ref, ProviderPaymentID: providerID, Amount: amount, Currency: "USD"})
	fixture.WaitCached(t, rcv.Cache, p)
	return p
}

// event is a KukoPay event about a payment of this provider.
func (k kukoPay) event(id, typ, status string, p *v1alpha1.Payment) fixture.KukoPayEvent {
	return fixture.KukoPayEvent{
		ID: id, Type: typ, Status: status, PaymentID: p.Spec.ProviderPaymentID, MerchantRef: p.Spec.MerchantReference,
		Amount: p.Spec.Amount.Value, Currency: p.Spec.Amount.Currency,
	}
}

// deliver sends a correctly signed event now.
func (k kukoPay) deliver(t *testing.T, ev fixture.KukoPayEvent) fixture.Response {
	t.Helper()
	body := ev.Body(t)
	return fixture.Send(t, "POST", k.url(), body, fixture.KukoPayHeader(body, time.Now(), k.secret))
}

// webhookCount reads paywarden_webhooks_total{namespace,provider,result}.
func webhookCount(t *testing.T, namespace, provider, result string) float64 {
	t.Helper()
	return counterValue(t, metrics.Webhooks.WithLabelValues(namespace, provider, result))
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	m := &dto.Metric{}
	if err := c.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// answered is the result an answer's body gives ("accepted", "duplicate", ...).
func answered(t *testing.T, r fixture.Response) string {
	t.Helper()
	var body struct {
		Result string `json:"result"`
	}
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
		t.Fatalf("answer %q is not the receiver's JSON: %v", r.Body, err)
	}
	return body.Result
}

// answerCounts are the provider's accepted and duplicate counts of
// paywarden_webhooks_total at one moment.
type answerCounts struct {
	k                   kukoPay
	accepted, duplicate float64
}

func (k kukoPay) answerCounts(t *testing.T) answerCounts {
	t.Helper()
	return answerCounts{k: k, accepted: webhookCount(t, k.ns, k.name, metrics.WebhookAccepted), duplicate: webhookCount(t, k.ns, k.name, metrics.WebhookDuplicate)}
}

// wantMoved checks by how much the accepted and duplicate counts moved since c.
func (c answerCounts) wantMoved(t *testing.T, accepted, duplicate float64) {
	t.Helper()
	now := c.k.answerCounts(t)
	if a, d := now.accepted-c.accepted, now.duplicate-c.duplicate; a != accepted || d != duplicate {
		t.Errorf("paywarden_webhooks_total moved by accepted %v, duplicate %v; want %v, %v", a, d, accepted, duplicate)
	}
}

func wantCode(t *testing.T, r fixture.Response, code int) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("status %d (%s), want %d", r.Code, r.Body, code)
	}
}

func wantNoEvents(t *testing.T, ns string) {
	t.Helper()
	if evs := fixture.WebhookEvents(t, env.Client, ns); len(evs) != 0 {
		t.Fatalf("%d WebhookEvents written for rejected requests, want none (first: %s result %q)", len(evs), evs[0].Name, evs[0].Status.Result)
	}
}
