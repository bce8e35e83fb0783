package testenv

import (
	"context"
	"fmt"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Service accounts of the shipped config (config/rbac, config/receiver).
const (
	SystemNamespace = "paywarden-system"
	ManagerSA       = "paywarden-manager"
	ReceiverSA      = "paywarden-receiver"
)

// Render renders a kustomize directory of the repository (relative to the
// module root) the way `kubectl kustomize` does.
func Render(root, dir string) (resmap.ResMap, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	return m, nil
}

// ApplyShippedRBAC renders config/default and creates what it holds of
// Namespaces, ServiceAccounts, Roles, ClusterRoles and their bindings
// exactly as shipped (existing objects are left as they are), so tests can
// impersonate paywarden's ServiceAccounts with the permissions a deployment
// gives them.
func (e *Env) ApplyShippedRBAC(ctx context.Context) error {
	m, err := Render(e.Root, "config/default")
	if err != nil {
		return err
	}
	kinds := map[string]func() client.Object{
		"Namespace":          func() client.Object { return &corev1.Namespace{} },
		"ServiceAccount":     func() client.Object { return &corev1.ServiceAccount{} },
		"Role":               func() client.Object { return &rbacv1.Role{} },
		"RoleBinding":        func() client.Object { return &rbacv1.RoleBinding{} },
		"ClusterRole":        func() client.Object { return &rbacv1.ClusterRole{} },
		"ClusterRoleBinding": func() client.Object { return &rbacv1.ClusterRoleBinding{} },
	}
	// Namespaces first: everything else may live in one.
	for _, pass := range []bool{true, false} {
		for _, r := range m.Resources() {
			newObj, ok := kinds[r.GetKind()]
			if !ok || (r.GetKind() == "Namespace") != pass {
				continue
			}
			mp, err := r.Map()
			if err != nil {
				return err
			}
			obj := newObj()
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mp, obj); err != nil {
				return fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
			}
			if err := e.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create %s %s: %w", r.GetKind(), r.GetName(), err)
			}
		}
	}
	return nil
}

// As returns a copy of the control plane's config that impersonates the
// ServiceAccount namespace/name (with the groups every ServiceAccount has).
func (e *Env) As(namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// AsUser returns a copy of the control plane's config that impersonates an
// ordinary authenticated user.
func (e *Env) AsUser(name string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	return cfg
}
