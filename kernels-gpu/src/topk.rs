//! Top-k (device-wide): a radix select over composite keys, then a sort of the k selected. The rule, the
//! keys and the order of the passes are the contract's ([`reduce_contract::topk`]); this holds the
//! kernel bodies.
//!
//! - [`histogram`]: counts the next byte of every composite key that matches the prefix, per block in
//!   shared memory (a warp's lanes with the same byte add once, `match.any`), then into the state.
//! - [`pick`]: one block scans the buckets from the top and extends the prefix.
//! - [`filter`]: copies the elements whose composite key is at least the threshold (exactly k), each
//!   warp reserving its room with one atomic add.
//! - [`sort`] (k ≤ [`SORT_TILE`]): one block sorts them in shared memory and writes the results.
//! - [`sort_block`], [`merge`] and [`gather`] (larger k): sorted runs of [`SORT_TILE`], merged pairwise
//!   (merge path), then the results.
use crate::op::Plus;
use reduce_contract::params::TopKParams;
use reduce_contract::topk::{
    BUCKETS, MERGE_ITEMS, SORT_TILE, State, TopKElement, before, composite, digit, value_key,
};

use crate::arch::{self, block_dim, global_thread_idx, grid_threads, lane_id, thread_idx};
use crate::block_scan;
use crate::warp::{self, FULL_MASK};

/// Elements each thread loads before it counts them: loads in flight.
const UNROLL: u64 = 4;

/// Reads element `i`.
///
/// # Safety
/// `i < p.n`, and `p.input` valid for `p.n` reads.
#[inline(always)]
unsafe fn element<T: Copy>(p: &TopKParams<T>, i: u64) -> T {
    // SAFETY: the caller.
    unsafe { p.input.add(i as usize).read() }
}

/// Counts the pass's byte of the composite keys that match the prefix into `state.histogram`.
///
/// # Safety
/// `p.input` valid for `p.n` reads, `p.state` for reads and atomic adds; `BUCKETS` `u32`s of dynamic shared
/// memory; a grid of whole warps.
#[inline(always)]
pub unsafe fn histogram<T: TopKElement + Copy>(p: TopKParams<T>) {
    // SAFETY: the state is valid (caller); the previous pass's pick wrote it before this launch.
    let state = unsafe { &*p.state };
    if state.done != 0 {
        return;
    }
    let prefix = state.threshold();
    let passes = T::KEY_BYTES + p.index_bytes;
    let largest = p.largest != 0;
    // SAFETY: BUCKETS u32s of dynamic shared memory (caller).
    let counts = unsafe { arch::shared::<u32>() };
    let mut b = thread_idx() as usize;
    while b < BUCKETS {
        // SAFETY: b < BUCKETS.
        unsafe { counts.add(b).write(0) };
        b += block_dim() as usize;
    }
    // SAFETY: every thread reaches this barrier.
    unsafe { arch::sync_threads() };
    let lane = lane_id() as u64;
    let threads = grid_threads();
    // Warp-uniform trips: every lane takes part in each `match.any`.
    let mut first = global_thread_idx() - lane;
    while first < p.n {
        let mut keys = [0u128; UNROLL as usize];
        let mut valid = [false; UNROLL as usize];
        each_index!(U < UNROLL as usize, {
            let i = first + lane + U as u64 * threads;
            if i < p.n {
                // SAFETY: i < n.
                let x = unsafe { element(&p, i) };
                keys[U] = composite(value_key(x, largest), i, p.index_bytes);
                valid[U] = true;
            }
        });
        each_index!(U < UNROLL as usize, {
            let (d, matches) = digit(keys[U], prefix, p.pass, passes);
            let bucket = if valid[U] && matches {
                d as u32
            } else {
                u32::MAX
            };
            // SAFETY: the whole warp is here (warp-uniform loop).
            let peers = unsafe { warp::match_any(FULL_MASK, bucket) };
            if bucket != u32::MAX && peers.trailing_zeros() == lane_id() {
                // SAFETY: bucket < BUCKETS; shared memory of this block.
                unsafe {
                    arch::shared_add_u32(
                        arch::shared_window(counts.add(bucket as usize)),
                        peers.count_ones(),
                    )
                };
            }
        });
        first += UNROLL * threads;
    }
    // SAFETY: every thread reaches this barrier.
    unsafe { arch::sync_threads() };
    let mut b = thread_idx() as usize;
    while b < BUCKETS {
        // SAFETY: b < BUCKETS; the state's histogram has BUCKETS counters.
        unsafe {
            let c = counts.add(b).read();
            if c != 0 {
                arch::atomic_add_u64((*p.state).histogram.as_mut_ptr().add(b), c as u64);
            }
        }
        b += block_dim() as usize;
    }
}

/// Finds the bucket of the pass in which the k-th greatest composite key lies, extends the prefix with
/// it, and zeroes the counts for the next pass. One block of [`THREADS`](reduce_contract::topk::THREADS).
///
/// # Safety
/// `p.state` valid; a block of exactly `BUCKETS` threads with the block scan's shared memory.
#[inline(always)]
pub unsafe fn pick<T: TopKElement>(p: TopKParams<T>) {
    let state = p.state;
    // SAFETY: valid (caller); uniform across the block, so the early return is too.
    if unsafe { (*state).done } != 0 {
        return;
    }
    let t = thread_idx() as usize;
    // Thread t holds bucket 255 − t: the exclusive scan gives the count of every greater bucket.
    let bucket = BUCKETS - 1 - t;
    // SAFETY: the state is valid (caller); thread t < BUCKETS (the launch), so bucket < BUCKETS.
    let counts = unsafe { (&raw mut (*state).histogram).cast::<u64>() };
    // SAFETY: as above.
    let count = unsafe { counts.add(bucket).read() };
    // SAFETY: the whole block calls it, with the scan's shared memory (caller).
    let (above, _) = unsafe { block_scan::exclusive_scan::<Plus<u64>>(count) };
    let passes = T::KEY_BYTES + p.index_bytes;
    // SAFETY: read by every thread before the barrier below, written by one thread after it.
    let remaining = if p.pass == 0 {
        p.k
    } else {
        unsafe { (*state).remaining }
    };
    // SAFETY: every thread reaches this barrier (all reads of the state above are done).
    unsafe { arch::sync_threads() };
    if count > 0 && above < remaining && remaining <= above + count {
        let left = remaining - above;
        let shift = 8 * (passes - 1 - p.pass);
        // SAFETY: one thread writes (the buckets' ranges are disjoint); valid (caller).
        unsafe {
            let prefix = (*state).threshold() | ((bucket as u128) << shift);
            (*state).prefix = [prefix as u64, (prefix >> 64) as u64];
            (*state).remaining = left;
            if count == left || p.pass + 1 == passes {
                (*state).done = 1;
            }
        }
    }
    // SAFETY: thread t read bucket 255 − t before the barrier above; each zeroes its own.
    unsafe { counts.add(bucket).write(0) };
}

/// Copies the k elements whose composite key is at least the threshold: their value keys to `p.keys` and
/// their indices to `p.indices`, in no particular order.
///
/// # Safety
/// `p.input` valid for `p.n` reads, `p.keys`/`p.indices` for `p.k` writes, `p.state` with `done` set and
/// `count` zero; a grid of whole warps.
#[inline(always)]
pub unsafe fn filter<T: TopKElement + Copy>(p: TopKParams<T>) {
    // SAFETY: valid (caller).
    let threshold = unsafe { (*p.state).threshold() };
    let largest = p.largest != 0;
    let lane = lane_id();
    let threads = grid_threads();
    let mut first = global_thread_idx() - lane as u64;
    while first < p.n {
        let i = first + lane as u64;
        let mut key = 0;
        let mut keep = false;
        if i < p.n {
            // SAFETY: i < n.
            let x = unsafe { element(&p, i) };
            key = value_key(x, largest);
            keep = composite(key, i, p.index_bytes) >= threshold;
        }
        // SAFETY: the whole warp is here (warp-uniform loop).
        let kept = unsafe { warp::ballot(FULL_MASK, keep) };
        if kept != 0 {
            let mut base = 0u64;
            if lane == 0 {
                // SAFETY: valid (caller).
                base = unsafe {
                    arch::atomic_add_u64(&raw mut (*p.state).count, kept.count_ones() as u64)
                };
            }
            // SAFETY: the whole warp is here.
            let base = unsafe { crate::shuffle::shfl_idx(base, 0, 32, FULL_MASK) };
            if keep {
                let at = base + (kept & warp::lanemask_lt()).count_ones() as u64;
                // SAFETY: exactly k keys pass, so at < k.
                unsafe {
                    p.keys.add(at as usize).write(key);
                    p.indices.add(at as usize).write(i);
                }
            }
        }
        first += threads;
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
