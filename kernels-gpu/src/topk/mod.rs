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
//!   sieve's buffer holds the candidates): one pass over the input or a candidate buffer (`pass::Pass`):
//!   selects what lies above the chosen bucket, counts the chosen bucket's entries by their next digit
//!   (and their index's top digit), and copies them to the other buffer.
//! - [`finish`]: after the sieve where its buffer is short, one block selects the k from it, and the
//!   later passes return at once.
//! - [`fill`]: the answer when every key is equal, the first k elements.
//! - [`sort`] (k ≤ [`SORT_TILE`](reduce_contract::topk::SORT_TILE)): one block sorts the selected pairs in
//!   shared memory and writes the results; [`sort_block`], [`merge`] and [`gather`] for larger k: sorted
//!   runs of `SORT_TILE`, merged pairwise (merge path), then the results.

use reduce_contract::params::TopKParams;
use reduce_contract::topk::{State, TopKElement, value_key};

use crate::arch::{self, block_dim, global_thread_idx, grid_threads, lane_id, thread_idx};
use crate::block_scan;
use crate::shuffle::shfl_idx;
use crate::thread::{self, Vectorize};
use crate::warp::{self, FULL_MASK};

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

// The passes, a file each; declared after the state macros above, which they use.
mod buffers;
mod finish;
mod histogram;
mod pass;
mod pick;
mod sample;
mod sort;

pub use finish::finish;
pub use histogram::histogram;
pub use pass::{level, split};
pub use pick::pick;
pub use sample::{sample, sieve};
pub use sort::{fill, gather, merge, sort, sort_block};

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

/// The shared memory [`pick`] needs: the block scan's slots.
pub const PICK_SHARED: usize = block_scan::SLOTS * size_of::<u64>();
const _: () = assert!(size_of::<State>() > 0);
