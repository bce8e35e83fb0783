#!/usr/bin/env bash
# make test once make prepare has run (verify, vet, the test servers): the
# short fuzz run of every provider parser starts at the lowest CPU priority
# and runs beside the suites (make suites-run) and then the CI-sized soak
# (make soak), taking only the CPU they leave idle. Its output follows the
# soak's; any of the three failing fails the run. Interrupted or failed, the
# fuzz run is stopped with it: none is left compiling into the next run's
# make verify.
#   hack/test.sh <fuzztime> <logfile>
set -uo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:?fuzztime}
log=${2:?log file}
make=make

echo "nice -n 19 hack/fuzz.sh $fuzztime internal/provider/  (beside the suites and the soak; its output follows the soak's)"
# Its own process group (job control on while it starts), so that stopping
# it stops every go test it started; not its own session (setsid), which
# with the kernel's autogroup scheduling would give it a group's share of
# the CPU whatever its nice value.
set -m
nice -n 19 hack/fuzz.sh "$fuzztime" internal/provider/ >"$log" 2>&1 &
fuzz=$!
set +m
stop_fuzz() { kill -TERM -- "-$fuzz" 2>/dev/null; wait "$fuzz" 2>/dev/null; }
trap 'stop_fuzz; exit 130' INT TERM

$make --no-print-directory suites-run && $make --no-print-directory soak
ran=$?
if [ "$ran" != 0 ]; then
  stop_fuzz
  echo "make test: failed before the fuzz run was waited for; it was stopped"
  exit "$ran"
fi
wait "$fuzz"
fuzzed=$?
echo "make fuzz-short (beside the suites and the soak):"
cat "$log"
exit "$fuzzed"
