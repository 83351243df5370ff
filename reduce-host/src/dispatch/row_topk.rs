//! Per-segment top-k: the pieces' buffer and bad-offsets word of the scratch, and the launches of `select`
//! (a block per segment or piece) and `merge` (a block per split segment).
use cust::memory::DeviceBuffer;
use reduce_contract::kernels::{RowTopKKernel, RowTopKPass};
use reduce_contract::params::RowTopKParams;
use reduce_contract::topk::{ROW_THREADS, row_pieces, row_shared};

use super::Span;
use super::segmented::Layout;
use crate::driver::{self, Launch, Order};
use crate::error::Result;
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::pinned::Pinned;
use crate::stream::StreamRef;
use crate::topk::TopKElement;

/// Device temporaries of the per-segment top-k: the split segments' pieces' results (value keys and
/// inverted indices, grown to the largest call seen) and the bad-offsets word.
pub(crate) struct RowScratch {
    keys: DeviceBuffer<u64>,
    indices: DeviceBuffer<u32>,
    error: DeviceBuffer<u32>,
    /// Page-locked landing place for the error word.
    staging: Pinned,
}

impl RowScratch {
    pub fn new() -> Result<Self> {
        Ok(RowScratch {
            keys: driver::zeroed(1)?,
            indices: driver::zeroed(1)?,
            error: driver::zeroed(1)?,
            staging: Pinned::new(size_of::<u32>())?,
        })
    }

    /// Room for `pairs` piece results, after waiting for the work that may still use the old buffers.
    fn reserve(&mut self, pairs: usize, last_use: &LastUse) -> Result<(*mut u64, *mut u32)> {
        if self.keys.len() < pairs {
            last_use.synchronize()?;
            let pairs = pairs.next_power_of_two();
            self.keys = driver::zeroed(pairs)?;
            self.indices = driver::zeroed(pairs)?;
        }
        Ok((
            self.keys.as_device_ptr().as_raw() as *mut u64,
            self.indices.as_device_ptr().as_raw() as *mut u32,
        ))
    }

    fn error_word(&self) -> *mut u32 {
        self.error.as_device_ptr().as_raw() as *mut u32
    }

    /// Reads the bad-offsets word after the work on `stream` (waits for it).
    pub fn read_error(&mut self, stream: StreamRef<'_>) -> Result<bool> {
        let word = self.error_word() as u64;
        // SAFETY: the word is a live u32 of this scratch, read after the kernels on `stream`; `staging` is
        // this scratch's, and `&mut self` keeps other reads out.
        Ok(unsafe { driver::read_back::<u32>(word, &self.staging, stream)? } != 0)
    }
}

/// Writes the `k` best elements of each segment of `input` (`largest`: the greatest) to `values` and
/// `indices[s · k ..][..k]`, best first, padded past a short segment's length.
///
/// # Safety
/// `input` valid for reads, `values` (if any) and `indices` for `count · k` writes, offsets (if any) for
/// `count` reads, until `stream` has passed this work; rows checked to lie in the input and to be at most
/// `ROW_MAX_LEN` long; `1 ≤ k ≤ ROW_K_MAX`.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn enqueue<T: TopKElement>(
    gpu: &Gpu,
    scratch: &mut RowScratch,
    last_use: &mut LastUse,
    input: Span<T>,
    layout: Layout,
    k: u64,
    largest: bool,
    values: Option<Span<T>>,
    indices: Span<u64>,
    stream: StreamRef<'_>,
) -> Result<()> {
    let count = layout.count();
    let kernel = |pass| RowTopKKernel(T::ELEM, pass);
    let select = gpu.function(kernel(RowTopKPass::Select))?;
    let shared = row_shared(size_of::<T>() as u32, T::KEY_BYTES);
    let resident = gpu.info().sm_count as u64 * select.blocks_per_sm(ROW_THREADS, shared)? as u64;
    let (len, stride, begin, end) = layout.kernel_fields();
    // Offsets are split by their mean length, which only the device knows exactly.
    let typical = match layout {
        Layout::Rows { len, .. } => len,
        Layout::Offsets { count, .. } => input.len / count.max(1),
    };
    let pieces = row_pieces(count, typical, resident);
    let (piece_keys, piece_indices) = if pieces > 1 {
        scratch.reserve((count * pieces * k) as usize, last_use)?
    } else {
        (std::ptr::null_mut(), std::ptr::null_mut())
    };
    let error = scratch.error_word();
    let params = RowTopKParams {
        input: input.as_ptr(),
        n: input.len,
        count,
        len,
        stride,
        begin,
        end,
        error,
        k,
        pieces,
        piece_keys,
        piece_indices,
        values_out: values.map_or(std::ptr::null_mut(), |v| v.as_mut_ptr()),
        indices_out: indices.as_mut_ptr(),
        largest: largest as u32,
    };
    let grid = |blocks: u64| Launch {
        grid: blocks.clamp(1, i32::MAX as u64) as u32,
        block: ROW_THREADS,
        shared_bytes: shared,
    };
    let merge_order = if gpu.dependent_launch() {
        Order::Programmatic
    } else {
        Order::Stream
    };
    last_use.claim(stream, || {
        // SAFETY: the error word is this scratch's, claimed here.
        unsafe { driver::memset_zero(error as u64, size_of::<u32>(), stream)? };
        // SAFETY: both kernels take `RowTopKParams<T>`; they read the input, the offsets (count each) and
        // the pieces' buffer (count · pieces · k, reserved above), and write the outputs (count · k, the
        // caller) and the error word; blocks of ROW_THREADS with `row_shared` bytes, as they require.
        unsafe {
            driver::launch(select, grid(count * pieces), stream, &params, Order::Stream)?;
            if pieces > 1 {
                let merge = gpu.function(kernel(RowTopKPass::Merge))?;
                driver::launch(merge, grid(count), stream, &params, merge_order)?;
            }
        }
        Ok(())
    })
}
