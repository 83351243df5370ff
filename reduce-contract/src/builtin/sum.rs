//! What a sum needs of its elements: [`Summable`] (the accumulator an element widens into) and [`SumAcc`]
//! (the accumulator's zero and addition), from the table of [`sum_accumulators!`](crate::sum_accumulators).
use crate::op::{Element, Pod};

/// A sum's running value. Floats add with IEEE rounding; integers add modulo 2^64 (two's complement
/// wrapping), which is associative, so an integer sum is exact modulo 2^64 and the same for every combine
/// order, atomics included.
pub trait SumAcc: Pod {
    /// The neutral element.
    const ZERO: Self;
    /// `self + other`, wrapping for integers.
    fn add(self, other: Self) -> Self;
}

macro_rules! sum_acc {
    ($($t:ty: $zero:expr, |$a:ident, $b:ident| $add:expr;)*) => {$(
        impl SumAcc for $t {
            const ZERO: Self = $zero;
            #[inline(always)]
            fn add(self, other: Self) -> Self {
                let ($a, $b) = (self, other);
                $add
            }
        }
    )*};
}
sum_acc! {
    f32: 0.0, |a, b| a + b;
    f64: 0.0, |a, b| a + b;
    u32: 0, |a, b| a.wrapping_add(b);
    i64: 0, |a, b| a.wrapping_add(b);
    u64: 0, |a, b| a.wrapping_add(b);
}

/// Elements that can be summed, with the type their sum is accumulated and returned in: f32 for f32 (as CUB)
/// and for f16/bf16, f64 for f64, i64/u64 for signed/unsigned integers.
pub trait Summable: Element {
    /// The accumulator.
    type Acc: SumAcc;
    /// Widens one element (exactly).
    fn widen(self) -> Self::Acc;
}

/// One impl per primitive line of the table, widening by `From` (the integers' sign or zero extension). The
/// 16-bit floats are each side's own types: [`summable_halves!`](crate::summable_halves) implements them.
macro_rules! summable_primitives {
    ($($t:ident $acc:ident),*) => {$( summable_primitives!(@one $t $acc); )*};
    (@one f16 $acc:ident) => {};
    (@one bf16 $acc:ident) => {};
    (@one $t:ident $acc:ident) => {
        impl Summable for $t {
            type Acc = $acc;
            #[inline(always)]
            fn widen(self) -> $acc {
                <$acc>::from(self)
            }
        }
    };
}
crate::sum_accumulators!(summable_primitives);

/// The built-in operators' traits for a side's 16-bit float types (the host's and the device's `F16` and
/// `BF16`, which implement [`Float`](crate::op::Float)): plain data, summed in f32 (the table's line) and
/// ordered through f32, which orders them exactly as their own IEEE order would. `$lowest` and `$highest`
/// are the type's −∞ and +∞.
#[doc(hidden)]
#[macro_export]
macro_rules! summable_halves {
    ($($t:ident: $lowest:expr, $highest:expr;)*) => {$(
        // SAFETY: a 16-bit float's bits: no pointers, no padding.
        unsafe impl $crate::op::Pod for $t {}

        impl $crate::builtin::Summable for $t {
            type Acc = f32;
            #[inline(always)]
            fn widen(self) -> f32 {
                $crate::op::Float::to_f32(self)
            }
        }

        impl $crate::builtin::Ordered for $t {
            const LOWEST: Self = $lowest;
            const HIGHEST: Self = $highest;
            #[inline(always)]
            fn is_nan(self) -> bool {
                $crate::op::Float::to_f32(self).is_nan()
            }
            #[inline(always)]
            fn lt(self, other: Self) -> bool {
                $crate::op::Float::to_f32(self) < $crate::op::Float::to_f32(other)
            }
            #[inline(always)]
            fn same(self, other: Self) -> bool {
                $crate::builtin::Ordered::same(
                    $crate::op::Float::to_f32(self),
                    $crate::op::Float::to_f32(other),
                )
            }
        }
    )*};
}
