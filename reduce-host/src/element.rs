//! Which element types each reduction accepts, and the kernels that serve each pair. A pair without a kernel
//! has no impl, so asking for it does not compile.
use std::ffi::CStr;

use cust::memory::DeviceCopy;

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
    /// Name used in kernel symbols, e.g. `"f32"`, `"bf16"`.
    const NAME: &'static str;
}

/// The kernels of one `(operator, element)` pair.
#[derive(Clone, Copy, Debug)]
pub struct Kernels {
    /// Per-block partials.
    pub partials: &'static CStr,
    /// One block combining partials (two-pass strategy).
    pub finalize: &'static CStr,
    /// Single pass, last block combines.
    pub last_block: &'static CStr,
    /// Single pass, atomic combine (sums only).
    pub atomic: Option<&'static CStr>,
}

pub(crate) const fn cstr(s: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(s.as_bytes()) {
        Ok(c) => c,
        Err(_) => panic!("kernel names are NUL-terminated literals"),
    }
}

macro_rules! kernels {
    ($tag:expr, atomic) => {
        Kernels {
            atomic: Some(cstr(concat!("reduce_atomic_", $tag, "\0"))),
            ..kernels!($tag)
        }
    };
    ($tag:expr) => {
        Kernels {
            partials: cstr(concat!("reduce_partials_", $tag, "\0")),
            finalize: cstr(concat!("reduce_finalize_", $tag, "\0")),
            last_block: cstr(concat!("reduce_last_block_", $tag, "\0")),
            atomic: None,
        }
    };
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
    /// Kernels of the sum.
    const SUM: Kernels;
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
pub trait OrdElement: Element {
    /// Kernels of max.
    const MAX: Kernels;
    /// Kernels of min.
    const MIN: Kernels;
    /// Kernels of argmax.
    const ARGMAX: Kernels;
    /// Kernels of argmin.
    const ARGMIN: Kernels;
}

/// One line per element type: its Rust type, its kernel-name suffix and its sum's accumulator. Also lists
/// every type's kernels for [`all_kernels`].
macro_rules! elements {
    ($($t:ty, $name:literal, $acc:ty;)*) => {
        $(
            impl sealed::Sealed for $t {}
            // SAFETY: primitives, and F16/BF16 (`repr(transparent)` over a u16-sized half), have the layout
            // of the device type of the same name.
            unsafe impl Element for $t {
                const NAME: &'static str = $name;
            }
            impl SumElement for $t {
                type Acc = $acc;
                const SUM: Kernels = kernels!(concat!("sum_", $name), atomic);
            }
            impl OrdElement for $t {
                const MAX: Kernels = kernels!(concat!("max_", $name));
                const MIN: Kernels = kernels!(concat!("min_", $name));
                const ARGMAX: Kernels = kernels!(concat!("argmax_", $name));
                const ARGMIN: Kernels = kernels!(concat!("argmin_", $name));
            }
        )*

        /// The kernels of every `(operator, element)` pair.
        fn every_pair() -> Vec<Kernels> {
            // Qualified: `<f32>::MAX` alone would be the inherent constant.
            vec![$(
                <$t as SumElement>::SUM,
                <$t as OrdElement>::MAX,
                <$t as OrdElement>::MIN,
                <$t as OrdElement>::ARGMAX,
                <$t as OrdElement>::ARGMIN,
            )*]
        }
    };
}
elements! {
    f32, "f32", f32;
    f64, "f64", f64;
    F16, "f16", f32;
    BF16, "bf16", f32;
    i32, "i32", i64;
    u32, "u32", u64;
    i64, "i64", i64;
    u64, "u64", u64;
    u8, "u8", u64;
}

/// An element with its position: the result of argmax and argmin. Same layout as the device's accumulator.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
#[repr(C)]
pub struct Indexed<T> {
    /// The element.
    pub value: T,
    /// Its index in the input slice.
    pub index: u64,
}

// SAFETY: a `repr(C)` pair of device-copyable fields holds no host pointers.
unsafe impl<T: DeviceCopy> DeviceCopy for Indexed<T> {}

/// Names every kernel of every pair: the CPU tests check each one is in every PTX module.
pub fn all_kernels() -> Vec<&'static CStr> {
    fn of(k: &Kernels) -> impl Iterator<Item = &'static CStr> {
        [
            Some(k.partials),
            Some(k.finalize),
            Some(k.last_block),
            k.atomic,
        ]
        .into_iter()
        .flatten()
    }
    let mut v: Vec<&'static CStr> = every_pair().iter().flat_map(of).collect();
    v.extend(crate::histogram::kernels());
    v
}
