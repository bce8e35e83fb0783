//go:build tools

// Package envtest pins the control-plane programs built by hack/envtest/build.sh.
package envtest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
