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
            // Equal means stay (two infinite ones too, where `delta` is NaN). An infinite `delta` (an
            // infinite mean, or finite ones too far apart) takes the weighted sum, whose infinity (or NaN,
            // for infinities of both signs) is IEEE's, where `a.mean + delta · f` would give ∞ − ∞.
            mean: if a.mean == b.mean {
                a.mean
            } else if delta.abs() < f64::INFINITY {
                mul_add(delta, f, a.mean)
            } else {
                a.mean * (a.n / n) + b.mean * f
            },
            m2: mul_add(delta * delta * a.n, f, a.m2 + b.m2),
        }
    }

    /// The moments of a run of `len` elements (`get(i)`, `len ≥ 1`), with one division per run instead of
    /// one per element.
    ///
    /// Elements of up to 4 bytes (f32, f16, bf16) are exact in f32, so the run is summed in one pass, in
    /// f32, about its first element `s`: with `d = x − s`, `mean = s + Σd / n` and `M2 = Σd² − (Σd)² / n`.
    /// Shifting by an element of the run bounds the cancellation: `n · (mean − s)² ≤ (n − 1) · M2`, so
    /// `Σd² ≤ n · M2` and the subtraction loses at most `log2 n` bits (5 for the 32-element runs of
    /// 16-bit input); where the values are close (`1e6 + U(0, 1)`) the deviations are small and exact and
    /// nothing is lost. One pass issues one add fewer per element than summing for the mean first, and four
    /// partial sums keep the dependent chains short. Only the run's count, mean and M2 are widened to f64.
    /// A run holding an infinity or a NaN (or whose squares pass f32's range) takes the same steps in f64
    /// about the mean, which give IEEE's results.
    #[inline(always)]
    pub fn of_run<T: Float>(len: usize, get: impl Fn(usize) -> T) -> Moments {
        if in_f32::<T>() {
            let mut run = Deviations::about(get(0).to_f32());
            crate::each_index!(I < len, {
                run.add(I, get(I).to_f32());
            });
            if let Some(m) = run.moments(len) {
                return m;
            }
        }
        Moments::of_run_f64(len, get)
    }

    /// [`of_run`](Self::of_run) in f64, by two passes about the mean: for f64 elements, and for a run of
    /// narrower ones that holds an infinity or a NaN (IEEE's results) or whose squares pass f32's range.
    /// A run longer than [`PIECE`] (whose length is a multiple of it) goes in pieces merged in order, so
    /// that a rare path inside a kernel's loop holds `PIECE` widened elements, not the whole run's.
    #[inline(always)]
    pub(crate) fn of_run_f64<T: Float>(len: usize, get: impl Fn(usize) -> T) -> Moments {
        if len <= PIECE || !len.is_multiple_of(PIECE) {
            return Moments::two_pass(len, get);
        }
        let mut m = Moments::default();
        crate::each_index!(P < len / PIECE, {
            m = Moments::merge(m, Moments::two_pass(PIECE, |i| get(P * PIECE + i)));
        });
        m
    }

    /// The moments of `len` elements by two passes in f64 about their mean.
    #[inline(always)]
    fn two_pass<T: Float>(len: usize, get: impl Fn(usize) -> T) -> Moments {
        let n = len as f64;
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

/// Elements [`Moments::of_run_f64`] widens at a time.
const PIECE: usize = 8;

/// The sums of one pass over a run of f32 values (or narrower floats, widened exactly) about its first
/// element `s`: `Σd` and `Σd²` with `d = x − s`, in four partial sums each so the dependent chains stay
/// short. [`Moments::of_run`] is built on it, and [`Summary`](super::Summary) runs it beside the extrema's
/// bounds.
#[derive(Clone, Copy)]
pub(crate) struct Deviations {
    s: f32,
    sd: [f32; 4],
    sd2: [f32; 4],
}

impl Deviations {
    /// No element yet, about `s` (the run's first element).
    #[inline(always)]
    pub(crate) fn about(s: f32) -> Deviations {
        // −0.0 is the exact identity of `+`, so the first add of each chain folds away.
        Deviations {
            s,
            sd: [-0.0; 4],
            sd2: [-0.0; 4],
        }
    }

    /// Adds element `i` of the run (a constant after inlining), `x`.
    #[inline(always)]
    pub(crate) fn add(&mut self, i: usize, x: f32) {
        let d = x - self.s;
        self.sd[i % 4] += d;
        self.sd2[i % 4] = mul_add(d, d, self.sd2[i % 4]);
    }

    /// Whether a run of at most 64 elements whose least and greatest values are `(lo, hi)` (NaN when it
    /// holds a NaN) sums finitely in f32 about any of its elements: every element finite and every
    /// deviation below 2^60 in size, so the 64 squares stay below 2^126. Otherwise the run takes
    /// [`Moments::of_run_f64`].
    #[inline(always)]
    pub(crate) fn fit((lo, hi): (f32, f32)) -> bool {
        hi - lo < (1u64 << 60) as f32
    }

    /// The moments of the `len` elements added, or `None` when a sum is not finite: then some element is
    /// not (or the squares overflow), and the run takes [`Moments::of_run_f64`].
    #[inline(always)]
    pub(crate) fn moments(self, len: usize) -> Option<Moments> {
        let (sd, sd2) = (self.sum(), self.sum_of_squares());
        // (`Σd` is finite when `Σd²` is; testing both has both sums done before the branch, instead of
        // every deviation kept alive across it.)
        if !(sd2 < f32::INFINITY && sd.abs() < f32::INFINITY) {
            return None;
        }
        Some(self.finite_moments(len))
    }

    /// The moments of the `len` elements added, from a run that [`fit`](Self::fit).
    #[inline(always)]
    pub(crate) fn finite_moments(self, len: usize) -> Moments {
        let (sd, sd2) = (self.sum(), self.sum_of_squares());
        let n = len as f64;
        let m2 = mul_add(-sd, sd / len as f32, sd2);
        // Rounding may leave a tiny negative.
        let m2 = if m2 < 0.0 { 0.0 } else { m2 };
        Moments {
            n,
            mean: self.s as f64 + sd as f64 / n,
            m2: m2 as f64,
        }
    }

    #[inline(always)]
    fn sum(&self) -> f32 {
        let sd = self.sd;
        (sd[0] + sd[1]) + (sd[2] + sd[3])
    }

    #[inline(always)]
    fn sum_of_squares(&self) -> f32 {
        let sd2 = self.sd2;
        (sd2[0] + sd2[1]) + (sd2[2] + sd2[3])
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
