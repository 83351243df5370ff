//! Statistics in one read of the input, as `ReduceOp`s: the operators behind
//! `reduce-host`'s `stats`, `var_mean`, `aminmax`, the norms and `logsumexp`, device-wide and per row.
//!
//! They are written exactly as a user's operator is, and `kernels-gpu` exports their kernels with the same
//! `export_reduce!` into the library's own images (one module per statistic and element type, loaded on
//! first use), so the user path is the path every statistic takes, and a user can reuse their accumulators
//! ([`Moments`] is Welford's, merged by Chan's formula) in operators of their own.
//!
//! | operator | accumulator | what the host gives |
//! |---|---|---|
//! | [`Welford`] | [`Moments`]: count, mean, M2 (f64) | mean and variance |
//! | [`MinMax`] | [`Extrema`]: min and max (f64) with their first indices | `aminmax` |
//! | [`Summary`] | [`Moments`] and [`Extrema`] | every statistic of `stats` |
//! | [`AbsSum`] | Σ\|x\| (f64) | the L1 norm |
//! | [`SquareSum`] | [`Squares`]: count and a scaled Σx² (f64) | the L2 norm, the mean square |
//! | [`AbsMax`] | max \|x\| (f64 bits) | the ∞-norm (an FP8 scale) |
//! | [`LogSumExp`] | [`ExpSum`]: max and Σexp(x − max) | `logsumexp` |
//!
//! All are generic over the float elements (f32, f64, f16, bf16). Runs of up to 4-byte elements are folded
//! in f32, where every such element is exact, and only a run's result is widened to f64: widening every
//! element would make a bf16 reduction wait on conversions instead of on memory.
use crate::kernels::Stat;
use crate::op::ReduceOp;

mod extrema;
mod logsumexp;
mod moments;
mod norms;
mod summary;

#[doc(hidden)]
pub use extrema::{Bounds, RunFloat};
pub use extrema::{Extrema, MinMax};
pub use logsumexp::{ExpSum, LogSumExp};
pub use moments::{Moments, Welford};
pub use norms::{AbsMax, AbsSum, SquareSum, Squares};
pub use summary::{Summary, SummaryAcc};

/// A statistic built into the library's images: its key names its module (`stat_<word>_<element>`),
/// whose kernels `kernels-gpu` exports under the operator's [`ReduceOp::NAME`], which is the key's word.
pub trait Statistic: ReduceOp<Acc: crate::op::Pod> {
    /// Which statistic.
    const STAT: Stat;
}

/// Calls `$m!` with every statistic: `word = Operator;`, the list `kernels-gpu` exports and the
/// [`Stat`] keys mirror (the host's build refuses a module whose kernels are missing, or kernels in none).
#[macro_export]
macro_rules! statistics {
    ($m:ident) => {
        $m! {
            var_mean = Welford;
            aminmax = MinMax;
            stats = Summary;
            norm_l1 = AbsSum;
            norm_l2 = SquareSum;
            norm_inf = AbsMax;
            logsumexp = LogSumExp;
        }
    };
}

macro_rules! statistic_keys {
    ($($word:ident = $op:ident;)*) => {$(
        impl<T: crate::op::Float> Statistic for $op<T> {
            const STAT: Stat = {
                let stat = Stat::$op;
                assert!(crate::op::same_name(stat.word(), stringify!($word)));
                stat
            };
        }
    )*};
}
statistics!(statistic_keys);

/// Whether a run of `T` is folded in f32: elements of up to 4 bytes are exact there.
#[inline(always)]
pub(crate) const fn in_f32<T>() -> bool {
    size_of::<T>() <= 4
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    use super::*;
    use crate::math::exp2_f64;

    /// Folds `xs` the way the kernels may: element by element, or in runs of `run`.
    fn fold<O: ReduceOp>(xs: &[O::In], run: usize) -> O::Acc {
        if run == 0 {
            return xs.iter().enumerate().fold(O::identity(), |a, (i, &x)| {
                O::combine(a, O::lift(x, i as u64))
            });
        }
        xs.chunks(run)
            .enumerate()
            .fold(O::identity(), |a, (c, chunk)| {
                O::fold_run(a, chunk.len(), |i| (chunk[i], (c * run + i) as u64))
            })
    }

    /// Folds `xs` as the device-wide pass does: element 0 lifted alone when `head`, then runs of `run` by
    /// `fold_run_deferred` (the last partial one by `fold_run`), revisited once after the whole runs.
    fn fold_deferred<O: ReduceOp>(xs: &[O::In], run: usize, head: bool) -> O::Acc {
        let start = usize::from(head && !xs.is_empty());
        let mut acc = O::identity();
        if start == 1 {
            acc = O::combine(acc, O::lift(xs[0], 0));
        }
        let body = &xs[start..];
        let whole = body.len() / run * run;
        for (c, chunk) in body[..whole].chunks(run).enumerate() {
            acc = O::fold_run_deferred(acc, run, |i| (chunk[i], (start + c * run + i) as u64));
        }
        acc = O::revisit(acc, run, |first| {
            move |i| (xs[first as usize + i], first + i as u64)
        });
        let rest = &body[whole..];
        if !rest.is_empty() {
            acc = O::fold_run(acc, rest.len(), |i| (rest[i], (start + whole + i) as u64));
        }
        acc
    }

    #[test]
    fn deferred_runs_find_the_indices_runs_at_once_do() {
        let mut sets: Vec<Vec<f32>> = std::vec![
            data(),
            (0..200).map(|i| i as f32).collect(),
            (0..200).map(|i| -(i as f32)).collect(),
            std::vec![2.5; 100],
            std::vec![f32::INFINITY; 40],
            std::vec![f32::NEG_INFINITY; 40],
            (0..96)
                .map(|i| if i % 2 == 0 { -0.0 } else { 0.0 })
                .collect(),
        ];
        for at in [0, 5, 17, 63, 64, 99] {
            let mut xs = data()[..100].to_vec();
            xs[at] = f32::NAN;
            xs[(at + 31) % 100] = f32::NAN;
            sets.push(xs);
            let mut xs = data()[..100].to_vec();
            xs[at] = f32::INFINITY;
            xs[(at + 40) % 100] = f32::NEG_INFINITY;
            sets.push(xs);
        }
        for xs in &sets {
            for run in [4, 16, 32] {
                for head in [false, true] {
                    let a = fold::<MinMax<f32>>(xs, run);
                    let b = fold_deferred::<MinMax<f32>>(xs, run, head);
                    assert_eq!(a.argmin, b.argmin, "{xs:?} run {run}");
                    assert_eq!(a.argmax, b.argmax, "{xs:?} run {run}");
                    assert_eq!(a.min.to_bits(), b.min.to_bits());
                    assert_eq!(a.max.to_bits(), b.max.to_bits());
                    let (a, b) = (
                        fold::<Summary<f32>>(xs, run),
                        fold_deferred::<Summary<f32>>(xs, run, head),
                    );
                    assert_eq!(a.extrema.argmin, b.extrema.argmin);
                    assert_eq!(a.extrema.argmax, b.extrema.argmax);
                    let wide: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
                    let (c, d) = (
                        fold::<MinMax<f64>>(&wide, run),
                        fold_deferred::<MinMax<f64>>(&wide, run, head),
                    );
                    assert_eq!((c.argmin, c.argmax), (d.argmin, d.argmax));
                }
            }
        }
    }

    #[test]
    fn runs_past_the_f32_fit_take_f64_in_pieces() {
        // A spread of 2^61 does not fit; the f64 pieces give the two-pass moments.
        let xs: Vec<f32> = (0..32).map(|i| (i as f32 - 15.5) * 1.5e17).collect();
        let m = fold::<Summary<f32>>(&xs, 32).moments;
        let wide: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
        let mean = wide.iter().sum::<f64>() / 32.0;
        let m2: f64 = wide.iter().map(|x| (x - mean) * (x - mean)).sum();
        assert_eq!(m.n, 32.0);
        assert!((m.mean - mean).abs() <= 1e-9 * 1.5e17);
        assert!((m.m2 - m2).abs() <= 1e-12 * m2);
        // An infinity: the mean is infinite, the variance NaN; a NaN: both NaN.
        let mut inf = xs.clone();
        inf[3] = f32::INFINITY;
        let m = fold::<Summary<f32>>(&inf, 32).moments;
        assert!(m.mean == f64::INFINITY && m.m2.is_nan());
        inf[9] = f32::NAN;
        let m = fold::<Summary<f32>>(&inf, 32).moments;
        assert!(m.mean.is_nan() && m.m2.is_nan());
    }

    fn data() -> Vec<f32> {
        (0..1000)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 37.0)
            .collect()
    }

    #[test]
    fn runs_fold_as_elements_do() {
        let xs = data();
        for run in [1, 2, 16, 64] {
            let (a, b) = (fold::<Welford<f32>>(&xs, 0), fold::<Welford<f32>>(&xs, run));
            assert_eq!(a.n, b.n);
            assert!((a.mean - b.mean).abs() < 1e-6 && (a.m2 - b.m2).abs() < 1e-6 * a.m2);
            assert_eq!(fold::<MinMax<f32>>(&xs, 0), fold::<MinMax<f32>>(&xs, run));
            assert_eq!(fold::<AbsMax<f32>>(&xs, 0), fold::<AbsMax<f32>>(&xs, run));
            let (a, b) = (fold::<AbsSum<f32>>(&xs, 0), fold::<AbsSum<f32>>(&xs, run));
            assert!((a - b).abs() < 1e-6 * a);
            let (a, b) = (
                fold::<SquareSum<f32>>(&xs, 0),
                fold::<SquareSum<f32>>(&xs, run),
            );
            assert!((a.norm() - b.norm()).abs() < 1e-6 * a.norm());
            let (a, b) = (
                fold::<LogSumExp<f32>>(&xs, 0),
                fold::<LogSumExp<f32>>(&xs, run),
            );
            assert!((a.logsumexp() - b.logsumexp()).abs() < 1e-6);
            let (a, b) = (fold::<Summary<f32>>(&xs, 0), fold::<Summary<f32>>(&xs, run));
            assert_eq!(a.extrema, b.extrema);
        }
    }

    #[test]
    fn identities_are_neutral() {
        let m = Moments {
            n: 3.0,
            mean: 2.0,
            m2: 5.0,
        };
        assert_eq!(Moments::merge(Moments::default(), m), m);
        assert_eq!(Moments::merge(m, Moments::default()), m);
        let e = Extrema {
            min: -0.0,
            max: f64::INFINITY,
            argmin: 4,
            argmax: 9,
        };
        assert_eq!(Extrema::merge(Extrema::default(), e), e);
        assert_eq!(Extrema::merge(e, Extrema::default()), e);
        let s = Squares {
            n: 2.0,
            scale: 8.0,
            ssq: 1.5,
        };
        assert_eq!(Squares::merge(Squares::default(), s), s);
        let x = ExpSum { max: 1.0, sum: 2.0 };
        assert_eq!(ExpSum::merge(ExpSum::default(), x), x);
        assert_eq!(ExpSum::merge(x, ExpSum::default()), x);
    }

    #[test]
    fn nan_wins_the_extrema_at_its_first_index_and_ties_keep_the_first() {
        let xs = [1.0f32, f32::NAN, 5.0, f32::NAN, -3.0, 5.0, -0.0, 0.0];
        for run in [0, 1, 3, 8] {
            let e = fold::<MinMax<f32>>(&xs, run);
            assert!(e.min.is_nan() && e.max.is_nan());
            assert_eq!((e.argmin, e.argmax), (1, 1));
            let e = fold::<MinMax<f32>>(&xs[4..], run);
            assert_eq!((e.min, e.argmin, e.max, e.argmax), (-3.0, 0, 5.0, 1));
            assert_eq!(fold::<MinMax<f32>>(&[0.0, -0.0], run).argmin, 0);
        }
        assert!(f64::from_bits(fold::<AbsMax<f32>>(&xs, 4)).is_nan());
        assert!(fold::<LogSumExp<f32>>(&xs, 4).logsumexp().is_nan());
    }

    #[test]
    fn merges_in_any_order_keep_the_smaller_index_of_equal_extremes() {
        // Threads of a grid-stride loop hold interleaved indices: the later-merged side may hold the
        // smaller one.
        let at = |v: f64, i: u64| Extrema {
            min: v,
            max: v,
            argmin: i,
            argmax: i,
        };
        for (a, b) in [
            (at(1.0, 9), at(1.0, 4)),
            (at(-0.0, 9), at(0.0, 4)),
            (at(f64::NAN, 9), at(f64::NAN, 4)),
        ] {
            assert_eq!(Extrema::merge(a, b).argmin, 4);
            assert_eq!(Extrema::merge(b, a).argmax, 4);
        }
    }

    #[test]
    fn a_run_about_an_outlier_loses_at_most_its_lengths_bits() {
        // The run is summed about its first element; here that is far from the others, so `Σd²` is about
        // `n · M2` and up to log2(32) bits of f32 go, as documented.
        for first in [1000.0f32, -3.0e4, 1.0e-3] {
            let mut xs = std::vec![first];
            xs.extend((1..32).map(|i| 1.0 + i as f32 * 1.0e-3));
            let got = Moments::of_run(32, |i| xs[i]);
            let mean = xs.iter().map(|&x| x as f64).sum::<f64>() / 32.0;
            let m2: f64 = xs.iter().map(|&x| (x as f64 - mean).powi(2)).sum();
            assert!((got.mean - mean).abs() <= 1e-6 * mean.abs(), "{first}");
            let bound = 32.0 * 32.0 * f32::EPSILON as f64 * m2;
            assert!((got.m2 - m2).abs() <= bound, "{first}: {} vs {m2}", got.m2);
        }
    }

    #[test]
    fn infinite_elements_give_ieee_means() {
        let m = fold::<Welford<f32>>(&[1.0, f32::INFINITY, 2.0, f32::INFINITY], 2);
        assert_eq!(m.mean, f64::INFINITY);
        assert!(m.m2.is_nan());
        for run in [0, 1] {
            let m = fold::<Welford<f32>>(&[f32::INFINITY], run);
            assert!(m.mean == f64::INFINITY && m.m2.is_nan());
        }
        let m = fold::<Welford<f32>>(&[1.0, f32::NEG_INFINITY, f32::INFINITY], 3);
        assert!(m.mean.is_nan());
        // An infinite run merged with finite ones before and after it.
        for run in [0, 1, 2] {
            let m = fold::<Welford<f32>>(&[1.0, 3.0, f32::INFINITY, 2.0, 5.0, 7.0], run);
            assert!(m.mean == f64::INFINITY && m.m2.is_nan(), "run {run}: {m:?}");
            let m = fold::<Welford<f32>>(&[1.0, f32::NEG_INFINITY, 2.0, 5.0, f32::INFINITY], run);
            assert!(m.mean.is_nan() && m.m2.is_nan(), "run {run}: {m:?}");
        }
    }

    #[test]
    fn the_l2_norm_is_scaled_for_any_f64() {
        for v in [1e300, 1e-300, 4e-320, 1e155, 1.0] {
            let xs = [v, -v, v, v];
            for run in [0, 1, 4] {
                let got = fold::<SquareSum<f64>>(&xs, run).norm();
                assert!((got - 2.0 * v).abs() <= 1e-15 * 2.0 * v, "{v}: {got}");
            }
        }
        let inf = fold::<SquareSum<f64>>(&[1e300, f64::INFINITY, 1e-300], 0);
        assert_eq!(inf.norm(), f64::INFINITY);
        assert!(
            fold::<SquareSum<f64>>(&[1e300, f64::NAN], 1)
                .norm()
                .is_nan()
        );
    }

    #[test]
    fn exp2_is_within_two_ulp() {
        let mut x = -1100.0;
        while x < 1030.0 {
            let (got, want) = (exp2_f64(x), x.exp2());
            assert!(
                got == want
                    || (got - want).abs() <= 2.0 * f64::EPSILON * want
                    || (got - want).abs() <= 2.0 * 5e-324,
                "{x}: {got} vs {want}"
            );
            x += 0.37;
        }
        assert_eq!(exp2_f64(f64::NEG_INFINITY), 0.0);
        assert_eq!(exp2_f64(0.0), 1.0);
        assert!(exp2_f64(f64::NAN).is_nan());
    }

    #[test]
    fn statistic_keys_name_their_operators() {
        assert_eq!(<Welford<f32> as Statistic>::STAT, Stat::Welford);
        assert_eq!(<LogSumExp<f64> as ReduceOp>::NAME, Stat::LogSumExp.word());
    }
}
