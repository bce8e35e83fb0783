package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // a missing control plane fails, never skips
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

// writeKubeconfig writes a kubeconfig for envtest's API server, reached at
// server (its own address, or a proxy in front of it).
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// The main as shipped: flags, kubeconfig, cache options, the separate
// metrics server, one webhook end to end, and a clean exit on shutdown.
func TestReceiverMain(t *testing.T) {
	kubeconfig := writeKubeconfig(t, env.Config.Host)
	addr, metricsAddr := freeAddr(t), freeAddr(t)

	// The manager's half: the webhook verification bundles the receiver
	// reads instead of tenant Secrets.
	fixture.StartBundles(t, env, fixture.BundleNamespace)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--kubeconfig=" + kubeconfig, "--bind-address=" + addr, "--metrics-bind-address=" + metricsAddr,
			"--bundle-namespace=" + fixture.BundleNamespace,
			"--apply-budget=2s", "--shutdown-timeout=5s", "--zap-log-level=error",
		})
	}()
	base := "http://" + addr
	fixture.Eventually(t, fixture.Timeout, "the receiver to be ready", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("receiver exited: %v", err)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "readyz " + resp.Status
	})

	ns := fixture.Namespace(t, env.Client, "main")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay, SigningSecrets: map[string]string{"k": "main-secret"},
	})
	ev := fixture.KukoPayEvent{ID: "evt_main", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_main", MerchantRef: "order-main", Amount: 100, Currency: "USD"}
	body := ev.Body(t)
	url := base + "/webhooks/" + ns + "/" + prov.Name
	// The provider reaches the receiver's cache shortly after its creation,
	// its bundle shortly after that; until then the answer is 404 or 503 and
	// nothing is written.
	fixture.Eventually(t, fixture.Timeout, "the event to be accepted", func() (bool, string) {
		r := fixture.Send(t, "POST", url, body, fixture.KukoPayHeader(body, time.Now(), "main-secret"))
		return r.Code == http.StatusOK && strings.Contains(r.Body, "accepted"), "answer " + r.Body
	})
	if e := fixture.WebhookEventFor(t, env.Client, ns, prov.Name, "evt_main"); e == nil || e.Status.Result != v1alpha1.ResultOrphaned {
		t.Fatalf("event %+v, want stored (Orphaned: there is no payment)", e)
	}

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), `paywarden_webhooks_total{namespace="`+ns+`",provider="kukopay",result="accepted"} 1`) {
		t.Errorf("metrics server does not show the accepted webhook")
	}
	if r := fixture.Send(t, "GET", base+"/metrics", nil, nil); r.Code != http.StatusNotFound {
		t.Errorf("/metrics on the webhook port: %d, want 404 when a metrics address is set", r.Code)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("receiver exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("receiver did not shut down")
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// apiProxy stands between the receiver and envtest's API server. While down
// it accepts connections and closes them at once, as an API server that is
// not there yet; once up it forwards them.
type apiProxy struct {
	ln     net.Listener
	target string
	up     atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

func startAPIProxy(t *testing.T) *apiProxy {
	t.Helper()
	u, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &apiProxy{ln: ln, target: u.Host}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *apiProxy) url() string { return "https://" + p.ln.Addr().String() }

func (p *apiProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.up.Load() {
			_ = c.Close()
			continue
		}
		upstream, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, upstream)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(upstream, c); _ = upstream.Close() }()
		go func() { _, _ = io.Copy(c, upstream); _ = c.Close() }()
	}
}

func (p *apiProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// startRun runs the receiver's main on kubeconfig and returns its base URL
// and a function that stops it and returns run's result.
func startRun(t *testing.T, kubeconfig string, extra ...string) (string, func() error) {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args := append([]string{"--kubeconfig=" + kubeconfig, "--bind-address=" + addr, "--metrics-bind-address=0",
		"--shutdown-timeout=5s", "--zap-log-level=error"}, extra...)
	go func() { done <- run(ctx, args) }()
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(30 * time.Second):
				result = fmt.Errorf("receiver did not stop within 30s of its shutdown")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	base := "http://" + addr
	fixture.Eventually(t, fixture.Timeout, "the receiver to be live", func() (bool, string) {
		select {
		case err := <-done:
			t.Fatalf("receiver exited: %v", err)
		default:
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, "healthz " + resp.Status
	})
	return base, stop
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The receiver comes up while the API server is unreachable: /healthz 200,
// /readyz 503 and webhooks 503 with Retry-After (the provider delivers
// again), never connection refused from a crash loop. Once the API server is
// reachable its caches sync and the delivery is stored exactly once.
func TestReceiverServesBeforeTheAPIServerIsReachable(t *testing.T) {
	// The manager's half, which reaches the API server throughout.
	fixture.StartBundles(t, env, fixture.BundleNamespace)
	proxy := startAPIProxy(t)
	base, stop := startRun(t, writeKubeconfig(t, proxy.url()), "--retry-after=3s", "--bundle-namespace="+fixture.BundleNamespace)

	ns := fixture.Namespace(t, env.Client, "apidown")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: ns, Name: "kukopay-down", Type: v1alpha1.ProviderKukoPay, SigningSecrets: map[string]string{"k": "down-secret"},
	})
	// The manager has published the provider's bundle: what the receiver
	// lacks is the API server, nothing else.
	fixture.WaitBundle(t, env.Client, prov)
	ev := fixture.KukoPayEvent{ID: "evt_apidown", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_apidown", MerchantRef: "order-apidown", Amount: 100, Currency: "USD"}
	body := ev.Body(t)
	url := base + "/webhooks/" + ns + "/" + prov.Name
	send := func() fixture.Response {
		return fixture.Send(t, "POST", url, body, fixture.KukoPayHeader(body, time.Now(), "down-secret"))
	}

	for i := range 3 {
		r := send()
		if r.Code != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "3" {
			t.Fatalf("delivery %d with the API server down: %d (%s), Retry-After %q; want 503 with Retry-After 3", i+1, r.Code, r.Body, r.Header.Get("Retry-After"))
		}
		if code := status(t, base+"/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz %d with the API server down, want 503", code)
		}
		if code := status(t, base+"/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz %d with the API server down, want 200", code)
		}
	}
	if evs := fixture.WebhookEvents(t, env.Client, ns); len(evs) != 0 {
		t.Fatalf("%d events stored while the receiver could not reach the API server", len(evs))
	}

	proxy.up.Store(true)
	// The informers retry with client-go's backoff (at most 30s apart).
	fixture.Eventually(t, 90*time.Second, "the receiver to be ready again", func() (bool, string) {
		code := status(t, base+"/readyz")
		return code == http.StatusOK, fmt.Sprintf("/readyz %d after the API server became reachable", code)
	})
	r := send()
	if r.Code != http.StatusOK || !strings.Contains(r.Body, "accepted") {
		t.Fatalf("delivery after the API server came back: %d %s, want 200 accepted", r.Code, r.Body)
	}
	if r := send(); r.Code != http.StatusOK || !strings.Contains(r.Body, "duplicate") {
		t.Fatalf("redelivery: %d %s, want 200 duplicate", r.Code, r.Body)
	}
	if evs := fixture.WebhookEvents(t, env.Client, ns); len(evs) != 1 || evs[0].Spec.EventID != "evt_apidown" {
		t.Fatalf("events %+v, want exactly one, for evt_apidown", evs)
	}
	if err := stop(); err != nil {
		t.Fatalf("receiver exit: %v", err)
	}
}

// A receiver that never reached the API server still shuts down cleanly.
func TestReceiverStopsWhileTheAPIServerIsUnreachable(t *testing.T) {
	proxy := startAPIProxy(t)
	base, stop := startRun(t, writeKubeconfig(t, proxy.url()))
	if code := status(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz %d, want 503", code)
	}
	if err := stop(); err != nil {
		t.Fatalf("receiver exit: %v", err)
	}
}
