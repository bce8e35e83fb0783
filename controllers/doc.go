// Package controllers holds paywarden's reconcilers: one file per controller.
// The RBAC markers here are the manager's permissions; controller-gen turns
// them into config/rbac/role.yaml.
package controllers

// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments;paymentproviders;webhookevents,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=payments.paywarden.dev,resources=payments/status;paymentproviders/status;webhookevents/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
