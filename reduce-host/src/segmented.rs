//! [`DeviceSegmentedReduce`]: one reduction per segment (per row of a matrix, or per offset range), and
//! the fused softmax statistics; [`Segments`] says where the segments are. The launches are in
//! [`crate::dispatch::segmented`].
use cust::stream::Stream;
use reduce_contract::kernels::PerSegment;
use reduce_contract::{Op, Sample};

use crate::determinism::Determinism;
use crate::dispatch::call::Call;
#[doc(hidden)]
#[cfg(feature = "testing")]
pub use crate::dispatch::segmented::PlanOverrides;
use crate::dispatch::segmented::{self, Kernels, Layout, Scratch};
use crate::driver;
use crate::element::{Element, Indexed, OrdElement, SumElement};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, InContext};
use crate::half::{BF16, F16};
use crate::segments::Segments;
use crate::stream::StreamRef;
use crate::view::{DeviceView, DeviceViewMut};

pub use reduce_contract::SoftmaxStats;

mod sealed {
    pub trait Softmax {
        const SAMPLE: reduce_contract::Sample;
    }
}

/// Element types of [`DeviceSegmentedReduce::softmax_stats`]: f32, [`F16`] and [`BF16`], all computed in
/// f32.
pub trait SoftmaxElement: Element + sealed::Softmax {}

macro_rules! softmax_elements {
    ($($t:ty => $s:ident),*) => {$(
        impl sealed::Softmax for $t {
            const SAMPLE: Sample = Sample::$s;
        }
        impl SoftmaxElement for $t {}
    )*};
}
softmax_elements!(f32 => F32, F16 => F16, BF16 => BF16);

/// One reduction per segment: per row of a row-major matrix, per fixed-size block, or per `begin[s] ..
/// end[s]` range of an input ([`Segments`]), writing `count` results to device memory.
///
/// Operations and their results, per segment, with [`DeviceReduce`](crate::DeviceReduce)'s semantics
/// (NaN propagates, ties go to the smallest index, −0 equals +0):
///
/// | method | result | empty segment |
/// |---|---|---|
/// | [`sum`](Self::sum) | [`SumElement::Acc`] (f16/bf16 in f32, integers in 64 bits, wrapping) | 0 |
/// | [`max`](Self::max) / [`min`](Self::min) | `T` | −∞ / +∞ (`MIN` / `MAX` for integers) |
/// | [`argmax`](Self::argmax) / [`argmin`](Self::argmin) | [`Indexed<T>`], index within the segment | index `u64::MAX`, value as max/min |
/// | [`softmax_stats`](Self::softmax_stats) | [`SoftmaxStats`] | `{ −∞, 0 }` |
///
/// ```no_run
/// use reduce_host::cust::memory::{CopyDestination, DeviceBuffer};
/// use reduce_host::{DeviceSegmentedReduce, Segments};
///
/// let mut seg = DeviceSegmentedReduce::new()?;
/// // A 2 × 3 matrix.
/// let x = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
/// let mut sums = DeviceBuffer::from_slice(&[0.0f32; 2])?;
/// seg.sum(&x, Segments::rows(2, 3, 3), &mut sums)?;
/// let mut host = [0.0f32; 2];
/// sums.copy_to(&mut host[..])?;
/// assert_eq!(host, [6.0, 15.0]);
/// # Ok::<(), reduce_host::Error>(())
/// ```
///
/// # Kernels and determinism
/// Each segment is cut into 16-byte chunks dealt round robin to a group of threads whose size depends only
/// on the segment's length: 1 to 32 lanes of a warp for segments up to 1 KiB (2 chunks a lane; rows of
/// 16–31 bytes a thread each, four rows in flight, with the one-lane tile's bits), a warp up to 32 KiB, a
/// block up to 512 KiB, and beyond that several blocks of 256 KiB pieces whose partials a second kernel
/// combines in a fixed order (argmax, argmin, and the max and min of types other than f16/bf16, whose bits
/// no tree changes, also fit the block size to the GPU, and cut rows too few to fill it into pieces of at
/// least 32 KiB, by the row count and the SMs). The chunks of unaligned segments are read with
/// scalar loads in the same order, so a row-layout segment's result depends only on its values and length:
/// the same bits on every call and whatever the alignment. Offset segments take the kernel of their mean
/// length, `n / count` (never split; sums of a mean over 8 KiB a block each), so a ragged segment's float
/// sum may differ in the last bits between inputs of different mean length, never between calls on the
/// same input; and a segment far longer than the mean runs on the few lanes the mean gets (correct, but
/// slow: give such a segment its own call). Under
/// [`Determinism::GpuToGpu`] (see [`set_determinism`](Self::set_determinism)) a float sum depends on the
/// segment's values alone, whatever the layout.
///
/// # Memory and streams
/// The handle owns a stream for the blocking methods and scratch for split segments (grown on demand).
/// Async calls on different streams share the scratch safely, as [`DeviceReduce`](crate::DeviceReduce)'s
/// do, with the same caveat for CUDA graphs.
pub struct DeviceSegmentedReduce {
    determinism: Determinism,
    scratch: InContext<Scratch>,
    stream: InContext<Stream>,
    // Declared last: the context outlives the buffers and stream above.
    gpu: Gpu,
}

handle_basics!(DeviceSegmentedReduce);

impl DeviceSegmentedReduce {
    /// A handle on an opened device; several handles can share one [`Gpu`].
    pub fn with_gpu(gpu: &Gpu) -> Result<Self> {
        // The device's context, current while the handle's buffers are allocated in it.
        let _current = gpu.make_current()?;
        let stream = gpu.handle_stream()?;
        Ok(DeviceSegmentedReduce {
            determinism: Determinism::default(),
            scratch: InContext::new(gpu, Scratch::new()?),
            stream,
            gpu: gpu.clone(),
        })
    }

    /// The bit-reproducibility of float sums ([`Determinism::RunToRun`] unless set).
    pub fn determinism(&self) -> Determinism {
        self.determinism
    }

    /// Chooses the bit-reproducibility of the following float segment sums (`sum` and `sum_async`).
    /// With [`Determinism::GpuToGpu`] each segment's sum has the bits that
    /// [`DeviceReduce::sum`](crate::DeviceReduce::sum) under `GpuToGpu`, and
    /// [`cpu::sum_reproducible`](crate::cpu::sum_reproducible), give its elements: the same on every GPU,
    /// for every layout, offset and alignment, with the error bound documented there. Rows of at most 32
    /// elements take a tile of 1–32 lanes each, rows up to 8192 a warp each; longer rows a block each, or,
    /// when they are too few to fill the GPU, a warp per 8192-element chunk and then a block per row. Offset
    /// segments take a warp each up to 8192 elements and their block beyond (so a few very long offset
    /// segments run on a few SMs: sum those with `DeviceReduce`, which gives the same bits).
    ///
    /// ```no_run
    /// use reduce_host::cust::memory::DeviceBuffer;
    /// use reduce_host::{Determinism, DeviceSegmentedReduce, Segments};
    ///
    /// let mut seg = DeviceSegmentedReduce::new()?;
    /// seg.set_determinism(Determinism::GpuToGpu);
    /// let x = DeviceBuffer::from_slice(&[0.1f32; 3000])?;
    /// let mut sums = DeviceBuffer::from_slice(&[0.0f32; 3])?;
    /// seg.sum(&x, Segments::fixed(3, 1000), &mut sums)?; // the same bits on any GPU
    /// # Ok::<(), reduce_host::Error>(())
    /// ```
    pub fn set_determinism(&mut self, determinism: Determinism) {
        self.determinism = determinism;
    }

    /// Forces how the reproducible sums of rows longer than 8192 elements run (`Some(true)`: split into
    /// chunks over the whole GPU; `Some(false)`: a block per row; `None`: by the row count), so tests can
    /// check that the choice does not change the bits.
    #[doc(hidden)]
    #[cfg(feature = "testing")]
    pub fn set_reproducible_split(&mut self, split: Option<bool>) {
        self.scratch.repro_split = split;
    }

    /// Overrides the kernels' plans, so benchmarks can compare them on one input (see [`PlanOverrides`]).
    #[doc(hidden)]
    #[cfg(feature = "testing")]
    pub fn set_plan_overrides(&mut self, overrides: PlanOverrides) -> Result<()> {
        // The kernels' shuffles need whole warps.
        if let Some(t) = overrides
            .tile_threads
            .into_iter()
            .chain(overrides.block_threads)
            .find(|&t| t == 0 || t > 1024 || !t.is_multiple_of(32))
        {
            return Err(Error::InvalidArgument(format!(
                "blocks of {t} threads: a multiple of 32 up to 1024"
            )));
        }
        if let Some(w) = overrides.user_width
            && !(w.is_power_of_two() && (8..=32).contains(&w))
        {
            return Err(Error::InvalidArgument(format!(
                "tiles of {w} lanes: a power of two from 8 to 32"
            )));
        }
        self.scratch.overrides = overrides;
        Ok(())
    }

    /// The kernels of a sum of `T`: the reproducible kernels for float sums under `GpuToGpu`.
    fn sum_kernels<T: SumElement>(&self) -> Kernels<'static> {
        match T::ELEM.float() {
            Some(float) if self.determinism.reproducible_sum(T::ELEM) => {
                Kernels::Reproducible(float)
            }
            _ => PerSegment::Op(Op::Sum, T::ELEM).into(),
        }
    }

    /// Writes the sum of each segment to `out[s]` and waits. Sums accumulate as
    /// [`DeviceReduce::sum`](crate::DeviceReduce::sum)'s: f16/bf16 in f32, integers in 64 bits (wrapping).
    /// An empty segment sums to 0. See [`set_determinism`](Self::set_determinism) for sums with the same
    /// bits on every GPU.
    pub fn sum<'a, 'b, T: SumElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, T::Acc>>,
    ) -> Result<()> {
        let module = self.sum_kernels::<T>();
        self.run(module, input, segments, out, None)
    }

    /// Writes the greatest element of each segment to `out[s]` and waits; NaN propagates; an empty segment
    /// gives −∞ (`MIN` for integers).
    pub fn max<'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, T>>,
    ) -> Result<()> {
        let module = PerSegment::Op(Op::Max, T::ELEM);
        self.run(module, input, segments, out, None)
    }

    /// Writes the least element of each segment to `out[s]` and waits; NaN propagates; an empty segment
    /// gives +∞ (`MAX` for integers).
    pub fn min<'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, T>>,
    ) -> Result<()> {
        let module = PerSegment::Op(Op::Min, T::ELEM);
        self.run(module, input, segments, out, None)
    }

    /// Writes the greatest element of each segment and its index **within the segment** to `out[s]` and
    /// waits. Ties go to the smallest index, the first NaN wins; an empty segment gives index `u64::MAX`
    /// (and value −∞, or `MIN`).
    pub fn argmax<'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, Indexed<T>>>,
    ) -> Result<()> {
        let module = PerSegment::Op(Op::ArgMax, T::ELEM);
        self.run(module, input, segments, out, None)
    }

    /// As [`argmax`](Self::argmax), for the least element (empty: index `u64::MAX`, value +∞ or `MAX`).
    pub fn argmin<'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, Indexed<T>>>,
    ) -> Result<()> {
        let module = PerSegment::Op(Op::ArgMin, T::ELEM);
        self.run(module, input, segments, out, None)
    }

    /// Writes each segment's softmax statistics, its maximum `m` and `Σ exp(xᵢ − m)`, to `out[s]` and
    /// waits: one read of the input, merged by the online-softmax recurrence in f32. Then `softmax(x)ᵢ =
    /// exp(xᵢ − m) / sum_exp`. Special rows are described at [`SoftmaxStats`]; `exp` is the hardware's
    /// `ex2.approx`, about 2 ulp per term.
    pub fn softmax_stats<'a, 'b, T: SoftmaxElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, SoftmaxStats>>,
    ) -> Result<()> {
        let module = PerSegment::Softmax(T::SAMPLE);
        self.run(module, input, segments, out, None)
    }

    /// Enqueues [`sum`](Self::sum) on `stream` and returns without waiting. Bad offsets are not reported
    /// (their segments reduce as empty).
    ///
    /// # Safety
    /// `input`, the offsets and `out` must stay allocated, and `input` and the offsets unmodified, until
    /// `stream` has passed this work.
    /// If `stream` is capturing a CUDA graph, the graph uses the handle's scratch each time it runs: it must
    /// not run after the handle is dropped or its scratch is replaced (by a later call that needs more, or
    /// a new policy), nor while another call of the handle runs.
    pub unsafe fn sum_async<'s, 'a, 'b, T: SumElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, T::Acc>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let module = self.sum_kernels::<T>();
        self.run(module, input, segments, out, Some(stream.into()))
    }

    /// Enqueues [`max`](Self::max) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn max_async<'s, 'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, T>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let module = PerSegment::Op(Op::Max, T::ELEM);
        self.run(module, input, segments, out, Some(stream.into()))
    }

    /// Enqueues [`min`](Self::min) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn min_async<'s, 'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, T>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let module = PerSegment::Op(Op::Min, T::ELEM);
        self.run(module, input, segments, out, Some(stream.into()))
    }

    /// Enqueues [`argmax`](Self::argmax) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn argmax_async<'s, 'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, Indexed<T>>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let module = PerSegment::Op(Op::ArgMax, T::ELEM);
        self.run(module, input, segments, out, Some(stream.into()))
    }

    /// Enqueues [`argmin`](Self::argmin) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn argmin_async<'s, 'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, Indexed<T>>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let module = PerSegment::Op(Op::ArgMin, T::ELEM);
        self.run(module, input, segments, out, Some(stream.into()))
    }

    /// Enqueues [`softmax_stats`](Self::softmax_stats) on `stream` and returns without waiting.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn softmax_stats_async<'s, 'a, 'b, T: SoftmaxElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, SoftmaxStats>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let module = PerSegment::Softmax(T::SAMPLE);
        self.run(module, input, segments, out, Some(stream.into()))
    }

    /// Checks the arguments and enqueues `module`'s reduction: on `stream`, or (`None`) on the handle's
    /// stream, waiting for it and reporting bad offsets. The one place streams are chosen.
    pub(crate) fn run<'a, 'b, 'k, T: Element + 'a, Acc: 'b>(
        &mut self,
        kernels: impl Into<Kernels<'k>>,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, Acc>>,
        stream: Option<StreamRef<'_>>,
    ) -> Result<()> {
        let (kernels, input, mut out) = (kernels.into(), input.into(), out.into());
        let mut call = Call::new(&self.gpu)?;
        let input_span = call.input(input, "input")?;
        let layout = segments.layout(input_span.len, |v, what| call.input(v, what))?;
        let count = layout.count();
        if (out.len() as u64) < count {
            return Err(Error::InvalidArgument(format!(
                "the output holds {} results but there are {count} segments",
                out.len()
            )));
        }
        let out = call.output(&out.slice_mut(..count as usize), "output")?;
        let blocking = stream.is_none();
        let stream = stream.unwrap_or(StreamRef::from(&*self.stream));
        // SAFETY: the views borrow live memory (blocking calls wait below; async callers keep it alive per
        // their contract); rows were checked to lie inside the input, and `out` holds `count` results.
        call.enqueue(stream, || unsafe {
            segmented::enqueue(
                &self.gpu,
                &mut self.scratch,
                kernels,
                input_span,
                layout,
                out.as_mut_ptr(),
                stream,
            )
        })?;
        if !blocking {
            return Ok(());
        }
        match layout {
            Layout::Offsets { count, .. } if count > 0 => {
                if self.scratch.read_error(stream)? {
                    return Err(Error::InvalidArgument(
                        "a segment's offsets are out of range (end < begin, or end past the input); it was \
                         reduced as empty"
                            .into(),
                    ));
                }
                Ok(())
            }
            _ => driver::synchronize(stream),
        }
    }
}

impl Drop for DeviceSegmentedReduce {
    fn drop(&mut self) {
        // As DeviceReduce: make the context current, then wait for the scratch's last use before it is freed.
        let _current = self.gpu.make_current();
        let _ = self.scratch.wait_idle();
    }
}
