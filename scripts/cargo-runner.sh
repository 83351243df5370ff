#!/usr/bin/env bash
# Cargo's runner for this repository's binaries (`cargo run`, `cargo test`, `cargo bench`; see
# .cargo/config.toml). On a machine without an NVIDIA driver, cust's binaries need a libcuda.so.1 to start:
# scripts/setup.sh unpacks Debian's into .deps/cuda/lib64 only then (with a driver, that folder holds no
# libcuda.so.1), so putting it on the loader path never shadows a real driver. Cargo sets LD_LIBRARY_PATH
# for the programs it runs itself, so [env] cannot do this.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
if [ -e "$here/.deps/cuda/lib64/libcuda.so.1" ]; then
    export LD_LIBRARY_PATH="$here/.deps/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# Doctests run through this runner too (cargo hands it to rustdoc as `--test-runtool`), and rustdoc names
# every doctest program `rust_out`. Edition 2024 merges a crate's doctests into one such program, which
# expects RUSTDOC_DOCTEST_BIN_PATH (its own path) so that it can run each doctest in a process of its own.
# rustdoc sets it only when it starts the program itself, not through a runner; without it the program
# prints "WARNING: No rustdoc doctest environment variable provided" and runs them all in one process.
# Unmerged doctest programs ignore it.
case "$1" in
    */rust_out) export RUSTDOC_DOCTEST_BIN_PATH="${RUSTDOC_DOCTEST_BIN_PATH:-$1}" ;;
esac
exec "$@"
