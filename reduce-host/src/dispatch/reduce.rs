//! Device-wide reductions: sizing the grid, choosing single-block or multi-block launches, and ordering the
//! reuse of the partials and the ticket.
use cust::memory::DeviceBuffer;
use reduce_contract::kernels::ReduceKernel;
use reduce_contract::layout::{MAX_ACC_BYTES, SMEM_BYTES};
use reduce_contract::params::ReduceParams;
use reduce_contract::{Elem, Kernel, Op};

use super::{Span, launch, launch_dependent, resident};
use crate::driver::{self, Launch};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::stream::StreamRef;
use crate::tuning::{self, Policy};

/// How the per-block partials are combined (the handle's `Combine`, resolved for one input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strategy {
    TwoPass,
    LastBlock,
    Atomic,
}

/// Device temporaries: per-block partials, the last-block tickets and the device result slot of blocking
/// calls that cannot write the mapped staging (`Combine::Atomic`, or a device that maps no host memory).
/// Async calls may run on any stream; [`LastUse`] keeps two streams from sharing them at the same time.
pub(crate) struct Scratch {
    partials: DeviceBuffer<u8>,
    /// Two last-block ticket counters, zero, and left zero by every `last_block` launch (its increments
    /// wrap at the grid size), so no launch needs anything ahead of it. Word 0 serves launches the host
    /// enqueues directly, word 1 launches captured into CUDA graphs: a graph replayed beside other calls
    /// (which the handle's docs rule out) can leave its word wrong for later replays, but never the direct
    /// calls' word.
    ticket: DeviceBuffer<u32>,
    /// Where blocking calls that do not write the mapped staging have their result written.
    pub result: DeviceBuffer<u8>,
    last_use: LastUse,
}

impl Scratch {
    pub fn new(max_grid: u32) -> Result<Self> {
        Ok(Scratch {
            partials: driver::zeroed(max_grid as usize * MAX_ACC_BYTES)?,
            ticket: driver::zeroed(2)?,
            result: driver::zeroed(MAX_ACC_BYTES)?,
            last_use: LastUse::new()?,
        })
    }

    /// Waits on the host until the last work that used the scratch is done.
    pub fn wait_idle(&self) -> Result<()> {
        self.last_use.synchronize()
    }

    /// Makes room for `max_grid` partials, after waiting for the work that may still use the old buffer.
    pub fn reserve(&mut self, max_grid: u32) -> Result<()> {
        if self.partials.len() < max_grid as usize * MAX_ACC_BYTES {
            self.last_use.synchronize()?;
            self.partials = driver::zeroed(max_grid as usize * MAX_ACC_BYTES)?;
        }
        Ok(())
    }
}

/// Enqueues the reduction `op` of `input` (elements `elem`) into one `Acc` at `out`.
///
/// # Safety
/// `input` must be valid for reads and `out` for one `Acc` until `stream` has passed this work.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn enqueue<T, Acc>(
    gpu: &Gpu,
    scratch: &mut Scratch,
    policy: &Policy,
    strategy: Strategy,
    (op, elem): (Op, Elem),
    input: Span<T>,
    out: *mut Acc,
    stream: StreamRef<'_>,
) -> Result<()> {
    if strategy == Strategy::Atomic && op != Op::Sum {
        return Err(Error::InvalidArgument(
            "Combine::Atomic supports sums only; use LastBlock or TwoPass".into(),
        ));
    }
    let kernel = |k| Kernel::reduce(op, elem, k);
    let size = std::mem::size_of::<T>();
    let n = input.len;
    let sm_count = gpu.info().sm_count;
    let grid = tuning::grid_for(policy, sm_count, n, size);
    let single_block = n * size as u64 <= tuning::SINGLE_BLOCK_BYTES;
    let partials = scratch.partials.as_device_ptr().as_raw() as *mut Acc;
    let params = ReduceParams {
        input: input.as_ptr(),
        n,
        partials,
        count: 0,
        ticket: scratch.ticket.as_device_ptr().as_raw() as *mut u32,
        out,
    };
    // A kernel's launch: `threads` fitted to its registers, at most one resident wave.
    let shape = |k, grid, threads| -> Result<(Kernel, Launch)> {
        let kernel = kernel(k);
        Ok((
            kernel,
            resident(gpu, gpu.function(kernel)?, grid, threads, SMEM_BYTES)?,
        ))
    };

    scratch.last_use.acquire(stream)?;
    // SAFETY (every launch): `input` is valid for `n` reads and `out` for one `Acc` (the caller);
    // `partials` holds `max grid · MAX_ACC_BYTES` bytes (the handle reserves it for its policy) and the
    // tickets are u32 counters only this handle's kernels use, all serialised across streams by `acquire`,
    // each zero at launch because every completed `last_block` launch leaves it so; every kernel gets
    // SMEM_BYTES.
    let launched = (|| unsafe {
        // The partials and finalize kernels wait for the kernel before them on the stream before they touch
        // memory, so they go as programmatic dependents: each one's launch overlaps the previous kernel.
        if n == 0 {
            // The finalize body over zero partials writes the identity.
            let (k, s) = shape(ReduceKernel::Finalize, 1, policy.finalize_threads)?;
            return launch_dependent(gpu, k, s, stream, params);
        }
        if grid == 1 || single_block {
            // One block reduces everything and writes the result: one launch, no partials.
            let threads = if single_block {
                let indexed = matches!(op, Op::ArgMax | Op::ArgMin);
                tuning::single_block_threads(n * size as u64, indexed)
            } else {
                policy.threads
            };
            let (k, s) = shape(ReduceKernel::Partials, 1, threads)?;
            return launch_dependent(
                gpu,
                k,
                s,
                stream,
                ReduceParams {
                    partials: out,
                    ..params
                },
            );
        }
        match strategy {
            Strategy::TwoPass => {
                let (k, s) = shape(ReduceKernel::Partials, grid, policy.threads)?;
                launch_dependent(gpu, k, s, stream, params)?;
                let count = s.grid as u64;
                let (k, s) = shape(ReduceKernel::Finalize, 1, policy.finalize_threads)?;
                launch_dependent(gpu, k, s, stream, ReduceParams { count, ..params })
            }
            Strategy::LastBlock => {
                let (k, s) = shape(ReduceKernel::LastBlock, grid, policy.threads)?;
                let ticket = params.ticket.add(driver::capturing(stream)? as usize);
                launch(gpu, k, s, stream, ReduceParams { ticket, ..params })
            }
            Strategy::Atomic => {
                driver::memset_zero(out as u64, std::mem::size_of::<Acc>(), stream)?;
                let (k, s) = shape(ReduceKernel::Atomic, grid, policy.threads)?;
                launch(gpu, k, s, stream, params)
            }
        }
    })();
    // Record the use even after a failed launch, so a later call orders after whatever did run.
    scratch.last_use.release(stream)?;
    launched
}
