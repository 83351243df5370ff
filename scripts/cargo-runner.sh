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
exec "$@"
