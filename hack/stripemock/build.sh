#!/usr/bin/env bash
# Builds stripe-mock (Stripe's API mock, which embeds Stripe's OpenAPI spec and
# rejects unknown parameters and paths) from its Go module into $1 (default
# bin/stripe-mock). A stamp file records the pinned version; when it matches and the
# binary exists, nothing is rebuilt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../bin/stripe-mock}
mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")

stamp=$(cd "$here" && go list -m -f '{{.Path}}@{{.Version}}' github.com/stripe/stripe-mock)
if [[ -x $out && -f $out.version && "$(cat "$out.version")" == "$stamp" ]]; then
  exit 0
fi

echo "building stripe-mock ($stamp) into $out" >&2
rm -f "$out.version"
cd "$here"
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${stamp#*@}" -o "$out" github.com/stripe/stripe-mock
echo "$stamp" > "$out.version"
