package controllers

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/gateway"
	"github.com/paywarden/paywarden/internal/provider"
	"github.com/paywarden/paywarden/internal/provider/providers"
	"github.com/paywarden/paywarden/internal/statuswriter"
)

// Reasons of a PaymentProvider's Ready condition.
const (
	// ReasonProviderConfigured: the config is valid and every referenced
	// Secret and key resolves.
	ReasonProviderConfigured = "Configured"
	// ReasonSecretNotFound: the credentials or the signing Secret does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretKeyMissing: a required credentials key is absent, empty or
	// only whitespace, or the signing Secret has no keys at all.
	ReasonSecretKeyMissing = "SecretKeyMissing"
	// ReasonInvalidConfig: the spec (or a signing key's value) cannot work,
	// e.g. PayPal without webhook.paypalWebhookID (or with a blank one), a
	// signing key that is blank or not in the adapter's format.
	ReasonInvalidConfig = "InvalidConfig"
	// ReasonProviderRejectedConfig: the provider itself refused paywarden's
	// configuration (401/403: bad or rotated credentials; a redirect; a route
	// that is not there). Calls wait, payments keep their phase, and work
	// resumes once the configuration is fixed.
	ReasonProviderRejectedConfig = "ProviderRejectedConfig"
)

// IndexProviderSecrets indexes PaymentProviders by the names of the Secrets
// they reference (credentials and signing), so a changed Secret finds the
// providers to re-check without a scan.
const IndexProviderSecrets = "paymentprovider.secretRefs"

// PaymentProviderReconciler validates a PaymentProvider (SPEC §3): its spec,
// and that the credentials Secret with the keys its type needs and the
// signing Secret (if referenced, with at least one key) exist. It reports the
// verdict as the Ready condition with a precise reason, publishes
// status.webhookPath, and re-checks whenever a referenced Secret changes, so
// creating or rotating a Secret takes effect without a restart.
//
// It also reports a configuration the provider itself refused (the gateway
// notices it on a call and notifies this controller through ConfigSource).
//
// It never touches status.circuit, the Degraded condition (the gateway owns
// them) or status.backfill (the Backfill controller's): every write re-reads
// on conflict and changes only its own fields.
type PaymentProviderReconciler struct {
	Client client.Client
	// APIReader re-reads a provider after a write conflict (not the cache).
	APIReader client.Reader
	// Secrets reads the referenced Secrets (the manager's SecretReader);
	// default APIReader. Secrets are never read from the cache.
	Secrets  client.Reader
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// Gateway, when set, forgets the adapter, rate limit and circuit breaker
	// of a deleted provider and reports configurations the provider refused
	// (share the manager's).
	Gateway *gateway.Gateway
	// Events, when set, delivers providers whose refused configuration
	// appeared or cleared (the gateway's Notify).
	Events *ProviderEvents
}

// ProviderEvents fans the gateway's notifications about a provider (a
// configuration the provider refused, or its fix) out to the controllers that
// act on them: the PaymentProvider controller reports it, the Payment
// reconciler wakes the provider's payments. Set Notify as the gateway's
// Notify; each controller subscribes with Source before the manager starts.
type ProviderEvents struct {
	mu   sync.Mutex
	subs []chan event.GenericEvent
}

// Notify tells every subscriber about the provider; it never blocks (a full
// subscriber catches up through its other watches and resyncs).
func (e *ProviderEvents) Notify(key types.NamespacedName) {
	prov := &v1alpha1.PaymentProvider{}
	prov.Namespace, prov.Name = key.Namespace, key.Name
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ch := range e.subs {
		select {
		case ch <- event.GenericEvent{Object: prov}:
		default:
		}
	}
}

// Source subscribes a controller; h maps the provider to its requests.
func (e *ProviderEvents) Source(h handler.EventHandler) source.Source {
	ch := make(chan event.GenericEvent, 256)
	e.mu.Lock()
	e.subs = append(e.subs, ch)
	e.mu.Unlock()
	return source.Channel(ch, h)
}

// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=paymentproviders/status,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the Secret index and the controller. Secrets
// are watched as metadata only: a change is a reason to re-read the Secret by
// name, and the cache holds no Secret data.
func (r *PaymentProviderReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Secrets == nil {
		r.Secrets = r.APIReader
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &v1alpha1.PaymentProvider{}, IndexProviderSecrets, secretRefsOf); err != nil {
		return fmt.Errorf("index payment providers by secret: %w", err)
	}
	// No predicate on the provider: a status write by another controller
	// re-runs the (cache-only) validation, which writes nothing when nothing
	// changed, and repairs a Ready condition someone removed.
	b := ctrl.NewControllerManagedBy(mgr).
		Named("paymentprovider").
		For(&v1alpha1.PaymentProvider{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.providersOfSecret), builder.OnlyMetadata)
	if r.Events != nil {
		b = b.WatchesRawSource(r.Events.Source(&handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}

func secretRefsOf(o client.Object) []string {
	p, ok := o.(*v1alpha1.PaymentProvider)
	if !ok {
		return nil
	}
	var names []string
	if n := p.Spec.CredentialsSecretRef.Name; n != "" {
		names = append(names, n)
	}
	if ref := p.Spec.Webhook.SigningSecretRef; ref != nil && ref.Name != "" && ref.Name != p.Spec.CredentialsSecretRef.Name {
		names = append(names, ref.Name)
	}
	return names
}

func (r *PaymentProviderReconciler) providersOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.PaymentProviderList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{IndexProviderSecrets: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list providers referencing secret", "secret", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// WebhookPath is the receiver path of a provider's webhooks.
func WebhookPath(namespace, name string) string {
	return "/webhooks/" + namespace + "/" + name
}

// Reconcile validates the provider and writes the verdict when it changed.
func (r *PaymentProviderReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	prov := &v1alpha1.PaymentProvider{}
	if err := r.Client.Get(ctx, req.NamespacedName, prov); err != nil {
		if apierrors.IsNotFound(err) && r.Gateway != nil {
			// Drop the adapter, limiter and breaker of a deleted provider; one
			// re-created under the name starts afresh.
			r.Gateway.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !prov.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	v, err := r.validate(ctx, prov)
	if err != nil {
		// Not a verdict on the provider (a Secret could not be read): retry.
		return ctrl.Result{}, err
	}

	before := meta.FindStatusCondition(prov.Status.Conditions, v1alpha1.ConditionReady)
	var prevStatus metav1.ConditionStatus
	var prevReason string
	if before != nil {
		prevStatus, prevReason = before.Status, before.Reason
	}
	now := metav1.NewTime(r.Clock.Now())
	wrote, err := statuswriter.Update(ctx, statuswriter.Writer{Client: r.Client, APIReader: r.APIReader}, prov, func(p *v1alpha1.PaymentProvider) error {
		status := metav1.ConditionFalse
		if v.ready {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{
			Type: v1alpha1.ConditionReady, Status: status, Reason: v.reason, Message: v.message,
			ObservedGeneration: p.Generation, LastTransitionTime: now,
		})
		p.Status.WebhookPath = WebhookPath(p.Namespace, p.Name)
		p.Status.ObservedGeneration = p.Generation
		return nil
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if wrote {
		log.FromContext(ctx).V(1).Info("provider validated", "provider", req.NamespacedName.String(), "ready", v.ready, "reason", v.reason)
	}
	if r.Recorder != nil && (prevStatus != condStatus(v.ready) || prevReason != v.reason) {
		if v.ready {
			r.Recorder.Eventf(prov, nil, corev1.EventTypeNormal, v.reason, "Validate", "%s", v.message)
		} else {
			r.Recorder.Eventf(prov, nil, corev1.EventTypeWarning, v.reason, "Validate", "%s", v.message)
		}
	}
	return ctrl.Result{}, nil
}

func condStatus(ok bool) metav1.ConditionStatus {
	if ok {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// verdict is the outcome of validating a provider.
type verdict struct {
	ready           bool
	reason, message string
}

func notReady(reason, format string, args ...any) verdict {
	return verdict{reason: reason, message: fmt.Sprintf(format, args...)}
}

// validate checks the provider in the order an operator fixes things: the
// spec, the credentials, then webhook verification. Only a failure to read a
// Secret is an error; everything else is a verdict.
func (r *PaymentProviderReconciler) validate(ctx context.Context, prov *v1alpha1.PaymentProvider) (verdict, error) {
	spec := &prov.Spec
	caps, known := providers.Lookup(string(spec.Type))
	if !known {
		return notReady(ReasonInvalidConfig, "unknown provider type %q (supported: %s)", spec.Type, strings.Join(providers.Types(), ", ")), nil
	}
	required := caps.CredentialKeys
	if u, err := url.Parse(spec.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return notReady(ReasonInvalidConfig, "apiURL %q is not an absolute http(s) URL", spec.APIURL), nil
	}
	if err := caps.Verification.CheckWebhookID(spec.Webhook.PayPalWebhookID); err != nil {
		return notReady(ReasonInvalidConfig, "webhook.paypalWebhookID is required: the %v; %s webhooks are verified against the webhook id the provider assigned, so without it every webhook is rejected", err, spec.Type), nil
	}

	credName := spec.CredentialsSecretRef.Name
	creds, err := readSecret(ctx, r.Secrets, prov.Namespace, credName)
	if err != nil {
		return verdict{}, err
	}
	if creds == nil {
		return notReady(ReasonSecretNotFound, "credentials Secret %q not found in namespace %s", credName, prov.Namespace), nil
	}
	if missing := caps.MissingCredentials(creds.Data); len(missing) > 0 {
		return notReady(ReasonSecretKeyMissing, "credentials Secret %q lacks non-blank key(s) %s (a %s provider needs %s; empty or whitespace only counts as missing)",
			credName, strings.Join(missing, ", "), spec.Type, strings.Join(required, ", ")), nil
	}

	webhooks, bad, err := r.validateSigning(ctx, prov, caps)
	if err != nil || bad != nil {
		return derefVerdict(bad), err
	}

	// The adapter has the last word on its config. A throwaway one is built:
	// validating must not replace the gateway's shared entry under callers.
	if _, err := providers.New(string(spec.Type), provider.Config{
		Name: prov.Namespace + "/" + prov.Name, APIURL: strings.TrimSuffix(spec.APIURL, "/"), Credentials: creds.Data,
		WebhookID: spec.Webhook.PayPalWebhookID, Timeout: spec.QueryTimeout(),
	}); err != nil {
		return notReady(ReasonInvalidConfig, "the %s adapter rejects the config: %v", spec.Type, err), nil
	}
	if r.Gateway != nil {
		// For rebuilds the adapter when the spec or credentials changed since
		// the refusal, which clears it (and wakes the provider's payments).
		if entry, err := r.Gateway.For(ctx, prov); err == nil {
			if msg := entry.ConfigProblem(); msg != "" {
				return notReady(ReasonProviderRejectedConfig, "the provider refused paywarden's configuration; calls wait and payments keep their phase until it is fixed (check the credentials Secret %q and apiURL): %s", credName, msg), nil
			}
		}
	}
	return verdict{
		ready:  true,
		reason: ReasonProviderConfigured,
		message: fmt.Sprintf("credentials Secret %q has %s; %s; webhooks are received at %s",
			credName, strings.Join(required, ", "), webhooks, WebhookPath(prov.Namespace, prov.Name)),
	}, nil
}

// validateSigning checks the webhook signing Secret, and says how webhooks
// are verified; bad is the verdict when the Secret is unusable.
func (r *PaymentProviderReconciler) validateSigning(ctx context.Context, prov *v1alpha1.PaymentProvider, caps provider.Capabilities) (webhooks string, bad *verdict, err error) {
	spec := &prov.Spec
	webhooks = "no webhook.signingSecretRef: webhooks cannot be verified and are rejected; status queries and backfill still settle payments"
	if !caps.Verification.SigningSecret {
		webhooks = "webhooks verified through the provider's verification API for webhook id " + spec.Webhook.PayPalWebhookID
	}
	ref := spec.Webhook.SigningSecretRef
	if ref == nil {
		return webhooks, nil, nil
	}
	signing, err := readSecret(ctx, r.Secrets, prov.Namespace, ref.Name)
	if err != nil {
		return "", nil, err
	}
	not := func(reason, format string, args ...any) (string, *verdict, error) {
		v := notReady(reason, format, args...)
		return "", &v, nil
	}
	if signing == nil {
		return not(ReasonSecretNotFound, "signing Secret %q not found in namespace %s", ref.Name, prov.Namespace)
	}
	keys := activeKeys(signing)
	if len(keys) == 0 {
		return not(ReasonSecretKeyMissing, "signing Secret %q has no keys: every key is an active signing secret, so add at least one", ref.Name)
	}
	// Every key is checked, not just one: a blank key beside a real one is
	// skipped by VerifyWebhook, but it is a Secret the operator believes works.
	for _, k := range keys {
		if err := caps.Verification.CheckSigningSecret(signing.Data[k]); err != nil {
			return not(ReasonInvalidConfig, "signing Secret %q key %q: %v", ref.Name, k, err)
		}
	}
	return fmt.Sprintf("signing Secret %q has %d active key(s) (%s)", ref.Name, len(keys), strings.Join(keys, ", ")), nil, nil
}

func derefVerdict(v *verdict) verdict {
	if v == nil {
		return verdict{}
	}
	return *v
}

// activeKeys are the signing Secret's keys with a value, sorted; the receiver
// uses exactly these (an empty value is not a secret).
func activeKeys(s *corev1.Secret) []string {
	keys := make([]string, 0, len(s.Data))
	for k, v := range s.Data {
		if len(v) > 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
