//! Three operators and a predicate a user brings, each generic over its element (f32, f16, bf16 … on
//! either side):
//!
//! | operator | accumulator | result |
//! |---|---|---|
//! | [`AbsMax`] | the largest magnitude (f32) | the scale of an FP8 cast |
//! | [`SumSquares`] | Σ x² (f32) | the L2 norm, `sqrt` in `finalize` |
//! | [`Welford`] | the library's [`Moments`]: count, mean and M2 (f64), merged by Chan's formula | mean and population variance |
//!
//! [`Outside`] is a `DeviceSelect` predicate: it keeps the outliers, `|x| > threshold` (and NaN).
#![no_std]
use core::marker::PhantomData;

use reduce_contract::op::{Float, ReduceOp, SelectOp};

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

/// Count, mean and `M2` of some elements: the library's Welford accumulator (`reduce_contract::stats`),
/// which a user's operator can build on: its Chan merge and its per-run fold are public.
pub use reduce_contract::stats::Moments;

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
        Moments::merge(a, b)
    }
    fn finalize(acc: Moments) -> MeanVar {
        MeanVar {
            count: acc.count(),
            mean: acc.mean(),
            variance: acc.m2 / acc.n,
        }
    }

    /// A run's own count, mean and M2 (summed in f32 about its own mean for elements of up to 4 bytes,
    /// see [`Moments::of_run`]), then one merge: one division per run instead of one per element.
    #[inline(always)]
    fn fold_run(acc: Moments, len: usize, get: impl Fn(usize) -> (T, u64)) -> Moments {
        Moments::merge(acc, Moments::of_run(len, |i| get(i).0))
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
