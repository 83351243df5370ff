#!/usr/bin/env bash
# Builds and runs a copy of examples/custom-op (with its ops/ and kernels/ crates) outside the repository, as a
# user's crate would be: its own workspace, no toolchain file, stable Rust, and the repository's reduce-host,
# reduce-contract, reduce-builder and kernels-gpu as path dependencies by absolute path. Without a GPU the
# program prints its one "no CUDA GPU" line and exits 0; with one it checks its operators and prints "correct".
#
# The copy lives in a temporary folder that is removed on exit; its build goes to target/custom-op-outside/
# (CARGO_TARGET_DIR), so repeated runs are incremental and the disk used stays in target/.
#
#   bash scripts/custom-op-outside.sh      (sources scripts/setup.sh first)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

# shellcheck source=scripts/setup.sh
source "$root/scripts/setup.sh"

# `+stable` needs the toolchain (setup.sh installs the repository's pinned one, which may be another).
if ! rustup run stable rustc --version >/dev/null 2>&1; then
    echo "+ rustup toolchain install stable --profile minimal" >&2
    rustup toolchain install stable --profile minimal --no-self-update >&2
fi

copy=$(mktemp -d "${TMPDIR:-/tmp}/custom-op-outside.XXXXXX")
trap 'rm -rf "$copy"' EXIT
tar -C examples/custom-op --exclude=target -cf - . | tar -C "$copy" -xf -

# The repository's crates by absolute path (they are `../../reduce-host`, `../../../kernels-gpu`, … in the
# repository); the copy's own ops/ and kernels/ stay relative.
for manifest in "$copy/Cargo.toml" "$copy/ops/Cargo.toml" "$copy/kernels/Cargo.toml"; do
    sed -i -E "s#path = \"(\.\./)+(reduce-host|reduce-contract|reduce-builder|kernels-gpu)\"#path = \"$root/\2\"#" \
        "$manifest"
done
if grep -n 'path = "\.\./\.\.' "$copy/Cargo.toml" "$copy/ops/Cargo.toml" "$copy/kernels/Cargo.toml"; then
    echo "custom-op-outside: a path dependency above was not rewritten" >&2
    exit 1
fi
# A workspace of its own, not a member of whatever surrounds the temporary folder.
printf '\n[workspace]\n' >>"$copy/Cargo.toml"
# The versions this repository tests with (cargo drops the entries the copy does not use).
cp Cargo.lock "$copy/Cargo.lock"

# A user gives ptxas through PTXAS, CUDA_PATH or the PATH; the one setup.sh installed lies under .deps/, which
# the copy's build script cannot see from outside the repository. Without one, the kernels embed PTX only.
if [ -z "${PTXAS:-}" ]; then
    for p in "$root"/.deps/nvcc/nvidia/*/bin/ptxas; do
        [ -x "$p" ] && export PTXAS="$p"
    done
fi

export CARGO_TARGET_DIR="$root/target/custom-op-outside"
cd "$copy"
echo "+ (copy of examples/custom-op in $copy) cargo +stable build --release" >&2
cargo +stable build --release
echo "+ (copy of examples/custom-op in $copy) cargo +stable run --release" >&2
output=$(cargo +stable run --release)
printf '%s\n' "$output"
case "$output" in
    *$'\n'*)
        echo "custom-op-outside: expected one line of output" >&2
        exit 1
        ;;
    "custom-op: built, kernels embedded; no CUDA GPU to run on"* | "custom-op: correct"*) ;;
    *)
        echo "custom-op-outside: unexpected output" >&2
        exit 1
        ;;
esac
echo "custom-op-outside: the copy outside the repository built on $(rustup run stable rustc --version) and ran"
