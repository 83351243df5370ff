//! Statistics in one read: [`DeviceReduce::stats`], [`var_mean`](DeviceReduce::var_mean),
//! [`aminmax`](DeviceReduce::aminmax), the norms, [`mean_square`](DeviceReduce::mean_square) and
//! [`logsumexp`](DeviceReduce::logsumexp), and per segment ([`DeviceSegmentedReduce::row_var_mean`] and
//! the others).
//!
//! Each is an operator of [`reduce_contract::stats`], a [`ReduceOp`](crate::custom::ReduceOp) written
//! exactly as a user's, whose kernels the library's images hold: it runs through the user operators'
//! dispatch (combine strategies, dependent launch, views and their checks, cudarc streams, 64-bit
//! lengths, any offset, the three segment layouts). Accumulators are f64 for every float input (f32, f64,
//! f16, bf16); runs of up to 4-byte elements are folded in f32 first, where those elements are exact.
//!
//! ```no_run
//! # fn main() -> reduce_host::Result<()> {
//! use cust::memory::DeviceBuffer;
//! let mut reduce = reduce_host::DeviceReduce::new()?;
//! let x = DeviceBuffer::from_slice(&[1.0f32, 4.0, -2.0, 5.0])?;
//! let s = reduce.stats(&x)?;
//! assert_eq!((s.count, s.mean), (4, 2.0));
//! assert_eq!(s.max.map(|m| m.index), Some(3));
//! let (var, mean) = reduce.var_mean(&x, 1.0)?; // the sample variance, torch's default
//! assert_eq!(mean, 2.0);
//! # let _ = var;
//! # Ok(())
//! # }
//! ```
pub use reduce_contract::stats::{
    AbsMax, AbsSum, ExpSum, Extrema, LogSumExp, MinMax, Moments, SquareSum, Squares, Statistic,
    Summary, SummaryAcc, Welford,
};

use crate::custom::{OpAcc, OpFamily, OpKernels};
use crate::dispatch::Source;
use crate::element::Element;
use crate::error::Result;
use crate::reduce::DeviceReduce;
use crate::segmented::DeviceSegmentedReduce;
use crate::segments::Segments;
use crate::stream::StreamRef;
use crate::view::{DeviceView, DeviceViewMut};
use crate::{BF16, F16};

/// The float elements the statistics read: f32, f64, [`F16`] and [`BF16`].
pub trait StatElement: Element + reduce_contract::op::Float {}

impl StatElement for f32 {}
impl StatElement for f64 {}
impl StatElement for F16 {}
impl StatElement for BF16 {}

/// An element and where it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Extremum {
    /// The value, as f64 (exact for every float input).
    pub value: f64,
    /// The index of its first occurrence.
    pub index: u64,
}

/// Every statistic of [`DeviceReduce::stats`], from one read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// How many elements.
    pub count: u64,
    /// Their sum, `count · mean` (0 for none).
    pub sum: f64,
    /// Their mean (NaN for none).
    pub mean: f64,
    /// The population variance, `M2 / count` (NaN for none); [`Stats::moments`] gives any correction.
    pub variance: f64,
    /// The least element (the first NaN if there is one, as `argmin`); `None` for no element.
    pub min: Option<Extremum>,
    /// The greatest element (the first NaN if there is one, as `argmax`); `None` for no element.
    pub max: Option<Extremum>,
    /// Count, mean and M2, for [`Moments::variance`] with another correction.
    pub moments: Moments,
}

impl From<SummaryAcc> for Stats {
    fn from(acc: SummaryAcc) -> Stats {
        let (min, max) = extremes(acc.extrema).unzip();
        let m = acc.moments;
        Stats {
            count: m.count(),
            sum: m.n * m.mean,
            mean: m.mean(),
            variance: m.variance(0.0),
            min,
            max,
            moments: m,
        }
    }
}

/// The least and greatest element of an accumulator that holds any.
fn extremes(e: Extrema) -> Option<(Extremum, Extremum)> {
    (!e.is_empty()).then_some((
        Extremum {
            value: e.min,
            index: e.argmin,
        },
        Extremum {
            value: e.max,
            index: e.argmax,
        },
    ))
}

impl DeviceReduce {
    /// The accumulator of the statistic `O` over `input` (its identity for an empty input), on the handle's
    /// stream, waiting for it.
    pub(crate) fn statistic<'a, O: Statistic>(
        &mut self,
        input: impl Into<DeviceView<'a, O::In>>,
    ) -> Result<O::Acc>
    where
        O::In: Element,
    {
        let ops = OpKernels::statistic::<O>(self.gpu(), OpFamily::Reduce)?;
        self.blocking_with(Source::User(&ops), input.into())
    }

    /// Count, sum, mean, variance, min and max with their indices, in one read and one launch chain.
    /// The variance is Welford's, merged by Chan's formula in a fixed order (the bits repeat run to run):
    /// within about 1e-6 relative of an f64 reference on `1e6 + U(0, 1)`. NaN propagates into the
    /// moments and wins min and max (the first NaN's index); an empty input gives count 0, mean NaN and
    /// no min or max.
    pub fn stats<'a, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<Stats> {
        Ok(self.statistic::<Summary<T>>(input)?.into())
    }

    /// `(variance, mean)` as torch's `var_mean`: `M2 / (count − correction)` (0 for the population
    /// variance, 1 for the sample variance); NaN where `count ≤ correction`.
    pub fn var_mean<'a, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        correction: f64,
    ) -> Result<(f64, f64)> {
        let m = self.statistic::<Welford<T>>(input)?;
        Ok((m.variance(correction), m.mean()))
    }

    /// The least and the greatest element with their first indices (NaN wins both); `None` when empty.
    pub fn aminmax<'a, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<Option<(Extremum, Extremum)>> {
        Ok(extremes(self.statistic::<MinMax<T>>(input)?))
    }

    /// Σ|x|.
    pub fn norm_l1<'a, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<f64> {
        self.statistic::<AbsSum<T>>(input)
    }

    /// `sqrt(Σx²)`, scaled so that it neither overflows nor underflows for any input.
    pub fn norm_l2<'a, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<f64> {
        Ok(self.statistic::<SquareSum<T>>(input)?.norm())
    }

    /// max |x| (the scale of an FP8 cast); NaN if any element is; 0 when empty.
    pub fn norm_inf<'a, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<f64> {
        let bits = self.statistic::<AbsMax<T>>(input)?;
        Ok(<AbsMax<T> as reduce_contract::op::ReduceOp>::finalize(bits))
    }

    /// `Σx² / n`, RMSNorm's statistic before its square root; NaN when empty.
    pub fn mean_square<'a, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<f64> {
        Ok(self.statistic::<SquareSum<T>>(input)?.mean_square())
    }

    /// `log Σ exp(x)` without overflow, by the online max-rescale recurrence; −∞ when empty.
    pub fn logsumexp<'a, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
    ) -> Result<f64> {
        Ok(self.statistic::<LogSumExp<T>>(input)?.logsumexp())
    }

    /// Enqueues the statistic `O` (one of [`reduce_contract::stats`]: `Summary<T>`, `Welford<T>`, …) of
    /// `input` into `out[0]` (its accumulator) on `stream` and returns without waiting; an empty input writes
    /// the operator's identity.
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn statistic_async<'s, 'a, 'b, O: Statistic>(
        &mut self,
        input: impl Into<DeviceView<'a, O::In>>,
        out: impl Into<DeviceViewMut<'b, OpAcc<O::Acc>>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()>
    where
        O::In: Element,
    {
        let ops = OpKernels::statistic::<O>(self.gpu(), OpFamily::Reduce)?;
        self.enqueue_into_with(Source::User(&ops), input.into(), out.into(), stream.into())
    }
}

impl DeviceSegmentedReduce {
    /// Writes each segment's accumulator of the statistic `O` to `out[s]` and waits (an empty segment gives
    /// the identity). Element indices (of `argmin`/`argmax`) are positions within the segment.
    pub fn statistic<'a, 'b, O: Statistic>(
        &mut self,
        input: impl Into<DeviceView<'a, O::In>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, OpAcc<O::Acc>>>,
    ) -> Result<()>
    where
        O::In: Element,
    {
        let ops = OpKernels::statistic::<O>(self.gpu(), OpFamily::Segmented)?;
        self.run(Source::User(&ops), input, segments, out, None)
    }

    /// Enqueues [`statistic`](Self::statistic) on `stream` and returns without waiting. Bad offsets are
    /// not reported (their segments reduce as empty).
    ///
    /// # Safety
    /// As [`sum_async`](Self::sum_async).
    pub unsafe fn statistic_async<'s, 'a, 'b, O: Statistic>(
        &mut self,
        input: impl Into<DeviceView<'a, O::In>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, OpAcc<O::Acc>>>,
        stream: impl Into<StreamRef<'s>>,
    ) -> Result<()>
    where
        O::In: Element,
    {
        let ops = OpKernels::statistic::<O>(self.gpu(), OpFamily::Segmented)?;
        self.run(
            Source::User(&ops),
            input,
            segments,
            out,
            Some(stream.into()),
        )
    }

    /// Each segment's [`Moments`] (count, mean, M2): LayerNorm's statistics, `mean` and
    /// `M2 / count` ([`Moments::mean`], [`Moments::variance`]).
    pub fn row_var_mean<'a, 'b, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, OpAcc<Moments>>>,
    ) -> Result<()> {
        self.statistic::<Welford<T>>(input, segments, out)
    }

    /// Each segment's [`Squares`]: RMSNorm's mean square ([`Squares::mean_square`]) and the L2 norm
    /// ([`Squares::norm`]).
    pub fn row_squares<'a, 'b, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, OpAcc<Squares>>>,
    ) -> Result<()> {
        self.statistic::<SquareSum<T>>(input, segments, out)
    }

    /// Each segment's [`ExpSum`] (max and Σexp(x − max)): its log-sum-exp is [`ExpSum::logsumexp`].
    pub fn row_logsumexp<'a, 'b, T: StatElement>(
        &mut self,
        input: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        out: impl Into<DeviceViewMut<'b, OpAcc<ExpSum>>>,
    ) -> Result<()> {
        self.statistic::<LogSumExp<T>>(input, segments, out)
    }
}
