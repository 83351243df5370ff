//! Compiles `kernels-gpu` to PTX with rustc's `nvptx64-nvidia-cuda` backend, once per supported arch, and
//! leaves `kernels_sm{75,80,90}.ptx` in `OUT_DIR` for `src/ptx.rs` to embed.
//!
//! Cargo reruns this only when the kernel sources, their manifest or the pinned toolchain change, so an
//! unchanged tree does not rebuild the PTX.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Compute capabilities a module is built for; keep in step with `src/ptx.rs`.
const ARCHS: [u32; 3] = [75, 80, 90];

fn main() {
    let manifest =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let kernels = manifest.join("..").join("kernels-gpu");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for path in ["src", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", kernels.join(path).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        manifest.join("..").join("rust-toolchain.toml").display()
    );

    for arch in ARCHS {
        let target_dir = out.join(format!("kernels-sm{arch}"));
        build(&kernels, &target_dir, arch);
        let ptx = target_dir
            .join("nvptx64-nvidia-cuda")
            .join("release")
            .join("kernels_gpu.ptx");
        let dest = out.join(format!("kernels_sm{arch}.ptx"));
        std::fs::copy(&ptx, &dest)
            .unwrap_or_else(|e| panic!("kernel build left no PTX at {}: {e}", ptx.display()));
    }
}

/// Runs the nested `cargo build` of the kernel crate for one arch, in a clean environment.
fn build(kernels: &Path, target_dir: &Path, arch: u32) {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(kernels)
        .args([
            "build",
            "--release",
            "--target",
            "nvptx64-nvidia-cuda",
            "-Zbuild-std=core",
            "--target-dir",
        ])
        .arg(target_dir)
        // The arch must reach `core` too, so it goes through the encoded flags, not a per-crate option.
        // PTX ISA 7.8 (CUDA 11.8 drivers and newer) for every arch: the loads use `.L1::no_allocate` (7.4).
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            format!("-Ctarget-cpu=sm_{arch}\x1f-Ctarget-feature=+ptx78"),
        );
    // Whatever the outer build was told (flags, wrappers, target dir, profile overrides) is not for PTX.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        let inherited_cargo = key.starts_with("CARGO_") && key != "CARGO_HOME";
        let inherited_rustc =
            key.starts_with("RUSTC") || key == "RUSTFLAGS" || key == "RUSTDOCFLAGS";
        if (inherited_cargo && key != "CARGO_ENCODED_RUSTFLAGS") || inherited_rustc {
            cmd.env_remove(key.as_ref());
        }
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo for the kernels: {e}"));
    if !status.success() {
        panic!(
            "building kernels-gpu for sm_{arch} failed ({status}); the pinned nightly with rust-src and \
             llvm-bitcode-linker is needed: run `rustup toolchain install` in the repository root"
        );
    }
}
