//! The reproducible sum's launches: one warp per chunk, then a one-block combine. The grid and both block
//! sizes are free (the chunk kernel's come from the policy, the combine's from
//! [`REPRO_COMBINE_THREADS`], both fitted to the kernel's registers): the kernels' arithmetic does not
//! depend on them (see `reduce_contract::reproducible`).
use cust::memory::DeviceBuffer;
use reduce_contract::FloatElem;
use reduce_contract::kernels::{ReproKernel, ReproPass};
use reduce_contract::params::ReproParams;
use reduce_contract::reproducible::{CHUNK, COMBINE_SHARED_BYTES};

use super::{Span, launch, resident};
use crate::driver::Launch;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::stream::StreamRef;
use crate::tuning::{Policy, REPRO_COMBINE_THREADS, REPRO_PREFETCH_L2_MAX_BYTES};

/// A test's override of the launch shape; `None` fields keep the default. No field changes the bits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReproShape {
    /// Most blocks of the chunk kernel (default: one resident wave).
    pub max_grid: Option<u32>,
    /// Threads of the combine block (default [`REPRO_COMBINE_THREADS`]).
    pub combine_threads: Option<u32>,
    /// Whether the chunk kernel prefetches into L2 (default: for inputs of at most
    /// [`REPRO_PREFETCH_L2_MAX_BYTES`]).
    pub prefetch: Option<bool>,
}

impl ReproShape {
    /// Whether the chunk kernel prefetches into L2 over an input of `bytes`.
    fn prefetch(&self, bytes: u64) -> bool {
        self.prefetch
            .unwrap_or(bytes <= REPRO_PREFETCH_L2_MAX_BYTES)
    }
}

/// Bytes of one chunk partial, whatever the element type (an f64, or a compensated pair of them).
pub(crate) const PARTIAL_BYTES: u64 = 16;

/// The chunk partials, grown to the largest input seen, and the event that orders their reuse across
/// streams.
pub(crate) struct ReproScratch {
    partials: Option<DeviceBuffer<u8>>,
    last_use: LastUse,
}

impl ReproScratch {
    pub fn new() -> Result<Self> {
        Ok(ReproScratch {
            partials: None,
            last_use: LastUse::new()?,
        })
    }

    /// Waits on the host until the last work that used the partials is done.
    pub fn wait_idle(&self) -> Result<()> {
        self.last_use.synchronize()
    }

    /// Room for `chunks` partials, after waiting for the work that may still use the old buffer.
    fn reserve(&mut self, chunks: u64) -> Result<u64> {
        let bytes = chunks
            .checked_mul(PARTIAL_BYTES)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or_else(|| Error::InvalidArgument("input too long for its partials".into()))?
            .max(PARTIAL_BYTES as usize);
        if self.partials.as_ref().is_none_or(|p| p.len() < bytes) {
            self.last_use.synchronize()?;
            self.partials = None;
            self.partials = Some(crate::driver::zeroed(bytes)?);
        }
        Ok(self
            .partials
            .as_ref()
            .expect("allocated")
            .as_device_ptr()
            .as_raw())
    }
}

/// The chunk kernel's grid: at most one resident wave (and at most `max_grid` blocks when a test forces
/// it), balanced so that every warp sums the same number of chunks (the last ones may sum one fewer).
pub(crate) fn chunk_grid(chunks: u64, block: u32, wave: u32, max_grid: Option<u32>) -> u32 {
    let warps_per_block = (block / 32).max(1) as u64;
    let blocks = max_grid.map_or(wave, |g| g.min(wave)).max(1) as u64;
    let per_warp = chunks.div_ceil(blocks * warps_per_block).max(1);
    chunks
        .div_ceil(per_warp)
        .div_ceil(warps_per_block)
        .clamp(1, blocks) as u32
}

/// Enqueues the reproducible sum of `input` (float elements `elem`) into one `Out` at `out`.
///
/// # Safety
/// `input` must be valid for reads and `out` for one `Out` (f32, or f64 for f64 elements) until `stream`
/// has passed this work.
pub(crate) unsafe fn enqueue<T, Out>(
    gpu: &Gpu,
    scratch: &mut ReproScratch,
    (policy, shape): (&Policy, ReproShape),
    elem: FloatElem,
    input: Span<T>,
    out: *mut Out,
    stream: StreamRef<'_>,
) -> Result<()> {
    let chunks = input.len.div_ceil(CHUNK);
    let partials = scratch.reserve(chunks)?;
    let params = ReproParams {
        input: input.as_ptr(),
        n: input.len,
        partials: partials as *mut u8,
        count: chunks,
        out,
        prefetch: shape.prefetch(input.len * size_of::<T>() as u64) as u32,
    };

    // SAFETY (both launches): `input` is valid for `n` reads and `out` for one `Out` (the caller);
    // `partials` holds `chunks` partials of 16 bytes (reserved above), serialised across streams by
    // `acquire`; the combine gets its COMBINE_SHARED_BYTES.
    scratch.last_use.claim(stream, || unsafe {
        launch_chunks(gpu, (policy, shape), elem, params, stream)?;
        let kernel = ReproKernel(elem, ReproPass::Combine);
        let threads = shape.combine_threads.unwrap_or(REPRO_COMBINE_THREADS);
        let block = gpu.function(kernel)?.fit_block(threads);
        let shape = Launch {
            grid: 1,
            block,
            shared_bytes: COMBINE_SHARED_BYTES,
        };
        launch(gpu, kernel, shape, stream, params)
    })
}

/// Launches the chunk pass of `params` (nothing for an empty input).
///
/// # Safety
/// As [`enqueue`]'s launches: `params.input` valid for `n` reads, `params.partials` for `count` partials.
unsafe fn launch_chunks<T, Acc, Out>(
    gpu: &Gpu,
    (policy, shape): (&Policy, ReproShape),
    elem: FloatElem,
    params: ReproParams<T, Acc, Out>,
    stream: StreamRef<'_>,
) -> Result<()> {
    if params.count == 0 {
        return Ok(());
    }
    let kernel = ReproKernel(elem, ReproPass::Chunks);
    let f = gpu.function(kernel)?;
    let sm_count = gpu.info().sm_count;
    let wave = resident(gpu, f, sm_count * policy.blocks_per_sm, policy.threads, 0)?;
    let grid = chunk_grid(params.count, wave.block, wave.grid, shape.max_grid);
    // SAFETY: forwarded to the caller.
    unsafe { launch(gpu, kernel, Launch { grid, ..wave }, stream, params) }
}

/// The partials of `input`'s whole chunks (`input.len` a multiple of `CHUNK`), as the first kernel of
/// [`enqueue`] writes them: `Acc`s read back to the host. A sharded reproducible sum combines them with
/// other GPUs' partials.
///
/// # Safety
/// `input` must be valid for reads until `stream` has passed this work (this waits for it). `Acc` must be
/// the accumulator of `elem` (f64, or `Compensated` for f64).
pub(crate) unsafe fn chunk_partials<T, Acc: Copy + Default>(
    gpu: &Gpu,
    scratch: &mut ReproScratch,
    (policy, shape): (&Policy, ReproShape),
    elem: FloatElem,
    input: Span<T>,
    stream: StreamRef<'_>,
) -> Result<Vec<Acc>> {
    debug_assert!(input.len.is_multiple_of(CHUNK));
    let chunks = input.len / CHUNK;
    let partials = scratch.reserve(chunks)?;
    let params = ReproParams::<T, Acc, Acc> {
        input: input.as_ptr(),
        n: input.len,
        partials: partials as *mut Acc,
        count: chunks,
        out: std::ptr::null_mut(),
        prefetch: shape.prefetch(input.len * size_of::<T>() as u64) as u32,
    };
    let mut host = vec![Acc::default(); chunks as usize];
    // SAFETY: as `enqueue`; the copy reads the `chunks` partials the launch wrote, on the same stream, into
    // `host`, which holds as many, and the host waits for it before `host` is read.
    scratch.last_use.claim(stream, || unsafe {
        launch_chunks(gpu, (policy, shape), elem, params, stream)?;
        crate::driver::copy_to_host(partials, &mut host, stream)
    })?;
    Ok(host)
}

#[cfg(test)]
mod tests {
    use super::chunk_grid;

    #[test]
    fn the_chunk_grid_balances_warps_within_one_wave() {
        // 2^28 f32 on an H200 with 256-thread blocks, 6 resident per SM: 32768 chunks over 6336 warps is
        // 5.2 each; 6 each needs 5462 warps, 683 blocks.
        assert_eq!(chunk_grid(32768, 256, 132 * 6, None), 683);
        assert_eq!(chunk_grid(32768, 256, 2000, None), 1366);
        assert_eq!(chunk_grid(1, 1024, 1000, None), 1);
        assert_eq!(chunk_grid(123, 32, 1000, Some(7)), 7);
        assert_eq!(chunk_grid(123, 32, 1000, Some(0)), 1);
        assert_eq!(chunk_grid(1 << 40, 256, 1056, None), 1056);
    }
}
