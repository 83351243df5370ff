//! [`DeviceTopK`]: the k greatest or least elements of a device slice, sorted best first, with their
//! indices.
use cust::stream::Stream;

use crate::dispatch::segmented::Layout;
use crate::dispatch::topk::Scratch;
use crate::dispatch::{self, call::Call};
use crate::element::OrdElement;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, InContext};
use crate::segments::Segments;
use crate::stream::StreamRef;
use crate::view::{DeviceView, DeviceViewMut};
use reduce_contract::topk::ROW_MAX_LEN;

/// The largest `k` of [`DeviceTopK::segmented_max_k`] and its kin.
pub const SEGMENT_K_MAX: u64 = reduce_contract::topk::ROW_K_MAX;

mod sealed {
    pub trait Sealed {}
}

/// Element types top-k selects among: every element type of the library (f32, f64, [`F16`](crate::F16),
/// [`BF16`](crate::BF16), i32, u32, i64, u64, u8), each through an order-preserving radix key.
pub trait TopKElement: OrdElement + reduce_contract::topk::TopKElement + sealed::Sealed {}

macro_rules! topk_elements {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl TopKElement for $t {}
    )*};
}
topk_elements!(f32, f64, crate::F16, crate::BF16, i32, u32, i64, u64, u8);

/// Top-k on `cust` device memory: the `k` greatest ([`max_k`](Self::max_k)) or least
/// ([`min_k`](Self::min_k)) elements and their indices, **sorted best first**.
///
/// - **One answer for every input:** among equal values the smaller index wins and comes first, so the
///   selected set and its order are the same on every run and every GPU.
/// - **NaN** (any payload) counts as greater than +∞ for `max_k` and less than −∞ for `min_k`, as torch
///   orders it; −0.0 and +0.0 are equal (the smaller index first). The values written are the input's own
///   bits.
/// - `k = 0` writes nothing; `k` greater than the input's length, or outputs shorter than `k`, are an
///   [`Error::InvalidArgument`] and nothing is written. Only the first `k` elements of the outputs are
///   written.
/// - Lengths, `k` and indices are 64-bit; the input may be any sub-slice.
///
/// It runs a radix select over the elements' keys. From 2^24 elements on (where k is small beside n), one
/// block first samples 8192 elements and bounds the k-th key, and one pass over the input copies every
/// element reaching the bound to a candidate buffer: 1.3–2.1 reads in all at 2^28 f32 on an H100. Shorter
/// inputs, and inputs the sample misjudges, read it about twice: a histogram of each key's top 15 bits
/// (fewer on devices with less shared memory), then one pass that selects what lies above the k-th
/// element's bucket and copies that bucket's elements to the candidate buffer. Later digits, and the
/// index's digits where the k-th value is tied, read only the candidates. Inputs whose elements are all
/// equal take one pass. It then sorts the k it selected. Either way the answer is the same. k = 1 needs no
/// select: the best element is what [`DeviceReduce::argmax`](crate::DeviceReduce::argmax) (`argmin`)
/// finds under the same rules, in one read. The handle keeps its stream and a scratch of
/// `32 · max(k, 2048)` bytes for the selected pairs and `4 · n` bytes for the candidates (an eighth of the
/// input's elements, twice, as 16-byte pairs), grown to the largest call seen, never allocated per call;
/// for k = 1 it holds the reductions' partials (per segment, grown by the pieces of long rows) and a
/// 16-byte pair a segment, rounded up to a power of two.
///
/// ```no_run
/// use cust::memory::{CopyDestination, DeviceBuffer};
/// use reduce_host::DeviceTopK;
///
/// let mut topk = DeviceTopK::new()?;
/// let x = DeviceBuffer::from_slice(&[0.5f32, 3.0, -1.0, 3.0, f32::NAN, 2.0])?;
/// let mut values = DeviceBuffer::from_slice(&[0.0f32; 3])?;
/// let mut indices = DeviceBuffer::from_slice(&[0u64; 3])?;
/// topk.max_k(&x, 3, &mut values, &mut indices)?;
/// let mut host = [0u64; 3];
/// indices.copy_to(&mut host[..])?;
/// assert_eq!(host, [4, 1, 3]); // NaN first, then the two 3.0 by index
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Streams and CUDA graphs
/// As for [`DeviceReduce`](crate::DeviceReduce): async calls on different streams are ordered on the
/// handle's scratch; a captured graph must not run beside other calls of the handle, and must not be
/// launched after the handle is dropped or after a larger call has grown the scratch (a larger `k`, or at
/// k = 1 more segments or longer rows): capture after a call at least as large.
pub struct DeviceTopK {
    scratch: InContext<Scratch>,
    stream: InContext<Stream>,
    // Declared last: the context outlives the buffers and stream above.
    gpu: Gpu,
}

handle_basics!(DeviceTopK);

impl DeviceTopK {
    /// A handle on an opened device; several handles can share one [`Gpu`].
    pub fn with_gpu(gpu: &Gpu) -> Result<Self> {
        let _current = gpu.make_current()?;
        let stream = gpu.handle_stream()?;
        Ok(DeviceTopK {
            scratch: InContext::new(gpu, Scratch::new(gpu)?),
            stream,
            gpu: gpu.clone(),
        })
    }

    /// Writes the `k` greatest elements of `input` to `values[..k]` and their indices to `indices[..k]`,
    /// greatest first (ties: smaller index first; NaN above +∞).
    pub fn max_k<'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        k: u64,
        values: impl Into<DeviceViewMut<'b, T>>,
        indices: impl Into<DeviceViewMut<'b, u64>>,
    ) -> Result<()> {
        let values = values.into();
        self.blocking(true, input.into(), k, Some(values), indices.into())
    }

    /// Writes the `k` least elements of `input` to `values[..k]` and their indices to `indices[..k]`, least
    /// first (ties: smaller index first; NaN below −∞).
    pub fn min_k<'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        k: u64,
        values: impl Into<DeviceViewMut<'b, T>>,
        indices: impl Into<DeviceViewMut<'b, u64>>,
    ) -> Result<()> {
        let values = values.into();
        self.blocking(false, input.into(), k, Some(values), indices.into())
    }

    /// [`max_k`](Self::max_k) writing only the indices.
    pub fn max_k_indices<'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        k: u64,
        indices: impl Into<DeviceViewMut<'b, u64>>,
    ) -> Result<()> {
        self.blocking(true, input.into(), k, None, indices.into())
    }

    /// [`min_k`](Self::min_k) writing only the indices.
    pub fn min_k_indices<'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        k: u64,
        indices: impl Into<DeviceViewMut<'b, u64>>,
    ) -> Result<()> {
        self.blocking(false, input.into(), k, None, indices.into())
    }

    /// Enqueues [`max_k`](Self::max_k) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// `input`, `values` and `indices` must stay allocated, `input` unmodified and the outputs untouched by
    /// other work, until `stream` has passed this work. If `stream` is capturing a CUDA graph, the graph
    /// uses the handle's scratch each time it runs: it must not run after the handle is dropped or its
    /// scratch has grown, nor while another call of the handle runs.
    pub unsafe fn max_k_async<'s, 'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        k: u64,
        values: impl Into<DeviceViewMut<'b, T>>,
        indices: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let largest = true;
        let values = Some(values.into());
        self.enqueue(
            largest,
            input.into(),
            k,
            values,
            indices.into(),
            Some(stream.into()),
        )
    }

    /// Enqueues [`min_k`](Self::min_k) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// As [`max_k_async`](Self::max_k_async).
    pub unsafe fn min_k_async<'s, 'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        k: u64,
        values: impl Into<DeviceViewMut<'b, T>>,
        indices: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let largest = false;
        let values = Some(values.into());
        self.enqueue(
            largest,
            input.into(),
            k,
            values,
            indices.into(),
            Some(stream.into()),
        )
    }

    /// Enqueues [`max_k_indices`](Self::max_k_indices) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// As [`max_k_async`](Self::max_k_async).
    pub unsafe fn max_k_indices_async<'s, 'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        k: u64,
        indices: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let largest = true;
        self.enqueue(
            largest,
            input.into(),
            k,
            None,
            indices.into(),
            Some(stream.into()),
        )
    }

    /// Enqueues [`min_k_indices`](Self::min_k_indices) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// As [`max_k_async`](Self::max_k_async).
    pub unsafe fn min_k_indices_async<'s, 'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        k: u64,
        indices: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let largest = false;
        self.enqueue(
            largest,
            input.into(),
            k,
            None,
            indices.into(),
            Some(stream.into()),
        )
    }

    /// Writes the `k` greatest elements of each segment of `input` to `values[s · k ..][..k]` and their
    /// indices (in the segment) to `indices[s · k ..][..k]`, greatest first, with the rules of
    /// [`max_k`](Self::max_k) (ties: smaller index first; NaN above +∞).
    ///
    /// - `k` is at most [`SEGMENT_K_MAX`] (1024), and may exceed a segment's length: the results past it
    ///   are index `u64::MAX` with the least value (−∞, or the type's least integer).
    /// - A segment may hold at most `u32::MAX` elements (an offset segment any number for k = 1, where
    ///   the segments are many enough to run as argmax, see below). Offsets out of range
    ///   (`end < begin`, past the input) or farther apart than that are an [`Error::InvalidArgument`]
    ///   after the call, and that segment's results are all padding.
    /// - `k = 0` or no segments writes nothing; outputs shorter than `count · k` are an
    ///   [`Error::InvalidArgument`] and nothing is written.
    ///
    /// A block per segment reads it once, keeping in shared memory only the elements at or above the k-th
    /// best seen so far; a few long segments are cut into pieces whose results one more small pass merges.
    /// With k = 1, rows, and offset segments at least four times as many as the device's SMs, are the
    /// per-segment argmax (argmin) of [`DeviceSegmentedReduce`](crate::DeviceSegmentedReduce), whose rules
    /// are the same. Its offsets kernels give each segment a block, a warp or fewer lanes, by the segments'
    /// mean length, and never cut one into pieces: a few long offset segments keep the select, and, as
    /// there, a segment far longer than the mean runs on the few lanes the mean gets.
    ///
    /// ```no_run
    /// use cust::memory::{CopyDestination, DeviceBuffer};
    /// use reduce_host::{DeviceTopK, Segments};
    ///
    /// let mut topk = DeviceTopK::new()?;
    /// // Two rows of four logits.
    /// let x = DeviceBuffer::from_slice(&[0.1f32, 2.0, -1.0, 2.0, 5.0, 0.0, 4.0, 3.0])?;
    /// let mut values = DeviceBuffer::from_slice(&[0.0f32; 4])?;
    /// let mut indices = DeviceBuffer::from_slice(&[0u64; 4])?;
    /// topk.segmented_max_k(&x, Segments::fixed(2, 4), 2, &mut values, &mut indices)?;
    /// let mut host = [0u64; 4];
    /// indices.copy_to(&mut host[..])?;
    /// assert_eq!(host, [1, 3, 0, 2]); // row 0: the two 2.0 by index; row 1: 5.0, then 4.0
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn segmented_max_k<'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        k: u64,
        values: impl Into<DeviceViewMut<'b, T>>,
        indices: impl Into<DeviceViewMut<'b, u64>>,
    ) -> Result<()> {
        let values = Some(values.into());
        self.per_segment(
            true,
            input.into(),
            segments,
            k,
            values,
            indices.into(),
            None,
        )
    }

    /// [`segmented_max_k`](Self::segmented_max_k) for the `k` least of each segment, least first (NaN
    /// below −∞); the padding's value is the greatest (+∞, or the type's greatest integer).
    pub fn segmented_min_k<'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        k: u64,
        values: impl Into<DeviceViewMut<'b, T>>,
        indices: impl Into<DeviceViewMut<'b, u64>>,
    ) -> Result<()> {
        let values = Some(values.into());
        self.per_segment(
            false,
            input.into(),
            segments,
            k,
            values,
            indices.into(),
            None,
        )
    }

    /// [`segmented_max_k`](Self::segmented_max_k) writing only the indices.
    pub fn segmented_max_k_indices<'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        k: u64,
        indices: impl Into<DeviceViewMut<'b, u64>>,
    ) -> Result<()> {
        self.per_segment(true, input.into(), segments, k, None, indices.into(), None)
    }

    /// [`segmented_min_k`](Self::segmented_min_k) writing only the indices.
    pub fn segmented_min_k_indices<'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        k: u64,
        indices: impl Into<DeviceViewMut<'b, u64>>,
    ) -> Result<()> {
        self.per_segment(false, input.into(), segments, k, None, indices.into(), None)
    }

    /// Enqueues [`segmented_max_k`](Self::segmented_max_k) on `stream` and returns without waiting; bad
    /// offsets are not reported (their segments' results are padding).
    ///
    /// # Safety
    /// As [`max_k_async`](Self::max_k_async), and the offsets (if any) too must stay allocated and
    /// unmodified until `stream` has passed this work.
    pub unsafe fn segmented_max_k_async<'s, 'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        k: u64,
        values: impl Into<DeviceViewMut<'b, T>>,
        indices: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let (values, stream) = (Some(values.into()), Some(stream.into()));
        self.per_segment(
            true,
            input.into(),
            segments,
            k,
            values,
            indices.into(),
            stream,
        )
    }

    /// Enqueues [`segmented_min_k`](Self::segmented_min_k) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// As [`segmented_max_k_async`](Self::segmented_max_k_async).
    pub unsafe fn segmented_min_k_async<'s, 'a, 'b, T: TopKElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        k: u64,
        values: impl Into<DeviceViewMut<'b, T>>,
        indices: impl Into<DeviceViewMut<'b, u64>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let (values, stream) = (Some(values.into()), Some(stream.into()));
        self.per_segment(
            false,
            input.into(),
            segments,
            k,
            values,
            indices.into(),
            stream,
        )
    }

    /// Checks a per-segment call and enqueues it, on `stream` or (`None`) on the handle's stream, waiting
    /// for it and reporting bad offsets.
    #[allow(clippy::too_many_arguments)]
    fn per_segment<T: TopKElement>(
        &mut self,
        largest: bool,
        input: DeviceView<'_, T>,
        segments: Segments<'_>,
        k: u64,
        values: Option<DeviceViewMut<'_, T>>,
        indices: DeviceViewMut<'_, u64>,
        stream: Option<StreamRef<'_>>,
    ) -> Result<()> {
        let blocking = stream.is_none();
        let stream = stream.unwrap_or(StreamRef::from(&*self.stream));
        let mut call = Call::new(&self.gpu)?;
        let input = call.input(input, "input")?;
        let layout = segments.layout(input.len, |v, what| call.input(v, what))?;
        if k > SEGMENT_K_MAX {
            return Err(Error::InvalidArgument(format!(
                "k = {k} per segment is more than {SEGMENT_K_MAX}; select from long segments one by one \
                 with max_k/min_k"
            )));
        }
        if let Layout::Rows { len, .. } = layout
            && len > ROW_MAX_LEN
        {
            return Err(Error::InvalidArgument(format!(
                "rows of {len} elements are longer than the {ROW_MAX_LEN} a segment may hold"
            )));
        }
        let wanted = layout.count() * k;
        let values = values.map(|v| call.output(&v, "values")).transpose()?;
        let indices = call.output(&indices, "indices")?;
        for (what, len) in [
            ("values", values.map(|v| v.len)),
            ("indices", Some(indices.len)),
        ] {
            if let Some(len) = len.filter(|&len| len < wanted) {
                return Err(Error::InvalidArgument(format!(
                    "the {what} output holds {len} elements; {} segments of k = {k} need {wanted}",
                    layout.count()
                )));
            }
        }
        if wanted == 0 {
            return Ok(());
        }
        let gpu = &self.gpu;
        if k == 1 && dispatch::top_one::serves(gpu, &layout) {
            // The best of each segment is its argmax (argmin): one read, see `dispatch::top_one`.
            let (top, last_use) = self.scratch.top_one();
            // SAFETY: the input, offsets and outputs are checked, borrowed views, the outputs at least
            // `count` long; rows lie in the input; `last_use` is this handle's scratch's, which `&mut self`
            // keeps to this call. Blocking calls wait below; async callers keep everything alive per their
            // contract.
            call.enqueue(stream, || unsafe {
                dispatch::top_one::enqueue_segments(
                    gpu, top, last_use, input, layout, largest, values, indices, stream,
                )
            })?;
            return finish_segments(blocking, layout, || top.read_error(stream), stream);
        }
        let (rows, last_use) = self.scratch.rows();
        // SAFETY: the input, offsets and outputs are checked, borrowed views, the outputs at least
        // count · k long; rows lie in the input and are at most ROW_MAX_LEN long; 1 ≤ k ≤ SEGMENT_K_MAX.
        // Blocking calls wait below; async callers keep everything alive per their contract.
        call.enqueue(stream, || unsafe {
            dispatch::row_topk::enqueue(
                gpu, rows, last_use, input, layout, k, largest, values, indices, stream,
            )
        })?;
        finish_segments(blocking, layout, || rows.read_error(stream), stream)
    }

    fn blocking<T: TopKElement>(
        &mut self,
        largest: bool,
        input: DeviceView<'_, T>,
        k: u64,
        values: Option<DeviceViewMut<'_, T>>,
        indices: DeviceViewMut<'_, u64>,
    ) -> Result<()> {
        self.enqueue(largest, input, k, values, indices, None)?;
        crate::driver::synchronize(StreamRef::from(&*self.stream))
    }

    /// Checks the arguments and hands the call to the dispatch, on `stream` (the handle's if none): the `k`
    /// greatest elements when `largest` (`max_k`), else the least.
    fn enqueue<T: TopKElement>(
        &mut self,
        largest: bool,
        input: DeviceView<'_, T>,
        k: u64,
        values: Option<DeviceViewMut<'_, T>>,
        indices: DeviceViewMut<'_, u64>,
        stream: Option<StreamRef<'_>>,
    ) -> Result<()> {
        let stream = stream.unwrap_or(StreamRef::from(&*self.stream));
        let mut call = Call::new(&self.gpu)?;
        let input = call.input(input, "input")?;
        let values = values.map(|v| call.output(&v, "values")).transpose()?;
        let indices = call.output(&indices, "indices")?;
        if k > input.len {
            return Err(Error::InvalidArgument(format!(
                "k = {k} is more than the input's {} elements",
                input.len
            )));
        }
        for (what, len) in [
            ("values", values.map(|v| v.len)),
            ("indices", Some(indices.len)),
        ] {
            if let Some(len) = len.filter(|&len| len < k) {
                return Err(Error::InvalidArgument(format!(
                    "the {what} output holds {len} elements; it must hold at least k = {k}"
                )));
            }
        }
        if k == 0 {
            return Ok(());
        }
        if k == 1 {
            // The best element is the argmax (argmin): one read, see `dispatch::top_one`.
            let (gpu, (top, last_use)) = (&self.gpu, self.scratch.top_one());
            // SAFETY: `input` (not empty: 1 = k ≤ n) and the outputs are checked, borrowed, disjoint views,
            // the outputs at least one long; `last_use` is this handle's scratch's, which `&mut self` keeps
            // to this call; the caller keeps the views alive until `stream` has passed this work.
            return call.enqueue(stream, || unsafe {
                dispatch::top_one::enqueue(
                    gpu, top, last_use, input, largest, values, indices, stream,
                )
            });
        }
        // SAFETY: `input` and the outputs are checked, borrowed, disjoint views, the outputs at least k long
        // and 1 ≤ k ≤ n; the caller keeps them alive until `stream` has passed this work.
        call.enqueue(stream, || unsafe {
            dispatch::topk::enqueue(
                &self.gpu,
                &mut self.scratch,
                input,
                k,
                largest,
                values,
                indices,
                stream,
            )
        })
    }
}

/// The end of a per-segment call: nothing more for an async one; a blocking one reads the bad-offsets word
/// (`read_error`, offsets only) and waits for the work on `stream`.
fn finish_segments(
    blocking: bool,
    layout: Layout,
    read_error: impl FnOnce() -> Result<bool>,
    stream: StreamRef<'_>,
) -> Result<()> {
    if !blocking {
        return Ok(());
    }
    if matches!(layout, Layout::Offsets { .. }) && read_error()? {
        return Err(bad_offsets());
    }
    crate::driver::synchronize(stream)
}

/// The error of a blocking per-segment call whose device found bad offsets.
fn bad_offsets() -> Error {
    Error::InvalidArgument(format!(
        "a segment's offsets are out of range (end < begin, end past the input, or more than \
         u32::MAX elements where the select runs: k > 1, or k = 1 on fewer than {} offset segments \
         an SM); its results are padding",
        dispatch::top_one::OFFSET_SEGMENTS_PER_SM
    ))
}

impl Drop for DeviceTopK {
    fn drop(&mut self) {
        // The fields free device memory: make their context current first. Nothing to report a failure to.
        let _current = self.gpu.make_current();
        // Async calls may still be using the scratch on any stream: wait for the last use before it is freed.
        let _ = self.scratch.wait_idle();
    }
}
