package webhookreceiver_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/paypal"
	"github.com/paywarden/paywarden/internal/provider/providers"
	"github.com/paywarden/paywarden/internal/testenv"
	"github.com/paywarden/paywarden/internal/webhookbundle"
)

// shipped applies the RBAC of config/default and returns configs that
// impersonate the receiver's and the manager's ServiceAccounts, once the
// authorizer has picked the bindings up.
func shipped(t *testing.T) (receiver, manager *rest.Config, as client.Client) {
	t.Helper()
	if err := env.ApplyShippedRBAC(context.Background()); err != nil {
		t.Fatal(err)
	}
	receiver = env.As(testenv.SystemNamespace, testenv.ReceiverSA)
	manager = env.As(testenv.SystemNamespace, testenv.ManagerSA)
	as, err := client.New(receiver, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// RBAC takes effect asynchronously in the authorizer's cache.
	fixture.Eventually(t, fixture.Timeout, "the receiver's RBAC to take effect", func() (bool, string) {
		err := as.List(context.Background(), &v1alpha1.PaymentList{})
		return err == nil, "receiver identity cannot list payments yet: " + errString(err)
	})
	return receiver, manager, as
}

// startShipped runs a receiver as its ServiceAccount next to the manager's
// bundle controller as the manager's, both with the shipped RBAC only.
func startShipped(t *testing.T, receiver, manager *rest.Config) *fixture.Receiver {
	t.Helper()
	r, err := fixture.NewReceiver(receiver, env.Scheme, fixture.ReceiverOptions{BundleConfig: manager})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

// The shipped least-privilege RBAC of config/ is exactly enough: a receiver
// running as its ServiceAccount (next to the bundle controller running as
// the manager's) verifies, stores, applies and records an event, and
// Kubernetes Events are written; and it cannot delete anything, change a
// spec, or read any Secret but the bundles in its own namespace.
func TestShippedRBACIsEnoughAndNoMore(t *testing.T) {
	receiver, manager, as := shipped(t)
	r := startShipped(t, receiver, manager)

	k := kukoPay{ns: fixture.Namespace(t, env.Client, "rbac"), name: "kukopay", secret: "rbac-secret"}
	k.prov = fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: k.ns, Name: k.name, Type: v1alpha1.ProviderKukoPay, SigningSecrets: map[string]string{"current": k.secret},
	})
	fixture.WaitCached(t, r.Cache, k.prov)
	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: k.ns, Name: "order-rbac", Provider: k.name, MerchantReference: "order-rbac", ProviderPaymentID: "pay_rbac", Amount: 100, Currency: "USD"})
	fixture.WaitCached(t, r.Cache, p)

	ev := k.event("evt_rbac", "payment.failed", "failed", p)
	body := ev.Body(t)
	resp := fixture.Send(t, "POST", r.WebhookURL(k.ns, k.name), body, fixture.KukoPayHeader(body, time.Now(), k.secret))
	wantCode(t, resp, http.StatusOK)
	if e := fixture.WaitEventResult(t, env.Client, k.ns, k.name, "evt_rbac", "", fixture.Timeout); e == nil || e.Status.Result != v1alpha1.ResultApplied {
		t.Fatalf("event %+v, want Applied by a receiver running with the shipped RBAC", e)
	}
	if got := fixture.GetPayment(t, env.Client, p); got.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("payment %s, want Failed", got.Status.Phase)
	}
	fixture.Eventually(t, fixture.Timeout, "a Kubernetes Event for the transition", func() (bool, string) {
		var l eventsv1.EventList
		if err := env.Client.List(context.Background(), &l, client.InNamespace(k.ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range l.Items {
			if e.Regarding.Name == p.Name && e.Reason == string(v1alpha1.PhaseFailed) {
				return true, ""
			}
		}
		return false, "no Kubernetes Event for the transition"
	})

	ctx := context.Background()
	unrelated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "database-password"},
		StringData: map[string]string{"password": "hunter2"}}
	if err := env.Client.Create(ctx, unrelated); err != nil {
		t.Fatal(err)
	}
	bundleKey := types.NamespacedName{Namespace: fixture.BundleNamespace, Name: webhookbundle.Name(k.ns, k.name)}
	bundle := &corev1.Secret{}
	if err := env.Client.Get(ctx, bundleKey, bundle); err != nil {
		t.Fatal(err)
	}
	evt := fixture.WebhookEventFor(t, env.Client, k.ns, k.name, "evt_rbac")
	for name, err := range map[string]error{
		"get an unrelated Secret in a tenant namespace": as.Get(ctx, client.ObjectKeyFromObject(unrelated), &corev1.Secret{}),
		"get the provider's own signing Secret":         as.Get(ctx, types.NamespacedName{Namespace: k.ns, Name: k.prov.Spec.Webhook.SigningSecretRef.Name}, &corev1.Secret{}),
		"list Secrets in a tenant namespace":            as.List(ctx, &corev1.SecretList{}, client.InNamespace(k.ns)),
		"list Secrets cluster-wide":                     as.List(ctx, &corev1.SecretList{}),
		"change a bundle":                               as.Update(ctx, bundle.DeepCopy()),
		"create a Secret in its own namespace": as.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fixture.BundleNamespace, Name: "forged"},
			StringData: map[string]string{"k": "v"}}),
		"delete a bundle":       as.Delete(ctx, bundle.DeepCopy()),
		"delete a WebhookEvent": as.Delete(ctx, evt),
		"delete a Payment":      as.Delete(ctx, p.DeepCopy()),
		"update a Payment spec": as.Update(ctx, fixture.GetPayment(t, env.Client, p)),
		"create a Payment": as.Create(ctx, &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: k.ns, Name: "forged"},
			Spec: v1alpha1.PaymentSpec{ProviderRef: v1alpha1.LocalObjectReference{Name: k.name}, Amount: v1alpha1.Amount{Value: 1, Currency: "USD"}}}),
		"update a PaymentProvider": as.Update(ctx, k.prov.DeepCopy()),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the receiver: %v, want Forbidden", name, err)
		}
	}
	// What it does read: the bundles, in its own namespace.
	if err := as.Get(ctx, bundleKey, &corev1.Secret{}); err != nil {
		t.Errorf("get the provider's bundle as the receiver: %v", err)
	}
}

// A rotated signing Secret reaches a running receiver through the manager,
// with the shipped RBAC and no restart: the tenant adds a key, the manager
// copies it into the bundle, the receiver accepts webhooks signed with it;
// the tenant removes the old key, and the receiver rejects it.
func TestRotationReachesTheReceiverThroughTheManager(t *testing.T) {
	receiver, manager, _ := shipped(t)
	r := startShipped(t, receiver, manager)

	ns := fixture.Namespace(t, env.Client, "rotate")
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay, SigningSecrets: map[string]string{"old": "secret-old"},
	})
	fixture.WaitCached(t, r.Cache, prov)
	n := 0
	send := func(secret string) int {
		n++
		ev := fixture.KukoPayEvent{ID: "evt_rotate_" + string(rune('a'+n)), Type: "payment.succeeded", Status: "succeeded",
			PaymentID: "pay_rotate", MerchantRef: "order-rotate", Amount: 1, Currency: "USD"}
		body := ev.Body(t)
		return fixture.Send(t, "POST", r.WebhookURL(ns, prov.Name), body, fixture.KukoPayHeader(body, time.Now(), secret)).Code
	}
	ctx := context.Background()
	rotate := func(data map[string]string) {
		t.Helper()
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: prov.Spec.Webhook.SigningSecretRef.Name}, s); err != nil {
			t.Fatal(err)
		}
		s.Data = map[string][]byte{}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		if err := env.Client.Update(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	if code := send("secret-old"); code != http.StatusOK {
		t.Fatalf("old secret before the rotation: %d, want 200", code)
	}
	rotate(map[string]string{"old": "secret-old", "new": "secret-new"})
	fixture.Eventually(t, fixture.Timeout, "the added secret to be accepted", func() (bool, string) {
		code := send("secret-new")
		return code == http.StatusOK, "new secret after it was added: " + http.StatusText(code)
	})
	if code := send("secret-old"); code != http.StatusOK {
		t.Errorf("old secret while both are active: %d, want 200", code)
	}
	rotate(map[string]string{"new": "secret-new"})
	fixture.Eventually(t, fixture.Timeout, "the removed secret to be refused", func() (bool, string) {
		code := send("secret-old")
		return code == http.StatusUnauthorized, "removed secret: " + http.StatusText(code)
	})
	if code := send("secret-new"); code != http.StatusOK {
		t.Errorf("new secret after the rotation: %d, want 200", code)
	}
	if evs := fixture.WebhookEvents(t, env.Client, ns); len(evs) == 0 {
		t.Errorf("no WebhookEvent stored")
	}
}

// PayPal webhooks are verified through PayPal's API, which needs the API
// credentials: the manager copies exactly those keys into the bundle, and a
// receiver that cannot read the tenant's credentials Secret verifies with
// them. A KukoPay bundle carries no credentials at all.
func TestPayPalVerifiesWithBundledCredentials(t *testing.T) {
	receiver, manager, as := shipped(t)
	r := startShipped(t, receiver, manager)

	sim := paysim.New(paysim.Options{TimeFactor: 0.001, PayPalClientID: "client-id", PayPalClientSecret: "client-secret"})
	simSrv := httptest.NewServer(sim.Handler())
	t.Cleanup(simSrv.Close)
	t.Cleanup(sim.Close)

	ns := fixture.Namespace(t, env.Client, "paypal")
	ctx := context.Background()
	creds := map[string]string{paypal.CredentialClientID: "client-id", paypal.CredentialClientSecret: "client-secret", "unrelated": "not for the receiver"}
	prov := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: ns, Name: "paypal", Type: v1alpha1.ProviderPayPal, APIURL: simSrv.URL + "/paypal", Credentials: creds,
		SigningSecrets: map[string]string{},
	})
	prov.Spec.Webhook = v1alpha1.WebhookConfig{PayPalWebhookID: sim.PayPalWebhookID()}
	if err := env.Client.Update(ctx, prov); err != nil {
		t.Fatal(err)
	}
	fixture.WaitCached(t, r.Cache, prov)
	if err := as.Get(ctx, types.NamespacedName{Namespace: ns, Name: prov.Spec.CredentialsSecretRef.Name}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("receiver reads the tenant's credentials Secret: %v, want Forbidden", err)
	}
	bundle := &corev1.Secret{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: fixture.BundleNamespace, Name: webhookbundle.Name(ns, prov.Name)}, bundle); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(bundle.Data)); !slices.Equal(got, []string{"credentials.clientID", "credentials.clientSecret"}) {
		t.Fatalf("PayPal bundle keys %v, want exactly the two API credentials", got)
	}

	if err := sim.SetWebhookTarget(paysim.PayPal, r.WebhookURL(ns, prov.Name)); err != nil {
		t.Fatal(err)
	}
	adapter, err := providers.New(providers.TypePayPal, provider.Config{Name: ns + "/paypal", APIURL: simSrv.URL + "/paypal",
		Credentials: map[string][]byte{paypal.CredentialClientID: []byte("client-id"), paypal.CredentialClientSecret: []byte("client-secret")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adapter.Create(ctx, provider.CreateRequest{IdempotencyKey: "k-paypal", MerchantReference: "order-paypal", Amount: 100, Currency: "USD",
		Metadata: map[string]string{paysim.MetaOutcome: string(paysim.OutcomeSucceed)}}); err != nil {
		t.Fatal(err)
	}
	fixture.Eventually(t, fixture.Timeout, "a PayPal webhook verified and stored", func() (bool, string) {
		for _, e := range fixture.WebhookEvents(t, env.Client, ns) {
			if e.Spec.SignatureScheme == provider.SchemePayPal {
				return true, ""
			}
		}
		return false, "no PayPal webhook verified and stored"
	})

	k := fixture.CreateProvider(t, env.Client, fixture.Provider{Namespace: ns, Name: "kukopay", Type: v1alpha1.ProviderKukoPay,
		SigningSecrets: map[string]string{"a": "secret-a"}})
	fixture.WaitCached(t, r.Cache, k)
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: fixture.BundleNamespace, Name: webhookbundle.Name(ns, k.Name)}, bundle); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(bundle.Data)); !slices.Equal(got, []string{"signing.a"}) {
		t.Fatalf("KukoPay bundle keys %v, want only its signing key", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
