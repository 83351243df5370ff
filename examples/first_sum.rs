//! Cold start: what a fresh process pays to open the GPU and get its first 2^20-element f32 sum.
//!
//! `scripts/cold-start.sh` runs this binary as a fresh process per measurement (driver JIT cache off, on, and
//! with the PTX forced), next to its CUB counterpart `benches/cub/cub_first_sum.cu`. It prints one line:
//! `first_sum open_ms=… handle_ms=… upload_ms=… sum_ms=… total_ms=… loaded=<Cubin/Ptx and arch> result=correct info=…`,
//! or `first_sum error: …` and exits 1.
use std::process::ExitCode;
use std::time::Instant;

use cust::memory::DeviceBuffer;
use reduce_host::{DeviceReduce, Gpu};

const N: usize = 1 << 20;

fn main() -> ExitCode {
    let start = Instant::now();
    match run(start) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("first_sum error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(start: Instant) -> Result<String, Box<dyn std::error::Error>> {
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;

    let t = Instant::now();
    let gpu = Gpu::new()?;
    let open_ms = ms(t);

    let t = Instant::now();
    let mut reduce = DeviceReduce::with_gpu(&gpu)?;
    let handle_ms = ms(t);

    let host: Vec<f32> = (0..N).map(|i| (i % 7) as f32).collect();
    let t = Instant::now();
    let buf = DeviceBuffer::from_slice(&host)?;
    let upload_ms = ms(t);

    let t = Instant::now();
    let got = reduce.sum(&buf)?;
    let sum_ms = ms(t);
    let total_ms = ms(start);

    // Integers below 2^24 with every partial sum below 2^24: the f32 sum is exact in any order.
    let expected: f64 = host.iter().map(|&x| f64::from(x)).sum();
    if f64::from(got) != expected {
        return Err(format!("wrong sum {got}, expected {expected}").into());
    }
    let info = gpu.info();
    Ok(format!(
        "first_sum open_ms={open_ms:.3} handle_ms={handle_ms:.3} upload_ms={upload_ms:.3} sum_ms={sum_ms:.3} \
         total_ms={total_ms:.3} loaded={:?} result=correct info={info:?}",
        info.code
    ))
}
