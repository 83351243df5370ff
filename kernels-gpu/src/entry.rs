//! The exported kernels. Each is a one-line instance of a generic body, generated from the lists in
//! `reduce_contract` (so the host's tables and these entries cannot drift apart) and named by
//! `reduce_contract::kernel_name!`, e.g. `reduce_partials_argmax_f32`.
//!
//! Every kernel takes its family's `#[repr(C)]` parameter struct from `reduce_contract::params` by value.
//!
//! Types: `f32 f64 f16 bf16 i32 u32 i64 u64 u8`, every operator each. Sums accumulate in f32 for f16/bf16 and
//! in 64-bit integers (wrapping) for the integers; max/min/argmax/argmin keep the element type.
use reduce_contract::kernel_name;

use crate::custom::elem;

/// The operator a word of the contract's lists runs: the contract's `ReduceOp` of that word
/// (`reduce_contract::builtin::by_word`). The five built-ins run with their own `DeviceOp` impls
/// (`crate::op`: the compact per-segment fold, argmax's value-first exchange and padded stores); any other
/// word runs as a user's operator does, through [`Custom`](crate::custom::Custom), so a new built-in
/// operator needs nothing here. `softmax` is the device's fused softmax statistics.
macro_rules! op_type {
    (sum $t:ty) => { reduce_contract::builtin::by_word::sum<$t> };
    (max $t:ty) => { reduce_contract::builtin::by_word::max<$t> };
    (min $t:ty) => { reduce_contract::builtin::by_word::min<$t> };
    (argmax $t:ty) => { reduce_contract::builtin::by_word::argmax<$t> };
    (argmin $t:ty) => { reduce_contract::builtin::by_word::argmin<$t> };
    (softmax $t:ty) => { crate::softmax::Softmax<$t> };
    ($op:ident $t:ty) => { crate::custom::Custom<reduce_contract::builtin::by_word::$op<$t>> };
}

/// The atomic kernel, for sums only.
macro_rules! atomic_kernel {
    (sum $ty:ident) => {
        /// # Safety
        /// See [`crate::device::atomic`].
        #[unsafe(export_name = kernel_name!(reduce atomic sum $ty))]
        pub unsafe extern "ptx-kernel" fn atomic(p: Params) {
            // SAFETY: the host passes valid buffers (reduce-host's launch contract).
            unsafe { crate::device::atomic::<Op>(p.input, p.n, p.out) }
        }
    };
    ($op:ident $ty:ident) => {};
}

/// Exports the device-wide reduction kernels of each `(op, type)` pair.
macro_rules! reduce_kernels {
    ($($op:ident $ty:ident),* $(,)?) => {$(
        mod ${concat($op, _, $ty)} {
            use super::*;
            use crate::op::DeviceOp;
            type Op = op_type!($op elem::$ty);
            type Params = reduce_contract::params::ReduceParams<<Op as DeviceOp>::In, <Op as DeviceOp>::Acc>;

            /// # Safety
            /// See [`crate::device::partials`].
            #[unsafe(export_name = kernel_name!(reduce partials $op $ty))]
            pub unsafe extern "ptx-kernel" fn partials(p: Params) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::device::partials::<Op>(p.input, p.n, p.partials) }
            }

            /// # Safety
            /// See [`crate::device::finalize`].
            #[unsafe(export_name = kernel_name!(reduce finalize $op $ty))]
            pub unsafe extern "ptx-kernel" fn finalize(p: Params) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::device::finalize::<Op>(p.partials, p.count, p.out) }
            }

            /// # Safety
            /// See [`crate::device::last_block`].
            #[unsafe(export_name = kernel_name!(reduce last_block $op $ty))]
            pub unsafe extern "ptx-kernel" fn last_block(p: Params) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::device::last_block::<Op>(p.input, p.n, p.partials, p.ticket, p.out) }
            }

            atomic_kernel!($op $ty);
        }
    )*};
}

mod reduce {
    use super::*;
    reduce_contract::reduce_pairs!(reduce_kernels);
}

/// Exports the four per-segment kernels of each `(op, type)` pair:
/// `segmented_{tile,block,combine,rows}_<op>_<type>`.
macro_rules! segmented_kernels {
    ($($op:ident $ty:ident),* $(,)?) => {$(
        mod ${concat($op, _, $ty)} {
            use super::*;
            type Op = op_type!($op elem::$ty);
            type Params = crate::segmented::Params<Op>;

            /// # Safety
            /// See [`crate::segmented::tile`].
            #[unsafe(export_name = kernel_name!(segmented tile $op $ty))]
            pub unsafe extern "ptx-kernel" fn tile(p: Params) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::segmented::tile::<Op>(p) }
            }

            /// # Safety
            /// See [`crate::segmented::block`].
            #[unsafe(export_name = kernel_name!(segmented block $op $ty))]
            pub unsafe extern "ptx-kernel" fn block(p: Params) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::segmented::block::<Op>(p) }
            }

            /// # Safety
            /// See [`crate::segmented::combine`].
            #[unsafe(export_name = kernel_name!(segmented combine $op $ty))]
            pub unsafe extern "ptx-kernel" fn combine(p: Params) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::segmented::combine::<Op>(p) }
            }

            /// # Safety
            /// See [`crate::segmented::rows`].
            #[unsafe(export_name = kernel_name!(segmented rows $op $ty))]
            pub unsafe extern "ptx-kernel" fn rows(p: Params) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::segmented::rows::<Op>(p) }
            }
        }
    )*};
}

/// Exports the reproducible sum's kernels of each float type: `repro_chunks_<type>` and
/// `repro_combine_<type>`, and the per-segment `repro_segment_{warp,block,chunks,combine}_<type>`.
macro_rules! repro_kernels {
    ($($ty:ident),* $(,)?) => {$(
        mod ${concat(sum_, $ty)} {
            use super::*;
            use crate::reproducible::ReproElement;
            type E = elem::$ty;
            type Params = reduce_contract::params::ReproParams<E, <E as ReproElement>::Acc, <E as ReproElement>::Out>;

            /// # Safety
            /// See [`crate::reproducible::chunks`].
            #[unsafe(export_name = kernel_name!(repro chunks $ty))]
            pub unsafe extern "ptx-kernel" fn chunks(p: Params) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::reproducible::chunks::<E>(p.input, p.n, p.partials, p.prefetch != 0) }
            }

            /// # Safety
            /// See [`crate::reproducible::combine`].
            #[unsafe(export_name = kernel_name!(repro combine $ty))]
            pub unsafe extern "ptx-kernel" fn combine(p: Params) {
                // SAFETY: the host passes valid buffers and the shared memory (launch contract).
                unsafe { crate::reproducible::combine::<E>(p.partials, p.count, p.out) }
            }

            /// # Safety
            /// See [`crate::reproducible::segments_warp`].
            #[unsafe(export_name = kernel_name!(repro segment_warp $ty))]
            pub unsafe extern "ptx-kernel" fn segment_warp(p: crate::reproducible::SegmentParams<E>) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::reproducible::segments_warp::<E>(p) }
            }

            /// # Safety
            /// See [`crate::reproducible::segments_rows`].
            #[unsafe(export_name = kernel_name!(repro segment_rows $ty))]
            pub unsafe extern "ptx-kernel" fn segment_rows(p: crate::reproducible::SegmentParams<E>) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::reproducible::segments_rows::<E>(p) }
            }

            /// # Safety
            /// See [`crate::reproducible::segments_block`].
            #[unsafe(export_name = kernel_name!(repro segment_block $ty))]
            pub unsafe extern "ptx-kernel" fn segment_block(p: crate::reproducible::SegmentParams<E>) {
                // SAFETY: the host passes valid buffers and the shared memory (launch contract).
                unsafe { crate::reproducible::segments_block::<E>(p) }
            }

            /// # Safety
            /// See [`crate::reproducible::segments_chunks`].
            #[unsafe(export_name = kernel_name!(repro segment_chunks $ty))]
            pub unsafe extern "ptx-kernel" fn segment_chunks(p: crate::reproducible::SegmentParams<E>) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::reproducible::segments_chunks::<E>(p) }
            }

            /// # Safety
            /// See [`crate::reproducible::segments_combine`].
            #[unsafe(export_name = kernel_name!(repro segment_combine $ty))]
            pub unsafe extern "ptx-kernel" fn segment_combine(p: crate::reproducible::SegmentParams<E>) {
                // SAFETY: the host passes valid buffers and the shared memory (launch contract).
                unsafe { crate::reproducible::segments_combine::<E>(p) }
            }
        }
    )*};
}

/// The softmax types as `softmax <type>` pairs for [`segmented_kernels`].
macro_rules! softmax_kernels {
    ($($ty:ident),* $(,)?) => {
        segmented_kernels!($(softmax $ty),*);
    };
}

mod segmented {
    use super::*;
    reduce_contract::reduce_pairs!(segmented_kernels);
    reduce_contract::softmax_types!(softmax_kernels);
}

mod repro {
    use super::*;
    reduce_contract::repro_elems!(repro_kernels);
}

/// Exports the seed's teaching kernels as `seed_v0` … `seed_v5`; each writes one partial per block.
macro_rules! seed_kernels {
    ($($version:ident),*) => {$(
        /// # Safety
        /// See the body in [`crate::seed`].
        #[unsafe(export_name = kernel_name!(seed $version))]
        pub unsafe extern "ptx-kernel" fn $version(p: reduce_contract::params::ReduceParams<f32, f32>) {
            // SAFETY: the host passes valid buffers (reduce-host's launch contract).
            unsafe { crate::seed::$version(p.input, p.n, p.partials) }
        }
    )*};
}

mod seed {
    use super::*;
    seed_kernels!(v0, v1, v2, v3, v4, v5);
}

/// The device predicate of a kernel-name predicate.
macro_rules! predicate {
    (gt $t:ty, $x:expr) => {
        <crate::select::GreaterThan<$t> as crate::select::Predicate<$t>>::new($x)
    };
    (lt $t:ty, $x:expr) => {
        <crate::select::LessThan<$t> as crate::select::Predicate<$t>>::new($x)
    };
    (nonzero $t:ty, $x:expr) => {
        <crate::select::NonZero as crate::select::Predicate<$t>>::new($x)
    };
    (finite $t:ty, $x:expr) => {
        <crate::select::IsFinite as crate::select::Predicate<$t>>::new($x)
    };
}

/// Exports the compaction kernels of each `(predicate, type)` pair: `select_unordered_<pred>_<type>` and
/// `select_stable_<pred>_<type>`.
macro_rules! select_kernels {
    ($($pred:ident $ty:ident),* $(,)?) => {$(
        mod ${concat($pred, _, $ty)} {
            use super::*;
            use crate::select::*;
            type Params = reduce_contract::params::SelectParams<elem::$ty>;

            /// # Safety
            /// See [`crate::select::unordered`].
            #[unsafe(export_name = kernel_name!(select unordered $pred $ty))]
            pub unsafe extern "ptx-kernel" fn unordered(p: Params) {
                let sel = If(predicate!($pred elem::$ty, p.threshold));
                const V: usize = reduce_contract::layout::stable_vectors(size_of::<elem::$ty>());
                // SAFETY: the host passes valid buffers, a zeroed count, and sizes the grid to the tiles
                // (launch contract).
                unsafe {
                    crate::select::unordered::<_, _, V>(p.input, p.n, sel, p.out, p.count, p.states)
                }
            }

            /// # Safety
            /// See [`crate::select::stable`].
            #[unsafe(export_name = kernel_name!(select stable $pred $ty))]
            pub unsafe extern "ptx-kernel" fn stable(p: Params) {
                let sel = If(predicate!($pred elem::$ty, p.threshold));
                const V: usize = reduce_contract::layout::stable_vectors(size_of::<elem::$ty>());
                // SAFETY: the host passes valid buffers and sizes the grid to the tiles (launch contract).
                unsafe { crate::select::stable::<_, _, V>(p.input, p.n, sel, p.out, p.count, p.states) }
            }
        }
    )*};
}

/// Exports stable compaction by a byte mask of each type: `select_flagged_<type>`.
macro_rules! flagged_kernels {
    ($($ty:ident),* $(,)?) => {$(
        /// Stable compaction by a byte mask.
        ///
        /// # Safety
        /// See [`crate::select::stable`]; `flags` valid for `n` reads.
        #[unsafe(export_name = kernel_name!(select_flagged $ty))]
        pub unsafe extern "ptx-kernel" fn ${concat(flagged_, $ty)}(
            p: reduce_contract::params::SelectParams<elem::$ty>,
        ) {
            let sel = crate::select::Flagged(p.flags);
            const V: usize = reduce_contract::layout::stable_vectors(size_of::<elem::$ty>());
            // SAFETY: the host passes valid buffers and sizes the grid to the tiles (launch contract).
            unsafe { crate::select::stable::<_, _, V>(p.input, p.n, sel, p.out, p.count, p.states) }
        }
    )*};
}

mod select {
    use super::*;
    reduce_contract::select_predicates!(select_kernels);

    reduce_contract::select_flagged_types!(flagged_kernels);
}

/// The statistics' kernels (`reduce_contract::stats`), exported the way a user's operators are, for every
/// float element type: `reduce_partials_var_mean_f32`, …, `segmented_rows_logsumexp_bf16`.
macro_rules! statistic_kernels {
    ($($word:ident = $op:ident;)*) => {
        mod stats {
            use reduce_contract::stats::*;
            crate::export_reduce! {
                $($word = $op<_>; f32, f64, f16, bf16;)*
            }
        }
    };
}
reduce_contract::statistics!(statistic_kernels);

/// One exported kernel per top-k pass of element type `$ty`, each calling `crate::topk::<pass>` once the
/// pass before it has finished.
macro_rules! topk_passes {
    ($ty:ident: $($pass:ident)*) => {$(
        #[unsafe(export_name = kernel_name!(topk $pass $ty))]
        pub unsafe extern "ptx-kernel" fn $pass(p: Params) {
            // Each pass reads what the one before wrote: the host may launch it before that one ends
            // (programmatic dependent launch), so it waits here, and lets the next one launch early.
            crate::arch::launch_dependents();
            crate::arch::wait_for_primary();
            unsafe { crate::topk::$pass(p) }
        }
    )*};
}

macro_rules! topk_kernels {
    ($($ty:ident),* $(,)?) => {$(
        mod ${concat(topk_, $ty)} {
            use super::*;
            type Params = reduce_contract::params::TopKParams<elem::$ty>;
            topk_passes!($ty: sample sieve histogram pick split level finish fill sort sort_block merge gather);
        }
    )*};
}

mod topk {
    use super::*;
    reduce_contract::topk_types!(topk_kernels);
}

/// One exported kernel per pass of the per-segment top-k of element type `$ty`, and its `unpair`. `merge`
/// waits for `select` (programmatic dependent launch, as the device-wide passes).
macro_rules! row_topk_kernels {
    ($($ty:ident),* $(,)?) => {$(
        mod ${concat(row_topk_, $ty)} {
            use super::*;
            type Params = reduce_contract::params::RowTopKParams<elem::$ty>;
            #[unsafe(export_name = kernel_name!(row_topk select $ty))]
            pub unsafe extern "ptx-kernel" fn select(p: Params) {
                crate::arch::launch_dependents();
                crate::arch::wait_for_primary();
                unsafe { crate::row_topk::select(p) }
            }
            #[unsafe(export_name = kernel_name!(row_topk merge $ty))]
            pub unsafe extern "ptx-kernel" fn merge(p: Params) {
                crate::arch::wait_for_primary();
                unsafe { crate::row_topk::merge(p) }
            }
            #[unsafe(export_name = kernel_name!(row_topk unpair $ty))]
            pub unsafe extern "ptx-kernel" fn unpair(
                p: reduce_contract::params::UnpairParams<elem::$ty>,
            ) {
                // SAFETY: the host passes `count` pairs and outputs for `count` writes (`values_out`
                // may be null: indices only).
                unsafe { crate::row_topk::unpair(p) }
            }
        }
    )*};
}

mod row_topk {
    use super::*;
    reduce_contract::topk_types!(row_topk_kernels);
}
