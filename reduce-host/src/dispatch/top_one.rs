//! Top-k with k = 1, device-wide and per segment: the best element is argmax's (argmin's) answer, whose
//! rules are top-k's (a NaN first, ties to the smaller index, −0.0 equal to +0.0, the input's own bits),
//! found in one read instead of the select's sample, histogram and passes. The argmax kernels write
//! [`Indexed`] pairs to the scratch; the unpair kernel then splits them into the value and index outputs.
use cust::memory::DeviceBuffer;
use reduce_contract::Op;
use reduce_contract::kernels::{PerSegment, Reduction, Unpair};
use reduce_contract::layout::Indexed;
use reduce_contract::params::UnpairParams;

use super::segmented::{self, Kernels, Layout};
use super::{Source, Span, reduce};
use crate::driver::{self, Launch};
use crate::error::Result;
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::reduce::Combine;
use crate::stream::StreamRef;
use crate::topk::TopKElement;
use crate::tuning;

/// The k = 1 temporaries of a top-k handle: the device-wide and per-segment reductions' own scratch, and
/// the pairs before they are split (grown to the most segments seen).
pub(crate) struct TopOne {
    reduce: reduce::Scratch,
    segmented: segmented::Scratch,
    pairs: DeviceBuffer<u8>,
}

impl TopOne {
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let policy = tuning::policy(gpu.info().cc());
        Ok(TopOne {
            reduce: reduce::Scratch::new(gpu.info().sm_count * policy.blocks_per_sm)?,
            segmented: segmented::Scratch::new()?,
            pairs: driver::zeroed(size_of::<Indexed<u64>>())?,
        })
    }

    /// Reads the per-segment call's bad-offsets word after the work on `stream` (waits for it).
    pub fn read_error(&mut self, stream: StreamRef<'_>) -> Result<bool> {
        self.segmented.read_error(stream)
    }

    /// Room for `count` pairs of `T`, grown (after the last use of the old room: `last_use`, the handle's
    /// claim, which covers every k = 1 call) to the next power of two.
    fn pairs<T>(&mut self, count: u64, last_use: &LastUse) -> Result<*mut Indexed<T>> {
        let bytes = count as usize * size_of::<Indexed<T>>();
        if self.pairs.len() < bytes {
            last_use.synchronize()?;
            self.pairs = driver::zeroed(bytes.next_power_of_two())?;
        }
        Ok(self.pairs.as_device_ptr().as_raw() as *mut Indexed<T>)
    }
}

/// Whether k = 1 per segment runs here for `layout`: rows (the per-segment plans cut long rows into
/// pieces), and offsets when there are at least [`OFFSET_SEGMENTS_PER_SM`] segments an SM. The offsets'
/// argmax gives each segment a block, a warp or fewer lanes (by the mean length) and never cuts it, so
/// a few long segments would run on a few SMs where the select's per-segment kernel cuts them into up to
/// 64 pieces.
pub(crate) fn serves(gpu: &Gpu, layout: &Layout) -> bool {
    match layout {
        Layout::Rows { .. } => true,
        Layout::Offsets { count, .. } => {
            *count >= OFFSET_SEGMENTS_PER_SM * gpu.info().sm_count as u64
        }
    }
}

/// Offset segments per SM from which k = 1 runs as argmax (see [`serves`]): a few blocks an SM, so that
/// the GPU fills whatever their lengths.
pub(crate) const OFFSET_SEGMENTS_PER_SM: u64 = 4;

/// The operator whose answer is the best element: argmax for `max_k`, argmin for `min_k`.
fn op(largest: bool) -> Op {
    if largest { Op::ArgMax } else { Op::ArgMin }
}

/// Threads a block of the unpair kernel.
const UNPAIR_THREADS: u32 = 256;

/// Splits `count` pairs at `pairs` into `values` (if given) and `indices`, on `stream`: one thread a pair.
///
/// # Safety
/// `pairs` holds `count` pairs once the work before on `stream` is done; the outputs are valid for `count`
/// writes until `stream` has passed this work.
unsafe fn split<T: TopKElement>(
    gpu: &Gpu,
    pairs: *mut Indexed<T>,
    count: u64,
    values: Option<Span<T>>,
    indices: Span<u64>,
    stream: StreamRef<'_>,
) -> Result<()> {
    let params = UnpairParams {
        pairs,
        count,
        values_out: values.map_or(std::ptr::null_mut(), |v| v.as_mut_ptr()),
        indices_out: indices.as_mut_ptr(),
    };
    let blocks = count
        .div_ceil(UNPAIR_THREADS as u64)
        .clamp(1, i32::MAX as u64) as u32;
    let shape = Launch {
        grid: blocks,
        block: UNPAIR_THREADS,
        shared_bytes: 0,
    };
    // SAFETY: the kernel reads `count` pairs and writes `count` elements of each output (the caller); it
    // loops past its grid, needs no shared memory and takes `UnpairParams<T>` (the bound).
    unsafe { super::launch(gpu, Unpair(T::ELEM), shape, stream, params) }
}

/// Writes the greatest (`largest`) or least element of `input` and its index to `values[0]` (if given)
/// and `indices[0]`.
///
/// # Safety
/// `input` valid for reads, the outputs for one write, until `stream` has passed this work; `input` not
/// empty; `last_use` is the handle's, claimed around nothing else meanwhile.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn enqueue<T: TopKElement>(
    gpu: &Gpu,
    top: &mut TopOne,
    last_use: &mut LastUse,
    input: Span<T>,
    largest: bool,
    values: Option<Span<T>>,
    indices: Span<u64>,
    stream: StreamRef<'_>,
) -> Result<()> {
    let pair = top.pairs::<T>(1, last_use)?;
    let source = Source::Builtin(Reduction {
        op: op(largest),
        elem: T::ELEM,
    });
    let policy = tuning::policy(gpu.info().cc());
    // The combine `DeviceReduce` runs by default.
    let bytes = input.len * size_of::<T>() as u64;
    let strategy = Combine::Auto.resolve(bytes, gpu.dependent_launch());
    last_use.claim(stream, || {
        // SAFETY: `input` is valid (the caller), `pair` one `Indexed<T>` of the scratch claimed here, the
        // accumulator of the argmax and argmin kernels of `T`; then the split (the caller's outputs).
        unsafe {
            reduce::enqueue(
                gpu,
                &mut top.reduce,
                &policy,
                true,
                strategy,
                source,
                input,
                pair,
                stream,
            )?;
            split(gpu, pair, 1, values, indices, stream)
        }
    })
}

/// Writes each segment's greatest (`largest`) or least element and its index in the segment to
/// `values[s]` (if given) and `indices[s]`; an empty segment, or one whose offsets are out of range (the
/// bad-offsets word is set, see [`TopOne::read_error`]), gives index `u64::MAX` and the worst value,
/// top-k's padding.
///
/// # Safety
/// `input` and the offsets of `layout` valid for reads, the outputs for `count` writes, until `stream` has
/// passed this work; rows inside `input`; `last_use` as [`enqueue`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn enqueue_segments<T: TopKElement>(
    gpu: &Gpu,
    top: &mut TopOne,
    last_use: &mut LastUse,
    input: Span<T>,
    layout: Layout,
    largest: bool,
    values: Option<Span<T>>,
    indices: Span<u64>,
    stream: StreamRef<'_>,
) -> Result<()> {
    let count = layout.count();
    let pairs = top.pairs::<T>(count, last_use)?;
    let kernels = Kernels::Reduce(Source::Builtin(PerSegment::Op(op(largest), T::ELEM)));
    last_use.claim(stream, || {
        // SAFETY: as `enqueue`: `pairs` holds `count` accumulators of the per-segment argmax (argmin) of
        // `T`, in the scratch claimed here; the rest is the caller's.
        unsafe {
            segmented::enqueue(
                gpu,
                &mut top.segmented,
                kernels,
                input,
                layout,
                pairs,
                stream,
            )?;
            split(gpu, pairs, count, values, indices, stream)
        }
    })
}
