//! Finds a planted maximum among 2^28 random floats with `DeviceReduce::argmax` and checks the answer.
//!
//! `cargo run --release --example argmax [N]` — N elements (default 2^28). Exits non-zero on a wrong
//! answer, and with one clear line when there is no GPU.
use std::process::ExitCode;
use std::time::Instant;

use cust::memory::DeviceBuffer;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use reduce_host::{DeviceReduce, Error};

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("argmax: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<bool, Box<dyn std::error::Error>> {
    let n: usize = match std::env::args().nth(1) {
        Some(s) => s
            .parse()
            .map_err(|_| format!("size must be a positive integer, got {s:?}"))?,
        None => 1 << 28,
    };
    if n == 0 {
        return Err("size must be at least 1".into());
    }
    let mut reduce = match DeviceReduce::new() {
        Err(Error::NoDevice(e)) => return Err(format!("no CUDA GPU on this machine ({e})").into()),
        r => r?,
    };

    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(7, |d| d.as_nanos() as u64);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut host: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let planted = rng.random_range(0..n);
    host[planted] = 2.0;
    let data = DeviceBuffer::from_slice(&host)?;

    let found = reduce.argmax(&data)?.ok_or("empty input")?; // warm-up, and the answer
    let runs = 20;
    let start = Instant::now();
    for _ in 0..runs {
        reduce.argmax(&data)?;
    }
    let secs = start.elapsed().as_secs_f64() / runs as f64;
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
