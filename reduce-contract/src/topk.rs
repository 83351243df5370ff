//! Top-k: the order-preserving keys its radix select runs on, the state its passes share, and the rule
//! that makes its output unique.
//!
//! # Which k elements, in which order
//! Every element gets a *composite key*: its order-preserving value key ([`TopKElement::key`], turned
//! around for `min_k`) above the bits of its inverted index ([`index_bits`] of them). All composite keys
//! differ, so "the k largest composite keys" is one set with one order, whatever the ties: among equal
//! values the smaller index wins and comes first. NaN (any payload) gets the greatest value key for
//! `max_k` and for `min_k` alike, so it counts as above +∞ for `max_k` and below −∞ for `min_k` (torch's
//! rule); −0.0 and +0.0 get the same key.
//!
//! # The passes (device-wide)
//! A most-significant-digit radix select over the composite keys that reads the input twice on most data
//! (AIR top-k's adaptive buffer, in outline), or once where a sample bounds the answer:
//! 0. Where the host samples (from [`SAMPLE_FROM`] elements on, where [`samples`] holds: k small beside
//!    n), `sample` reads [`SAMPLE`] elements spread over the input and takes a bound on composite keys that
//!    about [`sample_target`] of them reach: a value key, or where the sample's best elements tie (keys of
//!    up to 4 bytes), one value up to a position. Fewer than k elements of the input reaching it is
//!    unlikely. `sieve` then reads the input once and copies every element that reaches it to candidate
//!    buffer 0, counting them by their first digit. Where at least k and at most [`capacity`] did
//!    ([`sieve_holds`]), the select goes on from those counts and that buffer, and the first histogram and
//!    the second read of the input are skipped; where not (a sample that misjudged the input), the passes
//!    below run as if no sample had been taken. Either way the answer is the same: the sample decides only
//!    how fast it comes.
//! 1. `histogram` counts the top [`first_bits`] bits of every value key (32768 buckets in shared memory
//!    where the device has room), and marks whether any key differs from the first element's (`mixed`).
//!    None differing means every element ties: the answer is the first k indices (`fill`), one read in all.
//! 2. `pick` finds the bucket of the k-th greatest key. `split` then reads the input once more: elements in
//!    a greater bucket are selected (fewer than k of them, appended to the output pairs); those in the
//!    chosen bucket are counted by their next digit ([`DIGIT_BITS`]) and by the top digit of their index,
//!    and copied to a candidate buffer when they fit ([`capacity`]).
//! 3. Each later `pick`/`level` pair (and the first, after a sieve that holds) reads only the candidates, one buffer into the other, until the chosen
//!    bucket holds exactly the number still wanted (`take_all`). When a bucket's entries all have one value
//!    key, the select jumps to the index's digits at once: ties cost a pass over the few candidates, not
//!    over the input. A bucket too large for the buffer is refined by reading the input again.
//! 4. Where the sieve's buffer is short ([`finishes`], at most [`FINISH_MOST`] pairs), `finish` goes
//!    right after the sieve instead: one block selects the k from the buffer, digit by digit with no
//!    launch between (the chosen bucket's entries in shared memory once they fit), and the histogram,
//!    `pick`s and `level`s return at once.
//!
//! The k selected pairs are then sorted: one block for at most [`SORT_TILE`], block-sorted runs merged
//! beyond that.
use crate::op::Element;

/// Bits of a radix digit after the first: 2048 buckets.
pub const DIGIT_BITS: u32 = 11;
/// Buckets of a digit after the first.
pub const BUCKETS: usize = 1 << DIGIT_BITS;
/// The most bits of the first digit ([`first_bits`]).
pub const FIRST_BITS: u32 = 15;
/// Buckets of the widest first digit.
pub const FIRST_BUCKETS: usize = 1 << FIRST_BITS;
/// Threads of the `histogram`, `pick`, `sort` and `sort_block` blocks.
pub const WIDE_THREADS: u32 = 1024;
/// Threads of the other top-k kernels' blocks.
pub const THREADS: u32 = 256;
/// Pairs each thread sorts in a tile's block sort (blocks of [`WIDE_THREADS`]; the host gives a shorter
/// sort a thread per pair a stage compares, at least [`THREADS`]). The shared-memory bitonic stages wait on
/// their loads, compares and barrier in turn, so more warps help a long sort: on 256 threads of 8 pairs,
/// sorting k = 1024 took 25.4 µs, the tiles of k = 65536 41.3 and each merge pass 11–12 (8 outputs a
/// thread); on 1024 threads and merges of 2, 22.1, 37.4 and 8.7–10.7 (ncu, 2^24 f32, H100, 2026-12-07,
/// docs/PERFORMANCE.md).
pub const SORT_ITEMS: u32 = 2;
/// Candidates one block sorts in shared memory: a result of at most this many is sorted by one block;
/// longer ones are cut into runs of this length and merged.
pub const SORT_TILE: u64 = (WIDE_THREADS * SORT_ITEMS) as u64;
/// Outputs each thread of a merge pass writes. Each thread's binary search and merge steps are global
/// loads that wait on each other, so fewer outputs a thread (more threads in flight, shorter chains) is
/// faster (see [`SORT_ITEMS`]).
pub const MERGE_ITEMS: u64 = 2;

/// Pairs each warp of `split`, `level` and `sieve` stages in shared memory before it copies them out with
/// one atomic.
pub const STAGE: u32 = 64;
/// Pairs each warp of `split`, `level` and `sieve` sets aside in shared memory as it meets them, to handle
/// in bulk: elements at or above the chosen bucket (or the sieve's bound) are rare on the input, and handling each where it is met would put the
/// handling's code in the hot loop.
pub const PENDING: u32 = 128;
/// The shared memory `split`, `level` and `sieve` need with blocks of [`THREADS`] (`sieve` uses one of
/// the histograms and one stage a warp): two histograms of [`BUCKETS`]
/// `u32` counters, then per warp two stages of [`STAGE`] pairs and the [`PENDING`] pairs (16 bytes each).
pub const LEVEL_SHARED: u32 =
    (2 * BUCKETS * 4) as u32 + (THREADS / 32) * (2 * STAGE + PENDING) * 16;

/// `State::done`: still selecting.
pub const RUNNING: u32 = 0;
/// `State::done`: the output pairs hold the k selected.
pub const SELECTED: u32 = 1;
/// `State::done`: every element has the same key; the answer is the first k indices.
pub const ALL_EQUAL: u32 = 2;

/// `State::source`: the chosen bucket's entries are read from the input.
pub const FROM_INPUT: u32 = 0;

/// The first digit's width for a device whose blocks may have `shared_bytes` of shared memory: the most
/// bits, at most [`FIRST_BITS`], whose `u32` counters fit with room to spare (the [`SAMPLE_HEADER`]). A wide first digit is what
/// keeps the chosen bucket small on narrow distributions (U[0, 1) puts an eighth of its elements in one
/// 11-bit bucket, 1/256 in one 15-bit bucket).
pub const fn first_bits(shared_bytes: u32) -> u32 {
    let mut bits = FIRST_BITS;
    while bits > DIGIT_BITS && (4u32 << bits) + SAMPLE_HEADER > shared_bytes {
        bits -= 1;
    }
    bits
}

/// Candidates each buffer holds for an input of `n`: an eighth of it (at least 4096, at most `n`). A chosen
/// bucket larger than this is refined by reading the input again instead.
pub const fn capacity(n: u64) -> u64 {
    let c = n / 8;
    let c = if c < 4096 { 4096 } else { c };
    if c < n { c } else { n }
}

/// Threads of the `sample` block: 512, so that ptxas may give each the registers its 16 loads in flight
/// take (80 on sm_75; a block of 1024 threads has 64 at most).
pub const SAMPLE_THREADS: u32 = 512;
/// Elements `sample` reads ([`sample_position`]): 16 for each of its [`SAMPLE_THREADS`].
pub const SAMPLE: u64 = 16 * SAMPLE_THREADS as u64;
/// Blocks of `sample`: each reads `SAMPLE / SAMPLE_BLOCKS` elements (one a thread), and the last to
/// finish chooses from all of them.
pub const SAMPLE_BLOCKS: u32 = 16;
const _: () = assert!(
    SAMPLE.is_multiple_of(SAMPLE_BLOCKS as u64)
        && SAMPLE / SAMPLE_BLOCKS as u64 >= SAMPLE_THREADS as u64
);
/// The smallest input that can be sampled (the host's `REDUCE_HOST_TOPK_SAMPLE=1` samples from here, for
/// the tests): the sample's positions are spread over at least 128 elements each.
pub const SAMPLE_MIN: u64 = 1 << 20;
/// The smallest input the host samples by default. Below it, the sample's fixed cost (the one-block
/// sample, the sieve's launch and the first `pick` over its counts) outweighs the histogram path's second
/// and third reads. Measured on an H100 (2026-12-05, `benches/topk`, docs/PERFORMANCE.md "Top-k: the
/// sample by default from 2^24"), with `locate`'s runs a thread each: at 2^24 the sampled path was faster
/// on seven of eight distributions (1.03–1.20× on smooth data, 1.6–2.2× on 16 distinct values), at 2^25
/// by 1.11–1.44× (2.3–3.1×); all-equal input is the one it slows (76 against 47 µs at 2^24, 104 against
/// 68 at 2^25). Smaller inputs were not measured with the sample.
pub const SAMPLE_FROM: u64 = 1 << 24;
/// Bytes of `sample`'s shared memory ahead of its counters: the block scan's slots, and the words that
/// carry each round's choice to the block.
pub const SAMPLE_HEADER: u32 = 1024;
/// Dynamic shared memory of `sample`: the [`SAMPLE_HEADER`], then a round's [`BUCKETS`] counters (each
/// warp's extremes and votes, 1536 bytes, later take their place).
pub const SAMPLE_SHARED: u32 = SAMPLE_HEADER + 4 * BUCKETS as u32;
const _: () = assert!(4 * BUCKETS >= 1536);
/// The most sampled elements at or above the sample's key for `sieve` to run: the candidates it expects
/// are then at most 1/32 of the input (a twelfth of a read written and read back).
pub const SAMPLE_MOST: u64 = SAMPLE / 32;

/// The rank among the sampled elements (1 = the greatest) whose value key `sample` chooses for `n`
/// elements and `k` wanted: λ = k · SAMPLE / n of them are expected at or above the k-th element (one
/// sample a stride of `n / SAMPLE`), and the rank is ⌈λ + 4√λ⌉ + 4, four standard deviations more and 4, so
/// that a key with fewer than k elements of the input at or above it is rare; λ counted in 256ths, rounded
/// up. The sieve buffers about `rank · n / SAMPLE` elements: for k = 64 of 2^24, rank 5 (10,240 expected)
/// where ⌈λ⌉ + 4√⌈λ⌉ + 16 gave 21 (43,000). `u64::MAX` below `SAMPLE` elements or for k of 2^42 and
/// more.
pub const fn sample_target(n: u64, k: u64) -> u64 {
    if n < SAMPLE || k >= 1 << 42 {
        return u64::MAX;
    }
    // 256 · SAMPLE = 2^21; k < 2^42, so the shifted k fits.
    let lambda = (k << 21).div_ceil(n);
    let mut root = isqrt(lambda);
    if root * root < lambda {
        root += 1;
    }
    // 4√λ in 256ths: 4 · √(λ256 / 256) · 256 = 64 √λ256.
    (lambda + 64 * root).div_ceil(256) + 4
}

/// ⌊√x⌋, a binary digit at a time. Not `u64::isqrt`: core's looks its first digits up in a table, a global
/// whose PTX name carries core's crate hash, which differs between builds of the same source (the
/// workspace's and its package's), so `sample` would not build the same PTX from both.
const fn isqrt(x: u64) -> u64 {
    let mut root = 0u64;
    let mut bit = 1u64 << 31;
    while bit != 0 {
        // root | bit < 2^32, so its square fits.
        if (root | bit) * (root | bit) <= x {
            root |= bit;
        }
        bit >>= 1;
    }
    root
}

/// Whether a top-k of `k` among `n` elements may start with a sample ([`sieve_holds`]): the host samples
/// by default only from [`SAMPLE_FROM`] elements on.
pub const fn samples(n: u64, k: u64) -> bool {
    n >= SAMPLE_MIN && sample_target(n, k) <= SAMPLE_MOST
}

/// The most pairs in the sieve's buffer for `finish` to select from: above it, `finish` steps aside and the
/// `level` and `pick` passes select, which spread the work over every SM. `finish` is one block, bound by
/// one SM's instructions (a count, a vote and a shared atomic per pair and digit) and its reads from L2:
/// from the top digit it took 38 µs over 10,000–16,000 pairs at 2^24 (H100, 2026-12-07, twenty-fifth
/// session); an earlier version took 38 µs over 43,000 pairs, where the passes took about as much, and
/// 40 µs more than they did over 67,000 tied NaN (docs/PERFORMANCE.md). Where it runs at all is
/// [`FINISH_EXPECTED`]'s rule.
pub const FINISH_MOST: u64 = 1 << 15;
/// Entries of the chosen bucket that `finish` copies to shared memory, once a digit has narrowed them to
/// this many; its later digits then read them there, not the buffer.
pub const FINISH_LIST: u32 = 4096;
/// Dynamic shared memory of `finish`: the [`SAMPLE_HEADER`] (the block scan's slots, the words that carry
/// a round's choice to the block, two counters), a round's [`BUCKETS`] counters, then the
/// [`FINISH_LIST`] keys and as many indices.
pub const FINISH_SHARED: u32 = SAMPLE_HEADER + 4 * BUCKETS as u32 + 16 * FINISH_LIST;

/// The most pairs the sieve's buffer may be expected to hold ([`sample_target`] · n / [`SAMPLE`]) for
/// `finish` to run. `finish` is one block that reads its entries once a digit until they fit in shared
/// memory, so its time grows with them, while the `pick` and `level` passes it replaces spread over every
/// SM. Measured at 2^24 f32 on an H100 (2026-12-07, docs/PERFORMANCE.md): with 10,240 expected (k = 64)
/// `finish` made the select 3.7–10.8 µs faster on U[0, 1), N(0, 1), 16 distinct values and sorted input
/// (1.5–2.2 µs slower on random bit patterns, 1% NaN and all-equal input); with 16,384 (k = 1024) it made
/// U[0, 1) 10 µs and N(0, 1) 3 µs slower. The bound lies between.
pub const FINISH_EXPECTED: u64 = 12288;
const _: () = assert!(FINISH_EXPECTED <= FINISH_MOST);

/// Whether a sampled select of `k` among `n` runs `finish` after the sieve: where the sieve's buffer is
/// expected to hold at most [`FINISH_EXPECTED`] pairs (the device checks the count it got against
/// [`FINISH_MOST`]).
pub const fn finishes(n: u64, k: u64) -> bool {
    samples(n, k) && sample_target(n, k).saturating_mul(n / SAMPLE) <= FINISH_EXPECTED
}

/// The position of sampled element `s` (`s < SAMPLE`) in `n ≥ SAMPLE` elements: one in each of `SAMPLE`
/// equal strides, at a hashed place inside it, so that sorted input is sampled evenly and periodic input
/// is not sampled at one phase. Increasing in `s`, and below `n`.
///
/// Single elements, not runs of neighbours: runs of 8 (a 32-byte sector of 4-byte elements) cost the
/// one-block `sample` an eighth of the sectors and took 1–4 % off the sampled rows at 2^24, but on sorted
/// or all-equal input a run is one draw, not eight, and with the tighter [`sample_target`] the sample
/// misjudged descending input (k = 64 of 2^21: the sieve took 7), which then paid the histogram's read
/// (H100, 2026-12-07).
#[inline(always)]
pub const fn sample_position(s: u64, n: u64) -> u64 {
    let stride = n / SAMPLE;
    // A 32-bit multiplicative hash of the stride's number (Knuth's constant), scaled into the stride.
    let hash = (s as u32).wrapping_mul(0x9e37_79b1) as u128;
    s * stride + ((hash * stride as u128) >> 32) as u64
}

/// Threads of a per-segment top-k block: also the buckets of its 8-bit radix digits.
pub const ROW_THREADS: u32 = 256;
/// The largest k of the per-segment top-k.
pub const ROW_K_MAX: u64 = 1024;
/// The longest segment of the per-segment top-k: its indices, inverted in 32 bits, stay above 0, which
/// marks a missing result.
pub const ROW_MAX_LEN: u64 = u32::MAX as u64;
/// 16-byte vectors each thread of a per-segment block loads per trip, for elements of `elem_bytes`: as
/// many as the element has bytes, at most four, so that a trip is 4096 elements (2048 for 8-byte ones) and
/// a thread has 16–64 bytes in flight.
pub const fn row_trip_vectors(elem_bytes: u32) -> u32 {
    if elem_bytes < 4 { elem_bytes } else { 4 }
}

/// Elements of a per-segment block's trip: what it may append to its candidates between two checks.
pub const fn row_trip(elem_bytes: u32) -> u32 {
    ROW_THREADS * row_trip_vectors(elem_bytes) * (16 / elem_bytes)
}
/// Bytes ahead of a per-segment block's candidate slots in its shared memory: the block scan's slots (at
/// offset 0), 256 digit counters (at 512), control words (at 1536), and the list of free slots a compaction
/// fills (at 2048, [`ROW_K_MAX`] of them).
pub const ROW_HEADER: u32 = 2048 + 4 * ROW_K_MAX as u32;

/// Candidate slots of a per-segment block for elements of `elem_bytes`: twice [`ROW_K_MAX`] and one trip's
/// elements, so that a compaction (down to k) leaves room for at least k more before the next.
pub const fn row_capacity(elem_bytes: u32) -> u32 {
    2 * ROW_K_MAX as u32 + row_trip(elem_bytes)
}

/// The shared memory of a per-segment block: the header, then each slot's value key (4 bytes for keys of
/// at most 4, else 8) and inverted index (4).
pub const fn row_shared(elem_bytes: u32, key_bytes: u32) -> u32 {
    let key = if key_bytes <= 4 { 4 } else { 8 };
    ROW_HEADER + row_capacity(elem_bytes) * (key + 4)
}

/// The shortest piece a segment is split into: below this, a piece's k results cost more than the
/// parallelism gains.
pub const ROW_MIN_PIECE: u64 = 16384;

/// Blocks per segment for `count` segments of about `len` elements on a device that keeps `resident`
/// blocks at once: enough to fill it, none shorter than [`ROW_MIN_PIECE`], at most 64.
pub const fn row_pieces(count: u64, len: u64, resident: u64) -> u64 {
    if count == 0 {
        return 1;
    }
    let want = resident.div_ceil(count);
    let most = len / ROW_MIN_PIECE;
    let p = if want < most { want } else { most };
    if p < 1 {
        1
    } else if p > 64 {
        64
    } else {
        p
    }
}

/// Elements top-k selects among: the ordered element types, each with an order-preserving key.
pub trait TopKElement: Element {
    /// Bytes of [`key`](Self::key) (the passes over the value).
    const KEY_BYTES: u32;
    /// An unsigned key with the element's order: `a < b` exactly when `key(a) < key(b)`, both zeros
    /// alike. Not called on a NaN.
    fn key(self) -> u64;
    /// Whether this is a NaN (never for integers).
    fn is_nan(self) -> bool;
}

/// All ones in the low `bytes` bytes.
#[inline(always)]
pub const fn low_bytes(bytes: u32) -> u64 {
    if bytes >= 8 {
        u64::MAX
    } else {
        (1u64 << (8 * bytes)) - 1
    }
}

/// The value key of `x` for `max_k` (`largest`) or `min_k`: greater is better. NaN is the greatest key
/// of both.
#[inline(always)]
pub fn value_key<T: TopKElement>(x: T, largest: bool) -> u64 {
    // Selects and a flip by a mask, no branches, and 32-bit arithmetic where the key fits: this runs once
    // per element of every pass.
    if T::KEY_BYTES <= 4 {
        let mask = low_bytes(T::KEY_BYTES) as u32;
        let key = x.key() as u32 ^ if largest { 0 } else { mask };
        (if x.is_nan() { mask } else { key }) as u64
    } else {
        let mask = low_bytes(T::KEY_BYTES);
        let key = x.key() ^ if largest { 0 } else { mask };
        if x.is_nan() { mask } else { key }
    }
}

/// Bits of the index part of the composite keys of `n` elements: enough for `n − 1`, at least one.
#[inline(always)]
pub const fn index_bits(n: u64) -> u32 {
    let bits = 64 - n.saturating_sub(1).leading_zeros();
    if bits == 0 { 1 } else { bits }
}

/// All ones in the low `bits` bits (`bits ≤ 64`).
#[inline(always)]
pub const fn low_bits(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The composite key of the element with value key `key` at `index`: the value key above the inverted
/// index (`index_bits` bits), so that of two equal values the smaller index has the greater key.
#[inline(always)]
pub fn composite(key: u64, index: u64, index_bits: u32) -> u128 {
    ((key as u128) << index_bits) | (!index & low_bits(index_bits)) as u128
}

/// The `width`-bit digit of `c` whose lowest bit is bit `shift` (`shift + width ≤ 128`, `width ≤ 32`).
#[inline(always)]
pub fn digit(c: u128, shift: u32, width: u32) -> u32 {
    ((c >> (shift & 127)) as u64 & low_bits(width)) as u32
}

/// Whether `c` equals `prefix` in every bit from `top` up (always, for `top ≥ 128`).
#[inline(always)]
pub fn same_above(c: u128, prefix: u128, top: u32) -> bool {
    top >= 128 || (c >> top) == (prefix >> top)
}

/// Whether the pair `(a_key, a_index)` comes before `(b_key, b_index)` in the output: the greater value key
/// first, the smaller index among equal keys.
#[inline(always)]
pub fn before(a_key: u64, a_index: u64, b_key: u64, b_index: u64) -> bool {
    a_key > b_key || (a_key == b_key && a_index < b_index)
}

/// What the passes share, in device memory, zeroed before the first pass. `pick` writes the decisions,
/// `level` reads them and counts what the next `pick` needs.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct State {
    /// The composite-key digits chosen so far (low then high 64 bits), zero below the chosen digit.
    pub prefix: [u64; 2],
    /// How many of the k are still to be found in the chosen bucket.
    pub remaining: u64,
    /// Pairs selected so far (the output pairs' counter).
    pub count: u64,
    /// Entries in each candidate buffer.
    pub candidates: [u64; 2],
    /// The complement of the least value key among the chosen bucket's entries that the last `split` or
    /// `level` counted (`pick` zeroes it for the next): zero, like `greatest`, before anything is counted.
    pub not_least: u64,
    /// The greatest value key among the chosen bucket's entries that the last `split` or `level` counted.
    pub greatest: u64,
    /// Nonzero when the first histogram met two different value keys (zero: every element is equal).
    pub mixed: u64,
    /// Nonzero when `sample` chose what `sieve` takes: `sieve` then runs.
    pub sampled: u64,
    /// `sieve` takes every element whose value key is above this one, and those equal to it at an index
    /// below `sieve_limit`: the elements whose composite keys reach a bound.
    pub sieve_key: u64,
    /// See `sieve_key` (0: no element equal to it).
    pub sieve_limit: u64,
    /// The lowest bit of the chosen digit in the composite key.
    pub shift: u32,
    /// The chosen digit's width.
    pub width: u32,
    /// The chosen digit's value.
    pub bucket: u32,
    /// Where `level` reads the chosen bucket's entries: [`FROM_INPUT`], or candidate buffer `source − 1`.
    pub source: u32,
    /// Nonzero when `level` copies the chosen bucket's entries into the other buffer (buffer 0 from the input).
    pub capture: u32,
    /// Nonzero when the chosen bucket holds exactly the number still wanted: `level` selects all of it.
    pub take_all: u32,
    /// [`RUNNING`], [`SELECTED`] or [`ALL_EQUAL`].
    pub done: u32,
    /// The width of the digit below the chosen one, which `level` counts into `next`.
    pub next_width: u32,
    /// `sample`'s blocks that have written their share of the sample.
    pub arrived: u32,
    /// The first digit's counts.
    pub first: [u64; FIRST_BUCKETS],
    /// The chosen bucket's entries, by the digit below the chosen one.
    pub next: [u64; BUCKETS],
    /// The chosen bucket's entries, by the top [`DIGIT_BITS`] of their inverted index: the histogram the
    /// select jumps to when they all have one value key.
    pub index: [u64; BUCKETS],
    /// The first digit's counts of what `sieve` buffered: last,
    /// so that a select without a sample zeroes the state only up to here.
    pub sieved: [u64; FIRST_BUCKETS],
}

impl State {
    /// The prefix as one number.
    #[inline(always)]
    pub fn threshold(&self) -> u128 {
        (self.prefix[1] as u128) << 64 | self.prefix[0] as u128
    }
}

/// Whether `sieve` left what the select can go on from, for `k` of `n` elements and buffers of
/// `capacity`: it ran, and buffered at least k elements (what it takes is closed upward in the composite
/// keys' order, so the k greatest are among them), at most `capacity` (so none was dropped), and not all
/// `n` (a buffer of the whole input saves nothing, and all-equal input read whole is the first
/// histogram's case, which answers it at once).
#[inline(always)]
pub fn sieve_holds(sampled: u64, buffered: u64, k: u64, n: u64, capacity: u64) -> bool {
    sampled != 0 && k <= buffered && buffered <= capacity && buffered < n
}

macro_rules! float_key {
    ($($t:ty: $bits:ty, $key:ident, $sign:expr, $bytes:expr);*) => {$(
        impl TopKElement for $t {
            const KEY_BYTES: u32 = $bytes;
            #[inline(always)]
            fn key(self) -> u64 {
                $key(self.to_bits(), $sign) as u64
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                self != self
            }
        }
    )*};
}

/// [`float_bits_key`] in 32-bit arithmetic, for floats of at most 32 bits: half the instructions of the
/// 64-bit one on the GPU, once per element of every pass.
#[inline(always)]
pub const fn float_bits_key32(bits: u32, sign: u32) -> u32 {
    let bits = if bits == sign { 0 } else { bits };
    bits ^ if bits & sign != 0 {
        sign | (sign - 1)
    } else {
        sign
    }
}

/// The order-preserving key of a float's `bits` whose sign bit is `sign`: negative numbers flipped
/// whole (more negative, smaller key), positive ones with the sign set; −0.0 as +0.0.
#[inline(always)]
pub const fn float_bits_key(bits: u64, sign: u64) -> u64 {
    let bits = if bits == sign { 0 } else { bits };
    // Within the float's bits, `!bits` is `bits ^ all` and `bits | sign` is `bits ^ sign` (sign clear).
    bits ^ if bits & sign != 0 {
        sign | (sign - 1)
    } else {
        sign
    }
}

float_key!(f32: u32, float_bits_key32, 1 << 31, 4; f64: u64, float_bits_key, 1 << 63, 8);

macro_rules! int_key {
    ($($t:ty: $bytes:expr, $flip:expr);*) => {$(
        impl TopKElement for $t {
            const KEY_BYTES: u32 = $bytes;
            #[inline(always)]
            fn key(self) -> u64 {
                (self as u64 ^ $flip) & low_bytes($bytes)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                false
            }
        }
    )*};
}

int_key!(i32: 4, 1 << 31; u32: 4, 0; i64: 8, 1 << 63; u64: 8, 0; u8: 1, 0);

/// Implements [`TopKElement`] for each side's 16-bit floats, from their bits: `F16: |x| x.0, 0x7c00;`
/// (the bits, and the all-ones exponent).
#[macro_export]
macro_rules! topk_halves {
    ($($t:ident: |$x:ident| $bits:expr, $exponent:literal;)*) => {$(
        impl $crate::topk::TopKElement for $t {
            const KEY_BYTES: u32 = 2;
            #[inline(always)]
            fn key(self) -> u64 {
                let $x = self;
                $crate::topk::float_bits_key32($bits as u32, 0x8000) as u64
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                let $x = self;
                ($bits & 0x7fff) > $exponent
            }
        }
    )*};
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn keys_keep_the_order_and_merge_the_zeros() {
        let xs = [
            f32::NEG_INFINITY,
            -3.5,
            -1e-40,
            -0.0,
            0.0,
            1e-40,
            2.0,
            f32::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(w[0].key() <= w[1].key(), "{w:?}");
            assert_eq!(w[0].key() == w[1].key(), w[0] == w[1], "{w:?}");
        }
        assert!(value_key(f32::NAN, true) > value_key(f32::INFINITY, true));
        assert!(value_key(-f32::NAN, false) > value_key(f32::NEG_INFINITY, false));
        assert_eq!(value_key(f64::MAX, false), !f64::MAX.key());
        let ints = [i32::MIN, -1, 0, 1, i32::MAX];
        for w in ints.windows(2) {
            assert!(w[0].key() < w[1].key());
        }
        assert!(value_key(i64::MIN, false) > value_key(i64::MAX, false));
        assert_eq!(u8::MAX.key(), 255);
    }

    #[test]
    fn composite_keys_prefer_the_smaller_index() {
        assert_eq!(index_bits(0), 1);
        assert_eq!(index_bits(2), 1);
        assert_eq!(index_bits(3), 2);
        assert_eq!(index_bits(1 << 32), 32);
        assert_eq!(index_bits((1 << 32) + 1), 33);
        let b = index_bits(1000);
        assert!(composite(7, 3, b) > composite(7, 4, b));
        assert!(composite(8, 999, b) > composite(7, 0, b));
        let c = composite(0x12, 1, 10);
        assert_eq!(digit(c, 10, 8), 0x12);
        assert_eq!(digit(c, 0, 10), 0x3fe);
        assert!(same_above(c, 0x12 << 10, 10));
        assert!(!same_above(c, 0x13 << 10, 10));
        assert!(same_above(c, 0, 128));
        assert_eq!(first_bits(227 * 1024), 15);
        assert_eq!(first_bits(99 * 1024), 14);
        assert_eq!(first_bits(64 * 1024), 13);
        assert_eq!(first_bits(48 * 1024), 13);
        assert_eq!(capacity(100), 100);
        assert_eq!(capacity(1 << 28), 1 << 25);
    }

    /// What `sample` chooses from `keys` (32-bit value keys, whose every bit its rounds choose): `(key_above,
    /// limit)` of the sieve's rule. The kernel finds the target-th greatest sampled key by digits; this sorts.
    fn sample_rule(keys: &[u64], k: u64) -> (u64, u64) {
        let n = keys.len() as u64;
        let sampled: Vec<(u64, u64)> = (0..SAMPLE)
            .map(|s| (keys[sample_position(s, n) as usize], s))
            .collect();
        let mut order = sampled.clone();
        order.sort_unstable_by_key(|x| core::cmp::Reverse(x.0));
        let target = sample_target(n, k);
        let cut = order[target as usize - 1].0;
        let above = sampled.iter().filter(|x| x.0 > cut).count() as u64;
        let inside: Vec<&(u64, u64)> = sampled.iter().filter(|x| x.0 == cut).collect();
        if above + inside.len() as u64 <= SAMPLE_MOST {
            return (cut - 1, 0);
        }
        // Many sampled keys equal the cut: the (target − above)-th of them in sample order bounds the ties.
        let s = inside[(target - above) as usize - 1].1;
        (cut, sample_position(s, n) + 1)
    }

    #[test]
    fn isqrt_is_cores() {
        let mut x = 1u64;
        while x < u64::MAX / 3 {
            let square = x.saturating_mul(x);
            for y in [
                x - 1,
                x,
                x + 1,
                square - 1,
                square,
                square.saturating_add(1),
            ] {
                assert_eq!(isqrt(y), y.isqrt(), "{y}");
            }
            x = x * 3 + 1;
        }
        assert_eq!(isqrt(u64::MAX), u64::MAX.isqrt());
    }

    #[test]
    fn samples_bound_the_kth_composite_key_on_smooth_and_tied_data() {
        assert_eq!(sample_target(1 << 28, 1), 1 + 4);
        assert_eq!(sample_target(1 << 24, 64), 1 + 4);
        assert_eq!(sample_target(1 << 24, 1024), 4 + 4);
        assert_eq!(sample_target(1 << 24, 65536), 55 + 4);
        assert_eq!(sample_target(1 << 20, 64), 4 + 4);
        assert_eq!(sample_target(SAMPLE, 1 << 42), u64::MAX);
        assert!(samples(1 << 28, 1 << 20) && !samples(1 << 28, 1 << 24));
        assert!(finishes(1 << 24, 1) && finishes(1 << 24, 64) && !finishes(1 << 24, 1024));
        assert!(!finishes(1 << 28, 1) && finishes(1 << 20, 64));
        assert!(!samples(SAMPLE_MIN - 1, 1) && !samples(u64::MAX, u64::MAX));
        for n in [SAMPLE, SAMPLE_MIN + 12345, 1 << 34] {
            let positions: Vec<u64> = (0..SAMPLE).map(|s| sample_position(s, n)).collect();
            assert!(
                positions.windows(2).all(|w| w[0] < w[1]) && positions[SAMPLE as usize - 1] < n
            );
        }
        // An xorshift stream of 24-bit uniforms.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 + 0.5) / (1 << 24) as f32
        };
        let n = 1usize << 21;
        let u: Vec<f32> = (0..n).map(|_| uniform()).collect();
        let normal: Vec<f32> = u
            .chunks(2)
            .flat_map(|p| {
                let r = (-2.0f32 * p[0].ln()).sqrt();
                let a = core::f32::consts::TAU * p[1];
                [r * a.cos(), r * a.sin()]
            })
            .collect();
        let mut ascending = u.clone();
        ascending.sort_by(f32::total_cmp);
        let descending: Vec<f32> = ascending.iter().rev().copied().collect();
        let nan: Vec<f32> = u
            .iter()
            .enumerate()
            .map(|(i, &x)| if i % 100 == 7 { f32::NAN } else { x })
            .collect();
        let distinct: Vec<f32> = u.iter().map(|&x| (x * 16.0).floor()).collect();
        let equal: Vec<f32> = (0..n).map(|_| 1.5).collect();
        // Distinct values in a narrow band (the last 6 bits of 1.0's neighbours), which a cut to the top 26
        // bits (the sample's two rounds before 2026-12-07) could not tell apart, so the sample stepped aside.
        let band: Vec<f32> = u
            .iter()
            .map(|&x| f32::from_bits(1.0f32.to_bits() + (x * 64.0) as u32))
            .collect();
        let key = |data: &[f32]| -> Vec<u64> { data.iter().map(|&x| value_key(x, true)).collect() };
        for (name, data) in [
            ("narrow band", &band),
            ("uniform", &u),
            ("normal", &normal),
            ("ascending", &ascending),
            ("descending", &descending),
            ("1% NaN", &nan),
            ("16 distinct", &distinct),
            ("all equal", &equal),
        ] {
            let keys = key(data);
            for k in [1u64, 64, 1024, 16384] {
                if !samples(n as u64, k) {
                    continue;
                }
                let (key_above, limit) = sample_rule(&keys, k);
                {
                    let reach = keys
                        .iter()
                        .enumerate()
                        .filter(|&(i, &x)| x > key_above || (x == key_above && (i as u64) < limit))
                        .count() as u64;
                    assert!(
                        sieve_holds(1, reach, k, n as u64, capacity(n as u64)),
                        "{name} k = {k}: {reach}"
                    );
                    // At most the accepted fraction, with room for the sample's spread.
                    assert!(reach <= n as u64 / 16, "{name} k = {k}: {reach}");
                }
            }
        }
    }

    #[test]
    fn per_segment_blocks_fit_their_trips() {
        for bytes in [1, 2, 4, 8] {
            let cap = row_capacity(bytes) as u64;
            // After a compaction to k, a whole trip (and a scalar one) must fit.
            assert!(cap >= ROW_K_MAX + row_trip(bytes) as u64);
            assert!(cap >= ROW_K_MAX + ROW_THREADS as u64);
            assert!(cap.is_multiple_of(ROW_THREADS as u64));
            // Within the opt-in shared memory of every supported GPU (sm_75's 64 KiB).
            assert!(row_shared(bytes, bytes) <= 64 * 1024, "{bytes}");
        }
        assert_eq!(row_pieces(64, 131072, 660), 8);
        assert_eq!(row_pieces(4096, 151936, 660), 1);
        assert_eq!(row_pieces(1, 1 << 30, 660), 64);
        assert_eq!(row_pieces(3, 100, 660), 1);
        assert_eq!(row_pieces(0, 0, 660), 1);
    }
}
