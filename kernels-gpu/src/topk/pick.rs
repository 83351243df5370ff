//! [`pick`]: one block scans a level's histogram from the top ([`locate`]), finds the bucket of the k-th
//! key, and decides where the next pass reads and whether it buffers.

use crate::op::Plus;
use reduce_contract::params::TopKParams;
use reduce_contract::topk::{
    ALL_EQUAL, BUCKETS, DIGIT_BITS, FROM_INPUT, RUNNING, SELECTED, TopKElement, sieve_holds,
};

use super::buffers::{candidates, destination};
use super::{first_width, key_bits};
use crate::arch::{self, block_dim, lane_id, thread_idx};
use crate::block_scan;

/// Finds the bucket where the count from the top of `buckets` counters (`read(b)`, the greatest bucket
/// last) reaches `wanted`, and calls `found(bucket, above, count)` in the one thread that holds it
/// (`above < wanted ≤ above + count`, `above` counted in the buckets above it); nowhere if the counts do
/// not reach `wanted`. It waits for the block before it calls `found`, so `found` may write what the block
/// read before the call.
///
/// Thread t holds a run of buckets from the top down (thread 0 the greatest): each sums its run, one block
/// scan gives the count above each run, and only the thread whose run holds the boundary walks it. The
/// loads go in batches of [`LOCATE_BATCH`], all issued before their sum, and each lane starts its sum at its
/// lane's place in the run, so a warp's shared loads fall in distinct banks. (Before, each warp scanned
/// 32-bucket rounds one after another, a load's latency and a warp scan each: the first `pick`, over
/// 32768 counters, took 20 µs under ncu; this way took 10–14 µs off a sampled select at 2^24 on an H100.)
///
/// # Safety
/// The whole block calls it, converged, with the block scan's shared memory; `read(b)` may be called for
/// every `b < buckets`.
#[inline(always)]
pub(super) unsafe fn locate(
    buckets: usize,
    wanted: u64,
    read: impl Fn(usize) -> u64,
    mut found: impl FnMut(usize, u64, u64),
) {
    let run = buckets.div_ceil(block_dim() as usize);
    let high = buckets.saturating_sub(thread_idx() as usize * run);
    let len = high - high.saturating_sub(run);
    // The run's `j`-th bucket from its top; `j < len`.
    let bucket = |j: usize| high - 1 - j;
    // Where this lane's sum starts in its run (the loads' order does not change the sum).
    let rotate = if len > 0 { lane_id() as usize % len } else { 0 };
    let mut mine = 0u64;
    let mut j = 0;
    while j < len {
        let mut counts = [0u64; LOCATE_BATCH];
        reduce_contract::each_index!(U < LOCATE_BATCH, {
            if j + U < len {
                let r = j + U + rotate;
                counts[U] = read(bucket(if r >= len { r - len } else { r }));
            }
        });
        reduce_contract::each_index!(U < LOCATE_BATCH, {
            mine += counts[U];
        });
        j += LOCATE_BATCH;
    }
    // SAFETY: the whole block, converged, with the scan's shared memory (caller); then every thread
    // reaches the barrier (the block's reads before the call are done).
    let above = unsafe {
        let (above, _) = block_scan::exclusive_scan::<Plus<u64>>(mine);
        arch::sync_threads();
        above
    };
    if !(above < wanted && wanted <= above + mine) {
        return;
    }
    // This thread's run holds the boundary: walk it from the top.
    let mut before = above;
    let mut j = 0;
    while j < len && before < wanted {
        let mut counts = [0u64; LOCATE_BATCH];
        reduce_contract::each_index!(U < LOCATE_BATCH, {
            if j + U < len {
                counts[U] = read(bucket(j + U));
            }
        });
        reduce_contract::each_index!(U < LOCATE_BATCH, {
            let count = counts[U];
            if before < wanted && wanted <= before + count {
                found(bucket(j + U), before, count);
            }
            before += count;
        });
        j += LOCATE_BATCH;
    }
}

/// The loads [`locate`] issues together.
const LOCATE_BATCH: usize = 8;

/// [`locate`] for the whole block: the `(bucket, above, count)` where the counts from the top of `buckets`
/// counters (`read(b)`) reach `wanted`, given to every thread through the three shared `words`; the
/// bucket `u64::MAX` where they do not reach it. The one-block kernels' loop of rounds (`sample`,
/// `finish`) calls it once a round.
///
/// # Safety
/// As [`locate`]; `words` three `u64`s of shared memory only `choose` uses; the counters complete before
/// the call in every thread's view but for this block's writes, which its first barrier orders; every
/// thread has read the last call's words before this call (a barrier between two calls).
#[inline(always)]
pub(super) unsafe fn choose(
    words: *mut u64,
    buckets: usize,
    wanted: u64,
    read: impl Fn(usize) -> u64,
) -> (u64, u64, u64) {
    let carry = |b: usize, above: u64, count: u64| {
        // SAFETY: the three words, one writer (`locate`'s one thread).
        unsafe {
            words.write(b as u64);
            words.add(1).write(above);
            words.add(2).write(count);
        }
    };
    // SAFETY: the whole block (caller): the barriers order the counts before `locate` reads them, and the
    // words' writes before the block reads them; thread 0's mark goes before the first barrier.
    unsafe {
        if thread_idx() == 0 {
            words.write(u64::MAX);
        }
        arch::sync_threads();
        locate(buckets, wanted, read, carry);
        arch::sync_threads();
        (words.read(), words.add(1).read(), words.add(2).read())
    }
}

/// Finds the bucket of the level's digit in which the k-th greatest composite key lies, extends the
/// prefix with it, decides where the level's pass reads and whether it buffers, and zeroes the counts
/// that pass fills. One block. (Its reads of the state wait one after another, at each early return;
/// issuing them all at once, volatile so they stay together, measured 2–4 µs slower per select at 2^24,
/// on an H100, 2026-12-05.)
///
/// # Safety
/// `p.state` valid, as the previous kernels left it; a block of whole warps with the block scan's shared
/// memory ([`PICK_SHARED`]).
#[inline(always)]
pub unsafe fn pick<T: TopKElement>(p: TopKParams<T>) {
    // Uniform across the block, so the early returns are too.
    if state!(p, done) != RUNNING {
        return;
    }
    let t = thread_idx();
    if state!(p, take_all) != 0 {
        if t == 0 {
            set_state!(p, done, SELECTED);
        }
        return;
    }
    let ib = p.index_bits;
    let (least, greatest) = (!state!(p, not_least), state!(p, greatest));
    let previous = state!(p, shift);
    // The first digit's counts are the sieve's where it holds (every element that can be among the k is
    // in candidate buffer 0), else the first histogram's.
    let sieved = p.level == 0
        && sieve_holds(
            state!(p, sampled),
            state!(p, candidates)[0],
            p.k,
            p.n,
            p.capacity,
        );
    let (counts, shift, width, prefix, wanted) = if p.level == 0 {
        // `mixed` is the histogram's, or the sieve's where it holds (the histogram then did not run).
        if state!(p, mixed) == 0 {
            if t == 0 {
                set_state!(p, done, ALL_EQUAL);
            }
            return;
        }
        let width = first_width(&p);
        // SAFETY: fields of the valid state (caller).
        let first = unsafe {
            if sieved {
                (&raw const (*p.state).sieved).cast::<u64>()
            } else {
                (&raw const (*p.state).first).cast::<u64>()
            }
        };
        (first, key_bits::<T>() + ib - width, width, 0u128, p.k)
    } else if least == greatest && previous > ib {
        // One value key in the whole bucket: its remaining key digits are known; go to the index's.
        let width = DIGIT_BITS.min(ib);
        // SAFETY: as above.
        let index = unsafe { (&raw const (*p.state).index).cast::<u64>() };
        (
            index,
            ib - width,
            width,
            (least as u128) << ib,
            state!(p, remaining),
        )
    } else {
        let width = state!(p, next_width);
        // SAFETY: as above.
        let next = unsafe { (&raw const (*p.state).next).cast::<u64>() };
        let prefix = (state!(p, prefix)[1] as u128) << 64 | state!(p, prefix)[0] as u128;
        (next, previous - width, width, prefix, state!(p, remaining))
    };
    let found = |b: usize, before: u64, count: u64| {
        // The one lane whose bucket holds the boundary writes the decisions.
        let left = wanted - before;
        let take_all = count == left;
        let source = if p.level == 0 {
            if sieved { 1 } else { FROM_INPUT }
        } else if state!(p, capture) != 0 {
            destination(state!(p, source))
        } else {
            state!(p, source)
        };
        let capture = !take_all && (source != FROM_INPUT || count <= p.capacity);
        let prefix = prefix | (b as u128) << shift;
        set_state!(p, prefix, [prefix as u64, (prefix >> 64) as u64]);
        set_state!(p, remaining, left);
        set_state!(p, shift, shift);
        set_state!(p, width, width);
        set_state!(p, bucket, b as u32);
        set_state!(p, source, source);
        set_state!(p, capture, capture as u32);
        set_state!(p, take_all, take_all as u32);
        set_state!(p, next_width, DIGIT_BITS.min(shift));
        set_state!(p, not_least, 0);
        set_state!(p, greatest, 0);
        if capture {
            // SAFETY: the state is valid.
            unsafe { candidates(p.state, destination(source) as usize - 1).write(0) };
        }
    };
    // SAFETY: the whole block with the scan's shared memory (caller); `counts` holds `1 << width`
    // counters; every read of the state above is done before `found` writes it (`locate` waits first).
    unsafe {
        locate(
            1 << width,
            wanted,
            // b < 1 << width, inside the histogram.
            |b| counts.add(b).read(),
            found,
        )
    };
    // SAFETY: every thread reaches this barrier: the boundary's warp has read the counts before any are
    // zeroed.
    unsafe { arch::sync_threads() };
    // The counts the level's pass fills; the first histogram is not read again.
    let mut b = t as usize;
    while b < BUCKETS {
        // SAFETY: b < BUCKETS; read above only by this pick, before the barrier.
        unsafe {
            (&raw mut (*p.state).next[b]).write(0);
            (&raw mut (*p.state).index[b]).write(0);
        }
        b += block_dim() as usize;
    }
}
