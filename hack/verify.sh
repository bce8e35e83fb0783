#!/usr/bin/env bash
# Regenerates deepcopy code, CRDs, RBAC and the Helm chart into a scratch copy
# and fails when the committed files differ, or when a Go file is not
# gofmt-clean. The work
# tree is left exactly as it was.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CONTROLLER_GEN:?CONTROLLER_GEN must point at controller-gen}"

generated=(api/v1alpha1/zz_generated.deepcopy.go config/crd/bases config/rbac/role.yaml)
snap=$(mktemp -d)
trap 'rm -rf "$snap"' EXIT

# Keep the current files aside, regenerate, compare, then put them back.
for f in "${generated[@]}"; do
  if [[ -e $f ]]; then mkdir -p "$snap/old/$(dirname "$f")"; cp -r "$f" "$snap/old/$f"; fi
done
restore() {
  rm -rf config/crd/bases
  for f in "${generated[@]}"; do
    if [[ -e $snap/old/$f ]]; then rm -rf "$f"; mkdir -p "$(dirname "$f")"; cp -r "$snap/old/$f" "$f"; else rm -rf "$f"; fi
  done
}
rm -rf config/crd/bases
if ! "$CONTROLLER_GEN" object:headerFile=hack/boilerplate.go.txt paths=./api/... >"$snap/gen.log" 2>&1 ||
   ! "$CONTROLLER_GEN" rbac:roleName=paywarden-manager crd paths=./api/... paths=./controllers/... \
       output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac >>"$snap/gen.log" 2>&1; then
  restore
  cat "$snap/gen.log" >&2
  echo "verify: controller-gen failed" >&2
  exit 1
fi
for f in "${generated[@]}"; do
  if [[ -e $f ]]; then mkdir -p "$snap/new/$(dirname "$f")"; cp -r "$f" "$snap/new/$f"; fi
done
restore

status=0
if ! diff -ruN "$snap/old" "$snap/new" >"$snap/diff"; then
  echo "verify: generated files are stale; run 'make generate manifests' and commit the result:" >&2
  sed 's|'"$snap"'/old/||; s|'"$snap"'/new/||' "$snap/diff" | head -60 >&2
  status=1
fi

# The Helm chart is generated from config/ by hack/helmgen.
if ! go run ./hack/helmgen -out "$snap/chart" >"$snap/helmgen.log" 2>&1; then
  cat "$snap/helmgen.log" >&2
  echo "verify: hack/helmgen failed" >&2
  status=1
elif ! diff -ruN charts/paywarden "$snap/chart" >"$snap/chart.diff"; then
  echo "verify: charts/paywarden is stale; run 'make manifests' and commit the result:" >&2
  sed 's|'"$snap"'/chart|(generated)|' "$snap/chart.diff" | head -60 >&2
  status=1
fi

unformatted=$(git ls-files --cached --others --exclude-standard '*.go' | xargs -r gofmt -s -l)
if [[ -n $unformatted ]]; then
  echo "verify: these files are not gofmt -s clean (run 'make fmt'):" >&2
  echo "$unformatted" >&2
  status=1
fi
# No tracked file over 1 MiB: a committed binary or data dump is carried by
# every clone for ever. (A tracked file deleted in the work tree is not
# measured: it is on its way out.)
large=$(git ls-files -z | { xargs -0 -r stat --printf '%s\t%n\n' 2>/dev/null || true; } |
  awk -F'\t' '$1 > 1048576 { printf "  %s (%.1f MiB)\n", $2, $1 / 1048576 }')
if [[ -n $large ]]; then
  echo "verify: tracked files larger than 1 MiB (git rm --cached them, and ignore them in .gitignore if they are built):" >&2
  echo "$large" >&2
  status=1
fi
# Every command's binary is ignored where `go build` and `make build` leave it.
unignored=$(go list -e -f '{{if eq .Name "main"}}{{.Dir}}{{end}}' ./... | while read -r dir; do
  [[ -n $dir ]] || continue
  for f in "${dir##*/}" "bin/${dir##*/}"; do git check-ignore -q --no-index "$f" || echo "  $f"; done
done)
if [[ -n $unignored ]]; then
  echo "verify: .gitignore does not ignore these built binaries:" >&2
  echo "$unignored" >&2
  status=1
fi
# No function in controllers/ over 80 lines: a reconciler reads, calls and
# writes in short steps; what it decides belongs in internal/payment.
if ! go build -o "$snap/funclen" ./hack/funclen || ! long=$("$snap/funclen" -max 80 controllers); then
  echo "verify: functions in controllers/ over 80 lines (split them into steps):" >&2
  echo "$long" | sed 's/^/  /' >&2
  status=1
fi
exit $status
