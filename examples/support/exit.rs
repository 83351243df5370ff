//! The exit protocol the examples and the benches share (the benches include this file by path).
use std::process::ExitCode;

/// The error of a run.
pub type BoxError = Box<dyn std::error::Error>;

/// A program's `main`: success when `run` reports every check passed, failure when one failed
/// (`Ok(false)`) or `run` returned an error (printed on one line after `name`).
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

/// A handle, or the one-line "no CUDA GPU" error when the machine has none.
pub fn open<T>(handle: Result<T, reduce_host::Error>) -> Result<T, BoxError> {
    match handle {
        Err(reduce_host::Error::NoDevice(e)) => {
            Err(format!("no CUDA GPU on this machine ({e})").into())
        }
        r => Ok(r?),
    }
}
