package controllers_test

import (
	"os"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/yaml"

	"github.com/paywarden/paywarden/api/v1alpha1"
	"github.com/paywarden/paywarden/controllers"
)

// TestOpenWebhookEventsSelectsWhatIsNotDone: the cache's selection of
// WebhookEvents keeps exactly the events IsDone says something will still be
// done with, for every result the CRD admits and for none at all, and the
// CRD makes status.result selectable (else the API server refuses the
// watch).
func TestOpenWebhookEventsSelectsWhatIsNotDone(t *testing.T) {
	raw, err := os.ReadFile("../config/crd/bases/payments.paywarden.dev_webhookevents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions, want 1", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if !slices.ContainsFunc(v.SelectableFields, func(f apiextensionsv1.SelectableField) bool { return f.JSONPath == "."+v1alpha1.FieldResult }) {
		t.Errorf("selectable fields %+v lack .%s", v.SelectableFields, v1alpha1.FieldResult)
	}
	results := []v1alpha1.EventResult{""}
	for _, e := range v.Schema.OpenAPIV3Schema.Properties["status"].Properties["result"].Enum {
		results = append(results, v1alpha1.EventResult(string(e.Raw[1:len(e.Raw)-1])))
	}
	if len(results) < 8 {
		t.Fatalf("results %q: the CRD's enum was not read", results)
	}
	sel := controllers.OpenWebhookEvents()
	for _, r := range results {
		if open := sel.Matches(fields.Set{v1alpha1.FieldResult: string(r)}); open == r.IsDone() {
			t.Errorf("result %q: selected into the cache %v, done %v", r, open, r.IsDone())
		}
	}
}
