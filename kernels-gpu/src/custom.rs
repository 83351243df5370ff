//! A user's operator on the device: [`Custom`] runs any [`ReduceOp`] in the library's kernel bodies, and
//! [`export_reduce!`](crate::export_reduce) exports its kernels under names the host derives.
//!
//! A kernel crate of one's own is a `no_std` library with `crate-type = ["rlib"]` that depends on
//! `kernels-gpu` and on the crate that defines the operators (shared with the host program):
//!
//! ```ignore
//! #![no_std]
//! #![feature(abi_ptx)]
//! kernels_gpu::export_reduce!(absmax = my_ops::AbsMax<_>; f32, bf16);
//! ```
//!
//! `reduce-builder` compiles it to PTX and cubins from the host crate's `build.rs`.
use core::marker::PhantomData;

use reduce_contract::op::{Pod, ReduceOp};

use crate::op::DeviceOp;
use crate::shuffle::Shuffle;

/// The element types by their kernel-name spelling: `elem::bf16` is the device's [`crate::half::BF16`].
/// `export_reduce!` names the instance of an operator generic over its element with these.
#[allow(non_camel_case_types)]
pub mod elem {
    pub use crate::half::{BF16 as bf16, F16 as f16};
    pub use core::primitive::{f32, f64, i32, i64, u8, u32, u64};
}

/// Any `Copy` value as the 32-bit words it is made of, so that it can cross lanes: the accumulator of a
/// [`Custom`] operator. `repr(transparent)`, so a `Words<A>` in memory is an `A`.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Words<A>(pub A);

impl<A: Copy> Words<A> {
    /// The words a value of `A` takes; `A`'s size must be a whole number of words, at most 16 (64 bytes:
    /// each warp of a block parks one accumulator in the launch's shared memory).
    const COUNT: usize = {
        assert!(
            size_of::<A>().is_multiple_of(4),
            "a ReduceOp's Acc must be a whole number of 32-bit words (pad it to a multiple of 4 bytes)"
        );
        assert!(
            size_of::<A>() <= reduce_contract::layout::MAX_OP_ACC_BYTES,
            "a ReduceOp's Acc must be at most 64 bytes"
        );
        size_of::<A>() / 4
    };
}

// SAFETY: `map_words` reads each of the value's `COUNT` words, maps it and writes it back in place, so the
// identity map rebuilds the same bytes; `A` is `Pod`, so every one of those bytes is initialized.
unsafe impl<A: Pod> Shuffle for Words<A> {
    #[inline(always)]
    fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
        let mut v = self;
        let p = &mut v as *mut Words<A> as *mut u32;
        let mut i = 0;
        // A constant trip count: the loop unrolls and `v` stays in registers.
        while i < Self::COUNT {
            // SAFETY: word `i < COUNT` lies inside `v` (its size is `4 · COUNT`); unaligned accesses, since
            // `A` may be aligned to less than 4.
            unsafe { p.add(i).write_unaligned(f(p.add(i).read_unaligned())) };
            i += 1;
        }
        v
    }
}

/// A [`ReduceOp`] in the library's kernel bodies: the generic partials, finalize, last-block and per-segment
/// kernels run it exactly as they run the built-in operators, with the default warp tree.
pub struct Custom<R>(PhantomData<R>);

impl<R: ReduceOp<Acc: Pod>> DeviceOp for Custom<R> {
    type In = R::In;
    type Acc = Words<R::Acc>;
    const DEEP_FOLD: bool = true;
    const DEFERS: bool = R::DEFERS;
    #[inline(always)]
    fn identity() -> Words<R::Acc> {
        Words(R::identity())
    }
    #[inline(always)]
    fn lift(x: R::In, index: u64) -> Words<R::Acc> {
        Words(R::lift(x, index))
    }
    #[inline(always)]
    fn combine(a: Words<R::Acc>, b: Words<R::Acc>) -> Words<R::Acc> {
        Words(R::combine(a.0, b.0))
    }
    #[inline(always)]
    fn fold_run(
        acc: Words<R::Acc>,
        len: usize,
        get: impl Fn(usize) -> (R::In, u64),
    ) -> Words<R::Acc> {
        Words(R::fold_run(acc.0, len, get))
    }
    #[inline(always)]
    fn fold_run_deferred(
        acc: Words<R::Acc>,
        len: usize,
        get: impl Fn(usize) -> (R::In, u64),
    ) -> Words<R::Acc> {
        Words(R::fold_run_deferred(acc.0, len, get))
    }
    #[inline(always)]
    fn revisit<G: Fn(usize) -> (R::In, u64)>(
        acc: Words<R::Acc>,
        len: usize,
        run: impl Fn(u64) -> G,
    ) -> Words<R::Acc> {
        Words(R::revisit(acc.0, len, run))
    }
}

/// Exports the kernels of operators for element types: for each `name = Op; types`, and each type `t` of the
/// list, the device-wide `reduce_{partials,finalize,last_block}_<name>_<t>`, the per-segment
/// `segmented_{tile,block,combine,rows}_<name>_<t>`, and the global `reduce_acc_bytes_<name>_<t>`, whose size
/// is the accumulator's (the host checks it against its own), every one a thin instance of the generic bodies over
/// [`Custom`]. `Op` may name its element type `_`, which each type of the list fills in
/// (`my_ops::Welford<_>`); the host finds the kernels by the operator's [`ReduceOp::NAME`], which must equal
/// `name` (checked here, at compile time).
///
/// The calling crate must be `#![no_std]` with `#![feature(abi_ptx)]` (the kernels' calling convention).
///
/// ```ignore
/// kernels_gpu::export_reduce! {
///     absmax = my_ops::AbsMax<_>; f32, f16, bf16;
///     welford = my_ops::Welford<_>; f32, bf16;
/// }
/// ```
#[macro_export]
macro_rules! export_reduce {
    ($($name:ident = $($op:ident)::+ $(<$g:tt>)?; $($ty:ident),+ $(,)?;)+) => {$(
        #[allow(non_snake_case, non_camel_case_types)]
        mod $name {
            $crate::__export_types!($name [$($op)::+] [$($g)?] $($ty)+);
        }
    )+};
}

/// One operator's kernels for each element type of its list (see [`export_reduce!`](crate::export_reduce)).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_types {
    ($name:ident $op:tt $g:tt $($ty:ident)+) => {$(
        pub mod $ty {
            // The operator's path as written where `export_reduce!` was called.
            #[allow(unused_imports)]
            use super::super::*;
            type User = $crate::__op_type!($op $g $ty);
            type Op = $crate::custom::Custom<User>;
            type Reduce = $crate::__reexport::params::ReduceParams<
                <Op as $crate::op::DeviceOp>::In,
                <Op as $crate::op::DeviceOp>::Acc,
            >;
            type Segmented = $crate::segmented::Params<Op>;

            const _: () = {
                use $crate::__reexport::op::{Element, ReduceOp, same_name};
                assert!(
                    same_name(<User as ReduceOp>::NAME, stringify!($name)),
                    concat!("export_reduce!: `", stringify!($name), "` must be the operator's ReduceOp::NAME"),
                );
                assert!(
                    same_name(<<User as ReduceOp>::In as Element>::NAME, stringify!($ty)),
                    concat!("export_reduce!: the operator exported for `", stringify!($ty),
                        "` must read `", stringify!($ty), "` elements"),
                );
            };

            /// As many bytes as the accumulator: the host compares this global's size with its own
            /// `size_of::<Acc>()` before it launches anything, so kernels built from another version of the
            /// operator are refused instead of writing past the host's buffers.
            #[unsafe(export_name = concat!("reduce_acc_bytes_", stringify!($name), "_", stringify!($ty)))]
            pub static ACC_BYTES: [u8; ::core::mem::size_of::<<Op as $crate::op::DeviceOp>::Acc>()] =
                [0; ::core::mem::size_of::<<Op as $crate::op::DeviceOp>::Acc>()];

            /// # Safety
            /// See `kernels_gpu::device::partials`.
            #[unsafe(export_name = concat!("reduce_partials_", stringify!($name), "_", stringify!($ty)))]
            pub unsafe extern "ptx-kernel" fn partials(p: Reduce) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { $crate::device::partials::<Op>(p.input, p.n, p.partials) }
            }

            /// # Safety
            /// See `kernels_gpu::device::finalize`.
            #[unsafe(export_name = concat!("reduce_finalize_", stringify!($name), "_", stringify!($ty)))]
            pub unsafe extern "ptx-kernel" fn finalize(p: Reduce) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { $crate::device::finalize::<Op>(p.partials, p.count, p.out) }
            }

            /// # Safety
            /// See `kernels_gpu::device::last_block`.
            #[unsafe(export_name = concat!("reduce_last_block_", stringify!($name), "_", stringify!($ty)))]
            pub unsafe extern "ptx-kernel" fn last_block(p: Reduce) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { $crate::device::last_block::<Op>(p.input, p.n, p.partials, p.ticket, p.out) }
            }

            /// # Safety
            /// See `kernels_gpu::segmented::tile`.
            #[unsafe(export_name = concat!("segmented_tile_", stringify!($name), "_", stringify!($ty)))]
            pub unsafe extern "ptx-kernel" fn tile(p: Segmented) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { $crate::segmented::tile::<Op>(p) }
            }

            /// # Safety
            /// See `kernels_gpu::segmented::block`.
            #[unsafe(export_name = concat!("segmented_block_", stringify!($name), "_", stringify!($ty)))]
            pub unsafe extern "ptx-kernel" fn block(p: Segmented) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { $crate::segmented::block::<Op>(p) }
            }

            /// # Safety
            /// See `kernels_gpu::segmented::combine`.
            #[unsafe(export_name = concat!("segmented_combine_", stringify!($name), "_", stringify!($ty)))]
            pub unsafe extern "ptx-kernel" fn combine(p: Segmented) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { $crate::segmented::combine::<Op>(p) }
            }

            /// # Safety
            /// See `kernels_gpu::segmented::rows`.
            #[unsafe(export_name = concat!("segmented_rows_", stringify!($name), "_", stringify!($ty)))]
            pub unsafe extern "ptx-kernel" fn rows(p: Segmented) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { $crate::segmented::rows::<Op>(p) }
            }
        }
    )+};
}

/// The operator type of one instance: the path as written, or with `_` filled by the element type.
/// A user's [`SelectOp`](reduce_contract::op::SelectOp) as the compaction kernels' predicate: the call's
/// threshold, and the user's test.
pub struct UserPredicate<S: reduce_contract::op::SelectOp>(S::In);

impl<S: reduce_contract::op::SelectOp> Clone for UserPredicate<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: reduce_contract::op::SelectOp> Copy for UserPredicate<S> {}

impl<S: reduce_contract::op::SelectOp> crate::select::Predicate<S::In> for UserPredicate<S> {
    #[inline(always)]
    fn new(threshold: S::In) -> Self {
        UserPredicate(threshold)
    }
    #[inline(always)]
    fn test(self, x: S::In) -> bool {
        S::keep(self.0, x)
    }
}

/// Exports the compaction kernels of predicates for element types: for each `name = Pred; types`, and each
/// type `t` of the list, `select_unordered_<name>_<t>` and `select_stable_<name>_<t>`, thin instances of the
/// built-in compaction bodies over [`UserPredicate`]. As [`export_reduce!`](crate::export_reduce), `Pred`
/// may name its element `_`, and `name` must equal the predicate's
/// [`SelectOp::NAME`](reduce_contract::op::SelectOp::NAME) (checked at compile time).
///
/// ```ignore
/// kernels_gpu::export_select! {
///     outside = my_ops::Outside<_>; f32, bf16;
/// }
/// ```
#[macro_export]
macro_rules! export_select {
    ($($name:ident = $($op:ident)::+ $(<$g:tt>)?; $($ty:ident),+ $(,)?;)+) => {$(
        #[allow(non_snake_case, non_camel_case_types)]
        mod $name {
            $crate::__export_select_types!($name [$($op)::+] [$($g)?] $($ty)+);
        }
    )+};
}

/// One predicate's kernels for each element type of its list (see [`export_select!`](crate::export_select)).
#[doc(hidden)]
#[macro_export]
macro_rules! __export_select_types {
    ($name:ident $op:tt $g:tt $($ty:ident)+) => {$(
        pub mod $ty {
            #[allow(unused_imports)]
            use super::super::*;
            type User = $crate::__op_type!($op $g $ty);
            type E = $crate::custom::elem::$ty;
            type Params = $crate::__reexport::params::SelectParams<E>;
            type Sel = $crate::select::If<$crate::custom::UserPredicate<User>>;

            const _: () = {
                use $crate::__reexport::op::{Element, SelectOp, same_name};
                assert!(
                    same_name(<User as SelectOp>::NAME, stringify!($name)),
                    concat!("export_select!: `", stringify!($name), "` must be the predicate's SelectOp::NAME"),
                );
                assert!(
                    same_name(<<User as SelectOp>::In as Element>::NAME, stringify!($ty)),
                    concat!("export_select!: the predicate exported for `", stringify!($ty),
                        "` must test `", stringify!($ty), "` elements"),
                );
            };

            /// # Safety
            /// See `kernels_gpu::select::unordered`.
            #[unsafe(export_name = concat!("select_unordered_", stringify!($name), "_", stringify!($ty)))]
            pub unsafe extern "ptx-kernel" fn unordered(p: Params) {
                let sel: Sel = $crate::select::If($crate::select::Predicate::new(p.threshold));
                const V: usize = $crate::__reexport::layout::stable_vectors(size_of::<E>());
                // SAFETY: the host passes valid buffers, a zeroed count, and sizes the grid to the tiles
                // (launch contract).
                unsafe {
                    $crate::select::unordered::<E, Sel, V>(p.input, p.n, sel, p.out, p.count, p.states)
                }
            }

            /// # Safety
            /// See `kernels_gpu::select::stable`.
            #[unsafe(export_name = concat!("select_stable_", stringify!($name), "_", stringify!($ty)))]
            pub unsafe extern "ptx-kernel" fn stable(p: Params) {
                let sel: Sel = $crate::select::If($crate::select::Predicate::new(p.threshold));
                const V: usize = $crate::__reexport::layout::stable_vectors(size_of::<E>());
                // SAFETY: the host passes valid buffers and sizes the grid to the tiles (launch contract).
                unsafe {
                    $crate::select::stable::<E, Sel, V>(p.input, p.n, sel, p.out, p.count, p.states)
                }
            }
        }
    )*};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __op_type {
    ([$($op:tt)*] [] $ty:ident) => { $($op)* };
    ([$($op:tt)*] [_] $ty:ident) => { $($op)*<$crate::custom::elem::$ty> };
}
