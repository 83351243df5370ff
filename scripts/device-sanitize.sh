#!/usr/bin/env bash
# Runs every GPU test binary under all four compute-sanitizer tools (memcheck, racecheck, synccheck,
# initcheck) on a GPU machine, with no time limit: inputs are capped instead (REDUCE_TEST_MAX_N, the soak's
# call count, the property tests' case count). Each binary's tests are split into shards that run in
# parallel, so the slow tools finish; every test of every binary runs under every tool.
#   bash scripts/device-sanitize.sh [BINARY...]      (default: every binary in target/device-pack/tests)
# Expects the packed test binaries in target/device-pack/tests (see ../shared/tools/device-pack). One log
# per shard run goes to $SANITIZE_LOGS (/tmp/sanitize), a line per run as it ends to
# $OUT/sanitize-lines.txt and the summary to $OUT/sanitize-summary.txt. Exit status 1 if any run fails.
set -uo pipefail
summary=${OUT:-/tmp}
out=${SANITIZE_LOGS:-/tmp/sanitize}
mkdir -p "$out" "$summary"
export REDUCE_TEST_MAX_N=${REDUCE_TEST_MAX_N:-5000}
export REDUCE_SOAK_CALLS=${REDUCE_SOAK_CALLS:-300}
export REDUCE_PROPTEST_CASES=${REDUCE_PROPTEST_CASES:-24}
dir=target/device-pack/tests
jobs=${SANITIZE_JOBS:-$(($(nproc) - 2))}
shards=${SANITIZE_SHARDS:-6}
if [ $# -gt 0 ]; then bins=("$@"); else bins=($(ls "$dir")); fi

# One line per (tool, binary, shard): the shard's test names, exact. Two-GPU tests need a second device.
plan=$(mktemp)
for bin in "${bins[@]}"; do
    names=$("$dir/$bin" --list --include-ignored 2>/dev/null | sed -n 's/: test$//p' | grep -v '^two_devices' || true)
    [ -n "$names" ] || continue
    for tool in memcheck racecheck synccheck initcheck; do
        echo "$names" | awk -v n="$shards" -v t="$tool" -v b="$bin" \
            '{ s[NR % n] = s[NR % n] " " $0 } END { for (i in s) print t, b, i s[i] }'
    done
done >"$plan"

run_one() {
    local tool=$1 bin=$2 shard=$3
    shift 3
    local log="$out/$tool-$bin-$shard.log"
    compute-sanitizer --tool "$tool" --error-exitcode 97 "$dir/$bin" --include-ignored --test-threads=1 \
        --exact "$@" >"$log" 2>&1
    local rc=$?
    echo "$tool $bin $shard exit $rc | $(grep -E 'SUMMARY' "$log" | tail -n 1) | $(grep -E '^test result' "$log" | tail -n 1)"
}
export -f run_one
export out dir
start=$(date +%s)
xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _ <"$plan" | tee "$summary/sanitize-lines.txt" | grep -v ' exit 0 '
{
    echo "compute-sanitizer, $(wc -l <"$plan") shard runs, $(($(date +%s) - start)) s, REDUCE_TEST_MAX_N=$REDUCE_TEST_MAX_N REDUCE_SOAK_CALLS=$REDUCE_SOAK_CALLS REDUCE_PROPTEST_CASES=$REDUCE_PROPTEST_CASES"
    for tool in memcheck racecheck synccheck initcheck; do
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
