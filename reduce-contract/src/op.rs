//! The operator a user brings: [`ReduceOp`], written once in a `no_std` crate that both the user's kernel
//! crate (for the device) and their program (for the host) depend on.
//!
//! The device runs `identity`, `lift` and `combine` in `kernels-gpu`'s generic kernel bodies (instantiated
//! by its `export_reduce!` macro); the host derives the kernels' names from [`ReduceOp::NAME`] and the
//! input's [`Element::NAME`], reads back the accumulator and applies [`ReduceOp::finalize`]. Because it is
//! one definition, the host and the device cannot disagree on the accumulator's layout or on the names.
//!
//! ```
//! use reduce_contract::op::{Float, ReduceOp};
//! use core::marker::PhantomData;
//!
//! /// The largest magnitude: the scale of an FP8 cast.
//! pub struct AbsMax<T>(PhantomData<T>);
//!
//! impl<T: Float> ReduceOp for AbsMax<T> {
//!     type In = T;
//!     type Acc = f32;
//!     type Out = f32;
//!     const NAME: &'static str = "absmax";
//!     fn identity() -> f32 { 0.0 }
//!     fn lift(x: T, _index: u64) -> f32 { x.to_f32().abs() }
//!     // NaN-propagating, so a NaN anywhere gives NaN.
//!     fn combine(a: f32, b: f32) -> f32 { if a != a || b != b { f32::NAN } else { a.max(b) } }
//!     fn finalize(acc: f32) -> f32 { acc }
//! }
//!
//! // The host's CPU reference is the same code.
//! let xs = [1.5f32, -4.0, 2.0];
//! let acc = xs.iter().enumerate().fold(AbsMax::<f32>::identity(), |a, (i, &x)| {
//!     AbsMax::<f32>::combine(a, AbsMax::<f32>::lift(x, i as u64))
//! });
//! assert_eq!(AbsMax::<f32>::finalize(acc), 4.0);
//! ```

/// An element type the kernels read: its name in kernel names (`f32`, `bf16`, …).
///
/// Implemented here for the primitive element types; `reduce-host` and `kernels-gpu` implement it for their
/// 16-bit float types (bit patterns of the same layout on both sides), so an operator generic over its
/// element is one definition for both.
pub trait Element: Copy + 'static {
    /// The spelling in kernel names: `reduce_partials_<op>_<element>`.
    const NAME: &'static str;
}

/// Floating-point elements, widened exactly to f32 or f64 for arithmetic (16-bit floats have no arithmetic of
/// their own on either side).
pub trait Float: Element {
    /// The value as f32 (exact for f32, f16 and bf16; rounded for f64).
    fn to_f32(self) -> f32;
    /// The value as f64 (exact).
    fn to_f64(self) -> f64;

    /// The least and greatest of a run's `len` values (`get(i)`, `len ≥ 1`) as f32, by IEEE 754-2019
    /// `minimum`/`maximum` (both NaN when any value is NaN): what the extrema of the statistics need from a
    /// run before they look for indices. Only for elements of up to 4 bytes (exact in f32).
    ///
    /// The 16-bit floats of `kernels-gpu` override it with paired instructions (`min.NaN.bf16x2`), two
    /// elements per instruction and none widened, so `aminmax` of a 16-bit input issues a third of the
    /// instructions per element.
    #[doc(hidden)]
    #[inline(always)]
    fn run_bounds(len: usize, get: impl Fn(usize) -> Self) -> (f32, f32) {
        crate::stats::Bounds::of_run(len, |i| get(i).to_f32())
    }
}

macro_rules! primitive_elements {
    ($($t:ident),*) => {$(
        impl Element for $t {
            const NAME: &'static str = stringify!($t);
        }
    )*};
}
primitive_elements!(f32, f64, i32, u32, i64, u64, u8);

impl Float for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
}

impl Float for f64 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
}

/// Plain data: every field an integer, a float, or `Pod` itself, with no padding bytes, so that its bytes can
/// cross lanes as words, and the host can read back what the device wrote.
///
/// # Safety
/// The type holds no pointers or references (an address means nothing on the other side) and has no padding
/// bytes (the kernels move every word of it). A `#[repr(C)]` struct of `Pod` fields whose sizes leave no gap
/// qualifies.
pub unsafe trait Pod: Copy + 'static {}

macro_rules! pod {
    ($($t:ty),*) => {$(
        // SAFETY: a primitive number: no pointers, no padding.
        unsafe impl Pod for $t {}
    )*};
}
pod!(f32, f64, i8, u8, i16, u16, i32, u32, i64, u64);

// SAFETY: an array of padding-free plain data has no padding of its own.
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// A reduction operator: how elements become accumulators, how accumulators merge, and what the result is.
///
/// # The laws
/// - `combine(identity(), a) == combine(a, identity()) == a` for every accumulator `lift` can produce;
/// - `combine` is associative and commutative (up to floating-point rounding). The threads of the
///   device-wide grid-stride pass hold interleaved elements, so the kernels may merge an accumulator of
///   later elements on the left; one that records positions (an argmax, the first or last element) must
///   decide ties by the positions it holds, as `stats::Extrema::merge` does. Within one thread, runs arrive
///   in increasing index order ([`fold_run`](Self::fold_run)).
///
/// The kernels combine in a fixed tree that depends only on the input's length, its address alignment and
/// the launch shape, so a float operator's bits repeat run to run on the same GPU.
///
/// # Requirements the device adds
/// - `In` is one of the library's element types (f32, f64, f16, bf16, i32, u32, i64, u64, u8): the kernels
///   read it with 16-byte vector loads.
/// - `Acc` is [`Pod`] (plain data) whose size is a multiple of 4 bytes, at most 64 bytes (it crosses lanes as
///   32-bit words, and each warp parks one in shared memory). `kernels-gpu`'s `export_reduce!` checks all
///   three when it compiles.
pub trait ReduceOp: 'static {
    /// The element read from memory.
    type In: Element;
    /// The running value, written by the kernels as the result of the `*_async` calls. The kernels of
    /// `export_reduce!` and the host's `reduce_with` move it as 32-bit words, so for them it must be [`Pod`]
    /// (they require it). Only the built-in argmax's [`Indexed`](crate::Indexed), which has padding, is
    /// moved field by field by its own device code instead.
    type Acc: Copy + 'static;
    /// What the blocking calls return: [`finalize`](Self::finalize) of the accumulator.
    type Out;
    /// The operator's part of its kernels' names, `reduce_partials_<NAME>_<element>`: lower case, digits and
    /// `_`, unique among the operators of one kernel crate.
    const NAME: &'static str;

    /// The neutral element of `combine`; also the result of an empty input.
    fn identity() -> Self::Acc;
    /// The accumulator of one element, `x`, found at `index` (its position in the input or the segment):
    /// the map step of a map-reduce (`TransformReduce` in CUB).
    fn lift(x: Self::In, index: u64) -> Self::Acc;
    /// Merges two accumulators of disjoint elements (in either order; see the laws above).
    fn combine(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// The result from the final accumulator (a square root, a division by the count, or the accumulator
    /// itself). Runs on the host, in the blocking calls.
    fn finalize(acc: Self::Acc) -> Self::Out;

    /// Folds a run of `len` consecutive elements into `acc`; `get(i)` gives element `i` of the run and its
    /// index, in increasing order, all greater than the indices `acc` holds. `len` is a constant after
    /// inlining, at most 64.
    ///
    /// The default lifts each element and combines them in a pairwise tree (so a run is not one long
    /// dependent chain), then merges the tree into `acc`. Override it when a run has a cheaper form: a
    /// Welford accumulator, say, sums the run and its squares first and merges once per run instead of
    /// dividing per element. An override must give what the default gives, up to rounding.
    #[inline(always)]
    fn fold_run(acc: Self::Acc, len: usize, get: impl Fn(usize) -> (Self::In, u64)) -> Self::Acc {
        let mut tree = [Self::identity(); 64];
        crate::each_index!(I < len, {
            let (x, index) = get(I);
            tree[I] = Self::lift(x, index);
        });
        crate::pairwise_tree!(tree, len, Self::combine);
        Self::combine(acc, tree[0])
    }

    /// Whether [`fold_run_deferred`](Self::fold_run_deferred) may leave work for [`revisit`](Self::revisit).
    /// Then the kernels fold a thread's first run with `fold_run` before their loop, the later ones deferred,
    /// and revisit once after it (a thread of a small input has one run, and a deferred one would cost it a
    /// second trip to memory). Worth it where the run's index search is what bounds the loop (elements of
    /// 16 bits, whose runs are 32 long); for f32 `argmax` and `aminmax`, which are bound by memory, the
    /// deferred loop measured 2–15 % slower, so they keep the default, `false`.
    const DEFERS: bool = false;

    /// [`fold_run`](Self::fold_run), allowed to leave part of its work for [`revisit`](Self::revisit): the
    /// device-wide pass folds its runs with it and revisits each thread's accumulator once, after its last
    /// such run and before anything is combined with it. An operator that keeps an index looks for it in a
    /// run only when the run's value beats the accumulator's; across the 32 lanes of a warp that is most of
    /// the runs of a thread's first hundred (the lanes wait for each other), so such an operator may record
    /// only the run, by the index of its first element (`get(0).1`), and find the index once, at the end.
    ///
    /// The default folds at once. An override must give, after `revisit`, what `fold_run` gives.
    #[inline(always)]
    fn fold_run_deferred(
        acc: Self::Acc,
        len: usize,
        get: impl Fn(usize) -> (Self::In, u64),
    ) -> Self::Acc {
        Self::fold_run(acc, len, get)
    }

    /// Finishes what [`fold_run_deferred`](Self::fold_run_deferred) left in `acc`: `run(first)` reads the
    /// run of `len` elements whose first element's index is `first` again, as a `get` of `fold_run` (every
    /// deferred run had length `len`). The default has nothing to finish.
    #[inline(always)]
    fn revisit<G: Fn(usize) -> (Self::In, u64)>(
        acc: Self::Acc,
        len: usize,
        run: impl Fn(u64) -> G,
    ) -> Self::Acc {
        let _ = (len, run);
        acc
    }
}

/// The top bit of an index a [`ReduceOp::fold_run_deferred`] of this crate has not looked for yet: the other
/// bits are the index of the first element of the run that holds it. Indices stay below 2^63 (lengths fit
/// an `isize`), and `u64::MAX`, which has the bit too, stays "no element".
pub(crate) const PENDING: u64 = 1 << 63;

/// Whether two names are equal, at compile time: `export_reduce!` checks that the name it exports kernels
/// under is the operator's [`ReduceOp::NAME`].
#[doc(hidden)]
pub const fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Runs `$body` once per listed constant, bound to `$i`: a loop unrolled in the source. LLVM leaves long
/// bodies rolled (64 lanes of an argmax run on u8, 32 of an f16 max with its conversions), and a rolled loop
/// that indexes a local array puts the array in local memory.
#[doc(hidden)]
#[macro_export]
macro_rules! unroll {
    ($i:ident in [$($v:literal),*] $body:block) => {$({
        const $i: usize = $v;
        $body
    })*};
}

/// Runs `$body` for every constant `$i` in 0..64 below `$len` (a constant after inlining), unrolled in the
/// source: the loop of a [`ReduceOp::fold_run`] override. A rolled loop whose index picks elements of the
/// run would put the run (held in registers) into local memory, which the kernel build refuses.
///
/// ```
/// let mut sum = 0;
/// reduce_contract::each_index!(I < 4, { sum += I; });
/// assert_eq!(sum, 6);
/// ```
#[macro_export]
macro_rules! each_index {
    ($i:ident < $len:expr, $body:block) => {
        $crate::unroll!($i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
            23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48,
            49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63] {
            if $i < $len $body
        })
    };
}

/// Pairwise reduction of `$tree[0..$len]` into `$tree[0]` with `$f` ($len a power of two ≤ 64), unrolled.
#[doc(hidden)]
#[macro_export]
macro_rules! pairwise_tree {
    ($tree:ident, $len:expr, $f:expr) => {
        $crate::unroll!(W in [32, 16, 8, 4, 2, 1] {
            if W < $len {
                $crate::each_index!(J < W, {
                    $tree[J] = $f($tree[J], $tree[J + W]);
                });
            }
        });
    };
}

/// A test that keeps elements, for `DeviceSelect`: a user's predicate, compiled into their kernel crate by
/// `kernels-gpu`'s `export_select!` and run by the same unordered and stable kernels as the built-in ones.
///
/// `threshold` is the value the host passes with each call (a bound, a mask, a sentinel), as the built-in
/// `GreaterThan` takes its bound; a test that needs none ignores it. `keep` runs once per element, on the
/// device, so it must not panic (no indexing, no unwrap).
///
/// ```
/// use reduce_contract::op::{Element, SelectOp};
///
/// /// Keeps elements whose magnitude is over the threshold: outliers.
/// pub struct Outside<T>(core::marker::PhantomData<T>);
///
/// impl SelectOp for Outside<f32> {
///     type In = f32;
///     const NAME: &'static str = "outside";
///     fn keep(threshold: f32, x: f32) -> bool {
///         x.abs() > threshold
///     }
/// }
/// assert!(<Outside<f32> as SelectOp>::keep(1.0, -2.0));
/// ```
pub trait SelectOp: 'static {
    /// The elements tested (one of the library's element types, as for [`ReduceOp::In`]).
    type In: Element;
    /// The predicate's name in its kernels' names (`select_stable_<NAME>_<element>`): an identifier.
    const NAME: &'static str;
    /// Whether `x` is kept, given the call's `threshold`.
    fn keep(threshold: Self::In, x: Self::In) -> bool;
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count;
    impl ReduceOp for Count {
        type In = u8;
        type Acc = u64;
        type Out = u64;
        const NAME: &'static str = "count";
        fn identity() -> u64 {
            0
        }
        fn lift(_: u8, _: u64) -> u64 {
            1
        }
        fn combine(a: u64, b: u64) -> u64 {
            a + b
        }
        fn finalize(acc: u64) -> u64 {
            acc
        }
    }

    #[test]
    fn the_default_run_folds_every_element() {
        for len in [1usize, 2, 4, 8, 16, 32, 64] {
            assert_eq!(Count::fold_run(5, len, |i| (0, i as u64)), 5 + len as u64);
        }
    }

    #[test]
    fn names_compare_by_bytes() {
        assert!(same_name("absmax", "absmax"));
        assert!(!same_name("absmax", "absmin"));
        assert!(!same_name("abs", "absmax"));
        assert_eq!(<f32 as Element>::NAME, "f32");
        assert_eq!(<u8 as Element>::NAME, "u8");
    }
}
