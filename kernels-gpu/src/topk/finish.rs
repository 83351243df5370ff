//! [`finish`]: where the sieve's buffer is short, one block selects the k from it, every digit in turn, in
//! place of the first `pick` (over the first digit's 32768 counters) and a `level` and a `pick` per digit
//! after it, each a launch that waits for the one before.

use reduce_contract::params::TopKParams;
use reduce_contract::topk::{
    BUCKETS, DIGIT_BITS, FINISH_LIST, FINISH_MOST, RUNNING, SAMPLE_HEADER, SELECTED, TopKElement,
    sieve_holds,
};

use super::buffers::buffer;
use super::pick::choose;
use super::{key_bits, tally, zero_shared};
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

/// A composite key ([`reduce_contract::topk::composite`]: the value key above the inverted index) in the
/// narrowest integer that holds it: `u64` where the value key and the index bits fit (4-byte keys of up to
/// 2^32 elements), which takes a third of `u128`'s instructions per shift and compare, and `finish` is
/// bound by its instructions.
trait Composite: Copy {
    /// No digit chosen.
    const ZERO: Self;
    /// The composite key of `(key, index)` with `index_bits` index bits.
    fn of(key: u64, index: u64, index_bits: u32) -> Self;
    /// The `width`-bit digit whose lowest bit is bit `shift`.
    fn digit(self, shift: u32, width: u32) -> u32;
    /// Whether `self` equals `prefix` in every bit from `top` up.
    fn same_above(self, prefix: Self, top: u32) -> bool;
    /// `self` with digit `d` put in at bit `shift` (where `self` is zero).
    fn with(self, d: u32, shift: u32) -> Self;
}

impl Composite for u128 {
    const ZERO: Self = 0;
    #[inline(always)]
    fn of(key: u64, index: u64, index_bits: u32) -> Self {
        reduce_contract::topk::composite(key, index, index_bits)
    }
    #[inline(always)]
    fn digit(self, shift: u32, width: u32) -> u32 {
        reduce_contract::topk::digit(self, shift, width)
    }
    #[inline(always)]
    fn same_above(self, prefix: Self, top: u32) -> bool {
        reduce_contract::topk::same_above(self, prefix, top)
    }
    #[inline(always)]
    fn with(self, d: u32, shift: u32) -> Self {
        self | (d as u128) << (shift & 127)
    }
}

impl Composite for u64 {
    const ZERO: Self = 0;
    #[inline(always)]
    fn of(key: u64, index: u64, index_bits: u32) -> Self {
        // index_bits < 64 here: a key of at least 8 bits fits beside them.
        key << (index_bits & 63) | (!index & ((1u64 << (index_bits & 63)) - 1))
    }
    #[inline(always)]
    fn digit(self, shift: u32, width: u32) -> u32 {
        ((self >> (shift & 63)) & ((1u64 << (width & 63)) - 1)) as u32
    }
    #[inline(always)]
    fn same_above(self, prefix: Self, top: u32) -> bool {
        top >= 64 || (self >> top) == (prefix >> top)
    }
    #[inline(always)]
    fn with(self, d: u32, shift: u32) -> Self {
        self | (d as u64) << (shift & 63)
    }
}

/// Right after the sieve, where it held and buffered at most [`FINISH_MOST`] pairs (buffer 0), and not
/// every key is equal: selects the k from them, as the `pick`s and `level`s would, and marks the select
/// done, so that they (and the first histogram) return at once. Each round counts the chosen bucket's
/// entries by their next digit (11 bits of the composite key, from the top) in shared memory, finds the
/// bucket of the k-th, and selects what lies above it; a round whose entries all fall in one bucket (the
/// top bits of the best values, ties) selects nothing and does not read them again. The chosen bucket's
/// entries go to shared memory once they fit ([`FINISH_LIST`]), and later rounds read them there. One
/// block of whole warps; it steps aside (returns at once) wherever its rules do not hold.
///
/// # Safety
/// The state as the sieve left it; the candidate buffers and output pairs valid (`p.capacity`, `p.k`);
/// one block with [`FINISH_SHARED`](reduce_contract::topk::FINISH_SHARED) bytes of dynamic shared memory.
#[inline(always)]
pub unsafe fn finish<T: TopKElement>(p: TopKParams<T>) {
    // Uniform across the block.
    let len = state!(p, candidates)[0];
    if state!(p, done) != RUNNING
        || !sieve_holds(state!(p, sampled), len, p.k, p.n, p.capacity)
        || len > FINISH_MOST
        || state!(p, mixed) == 0
    {
        return;
    }
    let bits = key_bits::<T>() + p.index_bits;
    // SAFETY: forwarded (the caller's).
    unsafe {
        if bits <= 64 {
            rounds::<T, u64>(&p, len, bits)
        } else {
            rounds::<T, u128>(&p, len, bits)
        }
    }
}

/// [`finish`]'s rounds over `len` buffered pairs, with composite keys of `bits` bits in `C`.
///
/// # Safety
/// As [`finish`], whose rules hold; `bits` fit in `C`.
#[inline(always)]
unsafe fn rounds<T: TopKElement, C: Composite>(p: &TopKParams<T>, len: u64, bits: u32) {
    let ib = p.index_bits;
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
        // SAFETY: the two counters, one writer; the first round's `zero_shared` barrier orders it.
        unsafe {
            counters.write(0);
            counters.add(1).write(0);
        }
    }
    let out = (p.keys, p.indices);
    // SAFETY: the list's keys, then its indices, inside FINISH_SHARED.
    let list = (list, unsafe { list.add(FINISH_LIST as usize) });
    let (keys, indices) = buffer(p, 0);
    let mut from = Entries { keys, indices, len };
    // The digits chosen so far (zero below `shift`), the k still wanted, and the entries inside.
    let (mut prefix, mut shift, mut left, mut inside_len) = (C::ZERO, bits, p.k, len);
    let mut listed_yet = false;
    // Uniform: every thread computes the same rounds from the same words. Composite keys all differ, so
    // the chosen bucket holds exactly what is wanted by the last digit at the latest.
    loop {
        let width = DIGIT_BITS.min(shift);
        let below = shift - width;
        // SAFETY: `1 << width ≤ BUCKETS` counters; the whole block; the last round's reads of them and
        // of the words are done (its sweep after `choose`'s last barrier reads neither).
        unsafe { zero_shared(counts, 1 << width) };
        // SAFETY: the entries (the buffer's, or the list's as written before the last barrier); whole
        // warps; digits of `width` bits index the counters.
        unsafe {
            each_entry(from, |key, index, valid| {
                let c = C::of(key, index, ib);
                tally(
                    window,
                    c.digit(below, width),
                    valid && c.same_above(prefix, shift),
                );
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
        // The chosen bucket's entries number at least `left`, so the counts reach it; never taken.
        if chosen == u64::MAX {
            return;
        }
        let chosen = chosen as u32;
        left -= above;
        // (The last digit's bucket is one key: `count == left`; `below == 0` only ends the loop.)
        let take_all = count == left || below == 0;
        let copy = !listed_yet && !take_all && count <= FINISH_LIST as u64;
        // Every entry inside is in the chosen bucket: nothing to select or copy, and the next round
        // reads the same entries.
        let sweep = copy || take_all || above != 0 || count != inside_len;
        let swept = Entries {
            len: if sweep { from.len } else { 0 },
            ..from
        };
        // SAFETY: as the sweep above; the list holds FINISH_LIST ≥ count entries.
        unsafe {
            each_entry(swept, |key, index, valid| {
                let c = C::of(key, index, ib);
                let inside = valid && c.same_above(prefix, shift);
                let d = c.digit(below, width);
                let select = inside && (d > chosen || (take_all && d == chosen));
                append(outputs, out, 0, p.k, select, key, index);
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
        if take_all {
            break;
        }
        prefix = prefix.with(chosen, below);
        (shift, inside_len) = (below, count);
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
        set_state!(p, count, added);
        set_state!(p, done, SELECTED);
    }
}
