package webhookreceiver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/paymentcache"
	"github.com/paywarden/paywarden/internal/webhookbundle"
)

// The receiver never reads a Secret in a tenant namespace. The manager copies
// what verifying each PaymentProvider's webhooks needs into a bundle Secret
// in paywarden's own namespace (internal/webhookbundle), and the receiver
// reads and caches only those: its RBAC grants Secrets in that one namespace,
// and its cache watches only Secrets labelled as bundles there.

// errBundleNotPublished: the manager has not (yet) written the provider's
// bundle. The answer is 503, so the provider delivers again later instead of
// the event being rejected as forged.
var errBundleNotPublished = errors.New("the manager has not published this provider's webhook verification bundle yet")

// CacheOptions returns opts with the Secret cache narrowed to the bundles in
// bundleNamespace; every other type keeps opts' settings. Use it for the
// manager the receiver runs on.
func CacheOptions(opts cache.Options, bundleNamespace string) cache.Options {
	byObject := maps.Clone(opts.ByObject)
	if byObject == nil {
		byObject = map[client.Object]cache.ByObject{}
	}
	byObject[&corev1.Secret{}] = cache.ByObject{
		Namespaces: map[string]cache.Config{bundleNamespace: {}},
		Label:      webhookbundle.Selector(),
	}
	// Open payments only: a closed one is found through the thin cache
	// (SetupWithManager).
	byObject[&v1alpha1.Payment{}] = cache.ByObject{Field: paymentcache.Open()}
	opts.ByObject = byObject
	return opts
}

// readBundle reads prov's bundle from reader (the cache). A bundle that is
// missing, or that was written for an earlier provider of the same name, is
// errBundleNotPublished.
func readBundle(ctx context.Context, reader client.Reader, namespace string, prov *v1alpha1.PaymentProvider) (*corev1.Secret, error) {
	if namespace == "" {
		return nil, errors.New("webhookreceiver: no bundle namespace configured")
	}
	bundle := &corev1.Secret{}
	key := types.NamespacedName{Namespace: namespace, Name: webhookbundle.Name(prov.Namespace, prov.Name)}
	if err := reader.Get(ctx, key, bundle); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("provider %s/%s: %w", prov.Namespace, prov.Name, errBundleNotPublished)
		}
		return nil, fmt.Errorf("provider %s/%s: read webhook bundle %s: %w", prov.Namespace, prov.Name, key, err)
	}
	if !webhookbundle.For(bundle, prov) {
		return nil, fmt.Errorf("provider %s/%s: bundle %s belongs to another provider object: %w", prov.Namespace, prov.Name, key, errBundleNotPublished)
	}
	return bundle, nil
}

// bundleSigningSecrets returns prov's active signing secrets from its bundle.
// A provider without a signing Secret has none (every signature fails); a
// bundle not published yet is an error (503).
func (s *Server) bundleSigningSecrets(ctx context.Context, prov *v1alpha1.PaymentProvider) ([][]byte, error) {
	if ref := prov.Spec.Webhook.SigningSecretRef; ref == nil || ref.Name == "" {
		return nil, nil
	}
	bundle, err := readBundle(ctx, s.opts.Reader, s.opts.BundleNamespace, prov)
	if err != nil {
		return nil, err
	}
	return webhookbundle.SigningSecrets(bundle), nil
}

// bundleCredentials is the Reader the receiver's gateway builds adapters
// with. The gateway asks for a provider's credentials Secret in the tenant
// namespace; this answers from the bundles of the providers there that
// reference that Secret, so the gateway (shared with the manager) needs no
// second code path and the receiver reads no tenant Secret. Other objects are
// read from Reader unchanged.
type bundleCredentials struct {
	client.Reader
	namespace string
}

func (b bundleCredentials) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return b.Reader.Get(ctx, key, obj, opts...)
	}
	var provs v1alpha1.PaymentProviderList
	if err := b.Reader.List(ctx, &provs, client.InNamespace(key.Namespace)); err != nil {
		return err
	}
	sort.Slice(provs.Items, func(i, j int) bool { return provs.Items[i].Name < provs.Items[j].Name })
	data := map[string][]byte{}
	var versions []string
	var unpublished error
	for i := range provs.Items {
		prov := &provs.Items[i]
		if prov.Spec.CredentialsSecretRef.Name != key.Name {
			continue
		}
		bundle, err := readBundle(ctx, b.Reader, b.namespace, prov)
		if errors.Is(err, errBundleNotPublished) {
			// Another provider sharing the Secret (new, being deleted) has
			// no bundle: the others' copies of the same keys answer.
			unpublished = err
			continue
		}
		if err != nil {
			return err
		}
		// Providers sharing one credentials Secret have copies of the same
		// keys; a real value wins over a placeholder.
		for k, v := range webhookbundle.AdapterCredentials(bundle, string(prov.Spec.Type)) {
			if _, real := bundle.Data[webhookbundle.CredentialsPrefix+k]; real || data[k] == nil {
				data[k] = v
			}
		}
		versions = append(versions, bundle.ResourceVersion)
	}
	if versions == nil && unpublished != nil {
		return unpublished
	}
	if versions == nil {
		return apierrors.NewNotFound(corev1.Resource("secrets"), key.Name)
	}
	*secret = corev1.Secret{Data: data}
	secret.Namespace, secret.Name = key.Namespace, key.Name
	// The gateway rebuilds an adapter when this changes: it changes with
	// every bundle the answer was made from.
	secret.ResourceVersion = strings.Join(versions, ".")
	return nil
}
