// Package v1alpha1 holds the paywarden API: Payment, PaymentProvider and
// WebhookEvent in the payments.paywarden.dev group.
//
// +kubebuilder:object:generate=true
// +groupName=payments.paywarden.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every paywarden kind.
	GroupVersion = schema.GroupVersion{Group: "payments.paywarden.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the paywarden kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the paywarden kinds to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// AnnotationPrefix starts every annotation paywarden reads or writes.
const AnnotationPrefix = "payments.paywarden.dev/"
