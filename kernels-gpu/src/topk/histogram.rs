//! The first digit's histogram ([`histogram`]): every value key's first digit, per block in shared memory,
//! then into the state.

use reduce_contract::params::TopKParams;
use reduce_contract::topk::{TopKElement, sieve_holds, value_key};

use super::{each_key, element, first_width, flush_shared, top_digit, zero_shared};
use crate::arch::{self, lane_id};
use crate::thread::Vectorize;
use crate::warp::{self, FULL_MASK};

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
