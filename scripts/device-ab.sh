#!/usr/bin/env bash
# One device call that measures a kernel change against main and checks it, inside the 10-minute limit, so
# that a session whose machine may start only once loses nothing to a second call. Runs on the GPU machine,
# from the repo root:
#   BUDGET=585 bash scripts/device-ab.sh MODE
# Expects (built here, carried): target/device-pack.tar.xz holding the change's test binaries (device-pack
# --tests) and, in device-pack/benches, each compared bench twice as NAME-cand and NAME-main (the stripped
# binaries of `cargo bench --bench NAME --no-run` on each side); optionally target/dcall/cccl.tgz, an
# `include` folder of CCCL ≥ 3.5 headers (the `cuda-cccl` wheel), for CUB's DeviceTopK rows.
# MODE: `all` (topk at 2^24 and toolbox, each side; the whole suite and the top-k tests with the sample,
# alone; then the sanitizer over the binaries in $CHANGED, which run the changed kernels, for the time
# left; SANITIZE_DONE as in device-sanitize.sh skips runs an earlier call finished), `short` (benches, then
# the suite), `tiny` (topk only), `select` (toolbox from every build in $SIDES, each also at the block
# sizes in $TOOLBOX_SELECT_THREADS, $ROUNDS times, with the benches in $PAIR_BENCHES from each build in
# $PAIR_SIDES; the device-wide stats bench from each build in
# $STATS_SIDES; then the suite (not with SKIP_TESTS=1), the binaries in $EXTRA_TESTS alone, and the
# sanitizer over the compaction binaries, or those in $CHANGED_SELECT, every binary if it is set empty),
# `goals` (every issue goal's bench from one build, see its case below: GOALS="toolbox:3 sweep segmented
# topk stats row_topk", TORCH="stats row_topk" to keep those benches' torch rows), `sanitize` (every
# binary under all four tools). Each step's log goes to $OUT/r/STEP/log.txt, its exit
# status and seconds to $OUT/r/steps.txt; everything comes back as $OUT/all.tgz (a call returns at most 8
# files).
# A step that would pass the budget is cut short (timeout) or skipped, and says so.
set -uo pipefail
mode=${1:-all}
case "$mode" in
all | short | tiny | select | goals | sanitize) ;;
*) echo "usage: BUDGET=SECONDS bash scripts/device-ab.sh all|short|tiny|select|goals|sanitize" >&2 && exit 2 ;;
esac
t0=$(date +%s)
budget=${BUDGET:-585}
left() { echo $((budget - ($(date +%s) - t0))); }
R=$OUT/r
mkdir -p "$R"
# PACK_READY=1: an earlier run of this script in the same call unpacked it.
[ -n "${PACK_READY:-}" ] || tar -xJf target/device-pack.tar.xz -C target
# Extra bench builds carried beside the pack (target/dcall/benches/NAME-SIDE.xz: a bench built alone).
B=target/device-pack/benches
for f in target/dcall/benches/*.xz; do
    [ -f "$f" ] && xz -dc "$f" >"$B/$(basename "$f" .xz)" && chmod +x "$B/$(basename "$f" .xz)"
done
if [ -f target/dcall/cccl.tgz ]; then
    tar -xzf target/dcall/cccl.tgz -C /tmp && export CCCL_INCLUDE=/tmp/include
fi
# The benches' torch rows are left out (a python3 that fails): they take minutes and do not change with ours.
mkdir -p /tmp/nopy && printf '#!/bin/sh\nexit 1\n' >/tmp/nopy/python3 && chmod +x /tmp/nopy/python3
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem,temperature.gpu --format=csv \
    >"$R/gpu.txt" 2>&1
run() {
    local step=$1 limit=$2 l s rc
    shift 2
    l=$(left)
    mkdir -p "$R/$step"
    if [ "$l" -lt 25 ] || [ "$limit" -lt 1 ]; then echo "$step skipped (time)" >>"$R/steps.txt"; return; fi
    [ "$limit" -gt "$l" ] && limit=$l
    s=$(date +%s)
    (export OUT=$R/$step; timeout "$limit" "$@") >"$R/$step/log.txt" 2>&1
    rc=$?
    echo "$step rc=$rc $(($(date +%s) - s))s" >>"$R/steps.txt"
}
# The test binaries that run the changed kernels (`bash scripts/ptx-same.sh main` lists those kernels).
CHANGED=${CHANGED:-gpu_select gpu_select_types gpu_topk gpu_segmented_topk}
T=target/device-pack/tests
# The benches named in $TORCH (say "stats row_topk") keep their torch rows.
bench() {
    local path=/tmp/nopy:$PATH
    case " ${TORCH:-} " in *" $1 "*) path=$PATH ;; esac
    run "$1-$2${ROUND:-}" "$3" env PATH="$path" "$B/$1-$2" --bench "${@:4}"
}
# Bench $1 from each build in $SIDES (NAME-SIDE in the pack; default the change's, then main's), each with at
# most $2 seconds and the arguments after.
SIDES=${SIDES:-cand main}
pair() {
    local name=$1 limit=$2 v
    shift 2
    for v in $SIDES; do bench "$name" $v "$limit" "$@"; done
}
topk_pair() { pair topk "$1" --sizes 16777216; }
# The top-k test binaries.
TOPK_TESTS="gpu_topk gpu_segmented_topk"
# The top-k tests with the sample wherever it may run (REDUCE_HOST_TOPK_SAMPLE=1), each binary alone.
sampled() {
    for t in $TOPK_TESTS; do
        run "$t-sampled" 60 env REDUCE_HOST_TOPK_SAMPLE=1 "$T/$t" --include-ignored --test-threads=4
    done
}
# Each kernel's time in one device-wide `max_k` of 2^24 f32 (the `max_k` example, kept in the pack), at each
# k in $NCU_KS, at the GPU's own clocks, after the example's own wall clock of a call: where the select's
# time goes beside its one read.
ncu_topk() {
    for k in ${NCU_KS:-64 1024 65536}; do
        echo "=== k = $k"
        target/device-pack/examples/max_k 16777216 "$k" | grep -E '^time|correct|WRONG'
        ncu --clock-control none --launch-count 60 --metrics gpu__time_duration.sum target/device-pack/examples/max_k 16777216 "$k" |
            grep -E '^  [a-z_0-9]+.*\(|gpu__time_duration|correct|WRONG'
    done
}
case "$mode" in
all)
    # The first bench of a machine also compiles CUB's comparator (about 35 s).
    topk_pair 120
    pair toolbox 60
    # Alone: beside 12 sanitizer jobs (2026-12-06) the suite passed 200 s (94 s alone) and lost its log,
    # which run.sh writes at the end. run.sh runs the soak alone after the others.
    run tests 150 bash target/device-pack/run.sh tests
    sampled
    run sanitize-changed $(($(left) - 15)) env SANITIZE_JOBS=15 bash scripts/device-sanitize.sh $CHANGED
    ;;
short)
    topk_pair 110
    bench toolbox cand 110
    run tests 150 bash target/device-pack/run.sh tests
    ;;
tiny)
    topk_pair 100
    ;;
select)
    # Compaction builds side by side, each also at the block sizes in TOOLBOX_SELECT_THREADS; then the
    # suite alone and the sanitizer over the compaction binaries.
    export TOOLBOX_SELECT_THREADS=${TOOLBOX_SELECT_THREADS:-256,384}
    # PAIR_BENCHES (say "segmented row_topk"): those benches from each build in PAIR_SIDES (NAME-SIDE in
    # the pack), in each round too.
    for i in $(seq "${ROUNDS:-1}"); do
        ROUND=-r$i pair toolbox 100
        for b in ${PAIR_BENCHES:-}; do SIDES=$PAIR_SIDES ROUND=-r$i pair "$b" 100; done
    done
    # Optionally the device-wide statistics from other builds (STATS_SIDES: stats-SIDE in the pack).
    if [ -n "${STATS_SIDES:-}" ]; then SIDES=$STATS_SIDES pair stats 100 --rows none; fi
    # SKIP_TESTS=1 leaves the suite out (an earlier call ran it on the same pack); CHANGED_SELECT= (empty)
    # sanitizes every binary.
    [ -z "${SKIP_TESTS:-}" ] && run tests 150 bash target/device-pack/run.sh tests
    # EXTRA_TESTS: test binaries of the pack run alone, at full size (a change's own builds, say).
    for t in ${EXTRA_TESTS:-}; do run "$t" 60 "$T/$t" --include-ignored; done
    CHANGED=${CHANGED_SELECT-gpu_select gpu_select_types}
    run sanitize-changed $(($(left) - 15)) env SANITIZE_JOBS=15 bash scripts/device-sanitize.sh $CHANGED
    ;;
goals)
    # Every issue goal's bench from one build (NAME-$SIDE in the pack), in the order of $GOALS, each item
    # NAME[:ROUNDS]: sweep (reduce --sweep), loops (reduce --loops), topk (2^28), topk24 (2^24), toolbox,
    # segmented, stats, row_topk, tests (the suite), topk_tests (the top-k binaries alone), sampled (the top-k tests with the
    # sample), ncu_topk (see `ncu_topk`), ncu_detail (every section of ncu's full set for the kernels
    # $NCU_KERNELS matches, their first $NCU_COUNT launches), sanitize (the binaries in $CHANGED, for the time
    # left).
    # NAME@SIDE runs NAME-SIDE instead of NAME-$SIDE. Each run of a bench logs to a folder of its own
    # (NAME-SIDE-rK, K counting that bench's runs in this call).
    declare -A seen
    for item in ${GOALS:-tests toolbox:3 sweep segmented}; do
        name=${item%%:*} n=1 side=${SIDE:-main}
        [ "$name" != "$item" ] && n=${item#*:}
        case "$name" in *@*) side=${name#*@} name=${name%%@*} ;; esac
        for i in $(seq "$n"); do
            seen[$name@$side]=$((${seen[$name@$side]:-0} + 1))
            r=-r${seen[$name@$side]}
            case "$name" in
            sweep) ROUND=$r bench reduce "$side" 240 --sweep ;;
            loops) ROUND=$r bench reduce "$side" 120 --loops ;;
            topk) ROUND=$r bench topk "$side" 240 --sizes 268435456 ;;
            topk24) ROUND=$r bench topk "$side" 150 --sizes 16777216 ;;
            tests) run tests 150 bash target/device-pack/run.sh tests ;;
            sampled) sampled ;;
            topk_tests) for t in $TOPK_TESTS; do run "$t" 90 "$T/$t" --include-ignored; done ;;
            ncu_topk) export -f ncu_topk && run ncu-topk 150 bash -c ncu_topk ;;
            ncu_detail) run ncu-detail 120 ncu --set full -k "regex:${NCU_KERNELS:-topk_(sample|pick)_f32}" \
                --launch-count "${NCU_COUNT:-3}" --page details target/device-pack/examples/max_k 16777216 64 ;;
            # SANITIZE_ENV (say "REDUCE_HOST_TOPK_SAMPLE=1 REDUCE_TEST_MAX_N=1100000"): settings for this step only.
            sanitize) run sanitize-changed $(($(left) - 15)) env SANITIZE_JOBS=15 ${SANITIZE_ENV:-} \
                bash scripts/device-sanitize.sh $CHANGED ;;
            *) ROUND=$r bench "$name" "$side" 200 ;;
            esac
        done
    done
    ;;
sanitize)
    run sanitize 560 env SANITIZE_JOBS=15 bash scripts/device-sanitize.sh
    ;;
esac
tar -czf "$OUT/all.tgz" -C "$OUT" r
cat "$R/steps.txt"
[ -f "$R/tests/log.txt" ] && grep -h '^=== ' "$R/tests/log.txt"
exit 0
