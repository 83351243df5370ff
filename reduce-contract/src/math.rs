//! Float arithmetic an operator needs that `core` does not give on both sides.
//!
//! Rust never fuses `a * b + c` into one instruction (that would change the rounding), so an operator
//! whose inner loop is a sum of products pays a multiply and an add per element. On the GPU,
//! [`mul_add`] is one `fma.rn`: one instruction, one rounding. A Welford fold over bf16 rows issued a
//! tenth fewer instructions with it.
//!
//! ```
//! use reduce_contract::math::mul_add;
//! assert_eq!(mul_add(3.0f32, 4.0, 0.5), 12.5);
//! ```

/// The float types [`mul_add`] takes.
pub trait MulAdd: Copy + sealed::Sealed {
    /// `self * b + c`.
    fn mul_add(self, b: Self, c: Self) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// `a * b + c`, rounded once on the GPU (`fma.rn`).
///
/// On the CPU (a `no_std` crate has no fused multiply-add there) it is rounded twice for f64, and for f32
/// computed in f64 (the product of two f32 is exact in f64) then rounded, which differs from the fused result
/// only when that double rounding lands on the other side of a tie. A CPU reference of an operator that uses
/// it agrees with the GPU to the last bit or so, not bit for bit.
#[inline(always)]
pub fn mul_add<T: MulAdd>(a: T, b: T, c: T) -> T {
    a.mul_add(b, c)
}

impl MulAdd for f32 {
    #[inline(always)]
    fn mul_add(self, b: f32, c: f32) -> f32 {
        #[cfg(target_arch = "nvptx64")]
        {
            core::f32::math::mul_add(self, b, c)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            (self as f64 * b as f64 + c as f64) as f32
        }
    }
}

impl MulAdd for f64 {
    #[inline(always)]
    fn mul_add(self, b: f64, c: f64) -> f64 {
        #[cfg(target_arch = "nvptx64")]
        {
            core::f64::math::mul_add(self, b, c)
        }
        #[cfg(not(target_arch = "nvptx64"))]
        {
            self * b + c
        }
    }
}

/// `2^x` in f32: one `ex2.approx.ftz.f32` on the GPU (one instruction: about 2 ulp, results below 2^−126
/// flushed to 0, `2^−∞ = +0`, NaN stays NaN), `exp2f` of `libm` on the CPU.
#[inline(always)]
pub fn exp2_f32(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        let r: f32;
        // SAFETY: a register-only instruction, defined for every input.
        unsafe {
            core::arch::asm!("ex2.approx.ftz.f32 {0}, {1};", out(reg32) r, in(reg32) x,
                options(pure, nomem, nostack))
        };
        r
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        libm::exp2f(x)
    }
}

/// `2^x` in f64, within about 2 ulp, by the same code on both sides (the GPU has no f64 exponential
/// instruction): `x = k + f` with `k` the nearest integer, `2^f` by its Taylor series in `f·ln 2`
/// (|f| ≤ ½, 14 terms), and `2^k` put in the exponent. NaN stays NaN, `2^−∞ = +0`, `2^+∞ = +∞`.
#[inline(always)]
pub fn exp2_f64(x: f64) -> f64 {
    #[allow(clippy::eq_op)]
    if x != x {
        return x;
    }
    if x < -1080.0 {
        return 0.0;
    }
    if x > 1025.0 {
        return f64::INFINITY;
    }
    // Adding and removing 1.5·2^52 rounds to the nearest integer (|x| ≤ 2^51).
    const ROUND: f64 = 6755399441055744.0;
    let k = (x + ROUND) - ROUND;
    let t = (x - k) * core::f64::consts::LN_2;
    // e^t = Σ t^i / i!, i ≤ 13: the first term left out is below 2^−56 for |t| ≤ ln2 / 2.
    const INV_FACT: [f64; 14] = {
        let mut c = [1.0f64; 14];
        let mut i = 1;
        while i < 14 {
            c[i] = c[i - 1] / i as f64;
            i += 1;
        }
        c
    };
    let mut p = INV_FACT[13];
    let mut i = 13;
    while i > 0 {
        i -= 1;
        p = mul_add(p, t, INV_FACT[i]);
    }
    let k = k as i64;
    // 2^k as an f64 for −1022 ≤ k ≤ 1023; scaled in two steps outside that (subnormal or overflowing
    // results).
    let pow2 = |e: i64| f64::from_bits(((e + 1023) as u64) << 52);
    if k < -1022 {
        p * pow2(k + 64) * pow2(-64)
    } else if k > 1023 {
        p * pow2(k - 64) * pow2(64)
    } else {
        p * pow2(k)
    }
}

/// The natural logarithm (on the host; `libm`'s).
#[inline(always)]
pub fn ln(x: f64) -> f64 {
    libm::log(x)
}
