// Package controllers holds paywarden's reconcilers: one file per controller.
//
// Each reconciler carries the +kubebuilder:rbac markers of exactly what it
// (and the gateway and inbox it calls) reads and writes; controller-gen turns
// their union into config/rbac/role.yaml. There is no blanket grant: a
// reconciler that needs a new verb says so next to its code, and
// test/config's TestManagerRBACIsExact fails until the rendered role is
// reviewed. Leader election has its own namespaced Role
// (config/rbac/leader_election_role.yaml), not a marker.
package controllers
