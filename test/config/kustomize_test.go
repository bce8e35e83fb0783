// Package config_test renders the kustomize bases in config/ the way
// `kubectl apply -k` would and checks that what gets deployed is what the docs
// promise: leader election, probes, non-root and read-only containers,
// resource requests, the receiver's Service, and least-privilege RBAC.
package config_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/paywarden/paywarden/internal/controlplane"
)

func render(t *testing.T, dir string) resmap.ResMap {
	t.Helper()
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	return m
}

func decode[T any](t *testing.T, m resmap.ResMap, kind, name string) *T {
	t.Helper()
	for _, r := range m.Resources() {
		if r.GetKind() == kind && r.GetName() == name {
			obj := new(T)
			mp, err := r.Map()
			if err != nil {
				t.Fatal(err)
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(mp, obj); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return obj
		}
	}
	t.Fatalf("%s %s not rendered", kind, name)
	return nil
}

func TestDefaultOverlayRenders(t *testing.T) {
	m := render(t, "config/default")
	kinds := map[string]int{}
	for _, r := range m.Resources() {
		kinds[r.GetKind()]++
		if ns := r.GetNamespace(); ns != "" && ns != "paywarden-system" {
			t.Errorf("%s %s lands in namespace %q, want paywarden-system", r.GetKind(), r.GetName(), ns)
		}
	}
	if kinds["CustomResourceDefinition"] != 4 {
		t.Errorf("%d CRDs rendered, want 4", kinds["CustomResourceDefinition"])
	}

	mgr := decode[appsv1.Deployment](t, m, "Deployment", "paywarden-manager")
	c := mgr.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("manager runs without --leader-elect: %v", c.Args)
	}
	checkContainer(t, "manager", mgr.Spec.Template.Spec, c)

	rcv := findDeployment(t, m, "receiver")
	checkContainer(t, "receiver", rcv.Spec.Template.Spec, rcv.Spec.Template.Spec.Containers[0])
	if kinds["Service"] < 2 {
		t.Errorf("want a Service for the receiver and one for the manager's metrics, got %d", kinds["Service"])
	}
}

func findDeployment(t *testing.T, m resmap.ResMap, component string) *appsv1.Deployment {
	t.Helper()
	for _, r := range m.Resources() {
		if r.GetKind() == "Deployment" && strings.Contains(r.GetName(), component) {
			return decode[appsv1.Deployment](t, m, "Deployment", r.GetName())
		}
	}
	t.Fatalf("no %s Deployment rendered", component)
	return nil
}

func checkContainer(t *testing.T, name string, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: pod does not require a non-root user", name)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: root filesystem is writable", name)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: privilege escalation allowed", name)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Errorf("%s: missing liveness or readiness probe", name)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("%s: no resource requests", name)
	}
}

// The receiver faces the internet: it must not be able to delete anything,
// and it reads Secrets only, never writes them.
func TestReceiverRBACIsLeastPrivilege(t *testing.T) {
	m := render(t, "config/default")
	var rules []rbacv1.PolicyRule
	for _, r := range m.Resources() {
		if (r.GetKind() == "ClusterRole" || r.GetKind() == "Role") && strings.Contains(r.GetName(), "receiver") {
			if r.GetKind() == "ClusterRole" {
				rules = append(rules, decode[rbacv1.ClusterRole](t, m, "ClusterRole", r.GetName()).Rules...)
			} else {
				rules = append(rules, decode[rbacv1.Role](t, m, "Role", r.GetName()).Rules...)
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("no receiver role rendered")
	}
	for _, rule := range rules {
		for _, v := range rule.Verbs {
			if v == "delete" || v == "deletecollection" || v == "*" {
				t.Errorf("receiver may %s %v", v, rule.Resources)
			}
		}
		if slices.Contains(rule.Resources, "secrets") {
			for _, v := range rule.Verbs {
				if v != "get" && v != "list" && v != "watch" {
					t.Errorf("receiver may %s secrets", v)
				}
			}
		}
	}
}

func TestSamplesRender(t *testing.T) {
	m := render(t, "config/samples")
	if n := len(m.Resources()); n < 5 {
		t.Errorf("%d sample objects rendered, want at least 5", n)
	}
}
