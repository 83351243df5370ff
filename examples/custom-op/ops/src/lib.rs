//! Three operators a user brings, each generic over its element (f32, f16, bf16 … on either side):
//!
//! | operator | accumulator | result |
//! |---|---|---|
//! | [`AbsMax`] | the largest magnitude (f32) | the scale of an FP8 cast |
//! | [`SumSquares`] | Σ x² (f32) | the L2 norm, `sqrt` in `finalize` |
//! | [`Welford`] | count and sums about a shift (f64), merged by Chan's formula | mean and population variance |
#![no_std]
use core::marker::PhantomData;

use reduce_contract::op::{Float, Pod, ReduceOp};

/// The largest magnitude, `max |x|`; a NaN anywhere gives NaN; 0 for an empty input.
pub struct AbsMax<T>(PhantomData<T>);

impl<T: Float> ReduceOp for AbsMax<T> {
    type In = T;
    type Acc = f32;
    type Out = f32;
    const NAME: &'static str = "absmax";

    fn identity() -> f32 {
        0.0
    }
    fn lift(x: T, _index: u64) -> f32 {
        x.to_f32().abs()
    }
    fn combine(a: f32, b: f32) -> f32 {
        // NaN-propagating: `f32::max` would drop it.
        if a.is_nan() || b.is_nan() {
            f32::NAN
        } else {
            a.max(b)
        }
    }
    fn finalize(acc: f32) -> f32 {
        acc
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

/// Welford's accumulator in shifted form: `n` elements summarised by their sums about a `shift`,
/// `s1 = Σ(x − shift)` and `s2 = Σ(x − shift)²`, in f64. The mean is `shift + s1 / n` and `M2 = s2 − s1² / n`.
/// The shift is the first element a thread sees, then the merged mean, so it sits near the data and the
/// subtraction keeps the digits of a variance of values far from zero (`1e6 + U(0, 1)`: within about 1e-6
/// relative of an f64 two-pass reference), where `Σx² − n·mean²` loses them all.
///
/// Runs of elements add to the sums without a division; only merges of two accumulators divide.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Moments {
    /// How many elements.
    pub n: f64,
    /// The point the sums are taken about.
    pub shift: f64,
    /// `Σ (x − shift)`.
    pub s1: f64,
    /// `Σ (x − shift)²`.
    pub s2: f64,
}

// SAFETY: four f64, no pointers, no padding.
unsafe impl Pod for Moments {}

impl Moments {
    /// The mean and `M2 = Σ(x − mean)²`.
    pub fn mean_m2(self) -> (f64, f64) {
        let d = self.s1 / self.n;
        (self.shift + d, (self.s2 - self.s1 * d).max(0.0))
    }
}

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

/// Mean and variance in one read: Welford's accumulator, merged with Chan's formula.
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
            shift: x.to_f64(),
            s1: 0.0,
            s2: 0.0,
        }
    }
    /// Chan's merge of the two means and M2s, kept about the merged mean; an empty side returns the other
    /// exactly (the identity law).
    fn combine(a: Moments, b: Moments) -> Moments {
        if b.n == 0.0 {
            return a;
        }
        if a.n == 0.0 {
            return b;
        }
        let ((ma, m2a), (mb, m2b)) = (a.mean_m2(), b.mean_m2());
        let n = a.n + b.n;
        let delta = mb - ma;
        let f = b.n / n;
        Moments {
            n,
            shift: ma + delta * f,
            s1: 0.0,
            s2: m2a + m2b + delta * delta * a.n * f,
        }
    }
    fn finalize(acc: Moments) -> MeanVar {
        let (mean, m2) = acc.mean_m2();
        MeanVar {
            count: acc.n as u64,
            mean: if acc.n > 0.0 { mean } else { f64::NAN },
            variance: m2 / acc.n,
        }
    }

    /// Adds a run to the sums about the accumulator's shift (the run's first element when it is empty):
    /// no division, and for elements of up to 4 bytes (f32, f16, bf16, exact in f32) the run is summed in
    /// f32 about the shift rounded to f32, with only the run's two totals widened to f64 and moved to the
    /// exact shift. Widening and merging per element would make a bf16 reduction wait on f64 arithmetic
    /// instead of on memory.
    #[inline(always)]
    fn fold_run(acc: Moments, len: usize, get: impl Fn(usize) -> (T, u64)) -> Moments {
        let shift = if acc.n == 0.0 {
            get(0).0.to_f64()
        } else {
            acc.shift
        };
        let n = len as f64;
        let (s1, s2) = if size_of::<T>() <= 4 {
            let t = shift as f32;
            let (mut sd, mut sd2) = (0.0f32, 0.0f32);
            reduce_contract::each_index!(I < len, {
                let d = get(I).0.to_f32() - t;
                sd += d;
                sd2 += d * d;
            });
            // The run's sums about `t`, moved to the exact shift: x − shift = (x − t) + δ.
            let (sd, sd2, delta) = (sd as f64, sd2 as f64, t as f64 - shift);
            (sd + n * delta, sd2 + delta * (2.0 * sd + n * delta))
        } else {
            let (mut sd, mut sd2) = (0.0f64, 0.0f64);
            reduce_contract::each_index!(I < len, {
                let d = get(I).0.to_f64() - shift;
                sd += d;
                sd2 += d * d;
            });
            (sd, sd2)
        };
        Moments {
            n: acc.n + n,
            shift,
            s1: acc.s1 + s1,
            s2: acc.s2 + s2,
        }
    }
}
