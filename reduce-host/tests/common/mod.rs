//! Shared pieces of the GPU tests: a handle, input generators and the comparison against the CPU reference.
#![allow(dead_code)]

use cust::memory::{CopyDestination, DeviceBuffer, DeviceSlice};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use reduce_host::{Combine, DeviceReduce, cpu};

/// Why GPU tests are ignored by default.
pub const NEEDS_GPU: &str = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine";

/// A handle on device 0; a GPU test without one is a failure, not a pass.
pub fn gpu() -> DeviceReduce {
    DeviceReduce::new()
        .expect("GPU tests need a CUDA device (run them with --include-ignored only on a GPU)")
}

/// Largest input the tests use: `REDUCE_TEST_MAX_N` if set (for slow runs under compute-sanitizer).
pub fn max_n() -> usize {
    std::env::var("REDUCE_TEST_MAX_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Seeded random generator, different per call site.
pub fn rng(seed: u64) -> SmallRng {
    SmallRng::seed_from_u64(seed)
}

/// Uniform random f32 in [-1, 1), never all zeros.
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut r = rng(seed);
    (0..n).map(|_| r.random_range(-1.0f32..1.0)).collect()
}

/// Uploads `data` after `offset` leading pad elements, so `buf.index(offset..)` is a sub-slice at that
/// element offset (misaligned for 16-byte loads unless `offset % 4 == 0`). Pads are huge values that would
/// break every result if read.
pub fn upload_at(data: &[f32], offset: usize) -> DeviceBuffer<f32> {
    let mut padded = vec![1.0e30f32; offset];
    padded.extend_from_slice(data);
    padded.extend(std::iter::repeat_n(-1.0e30f32, 5));
    DeviceBuffer::from_slice(&padded).expect("upload")
}

/// Both NaN, or bitwise equal after treating -0.0 == +0.0 as equal values.
pub fn same_value(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || a == b
}

/// Allowed error of an f32 sum of `n` values whose absolute values sum to `abs_sum`.
pub fn sum_tolerance(n: usize, abs_sum: f64) -> f64 {
    let eps = f32::EPSILON as f64 / 2.0;
    ((n.max(2) as f64).log2() + 16.0) * eps * abs_sum + 1e-30
}

/// Checks one reduction result against the f64 reference.
pub fn check_sum(got: f32, host: &[f32], what: &str) {
    let want = cpu::sum_f64(host);
    if want.is_nan() {
        assert!(got.is_nan(), "{what}: sum {got} should be NaN");
    } else if want.is_infinite() {
        assert_eq!(got as f64, want, "{what}: sum");
    } else {
        let tol = sum_tolerance(host.len(), cpu::abs_sum_f64(host));
        assert!(
            (got as f64 - want).abs() <= tol,
            "{what}: sum {got} vs {want} (tolerance {tol:e})"
        );
    }
}

/// Runs all five reductions on `slice` (whose host copy is `host`) and compares with the CPU reference.
pub fn check_all(reduce: &mut DeviceReduce, slice: &DeviceSlice<f32>, host: &[f32], what: &str) {
    check_sum(reduce.sum(slice).expect("sum"), host, what);
    for (name, got, want) in [
        ("max", reduce.max(slice).expect("max"), cpu::max(host)),
        ("min", reduce.min(slice).expect("min"), cpu::min(host)),
    ] {
        match (got, want) {
            (Some(g), Some(w)) => assert!(same_value(g, w), "{what}: {name} {g} vs {w}"),
            (g, w) => assert_eq!(g.is_none(), w.is_none(), "{what}: {name} {g:?} vs {w:?}"),
        }
    }
    for (name, got, want) in [
        (
            "argmax",
            reduce.argmax(slice).expect("argmax"),
            cpu::argmax(host),
        ),
        (
            "argmin",
            reduce.argmin(slice).expect("argmin"),
            cpu::argmin(host),
        ),
    ] {
        match (got, want) {
            (Some(g), Some((i, w))) => {
                assert_eq!(
                    g.index, i as u64,
                    "{what}: {name} index (value {} vs {w})",
                    g.value
                );
                assert!(
                    same_value(g.value, w),
                    "{what}: {name} value {} vs {w}",
                    g.value
                );
            }
            (g, w) => assert_eq!(g.is_none(), w.is_none(), "{what}: {name} {g:?} vs {w:?}"),
        }
    }
}

/// `check_all` at every sub-slice offset 0..8 (so every 16-byte misalignment of the start) and with each
/// combine strategy (Atomic for the sum only).
pub fn check_offsets(reduce: &mut DeviceReduce, host: &[f32], what: &str) {
    for offset in 0..8 {
        let buf = upload_at(host, offset);
        let slice = buf.index(offset..offset + host.len());
        for combine in [Combine::TwoPass, Combine::LastBlock] {
            reduce.set_combine(combine);
            check_all(
                reduce,
                &slice,
                host,
                &format!("{what}, offset {offset}, {combine:?}"),
            );
        }
        reduce.set_combine(Combine::Atomic);
        check_sum(
            reduce.sum(&slice).expect("atomic sum"),
            host,
            &format!("{what}, offset {offset}, Atomic"),
        );
        reduce.set_combine(Combine::TwoPass);
    }
}

/// Reads a device slice back.
pub fn download(slice: &DeviceSlice<f32>) -> Vec<f32> {
    let mut v = vec![0.0f32; slice.len()];
    slice.copy_to(&mut v[..]).expect("download");
    v
}
