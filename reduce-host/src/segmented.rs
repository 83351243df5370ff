//! [`DeviceSegmentedReduce`]: one reduction per segment (per row of a matrix, or per offset range), and
//! the fused softmax statistics; [`Segments`] says where the segments are. The launches are in
//! [`crate::dispatch::segmented`].
use cust::memory::DeviceCopy;
use cust::stream::Stream;
use reduce_contract::{Module, Op, Sample};

use crate::determinism::Determinism;
use crate::dispatch::Span;
use crate::dispatch::segmented::{self, Layout, Scratch};
use crate::driver;
use crate::element::{Element, Indexed, OrdElement, SumElement};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, InContext};
use crate::half::{BF16, F16};
use crate::stream::{self, StreamRef};
use crate::view::{DeviceView, DeviceViewMut, Home};

pub use reduce_contract::SoftmaxStats;

/// Where the segments of a [`DeviceSegmentedReduce`] call lie in its input.
///
/// ```
/// use reduce_host::Segments;
/// let m = Segments::rows(3, 5, 8); // 3 rows of 5 elements, each row starting 8 elements after the last
/// assert_eq!(m.count(), 3);
/// assert_eq!(Segments::fixed(4, 16).count(), 4); // = Segments::rows(4, 16, 16)
/// ```
///
/// Offsets (CUB's `d_begin_offsets`/`d_end_offsets`) are device arrays of `u64`; a segment `begin[s] ..
/// end[s]` with `end < begin` or `end` past the input is never read: it reduces as empty, and the blocking
/// methods report it as [`Error::InvalidArgument`].
///
/// ```no_run
/// use reduce_host::cust::memory::DeviceBuffer;
/// use reduce_host::{DeviceView, Segments};
///
/// let offsets = DeviceBuffer::from_slice(&[0u64, 3, 3, 10])?; // segments 0..3, 3..3 (empty), 3..10
/// let all = DeviceView::from(&offsets);
/// let segments = Segments::offsets(all.slice(..3), all.slice(1..));
/// assert_eq!(segments.count(), 3);
/// # Ok::<(), reduce_host::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Segments<'a> {
    kind: Kind<'a>,
}

#[derive(Clone, Copy, Debug)]
enum Kind<'a> {
    Rows {
        rows: u64,
        cols: u64,
        stride: u64,
    },
    Offsets {
        begin: DeviceView<'a, u64>,
        end: DeviceView<'a, u64>,
    },
}

impl Segments<'static> {
    /// The `rows` rows of a row-major matrix of `cols` columns whose rows start `stride` elements apart
    /// (`stride >= cols`; the input's first element is row 0's). Row `r` is `input[r · stride ..][..cols]`.
    pub fn rows(rows: usize, cols: usize, stride: usize) -> Self {
        Segments {
            kind: Kind::Rows {
                rows: rows as u64,
                cols: cols as u64,
                stride: stride as u64,
            },
        }
    }

    /// `count` back-to-back segments of `size` elements: `rows(count, size, size)`.
    pub fn fixed(count: usize, size: usize) -> Self {
        Segments::rows(count, size, size)
    }
}

impl<'a> Segments<'a> {
    /// Segment `s` is `input[begin[s] .. end[s]]`; `begin` and `end` must have the same length, the number
    /// of segments. For CUB-style offsets `o` (`count + 1` values), pass `o.slice(..count)` and
    /// `o.slice(1..)`.
    pub fn offsets(
        begin: impl Into<DeviceView<'a, u64>>,
        end: impl Into<DeviceView<'a, u64>>,
    ) -> Self {
        Segments {
            kind: Kind::Offsets {
                begin: begin.into(),
                end: end.into(),
            },
        }
    }

    /// How many segments (and results) there are.
    pub fn count(&self) -> usize {
        match self.kind {
            Kind::Rows { rows, .. } => rows as usize,
            Kind::Offsets { begin, .. } => begin.len(),
        }
    }

    /// The streams that own the offsets, when they are cudarc memory.
    fn homes(&self) -> [Home; 2] {
        match self.kind {
            Kind::Offsets { begin, end } => [begin.home(), end.home()],
            Kind::Rows { .. } => [Home::default(); 2],
        }
    }

    /// Checks the segments against an input of `n` elements: rows must lie inside it (offsets are checked
    /// on the device, where they are).
    /// `span` checks an offsets view the way every device slice of a call is checked (address, device).
    pub(crate) fn layout(
        &self,
        n: u64,
        span: impl Fn(DeviceView<'_, u64>, &str) -> Result<Span<u64>>,
    ) -> Result<Layout> {
        let invalid = |m: String| Err(Error::InvalidArgument(m));
        match self.kind {
            Kind::Rows { rows, cols, stride } => {
                if stride < cols {
                    return invalid(format!(
                        "row stride {stride} is less than the {cols} columns: rows would overlap"
                    ));
                }
                if rows > 0 {
                    let end = (rows - 1)
                        .checked_mul(stride)
                        .and_then(|start| start.checked_add(cols));
                    match end {
                        Some(end) if end <= n => {}
                        Some(end) => {
                            return invalid(format!(
                                "{rows} rows of {cols} with stride {stride} end at element {end}, past the \
                                 input's {n}"
                            ));
                        }
                        None => {
                            return invalid(format!(
                                "{rows} rows with stride {stride} overflow 64-bit offsets"
                            ));
                        }
                    }
                }
                Ok(Layout::Rows {
                    count: rows,
                    len: cols,
                    stride,
                })
            }
            Kind::Offsets { begin, end } => {
                if begin.len() != end.len() {
                    return invalid(format!(
                        "{} begin offsets but {} end offsets: one of each per segment",
                        begin.len(),
                        end.len()
                    ));
                }
                Ok(Layout::Offsets {
                    count: begin.len() as u64,
                    begin: span(begin, "begin offsets")?,
                    end: span(end, "end offsets")?,
                })
            }
        }
    }
}

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
/// on the segment's length: 1 to 32 lanes of a warp for short segments (2 chunks a lane), a warp up to 8
/// KiB, a block up to 512 KiB, and beyond that several blocks of 256 KiB pieces whose partials a second
/// kernel combines in a fixed order. The chunks of unaligned segments are read with scalar loads in the
/// same order, so a row-layout segment's result depends only on its values and length: the same bits on
/// every call and whatever the alignment. Offset segments take the kernel of their mean length, `n /
/// count` (never split), so a ragged segment's float sum may differ in the last bits between inputs of
/// different mean length, never between calls on the same input; and a segment far longer than the mean
/// runs on the few lanes the mean gets (correct, but slow: give such a segment its own call). Under
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
    /// for every layout, offset and alignment, with the error bound documented there. Rows of at most 8192
    /// elements take a warp each, other segments a block each (so a few very long segments run on a few
    /// SMs: sum those with `DeviceReduce`, which gives the same bits).
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

    /// The module of a sum of `T`: the reproducible kernels for float sums under `GpuToGpu`.
    fn sum_module<T: SumElement>(&self) -> Module {
        if self.determinism.reproducible_sum(T::ELEM) {
            Module::ReproSegments(T::ELEM)
        } else {
            Module::Segmented(Op::Sum, T::ELEM)
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
        self.run(
            self.sum_module::<T>(),
            input.into(),
            segments,
            out.into(),
            None,
        )
    }

    /// Writes the greatest element of each segment to `out[s]` and waits; NaN propagates; an empty segment
    /// gives −∞ (`MIN` for integers).
    pub fn max<'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, T>>,
    ) -> Result<()> {
        self.run(
            Module::Segmented(Op::Max, T::ELEM),
            input.into(),
            segments,
            out.into(),
            None,
        )
    }

    /// Writes the least element of each segment to `out[s]` and waits; NaN propagates; an empty segment
    /// gives +∞ (`MAX` for integers).
    pub fn min<'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, T>>,
    ) -> Result<()> {
        self.run(
            Module::Segmented(Op::Min, T::ELEM),
            input.into(),
            segments,
            out.into(),
            None,
        )
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
        self.run(
            Module::Segmented(Op::ArgMax, T::ELEM),
            input.into(),
            segments,
            out.into(),
            None,
        )
    }

    /// As [`argmax`](Self::argmax), for the least element (empty: index `u64::MAX`, value +∞ or `MAX`).
    pub fn argmin<'a, 'b, T: OrdElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, Indexed<T>>>,
    ) -> Result<()> {
        self.run(
            Module::Segmented(Op::ArgMin, T::ELEM),
            input.into(),
            segments,
            out.into(),
            None,
        )
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
        self.run(
            Module::Softmax(T::SAMPLE),
            input.into(),
            segments,
            out.into(),
            None,
        )
    }

    /// Enqueues [`sum`](Self::sum) on `stream` and returns without waiting. Bad offsets are not reported
    /// (their segments reduce as empty).
    ///
    /// # Safety
    /// `input`, the offsets and `out` must stay allocated, and `input` and the offsets unmodified, until
    /// `stream` has passed this work.
    pub unsafe fn sum_async<'s, 'a, 'b, T: SumElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, T::Acc>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let module = self.sum_module::<T>();
        self.run(
            module,
            input.into(),
            segments,
            out.into(),
            Some(stream.into()),
        )
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
        let module = Module::Segmented(Op::Max, T::ELEM);
        self.run(
            module,
            input.into(),
            segments,
            out.into(),
            Some(stream.into()),
        )
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
        let module = Module::Segmented(Op::Min, T::ELEM);
        self.run(
            module,
            input.into(),
            segments,
            out.into(),
            Some(stream.into()),
        )
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
        let module = Module::Segmented(Op::ArgMax, T::ELEM);
        self.run(
            module,
            input.into(),
            segments,
            out.into(),
            Some(stream.into()),
        )
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
        let module = Module::Segmented(Op::ArgMin, T::ELEM);
        self.run(
            module,
            input.into(),
            segments,
            out.into(),
            Some(stream.into()),
        )
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
        let module = Module::Softmax(T::SAMPLE);
        self.run(
            module,
            input.into(),
            segments,
            out.into(),
            Some(stream.into()),
        )
    }

    /// Checks the arguments and enqueues `module`'s reduction: on `stream`, or (`None`) on the handle's
    /// stream, waiting for it and reporting bad offsets. The one place streams are chosen.
    fn run<T: Element, Acc: DeviceCopy>(
        &mut self,
        module: Module,
        input: DeviceView<'_, T>,
        segments: Segments<'_>,
        out: DeviceViewMut<'_, Acc>,
        stream: Option<StreamRef<'_>>,
    ) -> Result<()> {
        let _current = self.gpu.make_current()?;
        let [begin_home, end_home] = segments.homes();
        let homes = [input.home(), out.home(), begin_home, end_home];
        let input_span = Span::of_view(&self.gpu, input, "input")?;
        let layout =
            segments.layout(input_span.len, |v, what| Span::of_view(&self.gpu, v, what))?;
        let count = layout.count();
        if (out.len() as u64) < count {
            return Err(Error::InvalidArgument(format!(
                "the output holds {} results but there are {count} segments",
                out.len()
            )));
        }
        let out = Span::of_view(&self.gpu, out.as_view().slice(..count as usize), "output")?;
        input_span.disjoint(&out, "input", "output")?;
        if let Layout::Offsets { begin, end, .. } = layout {
            begin.disjoint(&out, "begin offsets", "output")?;
            end.disjoint(&out, "end offsets", "output")?;
        }
        let blocking = stream.is_none();
        let stream = stream.unwrap_or(StreamRef::from(&*self.stream));
        // SAFETY: the views borrow live memory (blocking calls wait below; async callers keep it alive per
        // their contract); rows were checked to lie inside the input, and `out` holds `count` results.
        stream::ordered(&homes, stream, || unsafe {
            segmented::enqueue(
                &self.gpu,
                &mut self.scratch,
                module,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets check of a call, for tests whose segments are rows (or fail before it).
    fn rows_only(_: DeviceView<'_, u64>, _: &str) -> Result<Span<u64>> {
        unreachable!("rows need no device check")
    }

    /// The address checks of a call's offsets without the device check (no GPU here).
    fn addresses_only(v: DeviceView<'_, u64>, what: &str) -> Result<Span<u64>> {
        Span::aligned(v.as_raw(), v.len() as u64, what)
    }

    fn invalid(r: Result<Layout>) -> String {
        match r {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn rows_must_lie_inside_the_input() {
        let l = Segments::rows(3, 5, 8).layout(21, rows_only).unwrap();
        assert!(matches!(
            l,
            Layout::Rows {
                count: 3,
                len: 5,
                stride: 8
            }
        ));
        assert!(invalid(Segments::rows(3, 5, 8).layout(20, rows_only)).contains("past the input"));
        assert!(Segments::fixed(4, 16).layout(64, rows_only).is_ok());
        assert!(invalid(Segments::fixed(4, 16).layout(63, rows_only)).contains("past"));
    }

    #[test]
    fn stride_below_cols_is_refused() {
        assert!(invalid(Segments::rows(2, 5, 4).layout(100, rows_only)).contains("stride"));
    }

    #[test]
    fn empty_layouts_are_fine() {
        assert_eq!(
            Segments::rows(0, 5, 8)
                .layout(0, rows_only)
                .unwrap()
                .count(),
            0
        );
        assert_eq!(
            Segments::rows(7, 0, 0)
                .layout(0, rows_only)
                .unwrap()
                .count(),
            7
        );
        assert_eq!(
            Segments::fixed(0, 0).layout(0, rows_only).unwrap().count(),
            0
        );
    }

    #[test]
    fn overflowing_shapes_are_refused_not_wrapped() {
        let big = usize::MAX / 2 + 1;
        assert!(
            invalid(Segments::rows(3, 1, big).layout(u64::MAX, rows_only)).contains("overflow")
        );
        assert!(invalid(Segments::fixed(big, 4).layout(u64::MAX, rows_only)).contains("overflow"));
        assert!(
            invalid(Segments::rows(2, usize::MAX, usize::MAX).layout(u64::MAX, rows_only))
                .contains("overflow")
        );
    }

    #[test]
    fn offsets_need_one_begin_and_one_end_per_segment() {
        // SAFETY: never dereferenced; these tests only check lengths and addresses.
        let (b, e) = unsafe {
            (
                DeviceView::<u64>::from_raw_parts(0x1000, 3),
                DeviceView::<u64>::from_raw_parts(0x2000, 4),
            )
        };
        assert!(
            invalid(Segments::offsets(b, e).layout(10, addresses_only)).contains("begin offsets")
        );
        let l = Segments::offsets(b, e.slice(1..))
            .layout(10, addresses_only)
            .unwrap();
        assert_eq!(l.count(), 3);
        // SAFETY: as above; misaligned on purpose.
        let odd = unsafe { DeviceView::<u64>::from_raw_parts(0x1004, 3) };
        assert!(invalid(Segments::offsets(odd, b).layout(10, addresses_only)).contains("aligned"));
    }
}
