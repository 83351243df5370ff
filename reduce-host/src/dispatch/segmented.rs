//! Per-segment reductions: the kernel a segment length gets, the partials of split segments, and the
//! launches; also the launches of per-segment reproducible sums.
use cust::memory::DeviceBuffer;
use reduce_contract::kernels::{
    Family, PerSegment, ReproSegments, ReproSegmentsPass, SegmentedPass,
};
use reduce_contract::layout::{
    LANE_ROWS, LOAD_BYTES, PIECE_CHUNKS, SEGMENTED_THREADS, SPLIT_ABOVE_CHUNKS,
};
use reduce_contract::params::SegmentedParams;
use reduce_contract::reproducible::{CHUNK, COMBINE_SHARED_BYTES, THREAD_ROW};
use reduce_contract::{Elem, FloatElem, Op};

use super::reproducible::{PARTIAL_BYTES, chunk_grid};
use super::{Source, Span, launch, resident};
use crate::driver::{self, Function, Launch, Order, Prefer};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::pinned::Pinned;
use crate::stream::StreamRef;
use crate::tuning::REPRO_COMBINE_THREADS;

/// Segments up to this many 16-byte chunks get a group of lanes narrower than a warp (two chunks a lane).
const TILE_CHUNKS: u64 = 64;

/// Offset segments whose mean length is over this many chunks take a block each for sums and for the
/// operators whose bits no tree changes ([`tree_free`]). Lengths that vary leave a warp per segment
/// finishing unevenly, and a cheap block tree costs less than that. Measured on the H200 at 16384 segments
/// of U(0, 10^4) f32 (mean 1250 chunks), warp / block per segment: sum 86.4 / 80.1 µs, softmax statistics
/// 102.7 / 113.9 (whose tree is fixed at 256 threads, so it keeps the warp); argmax, once its warp
/// exchange was one `redux.sync`, 93.3 / 86.8 at [`OFFSETS_EXACT_THREADS`] (99.5 at 256, 143.3 at 512)
/// (docs/PERFORMANCE.md). Rows of 1024 f32 (256 chunks) reach 94 % of the read ceiling with a warp each,
/// so the threshold stays above them.
const BLOCK_SUM_CHUNKS: u64 = 512;

/// Threads of the block kernel for offset segments of the [`tree_free`] operators: small blocks, so that an
/// SM holds many segments at once and a long one holds back few threads (see [`BLOCK_SUM_CHUNKS`]).
const OFFSETS_EXACT_THREADS: u32 = 128;

/// Segments up to this many chunks get one warp; longer ones a block.
const WARP_CHUNKS: u64 = 2048;

/// Users' operators and the statistics (heavy folds, [`Source::User`]) give segments of over
/// [`TILE_CHUNKS`] and up to this many chunks 8 lanes instead of a warp: each lane then folds four chunks at
/// a time over a longer run, and a row pays three cross-lane merges instead of five. Measured on the H200
/// (`benches/stats.rs --user-width`, % of the read ceiling, `row_var_mean` / `row_squares`, a warp → 8
/// lanes): 65536 × 1024 bf16 (128 chunks) 49.3 / 59.8 → 67.0 / 86.6, f32 (256 chunks) 77.7 / 94.4 →
/// 85.8 / 93.1; 16384 × 8192 bf16 (1024 chunks) 80.3 / 91.1 → 80.0 / 94.5, but f32 (2048 chunks) 90.5 /
/// 95.3 → 77.8 / 95.7, so longer segments keep the warp. 16 lanes fell between the two.
const USER_NARROW_CHUNKS: u64 = 256;

/// The 16-byte chunks (`LOAD_BYTES`) of `len` elements of `elem_size` bytes, the last one maybe partial: the
/// unit every plan measures segments in.
fn chunk_count(len: u64, elem_size: usize) -> u64 {
    len.div_ceil(LOAD_BYTES / elem_size as u64)
}

/// Lanes per segment of `len` elements of `elem_size` bytes for a heavy operator whose plan gives it a
/// warp (see [`USER_NARROW_CHUNKS`]).
fn user_width(len: u64, elem_size: usize) -> u32 {
    if chunk_count(len, elem_size) <= USER_NARROW_CHUNKS {
        8
    } else {
        32
    }
}

/// Most blocks per SM of a tile launch of 256 threads, scaled for other sizes (see its launch below).
const TILE_BLOCKS_PER_SM: u64 = 32;

/// Threads per block of the tile kernel at a warp per segment, whose results do not depend on it (a
/// segment is a group of lanes of one warp). Two warps: a block retires when its slowest warp does, so the
/// fewer warps share a block, the less an SM idles behind one long segment. Narrower tiles, whose threads
/// do little each, keep [`SEGMENTED_THREADS`] (small blocks would be launched faster than they finish),
/// unless their registers leave much of an SM idle there (`Function::fill_block`).
/// Measured on the H200 (docs/PERFORMANCE.md, f32, 256 → 64 threads): ragged offsets' argmax 108.6 →
/// 102.1 µs and softmax statistics 110.3 → 102.7, 2^16 × 1024 argmax 79.0 → 77.0, sums within 1 %; but
/// 2^20 × 8 (tiles of one lane) 13.0 → 14.9 µs a sum.
const WARP_TILE_THREADS: u32 = 64;

/// Most blocks a launch asks for: the kernels stride over segments (and pieces) past the grid.
const MAX_GRID: u64 = 1 << 20;

/// Which kernel reduces segments of one length, and with how many threads per segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// A thread per row, [`LANE_ROWS`] rows a trip (the rows kernel), for rows of one whole chunk and a
    /// partial one: the bits of `Tile { width: 1 }`, with every row's loads in flight at once.
    Rows,
    /// `width` lanes per segment (a power of two, 1 … 32).
    Tile { width: u32 },
    /// One block per segment (the block kernel with one piece).
    Block,
    /// `pieces` blocks per segment (the block kernel), then a combine.
    Split { pieces: u32 },
}

impl Plan {
    /// The plan for segments of `len` elements of `elem_size` bytes: a function of the length (in 16-byte
    /// chunks) only, so a segment's reduction tree, and its bits, repeat on every call (the block size of
    /// operators whose bits no tree changes may follow the device: see [`tree_free`]).
    pub fn for_len(len: u64, elem_size: usize) -> Result<Plan> {
        let chunks = chunk_count(len, elem_size);
        Ok(if chunks <= TILE_CHUNKS {
            Plan::Tile {
                width: chunks.div_ceil(2).next_power_of_two() as u32,
            }
        } else if chunks <= WARP_CHUNKS {
            Plan::Tile { width: 32 }
        } else if chunks <= SPLIT_ABOVE_CHUNKS {
            Plan::Block
        } else {
            let pieces = chunks.div_ceil(PIECE_CHUNKS);
            Plan::Split {
                pieces: u32::try_from(pieces).map_err(|_| {
                    Error::InvalidArgument(format!("segments of {len} elements are too long"))
                })?,
            }
        })
    }

    /// The plan for rows of `len` elements: [`for_len`](Self::for_len)'s, with one-lane tiles of one whole
    /// chunk and a partial one taking the rows kernel (same bits). Offsets never do: that kernel reads rows
    /// only. 2^22 rows of 4 f32 went from 25.2 to 22.1 µs a sum (H200, docs/PERFORMANCE.md), four rows'
    /// loads in flight a thread where the tile keeps one (its store may alias the next row's input).
    pub fn for_rows(len: u64, elem_size: usize) -> Result<Plan> {
        let lanes = LOAD_BYTES / elem_size as u64;
        Ok(match Plan::for_len(len, elem_size)? {
            Plan::Tile { width: 1 } if (lanes..2 * lanes).contains(&len) => Plan::Rows,
            plan => plan,
        })
    }

    /// The plan for offset-delimited segments, read on the device only: that of their mean length `n /
    /// count` (an upper bound when they tile the input), a block at most (split needs one length).
    /// Operators with a cheap block tree (`cheap_tree`: sums and the [`tree_free`] ones) take a block per
    /// segment from a mean of [`BLOCK_SUM_CHUNKS`] where the others take a warp.
    pub fn for_offsets(n: u64, count: u64, elem_size: usize, cheap_tree: bool) -> Plan {
        let mean = n / count.max(1);
        if cheap_tree && chunk_count(mean, elem_size) > BLOCK_SUM_CHUNKS {
            return Plan::Block;
        }
        match Plan::for_len(mean, elem_size) {
            Ok(Plan::Tile { width }) => Plan::Tile { width },
            _ => Plan::Block,
        }
    }
}

/// Where the segments are.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Layout {
    /// `count` segments of `len` elements, `stride` apart, all inside the input (checked).
    Rows { count: u64, len: u64, stride: u64 },
    /// `count` segments `begin[s] .. end[s]`, checked on the device.
    Offsets {
        count: u64,
        begin: Span<u64>,
        end: Span<u64>,
    },
}

impl Layout {
    pub fn count(&self) -> u64 {
        match *self {
            Layout::Rows { count, .. } | Layout::Offsets { count, .. } => count,
        }
    }

    /// The rows' length, `None` for offsets (whose lengths only the device reads).
    fn rows_len(&self) -> Option<u64> {
        match *self {
            Layout::Rows { len, .. } => Some(len),
            Layout::Offsets { .. } => None,
        }
    }

    /// The segments as every segmented kernel's parameters hold them: the rows' length and stride with
    /// null offsets, or zeros and the offsets' addresses.
    pub fn kernel_fields(&self) -> (u64, u64, *const u64, *const u64) {
        match *self {
            Layout::Rows { len, stride, .. } => (len, stride, std::ptr::null(), std::ptr::null()),
            Layout::Offsets { begin, end, .. } => (0, 0, begin.as_ptr(), end.as_ptr()),
        }
    }

    /// The kernels' parameters for these segments of `input` into `out`, with bad offsets reported to
    /// `error`: one group of threads per segment (a warp's width, one piece), which callers adjust.
    fn params<T, Acc, Partial>(
        &self,
        input: Span<T>,
        error: *mut u32,
        out: *mut Acc,
        partials: *mut Partial,
    ) -> SegmentedParams<T, Acc, Partial> {
        let (len, stride, begin, end) = self.kernel_fields();
        SegmentedParams {
            input: input.as_ptr(),
            n: input.len,
            count: self.count(),
            len,
            stride,
            begin,
            end,
            error,
            claims: core::ptr::null_mut(),
            width: 32,
            pieces: 1,
            piece: u64::MAX,
            partials,
            out,
        }
    }
}

/// `source`'s kernel of `pass`, which must run blocks of `threads` on this device: the per-segment
/// kernels' trees are written for that block size.
fn function_for<'a, F: Family>(
    gpu: &'a Gpu,
    source: Source<'a, F>,
    pass: F::Pass,
    threads: u32,
) -> Result<&'a Function> {
    let f = source.function(gpu, pass)?;
    if f.fit_block(threads) < threads {
        return Err(Error::InvalidArgument(format!(
            "the {pass:?} kernel cannot run {threads} threads per block on this device"
        )));
    }
    Ok(f)
}

/// What a per-segment call runs: a reduction by a built-in operator or a user's (one family of passes),
/// or the reproducible sums (another).
#[derive(Clone, Copy)]
pub(crate) enum Kernels<'k> {
    Reduce(Source<'k, PerSegment>),
    Reproducible(FloatElem),
}

impl<'k> From<Source<'k, PerSegment>> for Kernels<'k> {
    fn from(source: Source<'k, PerSegment>) -> Self {
        Kernels::Reduce(source)
    }
}

impl From<PerSegment> for Kernels<'_> {
    fn from(segments: PerSegment) -> Self {
        Kernels::Reduce(Source::Builtin(segments))
    }
}

/// Device temporaries: the partials of split segments (grown on demand), the bad-offsets word and the
/// reproducible sums' claim counter.
pub(crate) struct Scratch {
    partials: DeviceBuffer<u8>,
    /// Word 0: the bad-offsets word; words 2–3: the claim counter (a `u64`, 8-byte aligned). One buffer,
    /// so that one memset clears both (see [`clear_error`]).
    error: DeviceBuffer<u32>,
    /// Page-locked landing place for the error word (see [`Pinned`]).
    staging: Pinned,
    last_use: LastUse,
    /// A test's choice for the reproducible sums of long rows (`Some(true)`: always split them into
    /// chunks, `Some(false)`: never); `None` chooses by the row count. Never changes the bits.
    pub repro_split: Option<bool>,
    /// A benchmark's overrides of the plans (see [`PlanOverrides`]).
    pub overrides: PlanOverrides,
}

/// A benchmark's overrides of the segmented plans, to compare kernels on one input; `Default` overrides
/// nothing. Only `offsets_len` can change a result's bits (it picks the offsets' kernel, as their mean
/// length does).
#[doc(hidden)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PlanOverrides {
    /// Plan offset segments as if each were this long (instead of by their mean length).
    pub offsets_len: Option<u64>,
    /// Threads per block of the tile and rows kernels (instead of [`WARP_TILE_THREADS`], or
    /// [`SEGMENTED_THREADS`] fitted to the kernel's registers).
    pub tile_threads: Option<u32>,
    /// Whether rows of one chunk and a partial one take the rows kernel (instead of yes).
    pub rows_kernel: Option<bool>,
    /// Most blocks per SM of a tile or rows launch (instead of [`TILE_BLOCKS_PER_SM`] for 256 threads).
    pub tile_blocks_per_sm: Option<u32>,
    /// Threads per block of the block kernel, for operators whose bits no tree changes (instead of the
    /// size fitted to the waves).
    pub block_threads: Option<u32>,
    /// Lanes per segment for users' operators and the statistics where the plan gives a warp per segment
    /// (a power of two, 8 … 32, instead of [`user_width`]'s; changes the bits, as a different tree does):
    /// to measure how many lanes a row of a few hundred chunks does best with.
    pub user_width: Option<u32>,
}

impl Scratch {
    pub fn new() -> Result<Self> {
        Ok(Scratch {
            partials: driver::zeroed(16)?,
            error: driver::zeroed(ERROR_WORDS)?,
            staging: Pinned::new(size_of::<u32>())?,
            last_use: LastUse::new()?,
            repro_split: None,
            overrides: PlanOverrides::default(),
        })
    }

    /// Waits on the host until the last work that used the scratch is done.
    pub fn wait_idle(&self) -> Result<()> {
        self.last_use.synchronize()
    }

    /// Makes room for `bytes` of partials, after waiting for the work that may still use the old buffer.
    fn reserve(&mut self, bytes: usize) -> Result<()> {
        if self.partials.len() < bytes {
            self.last_use.synchronize()?;
            self.partials = driver::zeroed(bytes)?;
        }
        Ok(())
    }

    /// The bad-offsets word, for the kernels.
    fn error_word(&self) -> *mut u32 {
        self.error.as_device_ptr().as_raw() as *mut u32
    }

    /// The counter from which the warps of offsets' reproducible sums claim segments; cleared with the
    /// error word.
    fn claim_counter(&self) -> *mut u64 {
        // Words 2–3 of the buffer: in bounds (ERROR_WORDS), and 8-byte aligned as the allocation is.
        self.error_word().wrapping_add(2) as *mut u64
    }

    /// Reads the bad-offsets word after the work on `stream` (waits for it).
    pub fn read_error(&mut self, stream: StreamRef<'_>) -> Result<bool> {
        let word = self.error_word() as u64;
        // SAFETY: the word is a live u32 of this scratch; the read is ordered after the kernels on `stream`;
        // `staging` is this scratch's, and `&mut self` keeps other reads out.
        Ok(unsafe { driver::read_back::<u32>(word, &self.staging, stream)? } != 0)
    }
}

/// Zeroes a scratch's bad-offsets word `word` and its claim counter on `stream`, ahead of kernels that
/// may set or count them.
///
/// # Safety
/// `word` is [`Scratch::error_word`] of a live scratch, and nothing else uses it meanwhile (callers hold
/// the scratch's `last_use` claim).
unsafe fn clear_error(word: *mut u32, stream: StreamRef<'_>) -> Result<()> {
    // SAFETY: the word starts a live buffer of ERROR_WORDS u32s (the caller), whose users the caller orders.
    unsafe { driver::memset_zero(word as u64, ERROR_WORDS * size_of::<u32>(), stream) }
}

/// Words of [`Scratch`]'s error buffer: the bad-offsets word, padding, and the 64-bit claim counter.
const ERROR_WORDS: usize = 4;

/// Enqueues the per-segment reduction of `input` by `source`'s kernels (a built-in operator and element
/// type, or a user's operator) into `out[0..count]`.
///
/// # Safety
/// `input`, the offsets of `layout` and `out` (`count` accumulators) must stay valid until `stream` has
/// passed this work; rows must lie inside `input` (the handle checks); `T` and `Acc` must be the element
/// and accumulator of `source`'s kernels.
pub(crate) unsafe fn enqueue<T, Acc>(
    gpu: &Gpu,
    scratch: &mut Scratch,
    kernels: Kernels<'_>,
    input: Span<T>,
    layout: Layout,
    out: *mut Acc,
    stream: StreamRef<'_>,
) -> Result<()> {
    let count = layout.count();
    if count == 0 {
        return Ok(());
    }
    let source = match kernels {
        Kernels::Reduce(source) => source,
        Kernels::Reproducible(elem) => {
            // SAFETY: forwarded to the caller.
            return unsafe { enqueue_reproducible(gpu, scratch, elem, input, layout, out, stream) };
        }
    };
    let size = size_of::<T>();
    let sum = matches!(source, Source::Builtin(PerSegment::Op(Op::Sum, _)));
    // The length the plan follows: the rows', or offset segments' mean (or the override's).
    let (plan_len, plan_count) = match (layout.rows_len(), scratch.overrides.offsets_len) {
        (Some(len), _) | (None, Some(len)) => (len, 1),
        (None, None) => (input.len, count),
    };
    let plan = match layout.rows_len() {
        Some(len) if scratch.overrides.rows_kernel == Some(false) => Plan::for_len(len, size)?,
        Some(len) => Plan::for_rows(len, size)?,
        None => Plan::for_offsets(plan_len, plan_count, size, sum || tree_free(source)),
    };
    let plan = match (source, plan) {
        (Source::User(_), Plan::Tile { width: 32 }) => Plan::Tile {
            width: scratch
                .overrides
                .user_width
                .unwrap_or_else(|| user_width(plan_len / plan_count.max(1), size)),
        },
        _ => plan,
    };
    let (plan, piece) = match (plan, layout.rows_len()) {
        (Plan::Block | Plan::Split { .. }, Some(len)) if tree_free(source) => {
            spread(plan, len, count, size, gpu.info().sm_count as u64)
        }
        _ => (plan, PIECE_CHUNKS),
    };
    if let Plan::Split { pieces } = plan {
        let bytes = (count as u128 * pieces as u128 * size_of::<Acc>() as u128)
            .try_into()
            .map_err(|_| Error::InvalidArgument("too many segments to split".into()))?;
        scratch.reserve(bytes)?;
    }
    let params = layout.params(input, scratch.error_word(), out, out);
    let params = match plan {
        Plan::Rows => SegmentedParams { width: 1, ..params },
        Plan::Tile { width } => SegmentedParams { width, ..params },
        // One piece per segment: the block kernel writes its results straight to `out`.
        Plan::Block => params,
        Plan::Split { pieces } => SegmentedParams {
            pieces,
            piece,
            partials: scratch.partials.as_device_ptr().as_raw() as *mut Acc,
            ..params
        },
    };
    let offsets = layout.rows_len().is_none();
    let smem = source.shared_bytes();
    // Sums (and the softmax statistics) run SEGMENTED_THREADS threads a block: their block tree must not
    // depend on the device. Operators whose result has the same bits with any tree (`tree_free`) take
    // OFFSETS_EXACT_THREADS for offsets, and for rows the block size that wastes the least of the last wave.
    let block_threads = match plan {
        Plan::Block | Plan::Split { .. } if tree_free(source) => {
            if let Some(t) = scratch.overrides.block_threads {
                function_for(gpu, source, SegmentedPass::Block, t)?;
                t
            } else if offsets {
                // Offsets: lengths vary, so no wave fits them.
                OFFSETS_EXACT_THREADS
            } else {
                let blocks = match plan {
                    Plan::Split { pieces } => count * pieces as u64,
                    _ => count,
                };
                let f = source.function(gpu, SegmentedPass::Block)?;
                // A size the kernel cannot run counts as no blocks, so it is never chosen.
                wave_fitted_threads(blocks, gpu.info().sm_count, |t| {
                    if f.fit_block(t) < t {
                        Ok(0)
                    } else {
                        f.blocks_per_sm(t, smem)
                    }
                })?
            }
        }
        _ => SEGMENTED_THREADS,
    };
    // The tile and rows kernels' results do not depend on their block size (a segment is a group of lanes
    // of one warp). Narrower groups and the rows kernel take SEGMENTED_THREADS, or the size that keeps more
    // of their threads resident where their registers leave much of an SM idle (`Function::fill_block`: the
    // 87 registers of bf16 `row_var_mean`'s tile hold 16 warps an SM in blocks of 256, 22 in blocks of 64;
    // 65536 rows of 1024 took 50.6 µs and take 48.4 on the H200).
    let fitted = |pass| {
        source
            .function(gpu, pass)?
            .fill_block(SEGMENTED_THREADS, smem, Prefer::Nearest)
    };
    let tile_threads = match (scratch.overrides.tile_threads, plan) {
        (Some(t), _) => t,
        (None, Plan::Tile { width: 32 }) => WARP_TILE_THREADS,
        (None, Plan::Tile { .. }) => fitted(SegmentedPass::Tile)?,
        (None, Plan::Rows) => fitted(SegmentedPass::Rows)?,
        (None, _) => SEGMENTED_THREADS,
    };
    let shape = |pass: SegmentedPass, blocks: u64| -> Result<(SegmentedPass, Launch)> {
        let threads = match pass {
            SegmentedPass::Block => block_threads,
            SegmentedPass::Tile | SegmentedPass::Rows => tile_threads,
            SegmentedPass::Combine => SEGMENTED_THREADS,
        };
        function_for(gpu, source, pass, threads)?;
        Ok((
            pass,
            Launch {
                grid: blocks.clamp(1, MAX_GRID) as u32,
                block: threads,
                shared_bytes: smem,
            },
        ))
    };
    // SAFETY (for its callers): as `Source::launch`; `params` is the `SegmentedParams` of `T` and `Acc`,
    // the types of `source`'s kernels (the caller).
    let launch = |(pass, s): (SegmentedPass, Launch), params| unsafe {
        source.launch(gpu, pass, s, stream, params, Order::Stream)
    };
    let per_block = tile_threads as u64;
    // The tile and rows kernels' largest grid: TILE_BLOCKS_PER_SM blocks of 256 threads per SM (four
    // resident waves), each thread then striding over segments. Measured on the H200 at 2^22 rows of 4 f32
    // (the tile, before the rows kernel), a grid of one block per 256 segments (16384) took 27.3 µs a sum,
    // grids of 1056 / 2112 / 4224 blocks 26.8 / 25.4 / 24.6 µs; 2^20 × 8 (4096 blocks) is unchanged
    // (docs/PERFORMANCE.md).
    let tile_grid = gpu.info().sm_count as u64
        * match scratch.overrides.tile_blocks_per_sm {
            Some(b) => b as u64,
            None => TILE_BLOCKS_PER_SM * SEGMENTED_THREADS as u64 / per_block,
        };

    let error_word = scratch.error_word();
    // SAFETY (every launch): `input`, the offsets and `out` are valid (the caller); the partials hold
    // `count · pieces` accumulators (reserved above) and the error word is a u32, both serialised across
    // streams by `acquire`; every kernel gets the shared memory its source needs and whole warps.
    scratch.last_use.claim(stream, || unsafe {
        if offsets {
            clear_error(error_word, stream)?;
        }
        match plan {
            Plan::Rows => {
                let blocks = count.div_ceil(per_block * LANE_ROWS).min(tile_grid);
                launch(shape(SegmentedPass::Rows, blocks)?, params)
            }
            Plan::Tile { width } => {
                let blocks = count
                    .div_ceil((per_block / width as u64).max(1))
                    .min(tile_grid);
                launch(shape(SegmentedPass::Tile, blocks)?, params)
            }
            Plan::Block => launch(shape(SegmentedPass::Block, count)?, params),
            Plan::Split { pieces } => {
                launch(shape(SegmentedPass::Block, count * pieces as u64)?, params)?;
                launch(shape(SegmentedPass::Combine, count)?, params)
            }
        }
    })
}

/// Blocks an SM that few long rows of a [`tree_free`] operator are cut into (see [`spread`]).
const SPREAD_BLOCKS_PER_SM: u64 = 4;

/// The shortest piece [`spread`] cuts, in chunks: 32 KiB, eight chunks a thread of a block of 256.
const MIN_SPREAD_CHUNKS: u64 = 2048;

/// The plan and piece length (in chunks) for `count` rows of `len` elements of `elem_size` bytes that
/// `plan` (a block a row, or pieces of [`PIECE_CHUNKS`]) would give fewer than [`SPREAD_BLOCKS_PER_SM`]
/// blocks an SM: rows cut into more, shorter pieces (none under [`MIN_SPREAD_CHUNKS`]), so that every SM
/// reads. Only for [`tree_free`] operators, whose bits no cut changes; a sum's pieces must not follow the
/// device. 64 rows of 131072 f32 took a block each, 2.95 times the read of their 33.5 MB on the H100
/// (46.1 µs top-1 a row, docs/PERFORMANCE.md).
fn spread(plan: Plan, len: u64, count: u64, elem_size: usize, sm_count: u64) -> (Plan, u64) {
    let pieces_now = match plan {
        Plan::Split { pieces } => pieces as u64,
        _ => 1,
    };
    let target = SPREAD_BLOCKS_PER_SM * sm_count;
    let chunks = chunk_count(len, elem_size);
    let wanted = target.div_ceil(count.max(1));
    let pieces = wanted.min(chunks / MIN_SPREAD_CHUNKS);
    if pieces <= pieces_now {
        return (plan, PIECE_CHUNKS);
    }
    // Equal pieces; the last may be shorter, none empty.
    let piece = chunks.div_ceil(pieces);
    let pieces = chunks.div_ceil(piece);
    // `pieces` ≤ wanted, a few per SM over one row: far below u32::MAX.
    match u32::try_from(pieces) {
        Ok(pieces) if pieces > 1 => (Plan::Split { pieces }, piece),
        _ => (plan, PIECE_CHUNKS),
    }
}

/// Whether `module`'s result has the same bits whatever the reduction tree, so its block size may follow
/// the device: argmax and argmin (ties go to the lower index, a NaN to the first), and max and min of every
/// element but f16 and bf16. Those two keep the first of two equal values (−0 and +0) and the second of two
/// NaNs, so their bits could follow which thread folds which chunk.
/// A user's operator is not known to be exact, so its tree stays fixed.
fn tree_free(source: Source<'_, PerSegment>) -> bool {
    match source {
        Source::Builtin(PerSegment::Op(Op::ArgMax | Op::ArgMin, _)) => true,
        Source::Builtin(PerSegment::Op(Op::Max | Op::Min, elem)) => {
            !matches!(elem, Elem::F16 | Elem::BF16)
        }
        _ => false,
    }
}

/// Block sizes the exact operators' block kernel may take: multiples of 32 down to half of
/// [`SEGMENTED_THREADS`].
const EXACT_THREADS: [u32; 5] = [256, 224, 192, 160, 128];
const _: () = assert!(EXACT_THREADS[0] == SEGMENTED_THREADS);

/// The block size for `blocks` equal blocks of work (a segment or a piece each) on `sm_count` SMs, given
/// how many blocks of each size an SM holds (0: the size cannot run): the one with the least estimated
/// time, `waves / threads` (a block's time is its work over its threads, and the grid takes
/// `ceil(blocks / resident)` waves of them); ties go to the larger block, and [`SEGMENTED_THREADS`] when no
/// size runs. Measured on the H200: the f32 argmax's 4096 blocks (a row of
/// 2^28, 16 rows of 2^24, 4096 rows of 2^16) at 256 threads, 40 registers, 6 blocks an SM, took 5.2 waves
/// and 9–20 % longer than the sum (docs/PERFORMANCE.md); 192 threads hold 8 blocks an SM, 4 waves.
fn wave_fitted_threads(
    blocks: u64,
    sm_count: u32,
    blocks_per_sm: impl Fn(u32) -> Result<u32>,
) -> Result<u32> {
    let mut best = (u64::MAX, 1u64, SEGMENTED_THREADS);
    for t in EXACT_THREADS {
        let per_sm = blocks_per_sm(t)?;
        if per_sm == 0 {
            continue;
        }
        let resident = per_sm as u64 * sm_count.max(1) as u64;
        let waves = blocks.max(1).div_ceil(resident);
        // Compare waves / t as fractions, without division: waves·t_best < waves_best·t.
        if best.0 == u64::MAX || waves * best.1 < best.0 * t as u64 {
            best = (waves, t as u64, t);
        }
    }
    Ok(best.2)
}

/// Threads of the reproducible per-segment kernels' blocks: a power of two, so that the block kernel's warp
/// count divides the 1024 combine lanes.
const REPRO_SEGMENT_THREADS: u32 = 256;
const _: () = assert!(
    REPRO_SEGMENT_THREADS.is_power_of_two()
        && REPRO_SEGMENT_THREADS >= 32
        && REPRO_SEGMENT_THREADS <= 1024
);

/// How the per-segment reproducible sums run. Every plan gives a segment the bits of
/// `cpu::sum_reproducible` of its elements, so the choice changes only the speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReproPlan {
    /// A thread per row of at most `THREAD_ROW` elements, `LANE_ROWS` rows a trip.
    Rows,
    /// `width` lanes per segment: a warp (32) per segment of at most one chunk, or a tile of `width < 32`
    /// lanes per segment of at most `width` elements.
    Warp { width: u32 },
    /// A block per `group` segments at a time: a warp sums a segment alone up to one chunk (up to four
    /// chunks when `group > 1`), the whole block a longer one.
    Block { group: u32 },
    /// Rows cut into `pieces` chunks each: a warp per (row, chunk), then a block per row.
    Split { pieces: u32 },
}

/// The plan for rows of `rows_len` elements (`None`: offsets, whose lengths only the device reads), `count`
/// of them in an input of `n` elements, on a device that holds `wave` blocks of the block kernel at once:
/// rows of one chunk at most take a warp each; longer rows a block each while they fill the device, and are
/// split into chunks when they are too few (a block per row would leave SMs idle: one row of 2^28 f32 took
/// 54 ms a block, see docs/PERFORMANCE.md) and do not overlap (overlapping rows could ask for more partials
/// than the input has elements). `split` is a test's override.
fn repro_plan(
    rows_len: Option<u64>,
    count: u64,
    n: u64,
    wave: u64,
    split: Option<bool>,
) -> ReproPlan {
    // Long rows all take the block, one at a time; offsets may mix short and long segments, and a block
    // takes as many at a time as it has warps.
    let (rows_block, offsets_block) = (
        ReproPlan::Block { group: 1 },
        ReproPlan::Block {
            group: REPRO_SEGMENT_THREADS / 32,
        },
    );
    match rows_len {
        Some(len) if len <= THREAD_ROW => ReproPlan::Rows,
        Some(len) if len <= 32 => ReproPlan::Warp {
            width: len.next_power_of_two() as u32,
        },
        Some(len) if len <= CHUNK => ReproPlan::Warp { width: 32 },
        Some(len) if split.unwrap_or(count < wave && count.saturating_mul(len) <= n) => {
            u32::try_from(len.div_ceil(CHUNK))
                .map_or(rows_block, |pieces| ReproPlan::Split { pieces })
        }
        Some(_) => rows_block,
        None => offsets_block,
    }
}

/// Enqueues the per-segment reproducible sums of `module` (`ReproSegments`) by [`repro_plan`].
///
/// # Safety
/// As [`enqueue`], with `out` holding `count` results of the module's type (f32, or f64 for f64 elements).
unsafe fn enqueue_reproducible<T, Out>(
    gpu: &Gpu,
    scratch: &mut Scratch,
    elem: FloatElem,
    input: Span<T>,
    layout: Layout,
    out: *mut Out,
    stream: StreamRef<'_>,
) -> Result<()> {
    let count = layout.count();
    let family = ReproSegments(elem);
    let source = Source::Builtin(family);
    let block_fn = function_for(gpu, source, ReproSegmentsPass::Block, REPRO_SEGMENT_THREADS)?;
    let wave = resident(
        gpu,
        block_fn,
        u32::MAX,
        REPRO_SEGMENT_THREADS,
        COMBINE_SHARED_BYTES,
    )?
    .grid as u64;
    let plan = repro_plan(
        layout.rows_len(),
        count,
        input.len,
        wave,
        scratch.repro_split,
    );
    if let ReproPlan::Split { pieces } = plan {
        let bytes = (count as u128 * pieces as u128 * PARTIAL_BYTES as u128)
            .try_into()
            .map_err(|_| Error::InvalidArgument("too many segments to split".into()))?;
        scratch.reserve(bytes)?;
    }
    let partials = scratch.partials.as_device_ptr().as_raw() as *mut u8;
    let params = layout.params(input, scratch.error_word(), out, partials);
    // One resident wave at most (the kernels stride past it) of `threads`-thread blocks.
    let shape = |pass, blocks: u64, threads, shared_bytes| {
        let f = function_for(gpu, source, pass, threads)?;
        let s = resident(
            gpu,
            f,
            blocks.clamp(1, MAX_GRID) as u32,
            threads,
            shared_bytes,
        )?;
        Ok::<_, Error>((
            family.kernel(pass),
            Launch {
                block: threads,
                ..s
            },
        ))
    };
    let warps_per_block = REPRO_SEGMENT_THREADS as u64 / 32;
    let (error_word, claim_counter) = (scratch.error_word(), scratch.claim_counter());
    // SAFETY (every launch): `input`, the offsets and `out` are valid (the caller); rows lie inside the
    // input, and with the warp kernel are one chunk at most, and at most `width` elements for tiles and
    // `THREAD_ROW` for the rows kernel (the plan); split rows' partials hold `count ·
    // pieces` accumulators of 16 bytes (reserved above); the partials and the error word are serialised
    // across streams by `acquire`; the block and combine kernels get their COMBINE_SHARED_BYTES.
    scratch.last_use.claim(stream, || unsafe {
        if layout.rows_len().is_none() {
            clear_error(error_word, stream)?;
        }
        match plan {
            ReproPlan::Rows => {
                let (k, s) = shape(
                    ReproSegmentsPass::Rows,
                    count.div_ceil(REPRO_SEGMENT_THREADS as u64 * LANE_ROWS),
                    REPRO_SEGMENT_THREADS,
                    0,
                )?;
                launch(gpu, k, s, stream, params)
            }
            ReproPlan::Warp { width } => {
                let (k, s) = shape(
                    ReproSegmentsPass::Warp,
                    count.div_ceil(REPRO_SEGMENT_THREADS as u64 / width as u64),
                    REPRO_SEGMENT_THREADS,
                    0,
                )?;
                launch(gpu, k, s, stream, SegmentedParams { width, ..params })
            }
            ReproPlan::Block { group } => {
                let (k, s) = shape(
                    ReproSegmentsPass::Block,
                    count.div_ceil(group as u64),
                    REPRO_SEGMENT_THREADS,
                    COMBINE_SHARED_BYTES,
                )?;
                // Offsets (more than one segment a group): warps claim their segments from the counter,
                // zeroed with the error word above.
                let claims = if group > 1 {
                    claim_counter
                } else {
                    core::ptr::null_mut()
                };
                let params = SegmentedParams {
                    width: group,
                    claims,
                    ..params
                };
                launch(gpu, k, s, stream, params)
            }
            ReproPlan::Split { pieces } => {
                let params = SegmentedParams { pieces, ..params };
                let chunks = count * pieces as u64;
                let (k, s) = shape(
                    ReproSegmentsPass::SplitChunks,
                    chunks.div_ceil(warps_per_block),
                    REPRO_SEGMENT_THREADS,
                    0,
                )?;
                // Every warp sums the same number of chunks (the last ones one fewer).
                let grid = chunk_grid(chunks, s.block, s.grid, None);
                launch(gpu, k, Launch { grid, ..s }, stream, params)?;
                let threads = gpu
                    .function(family.kernel(ReproSegmentsPass::SplitCombine))?
                    .fit_block(REPRO_COMBINE_THREADS);
                let (k, s) = shape(
                    ReproSegmentsPass::SplitCombine,
                    count,
                    threads,
                    COMBINE_SHARED_BYTES,
                )?;
                launch(gpu, k, s, stream, params)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_long_rows_are_spread_over_every_sm() {
        // 64 rows of 131072 f32 (32768 chunks, a block each) on 132 SMs: 9 pieces a row, 576 blocks.
        let block = Plan::for_rows(131_072, 4).unwrap();
        assert_eq!(block, Plan::Block);
        let (plan, piece) = spread(block, 131_072, 64, 4, 132);
        assert_eq!(plan, Plan::Split { pieces: 9 });
        assert!(piece * 9 >= 32_768 && piece * 8 < 32_768);
        // Pieces are never shorter than MIN_SPREAD_CHUNKS: 16384 chunks give at most 8.
        assert_eq!(
            spread(Plan::Block, 65_536, 2, 4, 132).0,
            Plan::Split { pieces: 8 }
        );
        // Enough rows, or rows too short to cut, keep their plan.
        assert_eq!(
            spread(Plan::Block, 131_072, 1024, 4, 132),
            (Plan::Block, PIECE_CHUNKS)
        );
        assert_eq!(
            spread(Plan::Block, 8192, 8, 4, 132),
            (Plan::Block, PIECE_CHUNKS)
        );
        // A split that already gives enough blocks keeps its pieces.
        let long = Plan::for_rows(1 << 22, 4).unwrap();
        assert_eq!(spread(long, 1 << 22, 16, 4, 132), (long, PIECE_CHUNKS));
        // One row of 2^22 f32 (2^20 chunks): 528 pieces of 1986 chunks wanted, 512 of 2048 at most.
        assert_eq!(
            spread(long, 1 << 22, 1, 4, 132).0,
            Plan::Split { pieces: 512 }
        );
    }

    #[test]
    fn rows_of_one_chunk_and_a_partial_one_take_the_rows_kernel() {
        for (len, size) in [(4, 4), (7, 4), (16, 1), (31, 1), (8, 2), (2, 8), (3, 8)] {
            assert_eq!(
                Plan::for_rows(len, size).unwrap(),
                Plan::Rows,
                "{len} × {size} B"
            );
        }
        for (len, size) in [(0, 4), (3, 4), (8, 4), (15, 1), (32, 1), (1, 8), (4, 8)] {
            assert_eq!(
                Plan::for_rows(len, size).unwrap(),
                Plan::Tile { width: 1 },
                "{len} × {size} B"
            );
        }
        assert_eq!(Plan::for_rows(1000, 4).unwrap(), Plan::Tile { width: 32 });
    }

    #[test]
    fn short_segments_get_narrow_tiles_two_chunks_a_lane() {
        let tile = |width| Plan::Tile { width };
        // f32: 4 elements per chunk.
        for (len, want) in [
            (0, tile(1)),
            (1, tile(1)),
            (8, tile(1)),
            (9, tile(2)),
            (16, tile(2)),
            (17, tile(4)),
            (31, tile(4)),
            (32, tile(4)),
            (33, tile(8)),
            (127, tile(16)),
            (128, tile(16)),
            (129, tile(32)),
            (256, tile(32)),
            (1000, tile(32)),
            (8192, tile(32)),
        ] {
            assert_eq!(Plan::for_len(len, 4).unwrap(), want, "len {len}");
        }
    }

    #[test]
    fn long_segments_get_a_block_and_very_long_ones_split() {
        assert_eq!(Plan::for_len(8193, 4).unwrap(), Plan::Block);
        assert_eq!(Plan::for_len(70_000, 4).unwrap(), Plan::Block);
        assert_eq!(Plan::for_len(1 << 17, 4).unwrap(), Plan::Block);
        assert_eq!(
            Plan::for_len((1 << 17) + 1, 4).unwrap(),
            Plan::Split { pieces: 3 }
        );
        assert_eq!(
            Plan::for_len(1 << 24, 4).unwrap(),
            Plan::Split { pieces: 256 }
        );
        assert_eq!(
            Plan::for_len(1 << 28, 4).unwrap(),
            Plan::Split { pieces: 4096 }
        );
        // The same bytes give the same plan whatever the element.
        assert_eq!(
            Plan::for_len(1 << 26, 8).unwrap(),
            Plan::for_len(1 << 27, 4).unwrap()
        );
        assert_eq!(Plan::for_len(16, 1).unwrap(), Plan::Tile { width: 1 });
        assert!(Plan::for_len(u64::MAX, 1).is_err());
    }

    #[test]
    fn exact_operators_fit_their_blocks_to_the_waves() {
        // 40 registers a thread: 65536 / (40 · t) blocks an SM; 32 registers: 65536 / (32 · t), at most 8.
        let regs = |r: u32| move |t: u32| Ok((65536 / (r * t)).min(2048 / t));
        assert_eq!(wave_fitted_threads(4096, 132, regs(40)).unwrap(), 192);
        assert_eq!(wave_fitted_threads(4096, 132, regs(32)).unwrap(), 256);
        // Many waves: the quantization hardly matters and the larger block wins ties.
        assert_eq!(wave_fitted_threads(1 << 20, 132, regs(32)).unwrap(), 256);
        assert_eq!(wave_fitted_threads(1, 132, regs(40)).unwrap(), 256);
        assert_eq!(wave_fitted_threads(0, 0, |_| Ok(0)).unwrap(), 256);
        // Sizes that cannot run are never chosen.
        let big_only = |t: u32| Ok(if t < 256 { 0 } else { 6 });
        assert_eq!(wave_fitted_threads(4096, 132, big_only).unwrap(), 256);
        let no_256 = |t: u32| Ok(if t == 256 { 0 } else { 65536 / (40 * t) });
        assert_ne!(wave_fitted_threads(4096, 132, no_256).unwrap(), 256);
    }

    #[test]
    fn only_operators_whose_bits_ignore_the_tree_fit_their_blocks() {
        use reduce_contract::Sample;
        assert!(tree_free(Source::Builtin(PerSegment::Op(
            Op::ArgMax,
            Elem::F16
        ))));
        assert!(tree_free(Source::Builtin(PerSegment::Op(
            Op::ArgMin,
            Elem::BF16
        ))));
        assert!(tree_free(Source::Builtin(PerSegment::Op(
            Op::Max,
            Elem::F32
        ))));
        assert!(tree_free(Source::Builtin(PerSegment::Op(
            Op::Min,
            Elem::U8
        ))));
        assert!(!tree_free(Source::Builtin(PerSegment::Op(
            Op::Max,
            Elem::F16
        ))));
        assert!(!tree_free(Source::Builtin(PerSegment::Op(
            Op::Min,
            Elem::BF16
        ))));
        assert!(!tree_free(Source::Builtin(PerSegment::Op(
            Op::Sum,
            Elem::I32
        ))));
        assert!(!tree_free(Source::Builtin(PerSegment::Softmax(
            Sample::F32
        ))));
    }

    #[test]
    fn offsets_plan_by_the_mean_length_and_never_split() {
        for cheap_tree in [false, true] {
            assert_eq!(
                Plan::for_offsets(0, 0, 4, cheap_tree),
                Plan::Tile { width: 1 }
            );
            assert_eq!(Plan::for_offsets(1 << 28, 1, 4, cheap_tree), Plan::Block);
            assert_eq!(
                Plan::for_offsets(1 << 20, 1 << 20, 4, cheap_tree),
                Plan::Tile { width: 1 }
            );
            // 512 chunks of f32 take a warp either way; cheap trees of more take a block.
            assert_eq!(
                Plan::for_offsets(2048 * 1000, 1000, 4, cheap_tree),
                Plan::Tile { width: 32 }
            );
        }
        assert_eq!(
            Plan::for_offsets(5000 * 1000, 1000, 4, false),
            Plan::Tile { width: 32 }
        );
        assert_eq!(Plan::for_offsets(5000 * 1000, 1000, 4, true), Plan::Block);
        assert_eq!(Plan::for_offsets(2049 * 1000, 1000, 4, true), Plan::Block);
    }

    #[test]
    fn reproducible_short_rows_take_a_thread_rows_of_one_chunk_a_warp_few_long_rows_split() {
        use super::{ReproPlan, repro_plan};
        use reduce_contract::reproducible::CHUNK;
        let wave = 1056;
        let plan = |len, count| repro_plan(len, count, u64::MAX, wave, None);
        let warp = |width| ReproPlan::Warp { width };
        for len in [0, 1, 2, 3, 4, 8] {
            assert_eq!(plan(Some(len), 1 << 22), ReproPlan::Rows, "len {len}");
        }
        for (len, width) in [(9, 16), (16, 16), (17, 32), (32, 32), (33, 32)] {
            assert_eq!(plan(Some(len), 1 << 22), warp(width), "len {len}");
        }
        assert_eq!(plan(Some(CHUNK), 1), warp(32));
        assert_eq!(plan(Some(CHUNK + 1), 4096), ReproPlan::Block { group: 1 });
        assert_eq!(plan(Some(CHUNK + 1), 1055), ReproPlan::Split { pieces: 2 });
        assert_eq!(plan(Some(1 << 28), 1), ReproPlan::Split { pieces: 1 << 15 });
        assert_eq!(
            plan(Some(u64::MAX), 1),
            ReproPlan::Block { group: 1 },
            "pieces past u32 stay a block per row"
        );
        assert_eq!(
            repro_plan(Some(1 << 20), 8, 1 << 20, wave, None),
            ReproPlan::Block { group: 1 },
            "overlapping rows (stride 0) are not split"
        );
        assert_eq!(
            repro_plan(Some(1 << 20), 8, 8 << 20, wave, None),
            ReproPlan::Split { pieces: 128 }
        );
        assert_eq!(
            plan(None, 1),
            ReproPlan::Block { group: 8 },
            "offsets: lengths unknown on the host, a block takes eight at a time"
        );
        // A test's override, for long rows only.
        assert_eq!(
            repro_plan(Some(3 * CHUNK), 1 << 20, 0, wave, Some(true)),
            ReproPlan::Split { pieces: 3 }
        );
        assert_eq!(
            repro_plan(Some(3 * CHUNK), 1, u64::MAX, wave, Some(false)),
            ReproPlan::Block { group: 1 }
        );
        assert_eq!(
            repro_plan(Some(CHUNK), 1, u64::MAX, wave, Some(true)),
            warp(32)
        );
    }
}
