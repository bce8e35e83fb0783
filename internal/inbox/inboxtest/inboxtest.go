// Package inboxtest holds the fixtures the envtest suites of the webhook
// receiver and the inbox processor share: namespaces, providers with their
// Secrets, payments, signed KukoPay and generic webhooks, a receiver running
// on its own manager (as in production: a separate process) and polling with
// deadlines instead of sleeps.
package inboxtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider/generic"
	"github.com/paywarden/paywarden/internal/provider/kukopay"
	"github.com/paywarden/paywarden/webhookreceiver"
)

// Timeout is the default deadline of Eventually.
const Timeout = 30 * time.Second

// Eventually polls cond every 20ms until it returns true or timeout passes,
// then fails with cond's last explanation.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not reached within %s: %s", timeout, why)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a schedule
	}
}

// Namespace creates a fresh namespace.
func Namespace(t testing.TB, c client.Client, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// Provider describes a PaymentProvider fixture.
type Provider struct {
	Namespace, Name string
	Type            v1alpha1.ProviderType
	APIURL          string
	// Credentials of the credentials Secret; default per type.
	Credentials map[string]string
	// SigningSecrets are the keys of the signing Secret; each is an active secret.
	SigningSecrets map[string]string
	MaxBodyBytes   int64
	Retention      time.Duration
}

// CreateProvider creates the provider with its credentials and signing Secrets.
func CreateProvider(t testing.TB, c client.Client, p Provider) *v1alpha1.PaymentProvider {
	t.Helper()
	ctx := context.Background()
	if p.APIURL == "" {
		p.APIURL = "http://provider.invalid"
	}
	if p.Credentials == nil {
		switch p.Type {
		case v1alpha1.ProviderGeneric:
			p.Credentials = map[string]string{generic.CredentialToken: "test-token"}
		default:
			p.Credentials = map[string]string{kukopay.CredentialAPIKey: "test-key"}
		}
	}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name + "-credentials"}, StringData: p.Credentials}
	signing := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name + "-webhook"}, StringData: p.SigningSecrets}
	for _, s := range []*corev1.Secret{creds, signing} {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	prov := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name},
		Spec: v1alpha1.PaymentProviderSpec{
			Type:                 p.Type,
			APIURL:               p.APIURL,
			CredentialsSecretRef: v1alpha1.SecretReference{Name: creds.Name},
			Webhook:              v1alpha1.WebhookConfig{SigningSecretRef: &v1alpha1.SecretReference{Name: signing.Name}},
		},
	}
	if p.MaxBodyBytes > 0 {
		prov.Spec.Webhook.MaxBodyBytes = ptr.To(p.MaxBodyBytes)
	}
	if p.Retention > 0 {
		prov.Spec.Retention.WebhookEvents = &metav1.Duration{Duration: p.Retention}
	}
	if err := c.Create(ctx, prov); err != nil {
		t.Fatal(err)
	}
	return prov
}

// CreatePayment creates a tracked Payment (spec.providerPaymentID set, so no
// reconciler is needed) with an explicit merchant reference.
func CreatePayment(t testing.TB, c client.Client, ns, name, providerName, merchantRef, providerID string, amount int64, currency string) *v1alpha1.Payment {
	t.Helper()
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:       v1alpha1.LocalObjectReference{Name: providerName},
			Amount:            v1alpha1.Amount{Value: amount, Currency: currency},
			MerchantReference: merchantRef,
			ProviderPaymentID: providerID,
		},
	}
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// WaitCached waits until reader (a cache) holds obj at its current
// resourceVersion, so a receiver reading through that cache sees the write.
// For a PaymentProvider it also waits for the provider's webhook
// verification bundle (see WaitBundle).
func WaitCached(t testing.TB, reader client.Reader, obj client.Object) {
	t.Helper()
	if prov, ok := obj.(*v1alpha1.PaymentProvider); ok {
		defer WaitBundle(t, reader, prov)
	}
	want := obj.GetResourceVersion()
	fresh := obj.DeepCopyObject().(client.Object)
	Eventually(t, Timeout, func() (bool, string) {
		if err := reader.Get(context.Background(), client.ObjectKeyFromObject(obj), fresh); err != nil {
			return false, err.Error()
		}
		return fresh.GetResourceVersion() == want, fmt.Sprintf("cache has %s at resourceVersion %s, want %s", client.ObjectKeyFromObject(obj), fresh.GetResourceVersion(), want)
	})
}

// GetPayment reads a payment from the API server.
func GetPayment(t testing.TB, c client.Reader, p *v1alpha1.Payment) *v1alpha1.Payment {
	t.Helper()
	got := &v1alpha1.Payment{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// Events lists the WebhookEvents of a namespace from the API server.
func Events(t testing.TB, c client.Reader, ns string) []v1alpha1.WebhookEvent {
	t.Helper()
	var l v1alpha1.WebhookEventList
	if err := c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name })
	return l.Items
}

// EventFor reads the WebhookEvent of (provider, event id), nil when absent.
func EventFor(t testing.TB, c client.Reader, ns, providerName, eventID string) *v1alpha1.WebhookEvent {
	t.Helper()
	for _, e := range Events(t, c, ns) {
		if e.Spec.Provider == providerName && e.Spec.EventID == eventID {
			return &e
		}
	}
	return nil
}

// Transitions counts the phase changes in a payment's history.
func Transitions(p *v1alpha1.Payment) int {
	n := 0
	for _, h := range p.Status.History {
		if h.From != h.To {
			n++
		}
	}
	return n
}

// KukoPayEvent is a KukoPay event about a payment, built from the adapter's
// wire types so it is exactly what KukoPay sends. refund.* events carry a
// refund object with RefundedTotal as the payment's cumulative refund.
type KukoPayEvent struct {
	ID, Type, PaymentID, MerchantRef, Status string
	Amount, RefundedTotal                    int64
	Currency                                 string
	Created                                  time.Time
}

// Body renders the event as KukoPay's JSON.
func (e KukoPayEvent) Body(t testing.TB) []byte {
	t.Helper()
	if e.Created.IsZero() {
		e.Created = time.Now()
	}
	obj := kukopay.PaymentObject{
		ID: e.PaymentID, Object: "payment", OutTradeNo: e.MerchantRef, Amount: e.Amount,
		AmountReceived: e.Amount, Currency: e.Currency, Status: e.Status, Created: e.Created.Unix(),
	}
	var v any = obj
	if len(e.Type) > 7 && e.Type[:7] == "refund." {
		v = kukopay.RefundObject{
			ID: "re_" + e.ID, Object: "refund", Payment: e.PaymentID, OutTradeNo: e.MerchantRef, Amount: e.Amount,
			Currency: e.Currency, Status: e.Status, PaymentAmountRefunded: e.RefundedTotal, Created: e.Created.Unix(),
		}
	}
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(kukopay.EventObject{ID: e.ID, Object: "event", Type: e.Type, Created: e.Created.Unix(), Data: kukopay.EventData{Object: data}})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// KukoPayHeader signs body as KukoPay does at time at, one v1 per secret.
func KukoPayHeader(body []byte, at time.Time, secrets ...string) http.Header {
	bs := make([][]byte, len(secrets))
	for i, s := range secrets {
		bs[i] = []byte(s)
	}
	h := http.Header{}
	h.Set(kukopay.HeaderSignature, kukopay.SignatureHeaderValue(at, body, bs...))
	h.Set("Content-Type", "application/json")
	return h
}

// GenericEvent is a generic async-job event.
type GenericEvent struct {
	ID, Type, JobID, CorrelationID, JobStatus string
	Amount                                    int64
	Currency                                  string
	Timestamp                                 time.Time
}

// Body renders the event as the generic provider's JSON.
func (e GenericEvent) Body(t testing.TB) []byte {
	t.Helper()
	if e.Timestamp.IsZero() {
		e.Timestamp = time.Now()
	}
	job := generic.Job{JobID: e.JobID, CorrelationID: e.CorrelationID, JobStatus: e.JobStatus, Amount: generic.Amount{Value: e.Amount, Currency: e.Currency}}
	if e.JobStatus == "succeeded" {
		job.AmountReceived = &generic.Amount{Value: e.Amount, Currency: e.Currency}
	}
	data, err := json.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	body, err := json.Marshal(generic.EventEnvelope{ID: e.ID, Type: e.Type, Timestamp: e.Timestamp.UTC().Format(time.RFC3339), Data: data})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// GenericHeader signs body per Standard Webhooks.
func GenericHeader(t testing.TB, id string, body []byte, at time.Time, secrets ...string) http.Header {
	t.Helper()
	bs := make([][]byte, len(secrets))
	for i, s := range secrets {
		bs[i] = []byte(s)
	}
	h, err := generic.SignHeaders(id, at, body, bs...)
	if err != nil {
		t.Fatal(err)
	}
	h.Set("Content-Type", "application/json")
	return h
}

// Response is what a webhook request got back.
type Response struct {
	Code   int
	Header http.Header
	Body   string
}

// Send posts body with header to url and returns the answer.
func Send(t testing.TB, method, url string, body []byte, header http.Header) Response {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	// Redirects are never followed: a 3xx must show up as a 3xx.
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return Response{Code: resp.StatusCode, Header: resp.Header, Body: string(b)}
}

// Receiver is a webhook receiver on its own manager, as in production.
type Receiver struct {
	URL    string
	Cache  cache.Cache
	Server *webhookreceiver.Server
	// Client is the manager's client (before any wrapping).
	Client client.Client
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// ReceiverOptions tweak StartReceiver.
type ReceiverOptions struct {
	// Options are passed to webhookreceiver.SetupWithManager (Listener is set here).
	Options webhookreceiver.Options
	// WrapClient, when set, wraps the manager's client for the receiver's
	// writes (fault injection).
	WrapClient func(client.Client) client.Client
	// BundleConfig is the identity the manager's webhook-bundle controller
	// runs with next to the receiver (see StartBundles); nil: cfg, which then
	// also creates the bundle namespace.
	BundleConfig *rest.Config
}

// StartReceiver starts a manager with a receiver on a free local port and
// waits until /readyz answers 200.
func StartReceiver(cfg *rest.Config, scheme *runtime.Scheme, ro ReceiverOptions) (*Receiver, error) {
	if ro.Options.BundleNamespace == "" {
		ro.Options.BundleNamespace = BundleNamespace
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  webhookreceiver.CacheOptions(cache.Options{ReaderFailOnMissingInformer: true}, ro.Options.BundleNamespace),
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	opts := ro.Options
	opts.Listener = ln
	if ro.WrapClient != nil {
		opts.Client = ro.WrapClient(mgr.GetClient())
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := webhookreceiver.SetupWithManager(ctx, mgr, opts)
	if err != nil {
		cancel()
		_ = ln.Close()
		return nil, err
	}
	bundles, err := startBundlesFor(ctx, cfg, scheme, ro)
	if err != nil {
		cancel()
		_ = ln.Close()
		return nil, err
	}
	r := &Receiver{URL: "http://" + ln.Addr().String(), Cache: mgr.GetCache(), Server: srv, Client: mgr.GetClient(), cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := mgr.Start(ctx)
		if berr := <-bundles; err == nil {
			err = berr
		}
		r.done <- err
	}()
	deadline := time.Now().Add(Timeout)
	for {
		resp, err := http.Get(r.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
		select {
		case err := <-r.done:
			return nil, fmt.Errorf("receiver manager stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, fmt.Errorf("receiver not ready within %s", Timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WebhookURL is the receiver URL of a provider.
func (r *Receiver) WebhookURL(ns, providerName string) string {
	return r.URL + "/webhooks/" + ns + "/" + providerName
}

// Stop stops the receiver's manager and waits for it; later calls return
// the first result.
func (r *Receiver) Stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}
