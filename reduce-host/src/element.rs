//! Which element types each reduction accepts. A pair without kernels has no impl, so asking for it does not
//! compile; the kernels of a pair are named by the contract's `(Op, Elem)`.
use cust::memory::DeviceCopy;
use reduce_contract::Elem;

use crate::half::{BF16, F16};

mod sealed {
    pub trait Sealed {}
}

/// An element type the kernels are built for.
///
/// Implemented for f32, f64, [`F16`], [`BF16`], i32, u32, i64, u64 and u8.
///
/// # Safety
/// The type's layout must match the device type of the same name (true for the types it is sealed to).
pub unsafe trait Element:
    DeviceCopy + Copy + Default + Send + Sync + std::fmt::Debug + 'static + sealed::Sealed
{
    /// The contract's name of the type, which with the operator picks the kernels.
    #[doc(hidden)]
    const ELEM: Elem;
}

/// Elements that can be summed.
///
/// | element | `Acc` | notes |
/// |---|---|---|
/// | f32, f64 | same | IEEE adds in a fixed tree |
/// | [`F16`], [`BF16`] | f32 | widened exactly, summed in f32 |
/// | i32, i64 | i64 | wraps modulo 2^64 on overflow |
/// | u8, u32, u64 | u64 | wraps modulo 2^64 on overflow |
///
/// Integer sums are exact modulo 2^64 and, since wrapping addition is associative, give the same value with
/// every [`Combine`](crate::Combine) strategy. A type outside the table has no impl, so its sum does not
/// compile:
///
/// ```compile_fail
/// # fn f(reduce: &mut reduce_host::DeviceReduce, x: &cust::memory::DeviceBuffer<i16>) {
/// reduce.sum(x); // i16 is not an element type
/// # }
/// ```
pub trait SumElement: Element {
    /// The type the sum is accumulated and returned in (see the table above).
    type Acc: DeviceCopy + Copy + std::fmt::Debug + Default;
}

/// Elements with an order: max, min, argmax and argmin, whose results have the element's own type. Floats
/// (f16 and bf16 included) compare by IEEE order, NaN propagates; integers by their value.
///
/// ```compile_fail
/// # fn f(reduce: &mut reduce_host::DeviceReduce, x: &cust::memory::DeviceBuffer<i8>) {
/// reduce.max(x); // i8 is not an element type
/// # }
/// ```
///
/// `half::f16` and `half::bf16` data go through [`F16`] and [`BF16`] (`F16::from_halves` views a slice).
pub trait OrdElement: Element {}

/// One line per element type: its Rust type and its contract name.
macro_rules! elements {
    ($($t:ty, $elem:ident;)*) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: primitives, and F16/BF16 (`repr(transparent)` over a u16-sized half), have the layout
        // of the device type of the same name.
        unsafe impl Element for $t {
            const ELEM: Elem = Elem::$elem;
        }
        impl OrdElement for $t {}
    )*};
}
elements! {
    f32, F32;
    f64, F64;
    F16, F16;
    BF16, BF16;
    i32, I32;
    u32, U32;
    i64, I64;
    u64, U64;
    u8, U8;
}

/// The element types by their kernel-name spelling, for the contract's tables.
#[allow(non_camel_case_types)]
mod elem {
    pub use crate::half::{BF16 as bf16, F16 as f16};
    pub use core::primitive::{f32, f64, i32, i64, u8, u32, u64};
}

/// The sums' accumulators, from the contract's one table (`reduce_contract::sum_accumulators!`), which
/// the device's kernels are generated from too.
macro_rules! sum_elements {
    ($($t:ident $acc:ident),*) => {$(
        impl SumElement for elem::$t {
            type Acc = $acc;
        }
    )*};
}
reduce_contract::sum_accumulators!(sum_elements);

/// An element with its position: the result of argmax and argmin, with the device accumulator's layout
/// (the contract's `Indexed`).
pub use reduce_contract::Indexed;
