//! The least and greatest element with their indices (`aminmax`), in one read.
use core::marker::PhantomData;

use super::in_f32;
use crate::builtin::{Greatest, Least, Ordered};
use crate::op::{Float, PENDING, Pod, ReduceOp};

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

/// Whether `b` (at index `ib`) replaces `a` (at `ia`) as the extreme: a NaN beats a number, a value beyond
/// the other by `beyond` beats it, and equal values (NaN against NaN, −0.0 against +0.0) go to the smaller
/// index. Symmetric in its two sides, so merges need not know which holds the earlier indices.
#[inline(always)]
fn replaces(a: f64, ia: u64, b: f64, ib: u64, beyond: impl Fn(f64, f64) -> bool) -> bool {
    let (a_nan, b_nan) = (a.is_nan(), b.is_nan());
    if a_nan != b_nan {
        b_nan
    } else if !a_nan && beyond(b, a) {
        true
    } else if !a_nan && beyond(a, b) {
        false
    } else {
        ib < ia
    }
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
        let lo = replaces(a.min, a.argmin, b.min, b.argmin, |x, y| x < y);
        let hi = replaces(a.max, a.argmax, b.max, b.argmax, |x, y| x > y);
        Extrema {
            min: if lo { b.min } else { a.min },
            argmin: if lo { b.argmin } else { a.argmin },
            max: if hi { b.max } else { a.max },
            argmax: if hi { b.argmax } else { a.argmax },
        }
    }

    /// Folds a run of `len` elements (`get(i)` = element `i` and its index, indices increasing and all
    /// above those `acc` holds) into `acc`: values first (compared in f32 for elements of up to 4 bytes),
    /// then, only where the run's least or greatest value (or a NaN) beats `acc`'s, the index of its first
    /// occurrence. After the first few runs of a thread that is rare, so an element costs a `min`, a `max`
    /// and a NaN test instead of two comparisons and the selects of a value and a 64-bit index.
    #[inline(always)]
    pub fn fold_run<T: Float>(
        acc: Extrema,
        len: usize,
        get: impl Fn(usize) -> (T, u64),
    ) -> Extrema {
        Extrema::fold_run_in(acc, len, get, false)
    }

    /// [`fold_run`](Self::fold_run) that, in a run after the first, records a new least or greatest value
    /// with the index of the run's first element marked pending (its top bit set) instead of looking for
    /// its first occurrence: [`revisit`](Self::revisit) looks, once. A thread's new extremes are rare, but
    /// a warp's lanes wait for each other, so the look (a 32-element scan of 16-bit input) was taken in
    /// most runs of `aminmax` on U(0, 1) input. A run's first NaN is left for `revisit` the same way.
    #[inline(always)]
    pub fn fold_run_deferred<T: Float>(
        acc: Extrema,
        len: usize,
        get: impl Fn(usize) -> (T, u64),
    ) -> Extrema {
        Extrema::fold_run_in(acc, len, get, true)
    }

    /// [`fold_run`](Self::fold_run), or [`fold_run_deferred`](Self::fold_run_deferred) where `defer`.
    #[inline(always)]
    pub(crate) fn fold_run_in<T: Float>(
        acc: Extrema,
        len: usize,
        get: impl Fn(usize) -> (T, u64),
        defer: bool,
    ) -> Extrema {
        if in_f32::<T>() {
            let (lo, hi) = T::run_bounds(len, |i| get(i).0);
            settle(acc, len, widened(&get), (lo, hi), defer)
        } else {
            let bounds = Bounds::of_run(len, |i| get(i).0.to_f64());
            settle(acc, len, widened_f64(&get), bounds, defer)
        }
    }

    /// Finds the indices [`fold_run_deferred`](Self::fold_run_deferred) left pending: the first element of
    /// the recorded run equal to the least (greatest) value. `run(first)` reads that run of `len` elements
    /// again.
    #[inline(always)]
    pub fn revisit<T: Float, G: Fn(usize) -> (T, u64)>(
        acc: Extrema,
        len: usize,
        run: impl Fn(u64) -> G,
    ) -> Extrema {
        let mut out = acc;
        let pending = |index: u64| index != Extrema::NONE && index & PENDING != 0;
        if pending(acc.argmin) {
            (out.min, out.argmin) = find(len, &run(acc.argmin & !PENDING), acc.min);
        }
        if pending(acc.argmax) {
            (out.max, out.argmax) = find(len, &run(acc.argmax & !PENDING), acc.max);
        }
        out
    }
}

/// `get` with its elements widened to f32 (exact for elements of up to 4 bytes).
#[inline(always)]
pub(crate) fn widened<T: Float>(
    get: &impl Fn(usize) -> (T, u64),
) -> impl Fn(usize) -> (f32, u64) + '_ {
    |i| {
        let (x, index) = get(i);
        (x.to_f32(), index)
    }
}

/// The first element of a run (`get`) equal to `v`, compared in the run's float: f32 for elements of up to
/// 4 bytes (which `v` came from, so it is exact there), f64 for f64.
#[inline(always)]
fn find<T: Float>(len: usize, get: &impl Fn(usize) -> (T, u64), v: f64) -> (f64, u64) {
    if v.is_nan() {
        return (v, first_nan(len, &widened_f64(get)));
    }
    if in_f32::<T>() {
        first_equal(len, &widened(get), v as f32)
    } else {
        first_equal(len, &widened_f64(get), v)
    }
}

/// `get` with its elements widened to f64 (exact).
#[inline(always)]
fn widened_f64<T: Float>(get: &impl Fn(usize) -> (T, u64)) -> impl Fn(usize) -> (f64, u64) + '_ {
    |i| {
        let (x, index) = get(i);
        (x.to_f64(), index)
    }
}

/// The float a run is compared in: f32 or f64. Its run fold takes IEEE 754-2019 `minimum`/`maximum`
/// ([`Ordered::pick`]: NaN if either is NaN, so a run's NaN needs no test of its own; one `min.NaN.f32` on
/// the GPU), the same function `Max`/`Min` use.
#[doc(hidden)]
pub trait RunFloat: Ordered + PartialEq + PartialOrd + Into<f64> {}
impl RunFloat for f32 {}
impl RunFloat for f64 {}

/// The index of the run's first NaN (it holds one).
#[inline(always)]
fn first_nan<F: RunFloat>(len: usize, get: &impl Fn(usize) -> (F, u64)) -> u64 {
    let mut at = Extrema::NONE;
    crate::each_index!(I < len, {
        let (x, index) = get(I);
        if at == Extrema::NONE && x.is_nan() {
            at = index;
        }
    });
    at
}

/// The first element of the run equal to `v` (−0.0 and +0.0 are equal), and its index.
#[inline(always)]
fn first_equal<F: RunFloat>(len: usize, get: &impl Fn(usize) -> (F, u64), v: F) -> (f64, u64) {
    let (mut value, mut at) = (v, Extrema::NONE);
    crate::each_index!(I < len, {
        let (x, index) = get(I);
        if at == Extrema::NONE && x == v {
            (value, at) = (x, index);
        }
    });
    (value.into(), at)
}

/// The least and greatest value of a run, by IEEE 754-2019 `minimum`/`maximum` (a NaN makes both NaN), in
/// four chains each so a run is not one long dependent chain (`minimum`/`maximum` are associative: the same
/// values whatever the grouping). The default [`Float::run_bounds`](crate::op::Float::run_bounds) (what
/// `aminmax` and `stats` ask of a run of elements of up to 4 bytes) folds with it.
#[derive(Clone, Copy)]
#[doc(hidden)]
pub struct Bounds<F> {
    lo: [F; 4],
    hi: [F; 4],
}

impl<F: RunFloat> Default for Bounds<F> {
    #[inline(always)]
    fn default() -> Bounds<F> {
        Bounds::new()
    }
}

impl<F: RunFloat> Bounds<F> {
    /// No element yet.
    #[inline(always)]
    pub fn new() -> Bounds<F> {
        Bounds {
            lo: [F::HIGHEST; 4],
            hi: [F::LOWEST; 4],
        }
    }

    /// Adds element `i` of the run (a constant after inlining), `x`.
    #[inline(always)]
    pub fn add(&mut self, i: usize, x: F) {
        self.lo[i % 4] = F::pick::<Least>(self.lo[i % 4], x);
        self.hi[i % 4] = F::pick::<Greatest>(self.hi[i % 4], x);
    }

    /// The least and greatest of a run's `len` values (`get(i)`).
    #[inline(always)]
    pub fn of_run(len: usize, get: impl Fn(usize) -> F) -> (F, F) {
        let mut bounds = Bounds::new();
        crate::each_index!(I < len, {
            bounds.add(I, get(I));
        });
        bounds.get()
    }

    /// The run's least and greatest value.
    #[inline(always)]
    pub fn get(self) -> (F, F) {
        let (lo, hi) = (self.lo, self.hi);
        (
            F::pick::<Least>(
                F::pick::<Least>(lo[0], lo[1]),
                F::pick::<Least>(lo[2], lo[3]),
            ),
            F::pick::<Greatest>(
                F::pick::<Greatest>(hi[0], hi[1]),
                F::pick::<Greatest>(hi[2], hi[3]),
            ),
        )
    }
}

/// Merges a run whose least and greatest values are `(lo, hi)` (NaN when it holds one) into `acc`: only
/// where one of them (or a NaN) beats `acc`'s does it look again at the elements (`get`), for the index of
/// the first occurrence.
#[inline(always)]
pub(crate) fn settle<F: RunFloat>(
    acc: Extrema,
    len: usize,
    get: impl Fn(usize) -> (F, u64),
    (lo, hi): (F, F),
    defer: bool,
) -> Extrema {
    let nan = lo.is_nan();
    let mut out = acc;
    let empty = acc.argmin == Extrema::NONE;
    if nan {
        // The run's first NaN wins both, unless `acc` already holds one (at a smaller index).
        if empty || !acc.min.is_nan() || !acc.max.is_nan() {
            let at = if defer {
                get(0).1 | PENDING
            } else {
                first_nan(len, &get)
            };
            if empty || !acc.min.is_nan() {
                (out.min, out.argmin) = (f64::NAN, at);
            }
            if empty || !acc.max.is_nan() {
                (out.max, out.argmax) = (f64::NAN, at);
            }
            if empty {
                return out;
            }
        }
        // NaN already won both sides.
        if out.min.is_nan() && out.max.is_nan() {
            return out;
        }
    }
    // Strictly beyond `acc` (ties keep `acc`'s smaller index); `acc`'s NaN is beaten by nothing.
    if empty || (!out.min.is_nan() && lo.into() < out.min) {
        (out.min, out.argmin) = if defer {
            (lo.into(), get(0).1 | PENDING)
        } else {
            first_equal(len, &get, lo)
        };
    }
    if empty || (!out.max.is_nan() && hi.into() > out.max) {
        (out.max, out.argmax) = if defer {
            (hi.into(), get(0).1 | PENDING)
        } else {
            first_equal(len, &get, hi)
        };
    }
    out
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
        Extrema::fold_run(acc, len, get)
    }
    /// For 16-bit elements (`aminmax` bf16 at 2^28: 165.3 → 143.1 µs); f32 measured slower deferred
    /// (253.7 → 262.0 µs), as it is bound by memory.
    const DEFERS: bool = size_of::<T>() == 2;
    #[inline(always)]
    fn fold_run_deferred(acc: Extrema, len: usize, get: impl Fn(usize) -> (T, u64)) -> Extrema {
        if !Self::DEFERS {
            return Extrema::fold_run(acc, len, get);
        }
        Extrema::fold_run_deferred(acc, len, get)
    }
    #[inline(always)]
    fn revisit<G: Fn(usize) -> (T, u64)>(
        acc: Extrema,
        len: usize,
        run: impl Fn(u64) -> G,
    ) -> Extrema {
        Extrema::revisit(acc, len, run)
    }
}
