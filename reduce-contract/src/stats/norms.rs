//! Norms in one read: Σ|x| (L1), a scaled Σx² (L2, and the mean square of RMSNorm), and max |x| (∞).
use core::marker::PhantomData;

use super::in_f32;
use crate::math::mul_add;
use crate::op::{Float, Pod, ReduceOp};

/// Σ|x|, the L1 norm, accumulated in f64 (a run of up to 4-byte elements in f32 first).
pub struct AbsSum<T>(PhantomData<T>);

impl<T: Float> ReduceOp for AbsSum<T> {
    type In = T;
    type Acc = f64;
    type Out = f64;
    const NAME: &'static str = "norm_l1";

    fn identity() -> f64 {
        0.0
    }
    fn lift(x: T, _index: u64) -> f64 {
        x.to_f64().abs()
    }
    fn combine(a: f64, b: f64) -> f64 {
        a + b
    }
    fn finalize(acc: f64) -> f64 {
        acc
    }
    #[inline(always)]
    fn fold_run(acc: f64, len: usize, get: impl Fn(usize) -> (T, u64)) -> f64 {
        if in_f32::<T>() {
            let mut s = 0.0f32;
            crate::each_index!(I < len, {
                s += get(I).0.to_f32().abs();
            });
            return acc + s as f64;
        }
        let mut s = 0.0f64;
        crate::each_index!(I < len, {
            s += get(I).0.to_f64().abs();
        });
        acc + s
    }
}

/// How many elements, and their sum of squares as `scale² · ssq` with `scale` a power of two, so that it
/// neither overflows nor underflows for any f64 input (LAPACK's `nrm2` idea). Inputs of up to 4 bytes keep
/// `scale = 1`: their squares always fit in f64.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Squares {
    /// How many elements.
    pub n: f64,
    /// A power of two.
    pub scale: f64,
    /// Σ (x / scale)².
    pub ssq: f64,
}

// SAFETY: three f64, no pointers, no padding.
unsafe impl Pod for Squares {}

#[cfg(feature = "cust")]
// SAFETY: plain f64s.
unsafe impl cust_core::DeviceCopy for Squares {}

impl Default for Squares {
    /// No element.
    fn default() -> Self {
        Squares {
            n: 0.0,
            scale: 1.0,
            ssq: 0.0,
        }
    }
}

/// `2^e` for `-1022 ≤ e ≤ 1023`.
#[inline(always)]
fn pow2(e: i64) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// Magnitudes whose squares, summed over any count, stay normal f64 numbers: up to 4-byte inputs in f32
/// runs below `2^60` (and above `2^−60`), f64 ones below `2^480` (and above `2^−480`).
const F32_SAFE: (f32, f32) = (1.0 / (1u64 << 60) as f32, (1u64 << 60) as f32);
const F64_SAFE: (f64, f64) = (1.0 / F64_BIG, F64_BIG);
const F64_BIG: f64 = {
    // 2^480
    f64::from_bits((480 + 1023) << 52)
};

impl Squares {
    /// `sqrt(Σx²)`, the L2 norm.
    pub fn norm(&self) -> f64 {
        self.scale * libm::sqrt(self.ssq)
    }

    /// `Σx² / n`, the mean square (RMSNorm's statistic before its `sqrt`); NaN for no element.
    pub fn mean_square(&self) -> f64 {
        if self.n > 0.0 {
            self.scale * self.scale * self.ssq / self.n
        } else {
            f64::NAN
        }
    }

    /// The sums of two disjoint sets, at the larger scale (the smaller one's contribution rescaled by a
    /// power of two, exactly unless it falls below f64's range, where it is negligible).
    #[inline(always)]
    pub fn merge(a: Squares, b: Squares) -> Squares {
        let n = a.n + b.n;
        if !(a.ssq + b.ssq).is_finite() {
            // An infinity or a NaN: it is the result whatever the scales.
            return Squares {
                n,
                scale: 1.0,
                ssq: a.ssq + b.ssq,
            };
        }
        // A side of zeros (or no elements) adds nothing, whatever its scale.
        if b.ssq == 0.0 {
            return Squares { n, ..a };
        }
        if a.ssq == 0.0 {
            return Squares { n, ..b };
        }
        let (big, small) = if a.scale >= b.scale { (a, b) } else { (b, a) };
        let r = small.scale / big.scale;
        Squares {
            n,
            scale: big.scale,
            ssq: mul_add(small.ssq * r, r, big.ssq),
        }
    }

    /// The sum of squares of a run of `len` elements.
    #[inline(always)]
    pub fn of_run<T: Float>(len: usize, get: impl Fn(usize) -> T) -> Squares {
        let n = len as f64;
        if in_f32::<T>() {
            let (mut m, mut ssq) = (0.0f32, 0.0f32);
            crate::each_index!(I < len, {
                let x = get(I).to_f32();
                m = m.max(x.abs());
                ssq = mul_add(x, x, ssq);
            });
            // (`max` skips NaN; a NaN still makes `ssq` NaN on either path.)
            if (m >= F32_SAFE.0 && m < F32_SAFE.1) || m == 0.0 {
                return Squares {
                    n,
                    scale: 1.0,
                    ssq: ssq as f64,
                };
            }
            // Tiny or huge (or infinite): f32 squares would underflow or overflow, f64 ones cannot.
            let mut ssq = 0.0f64;
            crate::each_index!(I < len, {
                let x = get(I).to_f64();
                ssq = mul_add(x, x, ssq);
            });
            return Squares { n, scale: 1.0, ssq };
        }
        let mut m = 0.0f64;
        crate::each_index!(I < len, {
            m = m.max(get(I).to_f64().abs());
        });
        let scale = if (m >= F64_SAFE.0 && m < F64_SAFE.1) || m == 0.0 || !m.is_finite() {
            1.0
        } else {
            // The power of two at `m`, kept ≥ 2^−1000 so that its inverse is finite.
            let e = ((m.to_bits() >> 52) & 0x7ff) as i64 - 1023;
            pow2(e.max(-1000))
        };
        let inv = 1.0 / scale;
        let mut ssq = 0.0f64;
        crate::each_index!(I < len, {
            let x = get(I).to_f64() * inv;
            ssq = mul_add(x, x, ssq);
        });
        Squares { n, scale, ssq }
    }
}

/// The sum of squares, for the L2 norm ([`Squares::norm`]) and the mean square ([`Squares::mean_square`]),
/// without overflow or underflow for any input.
pub struct SquareSum<T>(PhantomData<T>);

impl<T: Float> ReduceOp for SquareSum<T> {
    type In = T;
    type Acc = Squares;
    type Out = Squares;
    const NAME: &'static str = "norm_l2";

    fn identity() -> Squares {
        Squares::default()
    }
    fn lift(x: T, _index: u64) -> Squares {
        Squares::of_run(1, |_| x)
    }
    fn combine(a: Squares, b: Squares) -> Squares {
        Squares::merge(a, b)
    }
    fn finalize(acc: Squares) -> Squares {
        acc
    }
    #[inline(always)]
    fn fold_run(acc: Squares, len: usize, get: impl Fn(usize) -> (T, u64)) -> Squares {
        Squares::merge(acc, Squares::of_run(len, |i| get(i).0))
    }
}

/// max |x| (the ∞-norm, the scale of an FP8 cast), as the bits of an f64: with the sign cleared, a
/// float's bits order as its value does and every NaN's lie above +∞'s, so one unsigned `max` compares and
/// propagates NaN.
pub struct AbsMax<T>(PhantomData<T>);

impl<T: Float> ReduceOp for AbsMax<T> {
    type In = T;
    type Acc = u64;
    type Out = f64;
    const NAME: &'static str = "norm_inf";

    fn identity() -> u64 {
        0
    }
    fn lift(x: T, _index: u64) -> u64 {
        x.to_f64().to_bits() & !(1 << 63)
    }
    fn combine(a: u64, b: u64) -> u64 {
        a.max(b)
    }
    fn finalize(acc: u64) -> f64 {
        f64::from_bits(acc)
    }
    #[inline(always)]
    fn fold_run(acc: u64, len: usize, get: impl Fn(usize) -> (T, u64)) -> u64 {
        if in_f32::<T>() {
            let mut m = 0u32;
            crate::each_index!(I < len, {
                m = m.max(get(I).0.to_f32().to_bits() & 0x7fff_ffff);
            });
            return acc.max(Self::lift_f32(f32::from_bits(m)));
        }
        let mut m = 0u64;
        crate::each_index!(I < len, {
            m = m.max(get(I).0.to_f64().to_bits() & !(1 << 63));
        });
        acc.max(m)
    }
}

impl<T: Float> AbsMax<T> {
    /// The accumulator of an f32 magnitude (a NaN stays above +∞).
    #[inline(always)]
    fn lift_f32(m: f32) -> u64 {
        (m as f64).to_bits() & !(1 << 63)
    }
}
