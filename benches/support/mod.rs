//! Pieces of the benchmark harness: timing, input pools, the CUB comparator and the plot.
pub mod cub;
pub mod plot;
pub mod pool;
pub mod timing;
pub mod torch;

use std::process::ExitCode;

use reduce_host::Gpu;

/// The error of a bench's run.
pub type BoxError = Box<dyn std::error::Error>;

/// A bench's `main`: success when `run` reports every check passed, failure when one failed or `run`
/// returned an error (printed after `name`).
pub fn main(name: &str, run: impl FnOnce() -> Result<bool, BoxError>) -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// GPU 0, or an error that says plainly there is none.
pub fn open_gpu() -> Result<Gpu, BoxError> {
    match Gpu::new() {
        Err(reduce_host::Error::NoDevice(e)) => {
            Err(format!("no CUDA GPU on this machine ({e})").into())
        }
        r => Ok(r?),
    }
}
