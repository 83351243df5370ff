//! Device-wide reductions (sum, max, min, argmax, argmin) on [`cust`] device memory, with GPU kernels
//! written in Rust (`kernels-gpu`, compiled to PTX at build time and embedded here). [`DeviceHistogram`]
//! counts samples in evenly spaced bins.
//!
//! ```no_run
//! use reduce_host::cust::memory::DeviceBuffer;
//! use reduce_host::{DeviceReduce, DeviceView};
//!
//! let mut reduce = DeviceReduce::new()?; // opens GPU 0; kernels load on first use
//! let x = DeviceBuffer::from_slice(&[1.0f32, 5.0, -2.0, 5.0])?;
//! assert_eq!(reduce.sum(&x)?, 9.0);
//! let m = reduce.argmax(&x)?.expect("non-empty");
//! assert_eq!((m.index, m.value), (1, 5.0));
//! // Any sub-range works, aligned or not, and stays borrowed from `x`:
//! assert_eq!(reduce.min(DeviceView::from(&x).slice(1..))?, Some(-2.0));
//! # Ok::<(), reduce_host::Error>(())
//! ```
//!
//! # Memory
//! Handles take [`DeviceView`]s (read) and [`DeviceViewMut`]s (write), which borrow the buffers they
//! describe: `&buffer` and `&mut buffer` convert to them, and `.slice(..)` keeps the borrow. Safe code
//! therefore cannot pass freed memory, and an output that overlaps an input of the same call is an
//! [`Error::InvalidArgument`]. Memory the crate cannot see (cust's lifetime-free `DeviceSlice`, raw
//! addresses) goes through their `unsafe` constructors.
//!
//! # Element types
//! f32, f64, [`F16`], [`BF16`], i32, u32, i64, u64 and u8 for the reductions (device-wide and per segment),
//! compaction and top-k; histograms take f32, F16 and BF16 samples (and bytes), the statistics and
//! `softmax_stats` the float types they name. Sums of f16/bf16 return f32,
//! of signed integers i64 and of unsigned ones u64, wrapping on overflow (see [`SumElement`]); max, min,
//! argmax and argmin return the element type.
//!
//! # Semantics
//! - The sum of an empty slice is 0; max, min, argmax and argmin of an empty slice are `None`.
//! - argmax and argmin ties go to the smallest index.
//! - NaN propagates: if any element is NaN, max and min are NaN and argmax/argmin give the first NaN's index.
//! - -0.0 and +0.0 compare equal.
//! - Lengths and indices are 64-bit: slices of more than 2^32 elements work.
//!
//! # Determinism
//! With [`Combine::Auto`] (the default), [`Combine::TwoPass`] and [`Combine::LastBlock`] every reduction
//! combines values in a tree fixed by the input's length and address alignment and the device, so
//! floating-point sums give the same bits on every run. [`Combine::Atomic`] does not. f32 sums accumulate in
//! f32 in a pairwise-like tree; the error is bounded by about `(log2(n) + 16) · ε · Σ|xᵢ|` with `ε = 2^-24`.
//!
//! # Row and segmented reductions
//! [`DeviceSegmentedReduce`] reduces each row of a row-major matrix, each fixed-size block or each
//! `begin[s] .. end[s]` range ([`Segments`]) with the same operations and semantics, writing one result
//! per segment (argmax/argmin indices within the segment), and computes the fused softmax statistics
//! (row max and `Σ exp(x − max)` in one read).
//!
//! # Stream compaction
//! [`DeviceSelect`] copies the elements that pass a [`Predicate`] (or a byte mask) to the front of an output
//! buffer and counts them: [`select_if`](DeviceSelect::select_if) in unspecified order (tiles of the
//! input placed by one atomic add each: the fastest), [`select_if_stable`](DeviceSelect::select_if_stable) and
//! [`select_flagged`](DeviceSelect::select_flagged) in input order (one pass, decoupled look-back).
//!
//! # Top-k
//! [`DeviceTopK`] writes the k greatest ([`max_k`](DeviceTopK::max_k)) or least
//! ([`min_k`](DeviceTopK::min_k)) elements and their indices, sorted best first, with one answer for every
//! input: ties go to the smaller index, NaN counts as beyond ±∞;
//! [`segmented_max_k`](DeviceTopK::segmented_max_k) does it for every row or offset segment at once (k ≤
//! [`SEGMENT_K_MAX`]), as top-k sampling needs.
//!
//! # Past one GPU
//! [`ShardedReduce`] (module [`sharded`]) reduces data sharded across GPUs, one rank per GPU: each rank
//! reduces its shard with these kernels and a [`Communicator`](sharded::Communicator) (NCCL with the
//! `nccl` feature, or threads of one process) combines the partial results into what one GPU would give
//! for the concatenated shards: sums (reproducible ones bit for bit), argmax/argmin with global indices,
//! top-k device-wide and per row, histograms and statistics.
#![warn(missing_docs)]

#[doc(hidden)]
pub mod cpu;
#[cfg(feature = "cudarc")]
mod cudarc;
pub mod custom;
mod determinism;
mod dispatch;
mod driver;
mod element;
mod error;
#[macro_use]
mod gpu;
mod half;
mod histogram;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod images;
#[cfg(not(feature = "testing"))]
mod images;
mod last_use;
mod pinned;
mod reduce;
pub mod seed;
mod segmented;
mod segments;
pub mod select;
pub mod sharded;
pub mod stats;
mod stream;
#[cfg(feature = "testing")]
mod testing;
mod topk;
mod tuning;
mod view;

/// The `cust` this crate is built on: use its `DeviceBuffer`, `DeviceSlice` and streams with the handles, so
/// your crate need not match its version by hand (`use reduce_host::cust::memory::DeviceBuffer;`).
pub use cust;

pub use determinism::Determinism;
pub use element::{Element, Indexed, OrdElement, SumElement};
pub use error::{DriverError, Error, Result};
pub use gpu::{DeviceInfo, Gpu};
pub use half::{BF16, F16};
pub use histogram::{Counter, DeviceHistogram, EvenBins, HistogramSample};
pub use images::Code;
pub use reduce::{Combine, DeviceReduce};
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use segmented::PlanOverrides;
pub use segmented::{DeviceSegmentedReduce, SoftmaxElement, SoftmaxStats};
pub use segments::Segments;
pub use select::{
    DeviceSelect, GreaterThan, IsFinite, LessThan, NonZero, Predicate, SelectElement,
};
pub use sharded::ShardedReduce;
pub use stream::StreamRef;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use testing::LaneWord;
pub use topk::{DeviceTopK, SEGMENT_K_MAX, TopKElement};
pub use tuning::Policy;
pub use view::{DeviceView, DeviceViewMut};

#[cfg(test)]
mod properties;
