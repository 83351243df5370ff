//! Reduction operators as types.
//!
//! An operator names its input element, its accumulator, the identity and the combine step. The law every
//! operator obeys: `combine(identity(), x) == combine(x, identity()) == x` for every accumulator `x` that
//! [`ReduceOp::lift`] can produce, and `combine` is associative up to floating-point rounding. The kernels
//! write the accumulator itself as the result, so the host reads back an `Acc`.
use core::marker::PhantomData;

use crate::warp::Shuffle;

/// A reduction operator.
pub trait ReduceOp {
    /// Element type read from memory.
    type In: Copy;
    /// Running value; also the type of the result.
    type Acc: Shuffle;
    /// The neutral element.
    fn identity() -> Self::Acc;
    /// Turns the element at `index` into an accumulator.
    fn lift(x: Self::In, index: u64) -> Self::Acc;
    /// Merges two accumulators.
    fn combine(a: Self::Acc, b: Self::Acc) -> Self::Acc;
}

/// Elements that can be summed, with the type their sum is accumulated and returned in.
pub trait SumElement: Copy {
    /// Accumulator: f32 for f32 (as CUB), f64 for f64.
    type Acc: Shuffle + core::ops::Add<Output = Self::Acc>;
    /// Zero of the accumulator.
    const ZERO: Self::Acc;
    /// Widens one element.
    fn widen(self) -> Self::Acc;
}

impl SumElement for f32 {
    type Acc = f32;
    const ZERO: f32 = 0.0;
    #[inline(always)]
    fn widen(self) -> f32 {
        self
    }
}

impl SumElement for f64 {
    type Acc = f64;
    const ZERO: f64 = 0.0;
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
}

/// Integer sums: counts and scan offsets, exact while they fit in the type.
macro_rules! sum_int {
    ($($t:ty),*) => {$(
        impl SumElement for $t {
            type Acc = $t;
            const ZERO: $t = 0;
            #[inline(always)]
            fn widen(self) -> $t {
                self
            }
        }
    )*};
}
sum_int!(u32, u64);

/// Elements with an order for max/min/argmax/argmin. Floats order by IEEE comparison, with NaN handled by
/// the operators (it wins), so -0.0 and +0.0 compare equal.
pub trait OrdElement: Shuffle {
    /// The least value (−∞ for floats): identity of max.
    const LOWEST: Self;
    /// The greatest value (+∞ for floats): identity of min.
    const HIGHEST: Self;
    /// Whether this is a NaN (always false for integers).
    fn is_nan(self) -> bool;
    /// `self < other` by IEEE or integer order.
    fn lt(self, other: Self) -> bool;
}

macro_rules! ord_float {
    ($($t:ty),*) => {$(
        impl OrdElement for $t {
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline(always)]
            fn is_nan(self) -> bool { self != self }
            #[inline(always)]
            fn lt(self, other: Self) -> bool { self < other }
        }
    )*};
}
ord_float!(f32, f64);

macro_rules! ord_int {
    ($($t:ty),*) => {$(
        impl OrdElement for $t {
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline(always)]
            fn is_nan(self) -> bool { false }
            #[inline(always)]
            fn lt(self, other: Self) -> bool { self < other }
        }
    )*};
}
ord_int!(u32);

/// Which end of the order an extremum operator seeks.
pub trait Direction {
    /// True when `a` is strictly better than `b` (greater for max, less for min).
    fn better<T: OrdElement>(a: T, b: T) -> bool;
    /// The worst value, the identity.
    fn worst<T: OrdElement>() -> T;
}

/// Seek the greatest value.
pub struct Greatest;
/// Seek the least value.
pub struct Least;

impl Direction for Greatest {
    #[inline(always)]
    fn better<T: OrdElement>(a: T, b: T) -> bool {
        b.lt(a)
    }
    #[inline(always)]
    fn worst<T: OrdElement>() -> T {
        T::LOWEST
    }
}

impl Direction for Least {
    #[inline(always)]
    fn better<T: OrdElement>(a: T, b: T) -> bool {
        a.lt(b)
    }
    #[inline(always)]
    fn worst<T: OrdElement>() -> T {
        T::HIGHEST
    }
}

/// Sum of `T`, accumulated in [`SumElement::Acc`].
pub struct Sum<T>(PhantomData<T>);

impl<T: SumElement> ReduceOp for Sum<T> {
    type In = T;
    type Acc = T::Acc;
    #[inline(always)]
    fn identity() -> T::Acc {
        T::ZERO
    }
    #[inline(always)]
    fn lift(x: T, _: u64) -> T::Acc {
        x.widen()
    }
    #[inline(always)]
    fn combine(a: T::Acc, b: T::Acc) -> T::Acc {
        a + b
    }
}

/// Max or min of `T` (by `D`); a NaN anywhere makes the result NaN.
pub struct Extreme<T, D>(PhantomData<(T, D)>);
/// Greatest element.
pub type Max<T> = Extreme<T, Greatest>;
/// Least element.
pub type Min<T> = Extreme<T, Least>;

impl<T: OrdElement, D: Direction> ReduceOp for Extreme<T, D> {
    type In = T;
    type Acc = T;
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
        if b.is_nan() || (!a.is_nan() && D::better(b, a)) { b } else { a }
    }
}

/// A value with the index it was found at: the accumulator and result of [`ArgMax`] and [`ArgMin`].
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Indexed<T> {
    /// Element value.
    pub value: T,
    /// Position in the input slice.
    pub index: u64,
}

// SAFETY: both fields are `Shuffle` and are moved field by field.
unsafe impl<T: Shuffle> Shuffle for Indexed<T> {
    #[inline(always)]
    fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
        Indexed { value: self.value.map_words(&mut f), index: self.index.map_words(f) }
    }
}

/// The argmax/argmin rule, written once and used at thread, warp, block and grid level: a NaN beats any
/// number, a better value beats a worse one, and equal values (including -0.0 against +0.0, and NaN against
/// NaN) go to the smaller index.
#[inline(always)]
pub fn choose<T: OrdElement, D: Direction>(a: Indexed<T>, b: Indexed<T>) -> Indexed<T> {
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

/// Index and value of the best element by `D`, ties to the smallest index.
pub struct ArgExtreme<T, D>(PhantomData<(T, D)>);
/// Index of the greatest element (first one on ties; first NaN if any).
pub type ArgMax<T> = ArgExtreme<T, Greatest>;
/// Index of the least element (first one on ties; first NaN if any).
pub type ArgMin<T> = ArgExtreme<T, Least>;

impl<T: OrdElement, D: Direction> ReduceOp for ArgExtreme<T, D> {
    type In = T;
    type Acc = Indexed<T>;
    /// The worst value at index `u64::MAX`, so any real element beats or ties it and wins on index.
    #[inline(always)]
    fn identity() -> Indexed<T> {
        Indexed { value: D::worst(), index: u64::MAX }
    }
    #[inline(always)]
    fn lift(x: T, index: u64) -> Indexed<T> {
        Indexed { value: x, index }
    }
    #[inline(always)]
    fn combine(a: Indexed<T>, b: Indexed<T>) -> Indexed<T> {
        choose::<T, D>(a, b)
    }
}
