//! Histograms: which kernel counts where (private copies in shared memory, or global atomics), the shared
//! memory and grid that takes, and the launch.
use reduce_contract::Sample;
use reduce_contract::kernels::{Counter, HistogramBytes, HistogramKernel, Place};
use reduce_contract::layout::{MAX_COPIES_LOG2, MAX_SHARED_BINS, SHARED_LIMIT, SMEM_BYTES};
use reduce_contract::params::HistogramParams;

use super::{Span, launch};
use crate::driver::{self, Launch};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::stream::StreamRef;
use crate::tuning;

/// The histogram kernels: even bins of a float sample, or the bytes'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counting {
    Even(HistogramKernel),
    Bytes(HistogramBytes),
}

/// Which kernel, and what it is told.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    kernel: Counting,
    pub bins: u32,
    shared_bytes: u32,
    /// `log2` of the private copies per block (the shared kernels' `copies_log2`).
    copies_log2: u32,
    /// `[lower, upper, scale]` of even bins; unused by the byte histogram.
    range: [f32; 3],
}

impl Plan {
    /// Even bins over `[lower, upper)` with `scale = bins / (upper - lower)`, all checked by the caller.
    pub fn even(sample: Sample, wide: bool, bins: u32, range: [f32; 3]) -> Plan {
        let shared = bins <= MAX_SHARED_BINS;
        let copies_log2 = copies_log2(bins);
        let kernel = HistogramKernel {
            sample,
            place: if shared { Place::Shared } else { Place::Global },
            counter: counter(wide),
        };
        Plan {
            kernel: Counting::Even(kernel),
            bins,
            shared_bytes: if shared { (bins << copies_log2) * 4 } else { 0 }.max(SMEM_BYTES),
            copies_log2,
            range,
        }
    }

    /// The 256-bin byte histogram.
    pub fn bytes(wide: bool) -> Plan {
        let copies_log2 = copies_log2(256);
        Plan {
            kernel: Counting::Bytes(HistogramBytes(counter(wide))),
            bins: 256,
            shared_bytes: (256 << copies_log2) * 4,
            copies_log2,
            range: [0.0; 3],
        }
    }
}

/// The counter type: `u64` when `wide`.
fn counter(wide: bool) -> Counter {
    if wide { Counter::U64 } else { Counter::U32 }
}

/// Private copies per block, as a power of two: one per lane (32) when they fit in shared memory, which makes
/// every warp's shared atomics conflict-free, else as many as fit.
fn copies_log2(bins: u32) -> u32 {
    (0..=MAX_COPIES_LOG2)
        .rev()
        .find(|&k| (bins as u64) << k <= MAX_SHARED_BINS as u64)
        .unwrap_or(0)
}

/// Zeroes `plan.bins` counters at `out` and counts `input` into them.
///
/// # Safety
/// `input` must be valid for reads and `out` for `plan.bins` counters of `C` until `stream` has passed this
/// work.
pub(crate) unsafe fn enqueue<T, C>(
    gpu: &Gpu,
    input: Span<T>,
    plan: &Plan,
    out: *mut C,
    stream: StreamRef<'_>,
) -> Result<()> {
    // SAFETY: the caller guarantees `out` holds `bins` counters.
    unsafe { driver::memset_zero(out as u64, plan.bins as usize * size_of::<C>(), stream)? };
    if input.is_empty() {
        return Ok(());
    }
    let f = match plan.kernel {
        Counting::Even(k) => gpu.function(k)?,
        Counting::Bytes(k) => gpu.function(k)?,
    };
    let threads = tuning::HISTOGRAM_THREADS;
    let block = f.fit_block(threads);
    let shape = Launch {
        grid: grid(
            gpu,
            f.blocks_per_sm(block, plan.shared_bytes)?,
            input.len,
            size_of::<T>(),
            block,
        )?,
        block,
        shared_bytes: plan.shared_bytes,
    };
    let [lower, upper, scale] = plan.range;
    let params = HistogramParams {
        input: input.as_ptr(),
        n: input.len,
        out,
        bins: plan.bins,
        lower,
        upper,
        scale,
        copies_log2: plan.copies_log2,
    };
    // SAFETY: `input` is valid for `n` reads and `out` for `bins` counters (the caller); the range was
    // checked by `EvenBins::new`; the shared kernels get `4 · bins · 2^copies_log2` bytes of shared memory.
    unsafe {
        match plan.kernel {
            Counting::Even(k) => launch(gpu, k, shape, stream, params),
            Counting::Bytes(k) => launch(gpu, k, shape, stream, params),
        }
    }
}

/// Grid for `n` samples: the reduction's sizing, capped at one resident wave, and with enough blocks that
/// none counts `u32::MAX` samples into its private `u32` counters (a block sees at most `n / grid` plus one
/// trip's worth, well below 2^32 when `n / grid <= 2^31`).
fn grid(gpu: &Gpu, blocks_per_sm: u32, n: u64, elem_size: usize, threads: u32) -> Result<u32> {
    let max = (gpu.info().sm_count * blocks_per_sm).max(1) as u64;
    let want = n.div_ceil(tuning::elements_per_block_trip(threads, elem_size));
    let grid = want.clamp(1, max).max(n.div_ceil(1 << 31));
    u32::try_from(grid)
        .map_err(|_| Error::InvalidArgument(format!("{n} samples need too many blocks")))
}

const _: () = assert!(MAX_SHARED_BINS * 4 <= SHARED_LIMIT);

#[cfg(test)]
mod tests {
    use super::*;
    use reduce_contract::Kernel;

    fn plan(bins: u32) -> Plan {
        Plan::even(Sample::F32, false, bins, [0.0, 1.0, bins as f32])
    }

    #[test]
    fn large_histograms_leave_shared_memory() {
        // One copy per lane while 32 fit in 48 KiB, then fewer.
        assert_eq!((plan(7).copies_log2, plan(7).shared_bytes), (5, SMEM_BYTES));
        assert_eq!(
            (plan(256).copies_log2, plan(256).shared_bytes),
            (5, 32 * 1024)
        );
        assert_eq!(
            (plan(1000).copies_log2, plan(1000).shared_bytes),
            (3, 32000)
        );
        let most = plan(MAX_SHARED_BINS);
        assert_eq!((most.copies_log2, most.shared_bytes), (0, 48 * 1024));
        let name = |p: Plan| match p.kernel {
            Counting::Even(k) => k.name().to_string(),
            Counting::Bytes(k) => k.name().to_string(),
        };
        assert_eq!(name(most), "histogram_shared_f32_u32");
        let global = plan(MAX_SHARED_BINS + 1);
        assert_eq!(name(global), "histogram_global_f32_u32");
        assert_eq!(global.shared_bytes, SMEM_BYTES);
        assert_eq!(
            name(Plan::even(Sample::BF16, true, 10, [0.0; 3])),
            "histogram_shared_bf16_u64"
        );
        assert_eq!(name(Plan::bytes(false)), "histogram_bytes_u32");
        assert_eq!(Plan::bytes(true).shared_bytes, 32 * 1024);
    }
}
