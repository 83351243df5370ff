//! Reduction operators as types, as the kernel bodies run them.
//!
//! [`DeviceOp`] is what every generic kernel body is written against. A user's operator is a
//! [`ReduceOp`](reduce_contract::op::ReduceOp) (pure Rust, shared with the host) and runs as
//! [`Custom<R>`](crate::custom::Custom), which forwards to it; the built-in operators here implement
//! `DeviceOp` directly, because their fast paths (argmax's value-first warp exchange and run scan, its
//! padded stores) use device instructions a host-side trait cannot name. Both kinds go through the same
//! kernel bodies and the same exported-kernel shape.
//!
//! An operator names its input element, its accumulator, the identity and the combine step. The law every
//! operator obeys: `combine(identity(), x) == combine(x, identity()) == x` for every accumulator `x` that
//! [`DeviceOp::lift`] can produce, and `combine` is associative up to floating-point rounding. The kernels
//! write the accumulator itself as the result, so the host reads back an `Acc`.
use core::marker::PhantomData;

use crate::arch;
use crate::shuffle::{Shuffle, shfl_idx, shfl_xor};
use crate::warp;

/// A reduction operator on the device: a [`ReduceOp`](reduce_contract::op::ReduceOp)'s identity, lift and
/// combine, plus the hooks the kernels call where an operator has a faster form (`fold_run`, `write`,
/// `warp_reduce`).
pub trait DeviceOp {
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

    /// Whether the per-segment block kernel folds with the loads' kind chosen once per segment (two copies
    /// of the fold, 16-byte and scalar loads) and four 16-byte chunks in flight per thread, instead of one
    /// compact copy choosing per chunk with two in flight. The runs and their order are the same either
    /// way, so no bits change; only the speed does. The compact copy issues both kinds of loads, one kind
    /// predicated off, and an operator heavy enough to be bound by issue slots and occupancy rather than
    /// by bytes pays for it: a Welford accumulator in f64 per row of bf16 took 160.3 µs compact and 146.1
    /// with this (H200, 4096 × 65536). The built-ins are bound by bytes, and their softmax statistics ran
    /// 1–3 % slower with it, so they keep the compact fold. Users' operators
    /// ([`crate::custom::Custom`]) have it.
    const DEEP_FOLD: bool = false;

    /// Folds a run of `len` elements into `acc`; `get(i)` gives element `i` and its index. Every index in
    /// the run is larger than every index already in `acc`, and `get` yields them in increasing order.
    ///
    /// The default lifts every element and combines them in a pairwise tree (`len` must be a power of two,
    /// at most 64), so a sum of one run is not one long dependent chain. Operators override it when knowing
    /// the order makes the run cheaper (see [`ArgExtreme`]).
    #[inline(always)]
    fn fold_run(acc: Self::Acc, len: usize, get: impl Fn(usize) -> (Self::In, u64)) -> Self::Acc {
        let mut tree = [Self::identity(); 64];
        each_index!(I < len, {
            let (x, index) = get(I);
            tree[I] = Self::lift(x, index);
        });
        pairwise_tree!(tree, len, Self::combine);
        Self::combine(acc, tree[0])
    }

    /// Stores a result at `p`. The default is a plain store; [`ArgExtreme`] writes its padding too.
    ///
    /// # Safety
    /// `p` must be valid and aligned for a write of `Self::Acc`.
    #[inline(always)]
    unsafe fn write(p: *mut Self::Acc, v: Self::Acc) {
        // SAFETY: forwarded to the caller.
        unsafe { p.write(v) }
    }

    /// Reduces one accumulator per lane over segments of `width` lanes, as [`crate::warp::reduce`] (which
    /// calls it). The default is the fixed shuffle tree of whole accumulators
    /// ([`crate::warp::tree_reduce`]); operators override it when a cheaper exchange gives the same result
    /// (see [`ArgExtreme`]).
    ///
    /// # Safety
    /// As [`crate::warp::reduce`].
    #[inline(always)]
    unsafe fn warp_reduce(v: Self::Acc, width: u32, mask: u32) -> Self::Acc
    where
        Self: Sized,
    {
        // SAFETY: forwarded to the caller.
        unsafe { crate::warp::tree_reduce::<Self>(v, width, mask) }
    }
}

/// The built-in operators by the words the contract's lists spell them with (`reduce_pairs!`:
/// `sum f32, argmax bf16, …`), so `entry.rs` instantiates every kernel from those lists without a table of
/// its own. A new operator is its type in this file and its word here.
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
    /// [`Softmax`](crate::softmax::Softmax), the fused softmax statistics.
    pub type softmax<T> = crate::softmax::Softmax<T>;
}

/// A sum's running value. Floats add with IEEE rounding; integers add modulo 2^64 (two's complement
/// wrapping), which is associative, so an integer sum is exact modulo 2^64 and the same for every combine
/// order, atomics included.
pub trait Accumulator: Shuffle {
    /// The neutral element.
    const ZERO: Self;
    /// `self + other`, wrapping for integers.
    fn add(self, other: Self) -> Self;
}

macro_rules! accumulator {
    ($($t:ty: $zero:expr, |$a:ident, $b:ident| $add:expr;)*) => {$(
        impl Accumulator for $t {
            const ZERO: Self = $zero;
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                let ($a, $b) = (self, other);
                $add
            }
        }
    )*};
}
accumulator! {
    f32: 0.0, |a, b| a + b;
    f64: 0.0, |a, b| a + b;
    u32: 0, |a, b| a.wrapping_add(b);
    i64: 0, |a, b| a.wrapping_add(b);
    u64: 0, |a, b| a.wrapping_add(b);
}

/// Elements that can be summed, with the type their sum is accumulated and returned in.
pub trait SumElement: Copy {
    /// Accumulator: f32 for f32 (as CUB) and for f16/bf16, f64 for f64, i64/u64 for signed/unsigned integers.
    type Acc: Accumulator;
    /// Widens one element (exactly).
    fn widen(self) -> Self::Acc;
}

/// One impl per line of the contract's table of sum accumulators, widening by `From` (exact: the
/// integers' sign or zero extension, and the 16-bit floats' conversions in [`crate::half`]).
macro_rules! sum_elements {
    ($($t:ident $acc:ident),*) => {$(
        impl SumElement for crate::custom::elem::$t {
            type Acc = $acc;
            #[inline(always)]
            fn widen(self) -> $acc {
                <$acc>::from(self)
            }
        }
    )*};
}
reduce_contract::sum_accumulators!(sum_elements);

/// Elements with an order for max/min/argmax/argmin. Floats (16-bit ones through f32) order by IEEE
/// comparison, with NaN handled by the operators (it wins), so -0.0 and +0.0 compare equal.
pub trait OrdElement: Shuffle {
    /// The least value (−∞ for floats, `MIN` for integers): identity of max.
    const LOWEST: Self;
    /// The greatest value (+∞ for floats, `MAX` for integers): identity of min.
    const HIGHEST: Self;
    /// Whether this is a NaN (always false for integers).
    fn is_nan(self) -> bool;
    /// `self < other` by IEEE or integer order.
    fn lt(self, other: Self) -> bool;

    /// The better of `a` and `b` by `D`, a NaN winning; either one when they are equal. Floats may override
    /// this with a single NaN-propagating `max`/`min` instruction.
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

macro_rules! ord_float {
    ($($t:ty),*) => {$(
        impl OrdElement for $t {
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline(always)]
            fn is_nan(self) -> bool { self != self }
            #[inline(always)]
            fn lt(self, other: Self) -> bool { self < other }
            /// IEEE 754-2019 maximum/minimum: NaN-propagating, one `max.NaN`/`min.NaN` on sm_80+.
            #[inline(always)]
            fn pick<D: Direction>(a: Self, b: Self) -> Self {
                if D::GREATEST { a.maximum(b) } else { a.minimum(b) }
            }
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
ord_int!(i32, u32, i64, u64, u8);

/// Which end of the order an extremum operator seeks.
pub trait Direction {
    /// True for [`Greatest`].
    const GREATEST: bool;
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
    const GREATEST: bool = true;
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
    const GREATEST: bool = false;
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

impl<T: SumElement> DeviceOp for Sum<T> {
    type In = T;
    type Acc = T::Acc;
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
}

/// Addition in the element's own type (wrapping for integers): the operator of scans and counters, where
/// [`Sum`] would widen the accumulator.
pub struct Plus<T>(PhantomData<T>);

impl<T: Accumulator> DeviceOp for Plus<T> {
    type In = T;
    type Acc = T;
    #[inline(always)]
    fn identity() -> T {
        T::ZERO
    }
    #[inline(always)]
    fn lift(x: T, _: u64) -> T {
        x
    }
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        a.add(b)
    }
}

/// Max or min of `T` (by `D`); a NaN anywhere makes the result NaN.
pub struct Extreme<T, D>(PhantomData<(T, D)>);
/// Greatest element.
pub type Max<T> = Extreme<T, Greatest>;
/// Least element.
pub type Min<T> = Extreme<T, Least>;

impl<T: OrdElement, D: Direction> DeviceOp for Extreme<T, D> {
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
        T::pick::<D>(a, b)
    }
}

/// A value with the index it was found at: the accumulator and result of [`ArgMax`] and [`ArgMin`]. Its
/// layout is the host's too (`reduce_contract::Indexed`).
pub use reduce_contract::Indexed;

// SAFETY: both fields are `Shuffle` and are moved field by field.
unsafe impl<T: Shuffle> Shuffle for Indexed<T> {
    #[inline(always)]
    fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
        Indexed {
            value: self.value.map_words(&mut f),
            index: self.index.map_words(f),
        }
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

impl<T: OrdElement, D: Direction> DeviceOp for ArgExtreme<T, D> {
    type In = T;
    type Acc = Indexed<T>;
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

    /// Two 8-byte stores: the value's bits zero-extended, then the index. A plain store leaves the padding
    /// after a value of under 8 bytes unwritten, so every 32-byte sector of the results is written in part,
    /// and a sector written in part costs L2 a read of DRAM before it can write it back (ECC covers whole
    /// sectors). Short rows' argmax writes as many result bytes as it reads (2^22 rows of 4 f32: 64 MB).
    #[inline(always)]
    unsafe fn write(p: *mut Indexed<T>, v: Indexed<T>) {
        const { assert!(size_of::<Indexed<T>>() == 16 && size_of::<T>() <= 8) };
        let (mut bits, mut shift) = (0u64, 0u32);
        // `map_words` hands over the value's words, low first; the identity map leaves it as it is.
        v.value.map_words(|w| {
            bits |= (w as u64) << shift;
            shift += 32;
            w
        });
        let q = p as *mut u64;
        // SAFETY: `Indexed<T>` is `repr(C)`, 16 bytes aligned to 8: the value and its padding fill the
        // first word and the index the second, both inside `*p` (valid and aligned: the caller).
        unsafe {
            q.write(bits);
            q.add(1).write(v.index);
        }
    }

    /// Values first, indices only when needed: the run's best value by a NaN-propagating tree (one
    /// instruction per element for floats), and only if it beats `acc` (strictly: ties keep the earlier
    /// index, which `acc` holds) a scan for the first element equal to it. On most data the running best
    /// stops changing early, so the scan is rare on large inputs; on small ones every thread's first run
    /// scans, so that first scan is branch-free.
    #[inline(always)]
    fn fold_run(acc: Indexed<T>, len: usize, get: impl Fn(usize) -> (T, u64)) -> Indexed<T> {
        let mut tree = [D::worst::<T>(); 64];
        each_index!(I < len, {
            tree[I] = get(I).0;
        });
        pairwise_tree!(tree, len, T::pick::<D>);
        let best = tree[0];
        let wins = acc.index == u64::MAX
            || (!acc.value.is_nan() && (best.is_nan() || D::better(best, acc.value)));
        if !wins {
            return acc;
        }
        if acc.index == u64::MAX {
            // A thread's first run always scans, so every lane of a warp does: a backward pass of selects,
            // without branches. (An early exit per element let the lanes leave at different elements; ncu
            // at 2^16, where each thread has one run: 22 of 32 lanes active.)
            let mut first = acc;
            each_index!(I < len, {
                let (x, index) = get(len - 1 - I);
                if x.same(best) {
                    first = Indexed { value: x, index };
                }
            });
            return first;
        }
        // Later runs scan rarely, and then in a few lanes: an early exit per element does the least work
        // (the backward pass here cost 1–3 % at 2^26–2^28).
        each_index!(I < len, {
            let (x, index) = get(I);
            if x.same(best) {
                return Indexed { value: x, index };
            }
        });
        acc
    }

    /// Values first, then indices, then one value: a butterfly of one-word `pick`s gives every lane the
    /// segment's best value; a minimum over the indices of the lanes holding it ([`warp::min_u64`]: two
    /// `redux.sync` for a whole warp on sm_80+, else a butterfly) gives the smallest; the lane with that
    /// index hands over its value (its exact bits: −0.0 and +0.0, or two NaNs, are the same value but not
    /// the same bits). The result is `choose`'s, in every lane, and a step costs
    /// a shuffle and one instruction per pass instead of three shuffles and `choose`'s NaN and index tests on
    /// the critical path.
    #[inline(always)]
    unsafe fn warp_reduce(v: Indexed<T>, width: u32, mask: u32) -> Indexed<T> {
        if width == 1 {
            return v;
        }
        let mut best = v.value;
        let mut offset = width >> 1;
        while offset > 0 {
            // SAFETY: the caller's convergence contract (every lane of `mask`, same `width`).
            best = T::pick::<D>(best, unsafe { shfl_xor(best, offset, width, mask) });
            offset >>= 1;
        }
        // Lanes holding the identity carry index u64::MAX, so they lose to any real element of equal value.
        let index = if v.value.same(best) {
            v.index
        } else {
            u64::MAX
        };
        // SAFETY: as above.
        let index = unsafe { warp::min_u64(index, width, mask) };
        // Real indices are unique, so one lane of the segment holds `index` (all do when it is the
        // identity's, and then any of them has the worst value).
        // SAFETY: as above.
        let holders = unsafe { warp::ballot(mask, v.index == index) };
        let first_lane = arch::lane_id() & !(width - 1);
        let ours = (holders >> first_lane) & (u32::MAX >> (32 - width));
        // SAFETY: as above; the source lane lies in this segment (`ours` has a bit set: this lane's own or
        // the holder's).
        let value = unsafe { shfl_idx(v.value, ours.trailing_zeros(), width, mask) };
        Indexed { value, index }
    }
}
