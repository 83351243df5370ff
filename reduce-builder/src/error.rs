//! What can stop a kernel build, each error a message that names its fix.
use std::fmt;
use std::path::PathBuf;

/// Why a kernel build failed. Each message says what to do about it.
///
/// `Debug` prints the same message as `Display`, so a build script's `fn main() -> Result<(), Error>`
/// shows it as it is, not as a struct dump.
#[non_exhaustive]
pub enum Error {
    /// No kernel crate at the path given to [`Builder::new`](crate::Builder::new): no `Cargo.toml`, or one
    /// without a `[package]` name.
    KernelCrateMissing {
        /// The folder that was looked in.
        path: PathBuf,
    },
    /// `rustup` is not on the `PATH`; it runs (and installs) the pinned nightly.
    NoRustup,
    /// rustup could not install the nightly or one of its components.
    ToolchainInstall {
        /// The channel, say `nightly-2026-10-01`.
        channel: String,
        /// What was being installed.
        what: String,
        /// rustup's message.
        message: String,
        /// The command that installs it all by hand.
        fix: String,
    },
    /// The kernel crate does not compile for an arch.
    Compile {
        /// The kernel crate's folder.
        crate_path: PathBuf,
        /// The arch, say 90 for sm_90.
        arch: u32,
        /// What cargo and rustc said.
        stderr: String,
    },
    /// The nested build succeeded but left no PTX where cargo puts a cdylib.
    NoPtx {
        /// Where the PTX was expected.
        path: PathBuf,
    },
    /// `ptxas` failed to run or to assemble the PTX for an arch.
    Ptxas {
        /// The GPU arch of the cubin, say 120.
        arch: u32,
        /// The arch of the PTX it was assembled from.
        ptx_arch: u32,
        /// What ptxas said (or why it could not run).
        message: String,
    },
    /// Reading or writing a file, or running a program, failed.
    Io {
        /// What was being done, with the path.
        context: String,
        /// The error.
        source: std::io::Error,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::KernelCrateMissing { path } => write!(
                f,
                "no kernel crate at {}: pass reduce_builder::Builder::new the folder of the kernel crate's \
                 Cargo.toml (with a [package] name), relative to the build script's CARGO_MANIFEST_DIR or \
                 absolute",
                path.display()
            ),
            Error::NoRustup => write!(
                f,
                "rustup is not on the PATH: the kernel crate builds with a pinned nightly, which reduce-builder \
                 runs (and installs) through rustup; install rustup from https://rustup.rs"
            ),
            Error::ToolchainInstall {
                channel,
                what,
                message,
                fix,
            } => write!(
                f,
                "rustup could not install {what} for the kernels' Rust {channel}: run `{fix}` yourself \
                 (the crate that embeds the kernels builds on any toolchain)\n{message}"
            ),
            Error::Compile {
                crate_path,
                arch,
                stderr,
            } => write!(
                f,
                "the kernel crate {} does not compile for sm_{arch}:\n{}",
                crate_path.display(),
                stderr.trim_end()
            ),
            Error::NoPtx { path } => write!(
                f,
                "the kernel build left no PTX at {}: the kernel crate needs a library target ([lib], \
                 src/lib.rs), which reduce-builder builds as a cdylib",
                path.display()
            ),
            Error::Ptxas {
                arch,
                ptx_arch,
                message,
            } => write!(
                f,
                "ptxas could not assemble the sm_{ptx_arch} PTX for sm_{arch} (a ptxas of CUDA 12.8 or newer \
                 assembles every arch; pick one with PTXAS or CUDA_PATH):\n{}",
                message.trim_end()
            ),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An [`Error::Io`] for `context`.
pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}
