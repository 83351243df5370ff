//! Finds a planted maximum among 2^28 random floats with `DeviceReduce::argmax` and checks the answer.
//!
//! `cargo run --release --example argmax [N]` — N elements (default 2^28). Exits non-zero on a wrong
//! answer, and with one clear line when there is no GPU.
mod support;

use std::process::ExitCode;

use cust::memory::DeviceBuffer;
use rand::Rng;
use reduce_host::DeviceReduce;

fn main() -> ExitCode {
    support::main("argmax", run)
}

fn run() -> Result<bool, support::BoxError> {
    let n = support::size_arg()?;
    let mut reduce = support::open(DeviceReduce::new())?;

    let mut rng = support::rng();
    let mut host: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let planted = rng.random_range(0..n);
    host[planted] = 2.0;
    let data = DeviceBuffer::from_slice(&host)?;

    let runs = 20;
    let (found, secs) = support::timed(runs, || reduce.argmax(&data))?;
    let found = found.ok_or("empty input")?;
    let gbps = (n * 4) as f64 / secs / 1e9;
    let info = reduce.device_info();
    println!(
        "{} (sm_{}{}), n = {n}",
        info.name, info.compute_capability.0, info.compute_capability.1
    );
    println!(
        "argmax: index {} value {} (planted at {planted})",
        found.index, found.value
    );
    println!(
        "time:   {:.1} µs per call (mean of {runs}, host wall clock incl. launch and read-back), {gbps:.0} GB/s",
        secs * 1e6
    );
    let ok = found.index == planted as u64 && found.value == 2.0;
    println!("{}", if ok { "correct" } else { "WRONG ANSWER" });
    Ok(ok)
}
