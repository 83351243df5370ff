//! The per-segment reproducible sums: the same chunk partials and combine tree for each segment of a
//! segmented call, so that a segment's sum has the bits of the device-wide sum of its elements.

use core::mem::MaybeUninit;

use reduce_contract::layout::LANE_ROWS;
use reduce_contract::params::SegmentedParams;
use reduce_contract::reproducible::{CHUNK, COMBINE_LANES, ReproAcc, THREAD_ROW};

use super::device::{chunk_of, chunk_partial, combine, combine_tree};
use super::{BATCHED, ONE_ROUND, ReproElement};
use crate::arch::{self, Vec16};
use crate::segmented::{Segment, Trip, row_trips, segment};
use crate::shuffle::{shfl_down, shfl_idx};
use crate::warp::FULL_MASK;

/// The parameters of the per-segment kernels: the segmented family's, with one result per segment and the
/// chunk accumulators of split rows as partials.
pub type SegmentParams<E> = SegmentedParams<E, <E as ReproElement>::Out, <E as ReproElement>::Acc>;

/// Most chunks of a segment that one warp sums alone in the per-segment kernels: past it the block's
/// warps share the chunks. A warp walks its chunks one after another, so this bounds the time one segment
/// can hold up its warp. A power of two up to 32, so that the partials fill the low lanes of the
/// combine's cross-lane levels.
pub const WARP_CHUNKS: u64 = 4;
const _: () = assert!(WARP_CHUNKS.is_power_of_two() && WARP_CHUNKS <= 32);

/// The reproducible sum of a segment of at most [`WARP_CHUNKS`] chunks, by the calling warp, with the bits
/// of [`combine`] over the segment's partials. Combine slot `c` is `ZERO.merge(partial c)`, and every slot
/// past the partials is `ZERO`, which `ZERO.merge(ZERO)` keeps; so at each of the combine tree's levels
/// `w >= WARP_CHUNKS` slot `c` merges a `ZERO`, and only the levels below take a partner from another
/// lane. One chunk merges `ZERO` at every level, as the kernel before multi-chunk segments did: a merge
/// with a constant is cheaper than a shuffled one, and 2^16 rows of 1024 f32 took 106 µs that way against
/// 152 µs with five shuffled levels. Valid in lane 0.
///
/// # Safety
/// `seg` valid for `len <= WARP_CHUNKS · CHUNK` reads; the whole warp calls it, converged.
#[inline(always)]
unsafe fn warp_segment<E: ReproElement>(seg: Segment<E>) -> E::Out {
    if seg.len <= CHUNK {
        // SAFETY: forwarded to the caller; one chunk at most.
        return unsafe { chunk_segment::<E, BATCHED>(seg, true) };
    }
    let lane = arch::lane_id() as u64;
    let chunks = seg.len.div_ceil(CHUNK);
    let mut slot = E::Acc::ZERO;
    let mut c = 0;
    // Warp-uniform: `chunks` is the segment's, read alike by every lane.
    while c < chunks {
        // SAFETY: c < chunks, so the chunk starts inside the segment; the whole warp is here.
        let partial = unsafe { chunk_of::<E, BATCHED>(seg, c, true) };
        // SAFETY: the whole warp is here; the partial is lane 0's.
        let partial = unsafe { shfl_idx(partial, 0, 32, FULL_MASK) };
        if lane == c {
            slot = E::Acc::ZERO.merge(partial);
        }
        c += 1;
    }
    let mut a = slot;
    let mut w = COMBINE_LANES / 2;
    while w >= WARP_CHUNKS as usize {
        a = a.merge(E::Acc::ZERO);
        w /= 2;
    }
    while w >= 1 {
        // SAFETY: the whole warp is here, converged (`w` is uniform).
        a = a.merge(unsafe { shfl_down(a, w as u32, 32, FULL_MASK) });
        w /= 2;
    }
    E::finish(a)
}

/// [`warp_segment`] of a segment of at most one chunk, loaded `ROUNDS` rounds at a time: the
/// chunk's partial, then the combine as it goes for a single partial (slot 0 is `ZERO.merge(partial)`,
/// every other slot `ZERO`, and slot 0 merges one of them at each of the tree's ten levels). Valid in
/// lane 0.
///
/// # Safety
/// `seg` valid for `len <= CHUNK` reads; the whole warp calls it, converged.
#[inline(always)]
unsafe fn chunk_segment<E: ReproElement, const ROUNDS: usize>(
    seg: Segment<E>,
    prefetch: bool,
) -> E::Out {
    // SAFETY: forwarded to the caller; one chunk at most.
    let partial = unsafe { chunk_partial::<E, ROUNDS>(seg.start, seg.len as usize, prefetch) };
    let mut a = E::Acc::ZERO.merge(partial);
    let mut w = COMBINE_LANES / 2;
    while w >= 1 {
        a = a.merge(E::Acc::ZERO);
        w /= 2;
    }
    E::finish(a)
}

/// Per-segment reproducible sums of segments of at most one chunk: a warp per segment
/// ([`chunk_segment`], a round at a time: [`ONE_ROUND`]), or, with `p.width` below 32, tiles of `width`
/// lanes for segments of at most `width` elements ([`segments_tile`]), `32 / width` per warp.
///
/// # Safety
/// The segmented launch contract (see [`crate::segmented::segment`]); every segment at most [`CHUNK`]
/// elements, and at most `width` when `width < 32` (rows: the host checks); `width` a power of two; whole
/// warps.
#[inline(always)]
pub unsafe fn segments_warp<E: ReproElement>(p: SegmentParams<E>) {
    let warps = arch::grid_threads() / 32;
    if p.width < 32 {
        // SAFETY: forwarded.
        unsafe { segments_tile::<E>(p, warps) };
        return;
    }
    let mut s = arch::global_thread_idx() / 32;
    // Warp-uniform: every lane of a warp has the same `s`.
    while s < p.count {
        // SAFETY: s < count; the launch contract makes the segment valid for reads, of at most CHUNK
        // elements; the whole warp is here.
        let r = unsafe { chunk_segment::<E, ONE_ROUND>(segment(&p, s), false) };
        if arch::lane_id() == 0 {
            // SAFETY: s < count results.
            unsafe { p.out.add(s as usize).write(r) };
        }
        s += warps;
    }
}

/// [`segments_warp`] with tiles of `p.width < 32` lanes. A segment of `len <= width` elements gives the chunk
/// algorithm's virtual lane `v < len` element `v` alone (round 0, `k = 0`) and every other lane `ZERO`; a
/// merge with `ZERO` leaves every accumulator the algorithm can reach as it is (an f64 built from `ZERO`
/// is never −0, and the compensated pair's error term stays +0 or finite), so the chunk's tree and the
/// combine's reduce to the tile's tree over its `width` lanes: lane `l` merges lane `l + w` for `w =
/// width / 2, …, 1`, which is what [`warp_segment`]'s shuffles do in lanes below `width`. The GPU tests
/// check the bits against the CPU algorithm at every tile width.
///
/// # Safety
/// As [`segments_warp`].
#[inline(always)]
unsafe fn segments_tile<E: ReproElement>(p: SegmentParams<E>, warps: u64) {
    // Shifts, not divisions: `width` is a power of two, and a division would carry a divide-by-zero panic.
    let shift = p.width.trailing_zeros().min(5);
    let width = 1u32 << shift;
    let per_warp = 32u64 >> shift;
    let lane = arch::lane_id() as u64;
    let rank = lane & (width as u64 - 1);
    let mut base = arch::global_thread_idx() / 32 * per_warp;
    // `base` is warp-uniform, so the whole warp reaches each shuffle.
    while base < p.count {
        let s = base + (lane >> shift);
        let mut a = E::Acc::ZERO;
        if s < p.count {
            // SAFETY: s < count; the launch contract makes the segment valid for reads.
            let seg = unsafe { segment(&p, s) };
            if rank < seg.len {
                // SAFETY: rank < len.
                a = a.add(unsafe { E::load(seg.start.add(rank as usize)) }.widen());
            }
        }
        let mut w = width >> 1;
        while w >= 1 {
            // SAFETY: every lane of the warp is here; tiles of `width` lanes shuffle separately.
            a = a.merge(unsafe { shfl_down(a, w, width, FULL_MASK) });
            w >>= 1;
        }
        if s < p.count && rank == 0 {
            // SAFETY: s < count results.
            unsafe { p.out.add(s as usize).write(E::finish(a)) };
        }
        base += warps * per_warp;
    }
}

/// Per-segment reproducible sums of rows of at most [`THREAD_ROW`] elements, a thread each, every load of
/// a trip issued before any addition: rows of up to 4 elements [`LANE_ROWS`] a trip, longer ones 2, so
/// that a trip holds 16 elements (64 bytes of f32) either way: 62 registers for f32, where 4 rows of 8 a
/// trip took 78. Thread `t` of `T` takes rows `t, t + T, …`, so a warp's loads are contiguous.
/// A row's sum is [`segments_tile`]'s: leaf `v < len` is `ZERO.add(element v)`, the rest `ZERO`, and the
/// stride-halving tree over the leaves (the levels above the row's power of two only merge `ZERO`s, which
/// change nothing, so they are skipped).
///
/// The tile gave a row of 4 or 8 f32 one lane per element and one load in flight: 2^22 rows of 4 took 56.5
/// µs where the default sum's thread-per-row kernel takes 22.3 (H200). A row loads as 16-byte vectors when
/// every row starts 16-byte aligned and is whole vectors long; else element by element, the same values.
///
/// # Safety
/// The segmented launch contract for rows (`begin` null; see [`crate::segmented::segment`]) of
/// `len <= THREAD_ROW` elements, each inside the input.
#[inline(always)]
pub unsafe fn segments_rows<E: ReproElement>(p: SegmentParams<E>) {
    const { assert!(THREAD_ROW == 8 && LANE_ROWS == 4) };
    // Uniform, as is every condition below that does not name a row.
    if p.len <= 4 {
        // SAFETY: forwarded; rows of at most 4.
        unsafe { rows_trips::<E, 4, 4>(p) }
    } else {
        // SAFETY: forwarded; rows of at most THREAD_ROW = 8.
        unsafe { rows_trips::<E, 8, 2>(p) }
    }
}

/// [`segments_rows`] for rows of at most `MAX` elements, `TRIP` (at most 4) rows a trip.
///
/// # Safety
/// As [`segments_rows`], with `len <= MAX <= 8`.
#[inline(always)]
unsafe fn rows_trips<E: ReproElement, const MAX: usize, const TRIP: usize>(p: SegmentParams<E>) {
    const { assert!(MAX <= 8 && TRIP <= 4) };
    let len = (p.len as usize).min(MAX);
    let lanes = E::LANES;
    // Row `s` starts `s · stride` elements after the input.
    let vector = len.is_multiple_of(lanes)
        && (p.input as u64).is_multiple_of(16)
        && (p.stride * size_of::<E>() as u64).is_multiple_of(16);
    // The tree's width: the row's length rounded up to a power of two (1 for empty rows).
    let width = len.next_power_of_two();
    // SAFETY: rows, each inside the input (the caller).
    unsafe {
        row_trips(&p, TRIP as u64, |trip| {
            rows_trip::<E, MAX, TRIP>(&p, len, vector, width, trip)
        })
    };
}

/// One trip of [`rows_trips`]: `TRIP` rows of `len` elements, loaded as vectors with `vector`, summed by a
/// tree of `width` leaves.
#[inline(always)]
fn rows_trip<E: ReproElement, const MAX: usize, const TRIP: usize>(
    p: &SegmentParams<E>,
    len: usize,
    vector: bool,
    width: usize,
    trip: Trip<E>,
) {
    let lanes = E::LANES;
    let mut x = [[MaybeUninit::<E>::uninit(); MAX]; TRIP];
    unroll!(K in [0, 1, 2, 3] {
        if K < TRIP {
            let at = trip.start(K);
            if vector {
                // At most MAX / lanes <= 4 vectors (lanes >= 2).
                unroll!(V in [0, 1, 2, 3] {
                    if V * lanes < len {
                        // SAFETY: the vector lies inside the row (len is whole vectors), and every
                        // row starts 16-byte aligned (`vector`).
                        let v = unsafe {
                            arch::load_vec16(at.add(V * lanes) as *const Vec16<E::Array>)
                        };
                        each_index!(I < lanes, {
                            if V * lanes + I < MAX {
                                x[K][V * lanes + I].write(E::lane(&v, I));
                            }
                        });
                    }
                });
            } else {
                each_index!(I < MAX, {
                    if I < len {
                        // SAFETY: I < len.
                        x[K][I].write(unsafe { E::load(at.add(I)) });
                    }
                });
            }
        }
    });
    unroll!(K in [0, 1, 2, 3] {
        if K < TRIP {
            let mut leaf = [E::Acc::ZERO; MAX];
            each_index!(I < MAX, {
                if I < len {
                    // SAFETY: written above for every I < len (by either path).
                    leaf[I] = E::Acc::ZERO.add(unsafe { x[K][I].assume_init() }.widen());
                }
            });
            unroll!(W in [4, 2, 1] {
                if W < width {
                    each_index!(J < W, { leaf[J] = leaf[J].merge(leaf[J + W]); });
                }
            });
            if trip.row(K) < p.count {
                // SAFETY: the row is below count: a result.
                unsafe { p.out.add(trip.row(K) as usize).write(E::finish(leaf[0])) };
            }
        }
    });
}

/// Per-segment reproducible sums of any length (offsets, or rows longer than a chunk), `G = p.width`
/// segments per block at a time (`G` at most the block's `W` warps, `W` a divisor of [`COMBINE_LANES`]):
/// warp `w < G` sums the group's segment `w` alone when it is one chunk at most, or [`WARP_CHUNKS`] when
/// `G > 1` ([`warp_segment`]) — or, with a claim counter (`p.claims`, offsets), every warp first sums
/// those segments in the order it claims them; then the whole block sums the longer segments (the
/// group's, or with claims those of its batches of `blockDim` segments) one by one: warp `w` sums chunks
/// `w, w + W, …` of the segment in order and merges each partial into combine slot `chunk mod
/// COMBINE_LANES` in shared memory, so slot `v` merges partials `v, v + 1024, …` in order, all
/// in one warp, as step 3 has it; then [`combine_tree`].
///
/// # Safety
/// The segmented launch contract (see [`crate::segmented::segment`]); `blockDim.x` a power of two from 32
/// to 1024, with `COMBINE_SHARED_BYTES` of dynamic shared memory; `p.claims` null, or a counter zeroed
/// before the launch and used by no other kernel meanwhile.
#[inline(always)]
pub unsafe fn segments_block<E: ReproElement>(p: SegmentParams<E>) {
    let t = arch::thread_idx() as usize;
    let threads = arch::block_dim() as usize;
    let (warp, warps) = ((t / 32) as u64, (threads / 32) as u64);
    // SAFETY: the launch provides COMBINE_LANES slots of up to 16 bytes.
    let slots = unsafe { arch::shared::<E::Acc>() };
    // `min` then `max`, not `clamp`, which carries a panic path for `warps = 0`.
    let per_group = (p.width as u64).min(warps).max(1);
    // A warp sums a segment alone up to `alone` elements: one chunk when the block takes one segment at a
    // time (long rows, where a warp alone would leave the others idle), [`WARP_CHUNKS`] when it takes a
    // group (offsets, mostly short: a segment of a few chunks is summed sooner by one warp than by a
    // block-wide pass with its ten barriers, while the other warps go on with theirs).
    let alone = if per_group > 1 {
        WARP_CHUNKS * CHUNK
    } else {
        CHUNK
    };
    // Offsets: each warp claims segments one at a time from `p.claims` and sums those a warp sums alone,
    // so that every warp stays busy until the last segment is claimed. Numbered in turn (about eight a
    // warp: at 104 registers an SM holds two blocks), a warp's work was the sum of the lengths it drew:
    // 16384 segments of U(0, 10^4) f32 took 153 µs, 143 with claiming, where the default sum takes 81
    // (H200).
    let claimed = !p.claims.is_null();
    if claimed {
        let lane0 = arch::lane_id() == 0;
        // The next segment is claimed before the current one is summed, so the atomic's round trip overlaps
        // the loads.
        let mut next = if lane0 {
            // SAFETY: `claims` is a valid, zeroed counter (the host's launch contract).
            unsafe { arch::atomic_add_u64(p.claims, 1) }
        } else {
            0
        };
        loop {
            // SAFETY: the whole warp is here, converged (the loop is warp-uniform: `s` is lane 0's).
            let s = unsafe { shfl_idx(next, 0, 32, FULL_MASK) };
            if s >= p.count {
                break;
            }
            if lane0 {
                // SAFETY: as above.
                next = unsafe { arch::atomic_add_u64(p.claims, 1) };
            }
            // SAFETY: s < count; the launch contract makes the segment valid for reads.
            let seg = unsafe { segment(&p, s) };
            if seg.len <= alone {
                // SAFETY: WARP_CHUNKS chunks at most; `s` is warp-uniform, so the whole warp is here.
                let r = unsafe { warp_segment::<E>(seg) };
                if lane0 {
                    // SAFETY: s < count results.
                    unsafe { p.out.add(s as usize).write(r) };
                }
            }
        }
    }
    // A second `if` on purpose: one block for both passes compiles to another code layout, not the one
    // measured below.
    if claimed {
        // Then the block's longer segments: thread `t` reads the length of segment `base + t`, all at
        // once, and the block passes over a batch none of whose segments is long. Read one after another
        // by every thread, eight per group, the offsets cost a round trip to memory per segment: with
        // claiming and that loop the ragged case above took 143 µs, with this pass 136 (H200).
        let mut base = arch::block_idx() as u64 * threads as u64;
        // `base` is block-uniform, so every thread reaches each barrier.
        while base < p.count {
            let s = base + t as u64;
            // SAFETY: s < count; the launch contract makes the segment valid for reads.
            let long = s < p.count && unsafe { segment(&p, s) }.len > alone;
            // SAFETY: every thread of the block is here.
            if unsafe { arch::sync_threads_or(long) } {
                // SAFETY: every thread of the block is here (the predicate is block-uniform).
                unsafe {
                    long_segments::<E>(&p, base, base + threads as u64, alone, slots, warp, warps)
                };
            }
            base += arch::grid_dim() as u64 * threads as u64;
        }
        return;
    }
    let mut group = arch::block_idx() as u64 * per_group;
    // `group` is block-uniform, so all of the block reaches each barrier.
    while group < p.count {
        let mine = group + warp;
        if warp < per_group && mine < p.count {
            // SAFETY: mine < count; the launch contract makes the segment valid for reads.
            let seg = unsafe { segment(&p, mine) };
            if seg.len <= alone {
                // SAFETY: WARP_CHUNKS chunks at most; `mine` is warp-uniform, so the whole warp is here.
                let r = unsafe { warp_segment::<E>(seg) };
                if arch::lane_id() == 0 {
                    // SAFETY: mine < count results.
                    unsafe { p.out.add(mine as usize).write(r) };
                }
            }
        }
        // SAFETY: every thread of the block is here (`group` is block-uniform).
        unsafe { long_segments::<E>(&p, group, group + per_group, alone, slots, warp, warps) };
        group += arch::grid_dim() as u64 * per_group;
    }
}

/// The segments `first .. last` (below `p.count`) longer than `alone` elements, one after another by the
/// whole block ([`block_segment`]), their results into `p.out`.
///
/// # Safety
/// The segmented launch contract; every thread of the block calls it with the same arguments; `slots` as
/// [`block_segment`].
#[inline(always)]
unsafe fn long_segments<E: ReproElement>(
    p: &SegmentParams<E>,
    first: u64,
    last: u64,
    alone: u64,
    slots: *mut E::Acc,
    warp: u64,
    warps: u64,
) {
    let mut s = first;
    while s < p.count.min(last) {
        // SAFETY: s < count; the launch contract makes the segment valid for reads.
        let seg = unsafe { segment(p, s) };
        // Block-uniform: every thread reads the same offsets.
        if seg.len > alone {
            // SAFETY: every thread of the block is here (the length is block-uniform).
            let r = unsafe { block_segment::<E>(seg, slots, warp, warps) };
            if arch::thread_idx() == 0 {
                // SAFETY: s < count results.
                unsafe { p.out.add(s as usize).write(r) };
            }
        }
        s += 1;
    }
}

/// The reproducible sum of `seg` by the whole block (see [`segments_block`]), in thread 0; leaves the slots
/// free for the next call.
///
/// # Safety
/// `seg` valid for reads; every thread of the block calls it; `slots` holds [`COMBINE_LANES`] accumulators
/// that no thread uses meanwhile; `warps` divides [`COMBINE_LANES`].
#[inline(always)]
unsafe fn block_segment<E: ReproElement>(
    seg: Segment<E>,
    slots: *mut E::Acc,
    warp: u64,
    warps: u64,
) -> E::Out {
    let t = arch::thread_idx() as usize;
    let threads = arch::block_dim() as usize;
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
        // SAFETY: c < chunks; the whole warp is here (the loop is warp-uniform).
        let partial = unsafe { chunk_of::<E, BATCHED>(seg, c, false) };
        if arch::lane_id() == 0 {
            let slot = (c % COMBINE_LANES as u64) as usize;
            // SAFETY: slot < COMBINE_LANES; only this warp touches it (c ≡ warp mod W, W | 1024).
            unsafe { slots.add(slot).write(slots.add(slot).read().merge(partial)) };
        }
        c += warps;
    }
    // SAFETY: every thread of the block is here; the tree's first barrier orders the merges above.
    let r = unsafe { combine_tree::<E>(slots) };
    // SAFETY: every thread reaches it; the next call's zeros wait for thread 0's read of slot 0.
    unsafe { arch::sync_threads() };
    E::finish(r)
}

/// Per-segment reproducible sums of rows too few to fill the GPU a block each, first pass: the partial of
/// chunk `c` of row `s` into `partials[s · pieces + c]`, a warp per (row, chunk) pair striding over all of
/// them, so a few long rows use every SM. [`segments_combine`] then combines each row's partials as
/// [`combine`] does the device-wide ones: the bits are the device-wide sum's of the row.
///
/// # Safety
/// The segmented launch contract for rows (see [`crate::segmented::segment`]) with `pieces` =
/// `ceil(len / CHUNK)` and `partials` valid for `count · pieces` writes; whole warps.
#[inline(always)]
pub unsafe fn segments_chunks<E: ReproElement>(p: SegmentParams<E>) {
    // At least 1, so the divisions carry no divide-by-zero panic.
    let pieces = (p.pieces as u64).max(1);
    let total = p.count * pieces;
    let warps = arch::grid_threads() / 32;
    // Warp-uniform: every lane of a warp has the same `id`, and (s, c) = (id / pieces, id % pieces),
    // stepped without a division per chunk (a 64-bit division is a call, whose saved registers spilled the
    // half-precision kernels' 64 loads in flight).
    let mut id = arch::global_thread_idx() / 32;
    let (mut s, mut c) = (id / pieces, id % pieces);
    let (ds, dc) = (warps / pieces, warps % pieces);
    while id < total {
        // SAFETY: s < count; rows lie inside the input (the host checks).
        let seg = unsafe { segment(&p, s) };
        let first = c * CHUNK;
        if first < seg.len {
            // SAFETY: chunk c starts inside the row; the whole warp is here (`id` is warp-uniform).
            let a = unsafe { chunk_of::<E, BATCHED>(seg, c, false) };
            if arch::lane_id() == 0 {
                // SAFETY: id < count · pieces partials.
                unsafe { p.partials.add(id as usize).write(a) };
            }
        }
        id += warps;
        (s, c) = (s + ds, c + dc);
        if c >= pieces {
            (s, c) = (s + 1, c - pieces);
        }
    }
}

/// Second pass of split rows: block `b` combines row `b`'s `pieces` partials (blocks striding over the
/// rows) with [`combine`], and writes `out[b]`.
///
/// # Safety
/// `partials` valid for `count · pieces` reads (written by [`segments_chunks`] before), `out` for `count`
/// writes; `blockDim.x` a multiple of 32, with `COMBINE_SHARED_BYTES` of dynamic shared memory.
#[inline(always)]
pub unsafe fn segments_combine<E: ReproElement>(p: SegmentParams<E>) {
    let pieces = p.pieces as u64;
    let mut s = arch::block_idx() as u64;
    // `s` is block-uniform, so every thread reaches the barriers in `combine` and below.
    while s < p.count {
        // SAFETY: the row's partials lie at s · pieces .. (s + 1) · pieces; s < count results.
        unsafe {
            combine::<E>(
                p.partials.add((s * pieces) as usize),
                pieces,
                p.out.add(s as usize),
            )
        };
        // SAFETY: every thread reaches it; the next row's slot writes wait for this row's last tree level.
        unsafe { arch::sync_threads() };
        s += arch::grid_dim() as u64;
    }
}
