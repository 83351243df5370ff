//! The reproducible sum: bits that depend only on the values and their order, on every GPU and launch shape.
//!
//! The algorithm and the accumulator arithmetic are `reduce_contract::reproducible`'s; this module only maps
//! them onto the hardware, and no mapping choice reaches the arithmetic:
//!
//! - [`chunks`]: each **warp** sums whole chunks (chunk `c` goes to warps `c mod warps`, any grid). Lane `l`
//!   holds the chunk's virtual lanes `l + 32k`, `k < 8`, in eight registers, and reads element
//!   `256r + 32k + l` of the chunk for round `r`: one coalesced 128-byte line per `k`, by logical index, so
//!   the slice's alignment changes nothing. The stride-halving tree over the 256 virtual lanes is three
//!   in-register steps (`k` with `k + 4`, `k + 2`, `k + 1`) then five shuffles (lanes `l + 16 … l + 1`).
//! - [`combine`]: one block of any size; thread `t` computes virtual lanes `t, t + blockDim, …` of the 1024,
//!   parks them in shared memory, and the block walks the same stride-halving tree with a barrier per level.
//! - Per segment ([`segments_warp`], [`segments_block`]): the same two steps for each segment of a segmented
//!   call, so a segment's sum has the bits of the device-wide sum of its elements: a warp per segment of at
//!   most one chunk, or a block per segment whose warps merge their chunk partials straight into the combine
//!   lanes in shared memory.
use core::mem::MaybeUninit;

use reduce_contract::reproducible::{
    CHUNK, CHUNK_LANES, CHUNK_ROUNDS, COMBINE_LANES, Compensated, ReproAcc, round_to_f32,
};

use crate::arch::{self, load_nc};
use crate::half::{BF16, F16};
use crate::segmented::segment;
use crate::shuffle::{Shuffle, shfl_down};
use crate::warp::FULL_MASK;
use reduce_contract::params::SegmentedParams;

/// Virtual lanes each thread of a chunk's warp holds.
const PER_THREAD: usize = CHUNK_LANES / 32;

/// Bytes of one batch of a warp's loads, for every element type: 32 lines of 128 bytes.
const BATCH_BYTES: usize = 32 * 128;

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
pub trait ReproElement: Copy {
    /// f64 for f32/f16/bf16, [`Compensated`] for f64.
    type Acc: ReproAcc + Shuffle;
    /// f32 for f32/f16/bf16, f64 for f64.
    type Out;
    /// Rounds of a chunk loaded before any is added: `8 · BATCH` loads in flight per thread, 128 bytes
    /// of them whatever the element size, so a chunk takes 8 (16 for f64) round trips to memory. A divisor of [`CHUNK_ROUNDS`]; it changes when loads are issued,
    /// never the order of the additions.
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
    const BATCH: usize = 4;
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

/// First kernel: the partial of every chunk of `input[0..n]` into `partials[chunk]`.
///
/// # Safety
/// `input` valid for `n` reads, aligned and unmodified during the kernel; `partials` valid for
/// `ceil(n / CHUNK)` writes; `blockDim.x` a multiple of 32. With `prefetch`, each batch first asks L2 for
/// the next batch of the chunk (one 128-byte line per lane: a batch is 4 KiB).
#[inline(always)]
pub unsafe fn chunks<E: ReproElement>(
    input: *const E,
    n: u64,
    partials: *mut E::Acc,
    prefetch: bool,
) {
    const {
        assert!(CHUNK_ROUNDS.is_multiple_of(E::BATCH) && E::BATCH * PER_THREAD <= MAX_IN_FLIGHT);
        assert!(E::BATCH * CHUNK_LANES * size_of::<E>() == BATCH_BYTES);
    };
    let warps = arch::grid_threads() / 32;
    let count = n.div_ceil(CHUNK);
    // Warp-uniform: `blockDim.x % 32 == 0`, so the 32 lanes of a warp share `global_thread_idx / 32`.
    let mut c = arch::global_thread_idx() / 32;
    while c < count {
        let first = c * CHUNK;
        // SAFETY: first < n, so the chunk starts inside the input, and `len` elements of it are valid.
        let a = unsafe {
            chunk_partial::<E>(
                input.add(first as usize),
                (n - first).min(CHUNK) as usize,
                prefetch,
            )
        };
        if arch::lane_id() == 0 {
            // SAFETY: c < count.
            unsafe { partials.add(c as usize).write(a) };
        }
        c += warps;
    }
}

/// The partial of one chunk of `len <= CHUNK` elements at `base`, summed by the calling warp: step 2 of the
/// algorithm. Valid in lane 0.
///
/// # Safety
/// `base` valid for `len` reads and unmodified during the kernel; the whole warp calls it, converged.
#[inline(always)]
unsafe fn chunk_partial<E: ReproElement>(base: *const E, len: usize, prefetch: bool) -> E::Acc {
    let lane = arch::lane_id() as usize;
    let mut acc = [E::Acc::ZERO; PER_THREAD];
    if len == CHUNK as usize {
        let mut r = 0;
        while r < CHUNK_ROUNDS {
            if prefetch && r + E::BATCH < CHUNK_ROUNDS {
                // SAFETY: the next batch lies inside this full chunk, and lane · 128 < BATCH_BYTES.
                unsafe {
                    let next = base.add((r + E::BATCH) * CHUNK_LANES) as *const u8;
                    arch::prefetch_l2(next.add(lane * 128));
                }
            }
            // All of a batch's loads first, then its additions in round order.
            // 64 slots, as `each_index!` spells indices up to 63; only the first `8 · BATCH` are used.
            let mut x = [const { MaybeUninit::<E>::uninit() }; 64];
            each_index!(I < E::BATCH * PER_THREAD, {
                let i = (r + I / PER_THREAD) * CHUNK_LANES + 32 * (I % PER_THREAD) + lane;
                // SAFETY: i < CHUNK_ROUNDS · CHUNK_LANES = CHUNK = len.
                x[I].write(unsafe { E::load(base.add(i)) });
            });
            each_index!(I < E::BATCH * PER_THREAD, {
                // SAFETY: written just above.
                let v = unsafe { x[I].assume_init() };
                acc[I % PER_THREAD] = acc[I % PER_THREAD].add(v.widen());
            });
            r += E::BATCH;
        }
    } else {
        // The short last chunk: elements past its end are skipped, not added as zeros.
        for r in 0..CHUNK_ROUNDS {
            unroll!(K in [0, 1, 2, 3, 4, 5, 6, 7] {
                let i = r * CHUNK_LANES + 32 * K + lane;
                if i < len {
                    // SAFETY: i < len.
                    acc[K] = acc[K].add(unsafe { E::load(base.add(i)) }.widen());
                }
            });
        }
    }
    // The tree's levels 128, 64, 32 are inside the thread (virtual lane l + 32k meets l + 32(k + w/32)).
    unroll!(K in [0, 1, 2, 3] { acc[K] = acc[K].merge(acc[K + 4]); });
    unroll!(K in [0, 1] { acc[K] = acc[K].merge(acc[K + 2]); });
    let mut a = acc[0].merge(acc[1]);
    // Levels 16 … 1 across lanes: lane l (< w) merges lane l + w's value.
    unroll!(W in [16, 8, 4, 2, 1] {
        // SAFETY: the whole warp is here, converged (the chunk loop is warp-uniform).
        a = a.merge(unsafe { shfl_down(a, W as u32, 32, FULL_MASK) });
    });
    a
}

/// Second kernel, one block of any size (a multiple of 32): combines `partials[0..count]` in the fixed
/// order and writes the result to `*out`.
///
/// # Safety
/// `partials` valid for `count` reads, `out` for one write; one block with
/// `reduce_contract::reproducible::COMBINE_SHARED_BYTES` of dynamic shared memory.
#[inline(always)]
pub unsafe fn combine<E: ReproElement>(partials: *const E::Acc, count: u64, out: *mut E::Out) {
    let t = arch::thread_idx() as usize;
    let threads = arch::block_dim() as usize;
    // SAFETY: the launch provides COMBINE_LANES slots of up to 16 bytes.
    let slots = unsafe { arch::shared::<E::Acc>() };
    let stride = COMBINE_LANES as u64;
    let mut v = t;
    while v < COMBINE_LANES {
        let mut a = E::Acc::ZERO;
        let mut i = v as u64;
        // Eight loads in flight, merged in index order: the partials sit in L2, and the block's threads
        // wait out its latency a few times rather than once per partial.
        while i + 7 * stride < count {
            let mut x = [const { MaybeUninit::<E::Acc>::uninit() }; 8];
            unroll!(K in [0, 1, 2, 3, 4, 5, 6, 7] {
                // SAFETY: i + K · stride < count.
                x[K].write(unsafe { partials.add((i + K as u64 * stride) as usize).read() });
            });
            unroll!(K in [0, 1, 2, 3, 4, 5, 6, 7] {
                // SAFETY: written just above.
                a = a.merge(unsafe { x[K].assume_init() });
            });
            i += 8 * stride;
        }
        while i < count {
            // SAFETY: i < count.
            a = a.merge(unsafe { partials.add(i as usize).read() });
            i += stride;
        }
        // SAFETY: v < COMBINE_LANES; each slot has one writer.
        unsafe { slots.add(v).write(a) };
        v += threads;
    }
    // SAFETY: every thread of the block is here with the slots filled by this thread's own writes.
    let r = unsafe { combine_tree::<E>(slots) };
    if t == 0 {
        // SAFETY: `out` is valid.
        unsafe { out.write(E::finish(r)) };
    }
}

/// Step 3's tree over the [`COMBINE_LANES`] slots in shared memory: for `w = 512, …, 1`, slot `v < w`
/// merges slot `v + w`, a barrier before each level. Returns slot 0 in thread 0 (`ZERO` in the others, which must not read the slots before a barrier).
///
/// # Safety
/// Every thread of the block calls it; the slots hold the combine lanes, each written by the thread that
/// will read it at the first level (`v ≡ thread_idx mod blockDim`) or ordered by an earlier barrier.
#[inline(always)]
unsafe fn combine_tree<E: ReproElement>(slots: *mut E::Acc) -> E::Acc {
    let t = arch::thread_idx() as usize;
    let threads = arch::block_dim() as usize;
    let mut w = COMBINE_LANES / 2;
    while w >= 1 {
        // SAFETY: every thread reaches each barrier (the loop is uniform); it orders the previous level's
        // writes before this level's reads.
        unsafe { arch::sync_threads() };
        let mut v = t;
        while v < w {
            // SAFETY: v < w and v + w < 2w <= COMBINE_LANES; this level writes [0, w) and reads [w, 2w).
            unsafe {
                slots
                    .add(v)
                    .write(slots.add(v).read().merge(slots.add(v + w).read()))
            };
            v += threads;
        }
        w /= 2;
    }
    if t == 0 {
        // SAFETY: thread 0 wrote slot 0 at the last level itself.
        unsafe { slots.read() }
    } else {
        E::Acc::ZERO
    }
}

/// The parameters of the per-segment kernels: the segmented family's, with one result per segment.
pub type SegmentParams<E> = SegmentedParams<E, <E as ReproElement>::Out>;

/// Per-segment reproducible sums, a **warp** per segment, for segments of at most one chunk: the chunk's
/// partial, then the combine as it goes for a single partial (slot 0 is `ZERO.merge(partial)`, every other
/// slot `ZERO`, and slot 0 merges one of them at each of the tree's ten levels), so each result has the
/// bits of [`combine`] over that one partial.
///
/// # Safety
/// The segmented launch contract (see [`crate::segmented::segment`]); every segment at most [`CHUNK`]
/// elements (rows: the host checks); whole warps.
#[inline(always)]
pub unsafe fn segments_warp<E: ReproElement>(p: SegmentParams<E>) {
    let warps = arch::grid_threads() / 32;
    let mut s = arch::global_thread_idx() / 32;
    // Warp-uniform: every lane of a warp has the same `s`.
    while s < p.count {
        // SAFETY: s < count; the launch contract makes the segment valid for reads.
        let seg = unsafe { segment(&p, s) };
        // SAFETY: the segment holds `len <= CHUNK` valid elements; the whole warp is here.
        let partial = unsafe { chunk_partial::<E>(seg.start, seg.len.min(CHUNK) as usize, false) };
        if arch::lane_id() == 0 {
            let mut a = E::Acc::ZERO.merge(partial);
            let mut w = COMBINE_LANES / 2;
            while w >= 1 {
                a = a.merge(E::Acc::ZERO);
                w /= 2;
            }
            // SAFETY: s < count results.
            unsafe { p.out.add(s as usize).write(E::finish(a)) };
        }
        s += warps;
    }
}

/// Per-segment reproducible sums, a **block** per segment, any length: warp `w` of `W` (`W` divides
/// [`COMBINE_LANES`]) sums chunks `w, w + W, …` of the segment in order and merges each partial into combine
/// slot `chunk mod COMBINE_LANES` in shared memory; so slot `v` merges partials `v, v + 1024, …` in order,
/// all in one warp, as step 3 has it. Then [`combine_tree`].
///
/// # Safety
/// The segmented launch contract (see [`crate::segmented::segment`]); `blockDim.x` a power of two from 32
/// to 1024, with `COMBINE_SHARED_BYTES` of dynamic shared memory.
#[inline(always)]
pub unsafe fn segments_block<E: ReproElement>(p: SegmentParams<E>) {
    let t = arch::thread_idx() as usize;
    let threads = arch::block_dim() as usize;
    let (warp, warps) = ((t / 32) as u64, (threads / 32) as u64);
    // SAFETY: the launch provides COMBINE_LANES slots of up to 16 bytes.
    let slots = unsafe { arch::shared::<E::Acc>() };
    let mut s = arch::block_idx() as u64;
    while s < p.count {
        // SAFETY: s < count; the launch contract makes the segment valid for reads.
        let seg = unsafe { segment(&p, s) };
        let mut v = t;
        while v < COMBINE_LANES {
            // SAFETY: v < COMBINE_LANES.
            unsafe { slots.add(v).write(E::Acc::ZERO) };
            v += threads;
        }
        // SAFETY: every thread reaches it; the zeros are written before any merge below.
        unsafe { arch::sync_threads() };
        let chunks = seg.len.div_ceil(CHUNK);
        let mut c = warp;
        while c < chunks {
            let first = c * CHUNK;
            // SAFETY: first < len; the chunk's elements lie in the segment; the whole warp is here (the
            // loop is warp-uniform).
            let partial = unsafe {
                chunk_partial::<E>(
                    seg.start.add(first as usize),
                    (seg.len - first).min(CHUNK) as usize,
                    false,
                )
            };
            if arch::lane_id() == 0 {
                let slot = (c % COMBINE_LANES as u64) as usize;
                // SAFETY: slot < COMBINE_LANES; only this warp touches it (c ≡ warp mod W, W | 1024).
                unsafe { slots.add(slot).write(slots.add(slot).read().merge(partial)) };
            }
            c += warps;
        }
        // SAFETY: every thread of the block is here; the tree's first barrier orders the merges above.
        let r = unsafe { combine_tree::<E>(slots) };
        if t == 0 {
            // SAFETY: s < count results.
            unsafe { p.out.add(s as usize).write(E::finish(r)) };
        }
        // SAFETY: every thread reaches it; the next segment's zeros wait for thread 0's read of slot 0.
        unsafe { arch::sync_threads() };
        s += arch::grid_dim() as u64;
    }
}
