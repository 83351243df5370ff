//! Top-k sampling's first step: the 50 most likely tokens of each row of a `rows × vocab` matrix of bf16
//! logits, with `DeviceTopK::segmented_max_k`, checked row by row against a CPU reference (the same rule:
//! greater first, the smaller index among equals).
//!
//! `cargo run --release --example topk [ROWS [VOCAB [K]]]` (default 4096 × 151936, k = 50: a batch of a
//! 152k-token vocabulary). Prints "correct" and exits 0 when every row matches; one clear line without a GPU.
mod support;

use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer};
use half::bf16;
use rand::Rng;
use reduce_host::{BF16, DeviceTopK, Segments};

fn main() -> ExitCode {
    support::main("topk", run)
}

/// `ROWS`, `VOCAB` and `K` from the arguments.
fn shape() -> Result<(usize, usize, usize), support::BoxError> {
    let arg = |i: usize, default: usize| -> Result<usize, support::BoxError> {
        match std::env::args().nth(i) {
            Some(s) => Ok(s.parse().map_err(|_| format!("bad number {s:?}"))?),
            None => Ok(default),
        }
    };
    Ok((arg(1, 4096)?, arg(2, 151_936)?, arg(3, 50)?))
}

/// The indices of the `k` greatest of `row`, greatest first, the smaller index first among equals.
fn reference(row: &[bf16], k: usize) -> Vec<u64> {
    let better = |&a: &u32, &b: &u32| {
        row[b as usize]
            .partial_cmp(&row[a as usize])
            .expect("finite logits")
            .then(a.cmp(&b))
    };
    let mut order: Vec<u32> = (0..row.len() as u32).collect();
    let k = k.min(row.len());
    if k < row.len() {
        order.select_nth_unstable_by(k, better);
        order.truncate(k);
    }
    order.sort_by(better);
    order.into_iter().map(u64::from).collect()
}

fn run() -> Result<bool, support::BoxError> {
    let (rows, vocab, k) = shape()?;
    let mut topk = support::open(DeviceTopK::new())?;

    // Logits as a model's last layer gives them: roughly normal, in bf16 (so many ties).
    let mut rng = support::rng();
    let logits: Vec<bf16> = (0..rows * vocab)
        .map(|_| {
            let (u, v): (f32, f32) = (rng.random_range(f32::EPSILON..1.0), rng.random());
            bf16::from_f32(3.0 * (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos())
        })
        .collect();
    let x = DeviceBuffer::from_slice(BF16::from_halves(&logits))?;
    let mut values = DeviceBuffer::from_slice(&vec![BF16::from(bf16::ZERO); rows * k])?;
    let mut indices = DeviceBuffer::from_slice(&vec![0u64; rows * k])?;

    let segments = Segments::rows(rows, vocab, vocab);
    let runs = 20;
    let ((), secs) = support::timed(runs, || {
        topk.segmented_max_k(&x, segments, k as u64, &mut values, &mut indices)
    })?;
    let mut got = vec![0u64; rows * k];
    indices.copy_to(&mut got[..])?;
    let mut got_values = vec![BF16::from(bf16::ZERO); rows * k];
    values.copy_to(&mut got_values[..])?;

    // Check every row on all cores: the indices are the reference's, each value the logit at its index.
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
    let per = rows.div_ceil(threads);
    let wrong: usize = std::thread::scope(|s| {
        let jobs: Vec<_> = (0..rows)
            .step_by(per.max(1))
            .map(|first| {
                let (logits, got, got_values) = (&logits, &got, &got_values);
                s.spawn(move || {
                    (first..(first + per).min(rows))
                        .filter(|&r| {
                            let row = &logits[r * vocab..(r + 1) * vocab];
                            let (idx, vals) =
                                (&got[r * k..(r + 1) * k], &got_values[r * k..(r + 1) * k]);
                            let values_ok = idx.iter().zip(vals).all(|(&i, v)| {
                                row.get(i as usize)
                                    .is_some_and(|x| x.to_bits() == v.0.to_bits())
                            });
                            idx != reference(row, k).as_slice() || !values_ok
                        })
                        .count()
                })
            })
            .collect();
        jobs.into_iter()
            .map(|j| j.join().expect("a checker thread"))
            .sum()
    });

    let info = topk.device_info();
    println!(
        "{} (sm_{}{}), {rows} × {vocab} bf16 logits, top {k} per row",
        info.name, info.compute_capability.0, info.compute_capability.1
    );
    println!(
        "segmented_max_k: {:.1} µs per call (mean of {runs}, host wall clock), {:.0} GB/s read",
        secs * 1e6,
        (rows * vocab * 2) as f64 / secs / 1e9
    );
    let first: Vec<String> = got[..k.min(5)].iter().map(u64::to_string).collect();
    println!("row 0's best tokens: {} …", first.join(", "));
    if wrong == 0 {
        println!("correct");
        Ok(true)
    } else {
        println!("WRONG: {wrong} of {rows} rows differ from the CPU reference");
        Ok(false)
    }
}
