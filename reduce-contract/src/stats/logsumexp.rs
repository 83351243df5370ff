//! `log Σ exp(x)` in one read, by the online max-rescale recurrence (the softmax statistics).
use core::marker::PhantomData;

use super::in_f32;
use crate::math::{exp2_f32, exp2_f64, ln};
use crate::op::{Float, Pod, ReduceOp};

/// The greatest element and `Σ exp(x − max)`, in f64, merged by `s = s₁·exp(m₁ − m) + s₂·exp(m₂ − m)` with
/// `m = max(m₁, m₂)`. An element equal to the running maximum contributes exactly 1 (so `+∞` elements
/// count 1 each, and a run of −∞ its length); a NaN makes both NaN.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct ExpSum {
    /// The greatest element (−∞ for none).
    pub max: f64,
    /// `Σ exp(xᵢ − max)`.
    pub sum: f64,
}

// SAFETY: two f64, no pointers, no padding.
unsafe impl Pod for ExpSum {}

#[cfg(feature = "cust")]
// SAFETY: plain f64s.
unsafe impl cust_core::DeviceCopy for ExpSum {}

impl Default for ExpSum {
    /// No element: `{ −∞, 0 }`.
    fn default() -> Self {
        ExpSum {
            max: f64::NEG_INFINITY,
            sum: 0.0,
        }
    }
}

const NAN: ExpSum = ExpSum {
    max: f64::NAN,
    sum: f64::NAN,
};

/// `exp(x − m)` for `x ≤ m`: exactly 1 when `x == m` (also `x = m = ±∞`), by `exp2_f64`.
#[inline(always)]
fn term(x: f64, m: f64) -> f64 {
    if x == m {
        1.0
    } else {
        exp2_f64((x - m) * core::f64::consts::LOG2_E)
    }
}

impl ExpSum {
    /// `max + ln(sum)`: the log-sum-exp (−∞ for no element).
    pub fn logsumexp(&self) -> f64 {
        self.max + ln(self.sum)
    }

    /// The statistics of two disjoint sets.
    #[inline(always)]
    pub fn merge(a: ExpSum, b: ExpSum) -> ExpSum {
        #[allow(clippy::eq_op)]
        if a.max != a.max || b.max != b.max {
            return NAN;
        }
        let m = a.max.max(b.max);
        ExpSum {
            max: m,
            sum: a.sum * term(a.max, m) + b.sum * term(b.max, m),
        }
    }

    /// Folds a run of `len` elements into `acc`: the run's maximum `m` first, then one exponential per
    /// element against `max(m, acc.max)`, so `acc`'s sum is rescaled (an f64 exponential) only when the run
    /// raises the maximum, which after a thread's first runs is rare. For elements of up to 4 bytes an
    /// element costs a `max`, a subtraction, a multiplication, an `ex2.approx.ftz` and an addition in f32.
    #[inline(always)]
    pub fn fold_run<T: Float>(acc: ExpSum, len: usize, get: impl Fn(usize) -> T) -> ExpSum {
        if !in_f32::<T>() || acc.max.is_nan() {
            return ExpSum::merge(acc, ExpSum::of_run(len, get));
        }
        let (mut m, mut nan) = (f32::NEG_INFINITY, false);
        crate::each_index!(I < len, {
            let x = get(I).to_f32();
            nan |= x.is_nan();
            m = m.max(x);
        });
        // `acc.max` is −∞ or an element's value, exact in f32.
        let m = m.max(acc.max as f32);
        if nan || !m.is_finite() {
            // NaN, or a maximum of ±∞ (where `x − m` would be NaN for `x = m`): the careful steps.
            return ExpSum::merge(acc, ExpSum::of_run(len, get));
        }
        let mut s = 0.0f32;
        crate::each_index!(I < len, {
            s += exp2_f32((get(I).to_f32() - m) * core::f32::consts::LOG2_E);
        });
        let m64 = m as f64;
        let kept = if m64 == acc.max {
            acc.sum
        } else {
            acc.sum * term(acc.max, m64)
        };
        ExpSum {
            max: m64,
            sum: kept + s as f64,
        }
    }

    /// The statistics of a run of `len ≥ 1` elements: its maximum, then one exponential per element
    /// against it (`ex2.approx` in f32 for elements of up to 4 bytes, [`exp2_f64`] for f64).
    #[inline(always)]
    pub fn of_run<T: Float>(len: usize, get: impl Fn(usize) -> T) -> ExpSum {
        let mut nan = false;
        if in_f32::<T>() {
            let mut m = f32::NEG_INFINITY;
            crate::each_index!(I < len, {
                let x = get(I).to_f32();
                #[allow(clippy::eq_op)]
                {
                    nan |= x != x;
                }
                m = m.max(x);
            });
            let mut s = 0.0f32;
            crate::each_index!(I < len, {
                let x = get(I).to_f32();
                s += if x == m {
                    1.0
                } else {
                    exp2_f32((x - m) * core::f32::consts::LOG2_E)
                };
            });
            return if nan {
                NAN
            } else {
                ExpSum {
                    max: m as f64,
                    sum: s as f64,
                }
            };
        }
        let mut m = f64::NEG_INFINITY;
        crate::each_index!(I < len, {
            let x = get(I).to_f64();
            #[allow(clippy::eq_op)]
            {
                nan |= x != x;
            }
            m = m.max(x);
        });
        let mut s = 0.0f64;
        crate::each_index!(I < len, {
            s += term(get(I).to_f64(), m);
        });
        if nan { NAN } else { ExpSum { max: m, sum: s } }
    }
}

/// `log Σ exp(x)` without overflow, in one read ([`ExpSum::logsumexp`] finishes the accumulator).
/// Elements of up to 4 bytes are exponentiated in f32 (`ex2.approx`, about 2 ulp per term, as
/// `softmax_stats`), f64 ones in f64.
pub struct LogSumExp<T>(PhantomData<T>);

impl<T: Float> ReduceOp for LogSumExp<T> {
    type In = T;
    type Acc = ExpSum;
    type Out = ExpSum;
    const NAME: &'static str = "logsumexp";

    fn identity() -> ExpSum {
        ExpSum::default()
    }
    fn lift(x: T, _index: u64) -> ExpSum {
        ExpSum::of_run(1, |_| x)
    }
    fn combine(a: ExpSum, b: ExpSum) -> ExpSum {
        ExpSum::merge(a, b)
    }
    fn finalize(acc: ExpSum) -> ExpSum {
        acc
    }
    #[inline(always)]
    fn fold_run(acc: ExpSum, len: usize, get: impl Fn(usize) -> (T, u64)) -> ExpSum {
        ExpSum::fold_run(acc, len, |i| get(i).0)
    }
}
