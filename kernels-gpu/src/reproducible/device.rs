//! The device-wide reproducible sum: [`chunks`], each warp's chunk partials, then [`combine`] in one block.

use core::mem::MaybeUninit;

use reduce_contract::reproducible::{CHUNK, CHUNK_LANES, CHUNK_ROUNDS, COMBINE_LANES, ReproAcc};

use super::{BATCH_BYTES, BATCHED, MAX_IN_FLIGHT, PER_THREAD, ReproElement};
use crate::arch;
use crate::segmented::Segment;
use crate::shuffle::shfl_down;
use crate::warp::FULL_MASK;

/// First kernel: the partial of every chunk of `input[0..n]` into `partials[chunk]`.
///
/// # Safety
/// `input` valid for `n` reads, aligned and unmodified during the kernel; `partials` valid for
/// `ceil(n / CHUNK)` writes; `blockDim.x` a multiple of 32. With `prefetch`, each batch first asks L2 for
/// the next batch of the chunk, its first [`BATCH_BYTES`] (one 128-byte line per lane).
#[inline(always)]
pub unsafe fn chunks<E: ReproElement>(
    input: *const E,
    n: u64,
    partials: *mut E::Acc,
    prefetch: bool,
) {
    const {
        assert!(CHUNK_ROUNDS.is_multiple_of(E::BATCH) && E::BATCH * PER_THREAD <= MAX_IN_FLIGHT);
        assert!((E::BATCH * CHUNK_LANES * size_of::<E>()).is_multiple_of(BATCH_BYTES));
    };
    let warps = arch::grid_threads() / 32;
    let count = n.div_ceil(CHUNK);
    // Warp-uniform: `blockDim.x % 32 == 0`, so the 32 lanes of a warp share `global_thread_idx / 32`.
    let mut c = arch::global_thread_idx() / 32;
    while c < count {
        let all = Segment {
            start: input,
            len: n,
        };
        // SAFETY: c < count, so the chunk starts inside the input; the whole warp is here (`c` is
        // warp-uniform).
        let a = unsafe { chunk_of::<E, BATCHED>(all, c, prefetch) };
        if arch::lane_id() == 0 {
            // SAFETY: c < count.
            unsafe { partials.add(c as usize).write(a) };
        }
        c += warps;
    }
}

/// The partial of chunk `c` of `seg` (its elements `c · CHUNK ..`, at most [`CHUNK`] of them), summed by
/// the calling warp: [`chunk_partial`] at the chunk's start, with its `ROUNDS`. Valid in lane 0.
///
/// # Safety
/// `c · CHUNK < seg.len`; `seg` valid for reads and unmodified during the kernel; the whole warp calls it,
/// converged.
#[inline(always)]
pub(super) unsafe fn chunk_of<E: ReproElement, const ROUNDS: usize>(
    seg: Segment<E>,
    c: u64,
    prefetch: bool,
) -> E::Acc {
    let first = c * CHUNK;
    // SAFETY: first < len, so the chunk's `min(len - first, CHUNK)` elements lie in the segment.
    unsafe {
        chunk_partial::<E, ROUNDS>(
            seg.start.add(first as usize),
            (seg.len - first).min(CHUNK) as usize,
            prefetch,
        )
    }
}

/// Adds rounds `r .. r + R` of a short chunk of `len` elements at `base` into the thread's virtual lanes:
/// all of their loads first, then the additions in round order, skipping elements at or past `len`.
///
/// # Safety
/// `base` valid for `len` reads and unmodified during the kernel; `R · 8 <= 64`.
#[inline(always)]
unsafe fn short_rounds<E: ReproElement, const R: usize>(
    base: *const E,
    len: usize,
    r: usize,
    lane: usize,
    acc: &mut [E::Acc; PER_THREAD],
) {
    // 64 slots, as `each_index!` spells indices up to 63; only the first `8 · R` are used.
    let mut x = [const { MaybeUninit::<E>::uninit() }; 64];
    each_index!(I < R * PER_THREAD, {
        let i = (r + I / PER_THREAD) * CHUNK_LANES + 32 * (I % PER_THREAD) + lane;
        if i < len {
            // SAFETY: i < len.
            x[I].write(unsafe { E::load(base.add(i)) });
        }
    });
    each_index!(I < R * PER_THREAD, {
        let i = (r + I / PER_THREAD) * CHUNK_LANES + 32 * (I % PER_THREAD) + lane;
        if i < len {
            // SAFETY: written just above, under the same condition.
            let v = unsafe { x[I].assume_init() };
            acc[I % PER_THREAD] = acc[I % PER_THREAD].add(v.widen());
        }
    });
}

/// The partial of one chunk of `len <= CHUNK` elements at `base`, summed by the calling warp: step 2 of the
/// algorithm. Its rounds are loaded `ROUNDS` at a time at most ([`ONE_ROUND`], [`BATCHED`]), and
/// [`ReproElement::BATCH`]; that changes when loads are issued, never the order of the additions. Valid in
/// lane 0.
///
/// # Safety
/// `base` valid for `len` reads and unmodified during the kernel; the whole warp calls it, converged.
#[inline(always)]
pub(super) unsafe fn chunk_partial<E: ReproElement, const ROUNDS: usize>(
    base: *const E,
    len: usize,
    prefetch: bool,
) -> E::Acc {
    let lane = arch::lane_id() as usize;
    let mut acc = [E::Acc::ZERO; PER_THREAD];
    if len == CHUNK as usize {
        // Rounds a batch: a constant after inlining, and a divisor of CHUNK_ROUNDS (both are powers of two).
        let batch = if ROUNDS < E::BATCH { ROUNDS } else { E::BATCH };
        let mut r = 0;
        while r < CHUNK_ROUNDS {
            // Only whole batches prefetch (the prefetch spans BATCH_BYTES of the next batch).
            if prefetch && batch == E::BATCH && r + E::BATCH < CHUNK_ROUNDS {
                // SAFETY: the next batch lies inside this full chunk, and lane · 128 < BATCH_BYTES.
                unsafe {
                    let next = base.add((r + E::BATCH) * CHUNK_LANES) as *const u8;
                    arch::prefetch_l2(next.add(lane * 128));
                }
            }
            // All of a batch's loads first, then its additions in round order.
            // 64 slots, as `each_index!` spells indices up to 63; only the first `8 · batch` are used.
            let mut x = [const { MaybeUninit::<E>::uninit() }; 64];
            each_index!(I < batch * PER_THREAD, {
                let i = (r + I / PER_THREAD) * CHUNK_LANES + 32 * (I % PER_THREAD) + lane;
                // SAFETY: i < CHUNK_ROUNDS · CHUNK_LANES = CHUNK = len.
                x[I].write(unsafe { E::load(base.add(i)) });
            });
            each_index!(I < batch * PER_THREAD, {
                // SAFETY: written just above.
                let v = unsafe { x[I].assume_init() };
                acc[I % PER_THREAD] = acc[I % PER_THREAD].add(v.widen());
            });
            r += batch;
        }
    } else {
        // The short last chunk: elements past its end are skipped, not added as zeros, and so are the
        // rounds past it. Its loads go in batches of up to `ROUNDS` rounds: a short segment is all a warp of
        // the per-segment kernels reads, and one round's eight loads in flight left ragged rows of
        // U(0, 10^4) f32 at a quarter of the read rate. The batches shrink with the rounds left (8, 4, 2,
        // 1), so a row of 4 elements issues one round's loads and checks, not 64.
        let rounds = len.div_ceil(CHUNK_LANES);
        if prefetch {
            // Everything past the first batch asked of L2 at once, so that the later batches wait on L2
            // rather than one HBM round trip each (a ragged segment of ~5000 f32 is batches of 8, 8 and 4
            // rounds): 16384 segments of U(0, 10^4) f32 took 151.6 µs, 144.1 with it (H100, three runs).
            let first = (ROUNDS.min(E::BATCH) * CHUNK_LANES).min(len);
            let size = size_of::<E>() as u64;
            // SAFETY: bytes `first · size .. len · size` of `base` lie inside the chunk (the caller).
            unsafe {
                arch::prefetch_l2_range(
                    base as *const u8,
                    first as u64 * size,
                    len as u64 * size,
                    lane as u64,
                    32,
                )
            };
        }
        let mut r = 0;
        unroll!(R in [8, 4, 2, 1] {
            // `R <= ROUNDS` and `R <= E::BATCH` are constants; `rounds` is warp-uniform.
            while R <= ROUNDS && R <= E::BATCH && rounds - r >= R {
                // SAFETY: forwarded to the caller; round r lies inside the chunk (r < rounds).
                unsafe { short_rounds::<E, R>(base, len, r, lane, &mut acc) };
                r += R;
            }
        });
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
pub(super) unsafe fn combine_tree<E: ReproElement>(slots: *mut E::Acc) -> E::Acc {
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
