//go:build tools

// Package envtest pins the programs built by hack/envtest/build.sh: the
// control plane, and the kubectl the kubectl paywarden suite runs.
package envtest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
