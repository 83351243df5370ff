#!/usr/bin/env bash
# Developer entry point.  Every subcommand first sources scripts/setup.sh,
# which installs whatever is missing (toolchain, libcuda, ptxas), so each one
# works as the first command on a fresh machine.  `example` does not install
# ptxas (SETUP_PTXAS=0 unless set; the build then embeds PTX only).
#
#   bash scripts/dev.sh test [ARGS...]             cargo fmt --all --check and rustfmt --check of
#                                                  kernels-gpu (outside the workspace), then
#                                                  cargo test --workspace --release ARGS
#   bash scripts/dev.sh example [NAME [ARGS...]]   cargo run --release --example NAME -- ARGS
#                                                  (NAME defaults to argmax)
#   bash scripts/dev.sh bench [ARGS...]            cargo bench ARGS
#   bash scripts/dev.sh env                        print the exports:
#                                                  eval "$(bash scripts/dev.sh env)"
set -euo pipefail

usage() {
    sed -n '2,13s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

cmd=${1:-}
[ $# -gt 0 ] && shift

case "$cmd" in
    test | example | bench | env) ;;
    -h | --help | help)
        usage
        exit 0
        ;;
    *)
        usage
        exit 2
        ;;
esac

if [ "$cmd" = example ]; then
    # Running an example needs no ptxas; test and bench install it.
    SETUP_PTXAS=${SETUP_PTXAS:-0}
fi

# shellcheck source=scripts/setup.sh
source "$root/scripts/setup.sh"

case "$cmd" in
    test)
        # Extra args go to cargo test verbatim: `test -- --nocapture` reaches
        # the test binaries, `test -p reduce-host` reaches cargo.
        echo "+ cargo fmt --all --check" >&2
        cargo fmt --all --check
        # The kernels lie outside the workspace, so `--all` misses them; rustfmt follows their modules.
        echo "+ rustfmt --check --edition 2024 kernels-gpu/src/lib.rs" >&2
        rustfmt --check --edition 2024 kernels-gpu/src/lib.rs
        echo "+ cargo test --workspace --release $*" >&2
        exec cargo test --workspace --release "$@"
        ;;
    example)
        name=${1:-argmax}
        [ $# -gt 0 ] && shift
        [ "${1:-}" = "--" ] && shift
        echo "+ cargo run --release --example $name -- $*" >&2
        exec cargo run --release --example "$name" -- "$@"
        ;;
    bench)
        echo "+ cargo bench $*" >&2
        exec cargo bench "$@"
        ;;
    env)
        for v in PATH CUDA_LIBRARY_PATH LD_LIBRARY_PATH; do
            if [ -n "${!v+x}" ]; then
                printf 'export %s=%q\n' "$v" "${!v}"
            fi
        done
        ;;
esac
