//! Device code of the `reduce-host` library, compiled to PTX by rustc's `nvptx64-nvidia-cuda` backend.
//!
//! The layering follows CUB, each layer using only the ones below it:
//!
//! | module | what it holds |
//! |---|---|
//! | [`arch`] | thread/block/grid indices, barriers, dynamic shared memory, fences, atomics, vector loads |
//! | [`warp`] | shuffles, votes and the warp reduction, generic over a [`Shuffle`](warp::Shuffle) value |
//! | [`op`] | the reduction operators (`Sum`, `Max`, `Min`, `ArgMax`, `ArgMin`) as types |
//! | [`tile`] | cooperative-groups style tiles of 32/16/8/4 lanes: shuffles, votes, reduce, scans |
//! | [`block`] | block reduction: warp shuffle → shared memory → warp shuffle |
//! | [`block_scan`] | block exclusive scan: tile scans → warp totals in shared memory → tile scan |
//! | [`lookback`] | decoupled look-back: the device-wide scan of per-tile counts in a single pass |
//! | [`thread`] | one thread's grid-stride pass over a slice with 16-byte loads and unaligned head/tail |
//! | [`device`] | device-wide kernel bodies: partials, the three ways to combine them |
//! | [`select`] | stream compaction: unordered (warp-aggregated atomics) and stable (look-back) |
//! | [`seed`] | the teaching kernels v0–v5 of the reduction chapter |
//! | [`tile_tests`] | one-primitive kernels for the host's tile tests |
//! | [`entry`] | the exported kernels: thin monomorphised instances of the bodies above |
//!
//! Every kernel assumes `blockDim.x` is a multiple of 32 and at most 1024, `blockDim.y = blockDim.z = 1`,
//! and at least [`SMEM_BYTES`] bytes of dynamic shared memory; the host crate guarantees all three.
#![no_std]
#![feature(abi_ptx, macro_metavar_expr_concat, core_intrinsics, asm_experimental_arch, stdarch_nvptx, gpu_intrinsics, gpu_launch_sized_workgroup_mem)]
#![allow(internal_features)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod arch;
pub mod block;
pub mod block_scan;
pub mod device;
pub mod entry;
pub mod half;
pub mod lookback;
pub mod op;
pub mod seed;
pub mod select;
pub mod thread;
pub mod tile;
pub mod tile_tests;
pub mod warp;

/// Dynamic shared memory every reduction kernel needs: 32 warp slots of the largest accumulator (16 bytes)
/// plus room for a block-wide flag. The host launches every kernel with at least this much.
pub const SMEM_BYTES: u32 = 1024;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch failure instead of a wrong result.
    unsafe { core::arch::nvptx::trap() }
}
