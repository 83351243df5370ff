//! Which kernels exist, what they are called, and which module each is loaded in.
//!
//! A module is the unit the host loads, on first use: the kernels of one `(operator, element)` pair, one
//! histogram sample type, one compaction predicate, the reproducible sum of one float type, the seed
//! chapter, or the test-only kernels. A program that only sums f32 therefore loads (and, without a
//! matching cubin, JIT-compiles) four kernels.
//!
//! Identity is typed ([`kernel`]): each kind of kernel is a type that names its module, its slot and the
//! parameter struct it takes, and the host launches through `K: Takes<P>`. Module indices
//! ([`module`]), slots and names are derived from the keys' declaration order and words ([`keys`]),
//! never numbered by hand.
//!
//! The device generates its entries from the lists ([`reduce_pairs!`](crate::reduce_pairs),
//! [`histogram_samples!`](crate::histogram_samples), [`select_predicates!`](crate::select_predicates),
//! [`select_flagged_types!`](crate::select_flagged_types),
//! [`repro_elems!`](crate::repro_elems), [`topk_types!`](crate::topk_types), [`softmax_types!`](crate::softmax_types),
//! [`tile_test_primitives!`](crate::tile_test_primitives)) and names them with
//! [`kernel_name!`](crate::kernel_name); the host's build script splits the PTX by [`Module::all`] and
//! refuses a build where an entry is in no module or a module's kernel is missing, so the two sides cannot
//! drift.
pub mod kernel;
pub mod keys;
pub mod module;
pub mod name;

pub use kernel::{
    Family, HistogramBytes, HistogramKernel, Kernel, PerSegment, ReduceKernel, Reduction,
    ReproKernel, ReproSegments, ReproSegmentsKernel, RowTopKKernel, SeedKernel, SegmentedKernel,
    SelectBy, SelectFlagged, SelectKernel, Spin, StatKernel, StatPass, SumAtomic, Takes,
    TestKernel, TopKKernel, Unpair, every_kernel,
};
pub use keys::{
    Counter, Elem, FloatElem, Key, Op, Place, Pred, ReducePass, ReproPass, ReproSegmentsPass,
    RowTopKPass, Sample, SeedVersion, SegmentedPass, SelectPass, Stat, TopKPass,
};
pub use module::Module;
pub use name::Name;

/// The most registers a thread of kernel `entry` may use in the PTX built for `ptx_arch`, for the kernels
/// that run faster with more blocks resident than ptxas's own choice leaves room for; `None` for the rest.
/// By name, so that it covers the kernels a user's crate exports with `export_select!` as well as this
/// library's: every compaction (`select_stable_*`, `select_unordered_*`, `select_flagged_*`: one tile
/// kernel) gets [`crate::layout::STABLE_REGISTERS`]. The kernel build (`reduce-builder`) writes it into the PTX as the
/// entry's `.maxnreg`.
///
/// Only the sm_90 PTX is capped (it makes the cubins of Hopper and Blackwell), where it was measured: an
/// sm_75 SM holds 1024 threads, so two blocks of 512 are all it takes at any register count, and the sm_80
/// PTX also runs on sm_86/sm_89, whose ~100 KiB of shared memory holds two blocks' staging, not three; there
/// the cap would only add spills.
pub fn register_cap(entry: &str, ptx_arch: u32) -> Option<u32> {
    if ptx_arch != 90 {
        return None;
    }
    let tiled = entry.strip_prefix("select_").is_some_and(|rest| {
        [SelectPass::Stable, SelectPass::Unordered]
            .iter()
            .any(|pass| {
                rest.strip_prefix(pass.word())
                    .is_some_and(|r| r.starts_with('_'))
            })
    });
    (tiled || entry.starts_with("select_flagged_")).then_some(crate::layout::STABLE_REGISTERS)
}

/// The exported symbol of a kernel, as a string literal: `kernels-gpu` puts it in `export_name`, and the
/// tables of this module NUL-terminate it for the driver. The one place kernel names are spelled.
#[macro_export]
macro_rules! kernel_name {
    (reduce $kind:ident $op:ident $ty:ident) => {
        concat!(
            "reduce_",
            stringify!($kind),
            "_",
            stringify!($op),
            "_",
            stringify!($ty)
        )
    };
    (histogram $kind:ident $sample:ident $counter:ident) => {
        concat!(
            "histogram_",
            stringify!($kind),
            "_",
            stringify!($sample),
            "_",
            stringify!($counter)
        )
    };
    (histogram_bytes $counter:ident) => {
        concat!("histogram_bytes_", stringify!($counter))
    };
    (select $kind:ident $pred:ident $ty:ident) => {
        concat!(
            "select_",
            stringify!($kind),
            "_",
            stringify!($pred),
            "_",
            stringify!($ty)
        )
    };
    (segmented $kind:ident $op:ident $ty:ident) => {
        concat!(
            "segmented_",
            stringify!($kind),
            "_",
            stringify!($op),
            "_",
            stringify!($ty)
        )
    };
    (topk $pass:ident $ty:ident) => {
        concat!("topk_", stringify!($pass), "_", stringify!($ty))
    };
    (row_topk $pass:ident $ty:ident) => {
        concat!("row_topk_", stringify!($pass), "_", stringify!($ty))
    };
    (select_flagged $ty:ident) => {
        concat!("select_flagged_", stringify!($ty))
    };
    (seed $version:ident) => {
        concat!("seed_", stringify!($version))
    };
    (repro $kind:ident $ty:ident) => {
        concat!("repro_", stringify!($kind), "_", stringify!($ty))
    };
    (util $name:ident) => {
        concat!("util_", stringify!($name))
    };
    (test $name:ident) => {
        concat!("test_", stringify!($name))
    };
    (tile_test $prim:ident $width:literal) => {
        concat!("test_tile_", stringify!($prim), "_", stringify!($width))
    };
}

/// Calls `$cb! { op elem, ... }` with every `(operator, element)` pair that has reduction kernels, grouped
/// by element in [`Elem`] order, operators in [`Op`] order (the order of [`Module::index`]).
///
/// A new built-in operator, for every type, device-wide and per segment, is five places: its [`Op`] key
/// (`keys.rs`); its pairs here; its [`ReduceOp`](crate::op::ReduceOp) and its word in
/// [`builtin`](crate::builtin) (`builtin::by_word`), from which `kernels-gpu`'s `entry.rs` generates its
/// kernels (running it as it runs a user's operator); its method on `DeviceReduce` (`reduce.rs`); and its
/// method on `DeviceSegmentedReduce` (`segmented.rs`). The module tables, kernel names, slots and the
/// host's launch types follow from the key. (An operator over a new class of elements also adds a bound in
/// `reduce-host`'s `element.rs`; one that needs device hooks, as argmax does, a `DeviceOp` impl in
/// `kernels-gpu`'s `op.rs` and its word in `entry.rs`'s `op_type!`.)
#[macro_export]
macro_rules! reduce_pairs {
    ($cb:ident) => {
        $cb! {
            sum f32, max f32, min f32, argmax f32, argmin f32,
            sum f64, max f64, min f64, argmax f64, argmin f64,
            sum f16, max f16, min f16, argmax f16, argmin f16,
            sum bf16, max bf16, min bf16, argmax bf16, argmin bf16,
            sum i32, max i32, min i32, argmax i32, argmin i32,
            sum u32, max u32, min u32, argmax u32, argmin u32,
            sum i64, max i64, min i64, argmax i64, argmin i64,
            sum u64, max u64, min u64, argmax u64, argmin u64,
            sum u8, max u8, min u8, argmax u8, argmin u8,
        }
    };
}

/// Calls `$cb! { elem acc, ... }` with every element type and the type its sum accumulates in, both as
/// kernel names spell them. The one table of sum accumulators: the device's `Sum` and the host's
/// `SumElement::Acc` are both generated from it, so the bytes a sum kernel writes are the bytes the host
/// reads back. f32 for f32 (as CUB) and for f16/bf16 (widened exactly), f64 for f64, and 64-bit integers,
/// wrapping, for the integers.
#[macro_export]
macro_rules! sum_accumulators {
    ($cb:ident) => {
        $cb! { f32 f32, f64 f64, f16 f32, bf16 f32, i32 i64, u32 u64, i64 i64, u64 u64, u8 u64 }
    };
}

/// Calls `$cb! { ty, ... }` with every element type of the fused softmax statistics, in [`Sample`] order
/// (the float types that models keep activations in). Each has the four segmented kernels
/// ([`SegmentedPass`] order), named with the operator `softmax`.
#[macro_export]
macro_rules! softmax_types {
    ($cb:ident) => {
        $cb! { f32, f16, bf16 }
    };
}

/// Calls `$cb! { elem, ... }` with every element type of the reproducible sum, in [`Elem`] order (the
/// floats, which lead it). Each has a `chunks` and a `combine` kernel ([`ReproPass`]).
#[macro_export]
macro_rules! repro_elems {
    ($cb:ident) => {
        $cb! { f32, f64, f16, bf16 }
    };
}

/// Calls `$cb! { sample, ... }` with every sample type of the even-bin histogram, in [`Sample`] order. Each
/// has a `shared` and a `global` kernel per counter type (`u32`, `u64`).
#[macro_export]
macro_rules! histogram_samples {
    ($cb:ident) => {
        $cb! { f32, f16, bf16 }
    };
}

/// Calls `$cb! { pred elem, ... }` with every compaction predicate and element, in [`Module::Select`]
/// order: `gt`, `lt` and `nonzero` of every element type, then `finite` of the floats. Each has an
/// `unordered` and a `stable` kernel.
#[macro_export]
macro_rules! select_predicates {
    ($cb:ident) => {
        $cb! {
            gt f32, lt f32, nonzero f32, gt f64, lt f64, nonzero f64,
            gt f16, lt f16, nonzero f16, gt bf16, lt bf16, nonzero bf16,
            gt i32, lt i32, nonzero i32, gt u32, lt u32, nonzero u32,
            gt i64, lt i64, nonzero i64, gt u64, lt u64, nonzero u64,
            gt u8, lt u8, nonzero u8,
            finite f32, finite f64, finite f16, finite bf16,
        }
    };
}

/// Calls `$cb! { elem, ... }` with every element type of the device-wide top-k ([`Elem`] order): the
/// [`TopKPass`] kernels each.
#[macro_export]
macro_rules! topk_types {
    ($cb:ident) => {
        $cb! { f32, f64, f16, bf16, i32, u32, i64, u64, u8 }
    };
}

/// Calls `$cb! { elem, ... }` with every element type of compaction by a byte mask ([`Elem`] order): one
/// `select_flagged_<elem>` kernel each.
#[macro_export]
macro_rules! select_flagged_types {
    ($cb:ident) => {
        $cb! { f32, f64, f16, bf16, i32, u32, i64, u64, u8 }
    };
}

/// Calls `$cb! { prim, ... }` with every tile primitive that has a test kernel per tile width (32, 16, 8,
/// 4), named by [`kernel_name!`]`(tile_test prim width)`.
#[macro_export]
macro_rules! tile_test_primitives {
    ($cb:ident) => {
        $cb! {
            ranks, shfl, shfl_up, shfl_down, shfl_xor, ballot, any, all, sync,
            reduce_sum_u32, reduce_max_u32, reduce_sum_f32, reduce_max_f32,
            all_reduce_sum_u32, all_reduce_max_u32, all_reduce_sum_f32, all_reduce_max_f32,
            inclusive_scan_sum_u32, exclusive_scan_sum_u32, inclusive_scan_sum_f32, exclusive_scan_sum_f32,
            inclusive_scan_max_f32,
        }
    };
}
