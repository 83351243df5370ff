//! The results: [`fill`] when every key is equal, else [`sort`] (k ≤ [`SORT_TILE`]) or [`sort_block`],
//! [`merge`] and [`gather`].

use reduce_contract::params::TopKParams;
use reduce_contract::topk::{ALL_EQUAL, MERGE_ITEMS, SORT_TILE, before};

use super::element;
use crate::arch::{self, block_dim, global_thread_idx, grid_threads, thread_idx};
use crate::bitonic;

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
    // Compare-exchange: best first in runs that go up.
    let exchange = |a: usize, b: usize, up: bool| {
        // SAFETY: a < b < size, slots of the shared arrays.
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
    };
    // SAFETY: the whole block (caller), the slots written above; `exchange` touches its pair only.
    unsafe { bitonic::sort(size, t, threads, exchange) };
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
/// As the select's outputs (`split`, `level`), now written; the outputs valid for `p.k` writes;
/// `16 · SORT_TILE` bytes of dynamic shared memory.
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
