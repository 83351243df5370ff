//! Welford's accumulator, merged by Chan's formula: the mean and variance in one read.
use core::marker::PhantomData;

use super::in_f32;
use crate::math::mul_add;
use crate::op::{Float, Pod, ReduceOp};

/// Count, mean and sum of squared deviations from the mean (`M2`) of some elements, in f64, so the
/// variance of `1e6 + U(0, 1)` keeps its digits where `Σx² − n·mean²` loses them all.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Moments {
    /// How many elements.
    pub n: f64,
    /// Their mean (0 for none).
    pub mean: f64,
    /// `Σ (x − mean)²`.
    pub m2: f64,
}

// SAFETY: three f64, no pointers, no padding.
unsafe impl Pod for Moments {}

#[cfg(feature = "cust")]
// SAFETY: plain f64s.
unsafe impl cust_core::DeviceCopy for Moments {}

impl Moments {
    /// The elements' count.
    pub fn count(&self) -> u64 {
        self.n as u64
    }

    /// Their mean; NaN for none.
    pub fn mean(&self) -> f64 {
        if self.n > 0.0 { self.mean } else { f64::NAN }
    }

    /// `M2 / (n − correction)`: the population variance with `correction = 0`, the sample variance with 1
    /// (torch's `correction`). NaN when `n ≤ correction`.
    pub fn variance(&self, correction: f64) -> f64 {
        let d = self.n - correction;
        if d > 0.0 { self.m2 / d } else { f64::NAN }
    }

    /// Chan's merge of the moments of two disjoint sets; an empty side gives the other exactly.
    #[inline(always)]
    pub fn merge(a: Moments, b: Moments) -> Moments {
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
            // Equal means stay (two infinite ones too, where `delta` is NaN).
            mean: if a.mean == b.mean {
                a.mean
            } else {
                mul_add(delta, f, a.mean)
            },
            m2: mul_add(delta * delta * a.n, f, a.m2 + b.m2),
        }
    }

    /// The moments of a run of `len` elements (`get(i)`, `len ≥ 1`): its own mean first, then the squared
    /// deviations from it, so only one division per run instead of one per element.
    ///
    /// Elements of up to 4 bytes (f32, f16, bf16) are exact in f32, so the run is summed in f32 about a
    /// shift `s`, its f32 mean: `mean = s + Σd / n` and `M2 = Σd² − (Σd)² / n` with `d = x − s`. The
    /// deviations are small and exact where the values are close, which keeps the digits of a variance of
    /// values far from zero; only the run's count, mean and M2 are widened to f64. Wider elements take the
    /// same steps in f64.
    #[inline(always)]
    pub fn of_run<T: Float>(len: usize, get: impl Fn(usize) -> T) -> Moments {
        let n = len as f64;
        let mut shift = f32::NAN;
        if in_f32::<T>() {
            let mut sum = 0.0f32;
            crate::each_index!(I < len, {
                sum += get(I).to_f32();
            });
            shift = sum / len as f32;
        }
        // An infinity (or an f32 sum past f32's range) takes the f64 steps, which give IEEE's mean.
        if shift.is_finite() {
            let (mut sd, mut sd2) = (0.0f32, 0.0f32);
            crate::each_index!(I < len, {
                let d = get(I).to_f32() - shift;
                sd += d;
                sd2 = mul_add(d, d, sd2);
            });
            // `Σd` only corrects the rounding of `shift`, so `(Σd)² / n` is tiny next to `Σd²`, and f32
            // keeps all of its digits that matter.
            let m2 = mul_add(-sd, sd / len as f32, sd2);
            // Rounding may leave a tiny negative; a NaN stays.
            let m2 = if m2 < 0.0 { 0.0 } else { m2 };
            return Moments {
                n,
                mean: shift as f64 + sd as f64 / n,
                m2: m2 as f64,
            };
        }
        let mut sum = 0.0f64;
        crate::each_index!(I < len, {
            sum += get(I).to_f64();
        });
        let mean = sum / n;
        let mut m2 = 0.0f64;
        crate::each_index!(I < len, {
            let d = get(I).to_f64() - mean;
            m2 = mul_add(d, d, m2);
        });
        Moments { n, mean, m2 }
    }
}

/// The mean and variance in one read: Welford's accumulator ([`Moments`]) merged by Chan's formula. The
/// result is the accumulator; [`Moments::mean`] and [`Moments::variance`] finish it.
///
/// Accuracy: within about 1e-6 relative of an f64 two-pass reference on `1e6 + U(0, 1)`, where the
/// one-pass sum-of-squares formula has no correct digit. A NaN gives NaN; an infinity a NaN variance.
pub struct Welford<T>(PhantomData<T>);

impl<T: Float> ReduceOp for Welford<T> {
    type In = T;
    type Acc = Moments;
    type Out = Moments;
    const NAME: &'static str = "var_mean";

    fn identity() -> Moments {
        Moments::default()
    }
    fn lift(x: T, _index: u64) -> Moments {
        let x = x.to_f64();
        // `(x − mean)²`: 0, or NaN for an infinity or a NaN (IEEE's two-pass variance of one element).
        #[allow(clippy::eq_op)]
        let d = x - x;
        Moments {
            n: 1.0,
            mean: x,
            m2: d * d,
        }
    }
    fn combine(a: Moments, b: Moments) -> Moments {
        Moments::merge(a, b)
    }
    fn finalize(acc: Moments) -> Moments {
        acc
    }
    #[inline(always)]
    fn fold_run(acc: Moments, len: usize, get: impl Fn(usize) -> (T, u64)) -> Moments {
        Moments::merge(acc, Moments::of_run(len, |i| get(i).0))
    }
}
