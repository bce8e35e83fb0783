// Package webhookbundle defines a PaymentProvider's verification bundle: a
// Secret in paywarden's own namespace holding exactly what verifying the
// provider's webhooks needs. The manager writes bundles (controllers,
// WebhookBundleReconciler); the internet-facing receiver reads only bundles,
// so it needs no access to any Secret in a tenant namespace.
//
// A bundle carries every key of the provider's signing Secret (each is an
// active signing secret) and, only for provider types that verify webhooks
// through the provider's API (PayPal), the API credentials that call needs.
// Both sides use this package, so the layout is defined in one place.
package webhookbundle

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider/providers"
)

// Labels and annotations of a bundle Secret.
const (
	// Label marks a bundle ("true"); the receiver caches only Secrets with it.
	Label = "payments.paywarden.dev/webhook-bundle"
	// AnnotationProviderNamespace, AnnotationProviderName and
	// AnnotationProviderUID name the PaymentProvider a bundle belongs to. An
	// owner reference cannot cross namespaces, so these are how the manager
	// finds the bundles of deleted providers.
	AnnotationProviderNamespace = "payments.paywarden.dev/provider-namespace"
	AnnotationProviderName      = "payments.paywarden.dev/provider-name"
	AnnotationProviderUID       = "payments.paywarden.dev/provider-uid"
)

// Key prefixes inside a bundle's data.
const (
	// SigningPrefix precedes each key of the provider's signing Secret.
	SigningPrefix = "signing."
	// CredentialsPrefix precedes each API credential the verification needs.
	CredentialsPrefix = "credentials."
)

// namePrefix starts every bundle's name.
const namePrefix = "paywarden-webhook-"

// unavailableCredential stands in for an API credential the receiver is not
// given (see AdapterCredentials).
const unavailableCredential = "not-available-to-the-webhook-receiver"

// Name is the name of the bundle of provider namespace/name. It is a hash so
// any namespace and provider name fit the 253 characters of a Secret name,
// and names from different tenants cannot collide by concatenation.
func Name(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return namePrefix + hex.EncodeToString(sum[:])[:32]
}

// Selector selects bundle Secrets.
func Selector() labels.Selector {
	return labels.SelectorFromSet(labels.Set{Label: "true"})
}

// Desired is the bundle of prov in namespace: signing and creds are the
// provider's signing and credentials Secrets as they are now (nil when
// missing or not referenced). A missing signing Secret yields a bundle
// without signing keys, so webhooks are rejected as unverifiable exactly as
// if the receiver had read the Secret itself.
func Desired(namespace string, prov *v1alpha1.PaymentProvider, signing, creds *corev1.Secret) *corev1.Secret {
	data := map[string][]byte{}
	if signing != nil {
		for k, v := range signing.Data {
			if len(v) > 0 { // an empty value is not a secret
				data[SigningPrefix+k] = v
			}
		}
	}
	if caps, ok := providers.Lookup(string(prov.Spec.Type)); ok && caps.Verification.Credentials && creds != nil {
		// Only the keys the adapter uses, not whatever else the Secret holds.
		for _, k := range caps.CredentialKeys {
			if v := creds.Data[k]; len(v) > 0 {
				data[CredentialsPrefix+k] = v
			}
		}
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      Name(prov.Namespace, prov.Name),
			Labels: map[string]string{
				Label:                          "true",
				"app.kubernetes.io/managed-by": "paywarden",
			},
			Annotations: map[string]string{
				AnnotationProviderNamespace: prov.Namespace,
				AnnotationProviderName:      prov.Name,
				AnnotationProviderUID:       string(prov.UID),
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
}

// UpToDate reports whether have already is want: same data, and want's
// labels and annotations present with the same values.
func UpToDate(have, want *corev1.Secret) bool {
	if have.Type != want.Type || !equalData(have.Data, want.Data) {
		return false
	}
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return false
		}
	}
	for k, v := range want.Annotations {
		if have.Annotations[k] != v {
			return false
		}
	}
	return true
}

func equalData(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return string(x) == string(y) })
}

// Provider returns the PaymentProvider a bundle belongs to, from its
// annotations; false when it is not a bundle.
func Provider(bundle metav1.Object) (types.NamespacedName, types.UID, bool) {
	if bundle.GetLabels()[Label] != "true" {
		return types.NamespacedName{}, "", false
	}
	a := bundle.GetAnnotations()
	key := types.NamespacedName{Namespace: a[AnnotationProviderNamespace], Name: a[AnnotationProviderName]}
	if key.Namespace == "" || key.Name == "" {
		return types.NamespacedName{}, "", false
	}
	return key, types.UID(a[AnnotationProviderUID]), true
}

// For reports whether bundle was written for prov (this very object, not an
// earlier provider of the same name).
func For(bundle metav1.Object, prov *v1alpha1.PaymentProvider) bool {
	key, uid, ok := Provider(bundle)
	return ok && key.Namespace == prov.Namespace && key.Name == prov.Name && uid == prov.UID
}

// SigningSecrets returns the bundle's signing secrets, ordered by key.
func SigningSecrets(bundle *corev1.Secret) [][]byte {
	keys := make([]string, 0, len(bundle.Data))
	for k, v := range bundle.Data {
		if strings.HasPrefix(k, SigningPrefix) && len(v) > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		out = append(out, bundle.Data[k])
	}
	return out
}

// AdapterCredentials returns the credentials to build typ's adapter with in
// the receiver: the bundle's, for types that verify through the provider's
// API; for the others a placeholder per credential key. Adapters refuse to be
// built without their credentials even though verifying and parsing a
// KukoPay or generic webhook never uses them; the placeholder makes the
// adapter buildable, and a call that did use it would be refused by the
// provider (401), never authorised.
func AdapterCredentials(bundle *corev1.Secret, typ string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range bundle.Data {
		if name, ok := strings.CutPrefix(k, CredentialsPrefix); ok && len(v) > 0 {
			out[name] = v
		}
	}
	caps, ok := providers.Lookup(typ)
	if !ok || caps.Verification.Credentials {
		return out
	}
	for _, k := range caps.CredentialKeys {
		if _, set := out[k]; !set {
			out[k] = []byte(unavailableCredential)
		}
	}
	return out
}
