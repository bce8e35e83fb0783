package controllers

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/provider/providers"
	"github.com/paywarden/paywarden/internal/webhookbundle"
)

// WebhookBundleReconciler keeps one verification bundle per PaymentProvider
// in Namespace (paywarden's own): a Secret with the provider's signing keys
// and, for provider types that verify webhooks through the provider's API,
// the credentials that call needs (internal/webhookbundle). The webhook
// receiver reads only these, so it needs no access to tenant Secrets.
//
// A bundle follows its provider and the Secrets the provider references: a
// rotated signing Secret reaches the receiver one reconcile later. A deleted
// provider's bundle is deleted; an owner reference cannot cross namespaces,
// so the bundle names its provider in annotations, and every bundle is
// checked against its provider when the manager starts (the Secret watch
// lists them), which also removes bundles of providers deleted while the
// manager was down.
type WebhookBundleReconciler struct {
	// Client reads PaymentProviders from the cache and writes bundles.
	Client client.Client
	// APIReader reads bundles from the API server: they are never cached.
	APIReader client.Reader
	// Secrets reads the providers' Secrets (the manager's SecretReader).
	Secrets client.Reader
	// Namespace holds the bundles: the namespace the manager and the
	// receiver run in.
	Namespace string
}

// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=paywarden-system,resources=secrets,verbs=create;update;delete

// SetupWithManager registers the controller. Secrets are watched as metadata
// only: a tenant Secret's change is a reason to re-read it by name, never a
// reason to cache it.
func (r *WebhookBundleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Namespace == "" {
		return fmt.Errorf("webhook bundles: no namespace")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Secrets == nil {
		r.Secrets = r.APIReader
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("webhookbundle").
		// Status writes on the provider change nothing a bundle holds.
		For(&v1alpha1.PaymentProvider{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.providersOf), builder.OnlyMetadata).
		Complete(r)
}

// providersOf maps a Secret to the providers whose bundle depends on it: a
// bundle to its provider, a tenant Secret to the providers referencing it.
func (r *WebhookBundleReconciler) providersOf(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() == r.Namespace {
		if key, _, ok := webhookbundle.Provider(o); ok {
			return []reconcile.Request{{NamespacedName: key}}
		}
	}
	var list v1alpha1.PaymentProviderList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "list providers referencing secret", "secret", o.GetNamespace()+"/"+o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		for _, name := range secretRefsOf(&list.Items[i]) {
			if name == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
				break
			}
		}
	}
	return reqs
}

// Reconcile makes the provider's bundle match the provider and its Secrets,
// or deletes it when the provider is gone.
func (r *WebhookBundleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	prov, err := r.provider(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if prov == nil || !prov.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.deleteBundle(ctx, req.NamespacedName)
	}
	want, err := r.desired(ctx, prov)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.write(ctx, want, req.NamespacedName)
}

// provider reads the PaymentProvider named key; nil when it is gone.
func (r *WebhookBundleReconciler) provider(ctx context.Context, key types.NamespacedName) (*v1alpha1.PaymentProvider, error) {
	prov := &v1alpha1.PaymentProvider{}
	err := r.Client.Get(ctx, key, prov)
	if apierrors.IsNotFound(err) {
		// Not in the cache: a provider just created may not have reached
		// it yet while its bundle (written by an earlier reconcile or
		// another manager) already has. Only the API server says it is
		// gone; a bundle deleted wrongly answers the provider's webhooks
		// 503 until it is written again.
		err = r.APIReader.Get(ctx, key, prov)
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return prov, nil
}

// desired is the bundle prov's webhooks are verified with, from the
// Secrets it references. A referenced Secret that does not exist is nil:
// the bundle then lacks its keys, and the provider controller reports the
// provider not Ready.
func (r *WebhookBundleReconciler) desired(ctx context.Context, prov *v1alpha1.PaymentProvider) (*corev1.Secret, error) {
	var signing, creds *corev1.Secret
	var err error
	if ref := prov.Spec.Webhook.SigningSecretRef; ref != nil && ref.Name != "" {
		if signing, err = readSecret(ctx, r.Secrets, prov.Namespace, ref.Name); err != nil {
			return nil, err
		}
	}
	// Credentials are read only for types whose verification uses them.
	if caps, ok := providers.Lookup(string(prov.Spec.Type)); ok && caps.Verification.Credentials {
		if creds, err = readSecret(ctx, r.Secrets, prov.Namespace, prov.Spec.CredentialsSecretRef.Name); err != nil {
			return nil, err
		}
	}
	return webhookbundle.Desired(r.Namespace, prov, signing, creds), nil
}

// write makes the bundle on the API server want: created, replaced when
// its type changed, or updated; nothing when it is up to date.
func (r *WebhookBundleReconciler) write(ctx context.Context, want *corev1.Secret, prov types.NamespacedName) error {
	have := &corev1.Secret{}
	switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), have); {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("create webhook bundle %s for provider %s: %w", want.Name, prov, err)
		}
		log.FromContext(ctx).Info("webhook bundle created", "provider", prov.String(), "bundle", want.Name, "keys", len(want.Data))
		return nil
	case err != nil:
		return fmt.Errorf("read webhook bundle %s for provider %s: %w", want.Name, prov, err)
	}
	if webhookbundle.UpToDate(have, want) {
		return nil
	}
	if have.Type != want.Type {
		// The type of a Secret cannot change: replace it.
		if err := r.Client.Delete(ctx, have, client.Preconditions{UID: &have.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replace webhook bundle %s: %w", have.Name, err)
		}
		if err := r.Client.Create(ctx, want); err != nil {
			return fmt.Errorf("replace webhook bundle %s for provider %s: %w", want.Name, prov, err)
		}
		return nil
	}
	have.Data, have.StringData = want.Data, nil
	have.Labels = merged(have.Labels, want.Labels)
	have.Annotations = merged(have.Annotations, want.Annotations)
	// Optimistic concurrency: a conflict re-runs the reconcile on fresh state.
	if err := r.Client.Update(ctx, have); err != nil {
		return fmt.Errorf("update webhook bundle %s for provider %s: %w", have.Name, prov, err)
	}
	log.FromContext(ctx).Info("webhook bundle updated", "provider", prov.String(), "bundle", have.Name, "keys", len(have.Data))
	return nil
}

// merged is have with every entry of want set.
func merged(have, want map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	maps.Copy(have, want)
	return have
}

// deleteBundle deletes the bundle of a provider that is gone. Only a bundle
// that names that provider is deleted.
func (r *WebhookBundleReconciler) deleteBundle(ctx context.Context, prov types.NamespacedName) error {
	bundle := &corev1.Secret{}
	key := types.NamespacedName{Namespace: r.Namespace, Name: webhookbundle.Name(prov.Namespace, prov.Name)}
	if err := r.APIReader.Get(ctx, key, bundle); err != nil {
		return client.IgnoreNotFound(err)
	}
	if owner, _, ok := webhookbundle.Provider(bundle); !ok || owner != prov {
		return nil
	}
	if err := r.Client.Delete(ctx, bundle, client.Preconditions{UID: &bundle.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete webhook bundle %s of deleted provider %s: %w", key.Name, prov, err)
	}
	log.FromContext(ctx).Info("webhook bundle deleted", "provider", prov.String(), "bundle", key.Name)
	return nil
}
