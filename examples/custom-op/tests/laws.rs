//! The operators' laws on the CPU (no GPU needed): the identity is neutral on both sides, the run fold the
//! kernels call gives what lifting and combining one by one gives, and Welford keeps the variance of data
//! far from zero where the naive formula fails.
use custom_op::{close, cpu};
use custom_ops::{AbsMax, SumSquares, Welford};
use reduce_host::custom::ReduceOp;

fn run_fold<O: ReduceOp>(xs: &[O::In]) -> O::Acc {
    O::fold_run(O::identity(), xs.len(), |i| (xs[i], i as u64))
}

#[test]
fn the_identity_is_neutral() {
    for x in [0.0f32, -3.5, 7.25, f32::INFINITY] {
        let a = AbsMax::<f32>::lift(x, 0);
        assert_eq!(AbsMax::<f32>::combine(AbsMax::<f32>::identity(), a), a);
        assert_eq!(AbsMax::<f32>::combine(a, AbsMax::<f32>::identity()), a);
        let m = Welford::<f32>::lift(x, 0);
        assert_eq!(Welford::<f32>::combine(Welford::<f32>::identity(), m), m);
        assert_eq!(Welford::<f32>::combine(m, Welford::<f32>::identity()), m);
    }
}

#[test]
fn the_run_fold_matches_one_by_one() {
    let xs: Vec<f32> = (0..64).map(|i| 1e6 + (i * 37 % 11) as f32 / 3.0).collect();
    for len in [4usize, 8, 16, 32, 64] {
        let run = Welford::<f32>::finalize(run_fold::<Welford<f32>>(&xs[..len]));
        let seq = Welford::<f32>::finalize(cpu::<Welford<f32>>(&xs[..len]));
        assert!(custom_op::mean_var_close(&run, &seq), "{len}");
        assert_eq!(
            run_fold::<AbsMax<f32>>(&xs[..len]),
            cpu::<AbsMax<f32>>(&xs[..len])
        );
        let a = run_fold::<SumSquares<f32>>(&xs[..len]) as f64;
        assert!(close(a, cpu::<SumSquares<f32>>(&xs[..len]) as f64, 1e-6));
    }
}

#[test]
fn welford_keeps_the_variance_of_values_near_a_million() {
    // 1e6 + U(0, 1) in f64: the variance is 1/12; the naive formula in f64 has an error of about
    // n · 1e12 · 2^-53 per term, far above 1e-6 relative.
    let xs: Vec<f64> = (0..100_000)
        .map(|i| 1e6 + ((i * 7919) % 10_007) as f64 / 10_007.0)
        .collect();
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let exact = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / xs.len() as f64;
    let got = Welford::<f64>::finalize(cpu::<Welford<f64>>(&xs));
    assert!(
        close(got.variance, exact, 1e-6),
        "{} vs {exact}",
        got.variance
    );
}
