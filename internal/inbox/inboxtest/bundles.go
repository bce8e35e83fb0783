package inboxtest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/webhookbundle"
)

// BundleNamespace is where the test receivers read, and the bundle
// controllers beside them write, the webhook verification bundles: the
// namespace paywarden runs in when deployed.
const BundleNamespace = "paywarden-system"

// startBundlesFor runs the manager's webhook-bundle controller beside a test
// receiver, as the manager process does in production: the receiver reads
// no tenant Secret, only the bundles this keeps. It returns a channel that
// yields the manager's result once ctx is done.
func startBundlesFor(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, ro ReceiverOptions) (<-chan error, error) {
	ns := ro.Options.BundleNamespace
	bundleCfg := ro.BundleConfig
	if bundleCfg == nil {
		bundleCfg = cfg
		c, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create bundle namespace %s: %w", ns, err)
		}
	}
	return StartBundles(ctx, bundleCfg, scheme, ns)
}

// StartBundles runs the manager's webhook-bundle controller (with the
// manager's cache and client options for Secrets) on a manager of its own
// until ctx is done; the channel yields the manager's result.
func StartBundles(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string) (<-chan error, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  controllers.CacheOptions(namespace),
		Client:                 controllers.ClientOptions(),
	})
	if err != nil {
		return nil, err
	}
	secrets, err := controllers.NewSecretReader(ctx, mgr)
	if err != nil {
		return nil, err
	}
	r := &controllers.WebhookBundleReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Secrets: secrets, Namespace: namespace}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}

// bundle reads prov's bundle from reader (a receiver's cache).
func bundle(reader client.Reader, prov *v1alpha1.PaymentProvider) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	key := types.NamespacedName{Namespace: BundleNamespace, Name: webhookbundle.Name(prov.Namespace, prov.Name)}
	if err := reader.Get(context.Background(), key, s); err != nil {
		return nil, err
	}
	return s, nil
}

// WaitBundle waits until reader (a receiver's cache) holds the webhook
// verification bundle written for prov, so a webhook sent now is judged on
// the provider's secrets rather than answered 503.
func WaitBundle(t testing.TB, reader client.Reader, prov *v1alpha1.PaymentProvider) {
	t.Helper()
	Eventually(t, Timeout, func() (bool, string) {
		b, err := bundle(reader, prov)
		if err != nil {
			return false, fmt.Sprintf("bundle of provider %s/%s: %v", prov.Namespace, prov.Name, err)
		}
		return webhookbundle.For(b, prov), fmt.Sprintf("bundle of provider %s/%s written for another provider object", prov.Namespace, prov.Name)
	})
}

// WaitBundleSecrets waits until the bundle of prov in reader holds exactly
// the signing secrets given (a rotation has reached the receiver).
func WaitBundleSecrets(t testing.TB, reader client.Reader, prov *v1alpha1.PaymentProvider, secrets ...string) {
	t.Helper()
	want := slices.Clone(secrets)
	slices.Sort(want)
	Eventually(t, Timeout, func() (bool, string) {
		b, err := bundle(reader, prov)
		if err != nil {
			return false, err.Error()
		}
		var have []string
		for _, s := range webhookbundle.SigningSecrets(b) {
			have = append(have, string(s))
		}
		slices.Sort(have)
		return slices.Equal(have, want), fmt.Sprintf("bundle holds %d signing secret(s), want %d", len(have), len(want))
	})
}
