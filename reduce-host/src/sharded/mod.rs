//! Reductions over data sharded across GPUs: [`ShardedReduce`], one per rank, over a [`Communicator`].
//!
//! Each rank reduces its own shard with this library's kernels; the communicator combines the ranks'
//! partial results, and every rank returns the result one GPU would give for the concatenated shards
//! (rank 0's first, then rank 1's, …): the same global indices, the same tie-breaking, the same sorted
//! top-k and, with [`Determinism::GpuToGpu`], the same bits for float sums.
//!
//! ```no_run
//! # fn main() -> reduce_host::Result<()> {
//! use reduce_host::cust::memory::DeviceBuffer;
//! use reduce_host::sharded::{LocalCommunicator, ShardedReduce};
//! use reduce_host::Gpu;
//!
//! // One thread per GPU, one rank each (with NCCL: `NcclCommunicator::group` or `from_rank`).
//! let comms = LocalCommunicator::group(2);
//! let results = std::thread::scope(|s| {
//!     let ranks: Vec<_> = comms
//!         .into_iter()
//!         .enumerate()
//!         .map(|(rank, comm)| {
//!             s.spawn(move || -> reduce_host::Result<_> {
//!                 let gpu = Gpu::with_device(rank as u32)?;
//!                 let mut sharded = ShardedReduce::new(&gpu, comm)?;
//!                 let shard = DeviceBuffer::from_slice(&[rank as f32; 1000])?;
//!                 Ok((sharded.sum(&shard)?, sharded.argmax(&shard)?))
//!             })
//!         })
//!         .collect();
//!     ranks.into_iter().map(|r| r.join().unwrap()).collect::<Vec<_>>()
//! });
//! for r in results {
//!     let (sum, best) = r?;
//!     assert_eq!(sum, 1000.0);
//!     assert_eq!(best.map(|b| b.index), Some(1000)); // rank 1's first element
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Collectives
//! Every call is collective: each rank calls the same method with the same parameters (k, bins, rows)
//! on its own shard (of any length, empty included). A call first exchanges a fixed-size record per rank
//! (what the call is, its element type and parameters, the shard's length, the GPU's UUID, and results of
//! a few bytes: a sum, an argmax, the statistics), so a scalar result costs one all-gather. Top-k and
//! histograms then exchange their candidates or counts; the reproducible sum its chunks' partials.
//!
//! # Errors
//! Ranks that disagree (another call, element type or parameter, a communicator of another size, two ranks
//! on one GPU) get the same [`Error::InvalidArgument`] on every rank, from
//! the first exchange, before any data moves. A rank whose own part fails (a bad view, say) returns its
//! error and still takes part in that exchange, so the others return
//! [`Error::Collective`] instead of waiting for it. A collective that fails or
//! stalls returns [`Error::Collective`] after the communicator's timeout.
mod communicator;
mod merge;
#[cfg(feature = "nccl")]
mod nccl;
mod record;

use cust::memory::DeviceBuffer;
use reduce_contract::builtin::SumAcc;
use reduce_contract::stats::Summary;

pub use communicator::{Communicator, LocalCommunicator};
pub(crate) use merge::{ChunkSplit, ReproParts};
#[cfg(feature = "nccl")]
pub use nccl::{NcclCommunicator, NcclId};
use record::{CallKind, Header};

use crate::determinism::Determinism;
use crate::element::{Element, Indexed, SumElement};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::histogram::{DeviceHistogram, HistogramSample};
use crate::reduce::DeviceReduce;
use crate::segments::Segments;
use crate::stats::{StatElement, Stats};
use crate::topk::{DeviceTopK, SEGMENT_K_MAX, TopKElement};
use crate::view::{DeviceView, DeviceViewMut};

/// One rank of a sharded reduction: this GPU's handles and the communicator to the other ranks. Every
/// method is collective (see the [module docs](self)).
pub struct ShardedReduce<C: Communicator> {
    comm: C,
    reduce: DeviceReduce,
    topk: DeviceTopK,
    histogram: DeviceHistogram,
    /// Local top-k results (values, indices), grown to the largest call.
    topk_out: Option<(DeviceBuffer<u8>, DeviceBuffer<u64>)>,
    gpu: Gpu,
}

/// The elements a sharded sum takes: those of [`SumElement`] (every element type), whose sums it can
/// add across ranks and, for floats under [`Determinism::GpuToGpu`], take reproducibly.
pub trait ShardSum: SumElement<Acc: SumAcc> {
    /// The reproducible sum of the shards, if `Self` is a float and the handle asks for it.
    #[doc(hidden)]
    fn reproducible<C: Communicator>(
        sharded: &mut ShardedReduce<C>,
        shard: DeviceView<'_, Self>,
    ) -> Option<Result<Self::Acc>>;
}

macro_rules! shard_sums {
    (floats: $($f:ty),*; integers: $($i:ty),*) => {
        $(impl ShardSum for $f {
            fn reproducible<C: Communicator>(
                sharded: &mut ShardedReduce<C>,
                shard: DeviceView<'_, Self>,
            ) -> Option<Result<Self::Acc>> {
                let header = sharded.header::<$f>(CallKind::ReproducibleSum, shard.len(), [0; 3]);
                let reduce = &mut sharded.reduce;
                (reduce.determinism() == Determinism::GpuToGpu).then(|| {
                    merge::reproducible_sum::<$f>(&mut sharded.comm, &header, |split| {
                        reduce.reproducible_parts(shard, split)
                    })
                })
            }
        })*
        $(impl ShardSum for $i {
            fn reproducible<C: Communicator>(
                _: &mut ShardedReduce<C>,
                _: DeviceView<'_, Self>,
            ) -> Option<Result<Self::Acc>> {
                None
            }
        })*
    };
}
shard_sums!(floats: f32, f64, crate::F16, crate::BF16; integers: i32, u32, i64, u64, u8);

impl<C: Communicator> ShardedReduce<C> {
    /// This rank's handle on `gpu`, talking to the others through `comm`.
    pub fn new(gpu: &Gpu, comm: C) -> Result<Self> {
        Ok(ShardedReduce {
            comm,
            reduce: DeviceReduce::with_gpu(gpu)?,
            topk: DeviceTopK::with_gpu(gpu)?,
            histogram: DeviceHistogram::with_gpu(gpu)?,
            topk_out: None,
            gpu: gpu.clone(),
        })
    }

    /// This rank's number.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// How many ranks there are.
    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// The communicator.
    pub fn communicator(&mut self) -> &mut C {
        &mut self.comm
    }

    /// This rank's device-wide handle (its settings: combine, policy).
    pub fn local(&mut self) -> &mut DeviceReduce {
        &mut self.reduce
    }

    /// How float sums are combined; as [`DeviceReduce::set_determinism`]. Set it alike on every rank.
    /// With [`Determinism::GpuToGpu`] a sharded float sum has the bits of one GPU's reproducible sum of
    /// the concatenated shards, for any shard lengths.
    pub fn set_determinism(&mut self, determinism: Determinism) {
        self.reduce.set_determinism(determinism);
    }

    fn header<T: Element>(&self, call: CallKind, len: usize, params: [u64; 3]) -> Header {
        Header {
            call,
            elem: T::ELEM,
            size: self.comm.size() as u32,
            len: len as u64,
            params,
            uuid: self.gpu.info().uuid,
            failed: false,
        }
    }

    /// The sum of all shards: each rank's sum, added in rank order (f32 sums in f32, integers wrapping
    /// modulo 2^64, as [`DeviceReduce::sum`]). Under [`Determinism::GpuToGpu`], float sums are the
    /// reproducible sum of the concatenated shards, bit for bit.
    pub fn sum<'a, T: ShardSum>(&mut self, shard: impl Into<DeviceView<'a, T>>) -> Result<T::Acc> {
        let shard = shard.into();
        if let Some(sum) = T::reproducible(self, shard) {
            return sum;
        }
        let header = self.header::<T>(CallKind::Sum, shard.len(), [0; 3]);
        let local = self.reduce.sum(shard);
        merge::sum(&mut self.comm, &header, local)
    }

    /// The greatest element of all shards and its global index (rank `r`'s element `i` is at `i` plus the
    /// lengths of ranks `0..r`); ties go to the smallest global index, NaN wins as in
    /// [`DeviceReduce::argmax`]. `None` when every shard is empty.
    pub fn argmax<'a, T: TopKElement>(
        &mut self,
        shard: impl Into<DeviceView<'a, T>>,
    ) -> Result<Option<Indexed<T>>>
    where
        Indexed<T>: Default,
    {
        self.best(shard.into(), true)
    }

    /// The least element of all shards and its global index; as [`argmax`](Self::argmax).
    pub fn argmin<'a, T: TopKElement>(
        &mut self,
        shard: impl Into<DeviceView<'a, T>>,
    ) -> Result<Option<Indexed<T>>>
    where
        Indexed<T>: Default,
    {
        self.best(shard.into(), false)
    }

    fn best<T: TopKElement>(
        &mut self,
        shard: DeviceView<'_, T>,
        largest: bool,
    ) -> Result<Option<Indexed<T>>>
    where
        Indexed<T>: Default,
    {
        let call = if largest {
            CallKind::ArgMax
        } else {
            CallKind::ArgMin
        };
        let header = self.header::<T>(call, shard.len(), [0; 3]);
        let local = if largest {
            self.reduce.argmax(shard)
        } else {
            self.reduce.argmin(shard)
        };
        merge::best(&mut self.comm, &header, local, largest)
    }

    /// The `k` greatest elements of all shards with their global indices, greatest first, as one GPU's
    /// [`DeviceTopK::max_k`] gives them for the concatenated shards (ties: smaller index first; NaN above
    /// +∞). Each rank selects its own `min(k, len)` best; one all-gather brings every rank's candidates,
    /// and each rank merges them. `k` more than all shards hold is an
    /// [`Error::InvalidArgument`] on every rank.
    pub fn max_k<'a, T: TopKElement>(
        &mut self,
        shard: impl Into<DeviceView<'a, T>>,
        k: u64,
    ) -> Result<Vec<Indexed<T>>> {
        self.top_k(shard.into(), k, true)
    }

    /// The `k` least elements of all shards, least first; as [`max_k`](Self::max_k).
    pub fn min_k<'a, T: TopKElement>(
        &mut self,
        shard: impl Into<DeviceView<'a, T>>,
        k: u64,
    ) -> Result<Vec<Indexed<T>>> {
        self.top_k(shard.into(), k, false)
    }

    fn top_k<T: TopKElement>(
        &mut self,
        shard: DeviceView<'_, T>,
        k: u64,
        largest: bool,
    ) -> Result<Vec<Indexed<T>>> {
        let call = if largest {
            CallKind::MaxK
        } else {
            CallKind::MinK
        };
        let header = self.header::<T>(call, shard.len(), [k, 0, 0]);
        let local = self.local_top_k(shard, k.min(shard.len() as u64), largest);
        merge::top_k(&mut self.comm, &header, local, largest)
    }

    /// This rank's `k` best (`largest`, else least), sorted, to the host.
    fn local_top_k<T: TopKElement>(
        &mut self,
        shard: DeviceView<'_, T>,
        k: u64,
        largest: bool,
    ) -> Result<(Vec<T>, Vec<u64>)> {
        let n = usize::try_from(k).map_err(|_| Error::InvalidArgument("k too large".into()))?;
        if n == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let (values, indices) = topk_buffers::<T>(&mut self.topk_out, &self.gpu, n)?;
        if largest {
            self.topk.max_k(shard, k, values, indices)?;
        } else {
            self.topk.min_k(shard, k, values, indices)?;
        }
        self.read_top_k(n)
    }

    /// The first `n` local results, to the host.
    fn read_top_k<T: TopKElement>(&mut self, n: usize) -> Result<(Vec<T>, Vec<u64>)> {
        let _current = self.gpu.make_current()?;
        let (values, indices) = self.topk_out.as_ref().expect("allocated");
        let mut host_values = vec![T::default(); n];
        let mut host_indices = vec![0u64; n];
        let stream = crate::StreamRef::from(self.topk.stream());
        // SAFETY: the buffers hold at least `n` values and indices, written by the blocking top-k call
        // that returned before this.
        unsafe {
            crate::driver::copy_to_host(values.as_device_ptr().as_raw(), &mut host_values, stream)?;
            crate::driver::copy_to_host(
                indices.as_device_ptr().as_raw(),
                &mut host_indices,
                stream,
            )?;
        }
        Ok((host_values, host_indices))
    }

    /// The `k` greatest of every row over all ranks, each rank holding some columns of the same rows
    /// (a vocabulary shard of each row of logits, say): `rows · k` results, row by row, greatest first,
    /// with global column indices (rank `r`'s column `c` is `c` plus the columns of ranks `0..r`), as
    /// one GPU's [`DeviceTopK::segmented_max_k`] gives them for the concatenated columns. A row of fewer
    /// than `k` elements in all is padded with index `u64::MAX` and the least value.
    ///
    /// `segments` must be [`Segments::rows`] or [`Segments::fixed`] with the same row count on every rank;
    /// `k` at most [`SEGMENT_K_MAX`].
    pub fn row_max_k<'a, T: TopKElement>(
        &mut self,
        shard: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        k: u64,
    ) -> Result<Vec<Indexed<T>>> {
        self.row_top_k(shard.into(), segments, k, true)
    }

    /// The `k` least of every row over all ranks, least first; as [`row_max_k`](Self::row_max_k), padded
    /// with the greatest value.
    pub fn row_min_k<'a, T: TopKElement>(
        &mut self,
        shard: impl Into<DeviceView<'a, T>>,
        segments: Segments<'_>,
        k: u64,
    ) -> Result<Vec<Indexed<T>>> {
        self.row_top_k(shard.into(), segments, k, false)
    }

    fn row_top_k<T: TopKElement>(
        &mut self,
        shard: DeviceView<'_, T>,
        segments: Segments<'_>,
        k: u64,
        largest: bool,
    ) -> Result<Vec<Indexed<T>>> {
        let call = if largest {
            CallKind::RowMaxK
        } else {
            CallKind::RowMinK
        };
        let (rows, cols) = segments.rows_shape().map_or((0, 0), |(r, c, _)| (r, c));
        let header = self.header::<T>(call, cols as usize, [k, rows, 0]);
        let local = (|| {
            if segments.rows_shape().is_none() {
                return Err(Error::InvalidArgument(
                    "a sharded per-row top-k takes Segments::rows or Segments::fixed: each rank holds \
                     some columns of the same rows"
                        .into(),
                ));
            }
            if k > SEGMENT_K_MAX {
                return Err(Error::InvalidArgument(format!(
                    "k = {k} per row is more than {SEGMENT_K_MAX}"
                )));
            }
            let n = usize::try_from(rows * k)
                .map_err(|_| Error::InvalidArgument("rows · k too large".into()))?;
            if n == 0 {
                return Ok((Vec::new(), Vec::new()));
            }
            let (values, indices) = topk_buffers::<T>(&mut self.topk_out, &self.gpu, n)?;
            if largest {
                self.topk
                    .segmented_max_k(shard, segments, k, values, indices)?;
            } else {
                self.topk
                    .segmented_min_k(shard, segments, k, values, indices)?;
            }
            self.read_top_k(n)
        })();
        merge::row_top_k(&mut self.comm, &header, local, largest)
    }

    /// The histogram of all shards in `bins` even bins over `[lower, upper)`: each rank's counts (as
    /// [`DeviceHistogram::even`]), added by an all-reduce.
    pub fn histogram_even<'a, T: HistogramSample + Element>(
        &mut self,
        shard: impl Into<DeviceView<'a, T>>,
        bins: usize,
        lower: f32,
        upper: f32,
    ) -> Result<Vec<u64>> {
        let shard = shard.into();
        let params = [bins as u64, lower.to_bits() as u64, upper.to_bits() as u64];
        let header = self.header::<T>(CallKind::Histogram, shard.len(), params);
        let local = self.histogram.even::<T, u64>(shard, bins, lower, upper);
        merge::histogram(&mut self.comm, &header, local)
    }

    /// Count, sum, mean, variance, min and max with their global indices over all shards, in one read of
    /// each: each rank's accumulator (as [`DeviceReduce::stats`]), merged by Chan's formula in rank order,
    /// so the bits repeat for the same shards.
    pub fn stats<'a, T: StatElement>(
        &mut self,
        shard: impl Into<DeviceView<'a, T>>,
    ) -> Result<Stats> {
        let shard = shard.into();
        let header = self.header::<T>(CallKind::Stats, shard.len(), [0; 3]);
        let local = self.reduce.statistic::<Summary<T>>(shard);
        merge::stats(&mut self.comm, &header, local).map(Stats::from)
    }
}

/// Device buffers for `n` local top-k results in `slot`, grown when too small.
fn topk_buffers<'s, T: TopKElement>(
    slot: &'s mut Option<(DeviceBuffer<u8>, DeviceBuffer<u64>)>,
    gpu: &Gpu,
    n: usize,
) -> Result<(DeviceViewMut<'s, T>, DeviceViewMut<'s, u64>)> {
    let bytes = n * size_of::<T>();
    if slot
        .as_ref()
        .is_none_or(|(v, i)| v.len() < bytes || i.len() < n)
    {
        let _current = gpu.make_current()?;
        *slot = None;
        *slot = Some((
            crate::driver::zeroed(bytes.max(1))?,
            crate::driver::zeroed(n.max(1))?,
        ));
    }
    let (values, indices) = slot.as_mut().expect("allocated");
    // SAFETY: the buffers hold at least `n` elements' bytes and `n` indices of device memory, borrowed
    // mutably from `slot` for the views' lifetime; every bit pattern is a valid element.
    unsafe {
        Ok((
            DeviceViewMut::from_raw_parts(values.as_device_ptr().as_raw(), n),
            DeviceViewMut::from_raw_parts(indices.as_device_ptr().as_raw(), n),
        ))
    }
}
