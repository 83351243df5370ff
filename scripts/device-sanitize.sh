#!/usr/bin/env bash
# Runs the GPU tests under compute-sanitizer on a GPU machine, inputs capped so the slow tools finish:
#   bash scripts/device-sanitize.sh [SECONDS_PER_RUN]
# Expects the packed test binaries in target/device-pack/tests (see ../shared/tools/device-pack).
set -uo pipefail
per=${1:-25}
out=${OUT:-/tmp}
export REDUCE_TEST_MAX_N=${REDUCE_TEST_MAX_N:-5000}
t=target/device-pack/tests
status=0
run() {
    local tool=$1 bin=$2; shift 2
    local log="$out/sanitize-$tool-$bin.log"
    timeout "$per" compute-sanitizer --tool "$tool" --error-exitcode 97 "$t/$bin" --include-ignored --test-threads=1 "$@" >"$log" 2>&1
    local rc=$?
    echo "$tool $bin: exit $rc ($([ $rc = 124 ] && echo 'time limit, partial') $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)) $(grep -E '^test result' "$log" | tail -n 1)"
    [ $rc = 0 ] || [ $rc = 124 ] || status=1
}
for bin in gpu_reduce gpu_seed gpu_determinism gpu_tiles gpu_histogram; do run memcheck $bin; done
run memcheck gpu_select --skip random_data
run memcheck gpu_types f32
run memcheck gpu_segmented
for tool in racecheck synccheck; do
    run $tool gpu_segmented f32
    run $tool gpu_seed
    run $tool gpu_determinism
    run $tool gpu_tiles
    run $tool gpu_histogram --skip large
    run $tool gpu_select --skip random_data
done
exit $status
