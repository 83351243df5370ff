//! The least and greatest element with their indices (`aminmax`), in one read.
use core::marker::PhantomData;

use super::in_f32;
use crate::op::{Float, Pod, ReduceOp};

/// The least and greatest element seen, as f64 (exact for every float element), and the index of the
/// first occurrence of each. NaN wins both (the first NaN's index), as the library's `argmax`/`argmin`;
/// −0.0 and +0.0 are equal, so the smaller index wins.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Extrema {
    /// The least element.
    pub min: f64,
    /// The greatest element.
    pub max: f64,
    /// The index of `min`; [`Extrema::NONE`] for no element.
    pub argmin: u64,
    /// The index of `max`; [`Extrema::NONE`] for no element.
    pub argmax: u64,
}

// SAFETY: two f64 and two u64, no pointers, no padding.
unsafe impl Pod for Extrema {}

#[cfg(feature = "cust")]
// SAFETY: plain numbers.
unsafe impl cust_core::DeviceCopy for Extrema {}

impl Default for Extrema {
    /// No element: `{ +∞, −∞, NONE, NONE }`.
    fn default() -> Self {
        Extrema {
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            argmin: Extrema::NONE,
            argmax: Extrema::NONE,
        }
    }
}

/// Whether `b`, found after `a`, replaces it as the extreme: `b` is a NaN and `a` is not, or `b` is
/// strictly beyond `a` by `beyond` (ties keep `a`, the smaller index).
#[inline(always)]
fn replaces<F: PartialOrd + Copy>(a: F, b: F, beyond: impl Fn(F, F) -> bool) -> bool {
    #[allow(clippy::eq_op)]
    let (a_nan, b_nan) = (a != a, b != b);
    !a_nan && (b_nan || beyond(b, a))
}

impl Extrema {
    /// The index of an empty accumulator.
    pub const NONE: u64 = u64::MAX;

    /// Whether it holds an element.
    pub fn is_empty(&self) -> bool {
        self.argmin == Extrema::NONE
    }

    /// The extrema of two disjoint sets, `a` holding the smaller indices; an empty side gives the other.
    #[inline(always)]
    pub fn merge(a: Extrema, b: Extrema) -> Extrema {
        if a.argmin == Extrema::NONE {
            return b;
        }
        if b.argmin == Extrema::NONE {
            return a;
        }
        let lo = replaces(a.min, b.min, |x, y| x < y);
        let hi = replaces(a.max, b.max, |x, y| x > y);
        Extrema {
            min: if lo { b.min } else { a.min },
            argmin: if lo { b.argmin } else { a.argmin },
            max: if hi { b.max } else { a.max },
            argmax: if hi { b.argmax } else { a.argmax },
        }
    }

    /// The extrema of a run of `len ≥ 1` elements (`get(i)` = element `i` and its index, indices
    /// increasing), compared in f32 for elements of up to 4 bytes and widened once.
    #[inline(always)]
    pub fn of_run<T: Float>(len: usize, get: impl Fn(usize) -> (T, u64)) -> Extrema {
        if in_f32::<T>() {
            run(len, |i| {
                let (x, index) = get(i);
                (x.to_f32(), index)
            })
        } else {
            run(len, |i| {
                let (x, index) = get(i);
                (x.to_f64(), index)
            })
        }
    }
}

/// [`Extrema::of_run`] in the float `F`.
#[inline(always)]
fn run<F: PartialOrd + Copy + Into<f64>>(len: usize, get: impl Fn(usize) -> (F, u64)) -> Extrema {
    let (first, index) = get(0);
    let (mut lo, mut ilo, mut hi, mut ihi) = (first, index, first, index);
    // Element 0 against itself replaces nothing (equal, or a NaN against a NaN).
    crate::each_index!(I < len, {
        let (x, index) = get(I);
        if replaces(lo, x, |x, y| x < y) {
            lo = x;
            ilo = index;
        }
        if replaces(hi, x, |x, y| x > y) {
            hi = x;
            ihi = index;
        }
    });
    Extrema {
        min: lo.into(),
        max: hi.into(),
        argmin: ilo,
        argmax: ihi,
    }
}

/// The least and greatest element and their first indices in one read (torch's `aminmax`, with indices).
pub struct MinMax<T>(PhantomData<T>);

impl<T: Float> ReduceOp for MinMax<T> {
    type In = T;
    type Acc = Extrema;
    type Out = Extrema;
    const NAME: &'static str = "aminmax";

    fn identity() -> Extrema {
        Extrema::default()
    }
    fn lift(x: T, index: u64) -> Extrema {
        let x = x.to_f64();
        Extrema {
            min: x,
            max: x,
            argmin: index,
            argmax: index,
        }
    }
    fn combine(a: Extrema, b: Extrema) -> Extrema {
        Extrema::merge(a, b)
    }
    fn finalize(acc: Extrema) -> Extrema {
        acc
    }
    #[inline(always)]
    fn fold_run(acc: Extrema, len: usize, get: impl Fn(usize) -> (T, u64)) -> Extrema {
        Extrema::merge(acc, Extrema::of_run(len, get))
    }
}
