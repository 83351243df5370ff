//! Top-k (device-wide): a radix select over composite keys that reads the input about twice, then a sort
//! of the k selected. The rule, the keys and the order of the passes are the contract's
//! ([`reduce_contract::topk`]); this holds the kernel bodies.
//!
//! - [`sample`] and [`sieve`], where the host starts with a sample: a key that about a few times k·(sample
//!   / n) sampled elements reach, and one pass that buffers every element reaching it.
//! - [`histogram`]: the first digit of every value key, per block in shared memory, then into the state;
//!   and whether any two keys differ.
//! - [`pick`]: one block scans a histogram from the top, finds the bucket of the k-th key, and decides
//!   where the next [`level`] reads and whether it buffers.
//! - [`split`] (after the first digit) and [`level`] (after the others, and after the first where the
//!   sieve's buffer holds the candidates): one pass over the input or a candidate buffer ([`Pass`]):
//!   selects what lies above the chosen bucket, counts the chosen bucket's entries by their next digit
//!   (and their index's top digit), and copies them to the other buffer.
//! - [`fill`]: the answer when every key is equal, the first k elements.
//! - [`sort`] (k ≤ [`SORT_TILE`]): one block sorts the selected pairs in shared memory and writes the
//!   results; [`sort_block`], [`merge`] and [`gather`] for larger k: sorted runs of [`SORT_TILE`], merged
//!   pairwise (merge path), then the results.
use crate::op::Plus;
use reduce_contract::params::TopKParams;
use reduce_contract::topk::{
    ALL_EQUAL, BUCKETS, DIGIT_BITS, FROM_INPUT, MERGE_ITEMS, PENDING, RUNNING, SAMPLE,
    SAMPLE_HEADER, SAMPLE_MOST, SAMPLE_THREADS, SELECTED, SORT_TILE, STAGE, State, THREADS,
    TopKElement, before, composite, digit, same_above, sample_position, sample_target, sieve_holds,
    value_key,
};

use crate::arch::{self, block_dim, global_thread_idx, grid_threads, lane_id, thread_idx};
use crate::block_scan;
use crate::shuffle::shfl_idx;
use crate::thread::{self, Vectorize};
use crate::tile::Tile;
use crate::warp::{self, FULL_MASK};

/// Reads element `i`.
///
/// # Safety
/// `i < p.n`, and `p.input` valid for `p.n` reads.
#[inline(always)]
unsafe fn element<T: Copy>(p: &TopKParams<T>, i: u64) -> T {
    // SAFETY: the caller.
    unsafe { p.input.add(i as usize).read() }
}

/// Calls `f(key, index, valid)` with the value key of each element of this thread's grid-stride share of
/// the input: [`thread::for_each`] (warp-uniform calls) with the key the passes over the input compare.
///
/// # Safety
/// `p.input` valid for `p.n` reads; a grid of whole warps.
#[inline(always)]
unsafe fn each_key<T: TopKElement + Vectorize + Default>(
    p: &TopKParams<T>,
    mut f: impl FnMut(u64, u64, bool),
) {
    let largest = p.largest != 0;
    // SAFETY: the input (caller); `threads` a multiple of 32.
    unsafe {
        thread::for_each(
            p.input,
            p.n,
            global_thread_idx(),
            grid_threads(),
            #[inline(always)]
            |x, i, ok| f(value_key(x, largest), i, ok),
        )
    }
}

/// Reads a field of the state (a plain load: earlier kernels of the stream wrote it).
macro_rules! state {
    ($p:expr, $field:ident) => {
        // SAFETY: the state is valid for the whole select (every kernel's caller).
        unsafe { (&raw const (*$p.state).$field).read() }
    };
}

/// Writes a field of the state; one thread of the grid at a time.
macro_rules! set_state {
    ($p:expr, $field:ident, $value:expr) => {
        // SAFETY: valid (as above); the callers write from one thread, read by later kernels only.
        unsafe { (&raw mut (*$p.state).$field).write($value) }
    };
}

/// Adds one to the shared counter of `bucket` for each lane where `valid`; a warp whose lanes all count
/// the same bucket adds 32 once, so all-equal data does not queue 32 atomics on one word.
///
/// # Safety
/// The whole warp calls it together; `counts` is a [`arch::shared_window`] address of counters that
/// `bucket` indexes in range wherever `valid`.
#[inline(always)]
unsafe fn tally(counts: u32, bucket: u32, valid: bool) {
    // SAFETY: the whole warp is here (caller).
    let first = unsafe { shfl_idx(bucket, 0, 32, FULL_MASK) };
    // SAFETY: as above.
    if unsafe { warp::all(FULL_MASK, valid && bucket == first) } {
        if lane_id() == 0 {
            // SAFETY: in range (caller).
            unsafe { arch::shared_add_u32(counts + 4 * first, 32) };
        }
    } else if valid {
        // SAFETY: in range (caller).
        unsafe { arch::shared_add_u32(counts + 4 * bucket, 1) };
    }
}

/// Writes each voting lane's `(key, index)` after the `len` pairs at `keys`/`indices`, in lane order
/// (`kept` is the warp's ballot of `keep`), and returns the new length: the append of a warp's
/// shared-memory pair lists ([`Stage`], and [`Pass`]'s pending pairs).
///
/// # Safety
/// Room for `len + kept.count_ones()` pairs at `keys`/`indices`.
#[inline(always)]
unsafe fn put(
    keys: *mut u64,
    indices: *mut u64,
    len: u32,
    kept: u32,
    keep: bool,
    key: u64,
    index: u64,
) -> u32 {
    if keep {
        let at = (len + (kept & warp::lanemask_lt()).count_ones()) as usize;
        // SAFETY: at < len + popc, inside the room (caller).
        unsafe {
            keys.add(at).write(key);
            indices.add(at).write(index);
        }
    }
    len + kept.count_ones()
}

/// A warp's staging area for appended `(key, index)` pairs: lanes add their pairs in shared memory, and a
/// full stage goes out with one atomic on the output's counter and coalesced stores. Appending straight to
/// the output would take an atomic on one global counter per warp and element step: on data where many
/// elements land in the chosen bucket, millions of atomics on one address.
struct Stage {
    /// `STAGE` keys, then `STAGE` indices, in this warp's part of shared memory.
    keys: *mut u64,
    indices: *mut u64,
    /// Pairs staged (the same in every lane).
    len: u32,
    /// The output's counter and arrays, and the entries the arrays hold: pairs the counter hands out past
    /// them are counted but not written (the sieve's overflow, which makes it step aside).
    counter: *mut u64,
    out_keys: *mut u64,
    out_indices: *mut u64,
    room: u64,
    /// The counter has passed `room`: later stages are dropped without an atomic (the count already
    /// says the output overflowed; a misjudged sieve would otherwise add on one word for the rest of the
    /// input).
    full: bool,
}

impl Stage {
    /// Stage `i` (0 or 1) of this warp, at `base`: `2 · warps` stages of `STAGE` pairs, going out to
    /// `out`, `room` pairs long.
    ///
    /// # Safety
    /// `base` valid shared memory for the stages of every warp of the block.
    #[inline(always)]
    unsafe fn new(
        base: *mut u64,
        i: u32,
        counter: *mut u64,
        out: (*mut u64, *mut u64),
        room: u64,
    ) -> Self {
        let at = (2 * arch::warp_id() + i) * 2 * STAGE;
        // SAFETY: inside the stages (caller).
        let keys = unsafe { base.add(at as usize) };
        Stage {
            keys,
            // SAFETY: as above.
            indices: unsafe { keys.add(STAGE as usize) },
            len: 0,
            counter,
            out_keys: out.0,
            out_indices: out.1,
            room,
            full: false,
        }
    }

    /// Appends `(key, index)` from each lane where `keep`.
    ///
    /// # Safety
    /// The whole warp calls it together; the output valid for `room` pairs.
    #[inline(always)]
    unsafe fn push(&mut self, keep: bool, key: u64, index: u64) {
        // SAFETY: the whole warp is here (caller).
        let kept = unsafe { warp::ballot(FULL_MASK, keep) };
        if kept == 0 {
            return;
        }
        if self.len + kept.count_ones() > STAGE {
            // SAFETY: as above (the condition is the same in every lane).
            unsafe { self.flush() };
        }
        // SAFETY: len + popc ≤ STAGE (flushed above otherwise).
        self.len = unsafe { put(self.keys, self.indices, self.len, kept, keep, key, index) };
    }

    /// Copies the staged pairs out and empties the stage.
    ///
    /// # Safety
    /// As [`push`](Self::push).
    #[inline(always)]
    unsafe fn flush(&mut self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: the whole warp (caller): the lanes' shared writes are seen by every lane after this.
        unsafe { warp::sync_warp(FULL_MASK) };
        if self.full {
            // SAFETY: the whole warp; no lane reads the stage here.
            unsafe { warp::sync_warp(FULL_MASK) };
            self.len = 0;
            return;
        }
        let mut base = 0u64;
        if lane_id() == 0 {
            // SAFETY: a valid global counter (caller).
            base = unsafe { arch::atomic_add_u64(self.counter, self.len as u64) };
        }
        // SAFETY: the whole warp.
        let base = unsafe { shfl_idx(base, 0, 32, FULL_MASK) };
        self.full = base + self.len as u64 > self.room;
        let mut j = lane_id();
        while j < self.len && base + (j as u64) < self.room {
            // SAFETY: j < len staged pairs; at < room, inside the output (caller).
            unsafe {
                let at = (base + j as u64) as usize;
                self.out_keys
                    .add(at)
                    .write(self.keys.add(j as usize).read());
                self.out_indices
                    .add(at)
                    .write(self.indices.add(j as usize).read());
            }
            j += 32;
        }
        // SAFETY: the whole warp: every lane has read the stage before any lane refills it.
        unsafe { warp::sync_warp(FULL_MASK) };
        self.len = 0;
    }
}

/// Folds the warp's least and greatest keys into the state's `not_least` (the least's complement, so
/// that zero means "none yet" for both) and `greatest`.
///
/// # Safety
/// The whole warp calls it together; the state valid.
#[inline(always)]
unsafe fn extremes(state: *mut State, lo: u64, hi: u64) {
    // SAFETY: the whole warp is here (caller).
    let (lo, hi) = unsafe {
        (
            warp::min_u64(lo, 32, FULL_MASK),
            !warp::min_u64(!hi, 32, FULL_MASK),
        )
    };
    if lane_id() == 0 && lo <= hi {
        // SAFETY: valid (caller).
        unsafe {
            arch::atomic_max_u64(&raw mut (*state).not_least, !lo);
            arch::atomic_max_u64(&raw mut (*state).greatest, hi);
        }
    }
}

/// Zeroes `len` shared counters at `counts`, then waits for the block.
///
/// # Safety
/// `counts` valid shared memory for `len` `u32`s; the whole block calls it.
#[inline(always)]
unsafe fn zero_shared(counts: *mut u32, len: usize) {
    let mut b = thread_idx() as usize;
    while b < len {
        // SAFETY: b < len.
        unsafe { counts.add(b).write(0) };
        b += block_dim() as usize;
    }
    // SAFETY: every thread reaches this barrier.
    unsafe { arch::sync_threads() };
}

/// Waits for the block, then adds the `len` shared counters at `counts` into `out`, skipping zeros.
///
/// # Safety
/// As [`zero_shared`]; `out` valid global memory for `len` `u64`s.
#[inline(always)]
unsafe fn flush_shared(counts: *const u32, out: *mut u64, len: usize) {
    // SAFETY: every thread reaches this barrier.
    unsafe { arch::sync_threads() };
    let mut b = thread_idx() as usize;
    while b < len {
        // SAFETY: b < len in both.
        unsafe {
            let c = counts.add(b).read();
            if c != 0 {
                arch::atomic_add_u64(out.add(b), c as u64);
            }
        }
        b += block_dim() as usize;
    }
}

/// Bits of the value keys of `T`.
#[inline(always)]
const fn key_bits<T: TopKElement>() -> u32 {
    8 * T::KEY_BYTES
}

/// The first digit's width for `T` (the device's, at most the key's bits).
#[inline(always)]
fn first_width<T: TopKElement>(p: &TopKParams<T>) -> u32 {
    p.first_bits.min(key_bits::<T>())
}

/// Counts the first digit of every value key into `state.first`, and marks `state.mixed` if any two keys
/// differ.
///
/// # Safety
/// `p.input` valid for `p.n` reads, the state's `first` and `mixed` zeroed; `4 << first_bits` bytes
/// of dynamic shared memory; a grid of whole warps.
#[inline(always)]
pub unsafe fn histogram<T: TopKElement + Vectorize + Default>(p: TopKParams<T>) {
    // Uniform across the grid: the sieve's buffer already holds every element the select needs.
    if sieve_holds(
        state!(p, sampled),
        state!(p, candidates)[0],
        p.k,
        p.n,
        p.capacity,
    ) {
        return;
    }
    let width = first_width(&p);
    let buckets = 1usize << width;
    // SAFETY: 4 << first_bits bytes of dynamic shared memory (caller).
    let counts = unsafe { arch::shared::<u32>() };
    // SAFETY: the whole block; `buckets` counters.
    unsafe { zero_shared(counts, buckets) };
    // SAFETY: shared memory.
    let window = unsafe { arch::shared_window(counts) };
    let largest = p.largest != 0;
    // Every key is compared with the first element's: all equal is the one case the histogram alone
    // decides, and a compare is cheaper than a running least and greatest.
    // SAFETY: n ≥ k ≥ 1 (caller).
    let reference = value_key(unsafe { element(&p, 0) }, largest);
    let mut mixed = false;
    // A run of equal buckets in this thread's elements is counted with one atomic when it ends: equal
    // and sorted data, whose warps would all hit one counter, add once per run instead.
    let (mut run, mut length) = (0u32, 0u32);
    // SAFETY: the input (caller); a key's top `width` bits are below `buckets`, the counters' range.
    unsafe {
        each_key(&p, |key, _, ok| {
            let bucket = top_digit::<T>(key, width);
            mixed |= ok && key != reference;
            if ok && bucket == run {
                length += 1;
            } else if ok {
                if length != 0 {
                    arch::shared_add_u32(window + 4 * run, length);
                }
                (run, length) = (bucket, 1);
            }
        });
        if length != 0 {
            arch::shared_add_u32(window + 4 * run, length);
        }
    }
    // SAFETY: the state's first histogram has FIRST_BUCKETS ≥ buckets counters; the whole block.
    unsafe {
        flush_shared(counts, (&raw mut (*p.state).first).cast::<u64>(), buckets);
        if warp::any(FULL_MASK, mixed) && lane_id() == 0 {
            arch::atomic_max_u64(&raw mut (*p.state).mixed, 1);
        }
    }
}

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
/// of the input. The target-th greatest sampled key is found as `pick` finds its bucket, in two rounds (its
/// first digit, then the [`DIGIT_BITS`] below it), and cut to those digits:
/// - where at most [`SAMPLE_MOST`] sampled keys reach the cut key, the sieve takes every element at or
///   above it;
/// - where more do, but every sampled key in its bucket is one value (repeated values, NaN), the sieve
///   takes the elements above that value and those equal to it up to the position of the sampled one
///   that reaches the target: composite keys, so ties cost no more than distinct values;
/// - otherwise (a narrow band of distinct values, or ties of 8-byte keys, which the short keys kept
///   cannot tell from one) nothing, and the histogram runs.
///
/// One block.
///
/// # Safety
/// `p.input` valid for `p.n ≥ SAMPLE` reads; `p.state` zeroed; one block of [`SAMPLE_THREADS`] threads
/// with [`sample_shared`](reduce_contract::topk::sample_shared) bytes of dynamic shared memory for
/// `p.first_bits`.
#[inline(always)]
pub unsafe fn sample<T: TopKElement>(p: TopKParams<T>) {
    let width = first_width(&p);
    let lower = key_bits::<T>() - width;
    let second = DIGIT_BITS.min(lower);
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
    // SAFETY: the counters as zeroed and filled below, at most `1 << width` of them.
    let read = |b: usize| unsafe { counts.add(b).read() } as u64;
    // Finds the bucket of `wanted` among `buckets` counters and gives the whole block its
    // `(bucket, above, count)`; `u64::MAX` as the bucket where the counts do not reach `wanted`.
    let choose = |buckets: usize, wanted: u64| {
        let carry = |b: usize, above: u64, count: u64| {
            // SAFETY: the three words, one writer.
            unsafe {
                words.write(b as u64);
                words.add(1).write(above);
                words.add(2).write(count);
            }
        };
        // SAFETY: the whole block calls `choose`: the barriers order the counts before `locate`
        // reads them, and the words' writes before the block reads them; thread 0's mark goes before
        // the first barrier, and every thread has read the words before the next call's mark (the
        // counts are zeroed and filled, with barriers, between two calls).
        unsafe {
            if thread_idx() == 0 {
                words.write(u64::MAX);
            }
            arch::sync_threads();
            locate(buckets, wanted, read, carry);
            arch::sync_threads();
            (words.read(), words.add(1).read(), words.add(2).read())
        }
    };
    // This thread's sampled keys, `t, t + SAMPLE_THREADS, …`, every load issued before the first count
    // (unrolled: the array is registers), each kept as its top 32 bits (`short`): all of a key of up to 4
    // bytes, and both digits of an 8-byte one (sixteen whole 8-byte keys took the kernel to 128
    // registers, the most a block of 512 threads may have).
    const EACH: usize = (SAMPLE / SAMPLE_THREADS as u64) as usize;
    let kept = key_bits::<T>().min(32);
    let short = |key: u64| (key >> (key_bits::<T>() - kept)) as u32;
    let mut keys = [0u32; EACH];
    reduce_contract::each_index!(J < EACH, {
        // SAFETY: t + J · SAMPLE_THREADS < SAMPLE ≤ n (a block of SAMPLE_THREADS, caller).
        keys[J] = short(unsafe {
            sampled_key(
                &p,
                thread_idx() as u64 + (J * SAMPLE_THREADS as usize) as u64,
            )
        });
    });
    // Round one: every sampled key's first digit.
    // SAFETY: `1 << width` counters; the whole block.
    unsafe { zero_shared(counts, 1 << width) };
    reduce_contract::each_index!(J < EACH, {
        // SAFETY: the whole warp; a key's top `width` bits index the counters.
        unsafe { tally(window, keys[J] >> (kept - width), true) };
    });
    let (first, above, count) = choose(1 << width, target);
    // Uniform across the block: the sample has fewer than `target` keys (not where `samples` holds).
    if first == u64::MAX {
        return;
    }
    // The cut key, the bits below its digits, the sampled keys above its bucket and in it.
    let (cut, below, above, count) = if second == 0 {
        (first << lower, lower, above, count)
    } else {
        // Round two: the next digit of the sampled keys in the chosen first bucket.
        let below = lower - second;
        // SAFETY: `1 << second ≤ BUCKETS` counters; the whole block, past `choose`'s last barrier.
        unsafe { zero_shared(counts, 1 << second) };
        // Where the digits are in the short keys.
        let (short_lower, short_below) = (kept - width, kept - width - second);
        reduce_contract::each_index!(J < EACH, {
            let digit = (keys[J] >> short_below) & ((1 << second) - 1);
            // SAFETY: the whole warp; a digit of `second` bits indexes the counters.
            unsafe { tally(window, digit, (keys[J] >> short_lower) as u64 == first) };
        });
        let (digit, at, count) = choose(1 << second, target - above);
        (first << lower | digit << below, below, above + at, count)
    };
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
    // above the sample's key, rare) go to the state one atomic each.
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
                if valid && !near {
                    arch::atomic_add_u64(sieved.add((d + low) as usize), 1);
                }
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
unsafe fn locate(
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

/// Candidate buffer `i`'s keys and indices. (A branch, not an index into the parameters: a parameter
/// array indexed at run time is copied to local memory.)
#[inline(always)]
fn buffer<T>(p: &TopKParams<T>, i: usize) -> (*mut u64, *mut u64) {
    if i == 0 {
        (p.candidate_keys[0], p.candidate_indices[0])
    } else {
        (p.candidate_keys[1], p.candidate_indices[1])
    }
}

/// Candidate buffer `i`'s entry counter in the state (0 or 1, by a branch: no bounds check).
///
/// # Safety
/// `state` valid.
#[inline(always)]
unsafe fn candidates(state: *mut State, i: usize) -> *mut u64 {
    // SAFETY: valid (caller); both places exist.
    unsafe {
        if i == 0 {
            &raw mut (*state).candidates[0]
        } else {
            &raw mut (*state).candidates[1]
        }
    }
}

/// The `State::source` code of the buffer a level reading `source` copies into: buffer 0 (code 1) from
/// the input or buffer 1, buffer 1 (code 2) from buffer 0.
#[inline(always)]
fn destination(source: u32) -> u32 {
    if source == 1 { 2 } else { 1 }
}

/// The warps' areas of a [`LEVEL_SHARED`](reduce_contract::topk::LEVEL_SHARED) layout whose two
/// histograms start at `counts`: the stages of every warp (for [`Stage::new`]), and this warp's
/// pending pairs.
///
/// # Safety
/// `counts` the start of `LEVEL_SHARED` bytes of shared memory.
#[inline(always)]
unsafe fn warp_areas(counts: *mut u32) -> (*mut u64, Pending) {
    // SAFETY: the stages follow the two histograms, the pending pairs the stages (LEVEL_SHARED): this
    // warp's PENDING keys, then as many indices.
    unsafe {
        let stages = counts.add(2 * BUCKETS).cast::<u64>();
        let warps = (THREADS / 32) as usize;
        let keys = stages
            .add(warps * 4 * STAGE as usize)
            .add(arch::warp_id() as usize * 2 * PENDING as usize);
        (
            stages,
            Pending {
                keys,
                indices: keys.add(PENDING as usize),
                len: 0,
            },
        )
    }
}

/// A warp's pairs set aside in shared memory as its lanes meet them, [`PENDING`] at most, to be handled
/// in bulk: what a pass sets aside is rare on the input, and handling each pair where it is met would put
/// the handling's code in the hot loop.
struct Pending {
    keys: *mut u64,
    indices: *mut u64,
    /// Pairs pending (the same in every lane).
    len: u32,
}

impl Pending {
    /// Sets aside `(key, index)` from each lane where `wanted`; returns whether the list is too full for
    /// another round (then [`drain`](Self::drain) it).
    ///
    /// # Safety
    /// The whole warp calls it together, and drains before another call when told.
    #[inline(always)]
    unsafe fn add(&mut self, wanted: bool, key: u64, index: u64) -> bool {
        // SAFETY: the whole warp is here (caller).
        let set = unsafe { warp::ballot(FULL_MASK, wanted) };
        if set == 0 {
            return false;
        }
        // SAFETY: len + popc ≤ PENDING (drained before it could pass, caller).
        self.len = unsafe { put(self.keys, self.indices, self.len, set, wanted, key, index) };
        self.len > PENDING - 32
    }

    /// Calls `f(key, index, valid)` on the pending pairs, a pair per lane in rounds of the whole warp
    /// (`valid` false past the last), then empties the list.
    ///
    /// # Safety
    /// The whole warp calls it together.
    #[inline(always)]
    unsafe fn drain(&mut self, mut f: impl FnMut(u64, u64, bool)) {
        // SAFETY: the whole warp (caller): every lane's pending writes are seen by every lane after this.
        unsafe { warp::sync_warp(FULL_MASK) };
        let mut base = 0;
        while base < self.len {
            let j = base + lane_id();
            let valid = j < self.len;
            // SAFETY: j < len entries, written before the sync above.
            let (key, index) = if valid {
                unsafe {
                    (
                        self.keys.add(j as usize).read(),
                        self.indices.add(j as usize).read(),
                    )
                }
            } else {
                (0, 0)
            };
            f(key, index, valid);
            base += 32;
        }
        // SAFETY: the whole warp: every lane has read its entry before any lane refills the list.
        unsafe { warp::sync_warp(FULL_MASK) };
        self.len = 0;
    }
}

/// What one pass over the chosen bucket's entries shares between its elements: the chosen digit, and
/// where the pass puts what it finds (shared-memory counts, two warp stages, the least and greatest key).
struct Pass {
    index_bits: u32,
    shift: u32,
    width: u32,
    bucket: u32,
    take_all: bool,
    capture: bool,
    next_width: u32,
    count_index: bool,
    next_counts: u32,
    index_counts: u32,
    sure: Stage,
    kept: Stage,
    pending: Pending,
    lo: u64,
    hi: u64,
}

impl Pass {
    /// Reads the state as `pick` left it and zeroes the shared counts; the buffer the chosen entries go
    /// to is the other one than `source`'s.
    ///
    /// # Safety
    /// The whole block calls it; [`LEVEL_SHARED`](reduce_contract::topk::LEVEL_SHARED) bytes of dynamic
    /// shared memory; the pair and candidate buffers valid for `p.k` and `p.capacity` entries.
    #[inline(always)]
    unsafe fn new<T>(p: &TopKParams<T>) -> Pass {
        let ib = p.index_bits;
        let shift = state!(p, shift);
        // SAFETY: LEVEL_SHARED bytes of dynamic shared memory (caller): two histograms, then the stages;
        // the whole block.
        let counts = unsafe { arch::shared::<u32>() };
        unsafe { zero_shared(counts, 2 * BUCKETS) };
        // SAFETY: shared memory.
        let window = unsafe { arch::shared_window(counts) };
        let dst = destination(state!(p, source)) as usize - 1;
        // SAFETY: LEVEL_SHARED bytes (caller); the state is valid; fewer than k pairs are selected before
        // the last level, exactly k in all; at most `capacity` are buffered when `capture` (pick's rule).
        let (sure, kept, pending) = unsafe {
            let (stages, pending) = warp_areas(counts);
            (
                Stage::new(
                    stages,
                    0,
                    &raw mut (*p.state).count,
                    (p.keys, p.indices),
                    p.k,
                ),
                Stage::new(
                    stages,
                    1,
                    candidates(p.state, dst),
                    buffer(p, dst),
                    p.capacity,
                ),
                pending,
            )
        };
        Pass {
            index_bits: ib,
            shift,
            width: state!(p, width),
            bucket: state!(p, bucket),
            take_all: state!(p, take_all) != 0,
            capture: state!(p, capture) != 0,
            next_width: state!(p, next_width),
            count_index: shift > ib,
            next_counts: window,
            index_counts: window + 4 * BUCKETS as u32,
            sure,
            kept,
            pending,
            lo: u64::MAX,
            hi: 0,
        }
    }

    /// Takes one entry per lane: `d` is its digit at the chosen position, `inside` whether it is in the
    /// pass at all (valid, and in the chosen buckets of the digits above). Entries at or above the chosen
    /// bucket are set aside, and handled [`PENDING`] at a time ([`drain`](Self::drain)).
    ///
    /// # Safety
    /// The whole warp calls it together.
    #[inline(always)]
    unsafe fn visit(&mut self, key: u64, index: u64, inside: bool, d: u32) {
        // SAFETY: the whole warp is here (caller); drained when told.
        if unsafe { self.pending.add(inside && d >= self.bucket, key, index) } {
            core::hint::cold_path();
            // SAFETY: the whole warp (the condition is the same in every lane).
            unsafe { self.drain() };
        }
    }

    /// Handles the pending entries, a lane each: selects what lies above the chosen bucket (or in it,
    /// when `take_all`); counts, folds and buffers what lies in it.
    ///
    /// # Safety
    /// The whole warp calls it together.
    #[inline(always)]
    unsafe fn drain(&mut self) {
        let ib = self.index_bits;
        let index_width = DIGIT_BITS.min(ib);
        let (shift, width, bucket, take_all) = (self.shift, self.width, self.bucket, self.take_all);
        // Inlined by force: a closure call in the drain's loop would put the pass's state in local memory.
        let handle = #[inline(always)]
        |key, index, valid| {
            let c = composite(key, index, ib);
            let d = digit(c, shift, width);
            let select = valid && (d > bucket || (take_all && d == bucket));
            let chosen = valid && !take_all && d == bucket;
            // SAFETY: the whole warp is here (`drain` calls it so); the stages' outputs have room
            // (`new`); digits of `next_width`, `index_width` ≤ DIGIT_BITS bits index the counters.
            unsafe {
                self.sure.push(select, key, index);
                if warp::any(FULL_MASK, chosen) {
                    if chosen {
                        self.lo = self.lo.min(key);
                        self.hi = self.hi.max(key);
                    }
                    tally(
                        self.next_counts,
                        digit(c, shift - self.next_width, self.next_width),
                        chosen,
                    );
                    if self.count_index {
                        tally(
                            self.index_counts,
                            digit(c, ib - index_width, index_width),
                            chosen,
                        );
                    }
                    self.kept.push(self.capture && chosen, key, index);
                }
            }
        };
        // SAFETY: the whole warp (caller).
        unsafe { self.pending.drain(handle) };
    }

    /// Copies out the stages and adds the block's counts and extremes into the state.
    ///
    /// # Safety
    /// The whole block calls it; the state valid.
    #[inline(always)]
    unsafe fn finish(mut self, state: *mut State) {
        // SAFETY: the whole warp; the outputs have room (`new`).
        unsafe {
            self.drain();
            self.sure.flush();
            self.kept.flush();
        }
        // SAFETY: the state's histograms have BUCKETS counters each; the whole block.
        unsafe {
            let shared = arch::shared::<u32>();
            flush_shared(shared, (&raw mut (*state).next).cast::<u64>(), BUCKETS);
            if self.count_index {
                flush_shared(
                    shared.add(BUCKETS),
                    (&raw mut (*state).index).cast::<u64>(),
                    BUCKETS,
                );
            }
            extremes(state, self.lo, self.hi);
        }
    }
}

/// The first digit's `width` top bits of `key`, in 32-bit arithmetic where the key fits.
#[inline(always)]
fn top_digit<T: TopKElement>(key: u64, width: u32) -> u32 {
    let drop = key_bits::<T>() - width;
    if T::KEY_BYTES <= 4 {
        (key as u32) >> drop
    } else {
        (key >> drop) as u32
    }
}

/// The pass over the input after the first histogram: every element against the first digit's chosen
/// bucket, with nothing above it to match ([`Pass::visit`]). The hot loop is the key, one shift and one
/// vote per element.
///
/// # Safety
/// `p.input` valid for `p.n` reads; the state as `pick` left it at level 0; as [`Pass::new`]; a grid of
/// whole warps.
#[inline(always)]
pub unsafe fn split<T: TopKElement + Vectorize + Default>(p: TopKParams<T>) {
    // After the sieve, the first digit's pass reads its buffer: `level`'s work.
    if state!(p, done) != RUNNING || state!(p, source) != FROM_INPUT {
        return;
    }
    // SAFETY: the whole block (caller).
    let mut pass = unsafe { Pass::new(&p) };
    let width = pass.width;
    // SAFETY: the input (caller); `visit` runs warp-uniformly inside `each_key`.
    unsafe {
        each_key(&p, |key, i, ok| {
            pass.visit(key, i, ok, top_digit::<T>(key, width));
        });
        pass.finish(p.state);
    }
}

/// A later pass over the chosen bucket's entries: a candidate buffer, or the input again when the bucket
/// was too large to buffer (each element then matched against every chosen digit above).
///
/// # Safety
/// As [`split`], at any later level.
#[inline(always)]
pub unsafe fn level<T: TopKElement + Vectorize + Default>(p: TopKParams<T>) {
    // The first digit's pass over the input is `split`'s.
    if state!(p, done) != RUNNING || (p.level == 0 && state!(p, source) == FROM_INPUT) {
        return;
    }
    // SAFETY: the whole block (caller).
    let mut pass = unsafe { Pass::new(&p) };
    let (ib, shift, width) = (p.index_bits, pass.shift, pass.width);
    let prefix = (state!(p, prefix)[1] as u128) << 64 | state!(p, prefix)[0] as u128;
    let source = state!(p, source);
    if source == FROM_INPUT {
        // SAFETY: the input (caller); `visit` runs warp-uniformly inside `each_key`.
        unsafe {
            each_key(&p, |key, i, ok| {
                let c = composite(key, i, ib);
                let inside = ok && same_above(c, prefix, shift + width);
                pass.visit(key, i, inside, digit(c, shift, width));
            })
        };
    } else {
        let (keys, indices) = buffer(&p, source as usize - 1);
        // SAFETY: the state is valid; the buffer's count was written by the previous level.
        let len = unsafe { candidates(p.state, source as usize - 1).read() };
        // Warp-uniform trips: every lane takes part in each collective.
        let mut first = global_thread_idx() - lane_id() as u64;
        while first < len {
            let j = first + lane_id() as u64;
            let valid = j < len;
            // SAFETY: j < len entries of the buffer.
            let (key, index) = if valid {
                unsafe { (keys.add(j as usize).read(), indices.add(j as usize).read()) }
            } else {
                (0, 0)
            };
            // SAFETY: the whole warp is here.
            unsafe {
                pass.visit(
                    key,
                    index,
                    valid,
                    digit(composite(key, index, ib), shift, width),
                )
            };
            first += grid_threads();
        }
    }
    // SAFETY: the whole block; the state is valid.
    unsafe { pass.finish(p.state) };
}

/// Writes the first k elements and their indices: every key is equal, so they are the answer, in order.
///
/// # Safety
/// `p.input` valid for `p.n ≥ p.k` reads, the outputs for `p.k` writes.
#[inline(always)]
pub unsafe fn fill<T: Copy>(p: TopKParams<T>) {
    if state!(p, done) != ALL_EQUAL {
        return;
    }
    let mut j = global_thread_idx();
    while j < p.k {
        // SAFETY: j < k ≤ n.
        unsafe { write_result(&p, j, j) };
        j += grid_threads();
    }
}

/// The pairs of a block's tile, sorted in shared memory (bitonic), `len` of them from `keys`/`indices`,
/// padded to the power of two `size` with pairs that sort last.
///
/// # Safety
/// `len ≤ size ≤ SORT_TILE`, `size` a power of two; `keys`/`indices` valid for `len` reads; `2 · size`
/// `u64`s of dynamic shared memory; the whole block calls it.
#[inline(always)]
unsafe fn sort_tile(
    keys: *const u64,
    indices: *const u64,
    len: usize,
    size: usize,
) -> (*mut u64, *mut u64) {
    // SAFETY: 2 · size u64s of shared memory (caller).
    let (sk, si) = unsafe {
        let base = arch::shared::<u64>();
        (base, base.add(size))
    };
    let t = thread_idx() as usize;
    let threads = block_dim() as usize;
    let mut j = t;
    while j < size {
        // SAFETY: j < size; j < len is inside the inputs.
        unsafe {
            if j < len {
                sk.add(j).write(keys.add(j).read());
                si.add(j).write(indices.add(j).read());
            } else {
                sk.add(j).write(0);
                si.add(j).write(u64::MAX);
            }
        }
        j += threads;
    }
    let mut width = 2;
    while width <= size {
        let mut stride = width / 2;
        while stride > 0 {
            // SAFETY: every thread reaches this barrier.
            unsafe { arch::sync_threads() };
            let mut j = t;
            while j < size / 2 {
                // Compare-exchange a and b = a + stride, best first in runs that go up.
                let a = (j / stride) * 2 * stride + j % stride;
                let b = a + stride;
                let up = a & width == 0;
                // SAFETY: a < b < size.
                unsafe {
                    let (ka, ia, kb, ib) = (
                        sk.add(a).read(),
                        si.add(a).read(),
                        sk.add(b).read(),
                        si.add(b).read(),
                    );
                    if before(kb, ib, ka, ia) == up {
                        sk.add(a).write(kb);
                        si.add(a).write(ib);
                        sk.add(b).write(ka);
                        si.add(b).write(ia);
                    }
                }
                j += threads;
            }
            stride /= 2;
        }
        width *= 2;
    }
    // SAFETY: every thread reaches this barrier.
    unsafe { arch::sync_threads() };
    (sk, si)
}

/// Writes result `j` from the pair `(key, index)`: the index, and the value read back from the input.
///
/// # Safety
/// `j < p.k`; `index < p.n`.
#[inline(always)]
unsafe fn write_result<T: Copy>(p: &TopKParams<T>, j: u64, index: u64) {
    // SAFETY: the outputs hold k (caller); index < n.
    unsafe {
        p.indices_out.add(j as usize).write(index);
        if !p.values_out.is_null() {
            p.values_out.add(j as usize).write(element(p, index));
        }
    }
}

/// Sorts the k ≤ [`SORT_TILE`] selected pairs and writes the results. One block.
///
/// # Safety
/// As [`filter`]'s outputs, now written; the outputs valid for `p.k` writes; `16 · SORT_TILE` bytes of
/// dynamic shared memory.
#[inline(always)]
pub unsafe fn sort<T: Copy>(p: TopKParams<T>) {
    if state!(p, done) == ALL_EQUAL {
        return;
    }
    let len = p.k as usize;
    let size = len.next_power_of_two().max(2);
    // SAFETY: k ≤ SORT_TILE pairs (the host launches this only then), the shared memory (caller).
    let (_, si) = unsafe { sort_tile(p.keys, p.indices, len, size) };
    let mut j = thread_idx() as usize;
    while j < len {
        // SAFETY: j < k; a selected index is below n.
        unsafe { write_result(&p, j as u64, si.add(j).read()) };
        j += block_dim() as usize;
    }
}

/// Sorts tile `blockIdx.x` of the k selected pairs in place: runs of [`SORT_TILE`] for [`merge`].
///
/// # Safety
/// As [`sort`], with a grid of `⌈k / SORT_TILE⌉` blocks.
#[inline(always)]
pub unsafe fn sort_block<T: Copy>(p: TopKParams<T>) {
    if state!(p, done) == ALL_EQUAL {
        return;
    }
    let start = arch::block_idx() as u64 * SORT_TILE;
    if start >= p.k {
        return;
    }
    let len = (p.k - start).min(SORT_TILE) as usize;
    // SAFETY: the tile lies inside the k pairs.
    let (keys, indices) = unsafe { (p.keys.add(start as usize), p.indices.add(start as usize)) };
    // SAFETY: len ≤ SORT_TILE, the shared memory (caller).
    let (sk, si) = unsafe { sort_tile(keys, indices, len, SORT_TILE as usize) };
    let mut j = thread_idx() as usize;
    while j < len {
        // SAFETY: j < len, inside the tile.
        unsafe {
            keys.add(j).write(sk.add(j).read());
            indices.add(j).write(si.add(j).read());
        }
        j += block_dim() as usize;
    }
}

/// The source and destination pairs of a merge pass or the gather.
#[inline(always)]
fn buffers<T>(p: &TopKParams<T>) -> ((*const u64, *const u64), (*mut u64, *mut u64)) {
    if p.from_alt != 0 {
        ((p.keys_alt, p.indices_alt), (p.keys, p.indices))
    } else {
        ((p.keys, p.indices), (p.keys_alt, p.indices_alt))
    }
}

/// Merges sorted runs of `p.run` pairs pairwise into runs of `2 · p.run`: each thread finds where its
/// [`MERGE_ITEMS`] outputs start on the merge path by binary search, then merges them.
///
/// # Safety
/// Both pairs of buffers valid for `p.k` pairs; the source sorted in runs of `p.run`.
#[inline(always)]
pub unsafe fn merge<T>(p: TopKParams<T>) {
    if state!(p, done) == ALL_EQUAL {
        return;
    }
    let ((sk, si), (dk, di)) = buffers(&p);
    let out = global_thread_idx() * MERGE_ITEMS;
    if out >= p.k {
        return;
    }
    // Runs are never empty (the host starts at SORT_TILE) nor past half of u64; the clamp lets the compiler
    // see that `span` is not zero.
    let span = 2 * p.run.clamp(1, u64::MAX / 4);
    let start = out - out % span;
    let a_end = (start + p.run).min(p.k);
    let b_end = (start + span).min(p.k);
    let (a_len, b_len) = (a_end - start, b_end - a_end);
    let diag = out - start;
    // SAFETY (reads below): every index is inside `start..b_end`, below k.
    let a = |i: u64| unsafe {
        (
            sk.add((start + i) as usize).read(),
            si.add((start + i) as usize).read(),
        )
    };
    let b = |j: u64| unsafe {
        (
            sk.add((a_end + j) as usize).read(),
            si.add((a_end + j) as usize).read(),
        )
    };
    // The number of A's pairs among the first `diag` outputs.
    let (mut lo, mut hi) = (diag.saturating_sub(b_len), diag.min(a_len));
    while lo < hi {
        let mid = (lo + hi) / 2;
        let (ka, ia) = a(mid);
        let (kb, ib) = b(diag - 1 - mid);
        if before(ka, ia, kb, ib) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let (mut i, mut j) = (lo, diag - lo);
    let mut o = out;
    while o < b_end && o < out + MERGE_ITEMS {
        let take_a = j >= b_len
            || (i < a_len && {
                let (ka, ia) = a(i);
                let (kb, ib) = b(j);
                before(ka, ia, kb, ib)
            });
        let (k, x) = if take_a {
            i += 1;
            a(i - 1)
        } else {
            j += 1;
            b(j - 1)
        };
        // SAFETY: o < b_end ≤ k.
        unsafe {
            dk.add(o as usize).write(k);
            di.add(o as usize).write(x);
        }
        o += 1;
    }
}

/// Writes the k results from the sorted pairs (the source of [`buffers`]).
///
/// # Safety
/// The source pairs valid and sorted; the outputs valid for `p.k` writes.
#[inline(always)]
pub unsafe fn gather<T: Copy>(p: TopKParams<T>) {
    if state!(p, done) == ALL_EQUAL {
        return;
    }
    let ((_, si), _) = buffers(&p);
    let mut j = global_thread_idx();
    while j < p.k {
        // SAFETY: j < k; a selected index is below n.
        unsafe { write_result(&p, j, si.add(j as usize).read()) };
        j += grid_threads();
    }
}

/// The shared memory [`pick`] needs: the block scan's slots.
pub const PICK_SHARED: usize = block_scan::SLOTS * size_of::<u64>();
const _: () = assert!(size_of::<State>() > 0);
