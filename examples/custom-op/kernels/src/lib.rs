//! The kernels of the example's operators and predicate: for each operator and element type, the
//! device-wide and per-segment kernels, and for the predicate the compaction kernels, instances of
//! `kernels-gpu`'s generic bodies.
#![no_std]
#![feature(abi_ptx)]

use custom_ops::{AbsMax, Outside, SumSquares, Welford};

kernels_gpu::export_reduce! {
    absmax = AbsMax<_>; f32, f16, bf16;
    sum_squares = SumSquares<_>; f32, f16, bf16;
    welford = Welford<_>; f32, bf16;
}

kernels_gpu::export_select! {
    outside = Outside<_>; f32, bf16;
}
