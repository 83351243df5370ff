//! A row softmax of a `rows × cols` matrix of logits: `DeviceSegmentedReduce::softmax_stats` reads each row
//! once and gives its max `m` and `Σ exp(x − m)`, the host finishes `exp(x − m) / Σ`, and the result is
//! checked against a CPU softmax computed in f64. Also takes the per-row argmax (greedy sampling).
//!
//! `cargo run --release --example softmax_rows [ROWS [COLS]]` (default 4096 × 32000, a batch of vocabulary
//! logits). Prints "correct" and exits 0 when every probability matches; one clear line without a GPU.
mod support;

use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer};
use rand::Rng;
use reduce_host::{DeviceSegmentedReduce, Indexed, Segments, SoftmaxStats};

fn main() -> ExitCode {
    support::main("softmax_rows", run)
}

/// `ROWS` and `COLS` from the arguments.
fn shape() -> Result<(usize, usize), support::BoxError> {
    let arg = |i: usize, default: usize| -> Result<usize, support::BoxError> {
        match std::env::args().nth(i) {
            Some(s) => Ok(s.parse().map_err(|_| format!("bad size {s:?}"))?),
            None => Ok(default),
        }
    };
    Ok((arg(1, 4096)?, arg(2, 32_000)?))
}

fn run() -> Result<bool, support::BoxError> {
    let (rows, cols) = shape()?;
    let mut seg = support::open(DeviceSegmentedReduce::new())?;

    let mut rng = support::rng();
    let logits: Vec<f32> = (0..rows * cols)
        .map(|_| rng.random_range(-12.0f32..12.0))
        .collect();
    let x = DeviceBuffer::from_slice(&logits)?;
    let mut stats = DeviceBuffer::from_slice(&vec![SoftmaxStats::default(); rows])?;
    let mut best = DeviceBuffer::from_slice(&vec![Indexed::<f32>::default(); rows])?;

    let segments = Segments::rows(rows, cols, cols);
    let runs = 20;
    let ((), secs) = support::timed(runs, || seg.softmax_stats(&x, segments, &mut stats))?;
    seg.argmax(&x, segments, &mut best)?;

    let mut host_stats = vec![SoftmaxStats::default(); rows];
    stats.copy_to(&mut host_stats[..])?;
    let mut host_best = vec![Indexed::<f32>::default(); rows];
    best.copy_to(&mut host_best[..])?;

    // Finish the softmax on the host and compare every probability with an f64 CPU softmax.
    let mut worst = 0.0f64;
    let mut ok = true;
    for (r, (s, b)) in host_stats.iter().zip(&host_best).enumerate() {
        let row = &logits[r * cols..(r + 1) * cols];
        let m = row.iter().fold(f64::NEG_INFINITY, |a, &x| a.max(x as f64));
        let z: f64 = row.iter().map(|&x| (x as f64 - m).exp()).sum();
        ok &= s.max as f64 == m;
        ok &= b.value as f64 == m && row[b.index as usize] == b.value;
        ok &= row[..b.index as usize].iter().all(|&x| (x as f64) < m);
        for &x in row {
            let p = (x - s.max).exp() / s.sum_exp;
            let want = (x as f64 - m).exp() / z;
            worst = worst.max((p as f64 - want).abs() / want);
        }
    }
    ok &= worst < 1e-5;

    let info = seg.device_info();
    println!(
        "{} (sm_{}{}), {rows} × {cols} f32",
        info.name, info.compute_capability.0, info.compute_capability.1
    );
    println!(
        "softmax_stats: {:.1} µs per call (mean of {runs}, host wall clock), {:.0} GB/s read",
        secs * 1e6,
        (rows * cols * 4) as f64 / secs / 1e9
    );
    println!(
        "row 0: max {} sum_exp {}",
        host_stats[0].max, host_stats[0].sum_exp
    );
    println!("worst relative error of a probability: {worst:.2e}");
    println!("{}", if ok { "correct" } else { "WRONG ANSWER" });
    Ok(ok)
}
