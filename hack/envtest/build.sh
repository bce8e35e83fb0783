#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) and the kubectl
# the kubectl paywarden suite runs, from Go modules, into $1 (default
# bin/k8s). A stamp file records the pinned versions; when it matches, only
# a missing binary is built.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin/k8s}
mkdir -p "$out"
out=$(cd "$out" && pwd)

stamp=$(cd "$here" && go list -m -f '{{.Path}}@{{.Version}}' k8s.io/kubernetes go.etcd.io/etcd/server/v3 | tr '\n' ' ')
if [[ ! -f $out/.version || "$(cat "$out/.version")" != "$stamp" ]]; then
  rm -f "$out/.version" "$out/kube-apiserver" "$out/etcd" "$out/kubectl"
fi
if [[ -x $out/kube-apiserver && -x $out/etcd && -x $out/kubectl ]]; then
  exit 0
fi

echo "building envtest control plane and kubectl ($stamp) into $out; a cold build takes several minutes" >&2
cd "$here"
export CGO_ENABLED=0
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
[[ -x $out/kube-apiserver ]] || go build -trimpath -ldflags='-s -w' -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
[[ -x $out/etcd ]] || go build -trimpath -ldflags='-s -w' -o "$out/etcd" go.etcd.io/etcd/server/v3
[[ -x $out/kubectl ]] || go build -trimpath -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version" -o "$out/kubectl" k8s.io/kubernetes/cmd/kubectl
echo "$stamp" > "$out/.version"
