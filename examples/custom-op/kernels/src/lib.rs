//! The kernels of the example's operators: for each operator and element type, the device-wide and
//! per-segment kernels, instances of `kernels-gpu`'s generic bodies.
#![no_std]
#![feature(abi_ptx)]

use custom_ops::{AbsMax, SumSquares, Welford};

kernels_gpu::export_reduce! {
    absmax = AbsMax<_>; f32, f16, bf16;
    sum_squares = SumSquares<_>; f32, f16, bf16;
    welford = Welford<_>; f32, bf16;
}
