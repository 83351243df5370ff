//! The one error type of the crate: every failure is a value of [`Error`], never a panic.
use std::ffi::CStr;

use cust::error::CudaError;
use cust::sys::{CUresult, cuGetErrorString};

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No CUDA device is present, or no driver.
    #[error("no CUDA device found: {0}")]
    NoDevice(DriverError),
    /// No embedded kernel image runs on the device: it is older than sm_75, or `REDUCE_HOST_FORCE_PTX`
    /// asked for PTX and no embedded PTX is old enough for it, or the crate was built without kernels (a
    /// documentation build).
    #[error(
        "{name} has compute capability {major}.{minor}; no kernel image embedded in reduce-host runs on it \
         (it needs 7.5 or newer; REDUCE_HOST_FORCE_PTX=1 needs 9.0 or newer)"
    )]
    UnsupportedDevice {
        /// Device name reported by the driver.
        name: String,
        /// Compute capability, major part.
        major: u32,
        /// Compute capability, minor part.
        minor: u32,
    },
    /// The driver could not load a kernel module (or JIT-compile its PTX).
    #[error("loading kernel module {module} ({code:?}) failed: {message}")]
    ModuleLoad {
        /// The module's name, e.g. `reduce_sum_f32`.
        module: String,
        /// The code that was loaded.
        code: crate::Code,
        /// The driver's error and, for PTX, the JIT compiler's log.
        message: String,
    },
    /// A loaded module lacks a kernel the contract says it holds: the embedded images and this crate's
    /// tables disagree (a build defect, never the caller's fault).
    #[error("kernel {kernel} is missing from module {module}: {source}")]
    MissingKernel {
        /// The kernel's name.
        kernel: String,
        /// The module's name.
        module: String,
        /// The driver's error.
        source: DriverError,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver error: {0}")]
    Driver(DriverError),
    /// A kernel faulted (an illegal address, a trap, a launch failure) and the device's context is lost: this
    /// error is sticky, and every later call on the device fails with it. The process must exit to use the
    /// device again.
    #[error(
        "the GPU context is lost (sticky error; restart the process to use this device again): {0}"
    )]
    ContextLost(DriverError),
    /// An argument can never be valid; the message says which and why.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A collective of a sharded call failed, or waited past its timeout, on this rank (NCCL's error, or
    /// the communicator's); see [`Communicator`](crate::sharded::Communicator). The communicator may be
    /// unusable afterwards (NCCL's is aborted).
    #[error("collective failed: {0}")]
    Collective(String),
}

/// A failed CUDA driver call: its `CUresult` code and the driver's description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (CUresult {code})")]
pub struct DriverError {
    /// The `CUresult` value.
    pub code: u32,
    /// The driver's description of it.
    pub message: String,
}

impl From<CudaError> for DriverError {
    fn from(e: CudaError) -> Self {
        DriverError {
            code: e as u32,
            message: e.to_string().trim_matches('"').to_owned(),
        }
    }
}

impl From<CudaError> for Error {
    fn from(e: CudaError) -> Self {
        DriverError::from(e).into()
    }
}

impl From<DriverError> for Error {
    /// Sticky errors, after which the context is unusable, become [`Error::ContextLost`].
    fn from(e: DriverError) -> Self {
        // CUDA_ERROR_LAUNCH_TIMEOUT, ILLEGAL_ADDRESS, ASSERT (a device-side assert), HARDWARE_STACK_ERROR,
        // ILLEGAL_INSTRUCTION, MISALIGNED_ADDRESS, INVALID_ADDRESS_SPACE, INVALID_PC and LAUNCH_FAILED (a
        // trap, e.g. a kernel panic).
        const STICKY: [u32; 9] = [702, 700, 710, 714, 715, 716, 717, 718, 719];
        if STICKY.contains(&e.code) {
            Error::ContextLost(e)
        } else {
            Error::Driver(e)
        }
    }
}

/// Turns a driver status returned as a plain `int` (by an entry point the crate resolves itself) into a
/// `Result`, without converting it into the `cust` enum, which may lack it.
pub(crate) fn check_code(code: i32, call: &str) -> Result<(), DriverError> {
    if code == 0 {
        return Ok(());
    }
    Err(DriverError {
        code: code as u32,
        message: format!("{call} failed with CUresult {code}"),
    })
}

/// Turns a raw driver status into a `Result`.
pub(crate) fn check(r: CUresult) -> Result<(), DriverError> {
    if r == CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut text = std::ptr::null();
    // SAFETY: cuGetErrorString writes a pointer to a static NUL-terminated string, or leaves it null.
    let message = unsafe {
        if cuGetErrorString(r, &mut text) == CUresult::CUDA_SUCCESS && !text.is_null() {
            CStr::from_ptr(text).to_string_lossy().into_owned()
        } else {
            format!("{r:?}")
        }
    };
    Err(DriverError {
        code: r as u32,
        message,
    })
}
