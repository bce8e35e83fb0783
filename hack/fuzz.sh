#!/usr/bin/env bash
# Runs the Go fuzz targets under a path prefix (default: all) for the given
# time each (default 10s). `make fuzz` runs every target long; `make test` runs
# the provider header and event parsers briefly, on top of the seed corpora
# that every plain `go test` already replays.
#   hack/fuzz.sh [fuzztime] [path-prefix]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
prefix=${2:-}
status=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "fuzz $pkg $name for $fuzztime"
  if ! go test -run='^$' -fuzz="^${name}\$" -fuzztime="$fuzztime" "$pkg" >/tmp/fuzz.$$.log 2>&1; then
    cat /tmp/fuzz.$$.log
    status=1
  fi
done < <(git ls-files --cached --others --exclude-standard "${prefix}*_test.go" | xargs grep -H -o '^func Fuzz[A-Za-z0-9_]*' | sed 's/:func /:/')
rm -f /tmp/fuzz.$$.log
exit $status
