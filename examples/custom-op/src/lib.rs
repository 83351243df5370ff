//! The example's kernels, embedded, and the CPU side of its checks: the same operators folded in order on
//! the CPU, which the GPU's tree must match within rounding.
use custom_ops::{AbsMax, MeanVar, SumSquares, Welford};
use reduce_host::BF16;
use reduce_host::custom::{KernelImages, ReduceOp};

/// What `build.rs` compiled: the operators' kernels for every arch.
pub static KERNELS: KernelImages = reduce_host::include_kernels!("custom_op_kernels");

/// `O` folded over `xs` in order on the CPU: the reference.
pub fn cpu<O: ReduceOp>(xs: &[O::In]) -> O::Acc {
    xs.iter().enumerate().fold(O::identity(), |acc, (i, &x)| {
        O::combine(acc, O::lift(x, i as u64))
    })
}

/// The operators this example exports, by element type (the kernel crate's list).
pub type AbsMaxF32 = AbsMax<f32>;
/// As [`AbsMaxF32`], for bf16 elements.
pub type AbsMaxBf16 = AbsMax<BF16>;
/// The L2 norm of f32 elements.
pub type NormF32 = SumSquares<f32>;
/// Mean and variance of f32 elements.
pub type WelfordF32 = Welford<f32>;
/// Mean and variance of bf16 elements.
pub type WelfordBf16 = Welford<BF16>;

/// Whether `gpu` is within `rel` of `cpu`, relative to the larger magnitude (NaN equals NaN).
pub fn close(gpu: f64, cpu: f64, rel: f64) -> bool {
    (gpu.is_nan() && cpu.is_nan())
        || gpu == cpu
        || (gpu - cpu).abs() <= rel * gpu.abs().max(cpu.abs())
}

/// The documented accuracy of [`Welford`]: the variance within 1e-6 relative, the mean within 1e-6 of its
/// scale (its magnitude plus the standard deviation: a mean near zero of spread-out values has no relative
/// precision to speak of), the count exact.
pub fn mean_var_close(got: &MeanVar, want: &MeanVar) -> bool {
    let scale = want.mean.abs() + want.variance.sqrt();
    got.count == want.count
        && ((got.mean.is_nan() && want.mean.is_nan())
            || (got.mean - want.mean).abs() <= 1e-6 * scale)
        && close(got.variance, want.variance, 1e-6)
}
