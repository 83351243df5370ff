//! Finding and running what the kernel build needs: the kernel sources, the pinned nightly (run through
//! rustup, installed with its components when missing) and `ptxas`.
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Components the nightly needs: `core`'s source for `-Zbuild-std`, and the bitcode linker, which calls
/// `llvm-link` from `llvm-tools` (without it the link fails with a bare "llvm-link failed").
const COMPONENTS: [&str; 3] = ["rust-src", "llvm-tools", "llvm-bitcode-linker"];

/// Where the kernel crate, the contract it shares with this one, and the kernels' toolchain pin are.
pub struct KernelSources {
    kernels: PathBuf,
    contract: PathBuf,
}

impl KernelSources {
    /// Beside this crate, as in the repository; `None` in a published package, which carries prebuilt
    /// kernels instead.
    pub fn locate() -> Option<KernelSources> {
        let manifest = PathBuf::from(
            env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"),
        );
        let root = manifest.parent().expect("the crate has a parent folder");
        let sources = KernelSources {
            kernels: root.join("kernels-gpu"),
            contract: root.join("reduce-contract"),
        };
        sources
            .kernels
            .join("Cargo.toml")
            .is_file()
            .then_some(sources)
    }

    pub fn rerun_if_changed(&self) {
        for path in [
            self.kernels.join("src"),
            self.kernels.join("Cargo.toml"),
            self.kernels.join("rust-toolchain.toml"),
            self.contract.join("src"),
            self.contract.join("Cargo.toml"),
        ] {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }

    /// The channel `kernels-gpu/rust-toolchain.toml` pins.
    fn channel(&self) -> String {
        let file = self.kernels.join("rust-toolchain.toml");
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        text.lines()
            .filter_map(|l| l.trim().strip_prefix("channel"))
            .filter_map(|rest| rest.trim().strip_prefix('='))
            .map(|v| v.trim().trim_matches('"').to_owned())
            .next()
            .unwrap_or_else(|| panic!("{} names no channel", file.display()))
    }
}

/// Compiles the kernels to PTX for each arch, the builds running in parallel, and returns the PTX texts.
pub fn build_ptx(sources: &KernelSources, out: &Path, archs: &[u32]) -> Vec<(u32, String)> {
    let channel = sources.channel();
    ensure_toolchain(&channel);
    let children: Vec<_> = archs
        .iter()
        .map(|&arch| {
            let target_dir = kernel_target_dir(out).join(format!("sm{arch}"));
            let child = nightly(&channel, "cargo")
                .current_dir(&sources.kernels)
                .args([
                    "build",
                    "--release",
                    "--target",
                    "nvptx64-nvidia-cuda",
                    "-Zbuild-std=core",
                    "--target-dir",
                ])
                .arg(&target_dir)
                // The arch must reach `core` too, so it goes through the encoded flags, not a per-crate option.
                // PTX ISA 7.8 (CUDA 11.8 drivers and newer) for every arch: the loads use `.L1::no_allocate` (7.4).
                .env(
                    "CARGO_ENCODED_RUSTFLAGS",
                    format!("-Ctarget-cpu=sm_{arch}\x1f-Ctarget-feature=+ptx78"),
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run cargo for the kernels through rustup: {e}"));
            (arch, target_dir, child)
        })
        .collect();
    children
        .into_iter()
        .map(|(arch, target_dir, child)| {
            let done = child.wait_with_output().expect("wait for the kernel build");
            if !done.status.success() {
                panic!(
                    "building kernels-gpu for sm_{arch} with {channel} failed ({}):\n{}",
                    done.status,
                    String::from_utf8_lossy(&done.stderr)
                );
            }
            let ptx = target_dir.join("nvptx64-nvidia-cuda/release/kernels_gpu.ptx");
            let text = std::fs::read_to_string(&ptx).unwrap_or_else(|e| {
                panic!("the kernel build left no PTX at {}: {e}", ptx.display())
            });
            (arch, text)
        })
        .collect()
}

/// Where the nested kernel builds keep their targets: beside this build's profile folders
/// (`<target>/kernels-gpu`), so a debug and a release build of this crate share one kernel build, whatever
/// the OUT_DIR of each. `OUT_DIR` is `<target>/<profile>/build/<crate>-<hash>/out`.
fn kernel_target_dir(out: &Path) -> PathBuf {
    match out.ancestors().nth(4) {
        Some(target) => target.join("kernels-gpu"),
        None => out.join("kernels-gpu"),
    }
}

/// `rustup run <channel> <program>` in an environment cleared of whatever the outer build was told.
fn nightly(channel: &str, program: &str) -> Command {
    let mut cmd = Command::new("rustup");
    cmd.args(["run", channel, program]);
    // Flags, wrappers, target dirs, profile overrides and the outer toolchain are not for the kernels.
    for (key, _) in env::vars_os() {
        let key = key.to_string_lossy();
        let cargo = key.starts_with("CARGO_") && key != "CARGO_HOME";
        let rust =
            key.starts_with("RUSTC") || key.starts_with("RUSTUP_TOOLCHAIN") || key == "RUSTFLAGS";
        if cargo || rust || key == "RUSTDOCFLAGS" || key == "CARGO" {
            cmd.env_remove(key.as_ref());
        }
    }
    cmd
}

fn run(cmd: &mut Command) -> std::io::Result<Output> {
    cmd.stdin(Stdio::null()).output()
}

/// Installs the pinned nightly and its components when they are missing; panics saying exactly what is
/// missing when that is impossible.
fn ensure_toolchain(channel: &str) {
    let how = format!(
        "the kernels need Rust {channel} with {} (`rustup toolchain install {channel} --profile minimal \
         --component {}`); the crate that depends on them builds on any toolchain",
        COMPONENTS.join(", "),
        COMPONENTS.join(" --component ")
    );
    let installed = |c: &mut Command| run(c).is_ok_and(|o| o.status.success());
    if run(Command::new("rustup").arg("--version")).is_err() {
        panic!("rustup is not on the PATH: {how}");
    }
    if !installed(
        nightly(channel, "rustc")
            .arg("--version")
            .env("RUSTUP_AUTO_INSTALL", "0"),
    ) {
        // Worded to stay true when cargo repeats the warning on later, cached builds.
        println!(
            "cargo:warning=the kernels build with Rust {channel}, which the first build installed through rustup"
        );
        let mut install = Command::new("rustup");
        // No self-update: the rustup on the PATH may belong to another home, where updating itself fails.
        install.args([
            "toolchain",
            "install",
            channel,
            "--no-self-update",
            "--profile",
            "minimal",
        ]);
        for c in COMPONENTS {
            install.args(["--component", c]);
        }
        if !installed(&mut install) {
            panic!("could not install the toolchain: {how}");
        }
    }
    let list = run(Command::new("rustup").args([
        "component",
        "list",
        "--installed",
        "--toolchain",
        channel,
    ]))
    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    .unwrap_or_default();
    let missing: Vec<&str> = COMPONENTS
        .into_iter()
        .filter(|c| {
            !list
                .lines()
                .any(|l| l == *c || l.starts_with(&format!("{c}-")))
        })
        .collect();
    if !missing.is_empty() {
        println!(
            "cargo:warning=the kernels' Rust {channel} needs {}, which the first build added through rustup",
            missing.join(", ")
        );
        if !installed(
            Command::new("rustup")
                .args(["component", "add", "--toolchain", channel])
                .args(&missing),
        ) {
            panic!("could not add {}: {how}", missing.join(", "));
        }
    }
}

/// `ptxas`: `$PTXAS`, `$CUDA_PATH/bin`, the `PATH`, `/usr/local/cuda/bin`, then what `scripts/setup.sh`
/// installs in the repository (`.deps/nvcc`). The build reruns when `.deps/` changes, so a ptxas that setup
/// installs later is picked up.
pub fn find_ptxas() -> Option<PathBuf> {
    let runs = |p: &Path| run(Command::new(p).arg("--version")).is_ok_and(|o| o.status.success());
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = env::var_os("PTXAS") {
        let p = PathBuf::from(p);
        assert!(runs(&p), "PTXAS={} does not run", p.display());
        return Some(p);
    }
    if let Some(cuda) = env::var_os("CUDA_PATH") {
        candidates.push(Path::new(&cuda).join("bin/ptxas"));
    }
    candidates.push("ptxas".into());
    candidates.push("/usr/local/cuda/bin/ptxas".into());
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    let deps = manifest.parent()?.join(".deps");
    if deps.is_dir() {
        println!("cargo:rerun-if-changed={}", deps.display());
        if deps.join("nvcc").is_dir() {
            println!("cargo:rerun-if-changed={}", deps.join("nvcc").display());
        }
    }
    let setup = deps.join("nvcc/nvidia");
    if let Ok(dirs) = std::fs::read_dir(&setup) {
        for d in dirs.flatten() {
            candidates.push(d.path().join("bin/ptxas"));
        }
    }
    candidates.into_iter().find(|p| runs(p))
}
