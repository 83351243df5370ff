//! The reproducible sum: bits that depend only on the values and their order, on every GPU and launch shape.
//!
//! The algorithm and the accumulator arithmetic are `reduce_contract::reproducible`'s; this module only maps
//! them onto the hardware, and no mapping choice reaches the arithmetic:
//!
//! - [`chunks`] (`device`): each **warp** sums whole chunks (chunk `c` goes to warps `c mod warps`, any
//!   grid). Lane `l` holds the chunk's virtual lanes `l + 32k`, `k < 8`, in eight registers, and reads
//!   element `256r + 32k + l` of the chunk for round `r`: one coalesced 128-byte line per `k`, by logical
//!   index, so the slice's alignment changes nothing. The stride-halving tree over the 256 virtual lanes is
//!   three in-register steps (`k` with `k + 4`, `k + 2`, `k + 1`) then five shuffles
//!   (lanes `l + 16 … l + 1`).
//! - [`combine`]: one block of any size; thread `t` computes virtual lanes `t, t + blockDim, …` of the 1024,
//!   parks them in shared memory, and the block walks the same stride-halving tree with a barrier per level.
//! - Per segment (`segments`): the same two steps for each segment of a segmented call, so a segment's sum
//!   has the bits of the device-wide sum of its elements: a thread per row of at most
//!   [`THREAD_ROW`](reduce_contract::reproducible::THREAD_ROW) elements ([`segments_rows`]), a warp per
//!   segment of at most one chunk ([`segments_warp`]), a block per longer segment whose warps merge their
//!   chunk partials straight into the combine lanes in shared memory ([`segments_block`], which also gives
//!   the segments of mixed lengths up to [`WARP_CHUNKS`] chunks a warp each), or, for rows too few to fill
//!   the GPU, [`chunks`] and [`combine`] per row ([`segments_chunks`], [`segments_combine`]).

use reduce_contract::reproducible::{CHUNK_LANES, Compensated, ReproAcc, round_to_f32};

use crate::arch::load_nc;
use crate::half::{BF16, F16};
use crate::shuffle::Shuffle;
use crate::thread::Vectorize;

mod device;
mod segments;

pub use device::{chunks, combine};
pub use segments::{
    SegmentParams, WARP_CHUNKS, segments_block, segments_chunks, segments_combine, segments_rows,
    segments_warp,
};

/// Virtual lanes each thread of a chunk's warp holds.
const PER_THREAD: usize = CHUNK_LANES / 32;

/// Bytes a warp's prefetch asks L2 for ahead of each batch: 32 lines of 128 bytes, one per lane. A batch
/// of f64 or 16-bit elements is that size, and an f32 batch twice it (its first half is prefetched).
const BATCH_BYTES: usize = 32 * 128;

/// Most rounds of a chunk that [`chunk_partial`](device::chunk_partial) loads before adding them (its
/// `ROUNDS`) in the kernel of segments of at most one chunk ([`segments_warp`]): one round, eight loads a
/// thread. That kernel's rows of 4 to 8 elements (in tiles) need every warp an SM can hold: with batches of
/// rounds it took 104 registers where it takes 40, and 2^22 rows of 4 took 141 µs where they take 57 (H200).
const ONE_ROUND: usize = 1;

/// [`chunk_partial`](device::chunk_partial)'s `ROUNDS` everywhere else: [`ReproElement::BATCH`] rounds at
/// once, and a short chunk's rounds in batches of 8, 4, 2, 1 as they run out; ragged segments (summed by
/// warps of [`segments_block`]) read faster with more loads in flight.
const BATCHED: usize = 8;

/// Most elements a thread loads before it adds any (see [`ReproElement::BATCH`]).
const MAX_IN_FLIGHT: usize = 64;

// SAFETY: two f64s, each two words, in field order.
unsafe impl Shuffle for Compensated {
    #[inline(always)]
    fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
        Compensated {
            sum: self.sum.map_words(&mut f),
            err: self.err.map_words(&mut f),
        }
    }
}

/// An element type of the reproducible sum: its accumulator, its result and how it is read.
pub trait ReproElement: Copy + Vectorize {
    /// f64 for f32/f16/bf16, [`Compensated`] for f64.
    type Acc: ReproAcc + Shuffle;
    /// f32 for f32/f16/bf16, f64 for f64.
    type Out;
    /// Rounds of a chunk loaded before any is added: `8 · BATCH` loads in flight per thread, so a chunk
    /// takes 4 round trips to memory (16 for f64, whose accumulator pairs need the registers). f32 keeps
    /// 64 loads in flight, 256 bytes a thread: at 4 its device-wide sum read 2^24 … 2^28 elements at
    /// 88–96 % of the default sum's rate, at 8 (with the L2 prefetch where it helps) at 97–101 % (H200,
    /// docs/PERFORMANCE.md). A divisor of [`CHUNK_ROUNDS`]; it changes when loads are issued, never the
    /// order of the additions.
    const BATCH: usize;
    /// Reads one element through the read-only path.
    ///
    /// # Safety
    /// As [`arch::load_nc`].
    unsafe fn load(p: *const Self) -> Self;
    /// Exact widening to f64.
    fn widen(self) -> f64;
    /// The result of the final accumulator.
    fn finish(acc: Self::Acc) -> Self::Out;
}

impl ReproElement for f32 {
    type Acc = f64;
    type Out = f32;
    const BATCH: usize = 8;
    #[inline(always)]
    unsafe fn load(p: *const f32) -> f32 {
        // SAFETY: forwarded to the caller.
        f32::from_bits(unsafe { load_nc(p as *const u32) })
    }
    #[inline(always)]
    fn widen(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn finish(acc: f64) -> f32 {
        round_to_f32(acc)
    }
}

impl ReproElement for f64 {
    type Acc = Compensated;
    type Out = f64;
    const BATCH: usize = 2;
    #[inline(always)]
    unsafe fn load(p: *const f64) -> f64 {
        // SAFETY: forwarded to the caller.
        f64::from_bits(unsafe { load_nc(p as *const u64) })
    }
    #[inline(always)]
    fn widen(self) -> f64 {
        self
    }
    #[inline(always)]
    fn finish(acc: Compensated) -> f64 {
        acc.result()
    }
}

macro_rules! repro_half {
    ($($t:ident),*) => {$(
        impl ReproElement for $t {
            type Acc = f64;
            type Out = f32;
            const BATCH: usize = 8;
            #[inline(always)]
            unsafe fn load(p: *const $t) -> $t {
                // SAFETY: forwarded to the caller.
                $t(unsafe { load_nc(p as *const u16) })
            }
            #[inline(always)]
            fn widen(self) -> f64 {
                self.to_f32() as f64
            }
            #[inline(always)]
            fn finish(acc: f64) -> f32 {
                round_to_f32(acc)
            }
        }
    )*};
}
repro_half!(F16, BF16);
