//! Device-copyable f16 and bf16: `half` 2.x types cannot implement `cust`'s `DeviceCopy` outside `half` or
//! `cust`, so these transparent wrappers do. Slices convert both ways without copying.
use cust::memory::DeviceCopy;

macro_rules! wrapper {
    ($(#[$doc:meta])* $name:ident, $half:ty) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
        #[repr(transparent)]
        pub struct $name(pub $half);

        // SAFETY: a 16-bit float holds no pointers.
        unsafe impl DeviceCopy for $name {}

        impl $name {
            /// Views `&[half]` as `&[Self]` (same layout), e.g. for `DeviceBuffer::from_slice`.
            pub fn from_halves(s: &[$half]) -> &[Self] {
                // SAFETY: `Self` is `repr(transparent)` over the half type.
                unsafe { std::slice::from_raw_parts(s.as_ptr() as *const Self, s.len()) }
            }

            /// Views `&[Self]` as `&[half]`.
            pub fn as_halves(s: &[Self]) -> &[$half] {
                // SAFETY: `Self` is `repr(transparent)` over the half type.
                unsafe { std::slice::from_raw_parts(s.as_ptr() as *const $half, s.len()) }
            }

            /// The value as f32 (exact).
            pub fn to_f32(self) -> f32 {
                self.0.to_f32()
            }
        }

        impl From<$half> for $name {
            fn from(h: $half) -> Self {
                $name(h)
            }
        }

        impl From<$name> for $half {
            fn from(h: $name) -> Self {
                h.0
            }
        }
    };
}

wrapper!(
    /// IEEE binary16 on the device: wraps [`half::f16`].
    ///
    /// ```
    /// use reduce_host::F16;
    /// let host = [half::f16::from_f32(1.5), half::f16::from_f32(-2.0)];
    /// let view: &[F16] = F16::from_halves(&host);
    /// assert_eq!(view[0].to_f32(), 1.5);
    /// ```
    F16,
    half::f16
);
wrapper!(
    /// bfloat16 on the device: wraps [`half::bf16`].
    BF16,
    half::bf16
);

/// The contract's element names and widening, so an operator generic over its element (one definition for
/// the host and the device, see [`crate::custom`]) reads these types.
macro_rules! contract_float {
    ($($t:ident: $name:literal),*) => {$(
        impl reduce_contract::op::Element for $t {
            const NAME: &'static str = $name;
        }
        impl reduce_contract::op::Float for $t {
            fn to_f32(self) -> f32 {
                self.0.to_f32()
            }
            fn to_f64(self) -> f64 {
                self.0.to_f64()
            }
        }
    )*};
}
contract_float!(F16: "f16", BF16: "bf16");

// Top-k's order-preserving keys, from the bits (the same as the device's).
reduce_contract::topk_halves! {
    F16: |x| x.0.to_bits(), 0x7c00;
    BF16: |x| x.0.to_bits(), 0x7f80;
}
