//! Which element types each reduction accepts, and the kernels that serve each pair. A pair without a kernel
//! has no impl, so asking for it does not compile.
use std::ffi::CStr;

use cust::memory::DeviceCopy;

mod sealed {
    pub trait Sealed {}
}

/// An element type the kernels are built for.
///
/// # Safety
/// The type's layout must match the device type of the same name (true for the primitives it is sealed to).
pub unsafe trait Element:
    DeviceCopy + Copy + Default + Send + Sync + std::fmt::Debug + 'static + sealed::Sealed
{
    /// Name used in kernel symbols, e.g. `"f32"`.
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
pub trait SumElement: Element {
    /// The type the sum is accumulated and returned in (f32 for f32, f64 for f64).
    type Acc: DeviceCopy + Copy + std::fmt::Debug + Default;
    /// Kernels of the sum.
    const SUM: Kernels;
}

/// Elements with an order: max, min, argmax and argmin. Floats compare by IEEE order, NaN propagates.
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

macro_rules! float_elements {
    ($($t:ident),*) => {$(
        impl sealed::Sealed for $t {}
        // SAFETY: a primitive has the same layout on host and device.
        unsafe impl Element for $t {
            const NAME: &'static str = stringify!($t);
        }
        impl SumElement for $t {
            type Acc = $t;
            const SUM: Kernels = kernels!(concat!("sum_", stringify!($t)), atomic);
        }
        impl OrdElement for $t {
            const MAX: Kernels = kernels!(concat!("max_", stringify!($t)));
            const MIN: Kernels = kernels!(concat!("min_", stringify!($t)));
            const ARGMAX: Kernels = kernels!(concat!("argmax_", stringify!($t)));
            const ARGMIN: Kernels = kernels!(concat!("argmin_", stringify!($t)));
        }
    )*};
}
float_elements!(f32);

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
    let mut v: Vec<&'static CStr> = Vec::new();
    v.extend(of(&f32::SUM));
    for k in [
        <f32 as OrdElement>::MAX,
        <f32 as OrdElement>::MIN,
        f32::ARGMAX,
        f32::ARGMIN,
    ] {
        v.extend(of(&k));
    }
    v.extend(crate::histogram::kernels());
    v
}
