package config_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/controlplane"
)

// renderedCRDs are the CustomResourceDefinitions a kustomize directory renders,
// by kind.
func renderedCRDs(t *testing.T, dir string) map[string]apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	out := map[string]apiextensionsv1.CustomResourceDefinition{}
	m := render(t, dir)
	for _, r := range m.Resources() {
		if r.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := decode[apiextensionsv1.CustomResourceDefinition](t, m, "CustomResourceDefinition", r.GetName())
		out[crd.Spec.Names.Kind] = *crd
	}
	return out
}

// Every CRD controller-gen writes is shipped: a generated file left out of
// config/crd/kustomization.yaml installs a manager whose informer for that
// kind never syncs (the Refund CRD was missing once).
func TestEveryGeneratedCRDIsShipped(t *testing.T) {
	root, err := controlplane.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "config/crd/bases/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated CRDs in config/crd/bases (%v)", err)
	}
	for _, dir := range []string{"config/crd", "config/default"} {
		shipped := renderedCRDs(t, dir)
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := yaml.Unmarshal(raw, &crd); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if _, ok := shipped[crd.Spec.Names.Kind]; !ok {
				t.Errorf("%s renders no CRD for %s (generated in %s): add it to config/crd/kustomization.yaml",
					dir, crd.Spec.Names.Kind, filepath.Base(f))
			}
		}
	}
}

// Every kind of the API group the manager and the receiver know (the scheme
// they watch through) has its CRD in what `make deploy` applies.
func TestEveryKindHasACRDInTheDefaultOverlay(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	shipped := renderedCRDs(t, "config/default")
	var kinds []string
	for gvk := range s.AllKnownTypes() {
		if gvk.Group != v1alpha1.GroupVersion.Group || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if _, isList := s.AllKnownTypes()[gvk.GroupVersion().WithKind(gvk.Kind+"List")]; !isList {
			continue // options and other non-root types
		}
		kinds = append(kinds, gvk.Kind)
	}
	sort.Strings(kinds)
	if len(kinds) < 4 {
		t.Fatalf("the scheme knows only %v", kinds)
	}
	for _, k := range kinds {
		crd, ok := shipped[k]
		if !ok {
			t.Errorf("config/default has no CRD for %s", k)
			continue
		}
		if crd.Spec.Group != v1alpha1.GroupVersion.Group {
			t.Errorf("CRD for %s is in group %s", k, crd.Spec.Group)
		}
	}
	if len(shipped) != len(kinds) {
		t.Errorf("config/default renders %d CRDs for %d kinds (%v)", len(shipped), len(kinds), kinds)
	}
}
