//! Per-segment reductions: the kernel a segment length gets, the partials of split segments, and the
//! launches; also the launches of per-segment reproducible sums.
use cust::memory::DeviceBuffer;
use reduce_contract::kernels::{ReproSegmentsKernel, SegmentedKernel};
use reduce_contract::layout::{
    LOAD_BYTES, PIECE_CHUNKS, SEGMENTED_THREADS, SMEM_BYTES, SPLIT_ABOVE_CHUNKS,
};
use reduce_contract::params::SegmentedParams;
use reduce_contract::reproducible::{CHUNK, COMBINE_SHARED_BYTES};
use reduce_contract::{Kernel, Module};

use super::{Span, launch, resident};
use crate::driver::{self, Function, Launch};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::pinned::Pinned;
use crate::stream::StreamRef;

/// Segments up to this many 16-byte chunks get a group of lanes narrower than a warp (two chunks a lane).
const TILE_CHUNKS: u64 = 64;

/// Segments up to this many chunks get one warp; longer ones a block.
const WARP_CHUNKS: u64 = 2048;

/// Most blocks per SM of a tile launch (see its launch below).
const TILE_BLOCKS_PER_SM: u64 = 32;

/// Most blocks a launch asks for: the kernels stride over segments (and pieces) past the grid.
const MAX_GRID: u64 = 1 << 20;

/// Which kernel reduces segments of one length, and with how many threads per segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// `width` lanes per segment (a power of two, 1 … 32).
    Tile { width: u32 },
    /// One block per segment (the block kernel with one piece).
    Block,
    /// `pieces` blocks per segment (the block kernel), then a combine.
    Split { pieces: u32 },
}

impl Plan {
    /// The plan for segments of `len` elements of `elem_size` bytes: a function of the length (in 16-byte
    /// chunks) only, so a segment's reduction tree, and its bits, repeat on every call.
    pub fn for_len(len: u64, elem_size: usize) -> Result<Plan> {
        let chunks = len.div_ceil(LOAD_BYTES / elem_size as u64);
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

    /// The plan for offset-delimited segments, read on the device only: that of their mean length `n /
    /// count` (an upper bound when they tile the input), a block at most (split needs one length).
    pub fn for_offsets(n: u64, count: u64, elem_size: usize) -> Plan {
        match Plan::for_len(n / count.max(1), elem_size) {
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

    /// The kernels' parameters for these segments of `input` into `out`, with bad offsets reported to
    /// `error`: one group of threads per segment (a warp's width, one piece), which callers adjust.
    fn params<T, Acc>(
        &self,
        input: Span<T>,
        error: *mut u32,
        out: *mut Acc,
    ) -> SegmentedParams<T, Acc> {
        let (len, stride, begin, end) = match *self {
            Layout::Rows { len, stride, .. } => (len, stride, std::ptr::null(), std::ptr::null()),
            Layout::Offsets { begin, end, .. } => (0, 0, begin.as_ptr(), end.as_ptr()),
        };
        SegmentedParams {
            input: input.as_ptr(),
            n: input.len,
            count: self.count(),
            len,
            stride,
            begin,
            end,
            error,
            width: 32,
            pieces: 1,
            piece: u64::MAX,
            partials: out,
            out,
        }
    }
}

/// `kernel`'s function, which must run blocks of `threads` on this device: the per-segment kernels' trees
/// are written for that block size.
fn function_for(gpu: &Gpu, kernel: Kernel, threads: u32) -> Result<&Function> {
    let f = gpu.function(kernel)?;
    if f.fit_block(threads) < threads {
        return Err(Error::InvalidArgument(format!(
            "{kernel:?} cannot run {threads} threads per block on this device"
        )));
    }
    Ok(f)
}

/// Device temporaries: the partials of split segments (grown on demand) and the bad-offsets word.
pub(crate) struct Scratch {
    partials: DeviceBuffer<u8>,
    error: DeviceBuffer<u32>,
    /// Page-locked landing place for the error word (see [`Pinned`]).
    staging: Pinned,
    last_use: LastUse,
}

impl Scratch {
    pub fn new() -> Result<Self> {
        Ok(Scratch {
            partials: DeviceBuffer::zeroed(16)?,
            error: DeviceBuffer::zeroed(1)?,
            staging: Pinned::new(size_of::<u32>())?,
            last_use: LastUse::new()?,
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
            self.partials = DeviceBuffer::zeroed(bytes)?;
        }
        Ok(())
    }

    /// The bad-offsets word, for the kernels.
    fn error_word(&self) -> *mut u32 {
        self.error.as_device_ptr().as_raw() as *mut u32
    }

    /// Zeroes the bad-offsets word on `stream`, ahead of kernels that may set it.
    ///
    /// # Safety
    /// Nothing else may use the word meanwhile (callers hold the scratch's `last_use` order).
    unsafe fn clear_error(&self, stream: StreamRef<'_>) -> Result<()> {
        // SAFETY: the word is a live u32 of this scratch; the caller orders its users.
        unsafe { driver::memset_zero(self.error_word() as u64, size_of::<u32>(), stream) }
    }

    /// Reads the bad-offsets word after the work on `stream` (waits for it).
    pub fn read_error(&mut self, stream: StreamRef<'_>) -> Result<bool> {
        let word = self.error_word() as u64;
        // SAFETY: the word is a live u32 of this scratch; the read is ordered after the kernels on `stream`;
        // `staging` is this scratch's, and `&mut self` keeps other reads out.
        Ok(unsafe { driver::read_back::<u32>(word, &self.staging, stream)? } != 0)
    }
}

/// Enqueues the per-segment reduction of `module` (an operator and element type) of `input` into
/// `out[0..count]`.
///
/// # Safety
/// `input`, the offsets of `layout` and `out` (`count` accumulators) must stay valid until `stream` has
/// passed this work; rows must lie inside `input` (the handle checks).
pub(crate) unsafe fn enqueue<T, Acc>(
    gpu: &Gpu,
    scratch: &mut Scratch,
    module: Module,
    input: Span<T>,
    layout: Layout,
    out: *mut Acc,
    stream: StreamRef<'_>,
) -> Result<()> {
    let count = layout.count();
    if count == 0 {
        return Ok(());
    }
    if let Module::ReproSegments(_) = module {
        // SAFETY: forwarded to the caller.
        return unsafe { enqueue_reproducible(gpu, scratch, module, input, layout, out, stream) };
    }
    let size = size_of::<T>();
    let plan = match layout.rows_len() {
        Some(len) => Plan::for_len(len, size)?,
        None => Plan::for_offsets(input.len, count, size),
    };
    if let Plan::Split { pieces } = plan {
        let bytes = (count as u128 * pieces as u128 * size_of::<Acc>() as u128)
            .try_into()
            .map_err(|_| Error::InvalidArgument("too many segments to split".into()))?;
        scratch.reserve(bytes)?;
    }
    let params = layout.params(input, scratch.error_word(), out);
    let params = match plan {
        Plan::Tile { width } => SegmentedParams { width, ..params },
        // One piece per segment: the block kernel writes its results straight to `out`.
        Plan::Block => params,
        Plan::Split { pieces } => SegmentedParams {
            pieces,
            piece: PIECE_CHUNKS,
            partials: scratch.partials.as_device_ptr().as_raw() as *mut Acc,
            ..params
        },
    };
    let offsets = layout.rows_len().is_none();
    // Every kernel runs SEGMENTED_THREADS threads: the block tree must not depend on the device.
    let shape = |k: SegmentedKernel, blocks: u64| -> Result<(Kernel, Launch)> {
        let kernel = Kernel {
            module,
            slot: k as u8,
        };
        function_for(gpu, kernel, SEGMENTED_THREADS)?;
        Ok((
            kernel,
            Launch {
                grid: blocks.clamp(1, MAX_GRID) as u32,
                block: SEGMENTED_THREADS,
                shared_bytes: SMEM_BYTES,
            },
        ))
    };
    let per_block = SEGMENTED_THREADS as u64;

    scratch.last_use.acquire(stream)?;
    // SAFETY (every launch): `input`, the offsets and `out` are valid (the caller); the partials hold
    // `count · pieces` accumulators (reserved above) and the error word is a u32, both serialised across
    // streams by `acquire`; every kernel gets SMEM_BYTES and whole warps.
    let launched = (|| unsafe {
        if offsets {
            scratch.clear_error(stream)?;
        }
        match plan {
            Plan::Tile { width } => {
                // At most TILE_BLOCKS_PER_SM blocks per SM (four resident waves), each thread then striding
                // over segments: measured on the H200 at 2^22 rows of 4 f32, a grid of one block per 256
                // segments (16384) took 27.3 µs a sum, grids of 1056 / 2112 / 4224 blocks 26.8 / 25.4 /
                // 24.6 µs; 2^20 × 8 (4096 blocks) is unchanged (docs/PERFORMANCE.md).
                let blocks = count
                    .div_ceil(per_block / width as u64)
                    .min(gpu.info().sm_count as u64 * TILE_BLOCKS_PER_SM);
                let (k, s) = shape(SegmentedKernel::Tile, blocks)?;
                launch(gpu, k, s, stream, params)
            }
            Plan::Block => {
                let (k, s) = shape(SegmentedKernel::Block, count)?;
                launch(gpu, k, s, stream, params)
            }
            Plan::Split { pieces } => {
                let (k, s) = shape(SegmentedKernel::Block, count * pieces as u64)?;
                launch(gpu, k, s, stream, params)?;
                let (k, s) = shape(SegmentedKernel::Combine, count.div_ceil(per_block / 32))?;
                launch(gpu, k, s, stream, params)
            }
        }
    })();
    // Record the use even after a failed launch, so a later call orders after whatever did run.
    scratch.last_use.release(stream)?;
    launched
}

/// Threads of the reproducible per-segment kernels' blocks: a power of two, so that the block kernel's warp
/// count divides the 1024 combine lanes.
const REPRO_SEGMENT_THREADS: u32 = 256;
const _: () = assert!(
    REPRO_SEGMENT_THREADS.is_power_of_two()
        && REPRO_SEGMENT_THREADS >= 32
        && REPRO_SEGMENT_THREADS <= 1024
);

/// The per-segment reproducible kernel for rows of `rows_len` elements (`None`: offsets, whose lengths only
/// the device reads): the warp kernel sums one chunk at most, so it serves rows that short; everything else
/// takes a block per segment.
fn repro_kernel(rows_len: Option<u64>) -> ReproSegmentsKernel {
    match rows_len {
        Some(len) if len <= CHUNK => ReproSegmentsKernel::Warp,
        _ => ReproSegmentsKernel::Block,
    }
}

/// Enqueues the per-segment reproducible sums of `module` (`ReproSegments`): a warp per segment when every
/// segment is one chunk at most (rows of at most `CHUNK` elements), else a block per segment. Both kernels
/// give a segment the bits of `cpu::sum_reproducible` of its elements, so the choice changes only the speed.
///
/// # Safety
/// As [`enqueue`], with `out` holding `count` results of the module's type (f32, or f64 for f64 elements).
unsafe fn enqueue_reproducible<T, Out>(
    gpu: &Gpu,
    scratch: &mut Scratch,
    module: Module,
    input: Span<T>,
    layout: Layout,
    out: *mut Out,
    stream: StreamRef<'_>,
) -> Result<()> {
    let Module::ReproSegments(elem) = module else {
        unreachable!("called for ReproSegments modules only")
    };
    let count = layout.count();
    let params = layout.params(input, scratch.error_word(), out);
    let kind = repro_kernel(layout.rows_len());
    let shared_bytes = match kind {
        ReproSegmentsKernel::Warp => 0,
        ReproSegmentsKernel::Block => COMBINE_SHARED_BYTES,
    };
    let kernel = Kernel::repro_segments(elem, kind);
    let f = function_for(gpu, kernel, REPRO_SEGMENT_THREADS)?;
    let blocks = match kind {
        ReproSegmentsKernel::Warp => count.div_ceil(REPRO_SEGMENT_THREADS as u64 / 32),
        ReproSegmentsKernel::Block => count,
    };
    // One resident wave at most; the kernels stride over the segments past it.
    let shape = resident(
        gpu,
        f,
        blocks.min(MAX_GRID) as u32,
        REPRO_SEGMENT_THREADS,
        shared_bytes,
    )?;
    scratch.last_use.acquire(stream)?;
    // SAFETY: `input`, the offsets and `out` are valid (the caller); rows lie inside the input, and with
    // the warp kernel are one chunk at most (checked above); the error word is serialised across streams by
    // `acquire`; the block kernel gets its COMBINE_SHARED_BYTES and a power-of-two block.
    let launched = (|| unsafe {
        if layout.rows_len().is_none() {
            scratch.clear_error(stream)?;
        }
        launch(gpu, kernel, shape, stream, params)
    })();
    // Record the use even after a failed launch, so a later call orders after whatever did run.
    scratch.last_use.release(stream)?;
    launched
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn offsets_plan_by_the_mean_length_and_never_split() {
        assert_eq!(Plan::for_offsets(0, 0, 4), Plan::Tile { width: 1 });
        assert_eq!(
            Plan::for_offsets(5000 * 1000, 1000, 4),
            Plan::Tile { width: 32 }
        );
        assert_eq!(Plan::for_offsets(1 << 28, 1, 4), Plan::Block);
        assert_eq!(
            Plan::for_offsets(1 << 20, 1 << 20, 4),
            Plan::Tile { width: 1 }
        );
    }

    #[test]
    fn reproducible_rows_of_one_chunk_take_a_warp_everything_else_a_block() {
        use super::repro_kernel;
        use reduce_contract::kernels::ReproSegmentsKernel::{Block, Warp};
        use reduce_contract::reproducible::CHUNK;
        assert_eq!(repro_kernel(Some(0)), Warp);
        assert_eq!(repro_kernel(Some(CHUNK)), Warp);
        assert_eq!(repro_kernel(Some(CHUNK + 1)), Block);
        assert_eq!(repro_kernel(Some(u64::MAX)), Block);
        assert_eq!(
            repro_kernel(None),
            Block,
            "offsets: lengths unknown on the host"
        );
    }
}
