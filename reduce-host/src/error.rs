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
    /// The device is older than the oldest architecture the kernels are built for.
    #[error("{name} has compute capability {major}.{minor}; reduce-host needs 7.5 or newer")]
    UnsupportedDevice {
        /// Device name reported by the driver.
        name: String,
        /// Compute capability, major part.
        major: u32,
        /// Compute capability, minor part.
        minor: u32,
    },
    /// The driver could not JIT-compile and load the PTX module.
    #[error("loading the sm_{arch} PTX module failed: {source}\nJIT log:\n{log}")]
    ModuleLoad {
        /// The PTX arch that was loaded.
        arch: u32,
        /// The driver's error.
        source: DriverError,
        /// The JIT compiler's error log.
        log: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver error: {0}")]
    Driver(#[from] DriverError),
    /// An argument can never be valid; the message says which and why.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
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
        Error::Driver(e.into())
    }
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
