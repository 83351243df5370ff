//! [`Determinism`]: which guarantee the float sums of a [`DeviceReduce`](crate::DeviceReduce) or a
//! [`DeviceSegmentedReduce`](crate::DeviceSegmentedReduce) give about their bits.

/// How far the bits of a float sum are guaranteed to repeat. Set with
/// [`DeviceReduce::set_determinism`](crate::DeviceReduce::set_determinism) or
/// [`DeviceSegmentedReduce::set_determinism`](crate::DeviceSegmentedReduce::set_determinism); the names follow CUB's
/// `cuda::execution::determinism` levels.
///
/// Only float sums (f32, f64, [`F16`](crate::F16), [`BF16`](crate::BF16)) depend on the setting. Integer
/// sums are exact modulo 2^64, and max, min, argmax and argmin pick an element, so their results are the
/// same on every GPU with either setting; one exception: the f16 and bf16 max and min of a device-wide call
/// may give −0 or +0 when both are the extreme, and either NaN's payload when several NaNs are, by the
/// device's tree (segmented calls fix their tree by the segment length).
///
/// ```no_run
/// use cust::memory::DeviceBuffer;
/// use reduce_host::{DeviceReduce, Determinism};
///
/// let mut reduce = DeviceReduce::new()?;
/// reduce.set_determinism(Determinism::GpuToGpu);
/// let data = DeviceBuffer::from_slice(&[0.1f32; 1000])?;
/// // The same bits on an H200, an RTX 4090 or a T4, for any launch policy and any sub-slice offset, and
/// // the same as `reduce_host::cpu::sum_reproducible` computes on the CPU.
/// let bits = reduce.sum(&data)?.to_bits();
/// # Ok::<(), reduce_host::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Determinism {
    /// The default: the fastest kernels. Float sums repeat their bits run to run on the same GPU model with
    /// the same launch policy and the same alignment of the slice (with every [`Combine`](crate::Combine)
    /// but `Atomic`); a different SM count, block size or alignment may change the last bits.
    #[default]
    RunToRun,
    /// Float sums whose bits depend only on the values and their order: not on the GPU, its SM count, the
    /// launch policy, the stream or the slice's alignment. The [`Combine`](crate::Combine) setting is
    /// ignored for them.
    ///
    /// **Algorithm** (`reduce_contract::reproducible`): the input is cut by index into chunks of 8192
    /// elements; in a chunk, 256 virtual lanes each add every 256th element in order, then a fixed pairwise
    /// tree; over the chunk partials, 1024 virtual lanes each add every 1024th partial in order, then a
    /// fixed pairwise tree. f32, f16 and bf16 elements are added in **f64** and the result is rounded once
    /// to f32; f64 elements are added **compensated** (each addition's exact error, by TwoSum, is summed
    /// alongside; the result is `sum + errors`). It is neither exact nor binned: it is a fixed order of
    /// correctly rounded operations, with the bound below.
    ///
    /// **Error bound.** Let `S` be the exact sum, `A = Σ|xᵢ|`, `u = 2⁻⁵³`, `γₘ = m·u / (1 − m·u)` and
    /// `D = 51 + ⌈n / 2²³⌉` (the most additions one element passes through: 32 in its lane, 8 in the chunk
    /// tree, `⌈n / 2²³⌉` in its combine lane, 10 in the combine tree, one spare). Then
    /// - f32, f16, bf16: `|result − S| ≤ 2⁻²⁴·|S| + γ_D·A` (plus the overflow to ±∞ of a result beyond
    ///   f32's range). The f64 stage cannot overflow, and for `n ≤ 2²⁸` `γ_D·A ≤ 1e-14·A`: the result is
    ///   the correctly rounded f32 of `S` unless `S` lies within `γ_D·A` of a midpoint between two f32
    ///   values, and within one f32 ulp of `S` whenever `A ≤ 10⁶·|S|`. The default f32 tree's bound is
    ///   about `log2(n)·2⁻²⁴·A`.
    /// - f64: `|result − S| ≤ 2⁻⁵³·|S| + γ_{D+1}²·A`, when no partial sum overflows (as the default's);
    ///   for `n ≤ 2²⁸` the second term is below `1e-28·A`.
    ///
    /// NaN and infinities behave as in IEEE summation in any order: any NaN, or both +∞ and −∞, give NaN
    /// (always the canonical quiet NaN, `f32::NAN` / `f64::NAN`), otherwise an infinity gives itself.
    ///
    /// **Cost:** two launches (a warp per chunk, then one block), 16 bytes of scratch per 8192 elements
    /// (kept by the handle and grown to the longest input), and each warp waits on its chunk's 32 rounds
    /// of loads, so short inputs take longer than with `RunToRun` (measured in docs/PERFORMANCE.md). Segmented
    /// sums map the same arithmetic onto tiles, warps or blocks per segment, or split few long rows into
    /// chunks (see
    /// [`DeviceSegmentedReduce::set_determinism`](crate::DeviceSegmentedReduce::set_determinism)).
    GpuToGpu,
}

impl Determinism {
    /// Whether a sum of `elem` elements runs the reproducible kernels under this setting.
    pub(crate) fn reproducible_sum(self, elem: reduce_contract::Elem) -> bool {
        use reduce_contract::Elem;
        self == Determinism::GpuToGpu
            && matches!(elem, Elem::F32 | Elem::F64 | Elem::F16 | Elem::BF16)
    }
}
