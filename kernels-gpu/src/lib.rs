//! Device code of the `reduce-host` library, compiled to PTX by rustc's `nvptx64-nvidia-cuda` backend.
//!
//! The layering follows CUB, each layer using only the ones below it:
//!
//! | module | what it holds |
//! |---|---|
//! | [`arch`] | thread/block/grid indices, barriers, dynamic shared memory, fences, atomics, vector loads |
//! | [`shuffle`] | `shfl.sync` on words, and [`Shuffle`](shuffle::Shuffle): any value crossing lanes word by word |
//! | [`half`] | f16/bf16 as bit patterns with exact widening to f32 |
//! | [`custom`] | a user's [`ReduceOp`] in the generic kernels, and [`export_reduce!`], which exports them |
//! | [`op`] | [`DeviceOp`](op::DeviceOp), what the bodies run: the contract's built-in `ReduceOp`s (`Sum`, `Max`, `Min`, `ArgMax`, `ArgMin`) with their device hooks |
//! | [`warp`] | votes, lane masks and the warp reduction over any operator |
//! | [`tile`] | cooperative-groups style tiles of 32/16/8/4 lanes: shuffles, votes, reduce, scans |
//! | [`block`] | block reduction: warp shuffle → shared memory → warp shuffle |
//! | [`block_scan`] | block exclusive scan: tile scans → warp totals in shared memory → tile scan |
//! | [`lookback`] | decoupled look-back: the device-wide scan of per-tile counts in a single pass |
//! | [`thread`] | one thread's grid-stride pass over a slice with 16-byte loads and unaligned head/tail |
//! | [`device`] | device-wide kernel bodies: partials, the three ways to combine them |
//! | [`softmax`] | the online-softmax statistics `(max, Σ exp(x − max))` as a reduction operator |
//! | [`segmented`] | per-segment (row, offset-range) reductions: tile, block and combine kernels |
//! | [`reproducible`] | the reproducible sum: fixed chunks per warp, a fixed combine, f64/compensated accumulators |
//! | [`histogram`] | shared-memory privatised histograms: bin mappings, counting strategies, their kernels |
//! | [`select`] | stream compaction in tiles: unordered (one atomic add a tile) and stable (look-back) |
//! | [`topk`] | device-wide top-k: radix-select passes over composite keys, the filter, block sort and merges |
//! | [`row_topk`] | per-segment top-k: a block's threshold filter into shared candidates, radix-select compactions, bitonic sort |
//! | [`seed`] | the teaching kernels v0–v5 of the reduction chapter |
//! | [`util`] | the spin kernel benchmarks queue ahead of timed work |
//! | [`tile_tests`] | one-primitive kernels for the host's tile tests |
//! | [`entry`] | the exported kernels: thin monomorphised instances of the bodies above |
//!
//! Every kernel assumes `blockDim.x` is a multiple of 32 and at most 1024 and `blockDim.y = blockDim.z = 1`,
//! and every kernel that uses dynamic shared memory at least [`SMEM_BYTES`] bytes of it (or what its family
//! states); the host crate guarantees these.
#![no_std]
#![feature(
    float_minimum_maximum,
    core_intrinsics,
    asm_experimental_arch,
    stdarch_nvptx,
    gpu_intrinsics,
    gpu_launch_sized_workgroup_mem,
    stmt_expr_attributes
)]
// The entries (the `ptx-kernel` ABI, and names joined by `${concat}`) are only there with `builtin`.
#![cfg_attr(feature = "builtin", feature(abi_ptx, macro_metavar_expr_concat))]
#![allow(internal_features)]
#![deny(unsafe_op_in_unsafe_fn)]

// `unroll!`, `each_index!` and `pairwise_tree!`: the source-unrolled loops, shared with the contract's
// default `ReduceOp::fold_run`.
#[macro_use]
extern crate reduce_contract;

pub mod arch;
pub mod bitonic;
pub mod block;
pub mod block_scan;
pub mod custom;
pub mod device;
#[cfg(feature = "builtin")]
pub mod entry;
pub mod half;
pub mod histogram;
pub mod lookback;
pub mod op;
pub mod reproducible;
pub mod row_topk;
pub mod seed;
pub mod segmented;
pub mod select;
pub mod shuffle;
pub mod softmax;
pub mod thread;
pub mod tile;
#[cfg(feature = "builtin")]
pub mod tile_tests;
pub mod topk;
#[cfg(feature = "builtin")]
pub mod util;
pub mod warp;

/// Dynamic shared memory every reduction kernel needs: 32 warp slots of the largest accumulator (16 bytes)
/// plus room for a block-wide flag. The host launches every kernel that uses dynamic shared memory with at
/// least this much (kernels that use none, as some reproducible ones, may get none).
pub use reduce_contract::layout::SMEM_BYTES;

/// The operator a user brings, from the contract shared with the host.
pub use reduce_contract::op::{Element, Float, Pod, ReduceOp, SelectOp};

/// What `export_reduce!` expands to refers to, through this crate (a kernel crate need not depend on
/// `reduce-contract` itself).
#[doc(hidden)]
pub mod __reexport {
    pub use reduce_contract::{layout, op, params};
}

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch failure instead of a wrong result.
    unsafe { core::arch::nvptx::trap() }
}
