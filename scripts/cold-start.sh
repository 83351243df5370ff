#!/usr/bin/env bash
# Cold start against CUB, on the GPU machine: each run is a fresh process that opens the GPU and computes its
# first 2^20-element f32 sum (examples/first_sum.rs, benches/cub/cub_first_sum.cu), timed whole with
# `date +%s%N` around it (process start, dynamic linking and teardown count) and by the program itself.
#
#   bash scripts/cold-start.sh [OUR_BINARY]    from the repo root; OUR_BINARY defaults to
#                                              target/device-pack/examples/first_sum; REPS=7 processes per
#                                              program and configuration
#   bash scripts/cold-start.sh --summarize LOG the table from a log written earlier (no GPU needed)
#
# Configurations: cold (CUDA_CACHE_DISABLE=1), warm (CUDA_CACHE_PATH=<temp dir> after one priming run per
# program, logged as warm-prime), ptx-cold (ours only: CUDA_CACHE_DISABLE=1 REDUCE_HOST_FORCE_PTX=1).
# The CUB program is built with nvcc into a temp dir (sm_$CUB_ARCH SASS only, CUB_ARCH=90); without nvcc only
# ours is measured. Raw per-run lines go to $OUT/cold-start.log and the table also to $OUT/cold-start.md when
# OUT is set. Exit status 1 when any run or the CUB build failed (their output is printed), 2 on usage errors.
set -euo pipefail

# The markdown table from a log of lines
#   config=C program=P rep=R rc=RC wall_ms=W | <the program's output>
summarize() {
    python3 - "$1" <<'PY'
import re, statistics, sys

rows, infos, failed = {}, {}, 0
for line in open(sys.argv[1]):
    head, _, out = line.rstrip("\n").partition(" | ")
    f = dict(kv.split("=", 1) for kv in head.split())
    if f.get("rc") != "0" or "result=correct" not in out:
        failed += 1
        continue
    got = dict(re.findall(r"\b(open_ms|sum_ms|total_ms)=([0-9.]+)", out))
    r = rows.setdefault((f["config"], f["program"]), {"wall": [], "open_ms": [], "sum_ms": [], "total_ms": []})
    r["wall"].append(float(f["wall_ms"]))
    for k, v in got.items():
        r[k].append(float(v))
    m = re.search(r"\binfo=(.*)$", out)
    if m:
        infos.setdefault((f["config"], f["program"]), set()).add(m.group(1))

med = lambda v: f"{statistics.median(v):.1f}" if v else "-"
print("| config | program | runs | process wall ms: median | min | max | open_ms (median) | sum_ms (median) | total_ms (median) |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for (config, program), r in rows.items():
    w = r["wall"]
    print(f"| {config} | {program} | {len(w)} | {med(w)} | {min(w):.1f} | {max(w):.1f} | "
          f"{med(r['open_ms'])} | {med(r['sum_ms'])} | {med(r['total_ms'])} |")
print()
ratios = [("cold", "ours", "cold", "cub"), ("warm", "ours", "warm", "cub"), ("ptx-cold", "ours", "cold", "cub")]
for a_cfg, a_prog, b_cfg, b_prog in ratios:
    a, b = rows.get((a_cfg, a_prog)), rows.get((b_cfg, b_prog))
    if a and b:
        label = f"{a_cfg}" if a_cfg == b_cfg else f"{a_cfg} (ours) / {b_cfg} (CUB)"
        ratio = statistics.median(a["wall"]) / statistics.median(b["wall"])
        print(f"- ratio ours/CUB of the median process wall time, {label}: {ratio:.2f}x")
for (config, program), seen in infos.items():
    for info in sorted(seen):
        print(f"- {config} {program}: info={info}")
if failed:
    print(f"- {failed} failed run(s) left out of the table")
PY
}

if [ "${1:-}" = "--summarize" ]; then
    [ $# -eq 2 ] || { echo "usage: $0 --summarize LOG" >&2; exit 2; }
    summarize "$2"
    exit 0
fi

ours=${1:-target/device-pack/examples/first_sum}
reps=${REPS:-7}
cub_arch=${CUB_ARCH:-90}
[ -x "$ours" ] || { echo "cold-start: $ours is not an executable (build it with ../shared/tools/device-pack --examples)" >&2; exit 2; }
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "cold-start: REPS must be a positive integer, got '$reps'" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
log=${OUT:+$OUT/cold-start.log}
log=${log:-$tmp/cold-start.log}
: >"$log"
status=0

cub=""
if command -v nvcc >/dev/null; then
    echo "building the CUB program: nvcc $(nvcc --version | grep -o 'release [0-9.]*' || true), sm_$cub_arch SASS" >&2
    if nvcc -O3 -std=c++17 -gencode "arch=compute_$cub_arch,code=sm_$cub_arch" -o "$tmp/cub_first_sum" \
        benches/cub/cub_first_sum.cu >"$tmp/nvcc.log" 2>&1; then
        cub=$tmp/cub_first_sum
    else
        echo "cold-start: building the CUB program failed; measuring ours only:" >&2
        cat "$tmp/nvcc.log" >&2
        status=1
    fi
else
    echo "cold-start: nvcc is not on the PATH; measuring ours only" >&2
fi

# run_one CONFIG PROGRAM REP BINARY [VAR=VALUE...]: one fresh process in a clean CUDA environment plus the
# given variables; appends its line to the log.
run_one() {
    local config=$1 program=$2 rep=$3 bin=$4 t0 t1 ns out rc line
    shift 4
    t0=$(date +%s%N)
    if out=$(env -u CUDA_CACHE_DISABLE -u CUDA_CACHE_PATH -u REDUCE_HOST_FORCE_PTX "$@" "$bin" 2>&1); then
        rc=0
    else
        rc=$?
    fi
    t1=$(date +%s%N)
    ns=$((t1 - t0))
    line=$(printf 'config=%s program=%s rep=%s rc=%s wall_ms=%d.%03d | %s' "$config" "$program" "$rep" "$rc" \
        $((ns / 1000000)) $((ns / 1000 % 1000)) "$(printf '%s' "$out" | tr '\n' ' ')")
    echo "$line" >>"$log"
    echo "$line" >&2
    if [ "$rc" != 0 ] || [[ "$out" != *result=correct* ]]; then
        printf 'cold-start: %s %s run %s failed (exit %s):\n%s\n' "$config" "$program" "$rep" "$rc" "$out" >&2
        status=1
    fi
}

# each CONFIG [VAR=VALUE...]: REPS processes of each program, interleaved.
each() {
    local config=$1 rep
    shift
    for ((rep = 1; rep <= reps; rep++)); do
        run_one "$config" ours "$rep" "$ours" "$@"
        [ -z "$cub" ] || run_one "$config" cub "$rep" "$cub" "$@"
    done
}

each cold CUDA_CACHE_DISABLE=1
cache=$tmp/jit-cache
mkdir -p "$cache"
run_one warm-prime ours 0 "$ours" CUDA_CACHE_PATH="$cache"
[ -z "$cub" ] || run_one warm-prime cub 0 "$cub" CUDA_CACHE_PATH="$cache"
each warm CUDA_CACHE_PATH="$cache"
for ((rep = 1; rep <= reps; rep++)); do
    run_one ptx-cold ours "$rep" "$ours" CUDA_CACHE_DISABLE=1 REDUCE_HOST_FORCE_PTX=1
done

{
    echo "## Cold start: fresh process, GPU open + first 2^20-element f32 sum ($reps runs each)"
    echo
    echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,persistence_mode --format=csv,noheader 2>&1 | head -n 1)"
    echo "- CUDA_MODULE_LOADING: ${CUDA_MODULE_LOADING:-unset (driver default, lazy)}"
    echo "- binary sizes: ours $(stat -c %s "$ours") bytes ($ours)$([ -z "$cub" ] || echo ", CUB $(stat -c %s "$cub") bytes (sm_$cub_arch SASS)")"
    echo
    summarize "$log"
} | tee ${OUT:+"$OUT/cold-start.md"}
[ -z "${OUT:-}" ] || echo "raw lines: $log" >&2
exit $status
