package config_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/resmap"
)

// grants flattens rules into "group/resource" -> sorted verbs, so a test can
// compare a role with a table and any added verb, resource or group shows.
func grants(t *testing.T, what string, rules []rbacv1.PolicyRule) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("%s: unexpected resourceNames/nonResourceURLs rule %+v", what, r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				key := g + "/" + res
				for _, v := range r.Verbs {
					if !slices.Contains(out[key], v) {
						out[key] = append(out[key], v)
					}
				}
				slices.Sort(out[key])
			}
		}
	}
	return out
}

func wantGrants(t *testing.T, what string, rules []rbacv1.PolicyRule, want map[string]string) {
	t.Helper()
	have := grants(t, what, rules)
	for _, key := range slices.Sorted(maps.Keys(want)) {
		verbs := strings.Fields(want[key])
		slices.Sort(verbs)
		if !slices.Equal(have[key], verbs) {
			t.Errorf("%s: %s may %v, want exactly %v", what, key, have[key], verbs)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want[key]; !ok {
			t.Errorf("%s: unexpected grant on %s: %v", what, key, have[key])
		}
	}
}

func findRole(t *testing.T, m resmap.ResMap, name, ns string) *rbacv1.Role {
	t.Helper()
	for _, r := range m.Resources() {
		if r.GetKind() == "Role" && r.GetName() == name && r.GetNamespace() == ns {
			return decode[rbacv1.Role](t, m, "Role", name)
		}
	}
	t.Fatalf("Role %s/%s not rendered", ns, name)
	return nil
}

// The manager's permissions, exactly, as deployed: a widened marker or YAML
// fails here until this table is changed on purpose. The manager reads
// tenant Secrets by name (get) and watches them as metadata (list, watch);
// it writes Secrets only in its own namespace (the receiver's webhook
// bundles); leader election is namespaced.
func TestManagerRBACIsExact(t *testing.T) {
	m := render(t, "config/default")
	wantGrants(t, "ClusterRole paywarden-manager", decode[rbacv1.ClusterRole](t, m, "ClusterRole", "paywarden-manager").Rules, map[string]string{
		"/secrets":             "get list watch",
		"events.k8s.io/events": "create patch",
		// patch: the money-in-flight finalizer (SPEC §12.1).
		"payments.paywarden.dev/payments":             "get list watch delete patch",
		"payments.paywarden.dev/paymentproviders":     "get list watch patch",
		"payments.paywarden.dev/webhookevents":        "get list watch create delete",
		"payments.paywarden.dev/webhookevents/status": "update",
		"payments.paywarden.dev/refunds":              "get list watch patch",
		"payments.paywarden.dev/refunds/status":       "get patch update",
		// get and patch come from the markers of controllers/payment_controller.go;
		// every writer updates status (internal/statuswriter).
		"payments.paywarden.dev/payments/status":         "get patch update",
		"payments.paywarden.dev/paymentproviders/status": "get patch update",
	})
	wantGrants(t, "Role paywarden-manager", findRole(t, m, "paywarden-manager", "paywarden-system").Rules, map[string]string{
		"/secrets": "create update delete",
		// The ledger's shards (internal/ledger), read from the API server.
		"/configmaps": "get create update",
	})
	wantGrants(t, "Role paywarden-leader-election", findRole(t, m, "paywarden-leader-election", "paywarden-system").Rules, map[string]string{
		"coordination.k8s.io/leases": "get create update",
		"/events":                    "create patch",
	})

	// Bound to the manager's ServiceAccount as what they are: the Roles by
	// RoleBindings in paywarden-system, nothing about leases cluster-wide.
	bindings := map[string]string{}
	for _, r := range m.Resources() {
		switch r.GetKind() {
		case "RoleBinding":
			b := decode[rbacv1.RoleBinding](t, m, "RoleBinding", r.GetName())
			bindings[fmt.Sprintf("%s/%s", b.RoleRef.Kind, b.RoleRef.Name)] = b.Namespace
		case "ClusterRoleBinding":
			b := decode[rbacv1.ClusterRoleBinding](t, m, "ClusterRoleBinding", r.GetName())
			bindings[fmt.Sprintf("%s/%s", b.RoleRef.Kind, b.RoleRef.Name)] = "*"
		}
	}
	for ref, ns := range map[string]string{
		"ClusterRole/paywarden-manager": "*", "Role/paywarden-manager": "paywarden-system", "Role/paywarden-leader-election": "paywarden-system",
		"ClusterRole/paywarden-receiver": "*", "Role/paywarden-receiver-bundles": "paywarden-system",
	} {
		if bindings[ref] != ns {
			t.Errorf("%s is bound in %q, want %q", ref, bindings[ref], ns)
		}
	}
	for _, r := range m.Resources() {
		if r.GetKind() != "ClusterRole" {
			continue
		}
		for key := range grants(t, r.GetName(), decode[rbacv1.ClusterRole](t, m, "ClusterRole", r.GetName()).Rules) {
			if strings.HasPrefix(key, "coordination.k8s.io/") {
				t.Errorf("ClusterRole %s grants %s cluster-wide", r.GetName(), key)
			}
		}
	}
}

// The receiver faces the internet: exactly what a webhook needs, Secrets
// only in its own namespace (the bundles), no delete anywhere.
func TestReceiverRBACIsExact(t *testing.T) {
	m := render(t, "config/default")
	wantGrants(t, "ClusterRole paywarden-receiver", decode[rbacv1.ClusterRole](t, m, "ClusterRole", "paywarden-receiver").Rules, map[string]string{
		"payments.paywarden.dev/paymentproviders":     "get list watch",
		"payments.paywarden.dev/payments":             "get list watch",
		"payments.paywarden.dev/webhookevents":        "get create",
		"payments.paywarden.dev/payments/status":      "update",
		"payments.paywarden.dev/webhookevents/status": "update",
		"payments.paywarden.dev/refunds":              "get list watch",
		"payments.paywarden.dev/refunds/status":       "update",
		"events.k8s.io/events":                        "create patch",
	})
	wantGrants(t, "Role paywarden-receiver-bundles", findRole(t, m, "paywarden-receiver-bundles", "paywarden-system").Rules, map[string]string{
		"/secrets": "get list watch",
	})
	for _, r := range m.Resources() {
		if strings.Contains(r.GetName(), "receiver") && r.GetKind() == "ClusterRole" && r.GetName() != "paywarden-receiver" {
			t.Errorf("unexpected receiver ClusterRole %s", r.GetName())
		}
	}
}

// Tenants get paywarden's kinds through the built-in admin/edit/view roles:
// editors manage Payments and PaymentProviders and read WebhookEvents;
// nobody may write a status or create a WebhookEvent (the inbox applies any
// stored event: creating one would settle a payment).
func TestTenantRolesAggregate(t *testing.T) {
	m := render(t, "config/default")
	editor := decode[rbacv1.ClusterRole](t, m, "ClusterRole", "paywarden-editor")
	viewer := decode[rbacv1.ClusterRole](t, m, "ClusterRole", "paywarden-viewer")
	for role, labels := range map[*rbacv1.ClusterRole][]string{
		editor: {"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit"},
		viewer: {"rbac.authorization.k8s.io/aggregate-to-view"},
	} {
		for _, l := range labels {
			if role.Labels[l] != "true" {
				t.Errorf("ClusterRole %s lacks label %s=true", role.Name, l)
			}
		}
	}
	if editor.Labels["rbac.authorization.k8s.io/aggregate-to-view"] != "" {
		t.Errorf("the editor role aggregates into view")
	}
	wantGrants(t, "ClusterRole paywarden-editor", editor.Rules, map[string]string{
		"payments.paywarden.dev/payments":         "get list watch create update patch delete",
		"payments.paywarden.dev/paymentproviders": "get list watch create update patch delete",
		"payments.paywarden.dev/refunds":          "get list watch create update patch delete",
		"payments.paywarden.dev/webhookevents":    "get list watch",
	})
	wantGrants(t, "ClusterRole paywarden-viewer", viewer.Rules, map[string]string{
		"payments.paywarden.dev/payments":         "get list watch",
		"payments.paywarden.dev/paymentproviders": "get list watch",
		"payments.paywarden.dev/refunds":          "get list watch",
		"payments.paywarden.dev/webhookevents":    "get list watch",
		"events.k8s.io/events":                    "get list watch",
	})
}
