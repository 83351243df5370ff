//! The built-in operators, `sum`, `max`, `min`, `argmax` and `argmin`, as [`ReduceOp`]s: written the way a
//! user's operator is, and run by the same kernel bodies.
//!
//! `kernels-gpu` runs these definitions' identity, lift, combine and run fold in every built-in kernel. Its
//! `DeviceOp` impls for them add only what a `ReduceOp` cannot say on the host: argmax's value-first warp
//! exchange (`redux.sync` on the indices) and its stores that write the padding too. A user's operator
//! runs with the default exchange (a tree of whole accumulators) instead.
//!
//! ```
//! use reduce_contract::builtin::ArgMax;
//! use reduce_contract::ReduceOp;
//!
//! let xs = [1.0f32, 4.0, -2.0, 4.0];
//! let acc = xs.iter().enumerate().fold(ArgMax::<f32>::identity(), |a, (i, &x)| {
//!     ArgMax::<f32>::combine(a, ArgMax::<f32>::lift(x, i as u64))
//! });
//! // Ties go to the smaller index.
//! assert_eq!((acc.value, acc.index), (4.0, 1));
//! ```
use core::marker::PhantomData;

use crate::layout::Indexed;
use crate::op::ReduceOp;

mod order;
mod sum;

pub use order::{Direction, Greatest, Least, Ordered};
pub use sum::{SumAcc, Summable};

/// Sum of `T`, accumulated in [`Summable::Acc`] (integers wrap modulo 2^64).
pub struct Sum<T>(PhantomData<T>);

impl<T: Summable> ReduceOp for Sum<T> {
    type In = T;
    type Acc = T::Acc;
    type Out = T::Acc;
    const NAME: &'static str = "sum";
    #[inline(always)]
    fn identity() -> T::Acc {
        T::Acc::ZERO
    }
    #[inline(always)]
    fn lift(x: T, _: u64) -> T::Acc {
        x.widen()
    }
    #[inline(always)]
    fn combine(a: T::Acc, b: T::Acc) -> T::Acc {
        a.add(b)
    }
    fn finalize(acc: T::Acc) -> T::Acc {
        acc
    }
}

/// Max or min of `T` (by `D`); a NaN anywhere makes the result NaN.
pub struct Extreme<T, D>(PhantomData<(T, D)>);
/// Greatest element.
pub type Max<T> = Extreme<T, Greatest>;
/// Least element.
pub type Min<T> = Extreme<T, Least>;

impl<T: Ordered, D: Direction> ReduceOp for Extreme<T, D> {
    type In = T;
    type Acc = T;
    type Out = T;
    const NAME: &'static str = if D::GREATEST { "max" } else { "min" };
    #[inline(always)]
    fn identity() -> T {
        D::worst()
    }
    #[inline(always)]
    fn lift(x: T, _: u64) -> T {
        x
    }
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        T::pick::<D>(a, b)
    }
    fn finalize(acc: T) -> T {
        acc
    }
}

/// The argmax/argmin rule, written once and used at thread, warp, block and grid level: a NaN beats any
/// number, a better value beats a worse one, and equal values (including -0.0 against +0.0, and NaN against
/// NaN) go to the smaller index.
#[inline(always)]
pub fn choose<T: Ordered, D: Direction>(a: Indexed<T>, b: Indexed<T>) -> Indexed<T> {
    let (a_nan, b_nan) = (a.value.is_nan(), b.value.is_nan());
    let b_wins = if a_nan != b_nan {
        b_nan
    } else if !a_nan && D::better(b.value, a.value) {
        true
    } else if !a_nan && D::better(a.value, b.value) {
        false
    } else {
        b.index < a.index
    };
    if b_wins { b } else { a }
}

/// Index and value of the best element by `D`, ties to the smallest index. Its accumulator, [`Indexed`], has
/// padding after values of under 8 bytes, so it is not [`Pod`](crate::op::Pod): `kernels-gpu` moves it
/// field by field, and only the built-in kernels run it.
pub struct ArgExtreme<T, D>(PhantomData<(T, D)>);
/// Index of the greatest element (first one on ties; first NaN if any).
pub type ArgMax<T> = ArgExtreme<T, Greatest>;
/// Index of the least element (first one on ties; first NaN if any).
pub type ArgMin<T> = ArgExtreme<T, Least>;

impl<T: Ordered, D: Direction> ReduceOp for ArgExtreme<T, D> {
    type In = T;
    type Acc = Indexed<T>;
    type Out = Indexed<T>;
    const NAME: &'static str = if D::GREATEST { "argmax" } else { "argmin" };
    /// The worst value at index `u64::MAX`, so any real element beats or ties it and wins on index.
    #[inline(always)]
    fn identity() -> Indexed<T> {
        Indexed {
            value: D::worst(),
            index: u64::MAX,
        }
    }
    #[inline(always)]
    fn lift(x: T, index: u64) -> Indexed<T> {
        Indexed { value: x, index }
    }
    #[inline(always)]
    fn combine(a: Indexed<T>, b: Indexed<T>) -> Indexed<T> {
        choose::<T, D>(a, b)
    }
    fn finalize(acc: Indexed<T>) -> Indexed<T> {
        acc
    }

    /// Values first, indices only when needed: the run's best value by a NaN-propagating tree (one
    /// instruction per element for floats), and only if it beats `acc` (strictly: ties keep the earlier
    /// index, which `acc` holds) a scan for the first element equal to it. On most data the running best
    /// stops changing early, so the scan is rare on large inputs; on small ones every thread's first run
    /// scans, so that first scan is branch-free.
    #[inline(always)]
    fn fold_run(acc: Indexed<T>, len: usize, get: impl Fn(usize) -> (T, u64)) -> Indexed<T> {
        let Some(best) = run_beats::<T, D>(acc, len, &get) else {
            return acc;
        };
        if acc.index == u64::MAX {
            // A thread's first run always scans, so every lane of a warp does: without branches. (An
            // early exit per element let the lanes leave at different elements; ncu at 2^16, where each
            // thread has one run: 22 of 32 lanes active.)
            return first_same(acc, len, &get, best);
        }
        // Later runs scan rarely, and then in a few lanes: an early exit per element does the least work
        // (the backward pass here cost 1–3 % at 2^26–2^28).
        crate::each_index!(I < len, {
            let (x, index) = get(I);
            if x.same(best) {
                return Indexed { value: x, index };
            }
        });
        acc
    }

    /// For 16-bit elements, whose runs of 32 made the scans bound the loop (bf16 at 2^28: 177.9 → 137.5
    /// µs). f32 and wider are bound by memory, and deferring measured slower (2^24 f32: 22.4 → 25.3 µs).
    const DEFERS: bool = size_of::<T>() == 2;
    /// The run's best value as `fold_run` finds it, but a run that beats `acc` is recorded by its first
    /// element's index, marked pending, and [`revisit`](ReduceOp::revisit) scans it once: new bests are
    /// rare in a thread, but a warp's lanes scan together, so on data whose best keeps growing (U(0, 1),
    /// ascending) most runs of a warp scanned.
    #[inline(always)]
    fn fold_run_deferred(
        acc: Indexed<T>,
        len: usize,
        get: impl Fn(usize) -> (T, u64),
    ) -> Indexed<T> {
        if !Self::DEFERS {
            return Self::fold_run(acc, len, get);
        }
        match run_beats::<T, D>(acc, len, &get) {
            Some(best) => Indexed {
                value: best,
                index: get(0).1 | crate::op::PENDING,
            },
            None => acc,
        }
    }

    #[inline(always)]
    fn revisit<G: Fn(usize) -> (T, u64)>(
        acc: Indexed<T>,
        len: usize,
        run: impl Fn(u64) -> G,
    ) -> Indexed<T> {
        if acc.index == u64::MAX || acc.index & crate::op::PENDING == 0 {
            return acc;
        }
        // Without branches, so the run's loads all issue before the first compare (an early exit per
        // element made them four round trips to memory, one per vector).
        first_same(acc, len, &run(acc.index & !crate::op::PENDING), acc.value)
    }
}

/// The best value of a run (a NaN-propagating tree over its values), if it beats `acc` (strictly: ties
/// keep the earlier index, which `acc` holds) or `acc` holds no element yet.
#[inline(always)]
fn run_beats<T: Ordered, D: Direction>(
    acc: Indexed<T>,
    len: usize,
    get: &impl Fn(usize) -> (T, u64),
) -> Option<T> {
    let mut tree = [D::worst::<T>(); 64];
    crate::each_index!(I < len, {
        tree[I] = get(I).0;
    });
    crate::pairwise_tree!(tree, len, T::pick::<D>);
    let best = tree[0];
    let wins = acc.index == u64::MAX
        || (!acc.value.is_nan() && (best.is_nan() || D::better(best, acc.value)));
    wins.then_some(best)
}

/// The first element of a run the same as `value`, by a backward pass of selects without branches, or
/// `none` if there is none.
#[inline(always)]
fn first_same<T: Ordered>(
    none: Indexed<T>,
    len: usize,
    get: &impl Fn(usize) -> (T, u64),
    value: T,
) -> Indexed<T> {
    let mut first = none;
    crate::each_index!(I < len, {
        let (x, index) = get(len - 1 - I);
        if x.same(value) {
            first = Indexed { value: x, index };
        }
    });
    first
}

/// The built-in operators by the words the lists spell them with ([`reduce_pairs!`](crate::reduce_pairs):
/// `sum f32, argmax bf16, …`), from which `kernels-gpu` instantiates every built-in kernel.
#[allow(non_camel_case_types)]
pub mod by_word {
    /// [`Sum`](super::Sum).
    pub type sum<T> = super::Sum<T>;
    /// [`Max`](super::Max).
    pub type max<T> = super::Max<T>;
    /// [`Min`](super::Min).
    pub type min<T> = super::Min<T>;
    /// [`ArgMax`](super::ArgMax).
    pub type argmax<T> = super::ArgMax<T>;
    /// [`ArgMin`](super::ArgMin).
    pub type argmin<T> = super::ArgMin<T>;
}

#[cfg(test)]
mod tests;
