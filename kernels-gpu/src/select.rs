//! Stream compaction: copy the elements that pass a test to the front of an output buffer.
//!
//! Both kinds run one kernel body, [`tiles`]: each block takes the next tile of the input, counts its kept
//! elements with a block scan, compacts them in shared memory and writes them out as one contiguous run.
//! They differ only in where a tile's run starts:
//! - [`stable`] (order-preserving): after every earlier tile's, found by decoupled look-back
//!   ([`crate::lookback`]);
//! - [`unordered`]: wherever one atomic add on the count reserves it, so tiles land in the order their
//!   atomics do (unspecified), each in input order.
//!
//! Both read the input as 16-byte vectors counted from the aligned address at or below its start; the
//! lanes of the first and last vector that lie outside the slice are never read (see [`Vectors`]).
use crate::arch::{self, Vec16};
use crate::block_scan;
use crate::lookback::TileStates;
use crate::op::{OrdElement, Plus};
use crate::thread::Vectorize;
use crate::tile::Tile;
use reduce_contract::layout::STABLE_PREFETCH_TILES_PER_SM;

/// Vectors each thread handles per tile of the exported [`stable`] and [`unordered`] kernels. The host sizes
/// its grid (one block per tile) and the staging memory with the same number.
pub use reduce_contract::layout::STABLE_VECTORS;

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

/// The value tests of [`NonZero`] and [`IsFinite`], by each type's meaning rather than its bits: −0.0 is
/// zero, and an integer is always finite.
pub trait Value: Copy {
    /// Whether the value is zero (either zero of a float).
    fn is_zero(self) -> bool;
    /// Whether the value is neither a NaN nor ±∞.
    fn is_finite(self) -> bool;
}

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            #[inline(always)]
            fn is_zero(self) -> bool {
                self == 0
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                true
            }
        }
    )*};
}
int_value!(i32, u32, i64, u64, u8);

macro_rules! float_value {
    ($($t:ty),*) => {$(
        impl Value for $t {
            #[inline(always)]
            fn is_zero(self) -> bool {
                self == 0.0
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
        }
    )*};
}
float_value!(f32, f64);

/// The 16-bit floats by their bits: `magnitude` masks the sign off, `exponent` is the all-ones exponent.
macro_rules! half_value {
    ($($t:ty: $exponent:literal),*) => {$(
        impl Value for $t {
            #[inline(always)]
            fn is_zero(self) -> bool {
                self.0 & 0x7fff == 0
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                self.0 & $exponent != $exponent
            }
        }
    )*};
}
half_value!(crate::half::F16: 0x7c00, crate::half::BF16: 0x7f80);

impl<T: Value> Predicate<T> for NonZero {
    #[inline(always)]
    fn new(_: T) -> Self {
        NonZero
    }
    #[inline(always)]
    fn test(self, x: T) -> bool {
        !x.is_zero()
    }
}

impl<T: Value> Predicate<T> for IsFinite {
    #[inline(always)]
    fn new(_: T) -> Self {
        IsFinite
    }
    #[inline(always)]
    fn test(self, x: T) -> bool {
        x.is_finite()
    }
}

/// Decides whether the element at `index` (value `x`) is kept.
pub trait Selector<T>: Copy {
    /// # Safety
    /// `index` must be below the input length.
    unsafe fn keep(self, x: T, index: u64) -> bool;

    /// Bit `i` set where the element at `first + i` (value `values[i]`) is kept, for a whole vector of
    /// `lanes` elements: [`keep`](Self::keep) lane by lane, unless the selector reads its lanes faster
    /// together.
    ///
    /// # Safety
    /// `first + lanes` must be at most the input length; `lanes <= 16`.
    #[inline(always)]
    unsafe fn keep_vector(self, values: &[T; 16], first: u64, lanes: usize) -> u32
    where
        T: Copy,
    {
        let mut bits = 0;
        // Unrolled in the source, so that `values` stays in registers.
        unroll!(I in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] {
            // SAFETY: first + I < first + lanes <= the input length.
            if I < lanes && unsafe { self.keep(values[I], first + I as u64) } {
                bits |= 1 << I;
            }
        });
        bits
    }

    /// Asks L2 for what [`keep`](Self::keep) will read of elements `from..to` besides their values, this
    /// thread's share (`rank` of `ranks`): nothing for a test on the value.
    ///
    /// # Safety
    /// `from..to` must lie inside the input.
    #[inline(always)]
    unsafe fn prefetch(self, from: u64, to: u64, rank: u64, ranks: u64) {
        let _ = (from, to, rank, ranks);
    }
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

    /// A vector's flags in words of up to 8 bytes where they are aligned to the word (one load for the 4
    /// flags of an f32 vector, not 4), byte by byte where they are not.
    #[inline(always)]
    unsafe fn keep_vector(self, _: &[T; 16], first: u64, lanes: usize) -> u32 {
        // SAFETY: first + lanes <= the input length, which the flags match.
        let at = unsafe { self.0.add(first as usize) };
        let word = if lanes < 8 { lanes } else { 8 };
        let mut bits = 0u32;
        let mut w = 0;
        while w < lanes {
            let v: u64 = if word >= 2 && (at as usize).is_multiple_of(word) {
                // SAFETY: bytes w .. w + word of the vector's flags, aligned to `word` (tested), and the
                // flags are unmodified during the kernel (the launch contract).
                unsafe {
                    match word {
                        8 => arch::load_nc(at.add(w) as *const u64),
                        4 => arch::load_nc(at.add(w) as *const u32) as u64,
                        _ => arch::load_nc(at.add(w) as *const u16) as u64,
                    }
                }
            } else {
                let mut v = 0u64;
                let mut i = 0;
                while i < word {
                    // SAFETY: byte w + i of the vector's flags.
                    v |= (unsafe { at.add(w + i).read() } as u64) << (8 * i);
                    i += 1;
                }
                v
            };
            let mut i = 0;
            while i < word {
                if (v >> (8 * i)) & 0xff != 0 {
                    bits |= 1 << (w + i);
                }
                i += 1;
            }
            w += word;
        }
        bits
    }

    /// The flags' lines.
    #[inline(always)]
    unsafe fn prefetch(self, from: u64, to: u64, rank: u64, ranks: u64) {
        // SAFETY: the flags match the input, so `from..to` lies inside them (the caller).
        unsafe { arch::prefetch_l2_range(self.0, from, to, rank, ranks) };
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

    /// [`keep`](Self::keep) of a chunk whose lanes are all inside the slice (from
    /// [`Vectors::load_whole`]), by [`Selector::keep_vector`]: with `WHOLE` false, `keep` itself.
    ///
    /// # Safety
    /// As [`keep`](Self::keep); with `WHOLE`, every lane valid.
    #[inline(always)]
    unsafe fn keep_as<S: Selector<T>, const WHOLE: bool>(&self, sel: S) -> u32 {
        if WHOLE {
            // SAFETY: every lane is inside the slice (the caller), so `first + LANES <= n`.
            unsafe { sel.keep_vector(&self.values, self.first, T::LANES) }
        } else {
            // SAFETY: forwarded to the caller.
            unsafe { self.keep(sel) }
        }
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

    /// Whether vectors `a..b` lie wholly inside the slice, so [`load_whole`](Self::load_whole) may read them.
    #[inline(always)]
    fn whole(self, a: u64, b: u64) -> bool {
        let lanes = T::LANES as u64;
        a * lanes >= self.head && b * lanes <= self.head + self.n
    }

    /// The elements of vectors `a..b` that lie inside the slice, as a range of indices (empty past the end).
    #[inline(always)]
    fn elements(self, a: u64, b: u64) -> (u64, u64) {
        let lanes = T::LANES as u64;
        let clamp = |q: u64| (q * lanes).saturating_sub(self.head).min(self.n);
        (clamp(a), clamp(b))
    }

    /// Vector `q`, which lies wholly inside the slice: one 16-byte load, every lane valid.
    ///
    /// # Safety
    /// As [`load`](Self::load), and `whole(q, q + 1)`.
    #[inline(always)]
    unsafe fn load_whole(self, q: u64) -> Chunk<T> {
        let lanes = T::LANES as u64;
        let mut c = Chunk::<T>::empty();
        c.first = (q * lanes).wrapping_sub(self.head);
        let at = (self.input as u64 - self.head * size_of::<T>() as u64) as *const Vec16<T::Array>;
        // SAFETY: the vector is inside the slice (caller), 16-byte aligned by construction of `head`.
        let v = unsafe { arch::load_vec16(at.wrapping_add(q as usize)) };
        let mut i = 0;
        while i < T::LANES {
            c.values[i] = T::lane(&v, i);
            i += 1;
        }
        c.valid = (1 << T::LANES) - 1;
        c
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

/// Shared-memory word that carries the block's tile number (past the block scan's slots).
const TILE_WORD: usize = 40;
/// Shared-memory word that carries the block's output offset.
const PREFIX_WORD: usize = 41;
/// Byte offset of the compaction kernels' staging area in shared memory (16-byte aligned, past PREFIX_WORD).
pub const STAGE_OFFSET: usize = reduce_contract::layout::STAGE_OFFSET as usize;
const _: () = assert!(
    8 * (PREFIX_WORD + 1) <= STAGE_OFFSET,
    "the staging area starts past the scan words"
);

/// Order-preserving compaction of `input[0..n]` into `out` ([`tiles`] with look-back); the block of the
/// last tile writes the number kept to `*count`.
///
/// # Safety
/// As [`tiles`], with `count` valid for one write.
#[inline(always)]
pub unsafe fn stable<T: Vectorize + Default, S: Selector<T>, const V: usize>(
    input: *const T,
    n: u64,
    sel: S,
    out: *mut T,
    count: *mut u64,
    states: *mut u64,
) {
    // SAFETY: forwarded to the caller.
    unsafe { tiles::<T, S, V, true>(input, n, sel, out, count, states) }
}

/// Unordered compaction of `input[0..n]` into `out` ([`tiles`], each tile's run placed by one atomic add on
/// `*count`), which ends holding the number kept. It was a grid-stride kernel of warp-aggregated atomics
/// (one atomic per warp and round of 8 vectors a lane on the one counter, 126 registers): on 2^28 f32 it
/// took 691.9 µs keeping x > 0.5 and 583 keeping x > 0.99, the tiles 536.5 and 360.5 (H100, two runs).
///
/// # Safety
/// As [`tiles`], with `count` a valid `u64` holding 0 at launch that no other kernel uses meanwhile.
#[inline(always)]
pub unsafe fn unordered<T: Vectorize + Default, S: Selector<T>, const V: usize>(
    input: *const T,
    n: u64,
    sel: S,
    out: *mut T,
    count: *mut u64,
    states: *mut u64,
) {
    // SAFETY: forwarded to the caller.
    unsafe { tiles::<T, S, V, false>(input, n, sel, out, count, states) }
}

/// Compaction of `input[0..n]` into `out`, one tile of `blockDim.x * V` vectors per block, tiles numbered in
/// the order blocks start. A tile's run starts after every earlier tile's with `ORDERED` (decoupled
/// look-back; the last tile writes the total to `*count`), else where an atomic add of its kept count on
/// `*count` puts it.
///
/// Within a tile, vector `r * blockDim.x + t` goes to thread `t` (round `r`), so loads are coalesced. The
/// block scans all rounds at once: thread `t` packs its kept count of round `r` into bits `16r..16r+16` of
/// one `u64` (a round keeps at most 1024 × 16 < 2^16 elements, so the fields never carry into each other).
/// The kept elements are compacted into shared memory at their places in the tile while warp 0 finds the
/// run's start, then the block writes them out as one contiguous run: whole lines, where writing from
/// registers would scatter partial ones.
///
/// # Safety
/// `input` valid for `n > 0` reads (unmodified during the kernel), `out` for as many writes as elements are
/// kept, `count` as [`stable`] or [`unordered`] say; `states` as [`TileStates::new`] (without `ORDERED`,
/// the tile counter alone); `gridDim.x` must be the number of tiles, `ceil(vectors / (blockDim.x * V))`;
/// `V <= 4`; shared memory of at least `STAGE_OFFSET + blockDim.x * V * 16` bytes.
#[inline(always)]
pub unsafe fn tiles<T: Vectorize + Default, S: Selector<T>, const V: usize, const ORDERED: bool>(
    input: *const T,
    n: u64,
    sel: S,
    out: *mut T,
    count: *mut u64,
    states: *mut u64,
) {
    const { assert!(V <= 4, "four 16-bit round counts per u64") };
    let vectors = Vectors::new(input, n);
    // SAFETY: forwarded to the caller.
    let states = unsafe { TileStates::new(states) };
    // SAFETY: the launch provides at least STAGE_OFFSET > 8 * (PREFIX_WORD + 1) bytes; barriers order every
    // access below.
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
    let tile_first = tile as u64 * per_round * V as u64;
    let mine = tile_first + arch::thread_idx() as u64;
    let load = |r: usize| mine + r as u64 * per_round;
    // The tile a block will start about when this one ends (`STABLE_PREFETCH_TILES_PER_SM` blocks an SM
    // ahead), whose lines the other warps ask L2 for while warp 0 finds the run's start.
    let ahead = tile as u64 + arch::sm_count() as u64 * STABLE_PREFETCH_TILES_PER_SM as u64;
    let prefetch = |rank: u64, ranks: u64| {
        if STABLE_PREFETCH_TILES_PER_SM > 0 && ahead < arch::grid_dim() as u64 {
            let first = ahead * per_round * V as u64;
            let (from, to) = vectors.elements(first, first + per_round * V as u64);
            let size = size_of::<T>() as u64;
            // SAFETY: `from..to` lies inside the slice (`elements`), and the flags match it.
            unsafe {
                arch::prefetch_l2_range(input as *const u8, from * size, to * size, rank, ranks);
                sel.prefetch(from, to, rank, ranks);
            }
        }
    };
    // Tiles wholly inside the slice (all but at most two) skip the per-lane bounds checks.
    macro_rules! tile_with {
        ($whole:literal, $load:ident) => {
            // SAFETY: `load_whole` only when the tile is inside, `load` checks; the branch is
            // block-uniform, as `one_tile` needs.
            unsafe {
                one_tile::<T, S, V, $whole, ORDERED>(
                    |r| vectors.$load(load(r)),
                    prefetch,
                    sel,
                    out,
                    count,
                    states,
                    tile,
                )
            }
        };
    }
    if vectors.whole(tile_first, tile_first + per_round * V as u64) {
        tile_with!(true, load_whole)
    } else {
        tile_with!(false, load)
    }
}

/// The tile of [`tiles`] numbered `tile`: `load(r)` gives this thread's vector of round `r`, wholly inside
/// the slice with `WHOLE`; `prefetch(rank, ranks)` asks L2 for this thread's share of a later tile.
///
/// # Safety
/// Called by every thread of the block; with `WHOLE`, `load` gives chunks whose lanes are all valid; the
/// rest as [`tiles`].
#[inline(always)]
unsafe fn one_tile<
    T: Vectorize + Default,
    S: Selector<T>,
    const V: usize,
    const WHOLE: bool,
    const ORDERED: bool,
>(
    load: impl Fn(usize) -> Chunk<T>,
    prefetch: impl Fn(u64, u64),
    sel: S,
    out: *mut T,
    count: *mut u64,
    states: TileStates,
    tile: u32,
) {
    // SAFETY: as in `tiles`.
    let words = unsafe { arch::shared::<u64>() };
    let mut chunks = [Chunk::<T>::empty(); V];
    each_index!(R < V, { chunks[R] = load(R) });
    let mut keep = [0u32; V];
    let mut packed = 0u64;
    let mut r = 0;
    while r < V {
        // SAFETY: valid lanes only are tested.
        keep[r] = unsafe { chunks[r].keep_as::<S, WHOLE>(sel) };
        packed |= (keep[r].count_ones() as u64) << (16 * r);
        r += 1;
    }
    // SAFETY: every thread of the block is here; SLOTS words do not reach TILE_WORD.
    let (before, totals) = unsafe { block_scan::exclusive_scan::<Plus<u64>>(packed) };
    let field = |w: u64, r: usize| (w >> (16 * r)) & 0xffff;
    let aggregate = (0..V).map(|r| field(totals, r)).sum::<u64>();

    // Warp 0 finds the run's start first (publishing the tile's count and looking back, or one atomic), so
    // successors see the count as soon as the tile is scanned, and the other warps' compaction overlaps
    // the wait.
    if arch::warp_id() == 0 {
        let prefix = if ORDERED {
            // SAFETY: warp 0 is whole and converged; the tile number came from `next_tile`.
            unsafe { states.exclusive_prefix(Tile::<32>::new(), tile, aggregate) }
        } else if arch::lane_id() == 0 && aggregate > 0 {
            // SAFETY: `count` is a valid u64 that only this kernel's atomics change (the caller).
            unsafe { arch::atomic_add_u64(count, aggregate) }
        } else {
            0
        };
        if arch::lane_id() == 0 {
            // SAFETY: PREFIX_WORD is inside the shared memory, past the scan's slots; one writer.
            unsafe { words.add(PREFIX_WORD).write(prefix) };
            if ORDERED && tile == arch::grid_dim() - 1 {
                // SAFETY: `count` is valid for one write; only the last tile writes it.
                unsafe { count.write(prefix + aggregate) };
            }
        }
    }
    {
        // Compact the tile into shared memory at its tile-local places (no prefix needed yet), so the global
        // writes below are whole contiguous runs instead of scattered partial lines.
        // SAFETY: the staging area starts past PREFIX_WORD and holds a whole tile (the launch contract).
        let stage = unsafe { (words as *mut u8).add(STAGE_OFFSET) } as *mut T;
        let mut at = 0u64;
        r = 0;
        while r < V {
            // SAFETY: tile-local places are below the tile's element count.
            unsafe { chunks[r].write(keep[r], stage, at + field(before, r)) };
            at += field(totals, r);
            r += 1;
        }
        // Then, while warp 0 may still be waiting on its predecessors, the rest of the block asks L2 for a
        // later tile, which keeps HBM busy through the wait.
        let warp = arch::warp_id();
        if warp != 0 {
            prefetch(
                arch::thread_idx() as u64 - 32,
                arch::block_dim() as u64 - 32,
            );
        }
    }
    // SAFETY: every thread reaches this barrier.
    unsafe { arch::sync_threads() };
    // SAFETY: written before the barrier.
    let prefix = unsafe { words.add(PREFIX_WORD).read() };
    // SAFETY: as above; the staged elements were written before the barrier.
    let stage = unsafe { (words as *mut u8).add(STAGE_OFFSET) } as *const T;
    let mut j = arch::thread_idx() as u64;
    while j < aggregate {
        // SAFETY: j < aggregate, the tile's kept count, and prefix + aggregate <= the total kept.
        unsafe {
            out.add((prefix + j) as usize)
                .write(stage.add(j as usize).read())
        };
        j += arch::block_dim() as u64;
    }
}
