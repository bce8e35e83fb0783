package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/paymentcache"
	"github.com/paywarden/paywarden/internal/webhookbundle"
)

// How the manager treats Secrets. It needs the Secrets PaymentProviders
// reference (credentials, signing keys) and nothing else, but it must notice
// when one changes. So:
//
//   - it watches Secrets as metadata only (builder.OnlyMetadata), and the
//     cache strips their annotations and managed fields: the annotations of
//     a Secret applied with kubectl hold the whole Secret
//     (last-applied-configuration), and neither is ever read;
//   - the manager's client never reads a Secret from the cache
//     (ClientOptions), and the cache refuses reads of types nobody watches
//     (CacheOptions), so a stray typed Get cannot start an informer that
//     copies every Secret in the cluster into memory;
//   - the data of a referenced Secret is read from the API server by
//     SecretReader, which keeps it only while the metadata cache shows the
//     same resourceVersion.

// CacheOptions are the manager's cache options; bundleNamespace is where
// the WebhookBundleReconciler keeps the verification bundles. Memory follows
// work (SPEC §12.4): the cache holds the WebhookEvents still to be applied,
// not the finished ones retention keeps for days.
func CacheOptions(bundleNamespace string) cache.Options {
	return cache.Options{
		// Managed fields are the bulk of most objects and never read.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Transform: StripSecret(bundleNamespace)},
			// Only open events: a finished one is never acted on again
			// (FinishedEvents deletes it past retention, from the API server).
			&v1alpha1.WebhookEvent{}: {Field: OpenWebhookEvents()},
			// Only open payments: a closed one (payment.Closable) is in
			// the thin cache (internal/paymentcache) and read from the API
			// server when news reaches it.
			&v1alpha1.Payment{}: {Field: paymentcache.Open()},
		},
		// A read of a type without an informer is an error instead of a
		// new informer started on the fly.
		ReaderFailOnMissingInformer: true,
	}
}

// ClientOptions are the manager's client options: Secrets are never read
// from the cache.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
}

// StripSecret is the cache transform for Secrets: metadata without
// annotations or managed fields, and never any data (should a full Secret
// informer ever be started, it holds no secret material either). Bundles in
// bundleNamespace keep the annotations naming their PaymentProvider, so the
// bundle of a deleted provider is found from the cache.
func StripSecret(bundleNamespace string) toolscache.TransformFunc {
	return func(in any) (any, error) {
		o, ok := in.(client.Object)
		if !ok {
			return in, nil
		}
		if s, ok := o.(*corev1.Secret); ok {
			s.Data, s.StringData = nil, nil
		}
		o.SetManagedFields(nil)
		var keep map[string]string
		if o.GetNamespace() == bundleNamespace && o.GetLabels()[webhookbundle.Label] == "true" {
			a := o.GetAnnotations()
			for _, k := range []string{webhookbundle.AnnotationProviderNamespace, webhookbundle.AnnotationProviderName, webhookbundle.AnnotationProviderUID} {
				if v, ok := a[k]; ok {
					if keep == nil {
						keep = map[string]string{}
					}
					keep[k] = v
				}
			}
		}
		o.SetAnnotations(keep)
		return in, nil
	}
}

// errSecretListing: SecretReader reads named Secrets only.
var errSecretListing = errors.New("controllers: listing Secrets is not supported; read a referenced Secret by name")

// SecretReader reads the Secrets PaymentProviders reference (the gateway's
// credentials, the provider controller's and the bundle controller's
// checks). Each Get compares the resourceVersion in the metadata cache with
// the copy it holds and reads the API server only when the Secret changed
// (or the cache does not show it: a Secret is missing only when the API
// server says so):
// the data it holds is exactly that of the Secrets asked for by name, and a
// Secret that is deleted is dropped. Other objects are read from Metadata
// unchanged.
type SecretReader struct {
	// Metadata is the manager's cache, with a metadata-only informer for
	// Secrets (a controller watching Secrets with builder.OnlyMetadata).
	Metadata client.Reader
	// API reads from the API server (the manager's API reader).
	API client.Reader

	mu   sync.Mutex
	held map[types.NamespacedName]*corev1.Secret
}

var secretGVK = corev1.SchemeGroupVersion.WithKind("Secret")

// NewSecretReader returns a SecretReader on mgr's cache and API reader, and
// registers the metadata-only Secret informer it reads versions from, so the
// manager syncs it before any controller asks for a Secret.
func NewSecretReader(ctx context.Context, mgr ctrl.Manager) (*SecretReader, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(secretGVK)
	if _, err := mgr.GetCache().GetInformer(ctx, m, cache.BlockUntilSynced(false)); err != nil {
		return nil, fmt.Errorf("controllers: metadata informer for Secrets: %w", err)
	}
	return &SecretReader{Metadata: mgr.GetCache(), API: mgr.GetAPIReader()}, nil
}

// Get implements client.Reader.
func (r *SecretReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	secret, ok := obj.(*corev1.Secret)
	if !ok {
		return r.Metadata.Get(ctx, key, obj, opts...)
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(secretGVK)
	switch err := r.Metadata.Get(ctx, key, m); {
	case apierrors.IsNotFound(err):
		// Only the API server says a Secret does not exist: the cache may
		// not have seen one created a moment ago (applied with its
		// provider), and a bundle published without it answers the
		// provider's webhooks 401 until the watch catches up.
	case err != nil:
		return err
	default:
		r.mu.Lock()
		have := r.held[key]
		r.mu.Unlock()
		if have != nil && have.ResourceVersion == m.ResourceVersion {
			have.DeepCopyInto(secret)
			return nil
		}
	}
	if err := r.API.Get(ctx, key, secret, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(key)
		}
		return err
	}
	r.mu.Lock()
	if r.held == nil {
		r.held = map[types.NamespacedName]*corev1.Secret{}
	}
	keep := secret.DeepCopy()
	// Nothing but the data and what identifies the version is kept.
	keep.ObjectMeta = metav1.ObjectMeta{Namespace: keep.Namespace, Name: keep.Name, UID: keep.UID, ResourceVersion: keep.ResourceVersion}
	r.held[key] = keep
	r.mu.Unlock()
	return nil
}

// List implements client.Reader: Secrets cannot be listed through it.
func (r *SecretReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.SecretList); ok {
		return errSecretListing
	}
	return r.Metadata.List(ctx, list, opts...)
}

func (r *SecretReader) forget(key types.NamespacedName) {
	r.mu.Lock()
	delete(r.held, key)
	r.mu.Unlock()
}

// Held lists the Secrets whose data the reader holds (for tests and
// debugging; never their data).
func (r *SecretReader) Held() []types.NamespacedName {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(r.held))
	for k := range r.held {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// readSecret reads the Secret ns/name through secrets; nil when it does not
// exist.
func readSecret(ctx context.Context, secrets client.Reader, ns, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := secrets.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read Secret %s/%s: %w", ns, name, err)
	}
	return s, nil
}
