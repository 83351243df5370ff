//! Every statistic of 2^26 values (`1e6 + U(0, 1)`, where the one-pass sum-of-squares variance has no correct
//! digit) in one read with `DeviceReduce::stats`, the named calls beside it, and LayerNorm statistics per
//! row with `DeviceSegmentedReduce::row_var_mean`, each checked against an f64 CPU reference.
//!
//! `cargo run --release --example stats [N]` — N elements (default 2^26). Exits non-zero on a wrong answer,
//! and with one clear line when there is no GPU.
mod support;

use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer};
use rand::Rng;
use reduce_host::custom::OpAcc;
use reduce_host::stats::Moments;
use reduce_host::{DeviceReduce, DeviceSegmentedReduce, Segments};

fn main() -> ExitCode {
    support::main("stats", run)
}

fn run() -> Result<bool, support::BoxError> {
    let n = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1usize << 26);
    let mut reduce = support::open(DeviceReduce::new())?;
    let mut rng = support::rng();
    let host: Vec<f32> = (0..n)
        .map(|_| 1e6 + rng.random_range(0.0f32..1.0))
        .collect();
    let data = DeviceBuffer::from_slice(&host)?;

    let s = reduce.stats(&data)?;
    let (var, mean) = reduce.var_mean(&data, 0.0)?;
    let (min, max) = reduce.aminmax(&data)?.ok_or("empty input")?;

    // The f64 reference, by two passes.
    let want_mean = host.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
    let want_var = host
        .iter()
        .map(|&x| (x as f64 - want_mean).powi(2))
        .sum::<f64>()
        / n as f64;
    let (lo, hi) = host.iter().enumerate().fold(
        ((f32::INFINITY, 0), (f32::NEG_INFINITY, 0)),
        |(lo, hi), (i, &x)| {
            (
                if x < lo.0 { (x, i) } else { lo },
                if x > hi.0 { (x, i) } else { hi },
            )
        },
    );
    println!(
        "n = {n}: mean {:.6}, variance {:.8} (f64 reference {want_mean:.6}, {want_var:.8})",
        s.mean, s.variance
    );
    println!("min {:?}, max {:?}", s.min, s.max);
    let rel = |a: f64, b: f64| (a - b).abs() / b.abs();
    let mut ok = s.count == n as u64
        && rel(s.mean, want_mean) < 1e-10
        && rel(s.variance, want_var) < 1e-6
        && rel(var, s.variance) < 1e-9
        && rel(mean, s.mean) < 1e-12
        && s.min == Some(min)
        && s.max == Some(max)
        && (min.value, min.index) == (lo.0 as f64, lo.1 as u64)
        && (max.value, max.index) == (hi.0 as f64, hi.1 as u64);

    // LayerNorm statistics of each row of 1024 values.
    let (rows, cols) = (n / 1024, 1024);
    let mut seg = DeviceSegmentedReduce::with_gpu(reduce.gpu())?;
    let mut out = DeviceBuffer::from_slice(&vec![OpAcc(Moments::default()); rows])?;
    seg.row_var_mean(&data, Segments::rows(rows, cols, cols), &mut out)?;
    let mut got = vec![OpAcc(Moments::default()); rows];
    out.copy_to(&mut got[..])?;
    for (r, m) in got.iter().enumerate().step_by(rows.div_ceil(16).max(1)) {
        let row = &host[r * cols..(r + 1) * cols];
        let mean = row.iter().map(|&x| x as f64).sum::<f64>() / cols as f64;
        let var = row.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
        ok &= rel(m.0.mean(), mean) < 1e-10 && rel(m.0.variance(0.0), var) < 1e-5;
    }
    println!(
        "{rows} rows of {cols}: row 0 mean {:.6}, variance {:.8}",
        got[0].0.mean(),
        got[0].0.variance(0.0)
    );
    println!("{}", if ok { "correct" } else { "WRONG ANSWER" });
    Ok(ok)
}
