//! The k greatest of N random floats with `DeviceTopK::max_k`, checked against a CPU selection.
//!
//! `cargo run --release --example max_k [N] [K]` — N elements (default 2^28), K wanted (default 64).
//! Exits non-zero on a wrong answer, and with one clear line when there is no GPU.
mod support;

use std::cmp::Ordering;
use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer};
use rand::Rng;
use reduce_host::DeviceTopK;

fn main() -> ExitCode {
    support::main("max_k", run)
}

fn run() -> Result<bool, support::BoxError> {
    let n = support::size_arg()?;
    let k = match std::env::args().nth(2) {
        Some(s) => s
            .parse::<usize>()
            .map_err(|_| format!("k must be a positive integer, got {s:?}"))?,
        None => 64,
    };
    if k == 0 || k > n {
        return Err(format!("k must be from 1 to N = {n}, got {k}").into());
    }
    let mut topk = support::open(DeviceTopK::new())?;

    let mut rng = support::rng();
    let host: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let data = DeviceBuffer::from_slice(&host)?;
    let mut values = DeviceBuffer::<f32>::zeroed(k)?;
    let mut indices = DeviceBuffer::<u64>::zeroed(k)?;

    let runs = 20;
    let ((), secs) = support::timed(runs, || {
        topk.max_k(&data, k as u64, &mut values, &mut indices)
    })?;
    let (mut got_values, mut got_indices) = (vec![0f32; k], vec![0u64; k]);
    values.copy_to(&mut got_values[..])?;
    indices.copy_to(&mut got_indices[..])?;

    // The same rule on the CPU: greater first, then the smaller index (no NaN in this input).
    let best = |a: &usize, b: &usize| host[*b].total_cmp(&host[*a]).then(a.cmp(b));
    let mut order: Vec<usize> = (0..n).collect();
    if k < n {
        order.select_nth_unstable_by(k - 1, best);
    }
    order.truncate(k);
    order.sort_unstable_by(best);

    let info = topk.device_info();
    println!(
        "{} (sm_{}{}), n = {n}, k = {k}",
        info.name, info.compute_capability.0, info.compute_capability.1
    );
    println!(
        "max_k: greatest {} at {}, k-th {} at {}",
        got_values[0],
        got_indices[0],
        got_values[k - 1],
        got_indices[k - 1]
    );
    println!(
        "time:  {:.1} µs per call (mean of {runs}, host wall clock incl. launch and sync), {:.0} GB/s read",
        secs * 1e6,
        (n * 4) as f64 / secs / 1e9
    );
    let ok = order
        .iter()
        .zip(got_indices.iter().zip(&got_values))
        .all(|(&want, (&i, v))| i == want as u64 && v.total_cmp(&host[want]) == Ordering::Equal);
    println!("{}", if ok { "correct" } else { "WRONG ANSWER" });
    Ok(ok)
}
