//! The same bits under two launch configurations and two slice offsets: `Determinism::GpuToGpu` sums N
//! random floats with a wide dynamic range (default 2^24) with the device's tuned policy and with a forced
//! small-block, few-block policy, at element offsets 0 and 1, and checks all four against
//! `cpu::sum_reproducible`, the CPU's run of the same algorithm. The default (run-to-run) sum is shown
//! beside it, with both errors against the exact sum.
//!
//! `cargo run --release --example reproducible [N]`. Prints "correct" when all bits agree; exits non-zero
//! otherwise, and with one clear line when there is no GPU.
mod support;

use std::process::ExitCode;

use cust::memory::DeviceBuffer;
use rand::Rng;
use reduce_host::{Determinism, DeviceReduce, DeviceView, Policy, cpu};

fn main() -> ExitCode {
    support::main("reproducible", run)
}

fn run() -> Result<bool, support::BoxError> {
    let n = std::env::args().nth(1).map_or(Ok(1 << 24), |s| {
        s.parse::<usize>()
            .map_err(|_| format!("size must be a positive integer, got {s:?}"))
    })?;
    let mut reduce = support::open(DeviceReduce::new())?;
    let mut rng = support::rng();
    // Magnitudes from 2^-20 to 2^20 and both signs: a sum whose bits any change of order would move.
    let host: Vec<f32> = (0..n)
        .map(|_| rng.random_range(-1.0f32..1.0) * 2f32.powi(rng.random_range(-20..=20)))
        .collect();
    // The same values at element offset 1: the slice starts 4 bytes past a 16-byte boundary.
    let mut shifted = vec![0.0f32];
    shifted.extend_from_slice(&host);
    let at0 = DeviceBuffer::from_slice(&host)?;
    let at1 = DeviceBuffer::from_slice(&shifted)?;

    let default_sum = reduce.sum(&at0)?;
    reduce.set_determinism(Determinism::GpuToGpu);
    let tuned = reduce.policy();
    let small = Policy {
        threads: 64,
        blocks_per_sm: 1,
        ..tuned
    };
    let want = cpu::sum_reproducible(&host);
    let info = reduce.device_info();
    println!(
        "{} (sm_{}{}, {} SMs), n = {n}",
        info.name, info.compute_capability.0, info.compute_capability.1, info.sm_count
    );
    let mut ok = true;
    for policy in [tuned, small] {
        reduce.set_policy(policy)?;
        for offset in [0, 1] {
            let view = if offset == 0 {
                DeviceView::from(&at0)
            } else {
                DeviceView::from(&at1).slice(1..)
            };
            let got = reduce.sum(view)?;
            let same = got.to_bits() == want.to_bits();
            ok &= same;
            println!(
                "GpuToGpu, {} threads × {} blocks/SM, offset {offset}: {got:.9e} (bits {:#010x}){}",
                policy.threads,
                policy.blocks_per_sm,
                got.to_bits(),
                if same {
                    ""
                } else {
                    "  <- differs from the CPU"
                }
            );
        }
    }
    let exact = cpu::sum_f64(&host);
    println!(
        "CPU algorithm: {want:.9e} (bits {:#010x}); exact {exact:.9e}",
        want.to_bits()
    );
    println!(
        "errors against the exact sum: reproducible {:.3e}, default (run-to-run) {:.3e}",
        (want as f64 - exact).abs(),
        (default_sum as f64 - exact).abs()
    );
    println!("{}", if ok { "correct" } else { "WRONG ANSWER" });
    Ok(ok)
}
