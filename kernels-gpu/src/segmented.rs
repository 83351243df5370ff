//! Per-segment reductions: one result per row of a matrix, or per `begin[s] .. end[s]` range of an input.
//!
//! Every kernel cuts a segment into 16-byte **chunks** (`LANES` elements; the last one may be partial) and
//! deals them to `w` cooperating threads round robin: thread `r` folds chunks `r, r + w, r + 2w, …` (two
//! at a time), then the `w` partials meet in a fixed shuffle (or block) tree. A chunk is read with one
//! 16-byte load when the segment starts 16-byte aligned and with `LANES` scalar loads otherwise; both give
//! the same values in the same order, so a segment's result depends only on its values and on `w`, which
//! the host picks from the segment length alone (for operators whose bits no tree changes, the block
//! kernel's `w` may also follow the device):
//!
//! | kernel | threads per segment | for |
//! |---|---|---|
//! | [`rows`] | one thread, [`LANE_ROWS`] rows a trip | rows of one whole chunk (and a partial one) |
//! | [`tile`] | `width` lanes (1 … 32) of a warp | short segments, `32 / width` per warp |
//! | [`block`] with one piece | a block | long segments |
//! | [`block`] + [`combine`] | `pieces` blocks, then a block over their partials | very long segments |
//!
//! Offsets are read on the device and checked there: a segment with `end < begin` or `end > n` is never
//! read; it reduces as empty and sets the error word, which the host turns into an error.
use crate::arch::{self, Vec16};
use crate::block;
use crate::op::DeviceOp;
use crate::thread::Vectorize;
use crate::warp::{self, FULL_MASK};
use reduce_contract::layout::LANE_ROWS;
use reduce_contract::params::SegmentedParams;

/// Chunks each thread loads per trip of [`fold_with`]'s main loop.
const TRIP_CHUNKS: usize = 2;

/// One segment: the address of its first element and its length.
#[derive(Clone, Copy)]
pub(crate) struct Segment<T> {
    pub start: *const T,
    pub len: u64,
}

/// The parameters of an operator's kernels.
pub type Params<Op> = SegmentedParams<<Op as DeviceOp>::In, <Op as DeviceOp>::Acc>;

/// Segment `s` of `p`: row `s`, or `begin[s] .. end[s]` when that lies in `input[0..n]`, else an empty
/// segment and the error word set.
///
/// # Safety
/// `s < p.count`; for rows, the host has checked that every row lies in the input; for offsets, `begin`
/// and `end` are valid for `count` reads and `error` for a write.
#[inline(always)]
pub(crate) unsafe fn segment<In, Acc, P>(p: &SegmentedParams<In, Acc, P>, s: u64) -> Segment<In> {
    let (first, len) = if p.begin.is_null() {
        (s * p.stride, p.len)
    } else {
        // SAFETY: s < count, and the offset arrays hold `count` values (the host's launch contract).
        let (b, e) = unsafe { (p.begin.add(s as usize).read(), p.end.add(s as usize).read()) };
        if b <= e && e <= p.n {
            (b, e - b)
        } else {
            // SAFETY: the host passes a valid error word with offsets.
            unsafe { p.error.write_volatile(1) };
            (0, 0)
        }
    };
    Segment {
        // SAFETY: first <= n (rows: checked by the host; offsets: just above).
        start: unsafe { p.input.add(first as usize) },
        len,
    }
}

/// Folds chunks `first + r, first + r + w, …` below `stop` of `seg` (and the partial last chunk if this
/// thread's sequence reaches it below `stop`). Indices given to the operator are positions in the segment.
///
/// The segment's alignment picks each chunk's loads: one 16-byte load, or `LANES` scalar ones giving the
/// same values in the same order. With `deep` ([`DeviceOp::DEEP_FOLD`], which the block kernel and the
/// warp-wide tile pass), the choice is made once, around two copies of the fold, and the 16-byte copy keeps
/// four chunks in flight; without it, per chunk, in one compact copy, which ptxas turns into predicated code
/// that issues both kinds of loads. Narrower tiles never pass it: their segments are short, and the second
/// copy's registers cost more than the slots (rows of 8 f32: sums 11 % slower with it).
///
/// # Safety
/// `seg` must be valid for reads of `len` elements.
#[inline(always)]
unsafe fn fold_chunks<Op: DeviceOp>(
    seg: Segment<Op::In>,
    first: u64,
    stop: u64,
    r: u64,
    w: u64,
    deep: bool,
) -> Op::Acc
where
    Op::In: Vectorize,
{
    let aligned = (seg.start as u64).is_multiple_of(16);
    let vector = |p: *const Op::In| {
        // SAFETY: only called when the segment starts 16-byte aligned, which makes every chunk aligned
        // (`fold_with` passes chunks inside the segment).
        unsafe { arch::load_vec16(p as *const Vec16<<Op::In as Vectorize>::Array>) }
    };
    // SAFETY (all three): forwarded; `gather` needs only the element's alignment.
    unsafe {
        if !deep {
            fold_with::<Op>(seg, first, stop, r, w, false, |p| {
                if aligned {
                    vector(p)
                } else {
                    <Op::In as Vectorize>::gather(p)
                }
            })
        } else if aligned {
            fold_with::<Op>(seg, first, stop, r, w, true, vector)
        } else {
            fold_with::<Op>(seg, first, stop, r, w, false, |p| {
                <Op::In as Vectorize>::gather(p)
            })
        }
    }
}

/// [`fold_chunks`] with the chunk loader `load` (16-byte or scalar); `deep` (a constant after inlining in
/// the block kernel) keeps four chunks' loads in flight instead of two ([`DeviceOp::DEEP_FOLD`]).
///
/// # Safety
/// As [`fold_chunks`]; `load(p)` must be valid for a whole chunk at `p` inside the segment.
#[inline(always)]
unsafe fn fold_with<Op: DeviceOp>(
    seg: Segment<Op::In>,
    first: u64,
    stop: u64,
    r: u64,
    w: u64,
    deep: bool,
    load: impl Fn(*const Op::In) -> Vec16<<Op::In as Vectorize>::Array>,
) -> Op::Acc
where
    Op::In: Vectorize,
{
    let lanes = <Op::In as Vectorize>::LANES as u64;
    let full = seg.len / lanes;
    let stop_full = stop.min(full);
    // SAFETY (every `chunk(c)`): callers pass c < full, so the chunk lies inside the segment.
    let chunk = |c: u64| load(unsafe { seg.start.add((c * lanes) as usize) });
    let mut acc = Op::identity();
    let mut c = first + r;
    // Element i of a run of two chunks `x[h]`, `x[h + 1]` (chunks `c + h·w`, `c + (h + 1)·w`): lane i % LANES
    // of chunk i / LANES; indices grow with i.
    let pair = |x: &[Vec16<<Op::In as Vectorize>::Array>], h: usize, c: u64, i: usize| {
        let (k, j) = (h + i / lanes as usize, i % lanes as usize);
        (
            <Op::In as Vectorize>::lane(&x[k], j),
            (c + k as u64 * w) * lanes + j as u64,
        )
    };
    if deep {
        // Four chunks' loads in flight, folded as two runs of two: the runs and their order are the
        // two-chunk loop's, so the depth changes no bits.
        while c + 3 * w < stop_full {
            let x = [chunk(c), chunk(c + w), chunk(c + 2 * w), chunk(c + 3 * w)];
            unroll!(H in [0, 2] {
                acc = Op::fold_run(acc, TRIP_CHUNKS * lanes as usize, |i| pair(&x, H, c, i));
            });
            c += 2 * TRIP_CHUNKS as u64 * w;
        }
    }
    while c + w < stop_full {
        // Both loads first, then the arithmetic. Runs of two chunks, not the four of the device-wide
        // kernels: every kernel here holds the fold twice (16-byte and scalar loads), and the segmented
        // modules would double the embedded images.
        let x = [chunk(c), chunk(c + w)];
        acc = Op::fold_run(acc, TRIP_CHUNKS * lanes as usize, |i| pair(&x, 0, c, i));
        c += TRIP_CHUNKS as u64 * w;
    }
    while c < stop_full {
        let x = chunk(c);
        acc = Op::fold_run(acc, lanes as usize, |j| {
            (<Op::In as Vectorize>::lane(&x, j), c * lanes + j as u64)
        });
        c += w;
    }
    // The partial chunk (elements full · LANES .. len) belongs to the thread whose sequence lands on it.
    if c == full && full < stop {
        let mut i = full * lanes;
        while i < seg.len {
            // SAFETY: i < len.
            acc = Op::combine(
                acc,
                Op::lift(unsafe { seg.start.add(i as usize).read() }, i),
            );
            i += 1;
        }
    }
    acc
}

/// Groups of `p.width` lanes, one segment each: `32 / width` segments per warp, warps striding over the
/// segments. Lane 0 of each group writes `out[s]`.
///
/// # Safety
/// The host's launch contract: valid buffers for `p` (see [`SegmentedParams`]), `width` a power of two in
/// 1..=32, whole warps.
#[inline(always)]
pub unsafe fn tile<Op: DeviceOp>(p: Params<Op>)
where
    Op::In: Vectorize,
{
    // Shifts, not divisions: `width` is a power of two, and a division would carry a divide-by-zero panic.
    let shift = p.width.trailing_zeros().min(5) as u64;
    let w = 1u64 << shift;
    let per_warp = 32 >> shift;
    let lane = arch::lane_id() as u64;
    let rank = lane & (w - 1);
    let warps = arch::grid_threads() / 32;
    let mut base = arch::global_thread_idx() / 32 * per_warp;
    // `base` is the warp's first segment: the same in every lane, so the whole warp reaches each shuffle.
    while base < p.count {
        let s = base + (lane >> shift);
        let valid = s < p.count;
        let acc = if valid {
            // A heavy operator's segment of 65 to 2048 chunks (8 lanes up to 256 chunks, then a warp: the
            // host's plan) keeps four chunks a lane in flight, as the block kernel does (H200, `row_var_mean`
            // of bf16 rows: 4096 × 4096 75.6 → 87.3 % of the read ceiling, 16384 × 8192 74.6 → 84.9 %;
            // 65536 × 1024 at 8 lanes, 63.6 → 67.0 %). Loading the next four while folding these as well
            // (95.5 and 82.5 %) cost rows of 1024 a fifth (54.3 → 44.2 %), and in the block kernel it
            // cost rows of 65536 (81.2 → 74.8 %): more registers, fewer warps.
            let deep = Op::DEEP_FOLD && w >= 8;
            // SAFETY: s < count; the segment is valid for reads (launch contract, offsets checked).
            unsafe { fold_chunks::<Op>(segment(&p, s), 0, u64::MAX, rank, w, deep) }
        } else {
            Op::identity()
        };
        // SAFETY: every lane of the warp is here; groups of `w` lanes reduce separately.
        let r = unsafe { warp::reduce::<Op>(acc, w as u32, FULL_MASK) };
        if valid && rank == 0 {
            // SAFETY: s < count results.
            unsafe { Op::write(p.out.add(s as usize), r) };
        }
        base += warps * per_warp;
    }
}

/// Rows (never offsets) of one whole chunk and at most a partial one (`LANES ≤ len < 2 · LANES`: 4 … 7
/// f32), a thread each, [`LANE_ROWS`] rows a trip: thread `t` of `T` takes rows `t, t + T, …`, so each load and
/// store of a warp is contiguous. Every chunk load of a trip is issued before any is used, where [`tile`]'s
/// loop keeps one row's in flight (its store of a result may alias the next row's input). A row's result is
/// [`fold_chunks`]' for one lane, the same `fold_run` and partial fold in the same order, so its bits are
/// the tile's at width 1. Other lengths are the tile's; this kernel writes nothing for them.
///
/// Rows of two whole chunks stay with the tile, whose lane already loads both at once: 2^20 rows of 8 f32
/// took 13.2 µs a sum and 17.7 an argmax here, 12.8 and 16.7 in the tile (H200).
///
/// # Safety
/// As [`tile`], with `begin` null and every row inside the input.
#[inline(always)]
pub unsafe fn rows<Op: DeviceOp>(p: Params<Op>)
where
    Op::In: Vectorize,
{
    let lanes = <Op::In as Vectorize>::LANES;
    // Uniform: rows have one length. Offsets are the tile's.
    if !p.begin.is_null() || p.len < lanes as u64 || p.len >= 2 * lanes as u64 {
        return;
    }
    // SAFETY: rows, each inside the input (the caller).
    unsafe { row_trips(&p, LANE_ROWS, |trip| rows_trip::<Op>(&p, lanes, trip)) };
}

/// One trip of [`rows`]: the trip's [`LANE_ROWS`] rows.
#[inline(always)]
fn rows_trip<Op: DeviceOp>(p: &Params<Op>, lanes: usize, trip: Trip<Op::In>)
where
    Op::In: Vectorize,
{
    let load = |k: usize| {
        let at = trip.start(k);
        // SAFETY: the row's first chunk lies inside it; an aligned row makes it 16-byte aligned.
        unsafe {
            if (at as u64).is_multiple_of(16) {
                arch::load_vec16(at as *const Vec16<<Op::In as Vectorize>::Array>)
            } else {
                <Op::In as Vectorize>::gather(at)
            }
        }
    };
    // Unrolled in the source: a rolled loop over `x` would put it in local memory (long bodies: the
    // argmax's fold, u8's 16 scalar loads a chunk).
    const { assert!(LANE_ROWS == 4) };
    let x = [load(0), load(1), load(2), load(3)];
    // Every row's result before any store, so that no partial chunk's loads wait behind a store they
    // might alias.
    let mut acc = [Op::identity(); LANE_ROWS as usize];
    unroll!(K in [0, 1, 2, 3] {
        acc[K] = Op::fold_run(Op::identity(), lanes, |i| {
            (<Op::In as Vectorize>::lane(&x[K], i), i as u64)
        });
        // The partial chunk, element by element as `fold_chunks` takes it.
        let at = trip.start(K);
        let mut i = lanes as u64;
        while i < p.len {
            // SAFETY: i < len.
            acc[K] = Op::combine(acc[K], Op::lift(unsafe { at.add(i as usize).read() }, i));
            i += 1;
        }
    });
    unroll!(K in [0, 1, 2, 3] {
        if trip.row(K) < p.count {
            // SAFETY: the row is below count: a result.
            unsafe { Op::write(p.out.add(trip.row(K) as usize), acc[K]) };
        }
    });
}

/// One trip of a thread-per-row kernel ([`row_trips`]): its rows `row(k) = first + k · T` (`T` the grid's
/// threads, so a warp's rows are contiguous) and their first elements.
pub(crate) struct Trip<T> {
    first: u64,
    threads: u64,
    count: u64,
    input: *const T,
    stride: u64,
}

// Copy whatever `T` is: the trip holds a pointer to the elements, not one.
impl<T> Clone for Trip<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Trip<T> {}

impl<T> Trip<T> {
    /// The trip's `k`-th row (at or past `count` for a trip that runs past the last row).
    #[inline(always)]
    pub fn row(self, k: usize) -> u64 {
        self.first + k as u64 * self.threads
    }

    /// The first element of row `k`, or of the last row for rows past it: they re-read the last one, so the
    /// loads need no branch, and their results are dropped.
    #[inline(always)]
    pub fn start(self, k: usize) -> *const T {
        // SAFETY: the clamped row is below `count`, and `row_trips`, which alone builds a `Trip`, is called
        // only for rows that each lie inside the input.
        unsafe {
            self.input
                .add((self.row(k).min(self.count - 1) * self.stride) as usize)
        }
    }
}

/// Runs `trip` for each trip of `per_trip` rows of this thread: thread `t` of `T` takes rows `t + k · T`,
/// `k < per_trip`, then moves on by `per_trip · T`, while its first row is below `p.count`.
///
/// # Safety
/// `p` is rows (`begin` null), each inside the input (the host checks).
#[inline(always)]
pub(crate) unsafe fn row_trips<In, Acc, P>(
    p: &SegmentedParams<In, Acc, P>,
    per_trip: u64,
    mut trip: impl FnMut(Trip<In>),
) {
    let threads = arch::grid_threads();
    let mut first = arch::global_thread_idx();
    while first < p.count {
        trip(Trip {
            first,
            threads,
            count: p.count,
            input: p.input,
            stride: p.stride,
        });
        first += per_trip * threads;
    }
}

/// `pieces` blocks per segment: block `b` reduces piece `b % pieces` (chunks `piece · p.piece` up to the
/// next piece's) of segment `b / pieces` into `partials[b]`, blocks striding over `count · pieces`. With one
/// piece of `u64::MAX` chunks and `partials` = `out`, that is a block per segment writing its result.
/// (Asking L2 for a segment's first 32 KiB past the first trip when the block starts it measured 1 %
/// slower on ragged argmax, H100.)
///
/// # Safety
/// As [`tile`]; every thread of the block runs it, with the block reduction's shared memory; `partials`
/// valid for `count · pieces` writes; rows only when `pieces > 1` (`pieces` per segment is one number).
#[inline(always)]
pub unsafe fn block<Op: DeviceOp>(p: Params<Op>)
where
    Op::In: Vectorize,
{
    let (t, threads) = (arch::thread_idx() as u64, arch::block_dim() as u64);
    // At least 1, so the divisions below carry no divide-by-zero panic.
    let pieces = (p.pieces as u64).max(1);
    let total = p.count * pieces;
    let mut b = arch::block_idx() as u64;
    // `b` is the same in every thread of the block, so all of them reach each barrier.
    while b < total {
        let (s, piece) = (b / pieces, b % pieces);
        let first = piece.saturating_mul(p.piece);
        let stop = first.saturating_add(p.piece);
        // SAFETY: s < count (launch contract, offsets checked).
        let acc =
            unsafe { fold_chunks::<Op>(segment(&p, s), first, stop, t, threads, Op::DEEP_FOLD) };
        // SAFETY: every thread of the block gets here.
        let r = unsafe { block::reduce::<Op>(acc) };
        if t == 0 {
            // SAFETY: b < count · pieces partials.
            unsafe { Op::write(p.partials.add(b as usize), r) };
        }
        // The next round's block reduction reuses the shared slots warp 0 just read.
        // SAFETY: every thread of the block gets here.
        unsafe { arch::sync_threads() };
        b += arch::grid_dim() as u64;
    }
}

/// Second pass: one block per segment (blocks striding over the segments) combines its `pieces` partials,
/// thread `t` taking `t, t + blockDim, …` in order, four loads in flight, then the block tree; thread 0
/// writes `out[s]`. A warp per segment was measured first: with 4096 partials (one row of 2^28 f32) its
/// 128 dependent loads a lane took 64 µs of an argmax's 300 (ncu, H200).
///
/// # Safety
/// `partials` valid for `count · pieces` reads (written by [`block`] before), `out` for `count` writes;
/// every thread of the block runs it, with the block reduction's shared memory.
#[inline(always)]
pub unsafe fn combine<Op: DeviceOp>(p: Params<Op>) {
    let pieces = p.pieces as u64;
    let (t, threads) = (arch::thread_idx() as u64, arch::block_dim() as u64);
    let mut s = arch::block_idx() as u64;
    // `s` is the same in every thread of the block, so all of them reach each barrier.
    while s < p.count {
        // SAFETY (every read): s · pieces + i < count · pieces for the i read.
        let partial = |i: u64| unsafe { p.partials.add((s * pieces + i) as usize).read() };
        let mut acc = Op::identity();
        let mut i = t;
        while i + 3 * threads < pieces {
            let x = [
                partial(i),
                partial(i + threads),
                partial(i + 2 * threads),
                partial(i + 3 * threads),
            ];
            acc = Op::combine(Op::combine(acc, x[0]), x[1]);
            acc = Op::combine(Op::combine(acc, x[2]), x[3]);
            i += 4 * threads;
        }
        while i < pieces {
            acc = Op::combine(acc, partial(i));
            i += threads;
        }
        // SAFETY: every thread of the block gets here.
        let r = unsafe { block::reduce::<Op>(acc) };
        if t == 0 {
            // SAFETY: s < count.
            unsafe { Op::write(p.out.add(s as usize), r) };
        }
        // The next segment's block reduction reuses the shared slots warp 0 just read.
        // SAFETY: every thread of the block gets here.
        unsafe { arch::sync_threads() };
        s += arch::grid_dim() as u64;
    }
}
