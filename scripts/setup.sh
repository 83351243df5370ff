#!/usr/bin/env bash
# Development environment for this repository.
#
#   source scripts/setup.sh   installs what is missing, then exports the
#                             environment into the current shell
#   bash scripts/setup.sh     installs what is missing (exports nothing)
#
# What it provides (idempotent; a second run only checks, in well under 1 s):
#   1. the Rust toolchain named by rust-toolchain.toml (via rustup; rustup is
#      installed into ~/.cargo when missing), and ~/.cargo/bin on PATH;
#   2. libcuda for linking the host crate (cust_raw reads CUDA_LIBRARY_PATH and
#      looks for <dir>/lib64/libcuda.so).  A real NVIDIA driver is always used
#      when present; otherwise Debian bookworm's non-free `libcuda1` is
#      unpacked under .deps/ and put on LD_LIBRARY_PATH, so that cuInit()
#      cleanly reports CUDA_ERROR_NO_DEVICE on machines without a GPU;
#   3. ptxas from the PyPI wheel nvidia-cuda-nvcc, exported as PTXAS.
# Everything downloaded (except rustup/toolchains) goes under <repo>/.deps/.
#
# Knobs: NVCC_WHEEL_VERSION (default below), DEBIAN_MIRROR
# (default http://deb.debian.org/debian).
#
# This file is safe to source from any shell state: it does not change shell
# options, and all installing happens in a child `bash` process.

# Pinned to the CUDA 13.0 release: the GPU machines' driver is r580 (CUDA
# 13.0), so this ptxas never emits anything newer than that driver accepts.
_rsetup_nvcc_default_version=13.0.88

_rsetup_log() { printf 'setup: %s\n' "$*" >&2; }

_rsetup_repo_root() {
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P) || return 1
    printf '%s\n' "$here"
}

_rsetup_cargo_bin() { printf '%s/bin\n' "${CARGO_HOME:-$HOME/.cargo}"; }

# Prints the path of a real (system) libcuda.so.1, if there is one.
_rsetup_find_driver_libcuda() {
    local ldc p
    for ldc in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
        if command -v "$ldc" >/dev/null 2>&1; then
            p=$("$ldc" -p 2>/dev/null |
                awk '$1 == "libcuda.so.1" && /x86-64/ { print $NF; exit }')
            if [ -n "$p" ] && [ -e "$p" ]; then
                printf '%s\n' "$p"
                return 0
            fi
            break
        fi
    done
    for p in /usr/lib/x86_64-linux-gnu/libcuda.so.1 \
             /usr/local/nvidia/lib64/libcuda.so.1 \
             /usr/lib64/libcuda.so.1 \
             /lib/x86_64-linux-gnu/libcuda.so.1 \
             /usr/lib/wsl/lib/libcuda.so.1; do
        if [ -e "$p" ]; then
            printf '%s\n' "$p"
            return 0
        fi
    done
    return 1
}

_rsetup_find_ptxas() {
    local root=$1 p
    p=$(find "$root/.deps/nvcc" -type f -name ptxas -path '*/bin/*' 2>/dev/null | sort | head -n 1 || true)
    [ -n "$p" ] || return 1
    printf '%s\n' "$p"
}

# ---------------------------------------------------------------------------
# Installer: runs in its own `bash` process under `set -euo pipefail`.
# ---------------------------------------------------------------------------
_rsetup_install() {
    set -euo pipefail
    trap '_rsetup_log "failed (line $LINENO): $BASH_COMMAND"' ERR
    local root deps
    root=$(_rsetup_repo_root)
    deps="$root/.deps"
    cd "$root"

    local cargo_bin
    cargo_bin=$(_rsetup_cargo_bin)
    case ":$PATH:" in
        *":$cargo_bin:"*) ;;
        *) PATH="$cargo_bin:$PATH" ;;
    esac
    export PATH

    # --- privileged apt (only used to install missing system packages) ----
    local apt_updated=0
    _rsetup_root_cmd() {
        if [ "$(id -u)" -eq 0 ]; then
            "$@"
        elif command -v sudo >/dev/null 2>&1; then
            sudo -n "$@"
        else
            _rsetup_log "need root to run: $* (no sudo); install it manually"
            return 1
        fi
    }
    _rsetup_apt_install() {
        if ! command -v apt-get >/dev/null 2>&1; then
            _rsetup_log "missing $* and no apt-get; install it manually"
            return 1
        fi
        if [ "$apt_updated" = 0 ]; then
            _rsetup_log "apt-get update"
            _rsetup_root_cmd env DEBIAN_FRONTEND=noninteractive apt-get -qq update >&2 || return 1
            apt_updated=1
        fi
        _rsetup_log "apt-get install $*"
        mkdir -p "$deps"
        if ! _rsetup_root_cmd env DEBIAN_FRONTEND=noninteractive \
            apt-get -qq -y --no-install-recommends install "$@" >"$deps/apt-install.log" 2>&1; then
            tail -n 20 "$deps/apt-install.log" >&2
            return 1
        fi
        hash -r
    }
    _rsetup_need_cmd() { # command package...
        local cmd=$1
        shift
        command -v "$cmd" >/dev/null 2>&1 || _rsetup_apt_install "$@"
    }

    # --- 1. Rust toolchain ------------------------------------------------
    _rsetup_need_cmd cc gcc libc6-dev # rustc needs a C linker for host code
    if ! command -v rustup >/dev/null 2>&1; then
        _rsetup_need_cmd curl curl ca-certificates
        _rsetup_log "installing rustup into ${CARGO_HOME:-$HOME/.cargo}"
        # The official rustup-init script; sh.rustup.rs redirects to the
        # static.rust-lang.org copy, which is tried first (some networks
        # resolve only static.rust-lang.org).
        mkdir -p "$deps"
        local init="$deps/rustup-init.sh" url ok=0
        for url in https://static.rust-lang.org/rustup/rustup-init.sh https://sh.rustup.rs; do
            if curl --proto '=https' --tlsv1.2 -sSfL --retry 3 -o "$init" "$url"; then
                ok=1
                break
            fi
        done
        [ "$ok" = 1 ] || { _rsetup_log "could not download rustup-init"; return 1; }
        sh "$init" -y --no-modify-path --default-toolchain none --profile minimal >&2
        rm -f "$init"
        hash -r
        command -v rustup >/dev/null 2>&1 || {
            _rsetup_log "rustup not found after installing it"
            return 1
        }
    fi
    # Parse rust-toolchain.toml (channel, profile, components, targets).
    local tc_flat channel profile comps targets
    tc_flat=$(tr '\n' ' ' <"$root/rust-toolchain.toml")
    channel=$(printf '%s' "$tc_flat" | sed -n 's/.*channel *= *"\([^"]*\)".*/\1/p')
    profile=$(printf '%s' "$tc_flat" | sed -n 's/.*profile *= *"\([^"]*\)".*/\1/p')
    comps=$(printf '%s' "$tc_flat" | sed -n 's/.*components *= *\[\([^]]*\)\].*/\1/p' | tr -d '",' )
    targets=$(printf '%s' "$tc_flat" | sed -n 's/.*targets *= *\[\([^]]*\)\].*/\1/p' | tr -d '",' )
    [ -n "$channel" ] || { _rsetup_log "no channel in rust-toolchain.toml"; return 1; }
    local installed missing=0 c
    # RUSTUP_AUTO_INSTALL=0: a missing toolchain must not be installed silently here.
    installed=$(RUSTUP_AUTO_INSTALL=0 rustup component list --installed --toolchain "$channel" 2>/dev/null || true)
    if [ -z "$installed" ]; then
        missing=1
    else
        for c in $comps; do
            printf '%s\n' "$installed" | grep -Eq "^$c(-|$)" || missing=1
        done
        for c in $targets; do
            printf '%s\n' "$installed" | grep -qx "rust-std-$c" || missing=1
        done
    fi
    if [ "$missing" = 1 ]; then
        _rsetup_log "installing Rust toolchain $channel (rustup toolchain install)"
        # rustup >= 1.28 installs exactly what rust-toolchain.toml names.
        rustup toolchain install >&2 || true
        # Explicit form as well: works with older rustup too, and adds any
        # component/target missing from an already installed toolchain.
        local -a args=(toolchain install "$channel" --profile "${profile:-minimal}")
        for c in $comps; do args+=(--component "$c"); done
        for c in $targets; do args+=(--target "$c"); done
        rustup "${args[@]}" >&2
    fi

    # --- 2. libcuda ---------------------------------------------------------
    local cudadir="$deps/cuda/lib64" driver
    mkdir -p "$cudadir"
    if driver=$(_rsetup_find_driver_libcuda); then
        # Real driver: link-time name only.  No libcuda.so.1 of ours anywhere
        # near the search paths, and nothing goes on LD_LIBRARY_PATH.
        rm -f "$cudadir/libcuda.so.1"
        if [ "$(readlink "$cudadir/libcuda.so" 2>/dev/null || true)" != "$driver" ]; then
            _rsetup_log "using the NVIDIA driver's $driver"
            ln -sfn "$driver" "$cudadir/libcuda.so"
        fi
    else
        local stubdir="$deps/libcuda"
        local stub
        stub=$(find "$stubdir" -type f -name 'libcuda.so.[0-9]*' 2>/dev/null | sort | head -n 1 || true)
        if [ -z "$stub" ]; then
            _rsetup_fetch_libcuda_deb "$deps"
            stub=$(find "$stubdir" -type f -name 'libcuda.so.[0-9]*' | sort | head -n 1)
            [ -n "$stub" ] || { _rsetup_log "libcuda1 .deb held no libcuda.so.N"; return 1; }
        fi
        local rel="../../libcuda/${stub#"$stubdir/"}"
        if [ "$(readlink "$cudadir/libcuda.so.1" 2>/dev/null || true)" != "$rel" ] ||
           [ "$(readlink "$cudadir/libcuda.so" 2>/dev/null || true)" != "libcuda.so.1" ]; then
            _rsetup_log "no NVIDIA driver: using Debian's libcuda1 from .deps/libcuda (no GPU => CUDA_ERROR_NO_DEVICE)"
            ln -sfn "$rel" "$cudadir/libcuda.so.1"
            ln -sfn libcuda.so.1 "$cudadir/libcuda.so"
        fi
    fi

    # --- 3. ptxas -------------------------------------------------------------
    local want="${NVCC_WHEEL_VERSION:-$_rsetup_nvcc_default_version}"
    local ptxas=""
    if [ -d "$deps/nvcc/nvidia_cuda_nvcc-$want.dist-info" ]; then
        ptxas=$(_rsetup_find_ptxas "$root" || true)
    fi
    if [ -z "$ptxas" ] || ! "$ptxas" --version >/dev/null 2>&1; then
        _rsetup_need_cmd python3 python3
        if ! python3 -m pip --version >/dev/null 2>&1; then
            _rsetup_apt_install python3-pip
        fi
        _rsetup_log "installing nvidia-cuda-nvcc==$want (ptxas) into .deps/nvcc"
        rm -rf "$deps/nvcc.partial"
        # --target installs outside any environment, so PEP 668
        # "externally managed" does not apply; keep user pip config out.
        # Only ptxas is needed, hence --no-deps (no nvvm/runtime wheels).
        PIP_USER=0 PIP_REQUIRE_VIRTUALENV=0 PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore \
            python3 -m pip install --quiet --disable-pip-version-check --no-input \
            --no-deps --only-binary :all: --target "$deps/nvcc.partial" \
            "nvidia-cuda-nvcc==$want" >&2
        rm -rf "$deps/nvcc"
        mv "$deps/nvcc.partial" "$deps/nvcc"
        ptxas=$(_rsetup_find_ptxas "$root") || {
            _rsetup_log "no bin/ptxas in the nvidia-cuda-nvcc wheel"
            return 1
        }
        chmod +x "$ptxas"
        "$ptxas" --version >/dev/null || {
            _rsetup_log "$ptxas does not run"
            return 1
        }
        _rsetup_log "ptxas: $("$ptxas" --version | grep -m 1 release || true)"
    fi
}

# Download Debian bookworm's non-free libcuda1 (amd64) with a private apt
# configuration (the system's sources and state are not touched), and unpack
# it into .deps/libcuda.
_rsetup_fetch_libcuda_deb() {
    local deps=$1
    local apt="$deps/apt"
    local mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
    rm -rf "$apt" "$deps/libcuda"
    mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/cache" "$apt/debs" "$apt/etc"
    : >"$apt/status"

    local -a aptopts=(
        -o "Dir::Etc::SourceList=$apt/etc/sources.list"
        -o "Dir::Etc::SourceParts=/dev/null"
        -o "Dir::Etc::Preferences=/dev/null"
        -o "Dir::Etc::PreferencesParts=/dev/null"
        -o "Dir::State::Lists=$apt/lists"
        -o "Dir::State::status=$apt/status"
        -o "Dir::Cache=$apt/cache"
        -o "Dir::Cache::Archives=$apt/archives"
        -o "APT::Architecture=amd64"
        -o "APT::Architectures=amd64"
        -o "Acquire::Languages=none"
        -o "Debug::NoLocking=1"
    )
    if [ "$(id -u)" -eq 0 ]; then
        # _apt cannot write into the repo checkout; download as root.
        aptopts+=(-o "APT::Sandbox::User=root")
    fi

    # The Debian archive key: the system's, else Ubuntu's debian-archive-keyring
    # package unpacked under .deps, else an unauthenticated private entry.
    local keyring="" k
    for k in /usr/share/keyrings/debian-archive-keyring.gpg \
             /usr/share/keyrings/debian-archive-keyring.pgp; do
        if [ -s "$k" ]; then keyring=$k; break; fi
    done
    if [ -z "$keyring" ]; then
        keyring=$(_rsetup_fetch_debian_keyring "$deps" || true)
    fi
    local opts="arch=amd64"
    if [ -n "$keyring" ]; then
        opts="$opts signed-by=$keyring"
    else
        _rsetup_log "WARNING: no Debian archive keyring; fetching libcuda1 from an unauthenticated private apt entry"
        opts="$opts trusted=yes"
        aptopts+=(-o "Acquire::AllowInsecureRepositories=true")
    fi
    printf 'deb [%s] %s bookworm non-free\n' "$opts" "$mirror" >"$apt/etc/sources.list"

    _rsetup_log "fetching Debian bookworm non-free libcuda1 (private apt lists in .deps/apt)"
    apt-get "${aptopts[@]}" -qq update >&2
    (cd "$apt/debs" && apt-get "${aptopts[@]}" -qq download libcuda1:amd64 >&2)
    local deb
    deb=$(find "$apt/debs" -name 'libcuda1_*_amd64.deb' | head -n 1)
    [ -n "$deb" ] || { _rsetup_log "apt-get download libcuda1 produced no .deb"; return 1; }
    mkdir -p "$deps/libcuda"
    dpkg -x "$deb" "$deps/libcuda"
    _rsetup_log "unpacked $(basename "$deb") into .deps/libcuda"
}

# Ubuntu has no Debian archive key by default; its `debian-archive-keyring`
# package (universe) carries it.  Unpack it under .deps; print the keyring.
_rsetup_fetch_debian_keyring() {
    local deps=$1 dir deb k
    dir="$deps/keyring"
    command -v apt-get >/dev/null 2>&1 || return 1
    mkdir -p "$dir/debs"
    if ! (cd "$dir/debs" && apt-get -qq download debian-archive-keyring >&2 2>/dev/null); then
        # The system's package lists may be empty on a fresh machine.
        if [ "$(id -u)" -eq 0 ]; then
            env DEBIAN_FRONTEND=noninteractive apt-get -qq update >&2 || return 1
        elif command -v sudo >/dev/null 2>&1; then
            sudo -n env DEBIAN_FRONTEND=noninteractive apt-get -qq update >&2 || return 1
        else
            return 1
        fi
        (cd "$dir/debs" && apt-get -qq download debian-archive-keyring >&2) || return 1
    fi
    deb=$(find "$dir/debs" -name 'debian-archive-keyring_*.deb' | head -n 1)
    [ -n "$deb" ] || return 1
    rm -rf "$dir/x"
    dpkg -x "$deb" "$dir/x"
    for k in "$dir/x/usr/share/keyrings/debian-archive-keyring.gpg" \
             "$dir/x/usr/share/keyrings/debian-archive-keyring.pgp"; do
        if [ -s "$k" ]; then
            printf '%s\n' "$k"
            return 0
        fi
    done
    return 1
}

# ---------------------------------------------------------------------------
# Exports (into the sourcing shell).
# ---------------------------------------------------------------------------
_rsetup_export() {
    local root cargo_bin ptxas
    root=$(_rsetup_repo_root) || return 1
    cargo_bin=$(_rsetup_cargo_bin)
    case ":$PATH:" in
        *":$cargo_bin:"*) ;;
        *) PATH="$cargo_bin:$PATH" ;;
    esac
    export PATH

    export CUDA_LIBRARY_PATH="$root/.deps/cuda"
    if ! _rsetup_find_driver_libcuda >/dev/null; then
        case ":${LD_LIBRARY_PATH:-}:" in
            *":$root/.deps/cuda/lib64:"*) ;;
            *) LD_LIBRARY_PATH="$root/.deps/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
        esac
        export LD_LIBRARY_PATH
    fi

    ptxas=$(_rsetup_find_ptxas "$root") || {
        _rsetup_log "ptxas missing under .deps/nvcc"
        return 1
    }
    export PTXAS="$ptxas"
    if [ -n "${LD_LIBRARY_PATH:-}" ] && [ "${LD_LIBRARY_PATH%%:*}" = "$root/.deps/cuda/lib64" ]; then
        _rsetup_log "ready (libcuda: Debian stub, no GPU)"
    else
        _rsetup_log "ready (libcuda: NVIDIA driver)"
    fi
}

_rsetup_cleanup() {
    unset -f _rsetup_log _rsetup_repo_root _rsetup_cargo_bin \
        _rsetup_find_driver_libcuda _rsetup_find_ptxas _rsetup_install \
        _rsetup_fetch_libcuda_deb _rsetup_fetch_debian_keyring \
        _rsetup_export _rsetup_cleanup
    unset _rsetup_nvcc_default_version _rsetup_rc
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    # Sourced: install in a child process (so `set -e` holds there whatever
    # the caller's context), then export here.
    _rsetup_rc=0
    bash "${BASH_SOURCE[0]}" || _rsetup_rc=$?
    if [ "$_rsetup_rc" = 0 ]; then
        _rsetup_export || _rsetup_rc=$?
    else
        _rsetup_log "FAILED (exit $_rsetup_rc)"
    fi
    if [ "$_rsetup_rc" = 0 ]; then
        _rsetup_cleanup
        true
    else
        _rsetup_cleanup
        return 1
    fi
else
    _rsetup_install
fi
