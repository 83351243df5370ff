//! Pieces of the benchmark harness: timing, input pools, the CUB comparator and the plot.
pub mod cub;
pub mod plot;
pub mod pool;
pub mod timing;
pub mod torch;

use std::process::ExitCode;

use reduce_host::Gpu;

#[path = "../../examples/support/exit.rs"]
mod exit;
pub use exit::BoxError;

/// A bench's `main`: the examples' exit protocol, except that a machine without a GPU is not a failure. The
/// bench says in one line that it measured nothing and exits 0, so that `cargo bench` goes on to the
/// next bench instead of stopping at the first (each says the same, once).
pub fn main(name: &str, run: impl FnOnce() -> Result<bool, BoxError>) -> ExitCode {
    exit::main(name, || match run() {
        Err(e) => match e.downcast_ref() {
            Some(reduce_host::Error::NoDevice(why)) => {
                eprintln!("{name}: no CUDA GPU on this machine ({why}); nothing measured");
                Ok(true)
            }
            _ => Err(e),
        },
        r => r,
    })
}

/// GPU 0; on a machine without one, the error [`main`] reports as "nothing measured".
pub fn open_gpu() -> Result<Gpu, BoxError> {
    Ok(Gpu::new()?)
}

/// A comparator's µs and its time over ours (`digits` decimals: > 1 means we are faster), or dashes where it
/// has no result.
pub fn versus(other: Option<f64>, ours: f64, digits: usize) -> (String, String) {
    other.map_or(("—".into(), "—".into()), |o| {
        (format!("{o:.1}"), format!("{:.digits$}", o / ours))
    })
}

/// The sizes a `--sizes a,b,…` argument lists, else `default`.
pub fn sizes_arg(args: &[String], default: &[usize]) -> Result<Vec<usize>, BoxError> {
    match args.iter().position(|a| a == "--sizes") {
        Some(i) => Ok(args
            .get(i + 1)
            .ok_or("--sizes needs a list")?
            .split(',')
            .map(|s| s.parse())
            .collect::<Result<_, _>>()?),
        None => Ok(default.to_vec()),
    }
}

/// Prints a bench's markdown report and writes it to `name` in `$OUT` (if set) or `target/bench`.
pub fn write_report(name: &str, report: &str) -> Result<(), BoxError> {
    print!("{report}");
    let dir = std::env::var_os("OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target/bench".into());
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join(name), report)?;
    Ok(())
}
