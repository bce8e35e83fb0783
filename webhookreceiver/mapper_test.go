package webhookreceiver

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/internal/scheme"
)

// Every paywarden kind maps without the API server: the receiver registers
// field indexes on them before it starts, and a kind that needs discovery
// would stop the receiver from starting during an API-server outage.
func TestRESTMapperKnowsEveryKindWithoutDiscovery(t *testing.T) {
	// Nothing listens here: any discovery call fails.
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for kind, typ := range scheme.New().KnownTypes(v1alpha1.GroupVersion) {
		// The group's own kinds, not the meta options registered with it.
		if typ.PkgPath() != reflect.TypeFor[v1alpha1.Payment]().PkgPath() || strings.HasSuffix(kind, "List") {
			continue
		}
		gvk := v1alpha1.GroupVersion.WithKind(kind)
		n++
		mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s needs discovery: %v", gvk.Kind, err)
			continue
		}
		if want := strings.ToLower(gvk.Kind) + "s"; mapping.Resource.Resource != want {
			t.Errorf("%s maps to %q, want %q", gvk.Kind, mapping.Resource.Resource, want)
		}
	}
	if n < 4 {
		t.Fatalf("only %d paywarden kinds in the scheme", n)
	}
}
