//! [`finish`]: where the sieve's buffer is short, one block selects the rest of the k from it, every digit
//! in turn, in place of a `level` and a `pick` per digit, each a launch that waits for the one before.

use reduce_contract::params::TopKParams;
use reduce_contract::topk::{
    BUCKETS, DIGIT_BITS, FINISH_LIST, FINISH_MOST, RUNNING, SAMPLE_HEADER, SELECTED, TopKElement,
    composite, digit, same_above,
};

use super::buffers::buffer;
use super::pick::choose;
use super::{tally, zero_shared};
use crate::arch::{self, block_dim, lane_id, thread_idx};
use crate::shuffle::shfl_idx;
use crate::warp::{self, FULL_MASK};

/// Entries `finish` reads: the sieve's buffer, or its list in shared memory.
#[derive(Clone, Copy)]
struct Entries {
    keys: *const u64,
    indices: *const u64,
    len: u64,
}

/// Entries each thread loads before it handles them: the buffer's loads come from L2, and one trip of a
/// load each waited on each.
const BATCH: usize = 4;

/// Calls `f(key, index, valid)` on every entry of `e`, a lane each, `valid` false past the last; every
/// call is made by whole warps (trips of [`BATCH`] entries a thread over the block, the same in every lane).
///
/// # Safety
/// `e` valid for `e.len` entries; the block's threads a multiple of 32.
#[inline(always)]
unsafe fn each_entry(e: Entries, mut f: impl FnMut(u64, u64, bool)) {
    let threads = block_dim() as u64;
    let mut first = 0u64;
    while first < e.len {
        let mut pairs = [(0u64, 0u64, false); BATCH];
        reduce_contract::each_index!(U < BATCH, {
            let j = first + U as u64 * threads + thread_idx() as u64;
            if j < e.len {
                // SAFETY: j < len entries (caller).
                pairs[U] = unsafe {
                    (
                        e.keys.add(j as usize).read(),
                        e.indices.add(j as usize).read(),
                        true,
                    )
                };
            }
        });
        reduce_contract::each_index!(U < BATCH, {
            f(pairs[U].0, pairs[U].1, pairs[U].2);
        });
        first += BATCH as u64 * threads;
    }
}

/// Writes `(key, index)` from each lane where `keep` to `keys`/`indices` at `offset` plus a place the shared
/// counter at `counter` (a [`arch::shared_window`] address) hands out, one atomic a warp; places from
/// `room` on are not written.
///
/// # Safety
/// The whole warp calls it together; `keys` and `indices` valid for `room` writes.
#[inline(always)]
unsafe fn append(
    counter: u32,
    out: (*mut u64, *mut u64),
    offset: u64,
    room: u64,
    keep: bool,
    key: u64,
    index: u64,
) {
    // SAFETY: the whole warp is here (caller).
    let kept = unsafe { warp::ballot(FULL_MASK, keep) };
    if kept == 0 {
        return;
    }
    let leader = kept.trailing_zeros();
    let mut base = 0u32;
    if lane_id() == leader {
        // SAFETY: a shared counter (caller).
        base = unsafe { arch::shared_fetch_add_u32(counter, kept.count_ones()) };
    }
    // SAFETY: the whole warp.
    let base = unsafe { shfl_idx(base, leader, 32, FULL_MASK) };
    if keep {
        let at = offset + (base + (kept & warp::lanemask_lt()).count_ones()) as u64;
        if at < room {
            // SAFETY: at < room (caller).
            unsafe {
                out.0.add(at as usize).write(key);
                out.1.add(at as usize).write(index);
            }
        }
    }
}

/// After the first `pick` of a sampled select, where the sieve held and buffered at most [`FINISH_MOST`]
/// pairs (buffer 0): selects the rest of the k from them, as the `level`s and `pick`s would, and marks the
/// select done, so that they return at once. Each round counts the chosen bucket's entries by their next
/// digit (11 bits of the composite key) in shared memory, finds the bucket of the k-th, and selects what
/// lies above it; the first round also selects what lies above the first digit's bucket. The chosen
/// bucket's entries go to shared memory once they fit ([`FINISH_LIST`]), and later rounds read them there.
/// One block of whole warps; it steps aside (returns at once) wherever its rules do not hold.
///
/// # Safety
/// The state as the first `pick` left it; the candidate buffers and output pairs valid (`p.capacity`,
/// `p.k`); one block with [`FINISH_SHARED`](reduce_contract::topk::FINISH_SHARED) bytes of dynamic shared
/// memory.
#[inline(always)]
pub unsafe fn finish<T: TopKElement>(p: TopKParams<T>) {
    // Uniform across the block: the first `pick` chose a bucket of the sieve's buffer.
    if state!(p, done) != RUNNING || state!(p, source) != 1 {
        return;
    }
    let len = state!(p, candidates)[0];
    if len > FINISH_MOST {
        return;
    }
    let ib = p.index_bits;
    let (mut shift, mut left) = (state!(p, shift), state!(p, remaining));
    let mut prefix = (state!(p, prefix)[1] as u128) << 64 | state!(p, prefix)[0] as u128;
    let mut take_all = state!(p, take_all) != 0;
    let selected = state!(p, count);
    // Entries inside the chosen bucket: the sieve's count of the first digit's.
    let bucket = state!(p, bucket) as usize;
    // SAFETY: a counter of the valid state (bucket < 2^first_bits ≤ FIRST_BUCKETS).
    let mut inside_len = unsafe {
        (&raw const (*p.state).sieved)
            .cast::<u64>()
            .add(bucket)
            .read()
    };
    // SAFETY: FINISH_SHARED bytes (caller): the block scan's slots, `choose`'s three words at 512, the
    // output's and the list's counters after them, the round's counters at SAMPLE_HEADER, then the list.
    let (words, counters, counts, list) = unsafe {
        let base = arch::shared::<u8>();
        let counts = base.add(SAMPLE_HEADER as usize).cast::<u32>();
        (
            base.add(512).cast::<u64>(),
            base.add(512 + 24).cast::<u32>(),
            counts,
            counts.add(BUCKETS).cast::<u64>(),
        )
    };
    // SAFETY: shared memory.
    let (window, outputs, listed) = unsafe {
        (
            arch::shared_window(counts),
            arch::shared_window(counters),
            arch::shared_window(counters.add(1)),
        )
    };
    if thread_idx() == 0 {
        // SAFETY: the two counters, one writer; the barrier below (or `zero_shared`'s) orders it.
        unsafe {
            counters.write(0);
            counters.add(1).write(0);
        }
    }
    // SAFETY: every thread reaches it: the counters are zero before any append.
    unsafe { arch::sync_threads() };
    let out = (p.keys, p.indices);
    // SAFETY: the list's keys, then its indices, inside FINISH_SHARED.
    let list = (list, unsafe { list.add(FINISH_LIST as usize) });
    let (keys, indices) = buffer(&p, 0);
    let mut from = Entries { keys, indices, len };
    let mut listed_yet = false;
    if take_all {
        // The first digit's bucket holds exactly the rest: it and everything above it.
        // SAFETY: the buffer's `len` entries; whole warps; the output holds k ≥ every selected.
        unsafe {
            each_entry(from, |key, index, valid| {
                let c = composite(key, index, ib);
                append(
                    outputs,
                    out,
                    selected,
                    p.k,
                    valid && c >= prefix,
                    key,
                    index,
                );
            })
        };
    }
    let mut first = true;
    // Uniform: every thread computes the same rounds from the same words.
    while !take_all && shift > 0 {
        let width = DIGIT_BITS.min(shift);
        let below = shift - width;
        // SAFETY: `1 << width ≤ BUCKETS` counters; the whole block; the last round's reads of them and
        // of the words are done (its sweep after `choose`'s last barrier reads neither).
        unsafe { zero_shared(counts, 1 << width) };
        // SAFETY: the entries (the buffer's, or the list's as written before the last barrier); whole
        // warps; digits of `width` bits index the counters.
        unsafe {
            each_entry(from, |key, index, valid| {
                let c = composite(key, index, ib);
                let inside = valid && same_above(c, prefix, shift);
                tally(window, digit(c, below, width), inside);
                if first {
                    // What lies above the first digit's bucket (the prefix is zero below it).
                    append(
                        outputs,
                        out,
                        selected,
                        p.k,
                        valid && !inside && c > prefix,
                        key,
                        index,
                    );
                }
            })
        };
        // SAFETY: the whole block; the counts as tallied above; the words of the last round read before
        // `zero_shared`'s barrier.
        let (chosen, above, count) = unsafe {
            choose(words, 1 << width, left, |b| {
                // SAFETY: b < 1 << width counters.
                counts.add(b).read() as u64
            })
        };
        // The chosen bucket holds at least `left` entries, so the counts reach it; never taken.
        if chosen == u64::MAX {
            return;
        }
        left -= above;
        take_all = count == left;
        let chosen = chosen as u32;
        let copy = !listed_yet && !take_all && count <= FINISH_LIST as u64;
        // Every entry inside is in the chosen bucket (ties, where the value's digits all agree): nothing
        // to select or copy, and the next round reads the same entries.
        let sweep = copy || take_all || above != 0 || count != inside_len;
        inside_len = count;
        let swept = Entries {
            len: if sweep { from.len } else { 0 },
            ..from
        };
        // SAFETY: as the sweep above; the list holds FINISH_LIST ≥ count entries.
        unsafe {
            each_entry(swept, |key, index, valid| {
                let c = composite(key, index, ib);
                let inside = valid && same_above(c, prefix, shift);
                let d = digit(c, below, width);
                let select = inside && (d > chosen || (take_all && d == chosen));
                append(outputs, out, selected, p.k, select, key, index);
                if copy {
                    append(
                        listed,
                        list,
                        0,
                        FINISH_LIST as u64,
                        inside && d == chosen,
                        key,
                        index,
                    );
                }
            })
        };
        prefix |= (chosen as u128) << below;
        shift = below;
        first = false;
        if copy {
            // SAFETY: every thread reaches it: the list is written before the next round reads it.
            unsafe { arch::sync_threads() };
            from = Entries {
                keys: list.0,
                indices: list.1,
                len: count,
            };
            listed_yet = true;
        }
    }
    // SAFETY: every thread reaches it: every append is done before the count is read.
    unsafe { arch::sync_threads() };
    if thread_idx() == 0 {
        // SAFETY: the output counter, written before the barrier above.
        let added = unsafe { counters.read() } as u64;
        set_state!(p, count, selected + added);
        set_state!(p, done, SELECTED);
    }
}
