//! Three operators and a predicate a user brings, each generic over its element (f32, f16, bf16 … on
//! either side):
//!
//! | operator | accumulator | result |
//! |---|---|---|
//! | [`AbsMax`] | the largest magnitude (f32) | the scale of an FP8 cast |
//! | [`SumSquares`] | Σ x² (f32) | the L2 norm, `sqrt` in `finalize` |
//! | [`Welford`] | count, mean and M2 (f64), merged by Chan's formula | mean and population variance |
//!
//! [`Outside`] is a `DeviceSelect` predicate: it keeps the outliers, `|x| > threshold` (and NaN).
#![no_std]
use core::marker::PhantomData;

use reduce_contract::math::mul_add;
use reduce_contract::op::{Float, Pod, ReduceOp, SelectOp};

/// The largest magnitude, `max |x|`; a NaN anywhere gives NaN; 0 for an empty input.
///
/// The accumulator is the magnitude's bits: with the sign cleared, an f32's bits order as its value does,
/// and every NaN's bits lie above +∞'s, so one unsigned `max` both compares and propagates NaN, where a
/// float `max` would need NaN tests around it (they cost 1 % at 2^28).
pub struct AbsMax<T>(PhantomData<T>);

impl<T: Float> ReduceOp for AbsMax<T> {
    type In = T;
    type Acc = u32;
    type Out = f32;
    const NAME: &'static str = "absmax";

    fn identity() -> u32 {
        0
    }
    fn lift(x: T, _index: u64) -> u32 {
        x.to_f32().to_bits() & 0x7fff_ffff
    }
    fn combine(a: u32, b: u32) -> u32 {
        a.max(b)
    }
    fn finalize(acc: u32) -> f32 {
        f32::from_bits(acc)
    }
}

/// The L2 norm, `sqrt(Σ x²)`, accumulated in f32 like the built-in sum (so its speed is the sum's).
pub struct SumSquares<T>(PhantomData<T>);

impl<T: Float> ReduceOp for SumSquares<T> {
    type In = T;
    type Acc = f32;
    type Out = f32;
    const NAME: &'static str = "sum_squares";

    fn identity() -> f32 {
        0.0
    }
    fn lift(x: T, _index: u64) -> f32 {
        let x = x.to_f32();
        x * x
    }
    fn combine(a: f32, b: f32) -> f32 {
        a + b
    }
    fn finalize(acc: f32) -> f32 {
        libm::sqrtf(acc)
    }
}

/// Count, mean and sum of squared deviations from the mean (`M2`) of a run of elements: Welford's
/// accumulator. In f64, so the variance of `1e6 + U(0, 1)` keeps its digits where `Σx² − n·mean²` loses
/// them all: within about 1e-6 relative of an f64 two-pass reference (runs of 16–32 elements are summed in
/// f32 about their own mean first; see [`Welford`]'s `fold_run`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Moments {
    /// How many elements.
    pub n: f64,
    /// Their mean.
    pub mean: f64,
    /// `Σ (x − mean)²`.
    pub m2: f64,
}

// SAFETY: three f64, no pointers, no padding.
unsafe impl Pod for Moments {}

/// The mean and variance of a [`Welford`] reduction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeanVar {
    /// Elements reduced.
    pub count: u64,
    /// Their mean (NaN for none).
    pub mean: f64,
    /// The population variance, `M2 / n` (NaN for none); the sample variance is `M2 / (n − 1)`.
    pub variance: f64,
}

/// Mean and variance in one read, by Welford's accumulator merged with Chan's formula.
pub struct Welford<T>(PhantomData<T>);

impl<T: Float> ReduceOp for Welford<T> {
    type In = T;
    type Acc = Moments;
    type Out = MeanVar;
    const NAME: &'static str = "welford";

    fn identity() -> Moments {
        Moments::default()
    }
    fn lift(x: T, _index: u64) -> Moments {
        Moments {
            n: 1.0,
            mean: x.to_f64(),
            m2: 0.0,
        }
    }
    /// Chan's merge; an empty side returns the other exactly (the identity law).
    fn combine(a: Moments, b: Moments) -> Moments {
        if b.n == 0.0 {
            return a;
        }
        if a.n == 0.0 {
            return b;
        }
        let n = a.n + b.n;
        let delta = b.mean - a.mean;
        let f = b.n / n;
        Moments {
            n,
            mean: a.mean + delta * f,
            m2: a.m2 + b.m2 + delta * delta * a.n * f,
        }
    }
    fn finalize(acc: Moments) -> MeanVar {
        MeanVar {
            count: acc.n as u64,
            mean: if acc.n > 0.0 { acc.mean } else { f64::NAN },
            variance: acc.m2 / acc.n,
        }
    }

    /// A run's own count, mean and M2, then one merge: one division per run instead of one per element.
    ///
    /// Elements of up to 4 bytes (f32, f16, bf16) are exact in f32, so the run is summed in f32 about a
    /// shift `s`, its f32 mean: `mean = s + Σd / n` and `M2 = Σd² − (Σd)² / n` with `d = x − s`. The
    /// deviations are small and exact where the values are close, so this keeps the digits of a variance
    /// of values far from zero, and only the run's count, mean and M2 are widened to f64 (widening every
    /// element would make a bf16 reduction wait on f64 conversions instead of on memory). `d²` is added with
    /// [`mul_add`], one instruction on the GPU. Wider elements take the same steps in f64.
    #[inline(always)]
    fn fold_run(acc: Moments, len: usize, get: impl Fn(usize) -> (T, u64)) -> Moments {
        let n = len as f64;
        if size_of::<T>() <= 4 {
            let mut sum = 0.0f32;
            reduce_contract::each_index!(I < len, {
                sum += get(I).0.to_f32();
            });
            let shift = sum / len as f32;
            let (mut sd, mut sd2) = (0.0f32, 0.0f32);
            reduce_contract::each_index!(I < len, {
                let d = get(I).0.to_f32() - shift;
                sd += d;
                sd2 = mul_add(d, d, sd2);
            });
            // The run's M2 in f32 too: `Σd` only corrects the rounding of `shift`, so `(Σd)² / n` is tiny
            // next to `Σd²`, and f32 keeps all of its digits that matter.
            let m2 = mul_add(-sd, sd / len as f32, sd2).max(0.0);
            let run = Moments {
                n,
                mean: shift as f64 + sd as f64 / n,
                m2: m2 as f64,
            };
            return Self::combine(acc, run);
        }
        let mut sum = 0.0f64;
        reduce_contract::each_index!(I < len, {
            sum += get(I).0.to_f64();
        });
        let mean = sum / n;
        let mut m2 = 0.0f64;
        reduce_contract::each_index!(I < len, {
            let d = get(I).0.to_f64() - mean;
            m2 = mul_add(d, d, m2);
        });
        Self::combine(acc, Moments { n, mean, m2 })
    }
}

/// Keeps the outliers: elements whose magnitude is over the call's threshold, and NaN (an outlier of every
/// threshold). A predicate for `DeviceSelect::select_if_with`.
pub struct Outside<T>(PhantomData<T>);

impl<T: Float> SelectOp for Outside<T> {
    type In = T;
    const NAME: &'static str = "outside";

    fn keep(threshold: T, x: T) -> bool {
        let x = x.to_f32();
        x.is_nan() || x.abs() > threshold.to_f32()
    }
}
