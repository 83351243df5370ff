#!/usr/bin/env bash
# Packages reduce-contract, reduce-builder and reduce-host as they would be published, and verifies them:
# cargo builds each package from its own contents, as a dependent crate would get it.
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
echo "package: reduce-contract, reduce-builder and reduce-host packaged and verified; $(ls reduce-host/prebuilt | wc -l) prebuilt files identical to the fresh build"
