#!/usr/bin/env bash
# Whether a change leaves the kernels' machine-independent code as it was: builds kernels-gpu's PTX (with the
# `builtin` kernels, the build that reduce-host embeds) for the working tree and for BASE, and compares them
# kernel by kernel, with the names of anonymous and mangled symbols (which follow file and module names)
# numbered in order of use instead. Exit 0 when every kernel is the same, 1 when one differs.
#   bash scripts/ptx-same.sh [BASE [ARCH]]      (BASE: a commit, default HEAD; ARCH: default 90)
# What it is for: a refactor of the kernel crate (files split or moved, helpers renamed, docs) that is
# meant to change nothing can be shown to change nothing without a GPU, so the GPU runs of BASE still hold.
# It needs the kernels' nightly (scripts/setup.sh installs it); each build takes a few minutes on two cores.
set -euo pipefail
base=${1:-HEAD}
arch=${2:-90}
root=$(git rev-parse --show-toplevel)
cd "$root"
channel=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' kernels-gpu/rust-toolchain.toml 2>/dev/null || true)
channel=${channel:-nightly-2026-10-01}
scratch=$(mktemp -d)
trap 'git worktree remove --force "$scratch/base" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT
git worktree add --detach "$scratch/base" "$base" >/dev/null 2>&1
# The flags reduce-builder gives every kernel build (its PROFILE and target-cpu).
build() {
    (cd "$1/kernels-gpu" &&
        CARGO_ENCODED_RUSTFLAGS=$(printf -- '-Ctarget-cpu=sm_%s\x1f-Ctarget-feature=+ptx78' "$arch") \
            rustup run "$channel" cargo rustc --release --lib --crate-type cdylib --features builtin \
            --target nvptx64-nvidia-cuda -Zbuild-std=core --target-dir "$2" \
            --config profile.release.lto=true --config profile.release.opt-level=3 \
            --config profile.release.codegen-units=1 --config profile.release.debug=false \
            --config 'profile.release.panic="abort"' --quiet)
    echo "$2/nvptx64-nvidia-cuda/release/kernels_gpu.ptx"
}
echo "ptx-same: building sm_$arch PTX of $base and of the working tree" >&2
a=$(build "$scratch/base" "$scratch/target-base")
b=$(build "$root" "$scratch/target-tree")
python3 - "$a" "$b" <<'PY'
import re, sys

def kernels(path):
    text = open(path).read()
    align = dict((m.group(2), m.group(1)) for m in
                 re.finditer(r'\.extern \.shared \.align (\d+) \.b8 (\S+)\[\];', text))
    out = {}
    for block in re.split(r'\n(?=(?:\.visible )?\.(?:entry|func) )', text):
        head = re.match(r'(?:\.visible )?\.(entry|func)\s+(?:\([^)]*\)\s*)?(\S+?)\(', block)
        if not head:
            # Module-level declarations (constant tables, shared arrays): compared as a sorted list of
            # lines, every symbol name alike, so that a table's contents count but not its name or place.
            lines = re.sub(r'anon_\$_[0-9a-f]+_\$_\d+|_ZN[0-9A-Za-z_$.]+', 'SYM', block).split('\n')
            out.setdefault('module declarations', []).extend(
                l for l in lines if l.strip() and not l.startswith('//'))
            continue
        names = {}
        def number(m):
            k = m.group(0)
            if k not in names:
                names[k] = 'S%d' % len(names) + (':align' + align[k] if k in align else '')
            return names[k]
        body = re.sub(r'anon_\$_[0-9a-f]+_\$_\d+|_ZN[0-9A-Za-z_$.]+', number, block)
        name = head.group(2)
        key = 'helper functions' if name.startswith('_ZN') or name.startswith('anon_') else name
        out.setdefault(key, []).append(body)
    return {k: sorted(v) for k, v in out.items()}

a, b = kernels(sys.argv[1]), kernels(sys.argv[2])
differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
entries = lambda d: sum(1 for k in d if k not in ('module declarations', 'helper functions'))
print(f"ptx-same: {entries(a)} and {entries(b)} kernels; {len(differ)} differ")
# By family: the name without its element type (the last `_` part), with the types that differ.
families = {}
for k in differ:
    family, _, ty = k.rpartition('_')
    if family:
        families.setdefault(family, []).append(ty)
    else:
        families.setdefault(k, [])
for family, types in sorted(families.items()):
    print(f"  differs: {family}" + (f" ({', '.join(sorted(types))})" if types else ""))
sys.exit(1 if differ else 0)
PY
