#!/usr/bin/env bash
# Packages reduce-contract, reduce-builder, reduce-host and kernels-gpu as they would be published, and
# verifies them: cargo builds each of the first three from its own contents, as a dependent crate would get
# it; kernels-gpu, which builds for nvptx64 only (a nightly, -Zbuild-std), is packaged without cargo's host
# build and built here from its package for sm_90 with the kernels' pinned nightly, against the packaged
# reduce-contract, and its PTX must be byte for byte the fresh build's.
#
# reduce-host's package carries the kernels prebuilt (`reduce-host/prebuilt/`: the deflated cubins, the PTX
# and their table), taken from a fresh build of the kernels here, so a dependent crate needs neither the
# nightly nor ptxas. After packaging, every prebuilt file in the package is compared byte for byte with that
# fresh build.
#
#   bash scripts/package.sh      (sources scripts/setup.sh first, which installs what is missing, ptxas too)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

# shellcheck source=scripts/setup.sh
source "$root/scripts/setup.sh"

# A fresh build of the kernels, and where its build script left the images.
out=$(cargo build -p reduce-host --release --message-format=json |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "build-script-executed" and m["package_id"].split("#")[0].endswith("/reduce-host"):
        print(m["out_dir"])
')
[ -n "$out" ] && [ -f "$out/images.rs" ] || { echo "package: no kernel images from the build" >&2; exit 1; }
if ! grep -q 'Kind::Cubin' "$out/images.rs"; then
    echo "package: the build had no ptxas, so it embedded PTX only; a published package carries cubins" >&2
    exit 1
fi

rm -rf reduce-host/prebuilt
mkdir reduce-host/prebuilt
cp "$out/images.rs" reduce-host/prebuilt/
# Only the blobs the table includes.
grep -o '"/[a-z0-9-]*\.bin"' "$out/images.rs" | tr -d '"/' | while read -r blob; do
    cp "$out/$blob" reduce-host/prebuilt/
done

# cargo verifies reduce-host against reduce-contract and reduce-builder (its build dependency) from a
# temporary local registry. A registry crate of one version is taken as immutable: its unpacked source
# ($CARGO_HOME/registry/src/-<hash>/) and its build (fingerprinted by name and version only) would be reused
# from an earlier run of this script, older contents and all. So both go first, and the packages build in a
# target folder of their own.
verify=target/package-verify
for crate in reduce-contract reduce-builder; do
    crate_version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$crate/Cargo.toml" | head -n 1)
    rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate-$crate_version"
    rm -rf "$verify"/debug/.fingerprint/"$crate"-* "$verify"/debug/deps/lib"${crate//-/_}"-* \
        "$verify"/debug/build/"$crate"-*
done

# prebuilt/ is ignored by git (it is a build product), hence --allow-dirty.
cargo package -p reduce-contract -p reduce-builder -p reduce-host --allow-dirty --target-dir "$verify"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' reduce-host/Cargo.toml | head -n 1)
packaged=$verify/package/reduce-host-$version
for f in reduce-host/prebuilt/*; do
    cmp "$out/$(basename "$f")" "$packaged/prebuilt/$(basename "$f")"
done
for f in LICENSE-MIT LICENSE-APACHE README.md; do
    [ -s "$packaged/$f" ] || { echo "package: $f missing from the package" >&2; exit 1; }
done
builder_version=$(sed -n 's/^version = "\(.*\)"/\1/p' reduce-builder/Cargo.toml | head -n 1)
for f in LICENSE-MIT LICENSE-APACHE src/lib.rs; do
    [ -s "$verify/package/reduce-builder-$builder_version/$f" ] ||
        { echo "package: $f missing from reduce-builder's package" >&2; exit 1; }
done

# kernels-gpu: `cargo package` would verify it by building it for the host, which its nightly features and
# nvptx assembly refuse, so it packages without that build (and without a Cargo.lock: cargo would resolve its
# reduce-contract dependency on crates.io for one, and a library's lock file is not used by dependents).
cargo package --manifest-path kernels-gpu/Cargo.toml --no-verify --exclude-lockfile --allow-dirty \
    --target-dir "$verify"
kernels_version=$(sed -n 's/^version = "\(.*\)"/\1/p' kernels-gpu/Cargo.toml | head -n 1)
contract_version=$(sed -n 's/^version = "\(.*\)"/\1/p' reduce-contract/Cargo.toml | head -n 1)
channel=$(sed -n 's/^channel = "\(.*\)"/\1/p' kernels-gpu/rust-toolchain.toml)
# Unpacked outside the repository (whose workspace would otherwise claim it), built in target/.
unpacked=$(mktemp -d "${TMPDIR:-/tmp}/kernels-gpu-package.XXXXXX")
trap 'rm -rf "$unpacked"' EXIT
tar -xzf "$verify/package/kernels-gpu-$kernels_version.crate" -C "$unpacked"
kernels_pkg=$unpacked/kernels-gpu-$kernels_version
for f in LICENSE-MIT LICENSE-APACHE README.md src/lib.rs; do
    [ -s "$kernels_pkg/$f" ] || { echo "package: $f missing from kernels-gpu's package" >&2; exit 1; }
done
# As reduce-builder builds it for reduce-host (its release profile, the PTX ISA, sm_90), with reduce-contract
# taken from its package (cargo unpacked it above) in place of crates.io. (cargo warns that the patch is not
# used in the graph of `core`, which -Zbuild-std resolves separately.)
echo "+ (packaged kernels-gpu) rustup run $channel cargo rustc --release --target nvptx64-nvidia-cuda --features builtin" >&2
(
    cd "$kernels_pkg"
    CARGO_ENCODED_RUSTFLAGS=$(printf -- '-Ctarget-cpu=sm_90\x1f-Ctarget-feature=+ptx78') \
        rustup run "$channel" cargo rustc --release --lib --crate-type cdylib \
        --target nvptx64-nvidia-cuda -Zbuild-std=core --features builtin \
        --target-dir "$root/$verify/kernels-gpu" \
        --config "patch.crates-io.reduce-contract.path=\"$root/$verify/package/reduce-contract-$contract_version\"" \
        --config profile.release.lto=true --config profile.release.opt-level=3 \
        --config profile.release.codegen-units=1 --config profile.release.debug=false \
        --config 'profile.release.panic="abort"'
)
# The fresh build's sm_90 PTX, where reduce-host's build script had reduce-builder put it (`<target>/kernels-gpu`).
fresh_ptx=$out/../../../../kernels-gpu/sm90/nvptx64-nvidia-cuda/release/kernels_gpu.ptx
packaged_ptx=$verify/kernels-gpu/nvptx64-nvidia-cuda/release/kernels_gpu.ptx
entries() { grep -o '^\.visible \.entry [A-Za-z0-9_]*' "$1" | sort; }
if ! diff <(entries "$fresh_ptx") <(entries "$packaged_ptx") >&2; then
    echo "package: the packaged kernels-gpu exports other kernels than the fresh build (< fresh, > package)" >&2
    exit 1
fi
cmp "$fresh_ptx" "$packaged_ptx"
kernel_count=$(entries "$packaged_ptx" | wc -l)
[ "$kernel_count" -gt 0 ] || { echo "package: no kernels in the packaged kernels-gpu's PTX" >&2; exit 1; }

echo "package: reduce-contract, reduce-builder and reduce-host packaged and verified; $(ls reduce-host/prebuilt | wc -l) prebuilt files identical to the fresh build; kernels-gpu packaged, and its package builds the fresh build's PTX ($kernel_count kernels)"
