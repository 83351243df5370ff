//! The softmax statistics of a row as a reduction operator: the accumulator is `(max, sum_exp)` with
//! `sum_exp = Σ exp(xᵢ − max)`, merged by the online-softmax recurrence
//!
//! ```text
//! m = max(m₁, m₂),  s = s₁ · exp(m₁ − m) + s₂ · exp(m₂ − m)
//! ```
//!
//! so one read of the row gives both, through the same segmented kernels as every other operator. All
//! arithmetic is f32 (16-bit inputs are widened exactly). `exp` is `ex2.approx` of `x · log₂e`: about 2 ulp
//! per term for the arguments that matter (`x − max` in [−20, 0]; smaller terms are below f32's resolution
//! of a sum that is at least 1).
//!
//! Special values (see `reduce_contract::SoftmaxStats`): a NaN makes both statistics NaN; an element equal
//! to the running maximum contributes exactly 1, so a row of −∞ gives `{ −∞, len }` and +∞ elements count
//! 1 each while finite ones then contribute `exp(−∞) = 0`.
use core::arch::asm;
use core::marker::PhantomData;

use crate::half::{BF16, F16};
use crate::op::{DeviceOp, OrdElement};
use crate::shuffle::Shuffle;
pub use reduce_contract::SoftmaxStats;

/// Element types of the softmax statistics: widened exactly to f32.
pub trait SoftmaxElement: Copy + OrdElement {
    /// The value as f32.
    fn to_f32(self) -> f32;
}

impl SoftmaxElement for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
}

impl SoftmaxElement for F16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        F16::to_f32(self)
    }
}

impl SoftmaxElement for BF16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        BF16::to_f32(self)
    }
}

// SAFETY: two f32 words, moved in field order.
unsafe impl Shuffle for SoftmaxStats {
    #[inline(always)]
    fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
        SoftmaxStats {
            max: self.max.map_words(&mut f),
            sum_exp: self.sum_exp.map_words(f),
        }
    }
}

/// `2^x` (`ex2.approx.f32`: about 2 ulp; `2^−∞ = +0`, subnormal results kept).
#[inline(always)]
fn ex2(x: f32) -> f32 {
    let r: f32;
    // SAFETY: a register-only instruction, defined for every input.
    unsafe {
        asm!("ex2.approx.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack))
    };
    r
}

/// `exp(x − m)` for `x <= m` (`m` the maximum `x` is folded against, not NaN): exactly 1 when `x == m`
/// (which also covers `x = m = ±∞`, where `x − m` would be NaN), `+0` for `x = −∞ < m`.
#[inline(always)]
fn term(x: f32, m: f32) -> f32 {
    if x == m {
        1.0
    } else {
        ex2((x - m) * core::f32::consts::LOG2_E)
    }
}

/// NaN statistics: what any NaN in a row gives.
const NAN_STATS: SoftmaxStats = SoftmaxStats {
    max: f32::NAN,
    sum_exp: f32::NAN,
};

/// The softmax statistics of `T` rows.
pub struct Softmax<T>(PhantomData<T>);

impl<T: SoftmaxElement> DeviceOp for Softmax<T> {
    type In = T;
    type Acc = SoftmaxStats;

    /// An empty row: `{ −∞, 0 }`.
    #[inline(always)]
    fn identity() -> SoftmaxStats {
        SoftmaxStats {
            max: f32::NEG_INFINITY,
            sum_exp: 0.0,
        }
    }

    #[inline(always)]
    fn lift(x: T, _: u64) -> SoftmaxStats {
        SoftmaxStats {
            max: x.to_f32(),
            sum_exp: 1.0,
        }
    }

    #[inline(always)]
    fn combine(a: SoftmaxStats, b: SoftmaxStats) -> SoftmaxStats {
        let m = a.max.maximum(b.max);
        if m.is_nan() {
            return NAN_STATS;
        }
        SoftmaxStats {
            max: m,
            sum_exp: a.sum_exp * term(a.max, m) + b.sum_exp * term(b.max, m),
        }
    }

    /// The run's maximum first (a NaN-propagating tree), then one `exp` per element against the new
    /// maximum, summed pairwise, and the running sum rescaled once: one exponential per element rather than
    /// the two a combine per element would take.
    #[inline(always)]
    fn fold_run(acc: SoftmaxStats, len: usize, get: impl Fn(usize) -> (T, u64)) -> SoftmaxStats {
        let mut tree = [f32::NEG_INFINITY; 64];
        each_index!(I < len, {
            tree[I] = get(I).0.to_f32();
        });
        let mut best = tree;
        pairwise_tree!(best, len, f32::maximum);
        let m = acc.max.maximum(best[0]);
        if m.is_nan() {
            return NAN_STATS;
        }
        each_index!(I < len, {
            tree[I] = term(tree[I], m);
        });
        pairwise_tree!(tree, len, |a: f32, b: f32| a + b);
        SoftmaxStats {
            max: m,
            sum_exp: acc.sum_exp * term(acc.max, m) + tree[0],
        }
    }
}
