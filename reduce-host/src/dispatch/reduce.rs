//! Device-wide reductions: sizing the grid, choosing single-block or multi-block launches, and ordering the
//! reuse of the partials and the ticket.
use cust::memory::DeviceBuffer;
use reduce_contract::Op;
use reduce_contract::kernels::{ReducePass, Reduction, SumAtomic};
use reduce_contract::layout::{MAX_ACC_BYTES, MAX_OP_ACC_BYTES};
use reduce_contract::params::ReduceParams;

use super::{Source, Span, launch, resident};
use crate::driver::{self, Launch, Order, Prefer};
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
            result: driver::zeroed(MAX_OP_ACC_BYTES)?,
            last_use: LastUse::new()?,
        })
    }

    /// Waits on the host until the last work that used the scratch is done.
    pub fn wait_idle(&self) -> Result<()> {
        self.last_use.synchronize()
    }

    /// Makes room for `max_grid` partials, after waiting for the work that may still use the old buffer.
    pub fn reserve(&mut self, max_grid: u32) -> Result<()> {
        self.reserve_bytes(max_grid as usize * MAX_ACC_BYTES)
    }

    /// Makes room for `bytes` of partials (a user's accumulator may be larger than the built-ins'), after
    /// waiting for the work that may still use the old buffer.
    fn reserve_bytes(&mut self, bytes: usize) -> Result<()> {
        if self.partials.len() < bytes {
            self.last_use.synchronize()?;
            self.partials = driver::zeroed(bytes)?;
        }
        Ok(())
    }
}

/// Enqueues the reduction of `input` by `source`'s kernels (a built-in [`Reduction`] or a user's
/// operator) into one `Acc` at `out`.
///
/// # Safety
/// `input` must be valid for reads and `out` for one `Acc` until `stream` has passed this work; `T` and
/// `Acc` must be the element and accumulator of `source`'s kernels.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn enqueue<T, Acc>(
    gpu: &Gpu,
    scratch: &mut Scratch,
    policy: &Policy,
    fill: bool,
    strategy: Strategy,
    source: Source<'_, Reduction>,
    input: Span<T>,
    out: *mut Acc,
    stream: StreamRef<'_>,
) -> Result<()> {
    let builtin = match source {
        Source::Builtin(r) => Some(r),
        Source::User(_) => None,
    };
    let op = builtin.map(|r| r.op);
    let atomic = builtin
        .filter(|r| r.op == Op::Sum)
        .map(|r| SumAtomic(r.elem));
    if strategy == Strategy::Atomic && atomic.is_none() {
        return Err(Error::InvalidArgument(
            "Combine::Atomic supports the built-in sums only; use LastBlock or TwoPass".into(),
        ));
    }
    // The last-block flag sits past 32 warp slots of the built-ins' largest accumulator: a larger one (a
    // user's) would overlap it, so it combines in two passes instead (the same bits either way).
    let strategy = if strategy == Strategy::LastBlock && size_of::<Acc>() > MAX_ACC_BYTES {
        Strategy::TwoPass
    } else {
        strategy
    };
    let size = std::mem::size_of::<T>();
    let n = input.len;
    let sm_count = gpu.info().sm_count;
    let smem = source.shared_bytes();
    let single_block = n * size as u64 <= tuning::SINGLE_BLOCK_BYTES;
    // The grid-stride pass's block size: with `fill` (the tuning table's policy, not one the user forced),
    // changed where that holds more threads on an SM (`Function::fill_block`); and the grid, sized for
    // blocks of that many threads. Inputs one block reduces take neither.
    let stride_pass = match strategy {
        Strategy::TwoPass => Some(ReducePass::Partials),
        Strategy::LastBlock => Some(ReducePass::LastBlock),
        Strategy::Atomic => None,
    };
    let threads = match stride_pass.filter(|_| fill && !single_block) {
        Some(pass) => {
            source
                .function(gpu, pass)?
                .fill_block(policy.threads, smem, Prefer::Largest)?
        }
        None => policy.threads,
    };
    let stride_policy = Policy {
        threads,
        blocks_per_sm: (policy.blocks_per_sm * policy.threads).div_ceil(threads),
        ..*policy
    };
    let grid = tuning::grid_for(&stride_policy, sm_count, n, size);
    scratch.reserve_bytes(grid as usize * size_of::<Acc>().max(MAX_ACC_BYTES))?;
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
    let shape = |pass: ReducePass, grid, threads| -> Result<(ReducePass, Launch)> {
        let f = source.function(gpu, pass)?;
        Ok((pass, resident(gpu, f, grid, threads, smem)?))
    };
    // SAFETY (for callers of these two): as `Source::launch`; `params` is the `ReduceParams` of `T` and
    // `Acc`, the types of `source`'s kernels (the caller).
    let launch_pass = |(pass, s): (ReducePass, Launch), params| unsafe {
        source.launch(gpu, pass, s, stream, params, Order::Stream)
    };
    let launch_dependent = |(pass, s): (ReducePass, Launch), params| unsafe {
        source.launch(gpu, pass, s, stream, params, Order::Programmatic)
    };

    // SAFETY (every launch): `input` is valid for `n` reads and `out` for one `Acc` (the caller);
    // `partials` holds `grid` accumulators (reserved above) and the tickets are u32 counters only this
    // handle's kernels use, all serialised across streams by `acquire`, each zero at launch because every
    // completed `last_block` launch leaves it so; every kernel gets the shared memory its source needs.
    scratch.last_use.claim(stream, || unsafe {
        // The partials and finalize kernels wait for the kernel before them on the stream before they touch
        // memory, so they go as programmatic dependents: each one's launch overlaps the previous kernel.
        if n == 0 {
            // The finalize body over zero partials writes the identity.
            return launch_dependent(
                shape(ReducePass::Finalize, 1, policy.finalize_threads)?,
                params,
            );
        }
        if grid == 1 || single_block {
            // One block reduces everything and writes the result: one launch, no partials.
            let threads = if single_block {
                let indexed = matches!(op, Some(Op::ArgMax | Op::ArgMin));
                tuning::single_block_threads(n * size as u64, indexed)
            } else {
                threads
            };
            return launch_dependent(
                shape(ReducePass::Partials, 1, threads)?,
                ReduceParams {
                    partials: out,
                    ..params
                },
            );
        }
        match strategy {
            Strategy::TwoPass => {
                let first = shape(ReducePass::Partials, grid, threads)?;
                launch_dependent(first, params)?;
                let count = first.1.grid as u64;
                let second = shape(ReducePass::Finalize, 1, policy.finalize_threads)?;
                launch_dependent(second, ReduceParams { count, ..params })
            }
            Strategy::LastBlock => {
                let ticket = params.ticket.add(driver::capturing(stream)? as usize);
                launch_pass(
                    shape(ReducePass::LastBlock, grid, threads)?,
                    ReduceParams { ticket, ..params },
                )
            }
            Strategy::Atomic => {
                let kernel = atomic.expect("refused above for all but the built-in sums");
                let f = gpu.function(kernel)?;
                let shape = resident(gpu, f, grid, threads, smem)?;
                driver::memset_zero(out as u64, std::mem::size_of::<Acc>(), stream)?;
                launch(gpu, kernel, shape, stream, params)
            }
        }
    })
}
