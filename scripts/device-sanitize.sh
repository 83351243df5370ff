#!/usr/bin/env bash
# Runs every GPU test binary under all four compute-sanitizer tools (memcheck, racecheck, synccheck,
# initcheck) on a GPU machine, with no time limit: inputs are capped instead (REDUCE_TEST_MAX_N, the soak's
# call count, the property tests' case count). Each binary's tests are split into shards that run in
# parallel, so the slow tools finish; every test of every binary runs under every tool, but the two-GPU
# tests and the missing-kernel test (see below).
#   bash scripts/device-sanitize.sh [BINARY...]      (default: every binary in target/device-pack/tests)
# Expects the packed test binaries in target/device-pack/tests (see ../shared/tools/device-pack). One log
# per shard run goes to $SANITIZE_LOGS (/tmp/sanitize), a line per run as it ends to
# $OUT/sanitize-lines.txt and the summary to $OUT/sanitize-summary.txt. Exit status 1 if any run fails.
# SANITIZE_TOOLS (say "racecheck memcheck") runs those tools, in that order; SANITIZE_TESTS (an extended
# regex) only the tests whose names match.
set -uo pipefail
summary=${OUT:-/tmp}
out=${SANITIZE_LOGS:-/tmp/sanitize}
mkdir -p "$out" "$summary"
export REDUCE_TEST_MAX_N=${REDUCE_TEST_MAX_N:-5000}
export REDUCE_SOAK_CALLS=${REDUCE_SOAK_CALLS:-300}
export REDUCE_PROPTEST_CASES=${REDUCE_PROPTEST_CASES:-24}
export REDUCE_SOAK_UNDER_SANITIZER=1
dir=target/device-pack/tests
if [ ! -d "$dir" ]; then
    echo "device-sanitize: no test binaries in $dir; build and pack them first (../shared/tools/device-pack --tests)" >&2
    exit 2
fi
jobs=${SANITIZE_JOBS:-$(($(nproc) - 2))}
shards=${SANITIZE_SHARDS:-6}
tools=${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}
if [ $# -gt 0 ]; then bins=("$@"); else bins=($(ls "$dir")); fi

# One line per (tool, binary, shard): the shard's test names, exact. Two-GPU tests need a second device.
plan=$(mktemp)
for bin in "${bins[@]}"; do
    # The missing-kernel test asks the driver for a kernel that is not there, on purpose: memcheck counts the
    # CUDA_ERROR_NOT_FOUND it answers as an API error. It touches no device memory.
    names=$("$dir/$bin" --list --include-ignored 2>/dev/null | sed -n 's/: test$//p' |
        grep -v -e '^two_devices' -e '^an_operator_the_kernel_crate_did_not_export' |
        grep -E "${SANITIZE_TESTS:-.}" || true)
    [ -n "$names" ] || continue
    # gpu_types launches thousands of small kernels per test (every type, offset and strategy): more shards.
    n=$shards
    [ "$bin" = gpu_types ] && n=$((shards * 2))
    for tool in $tools; do
        echo "$names" | awk -v n="$n" -v t="$tool" -v b="$bin" \
            '{ s[NR % n] = s[NR % n] " " $0 } END { for (i in s) print t, b, i s[i] }'
    done
done >"$plan"
# Runs a previous call already finished clean (its sanitize-lines.txt as SANITIZE_DONE) are not repeated.
if [ -n "${SANITIZE_DONE:-}" ] && [ -f "$SANITIZE_DONE" ]; then
    # Lines "TOOL BINARY SHARD exit 0 ..." (the end of the line may be missing). An empty list skips nothing
    # (awk's NR == FNR would take the plan itself for the list).
    grep -E ' exit 0( |$)' "$SANITIZE_DONE" | awk '{ print $1, $2, $3 }' >"$plan.done"
    if [ -s "$plan.done" ]; then
        awk 'NR == FNR { done[$1 " " $2 " " $3] = 1; next } !(($1 " " $2 " " $3) in done)' "$plan.done" "$plan" >"$plan.left"
        mv "$plan.left" "$plan"
    fi
fi
# With several GPUs (SANITIZE_GPUS=2), the runs are dealt out among them.
awk -v g="${SANITIZE_GPUS:-1}" '{ print NR % g, $0 }' "$plan" >"$plan.gpu" && mv "$plan.gpu" "$plan"

run_one() {
    export CUDA_VISIBLE_DEVICES=$1
    local tool=$2 bin=$3 shard=$4
    shift 4
    local log="$out/$tool-$bin-$shard.log"
    # gpu_types checks nine types with the same kernel bodies: under the slow tools its inputs stop just
    # past one block (1025 elements); the multi-block paths run under every tool in the f32 binaries.
    [ "$bin" = gpu_types ] && export REDUCE_TEST_MAX_N=${GPU_TYPES_MAX_N:-1100}
    # The reproducible sum's chunk is 8192 elements: past four chunks, so that an offsets segment is long
    # enough for the block (a warp sums up to four alone).
    [ "$bin" = gpu_reproducible ] && export REDUCE_TEST_MAX_N=${GPU_REPRO_MAX_N:-34000}
    compute-sanitizer --tool "$tool" --error-exitcode 97 "$dir/$bin" --include-ignored --test-threads=1 \
        --exact "$@" >"$log" 2>&1
    local rc=$?
    # A binary that makes no CUDA call (the CPU tests) has nothing to check.
    if grep -q 'terminated before first instrumented API call' "$log" && grep -q '^test result: ok' "$log"; then
        rc="0 (no CUDA calls)"
    fi
    echo "$tool $bin $shard exit $rc | $(grep -E 'SUMMARY' "$log" | tail -n 1) | $(grep -E '^test result' "$log" | tail -n 1)"
}
export -f run_one
export out dir
start=$(date +%s)
xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _ <"$plan" | tee "$summary/sanitize-lines.txt" | grep -v ' exit 0 '
{
    echo "compute-sanitizer, $(wc -l <"$plan") shard runs, $(($(date +%s) - start)) s, REDUCE_TEST_MAX_N=$REDUCE_TEST_MAX_N (gpu_types ${GPU_TYPES_MAX_N:-1100}) REDUCE_SOAK_CALLS=$REDUCE_SOAK_CALLS REDUCE_PROPTEST_CASES=$REDUCE_PROPTEST_CASES"
    for tool in $tools; do
        for bin in "${bins[@]}"; do
            lines=$(grep "^$tool $bin " "$summary/sanitize-lines.txt") || continue
            passed=$(echo "$lines" | sed -n 's/.*test result: [a-zA-Z]*\. \([0-9]*\) passed.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
            failed=$(echo "$lines" | sed -n 's/.* \([0-9]*\) failed.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
            errors=$(echo "$lines" | sed -n 's/.*SUMMARY: \([0-9]*\) \(error\|hazard\).*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
            bad=$(echo "$lines" | grep -vc ' exit 0 ')
            echo "$tool $bin: ${passed:-0} tests passed, ${failed:-0} failed, ${errors:-0} errors/hazards, $bad shard runs with a non-zero exit"
        done
    done
} | tee "$summary/sanitize-summary.txt"
grep -v ' exit 0 ' "$summary/sanitize-lines.txt" | while read -r tool bin shard _; do
    echo "--- $tool $bin $shard"
    grep -m 8 -E 'Invalid|Hazard|Race|ERROR|panicked|FAILED|error' "$out/$tool-$bin-$shard.log"
done
! grep -qv ' exit 0 ' "$summary/sanitize-lines.txt"
