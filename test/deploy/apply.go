package deploy

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/resmap"

	"github.com/paywarden/paywarden/internal/localnet"
)

// FieldManager is the field manager of what the tests apply, as kubectl's
// is "kubectl".
const FieldManager = "paywarden-deploy-test"

// Objects converts a kustomize render into objects.
func Objects(m resmap.ResMap) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Apply applies objs server-side, as `kubectl apply --server-side` does:
// CustomResourceDefinitions first (and waits until they serve), then
// Namespaces, then the rest.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	rank := func(u *unstructured.Unstructured) int {
		switch u.GetKind() {
		case "CustomResourceDefinition":
			return 0
		case "Namespace":
			return 1
		}
		return 2
	}
	for pass := 0; pass < 3; pass++ {
		for _, u := range objs {
			if rank(u) != pass {
				continue
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u.DeepCopy()),
				client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
				return fmt.Errorf("apply %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
			if pass == 0 {
				if err := waitEstablished(ctx, c, u.GetName()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func waitEstablished(ctx context.Context, c client.Client, name string) error {
	return localnet.Poll(ctx, 30*time.Second, func(ctx context.Context) error {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		if err := c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, cond := range conds {
			if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("CRD %s not established", name)
	})
}

// Decode converts an applied object into a typed one.
func Decode[T any](u *unstructured.Unstructured) (*T, error) {
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return out, nil
}
