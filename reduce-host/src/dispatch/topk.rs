//! Top-k: the scratch (the select's state and the selected pairs), and the passes' launches.
use cust::memory::DeviceBuffer;
use reduce_contract::kernels::{TopKKernel, TopKPass};
use reduce_contract::layout::SMEM_BYTES;
use reduce_contract::params::TopKParams;
use reduce_contract::topk::{self, BUCKETS, MERGE_ITEMS, SORT_TILE, State, THREADS};

use super::{Span, launch, resident};
use crate::driver::{self, Launch};
use crate::error::Result;
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::stream::StreamRef;
use crate::topk::TopKElement;

/// Device temporaries: the state the passes share, and room for the selected pairs (value keys and
/// indices, twice over for the merge passes), grown to the largest k seen.
pub(crate) struct Scratch {
    state: DeviceBuffer<u64>,
    pairs: DeviceBuffer<u64>,
    last_use: LastUse,
}

/// `u64` words of the state.
const STATE_WORDS: usize = size_of::<State>().div_ceil(8);

impl Scratch {
    pub fn new() -> Result<Self> {
        Ok(Scratch {
            state: driver::zeroed(STATE_WORDS)?,
            pairs: driver::zeroed(4 * SORT_TILE as usize)?,
            last_use: LastUse::new()?,
        })
    }

    /// Waits on the host until the last work that used the scratch is done.
    pub fn wait_idle(&self) -> Result<()> {
        self.last_use.synchronize()
    }

    /// Room for four arrays of `k` words (keys, indices, and the merge passes' second pair), grown first if
    /// needed. Returns the first word of each.
    fn prepare(&mut self, k: u64) -> Result<[*mut u64; 4]> {
        let k = k.max(SORT_TILE) as usize;
        if self.pairs.len() < 4 * k {
            // The old buffer may still be in use by earlier work on any stream.
            self.last_use.synchronize()?;
            self.pairs = driver::zeroed(4 * k.next_power_of_two())?;
        }
        let base = self.pairs.as_device_ptr().as_raw() as *mut u64;
        // Four slices of `k` words each inside the buffer.
        Ok([0, 1, 2, 3].map(|i| base.wrapping_add(i * k)))
    }
}

/// Writes the `k` greatest elements of `input` (`largest`) or the `k` least, best first, with their
/// indices; values only where `values` is given.
///
/// # Safety
/// `input` valid for reads, `values` (if any) and `indices` for `k` writes, until `stream` has passed this
/// work; `1 ≤ k ≤ input.len`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn enqueue<T: TopKElement>(
    gpu: &Gpu,
    scratch: &mut Scratch,
    input: Span<T>,
    k: u64,
    largest: bool,
    values: Option<Span<T>>,
    indices: Span<u64>,
    stream: StreamRef<'_>,
) -> Result<()> {
    let [keys, idx, keys_alt, idx_alt] = scratch.prepare(k)?;
    let state = scratch.state.as_device_ptr().as_raw();
    let kernel = |pass| TopKKernel(T::ELEM, pass);
    let index_bytes = topk::index_bytes(input.len);
    let params = TopKParams {
        input: input.as_ptr(),
        n: input.len,
        k,
        state: state as *mut State,
        keys,
        indices: idx,
        keys_alt,
        indices_alt: idx_alt,
        values_out: values.map_or(std::ptr::null_mut(), |v| v.as_mut_ptr()),
        indices_out: indices.as_mut_ptr(),
        run: SORT_TILE,
        pass: 0,
        largest: largest as u32,
        index_bytes,
        from_alt: 0,
    };
    let count_shared = SMEM_BYTES.max((BUCKETS * size_of::<u32>()) as u32);
    let wave = |pass| -> Result<Launch> {
        let f = gpu.function(kernel(pass))?;
        let grid = input.len.div_ceil(THREADS as u64 * 4).min(u32::MAX as u64) as u32;
        resident(gpu, f, grid, THREADS, count_shared)
    };
    let (counting, filtering) = (wave(TopKPass::Histogram)?, wave(TopKPass::Filter)?);
    let one_block = |shared_bytes: u32| Launch {
        grid: 1,
        block: THREADS,
        shared_bytes,
    };
    let sort_shared = (2 * SORT_TILE as usize * size_of::<u64>()) as u32;
    scratch.last_use.claim(stream, || {
        // SAFETY (every launch below): the kernels read `input` (n elements) and write the state, the pairs
        // (k of each, inside the scratch claimed here) and the k outputs, all valid (the caller, `prepare`);
        // each launch gets the shared memory its body documents.
        unsafe {
            driver::memset_zero(state, STATE_WORDS * 8, stream)?;
            for pass in 0..T::KEY_BYTES + index_bytes {
                let p = TopKParams { pass, ..params };
                launch(gpu, kernel(TopKPass::Histogram), counting, stream, p)?;
                launch(
                    gpu,
                    kernel(TopKPass::Pick),
                    one_block(SMEM_BYTES),
                    stream,
                    p,
                )?;
            }
            launch(gpu, kernel(TopKPass::Filter), filtering, stream, params)?;
            if k <= SORT_TILE {
                return launch(
                    gpu,
                    kernel(TopKPass::Sort),
                    one_block(sort_shared),
                    stream,
                    params,
                );
            }
            let tiles = k.div_ceil(SORT_TILE) as u32;
            let sort = Launch {
                grid: tiles,
                ..one_block(sort_shared)
            };
            launch(gpu, kernel(TopKPass::SortBlock), sort, stream, params)?;
            let (mut run, mut from_alt) = (SORT_TILE, 0);
            let merge = Launch {
                grid: k.div_ceil(MERGE_ITEMS * THREADS as u64) as u32,
                ..one_block(SMEM_BYTES)
            };
            while run < k {
                let p = TopKParams {
                    run,
                    from_alt,
                    ..params
                };
                launch(gpu, kernel(TopKPass::Merge), merge, stream, p)?;
                run *= 2;
                from_alt ^= 1;
            }
            let gather = resident(
                gpu,
                gpu.function(kernel(TopKPass::Gather))?,
                k.div_ceil(THREADS as u64) as u32,
                THREADS,
                SMEM_BYTES,
            )?;
            launch(
                gpu,
                kernel(TopKPass::Gather),
                gather,
                stream,
                TopKParams { from_alt, ..params },
            )
        }
    })
}
