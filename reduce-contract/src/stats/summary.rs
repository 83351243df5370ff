//! Every statistic in one read: the moments and the extrema together.
use core::marker::PhantomData;

use super::{Extrema, Moments};
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
    #[inline(always)]
    fn fold_run(acc: SummaryAcc, len: usize, get: impl Fn(usize) -> (T, u64)) -> SummaryAcc {
        SummaryAcc {
            moments: Moments::merge(acc.moments, Moments::of_run(len, |i| get(i).0)),
            extrema: Extrema::fold_run(acc.extrema, len, get),
        }
    }
}
