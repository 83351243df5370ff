//! Histograms: every block counts its grid-stride share of the samples into private histograms in shared
//! memory, then adds each non-empty bin into the global output with one atomic (the seed's privatisation).
//! Histograms too large for shared memory count straight into global memory.
//!
//! The pieces are types, combined by the exported kernels at the bottom:
//! - a [`Binning`] maps a sample to its bin or drops it ([`Even`]: evenly spaced bins over `[lower, upper)`;
//!   [`Bytes`]: the byte value itself, 256 bins);
//! - [`Counters`] say where a count goes ([`SharedCounters`] or [`GlobalCounters`]);
//! - a [`Tally`] says how a warp's samples become atomics ([`PerSample`], or [`WarpAggregated`], which
//!   merges equal bins of a warp with `match.any` so that a hot bin costs one atomic per warp, not 32).
//!
//! The shared counters come in up to 32 interleaved copies, one per lane, so a warp's 32 shared atomics hit 32
//! different banks whatever the data: a hot bin does not serialise, and a plain atomic per sample
//! ([`PerSample`]) keeps up with HBM (docs/PERFORMANCE.md).
use crate::arch::{self, AtomicAdd};
use crate::half::{BF16, F16};
use crate::thread::{self, Vectorize};
use crate::warp::{self, FULL_MASK};

/// Maps a sample to its bin.
pub trait Binning<T>: Copy {
    /// Number of bins.
    fn bins(&self) -> u32;
    /// The bin of `x`, below [`bins`](Self::bins), or `None` to drop the sample.
    fn bin(&self, x: T) -> Option<u32>;
}

/// Samples that are binned by their value as f32 (exact for all of them).
pub trait Sample: Vectorize + Default {
    /// The value, widened exactly.
    fn to_f32(self) -> f32;
}

impl Sample for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
}

impl Sample for F16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        F16::to_f32(self)
    }
}

impl Sample for BF16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        BF16::to_f32(self)
    }
}

/// `bins` evenly spaced bins over the half-open `[lower, upper)`, as CUB's `HistogramEven` computes them for
/// floating-point samples: a sample `x` with `lower <= x < upper` goes to bin `⌊(x − lower) · scale⌋` where
/// `scale = bins / (upper − lower)` was rounded to f32 once, on the host. Every step is one correctly rounded
/// f32 operation, so the host's reference gives the same bin bit for bit. Rounding can carry a sample just
/// below `upper` to `bins`; it is clamped into the last bin. NaN fails both comparisons and is dropped, as are
/// ±∞ (the host requires finite bounds).
#[derive(Clone, Copy)]
pub struct Even {
    /// Bins, at least 1.
    pub bins: u32,
    /// Inclusive lower bound, finite.
    pub lower: f32,
    /// Exclusive upper bound, finite, above `lower`.
    pub upper: f32,
    /// `bins / (upper - lower)` in f32, finite.
    pub scale: f32,
}

impl<T: Sample> Binning<T> for Even {
    #[inline(always)]
    fn bins(&self) -> u32 {
        self.bins
    }

    #[inline(always)]
    fn bin(&self, x: T) -> Option<u32> {
        let x = x.to_f32();
        if x >= self.lower && x < self.upper {
            // Truncation saturates like `as`; the product is in [0, bins · (1 + 2ε)].
            Some(arch::f32_to_u32_sat((x - self.lower) * self.scale).min(self.bins - 1))
        } else {
            None
        }
    }
}

/// One bin per byte value: bin `x` for byte `x`; nothing is dropped.
#[derive(Clone, Copy)]
pub struct Bytes;

impl Binning<u8> for Bytes {
    #[inline(always)]
    fn bins(&self) -> u32 {
        256
    }

    #[inline(always)]
    fn bin(&self, x: u8) -> Option<u32> {
        Some(x as u32)
    }
}

/// An output counter: `u32`, or `u64` when a bin may pass `u32::MAX` (the host picks per call).
pub trait Counter: AtomicAdd {
    /// Widens a block's shared-memory count.
    fn from_u32(c: u32) -> Self;
}

impl Counter for u32 {
    #[inline(always)]
    fn from_u32(c: u32) -> Self {
        c
    }
}

impl Counter for u64 {
    #[inline(always)]
    fn from_u32(c: u32) -> Self {
        c as u64
    }
}

/// Where counts are added.
pub trait Counters: Copy {
    /// Adds `count` to bin `bin` atomically.
    ///
    /// # Safety
    /// `bin` must be below the number of counters the value was made with.
    unsafe fn add(self, bin: u32, count: u32);
}

/// The block's private `u32` counters in dynamic shared memory, as `2^copies_log2` interleaved copies: the
/// counter of bin `b` in copy `c` is word `b · copies + c`, and lane `l` counts into copy `l % copies`. With 32
/// copies every lane has its own, in its own bank, so a warp's 32 adds never conflict, whatever the data: a
/// hot bin costs no more than spread-out ones. Fewer copies trade that for room when bins are many.
#[derive(Clone, Copy)]
pub struct SharedCounters {
    /// Shared-window address of this lane's copy of bin 0.
    lane_base: u32,
    /// `log2(4 · copies)`: the byte stride from one bin to the next.
    shift: u32,
}

impl SharedCounters {
    /// This lane's view of the copies at `base`.
    ///
    /// # Safety
    /// `base` must point into shared memory; `copies_log2 <= 5`.
    #[inline(always)]
    unsafe fn new(base: *mut u32, copies_log2: u32) -> Self {
        let copy = arch::lane_id() & ((1 << copies_log2) - 1);
        // SAFETY: the caller passes a shared-memory pointer.
        let window = unsafe { arch::shared_window(base) };
        SharedCounters {
            lane_base: window + copy * 4,
            shift: copies_log2 + 2,
        }
    }
}

impl Counters for SharedCounters {
    #[inline(always)]
    unsafe fn add(self, bin: u32, count: u32) {
        // SAFETY: the caller keeps `bin` in range, and the launch gave `bins · copies` counters.
        unsafe { arch::shared_add_u32(self.lane_base + (bin << self.shift), count) }
    }
}

/// The output histogram in global memory.
#[derive(Clone, Copy)]
pub struct GlobalCounters<C>(*mut C);

impl<C: Counter> Counters for GlobalCounters<C> {
    #[inline(always)]
    unsafe fn add(self, bin: u32, count: u32) {
        // SAFETY: the caller keeps `bin` in range; the output is global memory.
        unsafe { C::atomic_add(self.0.add(bin as usize), C::from_u32(count)) }
    }
}

/// How one warp-uniform step of samples (one per lane) becomes atomic adds.
pub trait Tally {
    /// Counts `bin` once for every lane that passes `Some`.
    ///
    /// # Safety
    /// All 32 lanes of the warp must call this together (see [`thread::for_each`]); every `Some` bin must be
    /// in range for `counters`.
    unsafe fn tally(counters: impl Counters, bin: Option<u32>);
}

/// One atomic per sample. Cheapest when the adds of a warp do not collide: spread-out bins, or per-lane
/// copies ([`SharedCounters`] with 32 copies), where even a hot bin does not serialise.
pub struct PerSample;

impl Tally for PerSample {
    #[inline(always)]
    unsafe fn tally(counters: impl Counters, bin: Option<u32>) {
        if let Some(b) = bin {
            // SAFETY: the caller keeps `b` in range.
            unsafe { counters.add(b, 1) }
        }
    }
}

/// One atomic per distinct bin of the warp: `match.any` groups the lanes with equal bins and the lowest lane
/// of each group adds the group's size. A hot bin then costs one atomic per warp instead of 32 serialised ones.
pub struct WarpAggregated;

impl Tally for WarpAggregated {
    #[inline(always)]
    unsafe fn tally(counters: impl Counters, bin: Option<u32>) {
        // Dropped samples form their own group under a key no bin has (bins <= u32::MAX, so < u32::MAX).
        let key = bin.unwrap_or(u32::MAX);
        // SAFETY: the caller has the whole warp here, converged.
        let peers = unsafe { warp::match_any(FULL_MASK, key) };
        let below = (1u32 << arch::lane_id()) - 1;
        if let Some(b) = bin
            && peers & below == 0
        {
            // SAFETY: the caller keeps `b` in range.
            unsafe { counters.add(b, peers.count_ones()) }
        }
    }
}

/// Privatised histogram: the block counts into `2^copies_log2` interleaved copies of `B::bins()` shared `u32`
/// counters (see [`SharedCounters`]), then adds each non-empty bin's total to `out` with one atomic.
///
/// Shared counts are `u32`: the host sizes the grid so no block sees `u32::MAX` samples.
///
/// # Safety
/// Called by every thread of the block. `input` valid for `n` reads, unmodified; `out` valid for `bins`
/// counters (the host zeroes them first); `copies_log2 <= 5` and at least `4 · bins · 2^copies_log2` bytes of
/// dynamic shared memory; `blockDim.x` a multiple of 32.
#[inline(always)]
pub unsafe fn privatized<T, B, C, Ta>(
    input: *const T,
    n: u64,
    out: *mut C,
    binning: B,
    copies_log2: u32,
) where
    T: Vectorize + Default,
    B: Binning<T>,
    C: Counter,
    Ta: Tally,
{
    let bins = binning.bins();
    let copies = 1u32 << copies_log2;
    // SAFETY: the launch provides 4 · bins · copies bytes; every access below is ordered by the barriers.
    let local = unsafe { arch::shared::<u32>() };
    let mut i = arch::thread_idx();
    while i < bins << copies_log2 {
        // SAFETY: i < bins · copies.
        unsafe { local.add(i as usize).write(0) };
        i += arch::block_dim();
    }
    // SAFETY: every thread of the block gets here.
    unsafe { arch::sync_threads() };
    // SAFETY: `local` is shared memory and copies_log2 <= 5 (caller).
    let counters = unsafe { SharedCounters::new(local, copies_log2) };
    // SAFETY: forwarded input contract; the counters hold `bins` bins per copy.
    unsafe { count::<T, B, Ta>(input, n, counters, binning) };
    // SAFETY: every thread of the block gets here.
    unsafe { arch::sync_threads() };
    let out = GlobalCounters(out);
    let mut i = arch::thread_idx();
    while i < bins {
        // Thread i starts at copy i: consecutive threads then read consecutive banks, not all the same one.
        let mut total = 0u32;
        for c in 0..copies {
            let word = (i << copies_log2) + ((c + i) & (copies - 1));
            // SAFETY: word < bins · copies, and the counts were finished before the barrier.
            total += unsafe { local.add(word as usize).read() };
        }
        if total != 0 {
            // SAFETY: `out` holds `bins` counters.
            unsafe { out.add(i, total) };
        }
        i += arch::block_dim();
    }
}

/// Histogram with every count going straight to `out` in global memory: for bin counts whose private copy
/// would not fit in shared memory.
///
/// # Safety
/// Called by every thread of the block. `input` valid for `n` reads, unmodified; `out` valid for `bins`
/// counters (the host zeroes them first); `blockDim.x` a multiple of 32.
#[inline(always)]
pub unsafe fn global<T, B, C, Ta>(input: *const T, n: u64, out: *mut C, binning: B)
where
    T: Vectorize + Default,
    B: Binning<T>,
    C: Counter,
    Ta: Tally,
{
    // SAFETY: forwarded input contract; `out` holds `bins` counters.
    unsafe { count::<T, B, Ta>(input, n, GlobalCounters(out), binning) };
}

/// Counts this thread's grid-stride share of `input[0..n]` into `counters` with the tally `Ta`.
///
/// # Safety
/// Called by every thread of the block (the tally may use warp collectives); `input` valid for `n` reads,
/// unmodified; `counters` valid for every bin `binning` gives; `blockDim.x` a multiple of 32.
#[inline(always)]
unsafe fn count<T, B, Ta>(input: *const T, n: u64, counters: impl Counters, binning: B)
where
    T: Vectorize + Default,
    B: Binning<T>,
    Ta: Tally,
{
    // SAFETY: forwarded input contract; `tally` runs warp-uniformly inside `for_each`, and every bin
    // `binning` gives is in range (caller).
    unsafe {
        thread::for_each(
            input,
            n,
            arch::global_thread_idx(),
            arch::grid_threads(),
            |x, _, ok| Ta::tally(counters, if ok { binning.bin(x) } else { None }),
        )
    };
}

/// Exports the even-bin kernels of each sample type, `histogram_{shared,global}_<sample>_<counter>` for
/// `u32` and `u64` counters, taking `HistogramParams` (see [`Even`] and [`SharedCounters`]).
#[cfg(feature = "builtin")]
macro_rules! even_kernels {
    ($($sample:ident),* $(,)?) => {$(
        mod ${concat(sample_, $sample)} {
            use super::*;
            even_kernels!(@counter $sample u32);
            even_kernels!(@counter $sample u64);
        }
    )*};
    (@counter $sample:ident $c:ident) => {
        mod ${concat(counter_, $c)} {
            use super::*;
            type T = sample::$sample;
            type C = core::primitive::$c;
            type Params = HistogramParams<T, C>;

            /// # Safety
            /// See [`privatized`]; `bins`, `lower`, `upper`, `scale` as [`Even`] documents.
            #[unsafe(export_name = kernel_name!(histogram shared $sample $c))]
            pub unsafe extern "ptx-kernel" fn shared(p: Params) {
                let even = Even { bins: p.bins, lower: p.lower, upper: p.upper, scale: p.scale };
                // SAFETY: the host passes valid buffers and shared memory (reduce-host's launch contract).
                unsafe { privatized::<T, Even, C, PerSample>(p.input, p.n, p.out, even, p.copies_log2) }
            }

            /// # Safety
            /// See [`global`]; `bins`, `lower`, `upper`, `scale` as [`Even`] documents.
            #[unsafe(export_name = kernel_name!(histogram global $sample $c))]
            pub unsafe extern "ptx-kernel" fn global(p: Params) {
                let even = Even { bins: p.bins, lower: p.lower, upper: p.upper, scale: p.scale };
                // SAFETY: the host passes valid buffers (reduce-host's launch contract).
                unsafe { crate::histogram::global::<T, Even, C, WarpAggregated>(p.input, p.n, p.out, even) }
            }
        }
    };
}

/// Exports the 256-bin byte histogram for each counter type as `histogram_bytes_<counter>`.
#[cfg(feature = "builtin")]
macro_rules! byte_kernels {
    ($($c:ident),*) => {$(
        /// # Safety
        /// See [`privatized`] (with 256 bins).
        #[unsafe(export_name = kernel_name!(histogram_bytes $c))]
        pub unsafe extern "ptx-kernel" fn ${concat(bytes_, $c)}(p: HistogramParams<u8, $c>) {
            // SAFETY: the host passes valid buffers and 1 KiB · copies of shared memory (reduce-host's launch
            // contract).
            unsafe { privatized::<u8, Bytes, $c, PerSample>(p.input, p.n, p.out, Bytes, p.copies_log2) }
        }
    )*};
}

#[cfg(feature = "builtin")]
#[allow(non_snake_case)]
mod entry {
    use super::*;
    use reduce_contract::kernel_name;
    use reduce_contract::params::HistogramParams;

    /// The sample types by their kernel-name spelling.
    #[allow(non_camel_case_types)]
    mod sample {
        pub use crate::half::{BF16 as bf16, F16 as f16};
        pub use core::primitive::f32;
    }

    reduce_contract::histogram_samples!(even_kernels);
    byte_kernels!(u32, u64);
}
