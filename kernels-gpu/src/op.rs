//! Reduction operators as types, as the kernel bodies run them.
//!
//! [`DeviceOp`] is what every generic kernel body is written against. Every operator is a
//! [`ReduceOp`] (pure Rust, shared with the host): a user's runs as
//! [`Custom<R>`](crate::custom::Custom), which forwards to it with the default hooks; the built-in `sum`,
//! `max`, `min`, `argmax` and `argmin` are the contract's [`reduce_contract::builtin`] operators, and their
//! `DeviceOp` impls here forward to those definitions too, adding only the hooks that use device
//! instructions a host-side trait cannot name (argmax's value-first warp exchange, its padded stores).
//! Both kinds go through the same kernel bodies and the same exported-kernel shape.
//!
//! An operator names its input element, its accumulator, the identity and the combine step. The law every
//! operator obeys: `combine(identity(), x) == combine(x, identity()) == x` for every accumulator `x` that
//! [`DeviceOp::lift`] can produce, and `combine` is associative up to floating-point rounding. The kernels
//! write the accumulator itself as the result, so the host reads back an `Acc`.
use core::marker::PhantomData;

use reduce_contract::op::ReduceOp;
use reduce_contract::topk::{TopKElement, value_key};

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

    /// Whether the operator is heavy enough to be bound by issue slots and occupancy rather than by bytes.
    /// Then the device-wide pass loads its next four 16-byte chunks into registers before it folds the
    /// current ones (`stats` f32 at 2^28 went from 72 % to 87 % of the read ceiling, `aminmax` bf16 from 57
    /// to 72 %), and the per-segment block kernel folds with the loads' kind chosen once per segment (two
    /// copies of the fold, 16-byte and scalar loads) and four 16-byte chunks in flight per thread, instead
    /// of one compact copy choosing per chunk with two in flight. The runs and their order are the same either
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

    /// Whether [`fold_run_deferred`](Self::fold_run_deferred) may leave work for
    /// [`revisit`](Self::revisit), as [`ReduceOp::DEFERS`]: then the kernels fold a thread's first run with
    /// `fold_run` before their loop and the later ones deferred.
    const DEFERS: bool = false;

    /// [`fold_run`](Self::fold_run), allowed to leave work for [`revisit`](Self::revisit), as
    /// [`ReduceOp::fold_run_deferred`]. The default folds at once.
    #[inline(always)]
    fn fold_run_deferred(
        acc: Self::Acc,
        len: usize,
        get: impl Fn(usize) -> (Self::In, u64),
    ) -> Self::Acc {
        Self::fold_run(acc, len, get)
    }

    /// Finishes what [`fold_run_deferred`](Self::fold_run_deferred) left, as [`ReduceOp::revisit`]:
    /// `run(first)` reads the run of `len` elements whose first index is `first` again.
    #[inline(always)]
    fn revisit<G: Fn(usize) -> (Self::In, u64)>(
        acc: Self::Acc,
        len: usize,
        run: impl Fn(u64) -> G,
    ) -> Self::Acc {
        let _ = (len, run);
        acc
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

pub use reduce_contract::builtin::{
    ArgExtreme, ArgMax, ArgMin, Direction, Extreme, Greatest, Least, Max, Min, Ordered, Sum,
    SumAcc, Summable, choose,
};

/// A sum's running value that can cross lanes: the contract's [`SumAcc`] (IEEE adds for floats, wrapping
/// adds for integers) of a [`Shuffle`] type.
pub trait Accumulator: SumAcc + Shuffle {}
impl<A: SumAcc + Shuffle> Accumulator for A {}

/// Elements that can be summed on the device: the contract's [`Summable`] (f32 for f32 and f16/bf16, f64
/// for f64, i64/u64 for the integers) with an accumulator that crosses lanes.
pub trait SumElement: Summable<Acc: Accumulator> {}
impl<T: Summable<Acc: Accumulator>> SumElement for T {}

/// Elements with an order on the device: the contract's [`Ordered`], with top-k's order-preserving key
/// (which argmax's warp exchange compares with one `redux.sync`), of a [`Shuffle`] type.
pub trait OrdElement: Ordered + TopKElement + Shuffle {}
impl<T: Ordered + TopKElement + Shuffle> OrdElement for T {}

impl<T: SumElement> DeviceOp for Sum<T> {
    type In = T;
    type Acc = T::Acc;
    #[inline(always)]
    fn identity() -> T::Acc {
        <Self as ReduceOp>::identity()
    }
    #[inline(always)]
    fn lift(x: T, index: u64) -> T::Acc {
        <Self as ReduceOp>::lift(x, index)
    }
    #[inline(always)]
    fn combine(a: T::Acc, b: T::Acc) -> T::Acc {
        <Self as ReduceOp>::combine(a, b)
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

impl<T: OrdElement, D: Direction> DeviceOp for Extreme<T, D> {
    type In = T;
    type Acc = T;
    #[inline(always)]
    fn identity() -> T {
        <Self as ReduceOp>::identity()
    }
    #[inline(always)]
    fn lift(x: T, index: u64) -> T {
        <Self as ReduceOp>::lift(x, index)
    }
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        <Self as ReduceOp>::combine(a, b)
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

/// The contract's definition (identity, lift, the argmax rule [`choose`], the value-first run fold), with
/// the two device hooks.
impl<T: OrdElement, D: Direction> DeviceOp for ArgExtreme<T, D> {
    type In = T;
    type Acc = Indexed<T>;
    #[inline(always)]
    fn identity() -> Indexed<T> {
        <Self as ReduceOp>::identity()
    }
    #[inline(always)]
    fn lift(x: T, index: u64) -> Indexed<T> {
        <Self as ReduceOp>::lift(x, index)
    }
    #[inline(always)]
    fn combine(a: Indexed<T>, b: Indexed<T>) -> Indexed<T> {
        <Self as ReduceOp>::combine(a, b)
    }
    #[inline(always)]
    fn fold_run(acc: Indexed<T>, len: usize, get: impl Fn(usize) -> (T, u64)) -> Indexed<T> {
        <Self as ReduceOp>::fold_run(acc, len, get)
    }
    const DEFERS: bool = <Self as ReduceOp>::DEFERS;
    #[inline(always)]
    fn fold_run_deferred(
        acc: Indexed<T>,
        len: usize,
        get: impl Fn(usize) -> (T, u64),
    ) -> Indexed<T> {
        <Self as ReduceOp>::fold_run_deferred(acc, len, get)
    }
    #[inline(always)]
    fn revisit<G: Fn(usize) -> (T, u64)>(
        acc: Indexed<T>,
        len: usize,
        run: impl Fn(u64) -> G,
    ) -> Indexed<T> {
        <Self as ReduceOp>::revisit(acc, len, run)
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

    /// Values first, then indices, then one value. The segment's best value goes to every lane: for a
    /// whole warp of an element with a 32-bit order key (all but the 8-byte ones) on sm_80+, one
    /// `redux.sync.max` of the keys (NaN the greatest key, both zeros one key, as [`Ordered::same`] has
    /// it); otherwise a butterfly of one-word `pick`s. A minimum over the indices of the lanes holding it
    /// ([`warp::min_u64`]: two `redux.sync` for a whole warp on sm_80+, else a butterfly) gives the
    /// smallest; the lane with that index hands over its value (its exact bits: −0.0 and +0.0, or two
    /// NaNs, are the same value but not the same bits). The result is `choose`'s, in every lane, and a
    /// step costs a shuffle and one instruction per pass instead of three shuffles and `choose`'s NaN and
    /// index tests on the critical path.
    #[inline(always)]
    unsafe fn warp_reduce(v: Indexed<T>, width: u32, mask: u32) -> Indexed<T> {
        if width == 1 {
            return v;
        }
        // Whether this lane holds the segment's best value.
        let holds_best = if width == 32 && T::KEY_BYTES <= 4 && cfg!(target_feature = "sm_80") {
            let key = value_key(v.value, D::GREATEST) as u32;
            // SAFETY: the caller's convergence contract (every lane of `mask`, a whole warp).
            key == unsafe { warp::max_u32(key, mask) }
        } else {
            let mut best = v.value;
            let mut offset = width >> 1;
            while offset > 0 {
                // SAFETY: the caller's convergence contract (every lane of `mask`, same `width`).
                best = T::pick::<D>(best, unsafe { shfl_xor(best, offset, width, mask) });
                offset >>= 1;
            }
            v.value.same(best)
        };
        // Lanes holding the identity carry index u64::MAX, so they lose to any real element of equal value.
        let index = if holds_best { v.index } else { u64::MAX };
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
