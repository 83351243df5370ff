//! The exported kernels. Each is a one-line instance of a generic body; the names are what the host looks
//! up, `<body>_<op>_<type>`, for example `reduce_partials_argmax_f32`.
//!
//! Parameters: `input: *const T, n: u64` for the data; accumulators are `Op::Acc` (see [`crate::op`]).
//!
//! Types: `f32 f64 f16 bf16 i32 u32 i64 u64 u8`, every operator each. Sums accumulate in f32 for f16/bf16 and
//! in 64-bit integers (wrapping) for the integers; max/min/argmax/argmin keep the element type.

/// Exports the device-wide reduction kernels of one `(op, type)` pair under `$tag`.
macro_rules! reduce_kernels {
    ($($tag:ident: $op:ty;)*) => {$(
        #[allow(non_snake_case)]
        mod $tag {
            use crate::op::*;
            type Op = $op;
            type In = <Op as ReduceOp>::In;
            type Acc = <Op as ReduceOp>::Acc;

            /// # Safety
            /// See [`crate::device::partials`].
            #[unsafe(export_name = concat!("reduce_partials_", stringify!($tag)))]
            pub unsafe extern "ptx-kernel" fn partials(input: *const In, n: u64, partials: *mut Acc) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::device::partials::<Op>(input, n, partials) }
            }

            /// # Safety
            /// See [`crate::device::finalize`].
            #[unsafe(export_name = concat!("reduce_finalize_", stringify!($tag)))]
            pub unsafe extern "ptx-kernel" fn finalize(partials: *const Acc, count: u64, out: *mut Acc) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::device::finalize::<Op>(partials, count, out) }
            }

            /// # Safety
            /// See [`crate::device::last_block`].
            #[unsafe(export_name = concat!("reduce_last_block_", stringify!($tag)))]
            pub unsafe extern "ptx-kernel" fn last_block(
                input: *const In, n: u64, partials: *mut Acc, ticket: *mut u32, out: *mut Acc,
            ) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::device::last_block::<Op>(input, n, partials, ticket, out) }
            }
        }
    )*};
}

/// Exports the atomic single-pass kernel for sums of one type under `$tag`.
macro_rules! atomic_kernels {
    ($($tag:ident: $op:ty;)*) => {$(
        #[allow(non_snake_case)]
        mod $tag {
            use crate::op::*;
            type Op = $op;

            /// # Safety
            /// See [`crate::device::atomic`].
            #[unsafe(export_name = concat!("reduce_atomic_", stringify!($tag)))]
            pub unsafe extern "ptx-kernel" fn atomic(
                input: *const <Op as ReduceOp>::In, n: u64, out: *mut <Op as ReduceOp>::Acc,
            ) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::device::atomic::<Op>(input, n, out) }
            }
        }
    )*};
}

mod reduce {
    reduce_kernels! {
        sum_f32: Sum<f32>;
        max_f32: Max<f32>;
        min_f32: Min<f32>;
        argmax_f32: ArgMax<f32>;
        argmin_f32: ArgMin<f32>;
        sum_f64: Sum<f64>;
        max_f64: Max<f64>;
        min_f64: Min<f64>;
        argmax_f64: ArgMax<f64>;
        argmin_f64: ArgMin<f64>;
        sum_f16: Sum<crate::half::F16>;
        max_f16: Max<crate::half::F16>;
        min_f16: Min<crate::half::F16>;
        argmax_f16: ArgMax<crate::half::F16>;
        argmin_f16: ArgMin<crate::half::F16>;
        sum_bf16: Sum<crate::half::BF16>;
        max_bf16: Max<crate::half::BF16>;
        min_bf16: Min<crate::half::BF16>;
        argmax_bf16: ArgMax<crate::half::BF16>;
        argmin_bf16: ArgMin<crate::half::BF16>;
        sum_i32: Sum<i32>;
        max_i32: Max<i32>;
        min_i32: Min<i32>;
        argmax_i32: ArgMax<i32>;
        argmin_i32: ArgMin<i32>;
        sum_u32: Sum<u32>;
        max_u32: Max<u32>;
        min_u32: Min<u32>;
        argmax_u32: ArgMax<u32>;
        argmin_u32: ArgMin<u32>;
        sum_i64: Sum<i64>;
        max_i64: Max<i64>;
        min_i64: Min<i64>;
        argmax_i64: ArgMax<i64>;
        argmin_i64: ArgMin<i64>;
        sum_u64: Sum<u64>;
        max_u64: Max<u64>;
        min_u64: Min<u64>;
        argmax_u64: ArgMax<u64>;
        argmin_u64: ArgMin<u64>;
        sum_u8: Sum<u8>;
        max_u8: Max<u8>;
        min_u8: Min<u8>;
        argmax_u8: ArgMax<u8>;
        argmin_u8: ArgMin<u8>;
    }
}

mod atomic {
    atomic_kernels! {
        sum_f32: Sum<f32>;
        sum_f64: Sum<f64>;
        sum_f16: Sum<crate::half::F16>;
        sum_bf16: Sum<crate::half::BF16>;
        sum_i32: Sum<i32>;
        sum_u32: Sum<u32>;
        sum_i64: Sum<i64>;
        sum_u64: Sum<u64>;
        sum_u8: Sum<u8>;
    }
}

/// Exports the seed's teaching kernels as `seed_v0` … `seed_v5`.
macro_rules! seed_kernels {
    ($($name:ident),*) => {$(
        /// # Safety
        /// See the body in [`crate::seed`].
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn ${concat(seed_, $name)}(input: *const f32, n: u64, out: *mut f32) {
            // SAFETY: the host passes valid buffers (reduce-host's launch contract).
            unsafe { crate::seed::$name(input, n, out) }
        }
    )*};
}

mod seed {
    seed_kernels!(v0, v1, v2, v3, v4, v5);
}

/// Exports the compaction kernels of one `(predicate, type)` pair under `$tag`:
/// `select_unordered_<tag>(input, n, threshold, out, count)` and
/// `select_stable_<tag>(input, n, threshold, out, count, states)`.
macro_rules! select_kernels {
    ($($tag:ident: $pred:ty, $t:ty;)*) => {$(
        #[allow(non_snake_case)]
        mod $tag {
            use crate::select::*;
            type T = $t;

            /// # Safety
            /// See [`crate::select::unordered`].
            #[unsafe(export_name = concat!("select_unordered_", stringify!($tag)))]
            pub unsafe extern "ptx-kernel" fn unordered(input: *const T, n: u64, threshold: T, out: *mut T, count: *mut u64) {
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::select::unordered::<_, _, UNORDERED_VECTORS>(input, n, If(<$pred>::new(threshold)), out, count) }
            }

            /// # Safety
            /// See [`crate::select::stable`].
            #[unsafe(export_name = concat!("select_stable_", stringify!($tag)))]
            pub unsafe extern "ptx-kernel" fn stable(
                input: *const T, n: u64, threshold: T, out: *mut T, count: *mut u64, states: *mut u64,
            ) {
                // SAFETY: the host passes valid buffers and sizes the grid to the tiles (launch contract).
                unsafe { crate::select::stable::<_, _, STABLE_VECTORS>(input, n, If(<$pred>::new(threshold)), out, count, states) }
            }
        }
    )*};
}

/// Exports `select_flagged_<type>(input, flags, n, out, count, states)`: stable compaction by a byte mask.
macro_rules! flagged_kernels {
    ($($t:ident),*) => {$(
        /// # Safety
        /// See [`crate::select::stable`]; `flags` valid for `n` reads.
        #[unsafe(export_name = concat!("select_flagged_", stringify!($t)))]
        pub unsafe extern "ptx-kernel" fn $t(
            input: *const $t, flags: *const u8, n: u64, out: *mut $t, count: *mut u64, states: *mut u64,
        ) {
            // SAFETY: the host passes valid buffers and sizes the grid to the tiles (launch contract).
            unsafe { crate::select::stable::<_, _, { crate::select::STABLE_VECTORS }>(input, n, crate::select::Flagged(flags), out, count, states) }
        }
    )*};
}

mod select {
    select_kernels! {
        gt_f32: GreaterThan<f32>, f32;
        lt_f32: LessThan<f32>, f32;
        nonzero_f32: NonZero, f32;
        finite_f32: IsFinite, f32;
    }
    flagged_kernels!(f32);
}
