//! Device code of the `reduce-host` library, compiled to PTX by rustc's `nvptx64-nvidia-cuda` backend.
//!
//! The layering follows CUB, each layer using only the ones below it:
//!
//! | module | what it holds |
//! |---|---|
//! | [`arch`] | thread/block/grid indices, barriers, dynamic shared memory, fences, atomics, vector loads |
//! | [`shuffle`] | `shfl.sync` on words, and [`Shuffle`](shuffle::Shuffle): any value crossing lanes word by word |
//! | [`half`] | f16/bf16 as bit patterns with exact widening to f32 |
//! | [`op`] | the reduction operators (`Sum`, `Max`, `Min`, `ArgMax`, `ArgMin`) as types |
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
//! | [`select`] | stream compaction: unordered (warp-aggregated atomics) and stable (look-back) |
//! | [`seed`] | the teaching kernels v0–v5 of the reduction chapter |
//! | [`util`] | the spin kernel benchmarks queue ahead of timed work |
//! | [`tile_tests`] | one-primitive kernels for the host's tile tests |
//! | [`entry`] | the exported kernels: thin monomorphised instances of the bodies above |
//!
//! Every kernel assumes `blockDim.x` is a multiple of 32 and at most 1024, `blockDim.y = blockDim.z = 1`,
//! and at least [`SMEM_BYTES`] bytes of dynamic shared memory; the host crate guarantees all three.
#![no_std]
#![feature(
    abi_ptx,
    float_minimum_maximum,
    macro_metavar_expr_concat,
    core_intrinsics,
    asm_experimental_arch,
    stdarch_nvptx,
    gpu_intrinsics,
    gpu_launch_sized_workgroup_mem
)]
#![allow(internal_features)]
#![deny(unsafe_op_in_unsafe_fn)]

/// Runs `$body` once per listed constant, bound to `$i`: a loop unrolled in the source. LLVM leaves long
/// bodies rolled (64 lanes of an argmax run on u8, 32 of an f16 max with its conversions), and a rolled loop
/// that indexes a local array puts the array in local memory.
macro_rules! unroll {
    ($i:ident in [$($v:literal),*] $body:block) => {$({
        const $i: usize = $v;
        $body
    })*};
}

/// Runs `$body` for every constant `$i` in 0..64 below `$len` (a constant after inlining), unrolled.
macro_rules! each_index {
    ($i:ident < $len:expr, $body:block) => {
        unroll!($i in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
            25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50,
            51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63] {
            if $i < $len $body
        })
    };
}

/// Pairwise reduction of `$tree[0..$len]` into `$tree[0]` with `$f` ($len a power of two ≤ 64), unrolled.
macro_rules! pairwise_tree {
    ($tree:ident, $len:expr, $f:expr) => {
        unroll!(W in [32, 16, 8, 4, 2, 1] {
            if W < $len {
                each_index!(J < W, {
                    $tree[J] = $f($tree[J], $tree[J + W]);
                });
            }
        });
    };
}

pub mod arch;
pub mod block;
pub mod block_scan;
pub mod device;
pub mod entry;
pub mod half;
pub mod histogram;
pub mod lookback;
pub mod op;
pub mod reproducible;
pub mod seed;
pub mod segmented;
pub mod select;
pub mod shuffle;
pub mod softmax;
pub mod thread;
pub mod tile;
pub mod tile_tests;
pub mod util;
pub mod warp;

/// Dynamic shared memory every reduction kernel needs: 32 warp slots of the largest accumulator (16 bytes)
/// plus room for a block-wide flag. The host launches every kernel with at least this much.
pub use reduce_contract::layout::SMEM_BYTES;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch failure instead of a wrong result.
    unsafe { core::arch::nvptx::trap() }
}
