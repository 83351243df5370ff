//! The seed chapter's kernels: one of v0–v5 writes a partial per block, the production f32 finalize
//! combines them.
use reduce_contract::kernels::{ReduceKernel, ReducePass, Reduction, SeedKernel, SeedVersion};
use reduce_contract::layout::{SEED_THREADS, SMEM_BYTES};
use reduce_contract::params::ReduceParams;
use reduce_contract::{Elem, Op};

use super::{Span, launch};
use crate::driver::Launch;
use crate::error::Result;
use crate::gpu::Gpu;
use crate::stream::StreamRef;

/// Runs seed kernel `version` over `input` with `grid` blocks into `partials`, then the finalize into `out`.
///
/// # Safety
/// `input` must be valid for reads (16-byte aligned for v5), `partials` for `grid` f32 and `out` for one,
/// until `stream` has passed this work; `grid` must be what `version` needs for `input.len` elements.
pub(crate) unsafe fn enqueue(
    gpu: &Gpu,
    version: SeedVersion,
    grid: u32,
    input: Span<f32>,
    partials: *mut f32,
    out: *mut f32,
    stream: StreamRef<'_>,
) -> Result<()> {
    let shared_bytes = SMEM_BYTES.max(4 * SEED_THREADS);
    let params = ReduceParams {
        input: input.as_ptr(),
        n: input.len,
        partials,
        count: grid as u64,
        ticket: std::ptr::null_mut(),
        out,
    };
    let shape = |grid| Launch {
        grid,
        block: SEED_THREADS,
        shared_bytes,
    };
    // SAFETY: the seed kernels read `input[..n]` and write `grid` partials with `SEED_THREADS` threads and
    // 4 bytes of shared memory per thread; finalize reads `count` partials and writes `out` (the caller).
    unsafe {
        launch(gpu, SeedKernel(version), shape(grid), stream, params)?;
        let sum = Reduction {
            op: Op::Sum,
            elem: Elem::F32,
        };
        let finalize = ReduceKernel(sum, ReducePass::Finalize);
        launch(gpu, finalize, shape(1), stream, params)
    }
}
