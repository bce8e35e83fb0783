#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) from Go modules into
# $1 (default bin/k8s). A stamp file records the pinned versions; when it matches
# and both binaries exist, nothing is rebuilt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin/k8s}
mkdir -p "$out"
out=$(cd "$out" && pwd)

stamp=$(cd "$here" && go list -m -f '{{.Path}}@{{.Version}}' k8s.io/kubernetes go.etcd.io/etcd/server/v3 | tr '\n' ' ')
if [[ -x $out/kube-apiserver && -x $out/etcd && -f $out/.version && "$(cat "$out/.version")" == "$stamp" ]]; then
  exit 0
fi

echo "building envtest control plane ($stamp) into $out; a cold build takes several minutes" >&2
rm -f "$out/.version"
cd "$here"
export CGO_ENABLED=0
go build -trimpath -ldflags='-s -w' -o "$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
go build -trimpath -ldflags='-s -w' -o "$out/etcd" go.etcd.io/etcd/server/v3
echo "$stamp" > "$out/.version"
