package deploy

import (
	"context"
	"fmt"
	"maps"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/image"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/testenv"
)

// Tenant is the namespace the proof's PaymentProviders and Payments live in.
const Tenant = "shop"

// The images' programs the manifests must run.
var (
	managerBinary  = image.Entrypoints[0].Path
	receiverBinary = image.Entrypoints[1].Path
)

// BuildBinaries builds the manager and the receiver as the image ships them
// (static, same flags) into dir.
func BuildBinaries(t testing.TB, root, dir string) map[string]string {
	t.Helper()
	// On an empty build cache the build competes with every other test
	// package's compiles for many minutes: it may take until shortly before
	// the test binary's own deadline (go test -timeout), which then reports
	// the slow build rather than a panic.
	deadline := time.Now().Add(15 * time.Minute)
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if at, set := d.Deadline(); set {
			deadline = at.Add(-30 * time.Second)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	bins, err := image.BuildBinaries(ctx, root, dir, "deploy-test", image.Linux(runtime.GOARCH), image.Entrypoints[:2]...)
	if err != nil {
		t.Fatal(err)
	}
	return bins
}

// Prove applies objs (a render of config/default or of the Helm chart)
// server-side to env's API server, which must have nothing of paywarden's
// installed, and proves they run paywarden: the manager and the receiver
// start from their applied Deployments as their ServiceAccounts and become
// ready on their probes; a Payment of every provider type settles against
// paysim; every provider's webhooks, sent to the receiver's Service, are
// stored as WebhookEvents; and neither log says forbidden.
func Prove(t *testing.T, env *testenv.Env, objs []*unstructured.Unstructured, bins map[string]string) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	if err := Apply(ctx, env.Client, objs); err != nil {
		t.Fatal(err)
	}
	deployments, services := applied(t, env.Client, objs)

	k := &Kubelet{Config: env.Config, Client: env.Client, Binaries: bins, Entrypoint: managerBinary, Dir: t.TempDir()}
	pods := map[string]*Pod{}
	for _, d := range deployments {
		p, err := k.Run(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		if len(d.Spec.Template.Spec.Containers[0].Command) > 0 {
			pods[d.Spec.Template.Spec.Containers[0].Command[0]] = p
		}
	}
	mgr, rcv := pods[managerBinary], pods[receiverBinary]
	if mgr == nil || rcv == nil {
		t.Fatalf("the applied Deployments run %v; want one running %s and one running %s", slices.Collect(maps.Keys(pods)), managerBinary, receiverBinary)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*Pod{mgr, rcv} {
				if lines := p.LogLines("forbidden"); len(lines) > 0 {
					t.Logf("%s was refused by the API server %d times, first:\n%s", p.Name, len(lines), short(lines[0]))
				}
				t.Log(p.Tail(20))
			}
		}
	})
	for _, p := range []*Pod{rcv, mgr} {
		if err := p.WaitReady(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s ready %s after apply: %s %q", p.Name, time.Since(start).Round(100*time.Millisecond), filepath.Base(p.Container.Command[0]), p.Args)
	}

	// Providers deliver to the receiver's Service.
	var webhooks string
	for _, svc := range services {
		if svc.Name == rcv.Deployment.Name && len(svc.Spec.Ports) == 1 {
			u, err := rcv.ServiceURL(svc, svc.Spec.Ports[0].Name)
			if err != nil {
				t.Fatal(err)
			}
			webhooks = u + "/webhooks/"
		}
	}
	if webhooks == "" {
		t.Fatalf("no Service %s with one port routes to the receiver", rcv.Deployment.Name)
	}

	sim := paysim.New(paysim.Options{TimeFactor: 0.01, DefaultScript: &paysim.Script{Outcome: paysim.OutcomeSucceed, After: 100 * time.Millisecond}})
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() { sim.Close(); srv.Close() })

	fixture.EnsureNamespace(t, env.Client, Tenant)
	var payments []*v1alpha1.Payment
	for _, typ := range []v1alpha1.ProviderType{v1alpha1.ProviderKukoPay, v1alpha1.ProviderPayPal, v1alpha1.ProviderGeneric, v1alpha1.ProviderStripe} {
		name := string(typ)
		secret := signingSecrets[typ]
		if err := sim.SetWebhookTarget(name, webhooks+Tenant+"/"+name, []byte(secret)); err != nil {
			t.Fatal(err)
		}
		prov := &v1alpha1.PaymentProvider{
			ObjectMeta: metav1.ObjectMeta{Namespace: Tenant, Name: name},
			Spec: v1alpha1.PaymentProviderSpec{
				Type: typ, APIURL: srv.URL + "/" + name,
				CredentialsSecretRef: v1alpha1.SecretReference{Name: name + "-credentials"},
				Webhook: v1alpha1.WebhookConfig{SigningSecretRef: &v1alpha1.SecretReference{Name: name + "-webhook"},
					PayPalWebhookID: sim.PayPalWebhookID()},
				StatusQuery: v1alpha1.StatusQueryConfig{Schedule: []metav1.Duration{{Duration: 2 * time.Second}, {Duration: 5 * time.Second}}},
			},
		}
		for _, o := range []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Tenant, Name: name + "-credentials"}, StringData: map[string]string{
				"apiKey": "sk_test", "clientID": "client", "clientSecret": "secret", "token": "token", "secretKey": "sk_test_deploy"}},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Tenant, Name: name + "-webhook"}, StringData: map[string]string{"current": secret}},
			prov,
		} {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		payments = append(payments, &v1alpha1.Payment{
			ObjectMeta: metav1.ObjectMeta{Namespace: Tenant, Name: "order-" + name},
			Spec: v1alpha1.PaymentSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: name},
				Amount: v1alpha1.Amount{Value: 1999, Currency: "USD"}},
		})
	}
	for _, p := range payments {
		prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: Tenant, Name: p.Spec.ProviderRef.Name}}
		fixture.Eventually(t, 30*time.Second, "PaymentProvider "+prov.Name+" to be Ready", func() (bool, string) {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(prov), prov); err != nil {
				return false, err.Error()
			}
			return meta.IsStatusConditionTrue(prov.Status.Conditions, v1alpha1.ConditionReady), fixture.Dump(prov.Status.Conditions)
		})
	}
	for _, p := range payments {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range payments {
		fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 45*time.Second)
	}
	t.Logf("a payment of every provider type settled %s after apply", time.Since(start).Round(100*time.Millisecond))

	for _, p := range payments {
		provider := p.Spec.ProviderRef.Name
		fixture.Eventually(t, 20*time.Second, "a webhook of "+provider+" stored by the receiver", func() (bool, string) {
			list := &v1alpha1.WebhookEventList{}
			if err := env.Client.List(ctx, list, client.InNamespace(Tenant)); err != nil {
				return false, err.Error()
			}
			var seen []string
			for _, ev := range list.Items {
				if ev.Spec.Provider == provider && ev.Spec.Via == v1alpha1.ViaWebhook {
					return true, ""
				}
				seen = append(seen, ev.Spec.Provider+"/"+string(ev.Spec.Via))
			}
			return false, fmt.Sprintf("stored: %v; paysim deliveries: %+v", seen, sim.Counters().WebhooksByProvider[provider])
		})
	}

	for _, p := range []*Pod{mgr, rcv} {
		if !p.Running() {
			t.Errorf("%s exited", p.Name)
		}
		p.Stop()
		if lines := p.LogLines("forbidden"); len(lines) > 0 {
			t.Errorf("%s was refused by the API server %d times, first:\n%s", p.Name, len(lines), short(lines[0]))
		}
	}
	t.Logf("proved in %s", time.Since(start).Round(100*time.Millisecond))
}

// signingSecrets are the webhook signing secrets paysim signs with, in each
// provider's format.
var signingSecrets = map[v1alpha1.ProviderType]string{
	v1alpha1.ProviderKukoPay: "deploy-kukopay-signing-secret",
	v1alpha1.ProviderPayPal:  "deploy-paypal-signing-secret",
	v1alpha1.ProviderGeneric: "whsec_ZGVwbG95LWdlbmVyaWMtc2lnbmluZy1zZWNyZXQ=",
	v1alpha1.ProviderStripe:  "whsec_deploy_stripe_signing_secret",
}

// applied reads back the Deployments and Services of objs as the API server
// holds them (defaults filled in): what a kubelet and kube-proxy would see.
func applied(t *testing.T, c client.Client, objs []*unstructured.Unstructured) ([]*appsv1.Deployment, []*corev1.Service) {
	t.Helper()
	var ds []*appsv1.Deployment
	var ss []*corev1.Service
	for _, u := range objs {
		key := client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}
		switch u.GroupVersionKind().GroupKind().String() {
		case "Deployment.apps":
			d := &appsv1.Deployment{}
			if err := c.Get(context.Background(), key, d); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		case "Service":
			s := &corev1.Service{}
			if err := c.Get(context.Background(), key, s); err != nil {
				t.Fatal(err)
			}
			ss = append(ss, s)
		}
	}
	return ds, ss
}

// short is the part of a log line (a JSON record with a stack trace, say)
// around the word forbidden.
func short(line string) string {
	i := strings.Index(strings.ToLower(line), "forbidden")
	from, to := max(i-300, 0), min(i+200, len(line))
	if i < 0 {
		from, to = 0, min(500, len(line))
	}
	return line[from:to]
}
