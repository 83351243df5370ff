//! The reproducible sum's algorithm, as both sides run it: the partition constants and the accumulator
//! arithmetic. The kernels and the CPU reference (`reduce_host::cpu::sum_reproducible`) call the same
//! functions below, so the only thing that could make their bits differ is IEEE arithmetic itself, which both
//! do correctly rounded (no fused multiply-add: the accumulators only add and subtract).
//!
//! **The algorithm** (every constant here is fixed, none depends on the launch):
//! 1. The input is cut by *logical index* into chunks of [`CHUNK`] elements (the last may be shorter).
//! 2. In a chunk, virtual lane `v < `[`CHUNK_LANES`] adds elements `v, v + 256, v + 512, …` of the chunk, in
//!    that order, into an accumulator that starts at [`ReproAcc::ZERO`] (missing elements of a short chunk
//!    are skipped). Then a stride-halving tree over the lanes: for `w = 128, 64, …, 1`, lane `v < w` becomes
//!    `lane[v].merge(lane[v + w])`. Lane 0 is the chunk's partial.
//! 3. Over the partials: virtual lane `v < `[`COMBINE_LANES`] merges partials `v, v + 1024, …` in order
//!    into a zero accumulator, then the same stride-halving tree over 1024 lanes, then [`ReproAcc`]'s
//!    rounding to the result type.
//!
//! Accumulators: f32, f16 and bf16 elements are widened exactly to f64 and added in f64 ([`f64`]'s
//! [`ReproAcc`]); f64 elements go into a compensated pair ([`Compensated`]): a running sum and the running
//! sum of its exact rounding errors (Knuth's TwoSum).

/// Elements per chunk: the unit of work of one warp, and the leaves of the fixed combine.
pub const CHUNK: u64 = 1 << 13;

/// Virtual lanes of a chunk: lane `v` adds elements `v + 256·r`, `r = 0, 1, …`, in that order.
pub const CHUNK_LANES: usize = 256;

/// Rounds of a full chunk: each virtual lane adds this many elements.
pub const CHUNK_ROUNDS: usize = CHUNK as usize / CHUNK_LANES;

/// Virtual lanes of the combine: lane `v` merges partials `v + 1024·r`, `r = 0, 1, …`, in that order.
pub const COMBINE_LANES: usize = 1024;

/// Longest rows that the per-segment sum gives a thread each (reduce-host's plan; the kernel's
/// `segments_rows`): a row of 8 f32 is 32 bytes, two 16-byte loads.
pub const THREAD_ROW: u64 = 8;

/// Dynamic shared memory of the combine kernel: one accumulator slot (at most 16 bytes) per virtual lane.
pub const COMBINE_SHARED_BYTES: u32 = (COMBINE_LANES * 16) as u32;

const _: () = {
    assert!(
        CHUNK_LANES == 8 * 32,
        "a warp holds the chunk's lanes, eight per thread"
    );
    assert!(CHUNK.is_multiple_of(CHUNK_LANES as u64));
    assert!(COMBINE_LANES.is_power_of_two() && COMBINE_LANES <= 1024);
    assert!(core::mem::size_of::<Compensated>() <= 16);
};

/// A reproducible sum's accumulator: an element (widened exactly to f64) can be added, two accumulators
/// merged. Both are correctly rounded IEEE operations in a fixed sequence.
pub trait ReproAcc: Copy {
    /// The empty sum (+0).
    const ZERO: Self;
    /// Adds one element, widened exactly to f64.
    fn add(self, x: f64) -> Self;
    /// Merges `other` into `self` (`self` is the lower-indexed side).
    fn merge(self, other: Self) -> Self;
}

impl ReproAcc for f64 {
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn add(self, x: f64) -> Self {
        self + x
    }
    #[inline(always)]
    fn merge(self, other: Self) -> Self {
        self + other
    }
}

/// A running f64 sum and the running f64 sum of the exact errors of the additions that built it: Sum2 of
/// Ogita, Rump and Oishi, on this algorithm's tree. `sum + err` is the result (see [`Compensated::result`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Compensated {
    /// The plainly rounded sum.
    pub sum: f64,
    /// The f64 sum of the rounding errors of every addition into `sum`.
    pub err: f64,
}

#[cfg(feature = "cust")]
// SAFETY: two f64s, no pointers.
unsafe impl cust_core::DeviceCopy for Compensated {}

/// Knuth's TwoSum: `(s, e)` with `s = fl(a + b)` and `a + b = s + e` exactly (when `s` is finite). Six
/// additions, no branch, valid whatever the magnitudes.
#[inline(always)]
pub fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bp = s - a;
    let ap = s - bp;
    (s, (a - ap) + (b - bp))
}

impl ReproAcc for Compensated {
    const ZERO: Self = Compensated { sum: 0.0, err: 0.0 };
    #[inline(always)]
    fn add(self, x: f64) -> Self {
        let (sum, e) = two_sum(self.sum, x);
        Compensated {
            sum,
            err: self.err + e,
        }
    }
    #[inline(always)]
    fn merge(self, other: Self) -> Self {
        let (sum, e) = two_sum(self.sum, other.sum);
        Compensated {
            sum,
            err: (self.err + other.err) + e,
        }
    }
}

impl Compensated {
    /// `fl(sum + err)`; a NaN or infinite `sum` is the result as it stands (its `err` means nothing then).
    /// A NaN comes out as the canonical quiet NaN, whatever payload the hardware produced.
    #[inline(always)]
    pub fn result(self) -> f64 {
        let r = if self.sum.is_finite() {
            self.sum + self.err
        } else {
            self.sum
        };
        if r.is_nan() { f64::NAN } else { r }
    }
}

/// The f32 result of an f64 accumulator: rounded once, to nearest even; a NaN comes out as the canonical
/// quiet NaN, whatever payload the hardware produced.
#[inline(always)]
pub fn round_to_f32(acc: f64) -> f32 {
    if acc.is_nan() { f32::NAN } else { acc as f32 }
}

/// Lane `v`'s value after the stride-halving tree over `lanes[0..len]` (`len` a power of two): for
/// `w = len/2, …, 1`, `lanes[v] = lanes[v].merge(lanes[v + w])` for `v < w`. The CPU's form of the tree;
/// the kernels do the same merges spread over registers, shuffles and shared memory.
pub fn tree<A: ReproAcc>(lanes: &mut [A]) -> A {
    let mut w = lanes.len() / 2;
    while w >= 1 {
        for v in 0..w {
            lanes[v] = lanes[v].merge(lanes[v + w]);
        }
        w /= 2;
    }
    lanes[0]
}
