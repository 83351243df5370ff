//! Accumulator layouts and the constants both sides size memory, tiles and grids by. Where two constants
//! depend on each other, a `const` assertion here ties them, so a change that breaks the relation does not
//! compile.
use core::mem::size_of;

/// A value with the index it was found at: the accumulator and result of argmax and argmin, the same bytes
/// on the host and the device.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
pub struct Indexed<T> {
    /// The element.
    pub value: T,
    /// Its index in the input slice.
    pub index: u64,
}

#[cfg(feature = "cust")]
// SAFETY: a `repr(C)` pair of device-copyable fields holds no host pointers.
unsafe impl<T: cust_core::DeviceCopy> cust_core::DeviceCopy for Indexed<T> {}

/// Per-segment softmax statistics: the result (and accumulator) of `softmax_stats`. For a row `x`, `max` is
/// its greatest element and `sum_exp` is `Σ exp(xᵢ − max)`, both in f32, so `softmax(x)ᵢ = exp(xᵢ − max) /
/// sum_exp`.
///
/// Special rows: empty gives `{ −∞, 0 }`; a row whose elements are all −∞ gives `{ −∞, len }` (its
/// elements count as equal to the maximum); a NaN anywhere gives `{ NaN, NaN }`; a +∞ gives `max = +∞`
/// and `sum_exp` the number of +∞ elements (the finite ones contribute `exp(−∞) = 0`).
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct SoftmaxStats {
    /// The row's greatest element.
    pub max: f32,
    /// `Σ exp(xᵢ − max)`, at least 1 for a non-empty row without NaN.
    pub sum_exp: f32,
}

impl Default for SoftmaxStats {
    /// The statistics of an empty row: `{ −∞, 0 }`.
    fn default() -> Self {
        SoftmaxStats {
            max: f32::NEG_INFINITY,
            sum_exp: 0.0,
        }
    }
}

#[cfg(feature = "cust")]
// SAFETY: a `repr(C)` pair of f32 holds no host pointers.
unsafe impl cust_core::DeviceCopy for SoftmaxStats {}

/// Threads per block of the segmented block and combine kernels, fixed (not fitted to the device) so that a
/// segment's reduction tree depends only on its length. Argmax, argmin, and the max and min of elements
/// other than f16/bf16, whose bits no tree changes, may run their block kernel with fewer (the host fits
/// them to the device's waves). The tile and rows kernels, whose trees live in one warp, may take any
/// whole number of warps (the host runs 64 or 256).
pub const SEGMENTED_THREADS: u32 = 256;

/// Rows each thread of the rows kernel reduces per trip (rows of one 16-byte chunk and a partial one): all
/// their loads are issued before any is used. The host sizes that launch's grid by it.
pub const LANE_ROWS: u64 = 4;

/// Largest segment, in 16-byte chunks, that one block reduces; longer ones are split across blocks.
pub const SPLIT_ABOVE_CHUNKS: u64 = 1 << 15;

/// Chunks of one block's piece of a split segment (a multiple of [`SEGMENTED_THREADS`]), which the host
/// passes to the kernel: the pieces of every operator whose bits follow the tree (sums) are these. Few
/// long rows of the operators whose bits no tree changes take shorter pieces of any length (the host's
/// `segmented::spread`).
pub const PIECE_CHUNKS: u64 = 1 << 14;

/// Bytes of the largest accumulator any kernel keeps (an `Indexed<f64>` or `Indexed<u64>`): the host's
/// partials buffer holds this much per block, and the block reduction one slot of it per warp.
pub const MAX_ACC_BYTES: usize = 16;

/// Bytes of the largest accumulator a user's operator may have (`kernels-gpu` checks it where it exports
/// the operator's kernels): the host's result slots hold this much, and the kernels' shared memory 32 of them.
pub const MAX_OP_ACC_BYTES: usize = 64;

/// Where, in a reduction kernel's shared memory, the last-block flag lives: past 32 warp slots of the
/// largest accumulator.
pub const LAST_BLOCK_FLAG_OFFSET: usize = 32 * MAX_ACC_BYTES;

/// Dynamic shared memory every reduction kernel is launched with, at least: the warp slots and the flag.
pub const SMEM_BYTES: u32 = 1024;

/// Bytes of one vector load: the kernels read 16 bytes per load wherever the input's alignment allows.
pub const LOAD_BYTES: u64 = 16;

/// Vector loads each thread issues per trip of the reduction and histogram grid-stride loops.
pub const UNROLL: u64 = 4;

/// Dynamic shared memory a block gets without opting in: the ceiling for every launch here.
pub const SHARED_LIMIT: u32 = 48 * 1024;

/// Vectors each thread handles per tile of the compaction kernels (stable and unordered): the host sizes the
/// grid (one block per tile) and the staging memory with it.
pub const STABLE_VECTORS: usize = 4;

/// Vectors each thread handles per tile of the compaction (stable or unordered) of `size`-byte elements:
/// [`STABLE_VECTORS`], fewer for 16- and 8-bit elements, so a thread holds at most 16 elements (more spill
/// to local memory) — the f32 kernel's 4 vectors of 4.
pub const fn stable_vectors(size: usize) -> usize {
    let fit = 16 * size / LOAD_BYTES as usize;
    let fit = if fit == 0 { 1 } else { fit };
    if fit < STABLE_VECTORS {
        fit
    } else {
        STABLE_VECTORS
    }
}

/// Registers a thread of a compaction kernel (stable or unordered: one tile body) may use (ptxas's
/// `.maxnreg`, applied by the build to every kernel [`crate::kernels::register_cap`] names). Uncapped, ptxas
/// gives the f32 kernel 64, so an SM holds two blocks of 512 threads, and a block whose warp 0 waits on the
/// look-back leaves the SM with half its loads in flight; at 40 it holds three (40 × 512 × 3 ≤ 65536; their
/// staging, 3 × 33 KiB, fits too), for 20–32 bytes of spills a thread (ptxas 13.0, sm_90).
pub const STABLE_REGISTERS: u32 = 40;

/// How far ahead, in tiles per SM, a compaction block asks L2 for a later block's tile while its warp 0 finds
/// where its tile goes (the look-back, or the unordered kernel's atomic): the blocks resident at once (three
/// of 512 an SM, see [`STABLE_REGISTERS`]), so the tile is the one a block starts about when this one ends,
/// and its first loads hit L2 instead of waiting on HBM. On an H100 at 2^28 f32 (three runs): stable
/// `select_if` 784 → 641 µs, `select_flagged` 921 → 788 (1.10× CUB both); 1 gave 759 / 813, 5 gave 683 / 983,
/// 8 gave 946 / 1139 (one run each: further ahead, the lines are evicted before their block comes). 0 turns
/// it off.
pub const STABLE_PREFETCH_TILES_PER_SM: u32 = 3;

/// Byte offset, in shared memory, of the compaction kernels' staging area (16-byte aligned, past the words of
/// the block scan and the look-back).
pub const STAGE_OFFSET: u32 = 384;

/// Most threads a compaction block can have: its staging (a whole tile) must fit in
/// [`SHARED_LIMIT`].
pub const MAX_STABLE_THREADS: u32 =
    (SHARED_LIMIT - STAGE_OFFSET) / (STABLE_VECTORS as u32 * LOAD_BYTES as u32) / 32 * 32;

/// Dynamic shared memory of a compaction block of `threads`: the scan's words, then a tile of
/// staging.
pub const fn stable_shared_bytes(threads: u32) -> u32 {
    STAGE_OFFSET + threads * STABLE_VECTORS as u32 * LOAD_BYTES as u32
}

/// Most bins a histogram counts in shared memory: one `u32` copy of them fits in [`SHARED_LIMIT`].
pub const MAX_SHARED_BINS: u32 = SHARED_LIMIT / 4;

/// Most private copies of the counters a histogram block keeps: one per lane.
pub const MAX_COPIES_LOG2: u32 = 5;

/// Threads per block of the seed kernels (the chapter's `kThreads`); they use 4 bytes of shared memory per
/// thread.
pub const SEED_THREADS: u32 = 256;

const _: () = {
    assert!(size_of::<Indexed<f64>>() <= MAX_ACC_BYTES);
    assert!(size_of::<Indexed<u64>>() <= MAX_ACC_BYTES);
    assert!(LAST_BLOCK_FLAG_OFFSET + 4 <= SMEM_BYTES as usize);
    assert!(STAGE_OFFSET.is_multiple_of(16));
    assert!(stable_shared_bytes(MAX_STABLE_THREADS) <= SHARED_LIMIT);
    assert!(MAX_STABLE_THREADS >= 32);
    assert!(
        STABLE_VECTORS <= 4,
        "the look-back packs four 16-bit round counts per u64"
    );
    assert!(stable_vectors(4) == STABLE_VECTORS && stable_vectors(8) == STABLE_VECTORS);
    assert!(stable_vectors(2) == 2 && stable_vectors(1) == 1);
    assert!(SMEM_BYTES <= SHARED_LIMIT);
    assert!(SEED_THREADS * 4 <= SHARED_LIMIT);
    assert!(SEGMENTED_THREADS.is_multiple_of(32) && SEGMENTED_THREADS <= 1024);
    assert!(PIECE_CHUNKS.is_multiple_of(SEGMENTED_THREADS as u64));
    assert!(PIECE_CHUNKS <= SPLIT_ABOVE_CHUNKS);
    assert!(
        (256u32 << MAX_COPIES_LOG2) * 4 <= SHARED_LIMIT,
        "the byte histogram keeps a copy per lane"
    );
};
