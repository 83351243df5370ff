//! The built-in operators' laws on the CPU: identity, commutativity, associativity where it is exact, the
//! argmax rule (NaN first, ties to the smaller index, ±0 equal), and `fold_run` equal to the default fold.
use super::*;

/// `O` folded over `xs` in order, one element at a time: the definition `fold_run` must match.
fn fold<O: ReduceOp>(xs: &[O::In]) -> O::Acc {
    xs.iter().enumerate().fold(O::identity(), |a, (i, &x)| {
        O::combine(a, O::lift(x, i as u64))
    })
}

/// `O` over `xs` in runs of `len` as the device-wide pass folds them: the first by `fold_run`, the rest
/// by `fold_run_deferred`, then `revisit`.
fn deferred<O: ReduceOp>(xs: &[O::In], len: usize) -> O::Acc {
    let mut acc = O::identity();
    for (c, run) in xs.chunks(len).enumerate() {
        let get = |i: usize| (run[i], (c * len + i) as u64);
        acc = if c == 0 {
            O::fold_run(acc, len, get)
        } else {
            O::fold_run_deferred(acc, len, get)
        };
    }
    O::revisit(acc, len, |first| {
        move |i| (xs[first as usize + i], first + i as u64)
    })
}

/// `O` over `xs` in runs of `len` through `fold_run`.
fn runs<O: ReduceOp>(xs: &[O::In], len: usize) -> O::Acc {
    xs.chunks(len)
        .enumerate()
        .fold(O::identity(), |a, (c, run)| {
            O::fold_run(a, len, |i| (run[i], (c * len + i) as u64))
        })
}

const SAMPLES: [f32; 12] = [
    1.5,
    -2.0,
    0.0,
    -0.0,
    f32::INFINITY,
    f32::NEG_INFINITY,
    3.25,
    3.25,
    -7.0,
    1e-30,
    f32::NAN,
    -1e30,
];

fn same_bits(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn identities_are_neutral_and_combines_commute() {
    for &a in &SAMPLES {
        for &b in &SAMPLES {
            assert_eq!(
                Sum::<f32>::combine(a, b).to_bits(),
                Sum::<f32>::combine(b, a).to_bits()
            );
            for (x, y) in [
                (Max::<f32>::combine(a, b), Max::<f32>::combine(b, a)),
                (Min::<f32>::combine(a, b), Min::<f32>::combine(b, a)),
            ] {
                assert!(same_bits(x, y), "{a} {b}: {x} vs {y}");
            }
            let (ia, ib) = (ArgMax::<f32>::lift(a, 3), ArgMax::<f32>::lift(b, 5));
            let (l, r) = (
                ArgMax::<f32>::combine(ia, ib),
                ArgMax::<f32>::combine(ib, ia),
            );
            assert!(same_bits(l.value, r.value) && l.index == r.index);
        }
        assert!(same_bits(Max::<f32>::combine(Max::<f32>::identity(), a), a));
        assert!(same_bits(Min::<f32>::combine(a, Min::<f32>::identity()), a));
        let ia = ArgMin::<f32>::lift(a, 9);
        assert_eq!(
            ArgMin::<f32>::combine(ArgMin::<f32>::identity(), ia).index,
            9
        );
    }
    assert_eq!(Sum::<i32>::combine(Sum::<i32>::identity(), -4), -4);
}

#[test]
fn extremes_follow_ieee_maximum() {
    assert!(Max::<f32>::combine(1.0, f32::NAN).is_nan());
    assert!(Min::<f64>::combine(f64::NAN, 1.0).is_nan());
    assert!(Max::<f32>::combine(-0.0, 0.0).is_sign_positive());
    assert!(Min::<f32>::combine(0.0, -0.0).is_sign_negative());
    assert_eq!(Max::<u8>::combine(3, 250), 250);
    assert_eq!(Min::<i64>::combine(-3, 2), -3);
    assert_eq!(<Max<f32> as ReduceOp>::NAME, "max");
    assert_eq!(<ArgMin<u8> as ReduceOp>::NAME, "argmin");
}

#[test]
fn sums_widen_and_wrap() {
    assert_eq!(fold::<Sum<u8>>(&[200, 100]), 300u64);
    assert_eq!(fold::<Sum<i32>>(&[i32::MIN, -1]), i32::MIN as i64 - 1);
    assert_eq!(Sum::<u64>::combine(u64::MAX, 2), 1);
}

#[test]
fn argmax_takes_the_first_nan_then_the_first_best() {
    let xs = [1.0f32, 4.0, -0.0, 4.0, 0.0, f32::NAN, 9.0, f32::NAN];
    let best = fold::<ArgMax<f32>>(&xs);
    assert!(best.value.is_nan() && best.index == 5);
    let best = fold::<ArgMax<f32>>(&xs[..5]);
    assert_eq!((best.value, best.index), (4.0, 1));
    // -0.0 and +0.0 tie: the first wins, with its own bits.
    let best = fold::<ArgMin<f32>>(&[0.5, -0.0, 0.0]);
    assert!(best.index == 1 && best.value.is_sign_negative());
    assert_eq!(fold::<ArgMax<f32>>(&[]).index, u64::MAX);
}

#[test]
fn the_value_first_run_fold_is_the_element_fold() {
    // Patterns with ties, NaNs and ±0 in every position of runs of 1…16.
    let xs: [f32; 48] = core::array::from_fn(|i| SAMPLES[(i * 7 + i / 5) % SAMPLES.len()]);
    for len in [1, 2, 4, 8, 16] {
        for cut in 0..4 {
            let xs = &xs[cut * len..];
            let xs = &xs[..xs.len() / len * len];
            for (a, b) in [
                (fold::<ArgMax<f32>>(xs), runs::<ArgMax<f32>>(xs, len)),
                (fold::<ArgMin<f32>>(xs), runs::<ArgMin<f32>>(xs, len)),
                (fold::<ArgMax<f32>>(xs), deferred::<ArgMax<f32>>(xs, len)),
                (fold::<ArgMin<f32>>(xs), deferred::<ArgMin<f32>>(xs, len)),
            ] {
                assert!(
                    same_bits(a.value, b.value) && a.index == b.index,
                    "{a:?} vs {b:?}"
                );
            }
            let ints: [u8; 48] = core::array::from_fn(|i| (i * 37 % 11) as u8);
            let ints = &ints[..xs.len()];
            assert_eq!(fold::<ArgMax<u8>>(ints), runs::<ArgMax<u8>>(ints, len));
            assert_eq!(fold::<ArgMax<u8>>(ints), deferred::<ArgMax<u8>>(ints, len));
            assert_eq!(fold::<ArgMin<u8>>(ints), deferred::<ArgMin<u8>>(ints, len));
            assert_eq!(fold::<Sum<u8>>(ints), runs::<Sum<u8>>(ints, len));
        }
    }
}

/// Argmax's warp exchange on the device compares top-k's order keys with one `redux.sync.max` instead of
/// the values with `pick`: so the greater key must be exactly the value `choose` prefers, and equal keys
/// exactly the values `same` calls equal (both zeros, every NaN).
#[test]
fn order_keys_rank_as_the_argmax_rule() {
    use crate::topk::value_key;
    fn check<T: Ordered + crate::topk::TopKElement + core::fmt::Debug>(xs: &[T]) {
        for &a in xs {
            for &b in xs {
                for greatest in [true, false] {
                    let (ka, kb) = (value_key(a, greatest), value_key(b, greatest));
                    assert_eq!(ka == kb, a.same(b), "{a:?} {b:?}");
                    // `a` at the larger index still wins exactly when its value is better.
                    let (ia, ib) = (
                        Indexed { value: a, index: 1 },
                        Indexed { value: b, index: 0 },
                    );
                    let a_wins = if greatest {
                        choose::<T, Greatest>(ia, ib).index == 1
                    } else {
                        choose::<T, Least>(ia, ib).index == 1
                    };
                    assert_eq!(ka > kb, a_wins, "{a:?} {b:?} greatest={greatest}");
                }
            }
        }
    }
    let mut floats = SAMPLES.to_vec();
    floats.extend([
        f32::from_bits(0x7fc0_0001),
        f32::from_bits(0xffc0_0000),
        f32::MIN_POSITIVE / 2.0,
        -f32::MIN_POSITIVE / 2.0,
        f32::MAX,
        f32::MIN,
    ]);
    check(&floats);
    check(&[0u8, 1, 127, 128, 255]);
    check(&[i32::MIN, -1, 0, 1, i32::MAX]);
    check(&[0u32, 1, u32::MAX / 2, u32::MAX / 2 + 1, u32::MAX]);
    for a in &floats {
        for b in &floats {
            assert_eq!(a.same(*b), (a == b) || (a.is_nan() && b.is_nan()));
        }
    }
}
