//! The reproducible sum's algorithm on the CPU (no GPU needed): its error against exact sums stays within
//! the bound `Determinism::GpuToGpu` documents, and the kernels' mapping of the virtual lanes onto
//! registers and shuffles computes the same bits as the plain form.
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use reduce_contract::reproducible::{CHUNK, CHUNK_LANES, Compensated, ReproAcc};
use reduce_host::cpu::{self, ReproSum};
use reduce_host::{BF16, F16};

const U: f64 = 1.0 / (1u64 << 53) as f64;

fn gamma(m: f64) -> f64 {
    m * U / (1.0 - m * U)
}

/// The `D` of the documented bound for `n` elements.
fn depth(n: usize) -> f64 {
    51.0 + (n as u64).div_ceil(1 << 23) as f64
}

fn wide(r: &mut SmallRng, span: i32) -> f64 {
    let m: f64 = r.random_range(1.0..2.0);
    let s = if r.random() { -m } else { m };
    s * 2f64.powi(r.random_range(-span..=span))
}

/// f32 values `k / 1024` with `|k| < 2^20`: every sum is exact in i128 units of 2^-10, so the correctly
/// rounded f32 of the exact sum is known, and the f64 accumulation (exact here) must return it.
#[test]
fn f32_sums_of_dyadic_values_are_correctly_rounded() {
    let mut r = SmallRng::seed_from_u64(1);
    for n in [1, 100, 8191, 8192, 8193, 300_001] {
        let ks: Vec<i32> = (0..n)
            .map(|_| r.random_range(-(1 << 20) + 1..1 << 20))
            .collect();
        let xs: Vec<f32> = ks.iter().map(|&k| k as f32 / 1024.0).collect();
        let exact = ks.iter().map(|&k| k as i128).sum::<i128>();
        let want = (exact as f64 / 1024.0) as f32;
        assert_eq!(
            cpu::sum_reproducible(&xs).to_bits(),
            want.to_bits(),
            "n={n}"
        );
    }
}

/// f64 values `k · 2^-30` with `|k| < 2^52`: the exact sum is an i128 multiple of 2^-30, whose correct
/// rounding the compensated sum returns (its error bound is far below half an ulp here).
#[test]
fn f64_sums_are_correctly_rounded_where_the_bound_says_so() {
    let mut r = SmallRng::seed_from_u64(2);
    for n in [1, 1000, 8193, 250_000] {
        let ks: Vec<i64> = (0..n)
            .map(|_| r.random_range(-(1i64 << 52) + 1..1 << 52))
            .collect();
        let xs: Vec<f64> = ks.iter().map(|&k| k as f64 * 2f64.powi(-30)).collect();
        let exact = ks.iter().map(|&k| k as i128).sum::<i128>();
        let want = exact as f64 * 2f64.powi(-30);
        assert_eq!(
            cpu::sum_reproducible(&xs).to_bits(),
            want.to_bits(),
            "n={n}"
        );
    }
}

/// Random and wide-range inputs: the error against a compensated f64 reference (itself within about one
/// f64 rounding) stays inside the documented bound.
#[test]
fn errors_stay_within_the_documented_bound() {
    let mut r = SmallRng::seed_from_u64(3);
    for n in [10, 8192 * 3 + 7, 1_000_003] {
        for span in [0, 60] {
            let xs: Vec<f32> = (0..n).map(|_| wide(&mut r, span) as f32).collect();
            let (exact, abs) = (cpu::sum_f64(&xs), cpu::abs_sum_f64(&xs));
            let got = cpu::sum_reproducible(&xs) as f64;
            let bound = 2f64.powi(-24) * exact.abs() + gamma(depth(n)) * abs + 4.0 * U * abs;
            assert!((got - exact).abs() <= bound, "f32 n={n} span {span}");

            let ys: Vec<f64> = (0..n).map(|_| wide(&mut r, span * 8)).collect();
            let (exact, abs) = (dd_sum(&ys), cpu::abs_sum_f64(&ys));
            let got = cpu::sum_reproducible(&ys);
            let bound = U * exact.abs() + gamma(depth(n) + 1.0).powi(2) * abs;
            assert!((got - exact).abs() <= bound, "f64 n={n} span {span}");
        }
    }
}

/// A double-double sum, accurate to about 2^-104 relative to `Σ|x|`: the f64 reference.
fn dd_sum(xs: &[f64]) -> f64 {
    let mut acc = (0.0f64, 0.0f64);
    for &x in xs {
        let (s, e) = reduce_contract::reproducible::two_sum(acc.0, x);
        let (hi, lo) = reduce_contract::reproducible::two_sum(s, acc.1 + e);
        acc = (hi, lo);
    }
    acc.0 + acc.1
}

#[test]
fn empty_zero_nan_and_infinities() {
    assert_eq!(cpu::sum_reproducible::<f32>(&[]).to_bits(), 0);
    assert_eq!(
        cpu::sum_reproducible(&[-0.0f32]).to_bits(),
        0,
        "0 + -0 = +0"
    );
    assert_eq!(
        cpu::sum_reproducible(&[f32::MAX, f32::MAX, -f32::MAX]),
        f32::MAX,
        "no f64 overflow"
    );
    assert_eq!(cpu::sum_reproducible(&[f32::MAX, f32::MAX]), f32::INFINITY);
    assert_eq!(
        cpu::sum_reproducible(&[1.0f32, f32::NAN, 2.0]).to_bits(),
        f32::NAN.to_bits()
    );
    assert_eq!(
        cpu::sum_reproducible(&[f32::INFINITY, f32::NEG_INFINITY]).to_bits(),
        f32::NAN.to_bits()
    );
    assert_eq!(
        cpu::sum_reproducible(&[1.0f64, f64::INFINITY]),
        f64::INFINITY
    );
    assert_eq!(
        cpu::sum_reproducible(&[f64::MAX, f64::MAX, -1.0]).to_bits(),
        f64::INFINITY.to_bits()
    );
    let h = [F16(half::f16::from_f32(1.5)); 3];
    assert_eq!(cpu::sum_reproducible(&h), 4.5);
    let b = [BF16(half::bf16::from_f32(-2.0)); 5];
    assert_eq!(cpu::sum_reproducible(&b), -10.0);
}

/// One chunk the way a warp of the chunk kernel computes it: lane `l` keeps virtual lanes `l + 32k` in
/// eight registers, merges `k` with `k + 4`, `k + 2`, `k + 1`, then takes lane `l + w`'s value for
/// `w = 16 … 1` (a shuffle down; lanes past the end keep their own, which only lanes ≥ w use).
fn warp_partial<T: ReproSum>(chunk: &[T]) -> T::Acc {
    let mut regs = [[T::Acc::ZERO; 8]; 32];
    for r in 0..CHUNK as usize / CHUNK_LANES {
        for (k, l) in (0..8).flat_map(|k| (0..32).map(move |l| (k, l))) {
            let i = r * CHUNK_LANES + 32 * k + l;
            if i < chunk.len() {
                regs[l][k] = regs[l][k].add(chunk[i].widen());
            }
        }
    }
    let mut a: Vec<T::Acc> = regs
        .iter()
        .map(|acc| {
            let mut acc = *acc;
            for k in 0..4 {
                acc[k] = acc[k].merge(acc[k + 4]);
            }
            for k in 0..2 {
                acc[k] = acc[k].merge(acc[k + 2]);
            }
            acc[0].merge(acc[1])
        })
        .collect();
    for w in [16, 8, 4, 2, 1] {
        let before = a.clone();
        for l in 0..32 {
            let other = if l + w < 32 { before[l + w] } else { before[l] };
            a[l] = before[l].merge(other);
        }
    }
    a[0]
}

#[test]
fn the_warp_mapping_computes_the_plain_chunk_tree() {
    let mut r = SmallRng::seed_from_u64(4);
    for len in [1, 31, 257, 4000, CHUNK as usize] {
        let xs: Vec<f32> = (0..len).map(|_| wide(&mut r, 40) as f32).collect();
        assert_eq!(
            warp_partial(&xs).to_bits(),
            cpu::chunk_partial(&xs).to_bits(),
            "f32 len {len}"
        );
        let ys: Vec<f64> = (0..len).map(|_| wide(&mut r, 300)).collect();
        let (a, b): (Compensated, Compensated) = (warp_partial(&ys), cpu::chunk_partial(&ys));
        assert_eq!(
            (a.sum.to_bits(), a.err.to_bits()),
            (b.sum.to_bits(), b.err.to_bits()),
            "f64 len {len}"
        );
    }
}
