//! Compiles a `no_std` kernel crate for NVIDIA GPUs from a build script, on any stable toolchain.
//!
//! rustc compiles Rust to PTX with its `nvptx64-nvidia-cuda` backend, which needs a nightly (`-Zbuild-std`).
//! The crate that embeds the kernels should not: so its build script runs a nested `cargo` of a pinned
//! nightly through rustup (installing it when missing), once per PTX arch (as many at once as there are
//! cores), then assembles the PTX into cubins with `ptxas` when there is one, and writes a file that
//! `include!`s them all.
//!
//! ```no_run
//! // build.rs of the crate that launches the kernels
//! fn main() -> Result<(), reduce_builder::Error> {
//!     reduce_builder::Builder::new("../my-kernels").build()?;
//!     Ok(())
//! }
//! ```
//!
//! and in that crate, `static KERNELS: reduce_host::custom::KernelImages =
//! reduce_host::include_kernels!("my_kernels");`.
//!
//! The kernel crate is a library (`[lib]`, usually `crate-type = ["rlib"]`) with `#![no_std]`; it is built
//! as a cdylib with the release profile this crate sets (LTO, `opt-level=3`, one codegen unit, no debug
//! info, `panic = "abort"`), whatever its own `[profile.release]` says. It should be a workspace of its own
//! (an empty `[workspace]` table), so that the nested cargo does not take it for a member of the workspace
//! around it.
//!
//! The sm_90 PTX gives the compaction kernels (`select_stable_*`, `select_unordered_*`, `select_flagged_*`,
//! a user's `export_select!` ones included) a `.maxnreg` cap, `reduce_contract::kernels::register_cap`:
//! three of their blocks then fit on an SM where ptxas's own register count leaves room for two.
#![deny(missing_docs)]

mod error;
pub mod ptx;
mod toolchain;

use std::collections::VecDeque;
use std::env;
use std::fmt::Write as _;
use std::fs::File;
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub use error::Error;
use error::io;
pub use toolchain::find_ptxas;

/// The nightly the kernels build with when the kernel crate pins none (`rust-toolchain.toml`) and
/// [`Builder::channel`] is not called. It is the one reduce-host's own kernels are tested with.
pub const NIGHTLY: &str = "nightly-2026-10-01";

/// The PTX arches [`Builder::build`] compiles: sm_75 (Turing), sm_80 (Ampere), sm_90 (Hopper, the newest
/// PTX, which newer GPUs JIT-compile or get cubins from).
const PTX_ARCHS: [u32; 3] = [75, 80, 90];

/// Cubins: (the GPU arch, the PTX arch it is assembled from). A cubin runs on the GPUs of its major
/// version whose minor version is at least its own; sm_100 and sm_120 come from the sm_90 PTX.
const CUBINS: [(u32, u32); 5] = [(75, 75), (80, 80), (90, 90), (100, 90), (120, 90)];

/// The profile every kernel build gets, whatever the kernel crate's `[profile.release]` says: kernels
/// need LTO into one module, full optimization, and `panic = "abort"` (there is no unwinding on a GPU).
const PROFILE: [&str; 5] = [
    "profile.release.lto=true",
    "profile.release.opt-level=3",
    "profile.release.codegen-units=1",
    "profile.release.debug=false",
    "profile.release.panic=\"abort\"",
];

/// Compiles a no_std kernel crate for NVIDIA GPUs and writes an images file the host crate includes.
///
/// Made with [`Builder::new`], configured with [`feature`](Builder::feature) and
/// [`channel`](Builder::channel), run with [`build`](Builder::build) from a build script.
#[derive(Clone, Debug)]
pub struct Builder {
    crate_path: PathBuf,
    features: Vec<String>,
    channel: Option<String>,
    target_dir: Option<PathBuf>,
}

/// What [`Builder::build`] wrote into `OUT_DIR`.
#[derive(Clone, Debug)]
pub struct Built {
    /// `<lib_name>_images.rs`: one expression of type `reduce_host::custom::KernelImages` that embeds
    /// every file below (what `reduce_host::include_kernels!` includes).
    pub images_rs: PathBuf,
    /// The embedded PTX files, `(arch, path)`, NUL-terminated as the driver takes them: sm_90's with
    /// ptxas, every arch's without.
    pub ptx: Vec<(u32, PathBuf)>,
    /// The cubins, `(GPU arch, path)`; empty without ptxas.
    pub cubins: Vec<(u32, PathBuf)>,
}

impl Builder {
    /// `crate_path`: the kernel crate's folder (relative to the calling build script's CARGO_MANIFEST_DIR,
    /// or absolute).
    ///
    /// Relative to `CARGO_MANIFEST_DIR` rather than the working directory, because that is where the
    /// build script's own crate is, whatever folder cargo was started in.
    pub fn new(crate_path: impl AsRef<Path>) -> Builder {
        let path = crate_path.as_ref();
        let base = env::var_os("CARGO_MANIFEST_DIR")
            .map(PathBuf::from)
            .or_else(|| env::current_dir().ok())
            .unwrap_or_default();
        Builder {
            crate_path: normalize(&base.join(path)),
            features: Vec::new(),
            channel: None,
            target_dir: None,
        }
    }

    /// Enables a cargo feature of the kernel crate.
    ///
    /// Features are how one kernel crate serves several host crates: each enables the kernels it
    /// launches, and its PTX holds only those.
    pub fn feature(mut self, name: &str) -> Builder {
        self.features.push(name.to_owned());
        self
    }

    /// The nightly channel (default: the kernel crate's rust-toolchain.toml channel if it has one, else
    /// [`NIGHTLY`]).
    ///
    /// A pinned nightly, because the nvptx backend and `-Zbuild-std` change between nightlies: a kernel
    /// crate that builds today should build the same next year.
    pub fn channel(mut self, channel: &str) -> Builder {
        self.channel = Some(channel.to_owned());
        self
    }

    /// Where the nested builds keep their targets, one folder per arch (`sm<arch>`) under it. A relative
    /// path is taken under the outer build's target folder (the one holding `debug/` and `release/`).
    ///
    /// Default: `reduce-builder/<lib_name>`, so the debug and the release build of the host crate share
    /// one kernel build, and `cargo clean` removes it.
    pub fn target_dir(mut self, dir: impl AsRef<Path>) -> Builder {
        self.target_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// The kernel crate's folder, as the builds use it (absolute).
    pub fn crate_path(&self) -> &Path {
        &self.crate_path
    }

    /// Prints `cargo:rerun-if-changed` for the kernel crate's `src/`, `Cargo.toml` and
    /// `rust-toolchain.toml` (if it has one), and for the `src/` and `Cargo.toml` of its path dependencies, so the
    /// build script (and with it the kernel build) reruns when the kernels change. [`build`](Self::build)
    /// calls it; a caller of [`build_ptx`](Self::build_ptx) calls it itself.
    pub fn rerun_if_changed(&self) {
        let k = &self.crate_path;
        let mut paths = vec![k.join("src"), k.join("Cargo.toml")];
        // Only when it is there: cargo counts a watched file that does not exist as changed, so every
        // cargo command would rebuild the kernels of a crate without one.
        let toolchain = k.join("rust-toolchain.toml");
        if toolchain.exists() {
            paths.push(toolchain);
        }
        if let Ok(text) = std::fs::read_to_string(k.join("Cargo.toml")) {
            for dep in manifest::path_dependencies(&text) {
                let dir = normalize(&k.join(dep));
                paths.push(dir.join("src"));
                paths.push(dir.join("Cargo.toml"));
            }
        }
        for p in paths {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }

    /// The library's name (the package name with `-` as `_`, or `[lib] name`): the stem of the PTX and
    /// of the files [`build`](Self::build) writes.
    ///
    /// # Errors
    ///
    /// [`Error::KernelCrateMissing`] when there is no `Cargo.toml` with a package name.
    pub fn lib_name(&self) -> Result<String, Error> {
        let missing = || Error::KernelCrateMissing {
            path: self.crate_path.clone(),
        };
        let text =
            std::fs::read_to_string(self.crate_path.join("Cargo.toml")).map_err(|_| missing())?;
        manifest::lib_name(&text).ok_or_else(missing)
    }

    /// The channel the kernels build with: [`channel`](Self::channel), else the kernel crate's
    /// `rust-toolchain.toml`, else [`NIGHTLY`].
    pub fn resolved_channel(&self) -> String {
        if let Some(c) = &self.channel {
            return c.clone();
        }
        std::fs::read_to_string(self.crate_path.join("rust-toolchain.toml"))
            .ok()
            .and_then(|t| toolchain::pinned_channel(&t))
            .unwrap_or_else(|| NIGHTLY.to_owned())
    }

    /// Builds: PTX for sm_75, sm_80, sm_90 (nested builds, as many at once as the machine has cores), and
    /// with ptxas, cubins for sm_75, sm_80, sm_90, sm_100 (from the sm_90 PTX), sm_120 (from sm_90 PTX),
    /// warning once (cargo:warning) when ptxas is missing. Writes into OUT_DIR: `<lib_name>-sm<arch>.cubin`
    /// files, `<lib_name>-sm90.ptx` (NUL-terminated: the driver takes NUL-terminated PTX; without ptxas, the PTX
    /// for all three archs), and `<lib_name>_images.rs`. Prints cargo:rerun-if-changed for the kernel
    /// crate's src/, Cargo.toml, rust-toolchain.toml (if any), and its path dependencies.
    ///
    /// Cubins, because a GPU that has one loads machine code at once, where PTX is JIT-compiled by the
    /// driver the first time each process loads it. Without ptxas the build still succeeds.
    ///
    /// # Errors
    ///
    /// Any [`Error`]: each says what to fix.
    pub fn build(self) -> Result<Built, Error> {
        let out = env::var_os("OUT_DIR").map(PathBuf::from).ok_or_else(|| {
            io("OUT_DIR is not set (reduce_builder::Builder::build runs in a build script)")(
                std::io::Error::from(std::io::ErrorKind::NotFound),
            )
        })?;
        self.rerun_if_changed();
        let lib = self.lib_name()?;
        let ptx = self.build_ptx(&out, &PTX_ARCHS)?;
        let ptx_of = |arch: u32| &ptx.iter().find(|(a, _)| *a == arch).expect("built").1;

        // Files of an earlier build (a PTX-only one, before ptxas was installed) must not linger.
        let ours = |name: &str| {
            name.strip_prefix(&format!("{lib}-sm"))
                .is_some_and(|rest| rest.ends_with(".ptx") || rest.ends_with(".cubin"))
        };
        for entry in std::fs::read_dir(&out).map_err(io(format!("list {}", out.display())))? {
            let entry = entry.map_err(io(format!("list {}", out.display())))?;
            if ours(&entry.file_name().to_string_lossy()) {
                std::fs::remove_file(entry.path())
                    .map_err(io(format!("remove {}", entry.path().display())))?;
            }
        }

        let mut built = Built {
            images_rs: out.join(format!("{lib}_images.rs")),
            ptx: Vec::new(),
            cubins: Vec::new(),
        };
        let embedded_ptx: &[u32] = match find_ptxas() {
            Some(ptxas) => {
                built.cubins = assemble(&ptxas, &lib, &out, &ptx)?;
                &[90]
            }
            None => {
                println!(
                    "cargo:warning=ptxas not found (set PTXAS or CUDA_PATH): embedding the PTX of {lib} only. \
                     It works, but the driver JIT-compiles it the first time each process loads it."
                );
                &PTX_ARCHS
            }
        };
        for &arch in embedded_ptx {
            let path = out.join(format!("{lib}-sm{arch}.ptx"));
            let mut bytes = ptx_of(arch).clone().into_bytes();
            bytes.push(0); // the driver takes NUL-terminated PTX
            std::fs::write(&path, bytes).map_err(io(format!("write {}", path.display())))?;
            built.ptx.push((arch, path));
        }
        let text = images_rs(&lib, &built.cubins, &built.ptx);
        std::fs::write(&built.images_rs, text)
            .map_err(io(format!("write {}", built.images_rs.display())))?;
        Ok(built)
    }

    /// The lower layer reduce-host uses: build the PTX texts only (no files, no images.rs):
    /// `Vec<(arch, String)>`, in the order of `archs`.
    ///
    /// Installs the nightly and its components first when they are missing (saying so once, in the build
    /// that installed them). `out_dir` is the build script's `OUT_DIR`: the nested builds' targets go
    /// under the target folder it is in (see [`target_dir`](Self::target_dir)). It prints no
    /// `rerun-if-changed` of the kernel sources: see [`rerun_if_changed`](Self::rerun_if_changed).
    ///
    /// # Errors
    ///
    /// [`Error::KernelCrateMissing`], [`Error::NoRustup`], [`Error::ToolchainInstall`],
    /// [`Error::Compile`] (the first arch that fails), [`Error::NoPtx`], [`Error::Io`].
    pub fn build_ptx(&self, out_dir: &Path, archs: &[u32]) -> Result<Vec<(u32, String)>, Error> {
        let lib = self.lib_name()?;
        let channel = self.resolved_channel();
        let installed = toolchain::ensure_toolchain(&channel)?;
        toolchain::say_installed(out_dir, &channel, &installed);
        let root = self.nested_target_root(out_dir, &lib);
        // As many nested builds at once as the machine has cores, not one per arch: each LTO build of the
        // kernel crate peaks at 4–6 GB, and a workspace with two kernel crates (the library's and
        // `examples/custom-op`'s) runs two build scripts side by side; six builds at once on two cores
        // and 23 GB ran out of memory and the kernel was killed (2026-12-07). The next starts as one
        // ends; each build's output goes to files beside its target, which no pipe's limit can stall
        // while another is waited on.
        let width = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spawn = |arch: u32| -> Result<(u32, PathBuf, Child), Error> {
            let target_dir = root.join(format!("sm{arch}"));
            std::fs::create_dir_all(&target_dir)
                .map_err(io(format!("create {}", target_dir.display())))?;
            let log = |name: &str| {
                let path = target_dir.join(name);
                File::create(&path).map_err(io(format!("create {}", path.display())))
            };
            let mut cmd = toolchain::nightly(&channel, "cargo");
            cmd.current_dir(&self.crate_path)
                .args(["rustc", "--release", "--lib", "--crate-type", "cdylib"])
                .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
                .arg("--target-dir")
                .arg(&target_dir);
            if !self.features.is_empty() {
                cmd.args(["--features", &self.features.join(",")]);
            }
            for setting in PROFILE {
                cmd.args(["--config", setting]);
            }
            // The arch must reach `core` too, so it goes through the encoded flags, not a per-crate
            // option. PTX ISA 7.8 (CUDA 11.8 drivers and newer) for every arch.
            cmd.env(
                "CARGO_ENCODED_RUSTFLAGS",
                format!("-Ctarget-cpu=sm_{arch}\x1f-Ctarget-feature=+ptx78"),
            )
            .stdin(Stdio::null())
            .stdout(log("build-stdout.txt")?)
            .stderr(log("build-stderr.txt")?);
            let child = cmd
                .spawn()
                .map_err(io(format!("run `rustup run {channel} cargo`")))?;
            Ok((arch, target_dir, child))
        };
        // Oldest first: the builds take about as long as each other, and the results stay in `archs` order.
        let mut running = VecDeque::new();
        // (arch, target, exit status): every build waited for before the first failure is reported, so
        // that no nested cargo outlives this one.
        let mut done = Vec::new();
        let mut failed = None;
        for &arch in archs {
            if running.len() == width {
                let (arch, dir, mut child): (u32, PathBuf, Child) =
                    running.pop_front().expect("full");
                done.push((arch, dir, child.wait()));
            }
            match spawn(arch) {
                Ok(child) => running.push_back(child),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        for (arch, dir, mut child) in running {
            done.push((arch, dir, child.wait()));
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let mut ptx = Vec::new();
        for (arch, dir, status) in done {
            let status = status.map_err(io("wait for the kernel build"))?;
            if !status.success() {
                let stderr = std::fs::read(dir.join("build-stderr.txt")).unwrap_or_default();
                return Err(Error::Compile {
                    crate_path: self.crate_path.clone(),
                    arch,
                    stderr: rustc_message(&String::from_utf8_lossy(&stderr)),
                });
            }
            let path = dir
                .join("nvptx64-nvidia-cuda/release")
                .join(format!("{lib}.ptx"));
            let text = std::fs::read_to_string(&path).map_err(|_| Error::NoPtx { path })?;
            let cap = |entry: &str| reduce_contract::kernels::register_cap(entry, arch);
            let text = ptx::cap_registers(&text, cap).map_err(|e| {
                io(format!("the sm_{arch} PTX of {lib}"))(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    e,
                ))
            })?;
            ptx.push((arch, text));
        }
        Ok(ptx)
    }

    /// `<target>/<dir>`: beside the outer build's profile folders, whatever the OUT_DIR of each profile.
    /// `OUT_DIR` is `<target>/<profile>/build/<crate>-<hash>/out`.
    fn nested_target_root(&self, out_dir: &Path, lib: &str) -> PathBuf {
        let dir = match &self.target_dir {
            Some(d) => d.clone(),
            None => Path::new("reduce-builder").join(lib),
        };
        if dir.is_absolute() {
            return dir;
        }
        match out_dir.ancestors().nth(4) {
            Some(target) => target.join(dir),
            None => out_dir.join(dir),
        }
    }
}

/// The nested cargo's stderr without its progress lines ("Compiling", "Blocking waiting for file lock"):
/// what is left is rustc's message.
fn rustc_message(stderr: &str) -> String {
    const PROGRESS: [&str; 8] = [
        "Compiling ",
        "Blocking ",
        "Finished ",
        "Updating ",
        "Locking ",
        "Downloading ",
        "Downloaded ",
        "Adding ",
    ];
    stderr
        .lines()
        .filter(|l| !PROGRESS.iter().any(|p| l.trim_start().starts_with(p)))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Assembles the cubins ([`CUBINS`]) into `out`, all at once.
fn assemble(
    ptxas: &Path,
    lib: &str,
    out: &Path,
    ptx: &[(u32, String)],
) -> Result<Vec<(u32, PathBuf)>, Error> {
    // ptxas reads files: each PTX once, without the NUL the embedded copy ends in.
    let inputs = out.join("reduce-builder-ptxas");
    std::fs::create_dir_all(&inputs).map_err(io(format!("create {}", inputs.display())))?;
    let input_of = |arch: u32| inputs.join(format!("{lib}-sm{arch}.ptx"));
    for (arch, text) in ptx {
        let input = input_of(*arch);
        std::fs::write(&input, text).map_err(io(format!("write {}", input.display())))?;
    }
    let mut runs = Vec::new();
    for (gpu, source) in CUBINS {
        let input = input_of(source);
        let cubin = out.join(format!("{lib}-sm{gpu}.cubin"));
        let child = Command::new(ptxas)
            .arg(format!("-arch=sm_{gpu}"))
            .arg("-O3")
            .arg(&input)
            .arg("-o")
            .arg(&cubin)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        runs.push((gpu, source, cubin, child));
    }
    let mut cubins = Vec::new();
    let mut first_error = None;
    for (gpu, source, cubin, child) in runs {
        let failure = match child.and_then(|c| c.wait_with_output()) {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(String::from_utf8_lossy(&o.stderr).into_owned()),
            Err(e) => Some(format!("cannot run {}: {e}", ptxas.display())),
        };
        match failure {
            None => cubins.push((gpu, cubin)),
            Some(message) => {
                first_error.get_or_insert(Error::Ptxas {
                    arch: gpu,
                    ptx_arch: source,
                    message,
                });
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(cubins),
    }
}

/// The text of `<lib_name>_images.rs`: one expression of type `reduce_host::custom::KernelImages`, the
/// cubins then the PTX, each file included by its absolute path.
fn images_rs(lib: &str, cubins: &[(u32, PathBuf)], ptx: &[(u32, PathBuf)]) -> String {
    // Forward slashes (a Windows path's backslashes would be escapes) and `{:?}` quoting.
    let quoted = |p: &Path| format!("{:?}", p.to_string_lossy().replace('\\', "/"));
    let mut s = format!(
        "// Generated by reduce-builder.\nreduce_host::custom::KernelImages::new({lib:?}, &[\n"
    );
    for (arch, path) in cubins {
        writeln!(
            s,
            "    reduce_host::custom::Embedded::cubin({arch}, include_bytes!({})),",
            quoted(path)
        )
        .unwrap();
    }
    for (arch, path) in ptx {
        writeln!(
            s,
            "    reduce_host::custom::Embedded::ptx({arch}, include_bytes!({})),",
            quoted(path)
        )
        .unwrap();
    }
    s.push_str("])\n");
    s
}

/// `a/b/../c` as `a/c`, lexically (the paths printed for cargo read better, and compare equal).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Just enough of `Cargo.toml` to name the library and find path dependencies, std only.
mod manifest {
    /// `key = value` of a TOML line, or `None`.
    fn key_value(line: &str) -> Option<(&str, &str)> {
        let (k, v) = line.split_once('=')?;
        Some((k.trim().trim_matches('"'), v.trim()))
    }

    /// A basic or literal TOML string's contents.
    fn string(value: &str) -> Option<String> {
        let v = value.split('#').next()?.trim();
        let inner = v
            .strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))?;
        Some(inner.to_owned())
    }

    /// The sections and their `key = value` lines, comments dropped.
    fn lines(text: &str) -> impl Iterator<Item = (String, &str)> {
        let mut section = String::new();
        text.lines().filter_map(move |line| {
            let line = line.trim();
            if line.starts_with('#') || line.is_empty() {
                return None;
            }
            if let Some(rest) = line.strip_prefix('[') {
                section = rest
                    .split(']')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .replace([' ', '"'], "");
                return None;
            }
            Some((section.clone(), line))
        })
    }

    /// `[lib] name`, else `[package] name` with `-` as `_`.
    pub(super) fn lib_name(text: &str) -> Option<String> {
        let mut package = None;
        let mut lib = None;
        for (section, line) in lines(text) {
            let Some(("name", value)) = key_value(line) else {
                continue;
            };
            match section.as_str() {
                "package" => package = string(value),
                "lib" => lib = string(value),
                _ => {}
            }
        }
        lib.or_else(|| package.map(|p| p.replace('-', "_")))
    }

    /// The `path` of every dependency given as one: `dep = { path = "..." }`, or `path = "..."` in a
    /// `[dependencies.dep]` table.
    pub(super) fn path_dependencies(text: &str) -> Vec<String> {
        let mut paths = Vec::new();
        for (section, line) in lines(text) {
            if section.ends_with("dependencies") {
                let Some((_, value)) = key_value(line) else {
                    continue;
                };
                let Some(table) = value.strip_prefix('{') else {
                    continue;
                };
                let table = table.split('}').next().unwrap_or("");
                for field in table.split(',') {
                    if let Some(("path", v)) = key_value(field) {
                        paths.extend(string(v));
                    }
                }
            } else if section.contains("dependencies.") {
                if let Some(("path", v)) = key_value(line) {
                    paths.extend(string(v));
                }
            }
        }
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = r#"
[workspace]

[package]
name = "my-kernels"
version = "0.1.0"

[dependencies]
reduce-contract = { path = "../reduce-contract", version = "0.1" }
other = "1"

[dependencies.shared]
path = "../shared" # a table of its own

[lib]
crate-type = ["rlib"]
path = "src/lib.rs"
"#;

    #[test]
    fn the_manifest_names_the_library_and_its_path_dependencies() {
        assert_eq!(manifest::lib_name(MANIFEST).as_deref(), Some("my_kernels"));
        let renamed = format!("{MANIFEST}name = \"kern\"\n");
        assert_eq!(manifest::lib_name(&renamed).as_deref(), Some("kern"));
        assert_eq!(
            manifest::path_dependencies(MANIFEST),
            ["../reduce-contract", "../shared"]
        );
        assert_eq!(manifest::lib_name("[dependencies]\nname = \"x\"\n"), None);
    }

    #[test]
    fn the_images_file_is_one_expression_that_includes_every_file() {
        let cubins = [
            (75, PathBuf::from("/t/out/k-sm75.cubin")),
            (120, PathBuf::from("/t/out/k-sm120.cubin")),
        ];
        let ptx = [(90, PathBuf::from(r"C:\t\out\k-sm90.ptx"))];
        assert_eq!(
            images_rs("k", &cubins, &ptx),
            "// Generated by reduce-builder.\n\
             reduce_host::custom::KernelImages::new(\"k\", &[\n    \
             reduce_host::custom::Embedded::cubin(75, include_bytes!(\"/t/out/k-sm75.cubin\")),\n    \
             reduce_host::custom::Embedded::cubin(120, include_bytes!(\"/t/out/k-sm120.cubin\")),\n    \
             reduce_host::custom::Embedded::ptx(90, include_bytes!(\"C:/t/out/k-sm90.ptx\")),\n\
             ])\n"
        );
    }

    #[test]
    fn nested_targets_sit_beside_the_profile_folders() {
        let out = Path::new("/w/target/release/build/host-0123/out");
        let b = Builder::new("/w/kernels");
        assert_eq!(
            b.nested_target_root(out, "k"),
            Path::new("/w/target/reduce-builder/k")
        );
        let b = b.target_dir("kernels-gpu");
        assert_eq!(
            b.nested_target_root(out, "k"),
            Path::new("/w/target/kernels-gpu")
        );
        assert_eq!(
            normalize(Path::new("/w/host/../kernels/./src")),
            Path::new("/w/kernels/src")
        );
    }

    #[test]
    fn a_compile_error_keeps_rustc_and_drops_cargo_progress() {
        let stderr = "    Blocking waiting for file lock on package cache\n   Compiling k v0.1.0 (/w/k)\n\
                      error[E0425]: cannot find value `x`\n  --> src/lib.rs:2:5\n";
        assert_eq!(
            rustc_message(stderr),
            "error[E0425]: cannot find value `x`\n  --> src/lib.rs:2:5\n"
        );
    }

    #[test]
    fn errors_debug_print_their_message() {
        let e = Error::Compile {
            crate_path: "/w/kernels".into(),
            arch: 80,
            stderr: "error[E0425]: cannot find value `x`\n".into(),
        };
        let text = "the kernel crate /w/kernels does not compile for sm_80:\nerror[E0425]: cannot find value `x`";
        assert_eq!(e.to_string(), text);
        assert_eq!(format!("{e:?}"), text);
    }
}
