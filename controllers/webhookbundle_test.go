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
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/testenv"
	"github.com/paywarden/paywarden/internal/webhookbundle"
)

// withBundles are the options of a manager that runs the provider and
// webhook-bundle controllers (and more), with the bundles in paywarden's
// namespace: a manager wired for Secrets as cmd/manager wires it
// (controllers.CacheOptions and ClientOptions; controllers.Setup shares one
// SecretReader between the gateway, the provider controller and the bundle
// controller).
func withBundles(more ...controllers.Controller) fixture.ManagerOptions {
	o := fixture.Run(append([]controllers.Controller{controllers.ControllerProvider, controllers.ControllerBundles}, more...)...)
	o.BundleNamespace, o.ShippedCache = testenv.SystemNamespace, true
	return o
}

func bundleKey(prov *v1alpha1.PaymentProvider) types.NamespacedName {
	return types.NamespacedName{Namespace: testenv.SystemNamespace, Name: webhookbundle.Name(prov.Namespace, prov.Name)}
}

// waitBundle waits until prov's bundle holds exactly the data keys want
// (nil: until there is no bundle) and returns it.
func waitBundle(t *testing.T, prov *v1alpha1.PaymentProvider, want ...string) *corev1.Secret {
	t.Helper()
	b := &corev1.Secret{}
	fixture.Eventually(t, fixture.Timeout, "bundle of "+prov.Name+" to hold "+fixture.Dump(want), func() bool {
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
	fixture.EnsureNamespace(t, env.Client, testenv.SystemNamespace)
	ctx := context.Background()
	// A bundle left behind by a provider deleted while the manager was down.
	orphan := webhookbundle.Desired(testenv.SystemNamespace, &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: "gone", Name: "gone", UID: "gone"}}, nil, nil)
	if err := env.Client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	fixture.StartManager(t, env, "", withBundles())
	fixture.Eventually(t, 15*time.Second, "the orphaned bundle to be deleted", func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &corev1.Secret{}))
	})

	ns := fixture.Namespace(t, env.Client, "pay")
	fixture.CreateSecret(t, env.Client, ns, "kuko-credentials", map[string]string{"apiKey": "sk_live"})
	fixture.CreateSecret(t, env.Client, ns, "kuko-webhook", map[string]string{"current": "s1"})
	kuko := bundleProvider(t, ns, "kuko", v1alpha1.ProviderKukoPay, "kuko-webhook")
	b := waitBundle(t, kuko, "signing.current")
	if string(b.Data["signing.current"]) != "s1" {
		t.Fatalf("bundle holds %q", b.Data["signing.current"])
	}

	t.Run("a rotation reaches the bundle", func(t *testing.T) {
		fixture.UpdateSecret(t, env.Client, ns, "kuko-webhook", map[string]string{"current": "s1", "next": "s2"})
		waitBundle(t, kuko, "signing.current", "signing.next")
		fixture.UpdateSecret(t, env.Client, ns, "kuko-webhook", map[string]string{"next": "s2"})
		waitBundle(t, kuko, "signing.next")
	})
	t.Run("a new signing Secret reference is followed", func(t *testing.T) {
		fixture.CreateSecret(t, env.Client, ns, "kuko-webhook-2", map[string]string{"other": "s3"})
		// The provider controller writes its status meanwhile: retry on conflict.
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := &v1alpha1.PaymentProvider{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(kuko), p); err != nil {
				return err
			}
			p.Spec.Webhook.SigningSecretRef.Name = "kuko-webhook-2"
			return env.Client.Update(ctx, p)
		}); err != nil {
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
		fixture.CreateSecret(t, env.Client, ns, "pp-credentials", map[string]string{"clientID": "id", "clientSecret": "cs", "extra": "x"})
		pp := bundleProvider(t, ns, "pp", v1alpha1.ProviderPayPal, "")
		waitBundle(t, pp, "credentials.clientID", "credentials.clientSecret")
		fixture.UpdateSecret(t, env.Client, ns, "pp-credentials", map[string]string{"clientID": "id", "clientSecret": "rotated"})
		b := waitBundle(t, pp, "credentials.clientID", "credentials.clientSecret")
		fixture.Eventually(t, 15*time.Second, "rotated credential in the bundle", func() bool {
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

// A provider the cache does not hold yet (just created, the watch behind)
// keeps its bundle: the reconcile a bundle's own creation triggers can come
// before the provider reaches the cache, and only the API server may say the
// provider is gone.
func TestWebhookBundleOfAProviderNotYetCachedIsKept(t *testing.T) {
	t.Parallel()
	fixture.EnsureNamespace(t, env.Client, testenv.SystemNamespace)
	ctx := context.Background()
	ns := fixture.Namespace(t, env.Client, "bundle-lag")
	prov := bundleProvider(t, ns, "kuko", v1alpha1.ProviderKukoPay, "")
	// A manager of every namespace that a parallel test runs may have
	// written the bundle first: it is there either way.
	if err := env.Client.Create(ctx, webhookbundle.Desired(testenv.SystemNamespace, prov, nil, nil)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	behind := fixture.Intercept(env.Client, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*v1alpha1.PaymentProvider); ok {
				return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("paymentproviders").GroupResource(), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := &controllers.WebhookBundleReconciler{Client: behind, APIReader: env.Client, Secrets: env.Client, Namespace: testenv.SystemNamespace}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(prov)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if err := env.Client.Get(ctx, bundleKey(prov), &corev1.Secret{}); err != nil {
		t.Fatalf("the bundle of a provider that exists: %v", err)
	}
	// Gone at the API server too: its bundle goes.
	if err := env.Client.Delete(ctx, prov); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if err := env.Client.Get(ctx, bundleKey(prov), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the bundle of a deleted provider: %v, want not found", err)
	}
}

// The manager's cache holds no Secret data: an unrelated Secret with data
// (and kubectl's last-applied annotation, a full copy of it) is seen as
// metadata only, without annotations; a typed read through the cache is
// refused instead of starting an informer that would copy every Secret; and
// the SecretReader holds the data of referenced Secrets only.
func TestManagerCacheHoldsNoUnrelatedSecretData(t *testing.T) {
	t.Parallel()
	// Its namespace (and the bundles'): over every namespace its
	// controllers would validate, and write a bundle for, the provider of
	// every test beside it.
	ns := fixture.Namespace(t, env.Client, "pay")
	m := fixture.StartManager(t, env, ns, withBundles())
	ctx := context.Background()
	fixture.CreateSecret(t, env.Client, ns, "kuko-credentials", map[string]string{"apiKey": "sk_live"})
	fixture.CreateSecret(t, env.Client, ns, "kuko-webhook", map[string]string{"current": "s1"})
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
	c := m.Manager.GetCache()
	md := &metav1.PartialObjectMetadata{}
	md.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	fixture.Eventually(t, 10*time.Second, "the unrelated Secret's metadata in the cache", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(unrelated), md) == nil
	})
	if len(md.Annotations) != 0 || len(md.ManagedFields) != 0 {
		t.Errorf("cached metadata keeps annotations %v / %d managed fields", md.Annotations, len(md.ManagedFields))
	}

	// A read through the manager's client goes to the API server ...
	if err := m.Client().Get(ctx, client.ObjectKeyFromObject(unrelated), &corev1.Secret{}); err != nil {
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
	for _, held := range m.Secrets.Held() {
		if held.Namespace == ns && held.Name != "kuko-webhook" && held.Name != "kuko-credentials" {
			t.Errorf("the SecretReader holds %s, which no provider references", held)
		}
	}
	// The reader may not hold it yet when the bundle is seen: waited for.
	fixture.Eventually(t, fixture.Timeout, "the SecretReader to hold the referenced signing Secret", func() bool {
		return slices.Contains(m.Secrets.Held(), types.NamespacedName{Namespace: ns, Name: "kuko-webhook"})
	})
	if err := m.Secrets.List(ctx, &corev1.SecretList{}); err == nil {
		t.Errorf("the SecretReader lists Secrets")
	}

	// The provider controller still reacts to a Secret change (metadata
	// watch): removing the last signing key makes the provider not Ready.
	fixture.Eventually(t, 10*time.Second, "provider Ready", func() bool {
		return providerReady(t, kuko) == metav1.ConditionTrue
	})
	fixture.UpdateSecret(t, env.Client, ns, "kuko-webhook", map[string]string{})
	fixture.Eventually(t, 10*time.Second, "provider not Ready after its signing keys were removed", func() bool {
		return providerReady(t, kuko) == metav1.ConditionFalse
	})
}

func providerReady(t *testing.T, prov *v1alpha1.PaymentProvider) metav1.ConditionStatus {
	t.Helper()
	p := fixture.GetProvider(t, env.Client, prov.Namespace, prov.Name)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Status
	}
	return ""
}
