//! [`DeviceHistogram`]: device-wide histograms with evenly spaced bins ([`EvenBins`]), and the 256-bin byte
//! histogram. Each block counts into private copies in shared memory (one per lane when they fit) and merges
//! them with one atomic per non-empty bin; histograms too large for shared memory count with global atomics.
use cust::memory::{DeviceBuffer, DeviceCopy};
use cust::stream::Stream;
use reduce_contract::Sample;
use reduce_contract::layout::MAX_SHARED_BINS;

use crate::dispatch::histogram::Plan;
use crate::dispatch::{self, call::Call};
use crate::driver;
use crate::error::{Error, Result};
use crate::gpu::{Gpu, InContext};
use crate::half::{BF16, F16};
use crate::stream::StreamRef;
use crate::view::{DeviceView, DeviceViewMut};

mod sealed {
    /// The contract's name of a sample type.
    pub trait Sample {
        const SAMPLE: reduce_contract::Sample;
    }

    pub trait Counter {
        /// Whether the counters are 64-bit (they pick the kernel).
        const WIDE: bool;
    }
}

/// Sample types of [`DeviceHistogram::even`]: `f32`, [`F16`] and [`BF16`]. 16-bit samples are widened
/// exactly to f32 and binned like f32 samples.
pub trait HistogramSample:
    DeviceCopy + Copy + Send + Sync + std::fmt::Debug + 'static + sealed::Sample
{
    /// The sample's value as f32 (exact).
    fn to_f32(self) -> f32;
}

macro_rules! samples {
    ($($t:ty => $sample:ident, |$x:ident| $to_f32:expr;)*) => {$(
        impl sealed::Sample for $t {
            const SAMPLE: Sample = Sample::$sample;
        }
        impl HistogramSample for $t {
            fn to_f32(self) -> f32 {
                let $x = self;
                $to_f32
            }
        }
    )*};
}
samples! {
    f32 => F32, |x| x;
    F16 => F16, |x| x.to_f32();
    BF16 => BF16, |x| x.to_f32();
}

/// Bin counter types: `u32`, or `u64` for inputs of more than `u32::MAX` samples (a bin could overflow a
/// `u32`, so such calls with `u32` counters are refused). Pick it with the result type:
/// `let h: Vec<u64> = hist.even(&x, 100, 0.0, 1.0)?;`.
pub trait Counter:
    DeviceCopy + Copy + Default + PartialEq + std::fmt::Debug + Into<u64> + 'static + sealed::Counter
{
    /// The largest count the type holds.
    const MAX: u64;
}

impl sealed::Counter for u32 {
    const WIDE: bool = false;
}
impl Counter for u32 {
    const MAX: u64 = u32::MAX as u64;
}
impl sealed::Counter for u64 {
    const WIDE: bool = true;
}
impl Counter for u64 {
    const MAX: u64 = u64::MAX;
}

/// `bins` evenly spaced bins over the half-open range `[lower, upper)`, checked and ready to use.
///
/// The bin of a sample `x` is computed as CUB's `DeviceHistogram::HistogramEven` does for floating-point
/// samples (its `ScaleTransform`), every step a correctly rounded f32 operation:
///
/// ```text
/// scale = (bins as f32) / (upper - lower)                    // once, here on the host
/// bin(x) = if lower <= x && x < upper { min(⌊(x - lower) · scale⌋, bins - 1) } else { dropped }
/// ```
///
/// so the device and [`cpu::histogram_even`](crate::cpu::histogram_even) agree bit for bit. Consequences:
/// `x == lower` is bin 0; `x == upper` is dropped; NaN and ±∞ are dropped; a sample whose product rounds up
/// to `bins` (possible just below `upper`) is clamped into the last bin, where CUB would count out of range.
/// Bin edges are therefore those of the f32 arithmetic, not the exact reals `lower + i · (upper − lower) /
/// bins`: a sample within an ulp or so of an edge may land on either side of it. (CUB's integer-sample path,
/// `(x − lower) · bins / (upper − lower)` in integer arithmetic, does not apply: samples here are floats;
/// bytes use [`DeviceHistogram::even_u8`]. For 16-bit samples CUB computes in half precision on sm_53+; here
/// they are widened to f32 exactly and binned like f32.)
///
/// ```
/// use reduce_host::EvenBins;
/// let b = EvenBins::new(4, 0.0, 1.0)?;
/// assert_eq!(b.bin(0.0), Some(0));
/// assert_eq!(b.bin(0.7), Some(2));
/// assert_eq!(b.bin(1.0), None);
/// assert!(EvenBins::new(0, 0.0, 1.0).is_err());
/// # Ok::<(), reduce_host::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvenBins {
    bins: u32,
    lower: f32,
    upper: f32,
    scale: f32,
}

impl EvenBins {
    /// Most bins: 2^24, the last bin count whose every bin index f32 holds exactly, so the product
    /// `(x - lower) · scale` can still name each bin.
    pub const MAX_BINS: usize = 1 << 24;

    /// Checks the arguments: `1 <= bins <= MAX_BINS`, finite bounds, `lower < upper`, and a range and scale
    /// that f32 can represent (`upper - lower` and `bins / (upper - lower)` finite). Touches no device.
    pub fn new(bins: usize, lower: f32, upper: f32) -> Result<Self> {
        let invalid = |m: String| Err(Error::InvalidArgument(m));
        if bins == 0 {
            return invalid("a histogram needs at least 1 bin, got bins = 0".into());
        }
        if bins > Self::MAX_BINS {
            return invalid(format!(
                "bins = {bins} exceeds the maximum of {} (2^24: f32 bin arithmetic cannot address more)",
                Self::MAX_BINS
            ));
        }
        let bins = bins as u32;
        if !lower.is_finite() || !upper.is_finite() {
            return invalid(format!(
                "histogram bounds must be finite, got [{lower}, {upper})"
            ));
        }
        if lower >= upper {
            return invalid(format!(
                "the lower bound must be below the upper bound, got [{lower}, {upper})"
            ));
        }
        let range = upper - lower;
        if !range.is_finite() {
            return invalid(format!(
                "upper - lower overflows f32 for [{lower}, {upper})"
            ));
        }
        let scale = bins as f32 / range;
        if !scale.is_finite() {
            return invalid(format!(
                "{bins} bins over [{lower}, {upper}) are narrower than f32 can scale to"
            ));
        }
        Ok(EvenBins {
            bins,
            lower,
            upper,
            scale,
        })
    }

    /// Number of bins.
    pub fn bins(&self) -> usize {
        self.bins as usize
    }

    /// Inclusive lower bound.
    pub fn lower(&self) -> f32 {
        self.lower
    }

    /// Exclusive upper bound.
    pub fn upper(&self) -> f32 {
        self.upper
    }

    /// `bins / (upper - lower)`, rounded to f32.
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// The dispatch's plan for counting `sample`s in these bins.
    fn plan(&self, sample: Sample, wide: bool) -> Plan {
        Plan::even(
            sample,
            wide,
            self.bins,
            [self.lower, self.upper, self.scale],
        )
    }

    /// The bin of `x`, or `None` if it is dropped (the formula above).
    pub fn bin(&self, x: f32) -> Option<usize> {
        if x >= self.lower && x < self.upper {
            // `as` saturates, as the device's `cvt.rzi.u32.f32` does; the product is at most bins · (1 + 2ε).
            Some((((x - self.lower) * self.scale) as u32).min(self.bins - 1) as usize)
        } else {
            None
        }
    }
}

/// Device-wide histograms on `cust` device memory.
///
/// The handle owns a stream and the device buffer blocking calls count into, so repeated calls neither
/// allocate (unless the bin count grows) nor reload. Blocking methods return the counts; `*_async` methods
/// write them into device memory on a stream you pass and return at once. Counts are [`u32`] or [`u64`] (see
/// [`Counter`]), chosen by the result type.
///
/// ```no_run
/// use cust::memory::DeviceBuffer;
/// use reduce_host::DeviceHistogram;
///
/// let mut hist = DeviceHistogram::new()?;
/// let x = DeviceBuffer::from_slice(&[0.1f32, 0.5, 0.55, 0.99, 1.0, f32::NAN])?;
/// let counts: Vec<u32> = hist.even(&x, 4, 0.0, 1.0)?; // [0, 0.25) [0.25, 0.5) [0.5, 0.75) [0.75, 1)
/// assert_eq!(counts, [1, 0, 2, 1]); // 1.0 and NaN are outside [0, 1)
///
/// let bytes = DeviceBuffer::from_slice(&[7u8, 7, 255])?;
/// let counts: Vec<u64> = hist.even_u8(&bytes)?;
/// assert_eq!((counts[7], counts[255]), (2, 1));
/// # Ok::<(), reduce_host::Error>(())
/// ```
pub struct DeviceHistogram {
    counts: InContext<DeviceBuffer<u64>>,
    stream: InContext<Stream>,
    // Declared last: the context outlives the buffer and stream above.
    gpu: Gpu,
}

handle_basics!(DeviceHistogram);

impl DeviceHistogram {
    /// Most bins counted in shared memory: their private `u32` copy fits the 48 KiB of dynamic shared memory a
    /// block gets without opting in. Larger histograms count with global atomics (correct, slower).
    pub const MAX_SHARED_BINS: usize = MAX_SHARED_BINS as usize;

    /// A handle on an opened device; several handles can share one [`Gpu`].
    pub fn with_gpu(gpu: &Gpu) -> Result<Self> {
        // The device's context, current while the handle's buffers are allocated in it.
        let _current = gpu.make_current()?;
        let stream = gpu.handle_stream()?;
        Ok(DeviceHistogram {
            counts: InContext::new(gpu, driver::zeroed(256)?),
            stream,
            gpu: gpu.clone(),
        })
    }

    /// Counts the samples of `input` in `bins` evenly spaced bins over `[lower, upper)` (see [`EvenBins`] for
    /// the exact bin of each sample); NaN, ±∞ and samples outside the range are not counted.
    ///
    /// Errors with [`Error::InvalidArgument`] for a bad range (as [`EvenBins::new`]), before touching the
    /// device, and when `C = u32` but `input` has more than `u32::MAX` samples.
    pub fn even<'a, T: HistogramSample, C: Counter>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        bins: usize,
        lower: f32,
        upper: f32,
    ) -> Result<Vec<C>> {
        let plan = EvenBins::new(bins, lower, upper)?.plan(T::SAMPLE, C::WIDE);
        self.blocking::<T, C>(input.into(), plan)
    }

    /// Enqueues [`even`](Self::even) on `stream`, writing the counts to `out[..bins]` (zeroed first; the rest
    /// of `out` is untouched), and returns without waiting.
    ///
    /// # Safety
    /// `input` and `out` must stay allocated, `input` unmodified and `out[..bins]` otherwise unused, until
    /// `stream` has passed this work.
    pub unsafe fn even_async<'s, 'a, 'b, T: HistogramSample, C: Counter>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        bins: usize,
        lower: f32,
        upper: f32,
        out: impl Into<DeviceViewMut<'b, C>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        let plan = EvenBins::new(bins, lower, upper)?.plan(T::SAMPLE, C::WIDE);
        self.enqueue_into::<T, C>(input.into(), plan, out.into(), stream.into())
    }

    /// Counts each byte value of `input`: 256 bins, bin `b` for byte `b` (the same as [`even`](Self::even)
    /// with 256 bins over `[0, 256)` would give for the bytes as f32). The fast path: 16 bytes per load, and
    /// one private copy of the counters per lane, so a warp's shared atomics never collide and skewed data
    /// counts as fast as uniform data.
    ///
    /// Errors with [`Error::InvalidArgument`] when `C = u32` but `input` has more than `u32::MAX` bytes.
    pub fn even_u8<'a, C: Counter>(
        &mut self,
        input: impl Into<DeviceView<'a, u8>>,
    ) -> Result<Vec<C>> {
        self.blocking::<u8, C>(input.into(), Plan::bytes(C::WIDE))
    }

    /// Enqueues [`even_u8`](Self::even_u8) on `stream`, writing the counts to `out[..256]` (zeroed first), and
    /// returns without waiting.
    ///
    /// # Safety
    /// As [`even_async`](Self::even_async).
    pub unsafe fn even_u8_async<'s, 'a, 'b, C: Counter>(
        &mut self,
        input: impl Into<DeviceView<'a, u8>>,
        out: impl Into<DeviceViewMut<'b, C>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()> {
        self.enqueue_into::<u8, C>(
            input.into(),
            Plan::bytes(C::WIDE),
            out.into(),
            stream.into(),
        )
    }

    /// Refuses `u32` counters for inputs whose bins could overflow them.
    fn check_capacity<C: Counter>(n: usize) -> Result<()> {
        if n as u64 > C::MAX {
            return Err(Error::InvalidArgument(format!(
                "{n} samples could overflow a {}-bit bin counter; count in u64",
                std::mem::size_of::<C>() * 8
            )));
        }
        Ok(())
    }

    /// Runs `plan` on the handle's stream into the handle's buffer and reads the counts back.
    fn blocking<T: DeviceCopy, C: Counter>(
        &mut self,
        input: DeviceView<'_, T>,
        plan: Plan,
    ) -> Result<Vec<C>> {
        Self::check_capacity::<C>(input.len())?;
        let mut call = Call::new(&self.gpu)?;
        let input = call.input(input, "input")?;
        call.own();
        let bins = plan.bins as usize;
        if self.counts.len() < bins {
            // Blocking calls wait for their work, so nothing in flight uses the old buffer.
            self.counts = InContext::new(&self.gpu, driver::zeroed(bins)?);
        }
        let out = self.counts.as_device_ptr().as_raw();
        let stream = StreamRef::from(&*self.stream);
        // SAFETY: `counts` holds at least `bins` u64, so room for `bins` counters of `C`; blocking work ends
        // before the buffer is reused or freed.
        call.enqueue(stream, || unsafe {
            dispatch::histogram::enqueue::<T, C>(&self.gpu, input, &plan, out as *mut C, stream)
        })?;
        let mut counts = vec![C::default(); bins];
        // SAFETY: the kernels just enqueued on `stream` write `bins` counters of `C` at `out`.
        unsafe { driver::read_back_slice(out, &mut counts, stream)? };
        Ok(counts)
    }

    fn enqueue_into<T: DeviceCopy, C: Counter>(
        &self,
        input: DeviceView<'_, T>,
        plan: Plan,
        out: DeviceViewMut<'_, C>,
        stream: StreamRef<'_>,
    ) -> Result<()> {
        if out.len() < plan.bins as usize {
            return Err(Error::InvalidArgument(format!(
                "the output slice holds {} counters but the histogram has {} bins",
                out.len(),
                plan.bins
            )));
        }
        Self::check_capacity::<C>(input.len())?;
        let mut call = Call::new(&self.gpu)?;
        let input = call.input(input, "input")?;
        let out = call.output(&out, "output")?;
        // SAFETY: `out` is a live device slice of at least `bins` counters; the caller keeps it alive.
        call.enqueue(stream, || unsafe {
            dispatch::histogram::enqueue::<T, C>(&self.gpu, input, &plan, out.as_mut_ptr(), stream)
        })
    }
}

impl Drop for DeviceHistogram {
    fn drop(&mut self) {
        // The fields free device memory: make their context current first. Nothing to report a failure to.
        let _current = self.gpu.make_current();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<EvenBins>) -> String {
        match r {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }

    #[test]
    fn zero_bins_is_an_error() {
        assert!(message(EvenBins::new(0, 0.0, 1.0)).contains("bins = 0"));
    }

    #[test]
    fn empty_or_reversed_range_is_an_error() {
        assert!(message(EvenBins::new(4, 1.0, 1.0)).contains("below the upper bound"));
        assert!(message(EvenBins::new(4, 2.0, -1.0)).contains("below the upper bound"));
    }

    #[test]
    fn non_finite_bounds_are_errors() {
        for (lo, hi) in [
            (f32::NAN, 1.0),
            (0.0, f32::NAN),
            (f32::NEG_INFINITY, 0.0),
            (0.0, f32::INFINITY),
        ] {
            assert!(
                message(EvenBins::new(4, lo, hi)).contains("finite"),
                "{lo} {hi}"
            );
        }
    }

    #[test]
    fn ranges_f32_cannot_scale_are_errors() {
        assert!(message(EvenBins::new(4, -3.0e38, 3.0e38)).contains("overflows"));
        let tiny = f32::from_bits(1); // the least subnormal: 10 bins over it overflow the scale
        assert!(message(EvenBins::new(10, 0.0, tiny)).contains("narrower"));
    }

    #[test]
    fn too_many_bins_is_an_error() {
        assert!(EvenBins::new(EvenBins::MAX_BINS, 0.0, 1.0).is_ok());
        assert!(message(EvenBins::new(EvenBins::MAX_BINS + 1, 0.0, 1.0)).contains("exceeds"));
        assert!(message(EvenBins::new(u32::MAX as usize, 0.0, 1.0)).contains("2^24"));
    }

    #[test]
    fn valid_ranges_keep_their_parameters() {
        let b = EvenBins::new(10, -1.0, 1.0).unwrap();
        assert_eq!(
            (b.bins(), b.lower(), b.upper(), b.scale()),
            (10, -1.0, 1.0, 5.0)
        );
        assert!(EvenBins::new(EvenBins::MAX_BINS, -1.0e30, 1.0e30).is_ok());
    }

    #[test]
    fn u32_counters_refuse_inputs_that_could_overflow() {
        assert!(DeviceHistogram::check_capacity::<u32>(u32::MAX as usize).is_ok());
        if let Some(n) = (u32::MAX as usize).checked_add(1) {
            assert!(DeviceHistogram::check_capacity::<u32>(n).is_err());
            assert!(DeviceHistogram::check_capacity::<u64>(n).is_ok());
        }
    }
}
