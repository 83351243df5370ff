//! The reproducible sum on the CPU: the algorithm of `reduce_contract::reproducible` in its plainest form,
//! with the same accumulator code the kernels run. Its result has the same bits as
//! [`Determinism::GpuToGpu`](crate::Determinism::GpuToGpu) sums on any GPU.
use reduce_contract::reproducible::{
    CHUNK, CHUNK_LANES, COMBINE_LANES, Compensated, ReproAcc, round_to_f32, tree,
};

use crate::half::{BF16, F16};

mod sealed {
    pub trait Sealed {}
}

/// Element types of the reproducible sum, with its accumulator and result type.
pub trait ReproSum: Copy + sealed::Sealed {
    /// f64 for f32, f16 and bf16; [`Compensated`] for f64.
    type Acc: ReproAcc;
    /// The sum's type: f32, or f64 for f64 (as `SumElement::Acc`).
    type Out: Copy;
    /// Exact widening to f64.
    fn widen(self) -> f64;
    /// The result of the final accumulator.
    fn finish(acc: Self::Acc) -> Self::Out;
}

macro_rules! repro_sum {
    ($($t:ty => $acc:ty, $out:ty, |$x:ident| $widen:expr, |$a:ident| $finish:expr;)*) => {$(
        impl sealed::Sealed for $t {}
        impl ReproSum for $t {
            type Acc = $acc;
            type Out = $out;
            fn widen(self) -> f64 {
                let $x = self;
                $widen
            }
            fn finish(acc: $acc) -> $out {
                let $a = acc;
                $finish
            }
        }
    )*};
}
repro_sum! {
    f32 => f64, f32, |x| x as f64, |a| round_to_f32(a);
    f64 => Compensated, f64, |x| x, |a| a.result();
    F16 => f64, f32, |x| x.to_f32() as f64, |a| round_to_f32(a);
    BF16 => f64, f32, |x| x.to_f32() as f64, |a| round_to_f32(a);
}

/// The partial of one chunk (at most `CHUNK` elements): virtual lane `v` adds elements `v, v + 256, …` in
/// order, then the stride-halving tree.
pub fn chunk_partial<T: ReproSum>(chunk: &[T]) -> T::Acc {
    debug_assert!(chunk.len() as u64 <= CHUNK);
    let mut lanes = [T::Acc::ZERO; CHUNK_LANES];
    for (i, x) in chunk.iter().enumerate() {
        lanes[i % CHUNK_LANES] = lanes[i % CHUNK_LANES].add(x.widen());
    }
    tree(&mut lanes)
}

/// The reproducible sum of `xs`: the bits a [`Determinism::GpuToGpu`](crate::Determinism::GpuToGpu) sum
/// gives on any GPU, with the error bound documented there.
pub fn sum_reproducible<T: ReproSum>(xs: &[T]) -> T::Out {
    let mut lanes = vec![T::Acc::ZERO; COMBINE_LANES];
    for (i, chunk) in xs.chunks(CHUNK as usize).enumerate() {
        let lane = &mut lanes[i % COMBINE_LANES];
        *lane = lane.merge(chunk_partial(chunk));
    }
    T::finish(tree(&mut lanes))
}
