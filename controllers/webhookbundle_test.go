package controllers_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/inbox"
	"github.com/paywarden/paywarden/internal/testenv"
	"github.com/paywarden/paywarden/internal/webhookbundle"
)

// secretsManager is a manager wired for Secrets as cmd/manager wires it
// (controllers.CacheOptions, ClientOptions, a SecretReader shared by the
// gateway, the provider controller and the bundle controller).
type secretsManager struct {
	mgr     ctrl.Manager
	secrets *controllers.SecretReader
	events  *eventLog
	elected <-chan struct{}
	stop    func()
}

type secretsOptions struct {
	// cfg is the identity the manager runs as; default the control plane's admin.
	cfg *rest.Config
	// payments adds the Payment reconciler; leaderElection elects through a
	// Lease in the bundle namespace; events records real Kubernetes Events
	// (default: the test's event log).
	payments, leaderElection, events bool
}

func startSecretsManager(t *testing.T, o secretsOptions) *secretsManager {
	t.Helper()
	if o.cfg == nil {
		o.cfg = env.Config
	}
	ensureNamespace(t, testenv.SystemNamespace)
	opts := ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlConfig(),
		Cache:                  controllers.CacheOptions(testenv.SystemNamespace),
		Client:                 controllers.ClientOptions(),
	}
	if o.leaderElection {
		opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace = true, "manager.paywarden.dev", testenv.SystemNamespace
		opts.LeaderElectionReleaseOnCancel = true
	}
	mgr, err := ctrl.NewManager(o.cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	must := func(err error) {
		t.Helper()
		if err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	secrets, err := controllers.NewSecretReader(ctx, mgr)
	must(err)
	m := &secretsManager{mgr: mgr, secrets: secrets, events: &eventLog{}, elected: mgr.Elected()}
	var rec events.EventRecorder = m.events
	if o.events {
		rec = mgr.GetEventRecorder("paywarden-manager")
	}
	gw := &gateway.Gateway{Reader: secrets}
	must((&controllers.PaymentProviderReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Secrets: secrets, Scheme: mgr.GetScheme(), Recorder: rec, Gateway: gw,
	}).SetupWithManager(mgr))
	must((&controllers.WebhookBundleReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Secrets: secrets, Namespace: testenv.SystemNamespace,
	}).SetupWithManager(mgr))
	if o.payments {
		must(inbox.SetupIndexes(ctx, mgr.GetFieldIndexer()))
		must((&controllers.PaymentReconciler{
			Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: mgr.GetScheme(), Recorder: rec, Gateway: gw,
			Clock: clock.RealClock{},
		}).SetupWithManager(mgr))
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	m.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(m.stop)
	return m
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func bundleKey(prov *v1alpha1.PaymentProvider) types.NamespacedName {
	return types.NamespacedName{Namespace: testenv.SystemNamespace, Name: webhookbundle.Name(prov.Namespace, prov.Name)}
}

// waitBundle waits until prov's bundle holds exactly the data keys want
// (nil: until there is no bundle) and returns it.
func waitBundle(t *testing.T, prov *v1alpha1.PaymentProvider, want ...string) *corev1.Secret {
	t.Helper()
	b := &corev1.Secret{}
	eventually(t, 15*time.Second, "bundle of "+prov.Name+" to hold "+dump(want), func() bool {
		err := env.Client.Get(context.Background(), bundleKey(prov), b)
		if want == nil {
			return apierrors.IsNotFound(err)
		}
		if err != nil || !webhookbundle.For(b, prov) {
			return false
		}
		keys := make([]string, 0, len(b.Data))
		for k := range b.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Sort(want)
		return slices.Equal(keys, want)
	})
	return b
}

func bundleProvider(t *testing.T, ns, name string, typ v1alpha1.ProviderType, signing string) *v1alpha1.PaymentProvider {
	t.Helper()
	p := &v1alpha1.PaymentProvider{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PaymentProviderSpec{
			Type: typ, APIURL: "http://provider.invalid",
			CredentialsSecretRef: v1alpha1.SecretReference{Name: name + "-credentials"},
		},
	}
	if signing != "" {
		p.Spec.Webhook.SigningSecretRef = &v1alpha1.SecretReference{Name: signing}
	}
	if typ == v1alpha1.ProviderPayPal {
		p.Spec.Webhook.PayPalWebhookID = "WH-1"
	}
	if err := env.Client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The manager keeps one bundle per provider in its own namespace, following
// the provider and its Secrets: rotations, a new signing Secret, a bundle
// someone changed or deleted, a deleted provider, and bundles of providers
// deleted while no manager ran.
func TestWebhookBundlesFollowProvidersAndSecrets(t *testing.T) {
	ensureNamespace(t, testenv.SystemNamespace)
	ctx := context.Background()
	// A bundle left behind by a provider deleted while the manager was down.
	orphan := webhookbundle.Desired(testenv.SystemNamespace, &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "gone", Name: "gone", UID: "gone"}}, nil, nil)
	if err := env.Client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	startSecretsManager(t, secretsOptions{})
	eventually(t, 15*time.Second, "the orphaned bundle to be deleted", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &corev1.Secret{}))
	})

	ns := newNamespace(t)
	createSecret(t, ns, "kuko-credentials", map[string]string{"apiKey": "sk_live"})
	createSecret(t, ns, "kuko-webhook", map[string]string{"current": "s1"})
	kuko := bundleProvider(t, ns, "kuko", v1alpha1.ProviderKukoPay, "kuko-webhook")
	b := waitBundle(t, kuko, "signing.current")
	if string(b.Data["signing.current"]) != "s1" {
		t.Fatalf("bundle holds %q", b.Data["signing.current"])
	}

	t.Run("a rotation reaches the bundle", func(t *testing.T) {
		updateSecret(t, ns, "kuko-webhook", map[string]string{"current": "s1", "next": "s2"})
		waitBundle(t, kuko, "signing.current", "signing.next")
		updateSecret(t, ns, "kuko-webhook", map[string]string{"next": "s2"})
		waitBundle(t, kuko, "signing.next")
	})
	t.Run("a new signing Secret reference is followed", func(t *testing.T) {
		createSecret(t, ns, "kuko-webhook-2", map[string]string{"other": "s3"})
		p := &v1alpha1.PaymentProvider{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(kuko), p); err != nil {
			t.Fatal(err)
		}
		p.Spec.Webhook.SigningSecretRef.Name = "kuko-webhook-2"
		if err := env.Client.Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitBundle(t, kuko, "signing.other")
	})
	t.Run("a changed bundle is restored", func(t *testing.T) {
		b := waitBundle(t, kuko, "signing.other")
		b.Data["signing.forged"] = []byte("attacker")
		if err := env.Client.Update(ctx, b); err != nil {
			t.Fatal(err)
		}
		waitBundle(t, kuko, "signing.other")
	})
	t.Run("a deleted bundle is recreated", func(t *testing.T) {
		if err := env.Client.Delete(ctx, waitBundle(t, kuko, "signing.other")); err != nil {
			t.Fatal(err)
		}
		waitBundle(t, kuko, "signing.other")
	})
	t.Run("paypal bundles carry the verification credentials", func(t *testing.T) {
		createSecret(t, ns, "pp-credentials", map[string]string{"clientID": "id", "clientSecret": "cs", "extra": "x"})
		pp := bundleProvider(t, ns, "pp", v1alpha1.ProviderPayPal, "")
		waitBundle(t, pp, "credentials.clientID", "credentials.clientSecret")
		updateSecret(t, ns, "pp-credentials", map[string]string{"clientID": "id", "clientSecret": "rotated"})
		b := waitBundle(t, pp, "credentials.clientID", "credentials.clientSecret")
		eventually(t, 15*time.Second, "rotated credential in the bundle", func() bool {
			_ = env.Client.Get(ctx, client.ObjectKeyFromObject(b), b)
			return string(b.Data["credentials.clientSecret"]) == "rotated"
		})
	})
	t.Run("a deleted provider's bundle is deleted", func(t *testing.T) {
		if err := env.Client.Delete(ctx, kuko); err != nil {
			t.Fatal(err)
		}
		waitBundle(t, kuko)
	})
}

// The manager's cache holds no Secret data: an unrelated Secret with data
// (and kubectl's last-applied annotation, a full copy of it) is seen as
// metadata only, without annotations; a typed read through the cache is
// refused instead of starting an informer that would copy every Secret; and
// the SecretReader holds the data of referenced Secrets only.
func TestManagerCacheHoldsNoUnrelatedSecretData(t *testing.T) {
	m := startSecretsManager(t, secretsOptions{})
	ctx := context.Background()
	ns := newNamespace(t)
	createSecret(t, ns, "kuko-credentials", map[string]string{"apiKey": "sk_live"})
	createSecret(t, ns, "kuko-webhook", map[string]string{"current": "s1"})
	kuko := bundleProvider(t, ns, "kuko", v1alpha1.ProviderKukoPay, "kuko-webhook")
	waitBundle(t, kuko, "signing.current")

	unrelated := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "database", Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"stringData":{"password":"hunter2"}}`,
		}},
		StringData: map[string]string{"password": "hunter2"},
	}
	if err := env.Client.Create(ctx, unrelated); err != nil {
		t.Fatal(err)
	}
	c := m.mgr.GetCache()
	md := &metav1.PartialObjectMetadata{}
	md.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	eventually(t, 10*time.Second, "the unrelated Secret's metadata in the cache", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(unrelated), md) == nil
	})
	if len(md.Annotations) != 0 || len(md.ManagedFields) != 0 {
		t.Errorf("cached metadata keeps annotations %v / %d managed fields", md.Annotations, len(md.ManagedFields))
	}

	// A read through the manager's client goes to the API server ...
	if err := m.mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(unrelated), &corev1.Secret{}); err != nil {
		t.Fatalf("uncached read: %v", err)
	}
	// ... and neither it nor a read of the cache itself makes the cache hold Secrets.
	var notCached *cache.ErrResourceNotCached
	for what, err := range map[string]error{
		"get":  c.Get(ctx, client.ObjectKeyFromObject(unrelated), &corev1.Secret{}),
		"list": c.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)),
	} {
		if !errors.As(err, &notCached) {
			t.Errorf("typed Secret %s through the manager's cache: %v, want ErrResourceNotCached", what, err)
		}
	}
	for _, held := range m.secrets.Held() {
		if held.Namespace == ns && held.Name != "kuko-webhook" && held.Name != "kuko-credentials" {
			t.Errorf("the SecretReader holds %s, which no provider references", held)
		}
	}
	if !slices.Contains(m.secrets.Held(), types.NamespacedName{Namespace: ns, Name: "kuko-webhook"}) {
		t.Errorf("the SecretReader does not hold the referenced signing Secret: %v", m.secrets.Held())
	}
	if err := m.secrets.List(ctx, &corev1.SecretList{}); err == nil {
		t.Errorf("the SecretReader lists Secrets")
	}

	// The provider controller still reacts to a Secret change (metadata
	// watch): removing the last signing key makes the provider not Ready.
	eventually(t, 10*time.Second, "provider Ready", func() bool {
		return providerReady(t, kuko) == metav1.ConditionTrue
	})
	updateSecret(t, ns, "kuko-webhook", map[string]string{})
	eventually(t, 10*time.Second, "provider not Ready after its signing keys were removed", func() bool {
		return providerReady(t, kuko) == metav1.ConditionFalse
	})
}

func providerReady(t *testing.T, prov *v1alpha1.PaymentProvider) metav1.ConditionStatus {
	t.Helper()
	p := getProvider(t, prov.Namespace, prov.Name)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Status
	}
	return ""
}
