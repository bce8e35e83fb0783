package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/statuswriter"
	"github.com/paywarden/paywarden/internal/testenv"
)

// env is the control plane shared by every test of the package.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapLevel())))
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func zapLevel() zapcore.Level {
	if os.Getenv("PAYWARDEN_TEST_DEBUG") != "" {
		return -1
	}
	return 2 // errors only: the suites are noisy otherwise
}

// --- simulator ---------------------------------------------------------------

// sim is a paysim server on a real loopback port.
type sim struct {
	*paysim.Sim
	URL string
}

func startSim(t *testing.T, opts paysim.Options) *sim {
	t.Helper()
	if opts.TimeFactor == 0 {
		opts.TimeFactor = 0.01
	}
	s := paysim.New(opts)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { s.Close(); srv.Close() })
	return &sim{Sim: s, URL: srv.URL}
}

// requestLog records when each provider request left the manager.
type requestLog struct {
	mu    sync.Mutex
	calls []call
}

type call struct {
	at     time.Time
	method string
	path   string
	status int // 0 when no answer came back
}

func (l *requestLog) RoundTrip(r *http.Request) (*http.Response, error) {
	at := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(r)
	c := call{at: at, method: r.Method, path: r.URL.Path}
	if err == nil {
		c.status = resp.StatusCode
	}
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
	return resp, err
}

func (l *requestLog) snapshot(filter func(call) bool) []call {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []call
	for _, c := range l.calls {
		if filter == nil || filter(c) {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

func isGet(c call) bool { return c.method == http.MethodGet }

// --- manager -----------------------------------------------------------------

// writeCounter counts status writes per payment, and can fail chosen writes.
type writeCounter struct {
	client.Client
	mu     sync.Mutex
	writes map[string]int
	// failNext, when it returns true for a status update, makes it fail once.
	failNext func(p *v1alpha1.Payment) bool
	failed   atomic.Int32
}

func (w *writeCounter) Status() client.SubResourceWriter {
	return &countingStatus{SubResourceWriter: w.Client.Status(), w: w}
}

func (w *writeCounter) count(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes[name]
}

type countingStatus struct {
	client.SubResourceWriter
	w *writeCounter
}

func (s *countingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if p, ok := obj.(*v1alpha1.Payment); ok {
		s.w.mu.Lock()
		fail := s.w.failNext != nil && s.w.failNext(p)
		if fail {
			s.w.failNext = nil
		}
		if s.w.writes == nil {
			s.w.writes = map[string]int{}
		}
		if !fail {
			s.w.writes[p.Name]++
		}
		s.w.mu.Unlock()
		if fail {
			s.w.failed.Add(1)
			return fmt.Errorf("injected: the manager died before this status write")
		}
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

type manager struct {
	writes   *writeCounter
	requests *requestLog
	recorder *events.FakeRecorder
	seen     []string // events drained from recorder
	stop     func()
}

type managerOptions struct {
	writes   *writeCounter
	requests *requestLog
	clock    clock.PassiveClock
	// wrap wraps the reconciler's client (after the write counter).
	wrap func(client.Client) client.Client
}

// startManager runs the Payment reconciler in a manager of its own, watching
// one namespace. Each test gets its own, so a restart is a real restart.
func startManager(t *testing.T, ns string, o managerOptions) *manager {
	t.Helper()
	if o.writes == nil {
		o.writes = &writeCounter{}
	}
	if o.requests == nil {
		o.requests = &requestLog{}
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cacheFor(ns),
		Controller: ctrlConfig(),
	})
	if err != nil {
		t.Fatal(err)
	}
	o.writes.Client = mgr.GetClient()
	if err := inbox.SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(10000)
	var reconcilerClient client.Client = o.writes
	if o.wrap != nil {
		reconcilerClient = o.wrap(o.writes)
	}
	r := &controllers.PaymentReconciler{
		Client:    reconcilerClient,
		APIReader: mgr.GetAPIReader(),
		Scheme:    mgr.GetScheme(),
		Recorder:  rec,
		Clock:     o.clock,
		Gateway: &gateway.Gateway{
			Reader: mgr.GetClient(), HTTPClient: &http.Client{Transport: o.requests},
			Status: statuswriter.Writer{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}, Recorder: rec,
		},
	}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(stop)
	return &manager{writes: o.writes, requests: o.requests, recorder: rec, stop: stop}
}

func cacheFor(ns string) cache.Options {
	return cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}
}

// ctrlConfig allows one controller name in several managers of one process.
func ctrlConfig() config.Controller {
	return config.Controller{SkipNameValidation: ptr.To(true)}
}

// --- fixtures ----------------------------------------------------------------

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "pay-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

type providerOptions struct {
	schedule   []string
	jitter     int32
	timeout    string
	qps, burst int32
	failures   int32
	openFor    string
	keyWindow  string
	typ        v1alpha1.ProviderType
}

func durations(s []string) []metav1.Duration {
	out := make([]metav1.Duration, len(s))
	for i, d := range s {
		v, err := time.ParseDuration(d)
		if err != nil {
			panic(err)
		}
		out[i] = metav1.Duration{Duration: v}
	}
	return out
}

func dur(s string) *metav1.Duration {
	if s == "" {
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return &metav1.Duration{Duration: v}
}

func i32(v int32) *int32 {
	if v == 0 {
		return nil
	}
	return &v
}

// createProvider creates a PaymentProvider pointing at the simulator.
func createProvider(t *testing.T, ns, name string, s *sim, o providerOptions) *v1alpha1.PaymentProvider {
	t.Helper()
	ctx := context.Background()
	if o.typ == "" {
		o.typ = v1alpha1.ProviderKukoPay
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-credentials"},
		StringData: map[string]string{"apiKey": "sk_test", "clientID": "client", "clientSecret": "secret", "token": "tok"}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentProviderSpec{
			Type:                 o.typ,
			APIURL:               s.URL + "/" + string(o.typ),
			CredentialsSecretRef: v1alpha1.SecretReference{Name: secret.Name},
			StatusQuery: v1alpha1.StatusQueryConfig{
				Schedule: durations(o.schedule), Jitter: &o.jitter, Timeout: dur(o.timeout),
				QPS: i32(o.qps), Burst: i32(o.burst),
			},
			IdempotencyWindow: dur(o.keyWindow),
			CircuitBreaker:    v1alpha1.CircuitBreakerConfig{ConsecutiveFailures: i32(o.failures), OpenFor: dur(o.openFor)},
		},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

type paymentOptions struct {
	amount    int64
	currency  string
	outcome   paysim.Outcome
	after     string
	tracked   string
	expires   string
	reference string
}

func createPayment(t *testing.T, ns, name, prov string, o paymentOptions) *v1alpha1.Payment {
	t.Helper()
	if o.amount == 0 {
		o.amount = 1999
	}
	if o.currency == "" {
		o.currency = "USD"
	}
	p := &v1alpha1.Payment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentSpec{
			ProviderRef:       v1alpha1.LocalObjectReference{Name: prov},
			Amount:            v1alpha1.Amount{Value: o.amount, Currency: o.currency},
			ProviderPaymentID: o.tracked,
			ExpiresAfter:      dur(o.expires),
			MerchantReference: o.reference,
		},
	}
	if o.outcome != "" {
		p.Spec.Metadata = map[string]string{paysim.MetaOutcome: string(o.outcome)}
		if o.after != "" {
			p.Spec.Metadata[paysim.MetaAfter] = o.after
		}
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func get(t *testing.T, p *v1alpha1.Payment) *v1alpha1.Payment {
	t.Helper()
	got := &v1alpha1.Payment{}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitPhase(t *testing.T, p *v1alpha1.Payment, phase v1alpha1.PaymentPhase, timeout time.Duration) *v1alpha1.Payment {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := get(t, p)
		if got.Status.Phase == phase {
			return got
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(got.Status, "", "  ")
			t.Fatalf("timed out after %s waiting for %s to reach %s; status:\n%s", timeout, p.Name, phase, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func condition(p *v1alpha1.Payment, typ string) *metav1.Condition {
	return meta.FindStatusCondition(p.Status.Conditions, typ)
}

// waitEvent waits for an Event containing fragment. Events are recorded
// after the status write that they announce, so a test that has just seen
// the new status may still have to wait for its Event.
func (m *manager) waitEvent(t *testing.T, fragment string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for {
			select {
			case e := <-m.recorder.Events:
				m.seen = append(m.seen, e)
				continue
			default:
			}
			break
		}
		for _, e := range m.seen {
			if strings.Contains(e, fragment) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no event %q; got %v", fragment, m.seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// intercept wraps c with controller-runtime's interceptor (the manager's
// client does not watch, the interceptor wants one that does).
func intercept(c client.Client, f interceptor.Funcs) client.Client {
	w, ok := c.(client.WithWatch)
	if !ok {
		w = noWatch{c}
	}
	return interceptor.NewClient(w, f)
}

type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, fmt.Errorf("watch is not supported by this client")
}
