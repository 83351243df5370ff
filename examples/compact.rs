//! Keeps the positive floats among 2^28 random ones with `DeviceSelect`, unordered and stable, and checks
//! both against a CPU filter (the unordered output as a sorted multiset).
//!
//! `cargo run --release --example compact [N]` — N elements (default 2^28). Exits non-zero on a wrong
//! answer, and with one clear line when there is no GPU.
mod support;

use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer};
use rand::Rng;
use reduce_host::{DeviceSelect, GreaterThan};

fn main() -> ExitCode {
    support::main("compact", run)
}

/// The bits of `v` in ascending order: equal exactly when the multisets are equal.
fn sorted_bits(v: &[f32]) -> Vec<u32> {
    let mut b: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
    b.sort_unstable();
    b
}

fn run() -> Result<bool, support::BoxError> {
    let n = support::size_arg()?;
    let mut select = support::open(DeviceSelect::new())?;

    let mut rng = support::rng();
    let host: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let want: Vec<f32> = host.iter().copied().filter(|&x| x > 0.0).collect();
    let input = DeviceBuffer::from_slice(&host)?;
    let mut out = DeviceBuffer::from_slice(&vec![0.0f32; n])?;
    let pred = GreaterThan(0.0f32);
    let runs = 20;
    let info = select.device_info();
    println!(
        "{} (sm_{}{}), n = {n}, keeping x > 0",
        info.name, info.compute_capability.0, info.compute_capability.1
    );

    let mut ok = true;
    let mut got = vec![0.0f32; n];
    let (count, secs) = support::timed(runs, || select.select_if(&input, pred, &mut out))?;
    out.copy_to(&mut got[..])?;
    let right = count == want.len() as u64 && sorted_bits(&got[..want.len()]) == sorted_bits(&want);
    report("select_if (unordered)", n, count, secs, runs, right);
    ok &= right;

    let (count, secs) = support::timed(runs, || select.select_if_stable(&input, pred, &mut out))?;
    out.copy_to(&mut got[..])?;
    let right = count == want.len() as u64
        && got[..want.len()]
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
    report("select_if_stable", n, count, secs, runs, right);
    ok &= right;

    println!("{}", if ok { "correct" } else { "WRONG ANSWER" });
    Ok(ok)
}

fn report(what: &str, n: usize, count: u64, secs: f64, runs: u32, right: bool) {
    let gbps = (n * 4) as f64 / secs / 1e9;
    println!(
        "{what:<22} kept {count:>10}  {:>9.1} µs per call (mean of {runs}, host wall clock incl. read-back \
         of the count)  {gbps:>6.0} GB/s of input  {}",
        secs * 1e6,
        if right { "ok" } else { "WRONG" }
    );
}
