//! The sampled start ([`sample`], [`sieve`]): a key that about a few times k·(sample / n) sampled
//! elements reach, from one block's sample, then one pass that buffers every element reaching it.

use crate::op::Plus;
use reduce_contract::params::TopKParams;
use reduce_contract::topk::{
    BUCKETS, DIGIT_BITS, SAMPLE, SAMPLE_HEADER, SAMPLE_MOST, SAMPLE_THREADS, TopKElement,
    sample_position, sample_target, value_key,
};

use super::buffers::{Pending, Stage, buffer, candidates, warp_areas};
use super::pick::choose;
use super::{
    each_key, element, first_width, flush_shared, key_bits, tally, top_digit, zero_shared,
};
use crate::arch::{self, block_idx, grid_dim, lane_id, thread_idx};
use crate::thread::Vectorize;
use crate::tile::Tile;
use crate::warp::{self, FULL_MASK};

/// Whether the sieve takes the element of value key `key` at `index`: a key above `key_above`, or equal to
/// it at an index below `limit`. The elements taken are those whose composite keys reach
/// `(key_above, limit − 1)` (or pass `key_above` when `limit` is 0): the best ones, whatever the limit.
/// Keys compared in 32-bit arithmetic where they fit.
#[inline(always)]
fn sieve_takes<T: TopKElement>(key: u64, index: u64, key_above: u64, limit: u64) -> bool {
    let (above, equal) = if T::KEY_BYTES <= 4 {
        (
            key as u32 > key_above as u32,
            key as u32 == key_above as u32,
        )
    } else {
        (key > key_above, key == key_above)
    };
    above || (equal && index < limit)
}

/// The value key of sampled element `s` ([`sample_position`]).
///
/// # Safety
/// `s < SAMPLE ≤ p.n`; `p.input` valid for `p.n` reads.
#[inline(always)]
unsafe fn sampled_key<T: TopKElement>(p: &TopKParams<T>, s: u64) -> u64 {
    // SAFETY: sample_position(s, n) < n (caller).
    value_key(
        unsafe { element(p, sample_position(s, p.n)) },
        p.largest != 0,
    )
}

/// Reads [`SAMPLE`] elements spread over the input and chooses what `sieve` buffers (`state.sieve_key`,
/// `state.sieve_limit`, see [`sieve_takes`]): about the [`sample_target`] greatest sampled elements' share
/// of the input. The target-th greatest sampled key is found as `pick` finds its bucket, in rounds of
/// [`DIGIT_BITS`] over the bits it keeps of each key (all of a key of up to 4 bytes, the top 32 of an
/// 8-byte one), and cut to those bits:
/// - where at most [`SAMPLE_MOST`] sampled keys reach the cut key, the sieve takes every element at or
///   above it;
/// - where more do, but every sampled key in its bucket is one value (repeated values, NaN), the sieve
///   takes the elements above that value and those equal to it up to the position of the sampled one
///   that reaches the target: composite keys, so ties cost no more than distinct values;
/// - otherwise (a narrow band of distinct values, or ties of 8-byte keys, which the short keys kept
///   cannot tell from one) nothing, and the histogram runs.
///
/// A grid of blocks that divides [`SAMPLE`] ([`SAMPLE_BLOCKS`](reduce_contract::topk::SAMPLE_BLOCKS)):
/// each reads its share; the last to finish chooses.
///
/// # Safety
/// `p.input` valid for `p.n ≥ SAMPLE` reads; `p.state` zeroed; candidate buffer 1 valid for `SAMPLE / 2`
/// entries; blocks of [`SAMPLE_THREADS`] threads with [`SAMPLE_SHARED`] bytes of dynamic shared memory,
/// a grid that divides `SAMPLE` into shares of at least `SAMPLE_THREADS`.
#[inline(always)]
pub unsafe fn sample<T: TopKElement>(p: TopKParams<T>) {
    let target = sample_target(p.n, p.k);
    // SAFETY: the shared memory (caller): the block scan's slots, three words at 512 that carry a round's
    // choice to the block, then the counters (later the warps' extremes and votes).
    let (words, counts) = unsafe {
        let base = arch::shared::<u8>();
        (
            base.add(512).cast::<u64>(),
            base.add(SAMPLE_HEADER as usize).cast::<u32>(),
        )
    };
    // SAFETY: shared memory.
    let window = unsafe { arch::shared_window(counts) };
    // SAFETY: the counters as zeroed and filled below, at most `1 << DIGIT_BITS` of them.
    let read = |b: usize| unsafe { counts.add(b).read() } as u64;
    // This thread's sampled keys, `t, t + SAMPLE_THREADS, …`, every load issued before the first count
    // (unrolled: the array is registers), each kept as its top 32 bits (`short`): all of a key of up to 4
    // bytes, and both digits of an 8-byte one (sixteen whole 8-byte keys took the kernel to 128
    // registers, the most a block of 512 threads may have).
    const EACH: usize = (SAMPLE / SAMPLE_THREADS as u64) as usize;
    let kept = key_bits::<T>().min(32);
    let short = |key: u64| (key >> (key_bits::<T>() - kept)) as u32;
    // The blocks read the sample side by side, each its share (a load a thread with SAMPLE_BLOCKS
    // blocks), into candidate buffer 1 (unused until the passes after the sieve) as short keys; the last
    // block to finish takes them all and chooses. (One block's 8,192 scattered loads took most of its
    // 16–17 µs at 2^24 on an H100, 2026-12-07.)
    let gathered = buffer(&p, 1).0.cast::<u32>();
    let share = SAMPLE / grid_dim() as u64;
    let mut s = block_idx() as u64 * share + thread_idx() as u64;
    while s < (block_idx() as u64 + 1) * share {
        // SAFETY: s < SAMPLE ≤ n; the buffer holds capacity ≥ 4096 u64, SAMPLE u32 (caller).
        unsafe { gathered.add(s as usize).write(short(sampled_key(&p, s))) };
        s += SAMPLE_THREADS as u64;
    }
    // SAFETY: every thread reaches the barriers; thread 0's fence orders the block's writes (seen by it
    // after the first barrier) before its arrival, and the last block's fence its reads after it;
    // `words` carries the answer to the block.
    unsafe {
        arch::sync_threads();
        if thread_idx() == 0 {
            arch::fence_gpu();
            let before = arch::atomic_add_u32(&raw mut (*p.state).arrived, 1);
            words.write((before + 1 == grid_dim()) as u64);
            arch::fence_gpu();
        }
        arch::sync_threads();
    }
    // Uniform across the block: only the last block goes on.
    // SAFETY: written before the barrier above.
    if unsafe { words.read() } == 0 {
        return;
    }
    let mut keys = [0u32; EACH];
    reduce_contract::each_index!(J < EACH, {
        // SAFETY: t + J · SAMPLE_THREADS < SAMPLE keys, every block's written before its arrival; read
        // from L2 (not this SM's L1, which other blocks' writes bypass).
        keys[J] = unsafe {
            arch::load_coherent(gathered.add(thread_idx() as usize + J * SAMPLE_THREADS as usize))
        };
    });
    // Rounds from the top of the kept bits, a digit of at most DIGIT_BITS each: the sampled keys whose
    // digits above it are the ones chosen so far, counted by it, and the bucket of the target chosen. (Where
    // it took one round over the first digit's 32768 counters, then one of DIGIT_BITS, `sample` ran 51,712
    // warp instructions on its one SM, 14.2 µs at 2^24 on an H100; these rounds took 12.7–14.7 µs there,
    // no faster, with 72 registers where it had 96 and 9 KiB of shared memory where it took up to 129 KiB.
    // ncu, 2026-12-07.)
    let (mut chosen, mut done, mut above, mut count) = (0u64, 0u32, 0u64, 0u64);
    while done < kept {
        let width = DIGIT_BITS.min(kept - done);
        let shift = kept - done - width;
        // SAFETY: `1 << width ≤ BUCKETS` counters; the whole block (the loop is uniform: `choose` gives
        // every thread the same answer), past the last round's barriers.
        unsafe { zero_shared(counts, 1 << width) };
        reduce_contract::each_index!(J < EACH, {
            let key = keys[J] as u64;
            let digit = ((key >> shift) & ((1 << width) - 1)) as u32;
            // SAFETY: the whole warp; a digit of `width` bits indexes the counters.
            unsafe { tally(window, digit, key >> (shift + width) == chosen) };
        });
        // SAFETY: the whole block; three words of their own; the counts filled above (`tally`'s shared
        // atomics, ordered by `choose`'s first barrier); the last round's words read before `zero_shared`'s
        // barrier.
        let (digit, at, c) = unsafe { choose(words, 1 << width, target - above, read) };
        // Uniform across the block: the sample has fewer than `target` keys (only in the first round,
        // and not where `samples` holds).
        if digit == u64::MAX {
            return;
        }
        chosen = chosen << width | digit;
        (above, count, done) = (above + at, c, done + width);
    }
    // The cut key: the chosen bits in place, zero below (the bits an 8-byte key's short one drops).
    let below = key_bits::<T>() - kept;
    let cut = chosen << below;
    if above + count <= SAMPLE_MOST {
        if thread_idx() == 0 {
            // Every element at or above the cut key (the cut key is not 0: all SAMPLE reach 0).
            set_state!(p, sieve_key, cut - 1);
            set_state!(p, sieve_limit, 0);
            set_state!(p, sampled, 1);
        }
        return;
    }
    // Many sampled keys share the cut key's digits: are they one value? (Known from the short keys only
    // where they are whole: 8-byte keys step aside.)
    if T::KEY_BYTES > 4 {
        return;
    }
    let warp_id = arch::warp_id() as usize;
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    reduce_contract::each_index!(J < EACH, {
        let key = keys[J] as u64;
        if key >> below == cut >> below {
            lo = lo.min(key);
            hi = hi.max(key);
        }
    });
    // SAFETY: whole warps; then the warps' extremes in the counters' place (32 + 32 words, past
    // `choose`'s last barrier), and the barrier before anyone reads them.
    unsafe {
        let (lo, hi) = (
            warp::min_u64(lo, 32, FULL_MASK),
            !warp::min_u64(!hi, 32, FULL_MASK),
        );
        let extremes = counts.cast::<u64>();
        if lane_id() == 0 {
            extremes.add(warp_id).write(lo);
            extremes.add(32 + warp_id).write(hi);
        }
        arch::sync_threads();
    }
    let warps = (SAMPLE_THREADS / 32) as usize;
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    for w in 0..warps {
        // SAFETY: written before the barrier above.
        unsafe {
            lo = lo.min(counts.cast::<u64>().add(w).read());
            hi = hi.max(counts.cast::<u64>().add(32 + w).read());
        }
    }
    // Uniform: distinct values in a narrow band; the sieve would take too many.
    if lo != hi {
        return;
    }
    // One value: the sieve takes the elements above it, and those equal to it at positions up to the
    // `want`-th sampled one (in sample order, which is position order): then `above + want = target`
    // sampled composite keys reach the sieve's least.
    let want = target - above;
    // SAFETY: each warp's vote of each round in the counters' place, past the extremes (64 words), and
    // the barrier before warp 0 reads them.
    let votes = unsafe { counts.add(128) };
    reduce_contract::each_index!(J < EACH, {
        // SAFETY: the whole warp; one writer per vote.
        unsafe {
            let vote = warp::ballot(FULL_MASK, keys[J] as u64 == lo);
            if lane_id() == 0 {
                votes.add(J * warps + warp_id).write(vote);
            }
        }
    });
    // SAFETY: every thread reaches this barrier: the votes are complete.
    unsafe { arch::sync_threads() };
    if warp_id != 0 {
        return;
    }
    let mut before = 0u64;
    for j in 0..EACH {
        // Lane w holds warp w's vote of round j: samples j · SAMPLE_THREADS + 32 w + bit.
        let lane = lane_id() as usize;
        // SAFETY: written before the barrier above, for lane < warps.
        let vote = if lane < warps {
            unsafe { votes.add(j * warps + lane).read() }
        } else {
            0
        };
        let ones = vote.count_ones() as u64;
        // SAFETY: the whole of warp 0.
        let (ahead, total) = unsafe { Tile::<32>::new().scan::<Plus<u64>>(ones) };
        let ahead = before + ahead;
        if ahead < want && want <= ahead + ones {
            // The (want − ahead)-th vote of this lane's warp, from its lowest lane.
            let mut rest = vote;
            for _ in 1..want - ahead {
                rest &= rest - 1;
            }
            let s = (j * SAMPLE_THREADS as usize + 32 * lane) as u64 + rest.trailing_zeros() as u64;
            set_state!(p, sieve_key, lo);
            set_state!(p, sieve_limit, sample_position(s, p.n) + 1);
            set_state!(p, sampled, 1);
        }
        before += total;
    }
}

/// Adds one to the global counter `far + d` for each lane where `valid`, with one atomic per distinct `d`
/// of the warp (`match.any` groups the lanes, the lowest of each adds the group's size). The sieve's digits
/// beyond its shared counters are rare on smooth data, but not where many equal keys lie far above the
/// sample's key: NaN or ±∞ where the sample met fewer of them than its target (1% NaN at k = 65536 among
/// 2^24: 3–9% of draws of the sampled places, simulated). One atomic per element queued all of them on
/// one address: 318 µs where the sample's key fell below the NaN, against 206 where it did not (H100,
/// 2026-12-06, docs/PERFORMANCE.md).
///
/// # Safety
/// The whole warp calls it together; `far + d` valid global memory wherever `valid`.
#[inline(always)]
unsafe fn far_tally(far: *mut u64, d: u32, valid: bool) {
    // SAFETY: the whole warp (caller).
    if unsafe { !warp::any(FULL_MASK, valid) } {
        return;
    }
    // Lanes without a count form their own group under a digit no counted lane has (d < 2^32 − 1: a
    // first digit has at most FIRST_BITS bits).
    // SAFETY: the whole warp (caller), converged after the uniform test above.
    let peers = unsafe { warp::match_any(FULL_MASK, if valid { d } else { u32::MAX }) };
    if valid && peers & warp::lanemask_lt() == 0 {
        // SAFETY: valid where `valid` (caller).
        unsafe { arch::atomic_add_u64(far.add(d as usize), peers.count_ones() as u64) };
    }
}

/// Copies every element the sample's rule takes ([`sieve_takes`]) to candidate buffer 0, counts them by
/// their first digit into `state.sieved`, and marks `state.mixed` as [`histogram`] does: the one read of
/// the input where the sample holds ([`sieve_holds`]), which the first histogram and `split` then skip.
/// The hot loop is the key, one compare and one vote per element.
///
/// # Safety
/// `p.input` valid for `p.n` reads; the state as `sample` left it; [`LEVEL_SHARED`] bytes of dynamic
/// shared memory; candidate buffer 0 valid for `p.capacity` entries; a grid of whole warps.
#[inline(always)]
pub unsafe fn sieve<T: TopKElement + Vectorize + Default>(p: TopKParams<T>) {
    // Uniform across the grid.
    if state!(p, sampled) == 0 {
        return;
    }
    let (key_above, limit) = (state!(p, sieve_key), state!(p, sieve_limit));
    let width = first_width(&p);
    // The least first digit of a key the sieve takes (the key above it's, or its own with a limit).
    let low = top_digit::<T>(key_above + (limit == 0) as u64, width);
    // The first digits from `low` up that a block counts in shared memory; digits higher still (far
    // above the sample's key) go to the state, one atomic per digit a warp holds ([`far_tally`]).
    let span = ((1u32 << width) - low).min(BUCKETS as u32);
    // SAFETY: LEVEL_SHARED bytes (caller): the histograms' place, then the warps' areas; the whole block.
    let (window, stages, mut pending) = unsafe {
        let counts = arch::shared::<u32>();
        zero_shared(counts, BUCKETS);
        let (stages, pending) = warp_areas(counts);
        (arch::shared_window(counts), stages, pending)
    };
    // SAFETY: a field of the valid state.
    let sieved = unsafe { (&raw mut (*p.state).sieved).cast::<u64>() };
    // SAFETY: this warp's stage; buffer 0 holds `capacity` (caller), and the stage writes no further.
    let mut kept =
        unsafe { Stage::new(stages, 0, candidates(p.state, 0), buffer(&p, 0), p.capacity) };
    // Whether any two keys differ, as `histogram` marks it, which does not run where the sieve holds:
    // equal input then ends in `fill` after this one read, not in passes over the k buffered.
    // SAFETY: n ≥ k ≥ 1 (caller).
    let reference = unsafe { sampled_key(&p, 0) };
    let mut mixed = false;
    let drain = #[inline(always)]
    |pending: &mut Pending, kept: &mut Stage| {
        // Inlined by force: a closure call in the drain's loop would put the pass's state in local memory.
        let handle = #[inline(always)]
        |key, index, valid| {
            // A valid key is taken, so its first digit is at least `low`.
            let d = top_digit::<T>(key, width).wrapping_sub(low);
            let near = d < span;
            // SAFETY: the whole warp (`drain` calls it so); d < span ≤ BUCKETS counters where counted;
            // the state's `sieved` holds every first digit.
            unsafe {
                tally(window, d, valid && near);
                far_tally(sieved.add(low as usize), d, valid && !near);
                kept.push(valid, key, index);
            }
        };
        // SAFETY: the whole warp (every caller below is warp-uniform).
        unsafe { pending.drain(handle) }
    };
    // SAFETY: the input (caller); `add` and `drain` run warp-uniformly inside `each_key`.
    unsafe {
        each_key(&p, |key, i, ok| {
            mixed |= ok && key != reference;
            if pending.add(ok && sieve_takes::<T>(key, i, key_above, limit), key, i) {
                core::hint::cold_path();
                drain(&mut pending, &mut kept);
            }
        });
        drain(&mut pending, &mut kept);
        kept.flush();
        flush_shared(
            arch::shared::<u32>(),
            sieved.add(low as usize),
            span as usize,
        );
        if warp::any(FULL_MASK, mixed) && lane_id() == 0 {
            arch::atomic_max_u64(&raw mut (*p.state).mixed, 1);
        }
    }
}
