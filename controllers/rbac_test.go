package controllers_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
	"github.com/paywarden/paywarden/internal/fixture"
	"github.com/paywarden/paywarden/internal/paysim"
	"github.com/paywarden/paywarden/internal/testenv"
)

// waitAuthorized waits until c, impersonating who, may list
// PaymentProviders: RBAC takes effect asynchronously.
func waitAuthorized(t *testing.T, who string, c client.Client) client.Client {
	t.Helper()
	fixture.Eventually(t, 15*time.Second, "RBAC for "+who, func() bool {
		return c.List(context.Background(), &v1alpha1.PaymentProviderList{}) == nil
	})
	return c
}

// The manager's shipped RBAC is enough for what it does: as its
// ServiceAccount it is elected through a Lease in its own namespace,
// validates a provider, keeps its webhook bundle in its own namespace,
// creates a payment at the provider and settles it, and records Events. And
// it is no more: no Secret writes outside its namespace, no Leases
// elsewhere, no spec writes or deletes of what tenants own.
func TestManagerRunsWithTheShippedRBAC(t *testing.T) {
	ctx := context.Background()
	if err := env.ApplyShippedRBAC(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := env.As(testenv.SystemNamespace, testenv.ManagerSA)
	raw, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	as := waitAuthorized(t, testenv.ManagerSA, raw)

	o := withBundles(controllers.ControllerPayment)
	o.Config, o.LeaderElection, o.KubernetesEvents = cfg, true, true
	m := fixture.StartManager(t, env, "", o)
	select {
	case <-m.Manager.Elected():
	case <-time.After(30 * time.Second):
		t.Fatal("the manager was not elected with the namespaced leader-election Role")
	}

	ns := fixture.Namespace(t, env.Client, "pay")
	_, prov := kukopayAt(t, ns, fixture.Provider{Schedule: fast})
	fixture.CreateSecret(t, env.Client, ns, "kukopay-webhook", map[string]string{"current": "whsec"})
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := fixture.GetProvider(t, env.Client, ns, prov.Name)
		fresh.Spec.Webhook.SigningSecretRef = &v1alpha1.SecretReference{Name: "kukopay-webhook"}
		if err := env.Client.Update(ctx, fresh); err != nil {
			return err
		}
		prov = fresh
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitBundle(t, prov, "signing.current")
	fixture.Eventually(t, 15*time.Second, "provider Ready", func() bool { return providerReady(t, prov) == metav1.ConditionTrue })

	p := fixture.CreatePayment(t, env.Client, fixture.Payment{Namespace: ns, Name: "order-rbac", Provider: "kukopay", Outcome: paysim.OutcomeSucceed, After: "10s"})
	fixture.WaitPhase(t, env.Client, p, v1alpha1.PhaseSucceeded, 30*time.Second)
	fixture.Eventually(t, 15*time.Second, "a Kubernetes Event for the payment", func() bool {
		var l eventsv1.EventList
		if err := env.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return false
		}
		for _, e := range l.Items {
			if e.Regarding.Name == p.Name {
				return true
			}
		}
		return false
	})

	lease := func(namespace string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "forged"}}
	}
	for what, err := range map[string]error{
		"create a Secret in a tenant namespace": as.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"}}),
		"update a tenant's Secret": as.Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay-webhook"},
			StringData: map[string]string{"forged": "x"}}),
		"delete a tenant's Secret":             as.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay-webhook"}}),
		"create a Lease in a tenant namespace": as.Create(ctx, lease(ns)),
		"create a Lease in default":            as.Create(ctx, lease("default")),
		"list Leases in its own namespace":     as.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(testenv.SystemNamespace)),
		"update a Payment's spec":              as.Update(ctx, fixture.GetPayment(t, env.Client, p)),
		"create a Payment":                     as.Create(ctx, &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged"}, Spec: p.Spec}),
		"delete a PaymentProvider":             as.Delete(ctx, prov.DeepCopy()),
		"update a PaymentProvider's spec":      as.Update(ctx, fixture.GetProvider(t, env.Client, ns, prov.Name)),
		"create a ClusterRoleBinding": as.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "forged"},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"}}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the manager: %v, want Forbidden", what, err)
		}
	}
	// What it may do in its own namespace: its Lease, and the bundles.
	if err := as.Get(ctx, types.NamespacedName{Namespace: testenv.SystemNamespace, Name: "manager.paywarden.dev"}, &coordinationv1.Lease{}); err != nil {
		t.Errorf("get its Lease: %v", err)
	}
}

// Tenants manage Payments and PaymentProviders through the shipped
// aggregated roles, and read the inbox, but cannot decide a payment's
// outcome: no status writes, no forged WebhookEvents. envtest runs no
// kube-controller-manager, so the built-in edit/view roles are not
// aggregated here; the roles are bound directly (test/config checks their
// aggregation labels).
func TestTenantRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if err := env.ApplyShippedRBAC(ctx); err != nil {
		t.Fatal(err)
	}
	ns := fixture.Namespace(t, env.Client, "pay")
	for user, role := range map[string]string{"alice": "paywarden-editor", "victor": "paywarden-viewer"} {
		if err := env.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	clientAs := func(user string) client.Client {
		c, err := client.New(env.AsUser(user), client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		fixture.Eventually(t, 15*time.Second, "RBAC for "+user, func() bool {
			return c.List(ctx, &v1alpha1.PaymentList{}, client.InNamespace(ns)) == nil
		})
		return c
	}
	alice, victor := clientAs("alice"), clientAs("victor")

	prov := &v1alpha1.PaymentProvider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kukopay"}, Spec: v1alpha1.PaymentProviderSpec{
		Type: v1alpha1.ProviderKukoPay, APIURL: "http://provider.invalid", CredentialsSecretRef: v1alpha1.SecretReference{Name: "creds"},
	}}
	if err := alice.Create(ctx, prov); err != nil {
		t.Fatalf("editor creates a PaymentProvider: %v", err)
	}
	p := &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order-1"}, Spec: v1alpha1.PaymentSpec{
		ProviderRef: v1alpha1.LocalObjectReference{Name: "kukopay"}, Amount: v1alpha1.Amount{Value: 100, Currency: "USD"},
		ProviderPaymentID: "pay_1",
	}}
	if err := alice.Create(ctx, p); err != nil {
		t.Fatalf("editor creates a Payment: %v", err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Annotations = map[string]string{"payments.paywarden.dev/requery": "1"}
	if err := alice.Patch(ctx, p, patch); err != nil {
		t.Fatalf("editor annotates a Payment: %v", err)
	}
	var events v1alpha1.WebhookEventList
	if err := alice.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Errorf("editor lists WebhookEvents: %v", err)
	}
	if err := victor.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Errorf("viewer lists WebhookEvents: %v", err)
	}

	settled := p.DeepCopy()
	settled.Status.Phase = v1alpha1.PhaseSucceeded
	forged := &v1alpha1.WebhookEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.WebhookEventName("kukopay", "evt_forged")},
		Spec: v1alpha1.WebhookEventSpec{Provider: "kukopay", EventID: "evt_forged", Type: "payment.succeeded", Via: v1alpha1.ViaWebhook,
			ReceivedAt: metav1.Now(), ProviderPaymentID: "pay_1"}}
	provStatus := fixture.GetProvider(t, env.Client, ns, "kukopay")
	provStatus.Status.WebhookPath = "/forged"
	for what, err := range map[string]error{
		"editor updates payments/status":              alice.Status().Update(ctx, settled),
		"editor patches payments/status":              alice.Status().Patch(ctx, settled, client.MergeFrom(p)),
		"editor updates paymentproviders/status":      alice.Status().Update(ctx, provStatus),
		"editor creates a WebhookEvent":               alice.Create(ctx, forged),
		"viewer creates a Payment":                    victor.Create(ctx, &v1alpha1.Payment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "v"}, Spec: p.Spec}),
		"viewer annotates a Payment":                  victor.Patch(ctx, p.DeepCopy(), client.MergeFrom(p)),
		"editor reads a Payment in another namespace": alice.List(ctx, &v1alpha1.PaymentList{}, client.InNamespace("default")),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	if err := alice.Delete(ctx, p); err != nil {
		t.Errorf("editor deletes a Payment: %v", err)
	}
}
