#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) and the kubectl
# the kubectl paywarden suite runs, from Go modules, into $1 (default
# bin/k8s). A stamp file records the pinned versions; when it matches and
# every binary is there, nothing is built.
#
# The three are built by one `go build`, so the packages they share are
# compiled once and one binary's link overlaps the others' compiles (on two
# cores that is about a minute of a cold build).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin/k8s}
mkdir -p "$out"
out=$(cd "$out" && pwd)

stamp=$(cd "$here" && go list -m -f '{{.Path}}@{{.Version}}' k8s.io/kubernetes go.etcd.io/etcd/server/v3 | tr '\n' ' ')
if [[ -f $out/.version && "$(cat "$out/.version")" == "$stamp" && -x $out/kube-apiserver && -x $out/etcd && -x $out/kubectl ]]; then
  exit 0
fi

echo "building envtest control plane and kubectl ($stamp) into $out; a cold build takes several minutes" >&2
rm -f "$out/.version"
cd "$here"
export CGO_ENABLED=0
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
tmp=$(mktemp -d "$out/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# etcd's main package is go.etcd.io/etcd/server/v3, which go build names
# "server". The version stamp is the release's, as in a release build:
# kubectl and kube-apiserver report it (kubectl version, /version); etcd has
# no such variable and the flag leaves it alone.
go build -trimpath -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version" -o "$tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kubectl
mv "$tmp/kube-apiserver" "$out/kube-apiserver"
mv "$tmp/server" "$out/etcd"
mv "$tmp/kubectl" "$out/kubectl"
echo "$stamp" > "$out/.version"
