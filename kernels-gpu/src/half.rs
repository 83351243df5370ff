//! 16-bit floats as the device sees them: bit patterns with conversions to f32. Arithmetic on them happens
//! in f32 (the accumulator of their sums); the one 16-bit arithmetic is a run's bounds for the statistics,
//! paired `min.NaN`/`max.NaN` on sm_80 and newer (two elements an instruction, none widened).
use core::arch::asm;

use crate::shuffle::Shuffle;

/// IEEE binary16, as its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct F16(pub u16);

/// bfloat16 (the top half of an f32), as its bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(transparent)]
pub struct BF16(pub u16);

impl F16 {
    /// Exact widening to f32 (`cvt.f32.f16`).
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        let r: f32;
        // SAFETY: a register-only conversion.
        unsafe {
            asm!("{{ .reg .b16 h; mov.b16 h, {1}; cvt.f32.f16 {0}, h; }}", out(reg32) r, in(reg16) self.0,
                 options(pure, nomem, nostack))
        };
        r
    }
}

impl BF16 {
    /// Exact widening to f32: the bits are the high half of the f32.
    #[inline(always)]
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

macro_rules! shuffle_16 {
    ($($t:ty),*) => {$(
        // SAFETY: the 16 bits travel in the low half of one word.
        unsafe impl Shuffle for $t {
            #[inline(always)]
            fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
                Self(f(self.0 as u32) as u16)
            }
        }
    )*};
}
shuffle_16!(F16, BF16);

/// Sums of 16-bit floats accumulate in f32, as CUB's (the contract's `sum_accumulators!`): the widening is
/// exact and f32 keeps the rounding error of a long sum far below one 16-bit ulp of the result.
macro_rules! half_float {
    ($($t:ident),*) => {$(
        impl From<$t> for f32 {
            #[inline(always)]
            fn from(x: $t) -> f32 {
                x.to_f32()
            }
        }
    )*};
}
half_float!(F16, BF16);

// The built-in operators' traits: summed in f32, compared through f32 (which orders them exactly as their
// own IEEE order would).
reduce_contract::summable_halves! {
    F16: F16(0xfc00), F16(0x7c00);
    BF16: BF16(0xff80), BF16(0x7f80);
}

// Top-k's order-preserving keys, from the bits.
reduce_contract::topk_halves! {
    F16: |x| x.0, 0x7c00;
    BF16: |x| x.0, 0x7f80;
}

/// The contract's element names and widening, so an operator generic over its element (one definition for
/// the host and the device) reads these types on the device.
///
/// A run's bounds ([`run_bounds`](reduce_contract::op::Float::run_bounds)) take paired `min.NaN`/`max.NaN`
/// (sm_80 and newer) on the loaded words: two elements per instruction, none widened. `$x2` is the pair's
/// PTX type, `$inf` the bits of +∞.
macro_rules! contract_float {
    ($($t:ident: $name:literal, $x2:literal, $inf:literal),*) => {$(
        impl reduce_contract::op::Element for $t {
            const NAME: &'static str = $name;
        }
        impl reduce_contract::op::Float for $t {
            #[inline(always)]
            fn to_f32(self) -> f32 {
                $t::to_f32(self)
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                $t::to_f32(self) as f64
            }
            #[inline(always)]
            fn run_bounds(len: usize, get: impl Fn(usize) -> Self) -> (f32, f32) {
                #[cfg(target_feature = "sm_80")]
                if len.is_multiple_of(2) {
                    // `min.NaN`/`max.NaN` of two pairs.
                    macro_rules! x2 {
                        ($op:literal, $a:expr, $b:expr) => {{
                            let (a, b): (u32, u32) = ($a, $b);
                            let r: u32;
                            // SAFETY: register-only arithmetic.
                            unsafe {
                                asm!(concat!($op, ".NaN.", $x2, " {0}, {1}, {2};"), out(reg32) r,
                                     in(reg32) a, in(reg32) b, options(pure, nomem, nostack))
                            };
                            r
                        }};
                    }
                    // Elements 2i and 2i + 1 are the halves of one loaded word (the compiler folds the
                    // repacking away); four chains of each bound.
                    let (inf, neg_inf): (u32, u32) = ($inf * 0x10001, ($inf | 0x8000) * 0x10001);
                    let (mut lo, mut hi) = ([inf; 4], [neg_inf; 4]);
                    reduce_contract::each_index!(I < len / 2, {
                        let w = get(2 * I).0 as u32 | (get(2 * I + 1).0 as u32) << 16;
                        lo[I % 4] = x2!("min", lo[I % 4], w);
                        hi[I % 4] = x2!("max", hi[I % 4], w);
                    });
                    let lo = x2!("min", x2!("min", lo[0], lo[1]), x2!("min", lo[2], lo[3]));
                    let hi = x2!("max", x2!("max", hi[0], hi[1]), x2!("max", hi[2], hi[3]));
                    // The two halves, widened (a NaN half makes the bound NaN).
                    let half = |w: u32, high: bool| $t((if high { w >> 16 } else { w }) as u16).to_f32();
                    let pick = <f32 as reduce_contract::builtin::Ordered>::pick::<reduce_contract::builtin::Least>;
                    let lo = pick(half(lo, false), half(lo, true));
                    let pick = <f32 as reduce_contract::builtin::Ordered>::pick::<reduce_contract::builtin::Greatest>;
                    let hi = pick(half(hi, false), half(hi, true));
                    return (lo, hi);
                }
                reduce_contract::stats::Bounds::of_run(len, |i| get(i).to_f32())
            }
        }
    )*};
}
contract_float!(F16: "f16", "f16x2", 0x7c00, BF16: "bf16", "bf16x2", 0x7f80);
