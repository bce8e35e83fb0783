package helm_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/paywarden/paywarden/internal/controlplane"
	"github.com/paywarden/paywarden/internal/testenv"
	"github.com/paywarden/paywarden/test/deploy"
)

func root(t *testing.T) string {
	t.Helper()
	r, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// renderChart renders charts/paywarden as `helm template --namespace ns`
// does, with values over the chart's defaults.
func renderChart(t *testing.T, ns string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	ch, err := loader.Load(filepath.Join(root(t), "charts", "paywarden"))
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{Name: "paywarden", Namespace: ns, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, n := range names {
		if !strings.HasSuffix(n, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(files[n], "\n---") {
			j, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				t.Fatalf("%s does not render YAML: %v\n%s", n, err, doc)
			}
			if string(j) == "null" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(j); err != nil {
				t.Fatalf("%s: %v", n, err)
			}
			out = append(out, u)
		}
	}
	return out
}

func key(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	t.Fatalf("%s %s not rendered", kind, name)
	return nil
}

// One source of truth: with its default values and installed into
// paywarden-system, the chart renders exactly what `make deploy` applies
// (but the Namespace, which Helm's --create-namespace makes, and the keep
// policy on the CRDs).
func TestChartRendersWhatMakeDeployApplies(t *testing.T) {
	m, err := testenv.Render(root(t), "config/default")
	if err != nil {
		t.Fatal(err)
	}
	want, err := deploy.Objects(m)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*unstructured.Unstructured{}
	for _, u := range renderChart(t, testenv.SystemNamespace, nil) {
		if u.GetKind() == "CustomResourceDefinition" {
			a := u.GetAnnotations()
			if a["helm.sh/resource-policy"] != "keep" {
				t.Errorf("CRD %s is deleted with the release (and every object of its kind)", u.GetName())
			}
			delete(a, "helm.sh/resource-policy")
			u.SetAnnotations(a)
		}
		got[key(u)] = u
	}
	seen := 0
	for _, w := range want {
		if w.GetKind() == "Namespace" {
			continue
		}
		g, ok := got[key(w)]
		if !ok {
			t.Errorf("the chart does not render %s", key(w))
			continue
		}
		seen++
		if !reflect.DeepEqual(canonical(t, g), canonical(t, w)) {
			gj, _ := json.MarshalIndent(g.Object, "", " ")
			wj, _ := json.MarshalIndent(w.Object, "", " ")
			t.Errorf("%s differs:\nchart:\n%s\nconfig/default:\n%s", key(w), gj, wj)
		}
	}
	if seen != len(got) {
		t.Errorf("the chart renders %d objects, config/default %d besides its Namespace", len(got), seen)
	}
}

// canonical is an object as JSON values (numbers as float64), so int and
// int64 from two decoders compare equal.
func canonical(t *testing.T, u *unstructured.Unstructured) any {
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func deployment(t *testing.T, objs []*unstructured.Unstructured, name string) *appsv1.Deployment {
	t.Helper()
	d, err := deploy.Decode[appsv1.Deployment](find(t, objs, "Deployment", name))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestChartValues(t *testing.T) {
	objs := renderChart(t, "payments", map[string]any{
		"image":           map[string]any{"repository": "registry.example/paywarden", "tag": "v1.2.3", "pullPolicy": "IfNotPresent"},
		"bundleNamespace": "paywarden-bundles",
		"metrics":         map[string]any{"enabled": false},
		"alerts":          map[string]any{"enabled": true},
		"crds":            map[string]any{"keep": false},
		"manager":         map[string]any{"replicas": 3, "resources": map[string]any{"limits": map[string]any{"memory": "2Gi"}}},
		"receiver":        map[string]any{"replicas": 5},
	})
	for _, name := range []string{"paywarden-manager", "paywarden-receiver"} {
		d := deployment(t, objs, name)
		c := d.Spec.Template.Spec.Containers[0]
		if d.Namespace != "payments" {
			t.Errorf("%s lands in %q, want the release namespace", name, d.Namespace)
		}
		if c.Image != "registry.example/paywarden:v1.2.3" || c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("%s runs %s (%s)", name, c.Image, c.ImagePullPolicy)
		}
		if !slices.Contains(c.Args, "--bundle-namespace=paywarden-bundles") || !slices.Contains(c.Args, "--metrics-bind-address=0") {
			t.Errorf("%s args %q: want the bundle namespace and no metrics listener", name, c.Args)
		}
	}
	mgr := deployment(t, objs, "paywarden-manager")
	if *mgr.Spec.Replicas != 3 || mgr.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String() != "2Gi" {
		t.Errorf("manager: %d replicas, resources %v", *mgr.Spec.Replicas, mgr.Spec.Template.Spec.Containers[0].Resources)
	}
	if r := deployment(t, objs, "paywarden-receiver"); *r.Spec.Replicas != 5 {
		t.Errorf("receiver: %d replicas", *r.Spec.Replicas)
	}
	for _, u := range objs {
		if u.GetKind() == "Service" && strings.HasSuffix(u.GetName(), "-metrics") {
			t.Errorf("metrics disabled, yet %s is rendered", key(u))
		}
		if u.GetKind() == "CustomResourceDefinition" && u.GetAnnotations()["helm.sh/resource-policy"] != "" {
			t.Errorf("crds.keep=false, yet CRD %s is kept", u.GetName())
		}
		if ns := u.GetNamespace(); ns != "" && ns != "payments" && ns != "paywarden-bundles" {
			t.Errorf("%s lands in %q", key(u), ns)
		}
	}
	// The bundles and the ledger are read and written where they are kept;
	// the leader-election Lease stays with the pods.
	for _, name := range []string{"paywarden-manager", "paywarden-receiver-bundles"} {
		for _, kind := range []string{"Role", "RoleBinding"} {
			if ns := find(t, objs, kind, name).GetNamespace(); ns != "paywarden-bundles" {
				t.Errorf("%s %s is in %q, want the bundle namespace", kind, name, ns)
			}
		}
	}
	if ns := find(t, objs, "Role", "paywarden-leader-election").GetNamespace(); ns != "payments" {
		t.Errorf("the leader-election Role is in %q, want the release namespace", ns)
	}
	rb, err := deploy.Decode[rbacv1.RoleBinding](find(t, objs, "RoleBinding", "paywarden-manager"))
	if err != nil || len(rb.Subjects) != 1 || rb.Subjects[0].Namespace != "payments" {
		t.Errorf("the bundle RoleBinding binds %+v (%v), want the ServiceAccount of the release namespace", rb.Subjects, err)
	}
	// Alerts: Prometheus's own template text reaches the PrometheusRule as written.
	rule := find(t, objs, "PrometheusRule", "paywarden")
	b, _ := json.Marshal(rule.Object)
	if !strings.Contains(string(b), "{{ $value }}") || !strings.Contains(string(b), "{{ $labels.namespace }}") {
		t.Errorf("the PrometheusRule lost Prometheus's templates: %.400s", b)
	}
	if rule.GetNamespace() != "payments" {
		t.Errorf("the PrometheusRule is in %q", rule.GetNamespace())
	}
	for _, u := range renderChart(t, "payments", nil) {
		if u.GetKind() == "PrometheusRule" {
			t.Error("alerts are rendered by default: the PrometheusRule CRD may not be installed")
		}
	}
}

// The chart, installed server-side into a namespace of its own on an API
// server that has nothing of paywarden's, runs paywarden as the deploy test
// proves config/default does.
func TestChartRunsPaywarden(t *testing.T) {
	env, err := testenv.StartBare()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	const ns = "payments-system"
	// helm install --create-namespace
	ensure := &unstructured.Unstructured{}
	ensure.SetAPIVersion("v1")
	ensure.SetKind("Namespace")
	ensure.SetName(ns)
	objs := append([]*unstructured.Unstructured{ensure}, renderChart(t, ns, nil)...)
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			if u.GetNamespace() != ns {
				t.Fatalf("%s is not in the release namespace", key(u))
			}
		}
	}
	deploy.Prove(t, env, objs, deploy.BuildBinaries(t, env.Root, t.TempDir()))
}
