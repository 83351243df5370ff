//! Shared pieces of the GPU tests: a handle, input generators per element type and the comparison against
//! the CPU reference, generic over every element type.
#![allow(dead_code)]

#[macro_use]
mod instantiate;
pub mod topk;

use cust::memory::{CopyDestination, DeviceBuffer, DeviceCopy, DeviceSlice};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use reduce_host::cpu::{self, RefElement};
use reduce_host::{BF16, Combine, DeviceReduce, DeviceView, F16, OrdElement, SumElement};

/// Why GPU tests are ignored by default.
pub const NEEDS_GPU: &str = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine";

/// A handle on device 0; a GPU test without one is a failure, not a pass.
pub fn gpu() -> DeviceReduce {
    DeviceReduce::new()
        .expect("GPU tests need a CUDA device (run them with --include-ignored only on a GPU)")
}

/// Sizes around the warp, block and vector boundaries that every reduction test covers; each suite adds its
/// own large size.
pub const EDGE_SIZES: [usize; 11] = [0, 1, 2, 3, 31, 32, 33, 1023, 1024, 1025, (1 << 20) + 3];

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

/// The reference sum of one input, computed once for every offset and strategy it is checked with.
#[derive(Clone, Copy, Debug)]
pub enum SumWant {
    /// A float sum: the compensated f64 sum and the error an f32/f64 tree sum may have.
    Float { value: f64, tolerance: f64 },
    /// An integer sum: exact; the GPU's i64/u64 result is this modulo 2^64.
    Exact(i128),
    /// A float sum whose absolute values add up past the accumulator's largest finite value: a partial sum
    /// may overflow to ±∞ (and ∞ − ∞ give NaN), so a non-finite result is right too.
    MayOverflow { value: f64, tolerance: f64 },
}

/// What the generic checks need of an element type.
pub trait TestElement:
    SumElement + OrdElement + RefElement + PartialEq + DeviceCopy + Default
{
    /// A random value: floats uniform in [-1, 1), integers over their whole range.
    fn random(r: &mut SmallRng) -> Self;
    /// The pads put before and after a sub-slice: extremes that would change every result if read.
    fn pads() -> (Self, Self);
    /// An ordinary value for all-equal inputs.
    fn some_value() -> Self;
    /// Values to plant first, middle and last: NaN, ±∞, ± max finite and subnormals for floats; MIN, MAX and
    /// 0 for integers.
    fn specials() -> Vec<Self>;
    /// The reference sum of `host`.
    fn sum_want(host: &[Self]) -> SumWant;
    /// Whether a GPU sum agrees with the reference.
    fn sum_matches(got: Self::Acc, want: SumWant) -> bool;
}

/// The float-only inputs: signed zeros, infinities together, subnormals.
pub trait FloatTest: TestElement {
    /// The nearest value to `x`.
    fn from_f32(x: f32) -> Self;
    /// A random subnormal of random sign.
    fn subnormal(r: &mut SmallRng) -> Self;
}

/// The integer-only inputs.
pub trait IntTest: TestElement {
    /// The least value, `MIN`.
    const LEAST: Self;
    /// The greatest value, `MAX`.
    const GREATEST: Self;
    /// `MIN`, `MAX`, `MIN + 1`, `MAX - 1` or 0, at random: sums that overflow and many ties.
    fn random_extreme(r: &mut SmallRng) -> Self;
}

/// Allowed error of a float sum with unit roundoff `eps` of `n` values whose absolute values sum to `abs_sum`.
pub fn sum_tolerance_eps(n: usize, abs_sum: f64, eps: f64) -> f64 {
    // The floor only keeps the tolerance positive; sums of subnormals are exact in the accumulators anyway.
    ((n.max(2) as f64).log2() + 16.0) * eps * abs_sum + f64::MIN_POSITIVE
}

/// Allowed error of an f32 sum of `n` values whose absolute values sum to `abs_sum`.
pub fn sum_tolerance(n: usize, abs_sum: f64) -> f64 {
    sum_tolerance_eps(n, abs_sum, f32::EPSILON as f64 / 2.0)
}

fn float_sum_want<T: RefElement>(host: &[T], eps: f64) -> SumWant {
    let abs_sum = cpu::abs_sum_f64(host);
    let (value, tolerance) = (
        cpu::sum_f64(host),
        sum_tolerance_eps(host.len(), abs_sum, eps),
    );
    // f64 accumulates the f64 inputs, f32 every other float type.
    let largest = if eps < f32::EPSILON as f64 / 2.0 {
        f64::MAX
    } else {
        f32::MAX as f64
    };
    // Overflow needs finite inputs that add up past the largest finite value (∞ + (−∞) is NaN either way).
    let finite_abs_sum: f64 = host
        .iter()
        .map(|x| x.to_f64().abs())
        .filter(|a| a.is_finite())
        .sum();
    if finite_abs_sum > largest {
        // The f64 reference itself may overflow on f64 inputs: sum them scaled down by 2^64 (exact).
        let scale = 2f64.powi(64);
        let scaled: Vec<f64> = host.iter().map(|x| x.to_f64() / scale).collect();
        let value = cpu::sum_f64(&scaled) * scale;
        let tolerance = sum_tolerance_eps(host.len(), cpu::abs_sum_f64(&scaled), eps) * scale;
        SumWant::MayOverflow { value, tolerance }
    } else {
        SumWant::Float { value, tolerance }
    }
}

fn float_sum_matches(got: f64, want: SumWant) -> bool {
    match want {
        SumWant::Float { value, .. } if value.is_nan() => got.is_nan(),
        SumWant::Float { value, .. } if value.is_infinite() => got == value,
        SumWant::Float { value, tolerance } => (got - value).abs() <= tolerance,
        SumWant::MayOverflow { value, tolerance } => {
            !got.is_finite() || (got - value).abs() <= tolerance
        }
        SumWant::Exact(_) => false,
    }
}

macro_rules! float_test {
    ($($t:ty: eps $eps:expr, pad $pad:expr, subnormal bits $sub:expr;)*) => {$(
        impl TestElement for $t {
            fn random(r: &mut SmallRng) -> Self {
                r.random_range(-1.0..1.0)
            }
            fn pads() -> (Self, Self) {
                ($pad, -$pad)
            }
            fn some_value() -> Self {
                0.75
            }
            fn specials() -> Vec<Self> {
                let sub = <$t>::from_bits(1);
                vec![<$t>::NAN, <$t>::INFINITY, <$t>::NEG_INFINITY, <$t>::MAX, <$t>::MIN, sub, -sub]
            }
            fn sum_want(host: &[Self]) -> SumWant {
                float_sum_want(host, $eps)
            }
            fn sum_matches(got: Self, want: SumWant) -> bool {
                float_sum_matches(got as f64, want)
            }
        }
        impl FloatTest for $t {
            fn from_f32(x: f32) -> Self {
                x as $t
            }
            fn subnormal(r: &mut SmallRng) -> Self {
                let v = <$t>::from_bits(r.random_range(1..$sub));
                if r.random() { -v } else { v }
            }
        }
    )*};
}
float_test! {
    f32: eps f32::EPSILON as f64 / 2.0, pad 1.0e30, subnormal bits 1 << 23;
    f64: eps f64::EPSILON / 2.0, pad 1.0e300, subnormal bits 1 << 52;
}

/// f16 and bf16: summed in f32, so judged with the f32 tolerance against the f64 sum of the widened values.
macro_rules! half_test {
    ($($t:ident($h:ty): subnormal bits $sub:expr;)*) => {$(
        impl TestElement for $t {
            fn random(r: &mut SmallRng) -> Self {
                Self::from_f32(r.random_range(-1.0..1.0))
            }
            fn pads() -> (Self, Self) {
                ($t(<$h>::MAX), $t(<$h>::MIN))
            }
            fn some_value() -> Self {
                Self::from_f32(0.75)
            }
            fn specials() -> Vec<Self> {
                let sub = <$h>::from_bits(1);
                [<$h>::NAN, <$h>::INFINITY, <$h>::NEG_INFINITY, <$h>::MAX, <$h>::MIN, sub, -sub]
                    .into_iter()
                    .map($t)
                    .collect()
            }
            fn sum_want(host: &[Self]) -> SumWant {
                float_sum_want(host, f32::EPSILON as f64 / 2.0)
            }
            fn sum_matches(got: f32, want: SumWant) -> bool {
                float_sum_matches(got as f64, want)
            }
        }
        impl FloatTest for $t {
            fn from_f32(x: f32) -> Self {
                $t(<$h>::from_f32(x))
            }
            fn subnormal(r: &mut SmallRng) -> Self {
                let v = <$h>::from_bits(r.random_range(1..$sub));
                $t(if r.random() { -v } else { v })
            }
        }
    )*};
}
half_test! {
    F16(half::f16): subnormal bits 1 << 10;
    BF16(half::bf16): subnormal bits 1 << 7;
}

macro_rules! int_test {
    ($($t:ty => $acc:ty),*) => {$(
        impl TestElement for $t {
            fn random(r: &mut SmallRng) -> Self {
                r.random()
            }
            fn pads() -> (Self, Self) {
                (<$t>::MAX, <$t>::MIN)
            }
            fn some_value() -> Self {
                7
            }
            fn specials() -> Vec<Self> {
                vec![<$t>::MIN, <$t>::MAX, 0]
            }
            fn sum_want(host: &[Self]) -> SumWant {
                SumWant::Exact(cpu::sum_exact_i128(host))
            }
            fn sum_matches(got: $acc, want: SumWant) -> bool {
                // `as` from i128 keeps the low 64 bits: the wrapped sum.
                matches!(want, SumWant::Exact(e) if got == e as $acc)
            }
        }
        impl IntTest for $t {
            const LEAST: Self = <$t>::MIN;
            const GREATEST: Self = <$t>::MAX;
            fn random_extreme(r: &mut SmallRng) -> Self {
                [<$t>::MIN, <$t>::MAX, <$t>::MIN + 1, <$t>::MAX - 1, 0][r.random_range(0..5)]
            }
        }
    )*};
}
int_test!(i32 => i64, u32 => u64, i64 => i64, u64 => u64, u8 => u64);

/// Random values of `T` (see [`TestElement::random`]).
pub fn random_of<T: TestElement>(n: usize, seed: u64) -> Vec<T> {
    let mut r = rng(seed);
    (0..n).map(|_| T::random(&mut r)).collect()
}

/// Uniform random f32 in [-1, 1), never all zeros.
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    random_of(n, seed)
}

/// Uploads `data` after `offset` leading pad elements, so `DeviceView::from(&buf).slice(offset..)` is a
/// sub-slice at that element offset (misaligned for 16-byte loads unless `offset * size_of::<T>()` is a
/// multiple of 16). Pads are extremes that would break every result if read.
pub fn upload_at<T: TestElement>(data: &[T], offset: usize) -> DeviceBuffer<T> {
    let (before, after) = T::pads();
    let mut padded = vec![before; offset];
    padded.extend_from_slice(data);
    padded.extend(std::iter::repeat_n(after, 5));
    DeviceBuffer::from_slice(&padded).expect("upload")
}

/// Both NaN, or equal values (so -0.0 == +0.0).
pub fn same_value<T: RefElement + PartialEq>(a: T, b: T) -> bool {
    (a.is_nan() && b.is_nan()) || a == b
}

/// Checks a GPU sum against the reference of `host`.
pub fn check_sum<T: TestElement>(got: T::Acc, host: &[T], what: &str) {
    check_sum_want::<T>(got, T::sum_want(host), what);
}

pub fn check_sum_want<T: TestElement>(got: T::Acc, want: SumWant, what: &str) {
    assert!(
        T::sum_matches(got, want),
        "{what}: {} sum {got:?} vs {want:?}",
        std::any::type_name::<T>().rsplit("::").next().unwrap()
    );
}

/// The CPU reference results of one input.
pub struct Expected<T> {
    sum: SumWant,
    max: Option<T>,
    min: Option<T>,
    argmax: Option<(usize, T)>,
    argmin: Option<(usize, T)>,
}

impl<T: TestElement> Expected<T> {
    /// Computes every reference result of `host`.
    pub fn of(host: &[T]) -> Self {
        Expected {
            sum: T::sum_want(host),
            max: cpu::max(host),
            min: cpu::min(host),
            argmax: cpu::argmax(host),
            argmin: cpu::argmin(host),
        }
    }
}

/// Runs all five reductions on `slice` and compares with the expected results.
pub fn check_expected<T: TestElement>(
    reduce: &mut DeviceReduce,
    slice: DeviceView<'_, T>,
    want: &Expected<T>,
    what: &str,
) {
    let what = format!(
        "{what} [{}]",
        std::any::type_name::<T>().rsplit("::").next().unwrap()
    );
    check_sum_want::<T>(reduce.sum(slice).expect("sum"), want.sum, &what);
    for (name, got, want) in [
        ("max", reduce.max(slice).expect("max"), want.max),
        ("min", reduce.min(slice).expect("min"), want.min),
    ] {
        match (got, want) {
            (Some(g), Some(w)) => assert!(same_value(g, w), "{what}: {name} {g:?} vs {w:?}"),
            (g, w) => assert_eq!(g.is_none(), w.is_none(), "{what}: {name} {g:?} vs {w:?}"),
        }
    }
    for (name, got, want) in [
        ("argmax", reduce.argmax(slice).expect("argmax"), want.argmax),
        ("argmin", reduce.argmin(slice).expect("argmin"), want.argmin),
    ] {
        match (got, want) {
            (Some(g), Some((i, w))) => {
                assert_eq!(
                    g.index, i as u64,
                    "{what}: {name} index (value {:?} vs {w:?})",
                    g.value
                );
                assert!(
                    same_value(g.value, w),
                    "{what}: {name} value {:?} vs {w:?}",
                    g.value
                );
            }
            (g, w) => assert_eq!(g.is_none(), w.is_none(), "{what}: {name} {g:?} vs {w:?}"),
        }
    }
}

/// Runs all five reductions on `slice` (whose host copy is `host`) and compares with the CPU reference.
pub fn check_all<T: TestElement>(
    reduce: &mut DeviceReduce,
    slice: DeviceView<'_, T>,
    host: &[T],
    what: &str,
) {
    check_expected(reduce, slice, &Expected::of(host), what);
}

/// The Atomic strategy's documented extra error for f32 accumulators: the hardware's f32 atomic add
/// flushes a subnormal running total, up to 2^-126 per block.
pub fn atomic_allowance(want: SumWant, reduce: &DeviceReduce) -> SumWant {
    let blocks = (reduce.device_info().sm_count * reduce.policy().blocks_per_sm) as f64;
    match want {
        SumWant::Float { value, tolerance } => SumWant::Float {
            value,
            tolerance: tolerance + blocks * f32::MIN_POSITIVE as f64,
        },
        SumWant::MayOverflow { value, tolerance } => SumWant::MayOverflow {
            value,
            tolerance: tolerance + blocks * f32::MIN_POSITIVE as f64,
        },
        exact => exact,
    }
}

/// `check_all` at every sub-slice offset 0..8, and 0..16 for bytes (so every misalignment of the start for
/// 16-byte loads), and with each combine strategy (Atomic for the sum only).
pub fn check_offsets<T: TestElement>(reduce: &mut DeviceReduce, host: &[T], what: &str) {
    let want = Expected::of(host);
    for offset in 0..(16 / size_of::<T>()).max(8) {
        let buf = upload_at(host, offset);
        let slice = DeviceView::from(&buf).slice(offset..offset + host.len());
        for combine in [Combine::TwoPass, Combine::LastBlock] {
            reduce.set_combine(combine);
            check_expected(
                reduce,
                slice,
                &want,
                &format!("{what}, offset {offset}, {combine:?}"),
            );
        }
        reduce.set_combine(Combine::Atomic);
        check_sum_want::<T>(
            reduce.sum(slice).expect("atomic sum"),
            atomic_allowance(want.sum, reduce),
            &format!("{what}, offset {offset}, Atomic"),
        );
        reduce.set_combine(Combine::TwoPass);
    }
}

/// Reads a device slice back.
pub fn download<T: TestElement>(slice: &DeviceSlice<T>) -> Vec<T> {
    let mut v = vec![T::default(); slice.len()];
    slice.copy_to(&mut v[..]).expect("download");
    v
}

/// A proptest runner of `REDUCE_PROPTEST_CASES` cases (256 by default), seeded by `REDUCE_PROPTEST_SEED` if
/// set, else a fresh seed; the seed is printed first either way, so a failure can be replayed.
pub fn runner(property: &str) -> proptest::test_runner::TestRunner {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<u64>().ok());
    let seed = env("REDUCE_PROPTEST_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        t.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    eprintln!("{property}: REDUCE_PROPTEST_SEED={seed}");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: env("REDUCE_PROPTEST_CASES").unwrap_or(256) as u32,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}
