package webhookreceiver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/webhookbundle"
)

// The receiver builds a provider's adapter from bundleCredentials.Get
// (bundle.go), which answers a credentials-Secret read from the bundles of
// the PaymentProviders in the namespace that reference that Secret. Another
// provider B that merely shares A's credentials Secret and has no bundle (B
// terminating: its bundle is deleted at its deletionTimestamp while a
// finalizer keeps it listed; B created while the manager is down; B
// recreated and not republished yet) must not fail that read: A's genuine
// webhooks are verified and applied, not answered 503 until B is gone
// (KukoPay gives up after 6 attempts in about 2h43m).
func TestAnotherProviderSharingTheCredentialsSecretDoesNotBlockWebhooks(t *testing.T) {
	ctx := context.Background()
	k := newKukoPay(t)
	p := k.payment(t, "order-shared", "order-shared", "pay_shared", 700)
	wantCode(t, k.deliver(t, k.event("evt_shared_before", "payment.processing", "processing", p)), http.StatusOK)

	// B: a second KukoPay provider in the tenant's namespace, on the same
	// credentials Secret (one API key, two stores), held by a finalizer as
	// GitOps tools and foreground deletion do.
	const hold = "example.com/hold"
	b := fixture.CreateProvider(t, env.Client, fixture.Provider{
		Namespace: k.ns, Name: "kukopay-b", Type: v1alpha1.ProviderKukoPay,
		SigningSecrets: map[string]string{"current": "b-secret"},
		Spec: func(s *v1alpha1.PaymentProviderSpec) {
			s.CredentialsSecretRef = v1alpha1.SecretReference{Name: k.prov.Spec.CredentialsSecretRef.Name}
		},
	})
	waitProviderCached(t, b)
	t.Cleanup(func() {
		fresh := &v1alpha1.PaymentProvider{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), fresh); err == nil && controllerutil.RemoveFinalizer(fresh, hold) {
			_ = env.Client.Update(ctx, fresh)
		}
	})
	fresh := &v1alpha1.PaymentProvider{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), fresh); err != nil {
		t.Fatal(err)
	}
	controllerutil.AddFinalizer(fresh, hold)
	if err := env.Client.Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	// B is terminating: its bundle goes, B itself stays (finalizer).
	bundleKey := types.NamespacedName{Namespace: fixture.BundleNamespace, Name: webhookbundle.Name(b.Namespace, b.Name)}
	fixture.Eventually(t, fixture.Timeout, "B's bundle to leave the receiver's cache", func() (bool, string) {
		err := rcv.Cache.Get(ctx, bundleKey, &corev1.Secret{})
		return apierrors.IsNotFound(err), "still there"
	})
	fixture.Eventually(t, fixture.Timeout, "the receiver's cache to see B terminating", func() (bool, string) {
		got := &v1alpha1.PaymentProvider{}
		if err := rcv.Cache.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
			return false, err.Error()
		}
		return !got.DeletionTimestamp.IsZero(), "no deletionTimestamp yet"
	})

	// A is untouched: same provider, same signing secret, same bundle.
	for i, id := range []string{"evt_shared_1", "evt_shared_2", "evt_shared_3"} {
		r := k.deliver(t, k.event(id, "payment.succeeded", "succeeded", p))
		if r.Code != http.StatusOK {
			t.Fatalf("delivery %d of a genuine webhook to provider %s: status %d (%s), want 200: provider %s, which only shares its credentials Secret, is terminating",
				i+1, k.name, r.Code, r.Body, b.Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
