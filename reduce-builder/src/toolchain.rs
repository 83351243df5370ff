//! Finding and running what the kernel build needs: the pinned nightly (run through rustup, installed with
//! its components when missing) and `ptxas`.
use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::Error;

/// Components the nightly needs: `core`'s source for `-Zbuild-std`, and the bitcode linker, which calls
/// `llvm-link` from `llvm-tools` (without it the link fails with a bare "llvm-link failed").
const COMPONENTS: [&str; 3] = ["rust-src", "llvm-tools", "llvm-bitcode-linker"];

/// The channel a `rust-toolchain.toml` pins, if it names one.
pub(crate) fn pinned_channel(toolchain_toml: &str) -> Option<String> {
    toolchain_toml
        .lines()
        .filter_map(|l| l.trim().strip_prefix("channel"))
        .filter_map(|rest| rest.trim().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .find(|v| !v.is_empty())
}

/// `rustup run <channel> <program>` in an environment cleared of whatever the outer build was told.
pub(crate) fn nightly(channel: &str, program: &str) -> Command {
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

/// The command that installs `channel` with `components`, as the errors spell it for the user.
fn install_command(channel: &str, components: &[&str]) -> String {
    let mut s = format!("rustup toolchain install {channel} --profile minimal");
    for c in components {
        s.push_str(" --component ");
        s.push_str(c);
    }
    s
}

/// A lock on installing `channel`, held while it lives: a folder made atomically in the temp folder.
///
/// Cargo runs build scripts side by side, and a workspace with two kernel crates (the library's and a
/// user's, say `examples/custom-op`) has two scripts that find the nightly missing at once on a fresh machine.
/// Two `rustup toolchain install`s into one rustup home then collide: the second fails reading the first's
/// half-downloaded files ("could not read downloaded file"). With the lock the second waits, finds the
/// toolchain installed, and installs nothing.
struct InstallLock(Option<PathBuf>);

impl InstallLock {
    /// A lock older than this was left by a build that was killed, where its holder's process cannot be
    /// looked up (no `/proc`): it is taken over.
    const STALE: Duration = Duration::from_secs(30 * 60);

    fn acquire(channel: &str) -> InstallLock {
        let path = env::temp_dir().join(format!("reduce-builder-install-{channel}.lock"));
        loop {
            match std::fs::create_dir(&path) {
                Ok(()) => {
                    // Who holds it, so a waiter can tell a lock left by a killed build.
                    let _ = std::fs::write(path.join("pid"), std::process::id().to_string());
                    return InstallLock(Some(path));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if Self::abandoned(&path) {
                        let _ = std::fs::remove_dir_all(&path);
                    } else {
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
                // No writable temp folder: go on unlocked, as before the lock existed.
                Err(_) => return InstallLock(None),
            }
        }
    }
}

impl InstallLock {
    /// Whether the lock at `path` was left by a process that is gone: its holder's `/proc` entry is
    /// missing (Linux), or, where that cannot be told, the lock is older than [`Self::STALE`].
    fn abandoned(path: &Path) -> bool {
        let holder = std::fs::read_to_string(path.join("pid")).ok();
        let proc = Path::new("/proc/self").exists();
        match holder.and_then(|p| p.trim().parse::<u32>().ok()) {
            Some(pid) if proc => !Path::new(&format!("/proc/{pid}")).exists(),
            // Made but its pid not written yet (or unreadable): judge by age.
            _ => std::fs::metadata(path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > Self::STALE),
        }
    }
}

impl Drop for InstallLock {
    fn drop(&mut self) {
        if let Some(path) = &self.0 {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}

/// Whether `channel` runs `rustc` without installing anything.
fn present(channel: &str) -> bool {
    run(nightly(channel, "rustc")
        .arg("--version")
        .env("RUSTUP_AUTO_INSTALL", "0"))
    .is_ok_and(|o| o.status.success())
}

/// Installs the pinned nightly and its components when they are missing. Returns what it installed (empty
/// when nothing was missing), for the caller to say so once. Concurrent build scripts take turns
/// ([`InstallLock`]).
pub(crate) fn ensure_toolchain(channel: &str) -> Result<Vec<String>, Error> {
    let failed = |what: String, output: std::io::Result<Output>| Error::ToolchainInstall {
        channel: channel.to_owned(),
        what,
        message: match output {
            Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_owned(),
            Err(e) => e.to_string(),
        },
        fix: install_command(channel, &COMPONENTS),
    };
    if run(Command::new("rustup").arg("--version")).is_err() {
        return Err(Error::NoRustup);
    }
    let mut installed = Vec::new();
    let _lock = InstallLock::acquire(channel);
    if !present(channel) {
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
        let done = run(&mut install);
        if !done.as_ref().is_ok_and(|o| o.status.success()) {
            return Err(failed(format!("the toolchain {channel}"), done));
        }
        installed.push(format!("Rust {channel}"));
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
        let done = run(Command::new("rustup")
            .args(["component", "add", "--toolchain", channel])
            .args(&missing));
        if !done.as_ref().is_ok_and(|o| o.status.success()) {
            return Err(failed(missing.join(", "), done));
        }
        installed.extend(missing.iter().map(|c| (*c).to_owned()));
    }
    Ok(installed)
}

/// Says once, in the build that did it, that the toolchain or its components were installed.
///
/// Cargo keeps a build script's output and replays its `cargo:warning` lines on every later cargo command
/// that finds the script's run fresh (a `cargo build`, `cargo test`, `cargo clippy` with nothing to rerun),
/// so a warning printed only in the install branch still shows on every command after it. So the warning
/// comes with a `rerun-if-changed` on a stamp written now, after the script started: cargo compares such
/// paths with the time the script started, so the next cargo command reruns the script once, that run
/// installs nothing, says nothing, and its output (with neither the warning nor the stamp) is what cargo
/// keeps from then on.
pub(crate) fn say_installed(out_dir: &Path, channel: &str, installed: &[String]) {
    if installed.is_empty() {
        return;
    }
    println!(
        "cargo:warning=installed {} through rustup: the kernels build with Rust {channel} (the crate that \
         embeds them builds on any toolchain)",
        installed.join(", ")
    );
    let stamp = out_dir.join(format!("reduce-builder-installed-{channel}.stamp"));
    if std::fs::write(&stamp, installed.join("\n")).is_ok() {
        println!("cargo:rerun-if-changed={}", stamp.display());
    }
}

/// Finds `ptxas`, in this order: `$PTXAS`, `$CUDA_PATH/bin`, the `PATH`, `/usr/local/cuda/bin`, then what
/// reduce's `scripts/setup.sh` installs (`.deps/nvcc/nvidia/*/bin/ptxas`) in `CARGO_MANIFEST_DIR` or any
/// folder above it, so a crate inside a repository that ran setup finds that repository's ptxas.
///
/// Prints `cargo:rerun-if-env-changed` for `PTXAS` and `CUDA_PATH`, and `cargo:rerun-if-changed` for the
/// `.deps` folders it looks in, so the build reruns when setup installs a ptxas later.
///
/// # Panics
///
/// When `PTXAS` is set to a program that does not run: that is a mistake to fix, not a reason to build
/// without cubins.
pub fn find_ptxas() -> Option<PathBuf> {
    println!("cargo:rerun-if-env-changed=PTXAS");
    println!("cargo:rerun-if-env-changed=CUDA_PATH");
    let runs = |p: &Path| run(Command::new(p).arg("--version")).is_ok_and(|o| o.status.success());
    if let Some(p) = env::var_os("PTXAS") {
        let p = PathBuf::from(p);
        assert!(runs(&p), "PTXAS={} does not run", p.display());
        return Some(p);
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(cuda) = env::var_os("CUDA_PATH") {
        candidates.push(Path::new(&cuda).join("bin/ptxas"));
    }
    candidates.push("ptxas".into());
    candidates.push("/usr/local/cuda/bin/ptxas".into());
    if let Some(manifest) = env::var_os("CARGO_MANIFEST_DIR") {
        for dir in Path::new(&manifest).ancestors() {
            let deps = dir.join(".deps");
            if !deps.is_dir() {
                continue;
            }
            println!("cargo:rerun-if-changed={}", deps.display());
            if deps.join("nvcc").is_dir() {
                println!("cargo:rerun-if-changed={}", deps.join("nvcc").display());
            }
            let mut installed: Vec<PathBuf> = std::fs::read_dir(deps.join("nvcc/nvidia"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|d| d.path().join("bin/ptxas"))
                .collect();
            installed.sort();
            candidates.extend(installed);
        }
    }
    candidates.into_iter().find(|p| runs(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_is_read_from_rust_toolchain_toml() {
        let toml = "# pinned\n[toolchain]\nchannel = \"nightly-2026-10-01\"\ncomponents = [\"rust-src\"]\n";
        assert_eq!(pinned_channel(toml).as_deref(), Some("nightly-2026-10-01"));
        assert_eq!(pinned_channel("[toolchain]\nprofile = \"minimal\"\n"), None);
    }

    #[test]
    fn an_install_lock_is_exclusive_and_one_left_by_a_dead_process_is_taken_over() {
        let channel = format!("test-{}", std::process::id());
        let first = InstallLock::acquire(&channel);
        let path = first.0.clone().expect("temp is writable");
        assert!(!InstallLock::abandoned(&path), "held by this live process");
        drop(first);
        assert!(!path.exists());
        // A lock whose holder is gone (no process has pid 2^32 − 1) is taken over at once.
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("pid"), "4294967295").unwrap();
        let again = InstallLock::acquire(&channel);
        assert!(again.0.is_some());
        drop(again);
        assert!(!path.exists());
    }

    #[test]
    fn the_install_command_names_every_component() {
        assert_eq!(
            install_command("nightly-2026-10-01", &COMPONENTS),
            "rustup toolchain install nightly-2026-10-01 --profile minimal --component rust-src \
             --component llvm-tools --component llvm-bitcode-linker"
        );
    }
}
