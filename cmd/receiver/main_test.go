package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/inbox/inboxtest"
	"github.com/paywarden/paywarden/internal/testenv"
)

// The main as shipped: flags, kubeconfig, cache options, the separate
// metrics server, one webhook end to end, and a clean exit on shutdown.
func TestReceiverMain(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err) // a missing control plane fails, never skips
	}
	t.Cleanup(func() { _ = env.Stop() })

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["envtest"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	cfg.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	cfg.CurrentContext = "envtest"
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	addr, metricsAddr := freeAddr(t), freeAddr(t)

	// The manager's half: the webhook verification bundles the receiver
	// reads instead of tenant Secrets.
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: inboxtest.BundleNamespace}}); err != nil {
		t.Fatal(err)
	}
	bundlesCtx, stopBundles := context.WithCancel(context.Background())
	bundles, err := inboxtest.StartBundles(bundlesCtx, env.Config, env.Scheme, inboxtest.BundleNamespace)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopBundles(); <-bundles })

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{
			"--kubeconfig=" + kubeconfig, "--bind-address=" + addr, "--metrics-bind-address=" + metricsAddr,
			"--bundle-namespace=" + inboxtest.BundleNamespace,
			"--apply-budget=2s", "--shutdown-timeout=5s", "--zap-log-level=error",
		})
	}()
	base := "http://" + addr
	inboxtest.Eventually(t, inboxtest.Timeout, func() (bool, string) {
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

	ns := inboxtest.Namespace(t, env.Client, "main")
	prov := inboxtest.CreateProvider(t, env.Client, inboxtest.Provider{
		Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay, SigningSecrets: map[string]string{"k": "main-secret"},
	})
	ev := inboxtest.KukoPayEvent{ID: "evt_main", Type: "payment.succeeded", Status: "succeeded", PaymentID: "pay_main", MerchantRef: "order-main", Amount: 100, Currency: "USD"}
	body := ev.Body(t)
	url := base + "/webhooks/" + ns + "/" + prov.Name
	// The provider reaches the receiver's cache shortly after its creation,
	// its bundle shortly after that; until then the answer is 404 or 503 and
	// nothing is written.
	inboxtest.Eventually(t, inboxtest.Timeout, func() (bool, string) {
		r := inboxtest.Send(t, "POST", url, body, inboxtest.KukoPayHeader(body, time.Now(), "main-secret"))
		return r.Code == http.StatusOK && strings.Contains(r.Body, "accepted"), "answer " + r.Body
	})
	if e := inboxtest.EventFor(t, env.Client, ns, prov.Name, "evt_main"); e == nil || e.Status.Result != v1alpha1.ResultOrphaned {
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
	if r := inboxtest.Send(t, "GET", base+"/metrics", nil, nil); r.Code != http.StatusNotFound {
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
