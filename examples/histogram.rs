//! Histograms 2^28 uniform random floats into 256 bins with `DeviceHistogram::even` and checks every count
//! against the CPU reference.
//!
//! `cargo run --release --example histogram [N]` — N samples (default 2^28). Exits non-zero on a wrong
//! answer, and with one clear line when there is no GPU.
mod support;

use std::process::ExitCode;

use cust::memory::DeviceBuffer;
use rand::Rng;
use reduce_host::{DeviceHistogram, cpu};

const BINS: usize = 256;
const RANGE: (f32, f32) = (0.0, 1.0);

fn main() -> ExitCode {
    support::main("histogram", run)
}

fn run() -> Result<bool, support::BoxError> {
    let n = support::size_arg()?;
    let mut hist = support::open(DeviceHistogram::new())?;

    let mut rng = support::rng();
    // Slightly wider than the range, so some samples are dropped.
    let host: Vec<f32> = (0..n).map(|_| rng.random_range(-0.05f32..1.05)).collect();
    let data = DeviceBuffer::from_slice(&host)?;

    let runs = 20;
    let (counts, secs) = support::timed(runs, || {
        hist.even::<f32, u64>(&data, BINS, RANGE.0, RANGE.1)
    })?;
    let gbps = (n * std::mem::size_of::<f32>()) as f64 / secs / 1e9;

    let want = cpu::histogram_even(&host, BINS, RANGE.0, RANGE.1)?;
    let info = hist.device_info();
    println!(
        "{} (sm_{}{}), n = {n}, {BINS} bins over [{}, {})",
        info.name, info.compute_capability.0, info.compute_capability.1, RANGE.0, RANGE.1
    );
    let counted: u64 = counts.iter().sum();
    println!(
        "counted {counted} samples ({} dropped); bin 0: {}, bin {}: {}",
        n as u64 - counted,
        counts[0],
        BINS - 1,
        counts[BINS - 1]
    );
    println!(
        "time:   {:.1} µs per call (mean of {runs}, host wall clock incl. launch and read-back), {gbps:.0} GB/s of samples",
        secs * 1e6
    );
    let wrong = (0..BINS).filter(|&b| counts[b] != want[b]).count();
    if wrong == 0 {
        println!("correct");
    } else {
        println!("WRONG ANSWER: {wrong} of {BINS} bins differ from the CPU reference");
    }
    Ok(wrong == 0)
}
