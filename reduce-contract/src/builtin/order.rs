//! What max, min, argmax and argmin need of their elements: [`Ordered`], and the [`Direction`] they seek.
use crate::op::{Element, Pod};

/// Elements with an order for max/min/argmax/argmin. Floats (16-bit ones through f32) order by IEEE
/// comparison, with NaN handled by the operators (it wins), so -0.0 and +0.0 compare equal.
pub trait Ordered: Element + Pod {
    /// The least value (−∞ for floats, `MIN` for integers): identity of max.
    const LOWEST: Self;
    /// The greatest value (+∞ for floats, `MAX` for integers): identity of min.
    const HIGHEST: Self;
    /// Whether this is a NaN (always false for integers).
    fn is_nan(self) -> bool;
    /// `self < other` by IEEE or integer order.
    fn lt(self, other: Self) -> bool;

    /// The better of `a` and `b` by `D`, a NaN winning; either one when they are equal. f32 and f64
    /// override this with IEEE 754-2019 `maximum`/`minimum`.
    #[inline(always)]
    fn pick<D: Direction>(a: Self, b: Self) -> Self {
        if b.is_nan() || (!a.is_nan() && D::better(b, a)) {
            b
        } else {
            a
        }
    }

    /// Equal by IEEE or integer order, or both NaN.
    #[inline(always)]
    fn same(self, other: Self) -> bool {
        let (a_nan, b_nan) = (self.is_nan(), other.is_nan());
        if a_nan || b_nan {
            a_nan && b_nan
        } else {
            !self.lt(other) && !other.lt(self)
        }
    }
}

/// IEEE 754-2019 `maximum` (`GREATEST`) or `minimum`: a NaN if either is, and −0.0 below +0.0. On the GPU one
/// `max.NaN`/`min.NaN` instruction (sm_80+); on the host the same function written out.
macro_rules! ieee_pick {
    ($t:ty, $a:ident, $b:ident, $greatest:expr) => {{
        #[cfg(target_arch = "nvptx64")]
        {
            if $greatest {
                $a.maximum($b)
            } else {
                $a.minimum($b)
            }
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            if $a.is_nan() || $b.is_nan() {
                <$t>::NAN
            } else if $a == $b {
                // ±0: the sign decides (−0.0 < +0.0); equal numbers otherwise are the same bits.
                if $greatest == $a.is_sign_positive() {
                    $a
                } else {
                    $b
                }
            } else if ($a > $b) == $greatest {
                $a
            } else {
                $b
            }
        }
    }};
}

macro_rules! ordered_float {
    ($($t:ty),*) => {$(
        impl Ordered for $t {
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline(always)]
            fn is_nan(self) -> bool { self != self }
            #[inline(always)]
            fn lt(self, other: Self) -> bool { self < other }
            #[inline(always)]
            fn pick<D: Direction>(a: Self, b: Self) -> Self {
                ieee_pick!($t, a, b, D::GREATEST)
            }
            /// The default's meaning without its branches (argmax's scan for a run's best calls it on every
            /// element): three compares, joined by `|` and `&`, which do not short-circuit.
            #[inline(always)]
            fn same(self, other: Self) -> bool {
                (self == other) | (self.is_nan() & other.is_nan())
            }
        }
    )*};
}
ordered_float!(f32, f64);

macro_rules! ordered_int {
    ($($t:ty),*) => {$(
        impl Ordered for $t {
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline(always)]
            fn is_nan(self) -> bool { false }
            #[inline(always)]
            fn lt(self, other: Self) -> bool { self < other }
        }
    )*};
}
ordered_int!(i32, u32, i64, u64, u8);

/// Which end of the order an extremum operator seeks.
pub trait Direction: 'static {
    /// True for [`Greatest`].
    const GREATEST: bool;
    /// True when `a` is strictly better than `b` (greater for max, less for min).
    fn better<T: Ordered>(a: T, b: T) -> bool;
    /// The worst value, the identity.
    fn worst<T: Ordered>() -> T;
}

/// Seek the greatest value.
pub struct Greatest;
/// Seek the least value.
pub struct Least;

impl Direction for Greatest {
    const GREATEST: bool = true;
    #[inline(always)]
    fn better<T: Ordered>(a: T, b: T) -> bool {
        b.lt(a)
    }
    #[inline(always)]
    fn worst<T: Ordered>() -> T {
        T::LOWEST
    }
}

impl Direction for Least {
    const GREATEST: bool = false;
    #[inline(always)]
    fn better<T: Ordered>(a: T, b: T) -> bool {
        a.lt(b)
    }
    #[inline(always)]
    fn worst<T: Ordered>() -> T {
        T::HIGHEST
    }
}
