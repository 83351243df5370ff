//! Stream compaction: copy the elements that pass a test to the front of an output buffer.
//!
//! - [`unordered`]: the seed's warp-aggregated atomics. Each warp votes on every element slot with `ballot`,
//!   ranks its lanes with `popc`, and reserves its output range with one `atomicAdd` for all of its
//!   elements. The order of the output depends on which warp wins each atomic, so it is unspecified.
//! - [`stable`]: order-preserving, in one pass. Each block takes the next tile of the input, counts its
//!   kept elements with a block scan, finds how many all earlier tiles kept by decoupled look-back
//!   ([`crate::lookback`]) and writes its elements at their final positions.
//!
//! Both read the input as 16-byte vectors counted from the aligned address at or below its start; the
//! lanes of the first and last vector that lie outside the slice are never read (see [`Vectors`]).
use crate::arch::{self, Vec16};
use crate::block_scan;
use crate::lookback::TileStates;
use crate::op::{OrdElement, Plus};
use crate::thread::Vectorize;
use crate::tile::Tile;
use crate::warp;

/// Vectors each thread handles per warp round ([`unordered`]) or per tile ([`stable`]). The host sizes its
/// grids with the same number.
pub const VECTORS_PER_THREAD: u64 = 4;

/// A test on one element, built from the kernel's `threshold` parameter (which tests that need none ignore).
pub trait Predicate<T>: Copy {
    /// The predicate for this launch.
    fn new(threshold: T) -> Self;
    /// Whether `x` is kept.
    fn test(self, x: T) -> bool;
}

/// Keeps `x > threshold` (never a NaN).
#[derive(Clone, Copy)]
pub struct GreaterThan<T>(T);
/// Keeps `x < threshold` (never a NaN).
#[derive(Clone, Copy)]
pub struct LessThan<T>(T);
/// Keeps `x != 0` (a NaN is kept, -0.0 is not).
#[derive(Clone, Copy)]
pub struct NonZero;
/// Keeps finite values (no NaN, no ±∞).
#[derive(Clone, Copy)]
pub struct IsFinite;

impl<T: OrdElement> Predicate<T> for GreaterThan<T> {
    #[inline(always)]
    fn new(threshold: T) -> Self {
        GreaterThan(threshold)
    }
    #[inline(always)]
    fn test(self, x: T) -> bool {
        self.0.lt(x)
    }
}

impl<T: OrdElement> Predicate<T> for LessThan<T> {
    #[inline(always)]
    fn new(threshold: T) -> Self {
        LessThan(threshold)
    }
    #[inline(always)]
    fn test(self, x: T) -> bool {
        x.lt(self.0)
    }
}

impl<T: Default + PartialEq> Predicate<T> for NonZero {
    #[inline(always)]
    fn new(_: T) -> Self {
        NonZero
    }
    #[inline(always)]
    fn test(self, x: T) -> bool {
        x != T::default()
    }
}

impl Predicate<f32> for IsFinite {
    #[inline(always)]
    fn new(_: f32) -> Self {
        IsFinite
    }
    #[inline(always)]
    fn test(self, x: f32) -> bool {
        x.is_finite()
    }
}

/// Decides whether the element at `index` (value `x`) is kept.
pub trait Selector<T>: Copy {
    /// # Safety
    /// `index` must be below the input length.
    unsafe fn keep(self, x: T, index: u64) -> bool;
}

/// Select by a [`Predicate`] on the value.
#[derive(Clone, Copy)]
pub struct If<P>(pub P);

impl<T, P: Predicate<T>> Selector<T> for If<P> {
    #[inline(always)]
    unsafe fn keep(self, x: T, _: u64) -> bool {
        self.0.test(x)
    }
}

/// Select where a parallel byte array is nonzero.
#[derive(Clone, Copy)]
pub struct Flagged(pub *const u8);

impl<T> Selector<T> for Flagged {
    #[inline(always)]
    unsafe fn keep(self, _: T, index: u64) -> bool {
        // SAFETY: the flags are as long as the input, and index is below its length.
        unsafe { self.0.add(index as usize).read() != 0 }
    }
}

/// Up to one vector's elements with a bit per lane that lies inside the slice.
#[derive(Clone, Copy)]
struct Chunk<T> {
    values: [T; 16],
    valid: u32,
    /// Input index of lane 0 (wrapped below 0 for the first vector; only valid lanes use it).
    first: u64,
}

impl<T: Vectorize + Default> Chunk<T> {
    /// No lanes: what a thread past the end holds.
    #[inline(always)]
    fn empty() -> Self {
        Chunk {
            values: [T::default(); 16],
            valid: 0,
            first: 0,
        }
    }

    /// Bits of the lanes that are inside the slice and kept by `sel`.
    ///
    /// # Safety
    /// As [`Selector::keep`] for the valid lanes.
    #[inline(always)]
    unsafe fn keep<S: Selector<T>>(&self, sel: S) -> u32 {
        let mut bits = 0;
        let mut i = 0;
        while i < T::LANES {
            // SAFETY: a valid lane's index is inside the slice.
            if self.valid & (1 << i) != 0
                && unsafe { sel.keep(self.values[i], self.first + i as u64) }
            {
                bits |= 1 << i;
            }
            i += 1;
        }
        bits
    }

    /// Writes the lanes of `bits` to `out[at..]`, in lane order.
    ///
    /// # Safety
    /// `out` must be valid for `at + bits.count_ones()` writes.
    #[inline(always)]
    unsafe fn write(&self, bits: u32, out: *mut T, at: u64) {
        let mut i = 0;
        while i < T::LANES {
            if bits & (1 << i) != 0 {
                let rank = (bits & ((1 << i) - 1)).count_ones() as u64;
                // SAFETY: at + rank < at + popc(bits).
                unsafe { out.add((at + rank) as usize).write(self.values[i]) };
            }
            i += 1;
        }
    }
}

/// The input as 16-byte vectors from the aligned address at or below `input`: vector `q` holds elements
/// `q * LANES - head .. (q + 1) * LANES - head`. Whole vectors inside the slice are one `ld.global.nc.v4`;
/// the first and last may stick out of it and are read lane by lane, inside lanes only, so no byte outside
/// the slice is ever touched.
#[derive(Clone, Copy)]
struct Vectors<T: Vectorize> {
    input: *const T,
    n: u64,
    /// Elements between the aligned address and `input`.
    head: u64,
    /// Vectors covering the slice.
    count: u64,
}

impl<T: Vectorize + Default> Vectors<T> {
    #[inline(always)]
    fn new(input: *const T, n: u64) -> Self {
        let lanes = T::LANES as u64;
        let head = (input as u64 & 15) / size_of::<T>() as u64;
        Vectors {
            input,
            n,
            head,
            count: (head + n).div_ceil(lanes),
        }
    }

    /// Vector `q`, or an empty chunk past the end.
    ///
    /// # Safety
    /// `input` valid for `n` reads, aligned to `T`, unmodified during the kernel.
    #[inline(always)]
    unsafe fn load(self, q: u64) -> Chunk<T> {
        let lanes = T::LANES as u64;
        let mut c = Chunk::<T>::empty();
        if q >= self.count {
            return c;
        }
        let start = q * lanes; // in elements from the aligned address
        c.first = start.wrapping_sub(self.head);
        if start >= self.head && start + lanes <= self.head + self.n {
            let at =
                (self.input as u64 - self.head * size_of::<T>() as u64) as *const Vec16<T::Array>;
            // SAFETY: the whole vector is inside the slice, 16-byte aligned by construction of `head`.
            let v = unsafe { arch::load_vec16(at.wrapping_add(q as usize)) };
            let mut i = 0;
            while i < T::LANES {
                c.values[i] = T::lane(&v, i);
                i += 1;
            }
            c.valid = (1 << T::LANES) - 1;
        } else {
            let mut i = 0;
            while i < T::LANES {
                let index = c.first.wrapping_add(i as u64);
                if index < self.n {
                    // SAFETY: index < n.
                    c.values[i] = unsafe { self.input.add(index as usize).read() };
                    c.valid |= 1 << i;
                }
                i += 1;
            }
        }
        c
    }
}

/// Unordered compaction of `input[0..n]` into `out`, adding the number kept to `*count`.
///
/// Every warp walks the grid in rounds of [`VECTORS_PER_THREAD`] vectors per lane. For each element slot
/// of a round, `ballot` gives the warp's bitmap of kept elements and `popc` of its bits below a lane gives
/// that lane's rank; lane 0 then reserves the round's total with one atomic add and broadcasts the base.
///
/// # Safety
/// `input` valid for `n` reads (unmodified during the kernel), `out` for as many writes as elements are
/// kept, `count` a valid `u64` holding 0 at launch that no other kernel uses concurrently.
#[inline(always)]
pub unsafe fn unordered<T: Vectorize + Default, S: Selector<T>>(
    input: *const T,
    n: u64,
    sel: S,
    out: *mut T,
    count: *mut u64,
) {
    const V: usize = VECTORS_PER_THREAD as usize;
    let vectors = Vectors::new(input, n);
    let warp = Tile::<32>::new();
    let lane = warp.thread_rank() as u64;
    let threads = arch::grid_threads();
    let below = warp::lanemask_lt();
    // The loop bound is the warp's first vector, so every lane makes the same trips (the ballots need all).
    let mut first = arch::global_thread_idx() - lane;
    while first < vectors.count {
        let mut chunks = [Chunk::<T>::empty(); V];
        let mut k = 0;
        while k < V {
            // SAFETY: `load` checks q against the vector count.
            chunks[k] = unsafe { vectors.load(first + lane + k as u64 * threads) };
            k += 1;
        }
        // One ballot per element slot: `votes[k][i]` has bit l when lane l keeps lane i of its vector k.
        let mut keep = [0u32; V];
        let mut votes = [[0u32; 16]; V];
        let mut total = 0u32;
        k = 0;
        while k < V {
            // SAFETY: valid lanes only.
            keep[k] = unsafe { chunks[k].keep(sel) };
            let mut i = 0;
            while i < T::LANES {
                // SAFETY: every lane of the warp is here (uniform loop bounds).
                votes[k][i] = unsafe { warp.ballot(keep[k] & (1 << i) != 0) };
                total += votes[k][i].count_ones();
                i += 1;
            }
            k += 1;
        }
        let mut base = 0u64;
        if lane == 0 && total > 0 {
            // SAFETY: `count` is a valid u64 (caller); one atomic per warp and round.
            base = unsafe { arch::atomic_add_u64(count, total as u64) };
        }
        // SAFETY: converged: the branch above has closed.
        base = unsafe { warp.shfl(base, 0) };
        k = 0;
        while k < V {
            let mut i = 0;
            while i < T::LANES {
                if keep[k] & (1 << i) != 0 {
                    let at = base + (votes[k][i] & below).count_ones() as u64;
                    // SAFETY: `at` is inside the range this warp reserved.
                    unsafe { out.add(at as usize).write(chunks[k].values[i]) };
                }
                base += votes[k][i].count_ones() as u64;
                i += 1;
            }
            k += 1;
        }
        first += V as u64 * threads;
    }
}

/// Shared-memory word that carries the block's tile number (past the block scan's slots).
const TILE_WORD: usize = 40;
/// Shared-memory word that carries the block's output offset.
const PREFIX_WORD: usize = 41;

/// Order-preserving compaction of `input[0..n]` into `out`, one tile of `blockDim.x *`
/// [`VECTORS_PER_THREAD`] vectors per block; the block of the last tile writes the number kept to `*count`.
///
/// Within a tile, vector `r * blockDim.x + t` goes to thread `t` (round `r`), so loads are coalesced. The
/// block scans all rounds at once: thread `t` packs its kept count of round `r` into bits `16r..16r+16` of
/// one `u64` (a round keeps at most 1024 × 16 < 2^16 elements, so the fields never carry into each other).
///
/// # Safety
/// `input` valid for `n > 0` reads (unmodified during the kernel), `out` for as many writes as elements are
/// kept, `count` for one write; `states` as [`TileStates::new`]; `gridDim.x` must be the number of tiles,
/// `ceil(vectors / (blockDim.x * VECTORS_PER_THREAD))`; shared memory of at least `8 * (PREFIX_WORD + 1)`
/// bytes (`SMEM_BYTES` is enough).
#[inline(always)]
pub unsafe fn stable<T: Vectorize + Default, S: Selector<T>>(
    input: *const T,
    n: u64,
    sel: S,
    out: *mut T,
    count: *mut u64,
    states: *mut u64,
) {
    const V: usize = VECTORS_PER_THREAD as usize;
    let vectors = Vectors::new(input, n);
    // SAFETY: forwarded to the caller.
    let states = unsafe { TileStates::new(states) };
    // SAFETY: the launch provides SMEM_BYTES > 8 * (PREFIX_WORD + 1); barriers order every access below.
    let words = unsafe { arch::shared::<u64>() };
    if arch::thread_idx() == 0 {
        // SAFETY: TILE_WORD is inside the shared memory; one writer.
        unsafe { words.add(TILE_WORD).write(states.next_tile() as u64) };
    }
    // SAFETY: every thread reaches this barrier.
    unsafe { arch::sync_threads() };
    // SAFETY: written before the barrier.
    let tile = unsafe { words.add(TILE_WORD).read() } as u32;

    let per_round = arch::block_dim() as u64;
    let tile_first = tile as u64 * per_round * V as u64 + arch::thread_idx() as u64;
    let mut chunks = [Chunk::<T>::empty(); V];
    let mut keep = [0u32; V];
    let mut packed = 0u64;
    let mut r = 0;
    while r < V {
        // SAFETY: `load` checks the vector index.
        chunks[r] = unsafe { vectors.load(tile_first + r as u64 * per_round) };
        r += 1;
    }
    r = 0;
    while r < V {
        // SAFETY: valid lanes only are tested.
        keep[r] = unsafe { chunks[r].keep(sel) };
        packed |= (keep[r].count_ones() as u64) << (16 * r);
        r += 1;
    }
    // SAFETY: every thread of the block is here; SLOTS words do not reach TILE_WORD.
    let (before, totals) = unsafe { block_scan::exclusive_scan::<Plus<u64>>(packed) };
    let field = |w: u64, r: usize| (w >> (16 * r)) & 0xffff;
    let aggregate = (0..V).map(|r| field(totals, r)).sum::<u64>();

    if arch::warp_id() == 0 {
        // SAFETY: warp 0 is whole and converged; the tile number came from `next_tile`.
        let prefix = unsafe { states.exclusive_prefix(Tile::<32>::new(), tile, aggregate) };
        if arch::lane_id() == 0 {
            // SAFETY: PREFIX_WORD is inside the shared memory, past the scan's slots; one writer.
            unsafe { words.add(PREFIX_WORD).write(prefix) };
            if tile == arch::grid_dim() - 1 {
                // SAFETY: `count` is valid for one write; only the last tile writes it.
                unsafe { count.write(prefix + aggregate) };
            }
        }
    }
    // SAFETY: every thread reaches this barrier.
    unsafe { arch::sync_threads() };
    // SAFETY: written before the barrier.
    let mut at = unsafe { words.add(PREFIX_WORD).read() };
    r = 0;
    while r < V {
        // SAFETY: the positions of kept elements are below the total kept, which `out` can hold.
        unsafe { chunks[r].write(keep[r], out, at + field(before, r)) };
        at += field(totals, r);
        r += 1;
    }
}
