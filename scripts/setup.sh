#!/usr/bin/env bash
# Development environment for this repository.
#
#   source scripts/setup.sh           installs what is missing, then exports the
#                                     environment into the current shell
#   bash scripts/setup.sh [--no-ptxas]
#                                     installs what is missing (exports nothing)
#
# What it provides (idempotent; a second run only checks, in well under 1 s):
#   1. the Rust toolchain named by rust-toolchain.toml (via rustup; when rustup
#      is missing, the rustup-init binary for this host is downloaded from
#      static.rust-lang.org, checked against its published .sha256 and run,
#      installing into ~/.cargo), and ~/.cargo/bin on PATH;
#   2. libcuda for linking the host crate (cust_raw reads CUDA_LIBRARY_PATH and
#      looks for <dir>/lib64/libcuda.so).  A real NVIDIA driver is always used
#      when present (on any architecture).  Otherwise, on amd64 only, Debian
#      bookworm's non-free `libcuda1` (pinned version and sha256, from the
#      signed archive over https) is unpacked under .deps/ and put on
#      LD_LIBRARY_PATH, so that cuInit() cleanly reports CUDA_ERROR_NO_DEVICE
#      on machines without a GPU.  Other architectures need the driver;
#   3. ptxas from the PyPI wheel nvidia-cuda-nvcc (pinned version, installed
#      with pip --require-hashes) into .deps/nvcc, where the build finds it.  Optional: skipped with
#      SETUP_PTXAS=0 (or --no-ptxas); the build then embeds PTX only.
# Everything downloaded (except rustup's toolchains) goes under <repo>/.deps/.
#
# Knobs (environment variables, honoured when sourced too):
#   SETUP_PTXAS=0         do not install ptxas (one an earlier run installed
#                         stays in .deps/nvcc and is still used)
#   DEBIAN_MIRROR         https URL of a Debian mirror
#                         (default https://deb.debian.org/debian)
#   NVCC_WHEEL_VERSION    another nvidia-cuda-nvcc version; needs
#   NVCC_WHEEL_SHA256     the sha256 of that version's wheel for this machine
#
# This file is safe to source from any shell state: it does not change shell
# options, and all installing happens in a child `bash` process.

# Pinned to the CUDA 13.0 release: the GPU machines' driver is r580 (CUDA
# 13.0), so this ptxas never emits anything newer than that driver accepts.
# sha256 of the manylinux2014 wheels on PyPI, selected by `uname -m`.
_rsetup_nvcc_default_version=13.0.88
_rsetup_nvcc_sha256_x86_64=56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03
_rsetup_nvcc_sha256_aarch64=c7ff28f86a24effdc6c034fa15230c549a273e4771b10a7fec14996f8cf3307f

# Debian bookworm non-free libcuda1 (amd64), used only when no driver is
# present.  When Debian replaces this version, update both lines (the new
# sha256 is the SHA256 field of `apt-cache show libcuda1` from a private apt
# update, or sha256sum of the downloaded .deb).
_rsetup_libcuda_version=535.261.03-1
_rsetup_libcuda_sha256=de1e9ca34164a5983b3f752e6699cf1ad924790f1a843b7d582bab6f99206e1e

_rsetup_log() { printf 'setup: %s\n' "$*" >&2; }

_rsetup_repo_root() {
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P) || return 1
    printf '%s\n' "$here"
}

_rsetup_cargo_bin() { printf '%s/bin\n' "${CARGO_HOME:-$HOME/.cargo}"; }

# Succeeds unless SETUP_PTXAS asks to skip ptxas.
_rsetup_want_ptxas() {
    case "${SETUP_PTXAS:-1}" in
        0 | no | NO | false | FALSE | off | OFF) return 1 ;;
        *) return 0 ;;
    esac
}

# _rsetup_sha256_ok FILE EXPECTED WHAT: succeeds when FILE's sha256 is EXPECTED;
# otherwise says so (both digests) and fails.
_rsetup_sha256_ok() {
    local file=$1 want=$2 what=$3 got
    if ! command -v sha256sum >/dev/null 2>&1; then
        _rsetup_log "sha256sum not found (coreutils); cannot verify $what"
        return 1
    fi
    got=$(sha256sum "$file" 2>/dev/null | awk '{ print $1 }')
    if [ -z "$got" ]; then
        _rsetup_log "cannot read $file to verify $what"
        return 1
    fi
    if [ "$got" != "$want" ]; then
        _rsetup_log "SHA256 MISMATCH for $what ($file):"
        _rsetup_log "  expected $want"
        _rsetup_log "  got      $got"
        _rsetup_log "refusing to use it"
        return 1
    fi
}

# ELF class, byte order and machine of a file ("02 01 3e 00" for x86-64),
# empty if it is not ELF.
_rsetup_elf_id() {
    od -An -tx1 -N20 "$1" 2>/dev/null | tr -s ' \n' '  ' |
        awk '$1 == "7f" && $2 == "45" && $3 == "4c" && $4 == "46" { print $5, $6, $19, $20 }'
}

# Every libcuda.so.1 of an NVIDIA driver on this machine (any architecture):
# the dynamic linker's cache, then the usual directories (Debian/Ubuntu
# multiarch for x86-64 and aarch64, Jetson, NVIDIA containers, RPM distros,
# WSL).
_rsetup_driver_candidates() {
    local ldc p
    for ldc in ldconfig /sbin/ldconfig /usr/sbin/ldconfig; do
        if command -v "$ldc" >/dev/null 2>&1; then
            "$ldc" -p 2>/dev/null | awk '$1 == "libcuda.so.1" { print $NF }' |
                while IFS= read -r p; do
                    [ -e "$p" ] && printf '%s\n' "$p"
                done
            break
        fi
    done
    for p in /usr/lib/x86_64-linux-gnu/libcuda.so.1 \
             /lib/x86_64-linux-gnu/libcuda.so.1 \
             /usr/lib/aarch64-linux-gnu/libcuda.so.1 \
             /lib/aarch64-linux-gnu/libcuda.so.1 \
             /usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1 \
             /usr/local/nvidia/lib64/libcuda.so.1 \
             /usr/lib64/libcuda.so.1 \
             /usr/lib/libcuda.so.1 \
             /usr/lib/wsl/lib/libcuda.so.1; do
        if [ -e "$p" ]; then
            printf '%s\n' "$p"
        fi
    done
}

# Succeeds when an NVIDIA driver is installed, whether or not its libcuda.so.1
# is usable here.
_rsetup_driver_present() {
    [ -e /proc/driver/nvidia/version ] && return 0
    [ -n "$(_rsetup_driver_candidates | head -n 1)" ]
}

# Prints the path of the driver's libcuda.so.1 built for this machine's ABI
# (same ELF class and machine as the tools running this script), if any.
_rsetup_find_driver_libcuda() {
    local host p id
    host=$(_rsetup_elf_id /proc/self/exe)
    while IFS= read -r p; do
        id=$(_rsetup_elf_id "$p")
        [ -n "$id" ] || continue
        if [ -z "$host" ] || [ "$id" = "$host" ]; then
            printf '%s\n' "$p"
            return 0
        fi
    done < <(_rsetup_driver_candidates)
    return 1
}

_rsetup_find_ptxas() {
    local root=$1 p
    p=$(find "$root/.deps/nvcc" -type f -name ptxas -path '*/bin/*' 2>/dev/null | sort | head -n 1 || true)
    [ -n "$p" ] || return 1
    printf '%s\n' "$p"
}

# The rustup host triple of this machine (Linux only).
_rsetup_rustup_triple() {
    local os arch libc=gnu
    os=$(uname -s)
    arch=$(uname -m)
    if [ "$os" != Linux ]; then
        _rsetup_log "rustup is missing and this script installs it only on Linux ($os): see https://rustup.rs"
        return 1
    fi
    case "$arch" in
        x86_64 | amd64) arch=x86_64 ;;
        aarch64 | arm64) arch=aarch64 ;;
        *)
            _rsetup_log "rustup is missing and this script does not know the rustup host triple for $arch: see https://rustup.rs"
            return 1
            ;;
    esac
    if ldd --version 2>&1 | grep -qi musl; then libc=musl; fi
    printf '%s-unknown-linux-%s\n' "$arch" "$libc"
}

# _rsetup_verify_rustup_init BINARY SHA256FILE: checks BINARY against the
# digest published next to it (the .sha256 file holds the hex digest first).
_rsetup_verify_rustup_init() {
    local bin=$1 shafile=$2 want
    want=$(awk 'NR == 1 { print $1 }' "$shafile" 2>/dev/null | cut -c1-64)
    case "$want" in
        *[!0-9a-f]* | "")
            _rsetup_log "$shafile holds no sha256 digest; refusing to run rustup-init"
            return 1
            ;;
    esac
    if [ "${#want}" -ne 64 ]; then
        _rsetup_log "$shafile holds no sha256 digest; refusing to run rustup-init"
        return 1
    fi
    _rsetup_sha256_ok "$bin" "$want" "rustup-init" || return 1
}

# _rsetup_fetch_rustup_init DEPS: downloads rustup-init for this host and its
# .sha256 into DEPS/rustup, verifies it, prints the binary's path.
_rsetup_fetch_rustup_init() {
    local deps=$1 triple url dir
    triple=$(_rsetup_rustup_triple) || return 1
    url="https://static.rust-lang.org/rustup/dist/$triple/rustup-init"
    dir="$deps/rustup"
    rm -rf "$dir"
    mkdir -p "$dir" || return 1
    _rsetup_log "downloading $url (+ .sha256)"
    if ! curl --proto '=https' --tlsv1.2 -sSfL --retry 3 -o "$dir/rustup-init" "$url" ||
       ! curl --proto '=https' --tlsv1.2 -sSfL --retry 3 -o "$dir/rustup-init.sha256" "$url.sha256"; then
        _rsetup_log "could not download rustup-init for $triple from static.rust-lang.org"
        return 1
    fi
    _rsetup_verify_rustup_init "$dir/rustup-init" "$dir/rustup-init.sha256" || {
        rm -f "$dir/rustup-init"
        return 1
    }
    chmod +x "$dir/rustup-init" || return 1
    printf '%s\n' "$dir/rustup-init"
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
    _rsetup_need_cacerts() {
        [ -s /etc/ssl/certs/ca-certificates.crt ] || _rsetup_apt_install ca-certificates
    }

    # --- 1. Rust toolchain ------------------------------------------------
    _rsetup_need_cmd cc gcc libc6-dev # rustc needs a C linker for host code
    if ! command -v rustup >/dev/null 2>&1; then
        _rsetup_need_cmd curl curl ca-certificates
        _rsetup_need_cmd sha256sum coreutils
        _rsetup_log "installing rustup into ${CARGO_HOME:-$HOME/.cargo}"
        # The rustup-init binary for this host, verified against the .sha256
        # published next to it (the documented rustup verification).
        local init
        init=$(_rsetup_fetch_rustup_init "$deps")
        "$init" -y --no-modify-path --default-toolchain none --profile minimal >&2
        rm -rf "$deps/rustup"
        hash -r
        command -v rustup >/dev/null 2>&1 || {
            _rsetup_log "rustup not found after installing it"
            return 1
        }
        _rsetup_log "rustup installed; for plain cargo in new shells run: . \"${CARGO_HOME:-$HOME/.cargo}/env\""
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
        rustup toolchain install --no-self-update >&2 || true
        # Explicit form as well: works with older rustup too, and adds any
        # component/target missing from an already installed toolchain.
        local -a args=(toolchain install "$channel" --no-self-update --profile "${profile:-minimal}")
        for c in $comps; do args+=(--component "$c"); done
        for c in $targets; do args+=(--target "$c"); done
        rustup "${args[@]}" >&2
    fi
    # Without a default toolchain (a rustup installed by this script has none), the first toolchain the
    # build installs, the kernels' nightly, would become the default of every other crate of the user:
    # make it the workspace's stable one instead.
    # rustup marks it "(default)" or "(active, default)".
    if ! rustup toolchain list 2>/dev/null | grep -q 'default)'; then
        _rsetup_log "setting rustup's default toolchain to $channel (there was none)"
        rustup default "$channel" >&2
    fi

    # --- 2. libcuda ---------------------------------------------------------
    local cudadir="$deps/cuda/lib64" driver=""
    mkdir -p "$cudadir"
    if _rsetup_driver_present; then
        # Real driver: link-time name only.  No libcuda.so.1 of ours anywhere
        # near the search paths, and nothing goes on LD_LIBRARY_PATH.
        rm -f "$cudadir/libcuda.so.1"
        driver=$(_rsetup_find_driver_libcuda || true)
        if [ -z "$driver" ]; then
            rm -f "$cudadir/libcuda.so"
            _rsetup_log "an NVIDIA driver is installed (/proc/driver/nvidia/version or a libcuda.so.1 for another ABI)"
            _rsetup_log "but no libcuda.so.1 for this machine ($(uname -m)) was found (ldconfig -p, /usr/lib/*-linux-gnu,"
            _rsetup_log "/usr/local/nvidia/lib64, /usr/lib64, WSL): install the driver's CUDA library (e.g. libcuda1 /"
            _rsetup_log "libnvidia-compute-<version>, or mount it into the container) and run ldconfig"
            return 1
        fi
        if [ "$(readlink "$cudadir/libcuda.so" 2>/dev/null || true)" != "$driver" ]; then
            _rsetup_log "using the NVIDIA driver's $driver"
            ln -sfn "$driver" "$cudadir/libcuda.so"
        fi
    else
        local arch
        arch=$(uname -m)
        if [ "$arch" != x86_64 ]; then
            rm -f "$cudadir/libcuda.so.1" "$cudadir/libcuda.so"
            _rsetup_log "no NVIDIA driver found, and this machine is $arch: the Debian libcuda1 fallback is for"
            _rsetup_log "amd64 only.  Install the NVIDIA driver (its libcuda.so.1) to build here."
            return 1
        fi
        local stubdir="$deps/libcuda"
        local pin="libcuda1 $_rsetup_libcuda_version amd64 sha256:$_rsetup_libcuda_sha256"
        local stub=""
        if [ "$(cat "$stubdir/.rsetup-pin" 2>/dev/null || true)" = "$pin" ]; then
            stub=$(find "$stubdir" -type f -name "libcuda.so.${_rsetup_libcuda_version%-*}" 2>/dev/null | sort | head -n 1 || true)
        fi
        if [ -z "$stub" ]; then
            # No link to a library that is about to be replaced (or refused).
            rm -f "$cudadir/libcuda.so.1" "$cudadir/libcuda.so"
            _rsetup_need_cmd apt-get apt
            _rsetup_need_cmd dpkg dpkg
            _rsetup_need_cmd sha256sum coreutils
            _rsetup_need_cacerts
            _rsetup_fetch_libcuda_deb "$deps"
            stub=$(find "$stubdir" -type f -name "libcuda.so.${_rsetup_libcuda_version%-*}" | sort | head -n 1)
            [ -n "$stub" ] || { _rsetup_log "libcuda1 .deb held no libcuda.so.${_rsetup_libcuda_version%-*}"; return 1; }
            printf '%s\n' "$pin" >"$stubdir/.rsetup-pin"
        fi
        local rel="../../libcuda/${stub#"$stubdir/"}"
        if [ "$(readlink "$cudadir/libcuda.so.1" 2>/dev/null || true)" != "$rel" ] ||
           [ "$(readlink "$cudadir/libcuda.so" 2>/dev/null || true)" != "libcuda.so.1" ]; then
            _rsetup_log "no NVIDIA driver: using Debian's libcuda1 from .deps/libcuda (no GPU => CUDA_ERROR_NO_DEVICE)"
            ln -sfn "$rel" "$cudadir/libcuda.so.1"
            ln -sfn libcuda.so.1 "$cudadir/libcuda.so"
        fi
    fi

    # --- 3. ptxas (optional) --------------------------------------------------
    if ! _rsetup_want_ptxas; then
        return 0
    fi
    local want="${NVCC_WHEEL_VERSION:-$_rsetup_nvcc_default_version}"
    local sha=""
    if [ "$want" = "$_rsetup_nvcc_default_version" ]; then
        case "$(uname -m)" in
            x86_64 | amd64) sha=$_rsetup_nvcc_sha256_x86_64 ;;
            aarch64 | arm64) sha=$_rsetup_nvcc_sha256_aarch64 ;;
        esac
    fi
    sha=${NVCC_WHEEL_SHA256:-$sha}
    if [ -z "$sha" ]; then
        if [ "$want" = "$_rsetup_nvcc_default_version" ]; then
            _rsetup_log "no nvidia-cuda-nvcc wheel is pinned for $(uname -m); run with SETUP_PTXAS=0 (the build then embeds PTX only)"
        else
            _rsetup_log "NVCC_WHEEL_VERSION=$want needs NVCC_WHEEL_SHA256=<sha256 of its manylinux $(uname -m) wheel>"
        fi
        return 1
    fi
    local nvcc_pin="nvidia-cuda-nvcc==$want --hash=sha256:$sha"
    local ptxas=""
    if [ -d "$deps/nvcc/nvidia_cuda_nvcc-$want.dist-info" ] &&
       [ "$(cat "$deps/nvcc/.rsetup-pin" 2>/dev/null || true)" = "$nvcc_pin" ]; then
        ptxas=$(_rsetup_find_ptxas "$root" || true)
    fi
    if [ -z "$ptxas" ] || ! "$ptxas" --version >/dev/null 2>&1; then
        _rsetup_need_cmd python3 python3
        if ! python3 -m pip --version >/dev/null 2>&1; then
            _rsetup_apt_install python3-pip
        fi
        _rsetup_log "installing nvidia-cuda-nvcc==$want (ptxas) into .deps/nvcc, sha256 $sha"
        rm -rf "$deps/nvcc.partial"
        local req
        req=$(mktemp "${TMPDIR:-/tmp}/rsetup-nvcc.XXXXXX")
        printf '%s\n' "$nvcc_pin" >"$req"
        # --require-hashes: pip refuses a wheel whose sha256 differs from the
        # pin.  --target installs outside any environment, so PEP 668
        # "externally managed" does not apply; keep user pip config out.
        # Only ptxas is needed, hence --no-deps (no nvvm/runtime wheels), and
        # --no-cache-dir keeps the download out of ~/.cache.
        if ! PIP_USER=0 PIP_REQUIRE_VIRTUALENV=0 PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore \
            python3 -m pip install --quiet --disable-pip-version-check --no-input --no-cache-dir \
            --require-hashes --no-deps --only-binary :all: --target "$deps/nvcc.partial" \
            -r "$req" >&2; then
            rm -f "$req"
            rm -rf "$deps/nvcc.partial"
            _rsetup_log "pip could not install nvidia-cuda-nvcc==$want with sha256 $sha (see pip's message above;"
            _rsetup_log "a hash mismatch means the downloaded wheel is not the pinned one).  SETUP_PTXAS=0 skips ptxas."
            return 1
        fi
        rm -f "$req"
        printf '%s\n' "$nvcc_pin" >"$deps/nvcc.partial/.rsetup-pin"
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

# Download Debian bookworm's non-free libcuda1 (amd64, pinned version) with a
# private apt configuration (the system's sources and state are not touched)
# from the signed archive over https, check its sha256 against the pin, and
# unpack it into .deps/libcuda.
_rsetup_fetch_libcuda_deb() {
    local deps=$1
    local apt="$deps/apt"
    local mirror="${DEBIAN_MIRROR:-https://deb.debian.org/debian}"
    mirror=${mirror%/}
    case "$mirror" in
        https://?*) ;;
        *)
            _rsetup_log "DEBIAN_MIRROR must be an https:// URL (got '$mirror'); unset it to use https://deb.debian.org/debian"
            return 1
            ;;
    esac

    # The Debian archive key: the system's, else Ubuntu's debian-archive-keyring
    # package unpacked under .deps.  Never an unauthenticated source.
    local keyring="" k
    for k in /usr/share/keyrings/debian-archive-keyring.gpg \
             /usr/share/keyrings/debian-archive-keyring.pgp; do
        if [ -s "$k" ]; then keyring=$k; break; fi
    done
    if [ -z "$keyring" ]; then
        keyring=$(_rsetup_fetch_debian_keyring "$deps" || true)
    fi
    if [ -z "$keyring" ]; then
        _rsetup_log "no Debian archive keyring (/usr/share/keyrings/debian-archive-keyring.gpg), so the"
        _rsetup_log "Debian archive's signature cannot be checked.  Install the debian-archive-keyring package"
        _rsetup_log "(sudo apt-get install debian-archive-keyring; on Ubuntu it is in universe), or install the"
        _rsetup_log "NVIDIA driver, then run this again."
        return 1
    fi

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
        # Whatever the system's apt.conf says: signed archives only, TLS verified.
        -o "Acquire::AllowInsecureRepositories=false"
        -o "Acquire::AllowDowngradeToInsecureRepositories=false"
        -o "APT::Get::AllowUnauthenticated=false"
        -o "Acquire::https::Verify-Peer=true"
        -o "Acquire::https::Verify-Host=true"
    )
    if [ "$(id -u)" -eq 0 ]; then
        # _apt cannot write into the repo checkout; download as root.
        aptopts+=(-o "APT::Sandbox::User=root")
    fi
    printf 'deb [arch=amd64 signed-by=%s] %s bookworm non-free\n' "$keyring" "$mirror" >"$apt/etc/sources.list"

    _rsetup_log "fetching Debian bookworm non-free libcuda1 $_rsetup_libcuda_version from $mirror (private apt lists in .deps/apt)"
    if ! apt-get "${aptopts[@]}" -q update >"$apt/update.log" 2>&1 ||
       grep -Eq '^(E:|W: GPG error)' "$apt/update.log"; then
        tail -n 20 "$apt/update.log" >&2
        _rsetup_log "apt-get update of $mirror bookworm non-free failed (network, or the archive's signature"
        _rsetup_log "did not verify against $keyring; a keyring without the bookworm key needs a newer"
        _rsetup_log "debian-archive-keyring package)"
        return 1
    fi
    if ! (cd "$apt/debs" && apt-get "${aptopts[@]}" -qq download "libcuda1:amd64=$_rsetup_libcuda_version" >&2); then
        _rsetup_log "could not download libcuda1 $_rsetup_libcuda_version from bookworm non-free (replaced by a newer"
        _rsetup_log "version? then update _rsetup_libcuda_version and _rsetup_libcuda_sha256 in scripts/setup.sh)"
        return 1
    fi
    local deb="$apt/debs/libcuda1_${_rsetup_libcuda_version}_amd64.deb"
    [ -f "$deb" ] || { _rsetup_log "apt-get download libcuda1 produced no $(basename "$deb")"; return 1; }
    if ! _rsetup_sha256_ok "$deb" "$_rsetup_libcuda_sha256" "libcuda1 $_rsetup_libcuda_version"; then
        rm -f "$deb"
        return 1
    fi
    mkdir -p "$deps/libcuda"
    dpkg -x "$deb" "$deps/libcuda"
    _rsetup_log "verified (sha256) and unpacked $(basename "$deb") into .deps/libcuda"
}

# Ubuntu has no Debian archive key by default; its `debian-archive-keyring`
# package (universe) carries it.  Unpack it under .deps; print the keyring.
_rsetup_fetch_debian_keyring() {
    local deps=$1 dir deb k
    dir="$deps/keyring"
    command -v apt-get >/dev/null 2>&1 || return 1
    rm -rf "$dir"
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
    dpkg -x "$deb" "$dir/x" || return 1
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
    local root cargo_bin ptxas libcuda_note ptxas_note
    root=$(_rsetup_repo_root) || return 1
    cargo_bin=$(_rsetup_cargo_bin)
    case ":$PATH:" in
        *":$cargo_bin:"*) ;;
        *) PATH="$cargo_bin:$PATH" ;;
    esac
    export PATH

    export CUDA_LIBRARY_PATH="$root/.deps/cuda"
    if _rsetup_driver_present; then
        libcuda_note="NVIDIA driver"
    else
        case ":${LD_LIBRARY_PATH:-}:" in
            *":$root/.deps/cuda/lib64:"*) ;;
            *) LD_LIBRARY_PATH="$root/.deps/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
        esac
        export LD_LIBRARY_PATH
        libcuda_note="Debian libcuda1, no GPU"
    fi

    # ptxas is optional (SETUP_PTXAS=0). It is not exported: the build and the tests find it under .deps/
    # themselves, so dev.sh and plain cargo see the same environment and do not rebuild each other's work.
    if ptxas=$(_rsetup_find_ptxas "$root"); then
        ptxas_note="ptxas: .deps/nvcc"
    else
        ptxas_note="ptxas: not installed, the build embeds PTX only"
    fi
    _rsetup_log "ready (libcuda: $libcuda_note; $ptxas_note)"
}

_rsetup_cleanup() {
    unset -f _rsetup_log _rsetup_repo_root _rsetup_cargo_bin _rsetup_want_ptxas \
        _rsetup_sha256_ok _rsetup_elf_id _rsetup_driver_candidates \
        _rsetup_driver_present _rsetup_find_driver_libcuda _rsetup_find_ptxas \
        _rsetup_rustup_triple _rsetup_verify_rustup_init _rsetup_fetch_rustup_init \
        _rsetup_install _rsetup_fetch_libcuda_deb _rsetup_fetch_debian_keyring \
        _rsetup_export _rsetup_cleanup
    unset _rsetup_nvcc_default_version _rsetup_nvcc_sha256_x86_64 \
        _rsetup_nvcc_sha256_aarch64 _rsetup_libcuda_version \
        _rsetup_libcuda_sha256 _rsetup_rc
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
    # Sourced: install in a child process (so `set -e` holds there whatever
    # the caller's context), then export here.  The knobs are passed on even
    # when they are plain (unexported) shell variables.  Arguments are not
    # read: a sourcing script's own arguments would leak in.
    _rsetup_rc=0
    SETUP_PTXAS=${SETUP_PTXAS-} DEBIAN_MIRROR=${DEBIAN_MIRROR-} \
        NVCC_WHEEL_VERSION=${NVCC_WHEEL_VERSION-} NVCC_WHEEL_SHA256=${NVCC_WHEEL_SHA256-} \
        _RSETUP_SOURCED=1 bash "${BASH_SOURCE[0]}" || _rsetup_rc=$?
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
    for _rsetup_arg in "$@"; do
        case "$_rsetup_arg" in
            --no-ptxas) SETUP_PTXAS=0 ;;
            -h | --help)
                awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
                exit 0
                ;;
            *)
                _rsetup_log "unknown argument '$_rsetup_arg' (usage: bash scripts/setup.sh [--no-ptxas])"
                exit 2
                ;;
        esac
    done
    unset _rsetup_arg
    _rsetup_install || exit $?
    # A sourcing script logs its own "ready" line after the exports.
    [ -n "${_RSETUP_SOURCED:-}" ] || _rsetup_log "done: plain cargo works in this checkout"
fi
