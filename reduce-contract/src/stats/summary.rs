//! Every statistic in one read: the moments and the extrema together.
use core::marker::PhantomData;

use super::extrema;
use super::moments::Deviations;
use super::{Extrema, Moments, in_f32};
use crate::op::{Float, Pod, ReduceOp};

/// [`Moments`] and [`Extrema`] side by side (56 bytes): count, sum (`n · mean`), mean, M2, min, max and
/// their indices.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct SummaryAcc {
    /// Count, mean and M2.
    pub moments: Moments,
    /// Least and greatest elements, with their first indices.
    pub extrema: Extrema,
}

// SAFETY: two `Pod` structs of 24 and 32 bytes, both 8-aligned: no padding.
unsafe impl Pod for SummaryAcc {}

#[cfg(feature = "cust")]
// SAFETY: plain numbers.
unsafe impl cust_core::DeviceCopy for SummaryAcc {}

/// The one-read summary: [`Welford`](super::Welford) and [`MinMax`](super::MinMax) fused.
pub struct Summary<T>(PhantomData<T>);

impl<T: Float> ReduceOp for Summary<T> {
    type In = T;
    type Acc = SummaryAcc;
    type Out = SummaryAcc;
    const NAME: &'static str = "stats";

    fn identity() -> SummaryAcc {
        SummaryAcc::default()
    }
    fn lift(x: T, index: u64) -> SummaryAcc {
        SummaryAcc {
            moments: super::Welford::<T>::lift(x, index),
            extrema: super::MinMax::<T>::lift(x, index),
        }
    }
    fn combine(a: SummaryAcc, b: SummaryAcc) -> SummaryAcc {
        SummaryAcc {
            moments: Moments::merge(a.moments, b.moments),
            extrema: Extrema::merge(a.extrema, b.extrema),
        }
    }
    fn finalize(acc: SummaryAcc) -> SummaryAcc {
        acc
    }
    /// For elements of up to 4 bytes: the moments' one pass and the extrema's bounds
    /// ([`Float::run_bounds`]: paired instructions for 16-bit floats), then the rare paths (a new extreme's
    /// index, a run holding an infinity), which read the run again.
    #[inline(always)]
    fn fold_run(acc: SummaryAcc, len: usize, get: impl Fn(usize) -> (T, u64)) -> SummaryAcc {
        fold_run_in(acc, len, get, false)
    }
    /// For elements of up to 4 bytes: the summary is bound by issue slots (`stats` bf16 at 2^28: 182.4 →
    /// 146.3 µs, f32 276.2 → 263.9).
    const DEFERS: bool = in_f32::<T>();
    /// As `fold_run`, with a new extreme's index left for [`revisit`](ReduceOp::revisit), as
    /// [`Extrema::fold_run_deferred`].
    #[inline(always)]
    fn fold_run_deferred(
        acc: SummaryAcc,
        len: usize,
        get: impl Fn(usize) -> (T, u64),
    ) -> SummaryAcc {
        fold_run_in(acc, len, get, Self::DEFERS)
    }
    #[inline(always)]
    fn revisit<G: Fn(usize) -> (T, u64)>(
        acc: SummaryAcc,
        len: usize,
        run: impl Fn(u64) -> G,
    ) -> SummaryAcc {
        SummaryAcc {
            moments: acc.moments,
            extrema: Extrema::revisit(acc.extrema, len, run),
        }
    }
}

/// [`Summary`]'s run fold, the extrema's indices left pending where `defer` (see
/// [`Extrema::fold_run_deferred`]).
#[inline(always)]
fn fold_run_in<T: Float>(
    acc: SummaryAcc,
    len: usize,
    get: impl Fn(usize) -> (T, u64),
    defer: bool,
) -> SummaryAcc {
    if in_f32::<T>() {
        // The bounds first: they say whether the one pass in f32 stays finite, so the pass needs no test
        // of its own and neither branch keeps the other's widened elements alive.
        let bounds = T::run_bounds(len, |i| get(i).0);
        let run = if Deviations::fit(bounds) {
            let mut sums = Deviations::about(get(0).0.to_f32());
            crate::each_index!(I < len, {
                sums.add(I, get(I).0.to_f32());
            });
            sums.finite_moments(len)
        } else {
            Moments::of_run_f64(len, |i| get(i).0)
        };
        let extrema = extrema::settle(acc.extrema, len, extrema::widened(&get), bounds, defer);
        return SummaryAcc {
            moments: Moments::merge(acc.moments, run),
            extrema,
        };
    }
    let extrema = Extrema::fold_run_in(acc.extrema, len, &get, defer);
    SummaryAcc {
        moments: Moments::merge(acc.moments, Moments::of_run(len, |i| get(i).0)),
        extrema,
    }
}
