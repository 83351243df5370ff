//! Property tests of every public operation on the GPU against the CPU reference, on inputs proptest draws
//! and shrinks: random lengths and sub-slice offsets; values that mix the awkward ones (NaN, ±∞, ±0,
//! subnormals, ± the largest finite) with ordinary ones, runs of equal values and planted ties; every
//! element type and every combine strategy. Ignored without a GPU.
//!
//! `REDUCE_PROPTEST_CASES` sets the cases per property (256 by default; the H200 runs use more), and
//! `REDUCE_PROPTEST_SEED` replays a run: every property prints its seed first, and a failure prints the
//! shrunk input beside it.
mod common;

use common::{
    Expected, TestElement, atomic_allowance, check_expected, check_sum_want, rng, upload_at,
};
use cust::memory::{CopyDestination, DeviceBuffer};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use reduce_host::{
    BF16, Combine, DeviceHistogram, DeviceReduce, DeviceSelect, DeviceView, F16, GreaterThan,
    LessThan, NonZero, cpu,
};

fn cases() -> u32 {
    std::env::var("REDUCE_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

/// A runner with a printed seed: `REDUCE_PROPTEST_SEED` if set, else a fresh one.
fn runner(property: &str) -> TestRunner {
    let seed: u64 = std::env::var("REDUCE_PROPTEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            t.as_nanos() as u64 ^ u64::from(std::process::id())
        });
    eprintln!("{property}: REDUCE_PROPTEST_SEED={seed}");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// One element: ordinary random values, the type's specials (NaN, ±∞, ± largest, subnormals; MIN/MAX/0 for
/// integers) and one repeated ordinary value (ties).
fn element<T: TestElement + 'static>() -> impl Strategy<Value = T> {
    prop_oneof![
        4 => any::<u64>().prop_map(|s| T::random(&mut rng(s))),
        1 => proptest::sample::select(T::specials()),
        1 => Just(T::some_value()),
    ]
}

/// An input: independent elements, or runs of equal ones (which plant ties at run starts).
fn input<T: TestElement + 'static>() -> impl Strategy<Value = Vec<T>> {
    prop_oneof![
        prop::collection::vec(element::<T>(), 0..3000),
        prop::collection::vec((element::<T>(), 1usize..300), 0..40).prop_map(|runs| {
            runs.into_iter()
                .flat_map(|(v, n)| std::iter::repeat_n(v, n))
                .collect()
        }),
    ]
}

fn combine() -> impl Strategy<Value = Combine> {
    proptest::sample::select(vec![
        Combine::Auto,
        Combine::TwoPass,
        Combine::LastBlock,
        Combine::Atomic,
    ])
}

/// Every reduction of `host` at element offset `offset` under `combine` matches the reference (Atomic
/// supports sums only, and refuses the others).
fn reductions_match<T: TestElement + 'static>(property: &str) {
    // A `RefCell`: proptest runs the property through a `Fn`.
    let reduce = std::cell::RefCell::new(DeviceReduce::new().expect("a GPU"));
    runner(property)
        .run(
            &(input::<T>(), 0usize..16, combine()),
            |(host, offset, combine)| {
                let mut reduce = reduce.borrow_mut();
                let buf = upload_at(&host, offset);
                let slice = DeviceView::from(&buf).slice(offset..offset + host.len());
                reduce.set_combine(combine);
                let what = format!("n {} offset {offset} {combine:?}", host.len());
                if combine == Combine::Atomic {
                    let want = atomic_allowance(T::sum_want(&host), &reduce);
                    check_sum_want::<T>(reduce.sum(slice).expect("sum"), want, &what);
                    prop_assert!(reduce.max(slice).is_err());
                } else {
                    check_expected(&mut reduce, slice, &Expected::of(&host), &what);
                }
                Ok(())
            },
        )
        .unwrap();
}

macro_rules! reduction_properties {
    ($($name:ident: $t:ty;)*) => {$(
        #[test]
        #[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
        fn $name() {
            reductions_match::<$t>(stringify!($name));
        }
    )*};
}
reduction_properties! {
    reductions_f32: f32;
    reductions_f64: f64;
    reductions_f16: F16;
    reductions_bf16: BF16;
    reductions_i32: i32;
    reductions_u32: u32;
    reductions_i64: i64;
    reductions_u64: u64;
    reductions_u8: u8;
}

/// Long inputs (up to 2^21 + 15 elements, past every single-block path), drawn from a seed with specials
/// planted at drawn positions: the shrunk case is the (length, offset, seed, plants) that fails.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn reductions_long_f32() {
    // A `RefCell`: proptest runs the property through a `Fn`.
    let reduce = std::cell::RefCell::new(DeviceReduce::new().expect("a GPU"));
    let plants = prop::collection::vec((any::<prop::sample::Index>(), element::<f32>()), 0..4);
    runner("reductions_long_f32")
        .run(
            &(
                0usize..(1 << 21) + 16,
                0usize..16,
                any::<u64>(),
                plants,
                combine(),
            ),
            |(n, offset, seed, plants, combine)| {
                let mut reduce = reduce.borrow_mut();
                let mut host = common::random_of::<f32>(n, seed);
                if n > 0 {
                    for (at, v) in &plants {
                        host[at.index(n)] = *v;
                    }
                }
                let buf = upload_at(&host, offset);
                let slice = DeviceView::from(&buf).slice(offset..offset + n);
                reduce.set_combine(combine);
                let what = format!("n {n} offset {offset} seed {seed} {combine:?}");
                if combine == Combine::Atomic {
                    let want = atomic_allowance(f32::sum_want(&host), &reduce);
                    check_sum_want::<f32>(reduce.sum(slice).expect("sum"), want, &what);
                } else {
                    check_expected(&mut reduce, slice, &Expected::of(&host), &what);
                }
                Ok(())
            },
        )
        .unwrap();
}

/// The three compactions against a CPU filter: the stable ones give exactly the filtered sequence, the
/// unordered one the same multiset; nothing past the count is written.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn compactions_f32() {
    // A `RefCell`: proptest runs the property through a `Fn`.
    let select = std::cell::RefCell::new(DeviceSelect::new().expect("a GPU"));
    runner("compactions_f32")
        .run(
            &(input::<f32>(), 0usize..16, element::<f32>(), 0u8..3),
            |(host, offset, threshold, which)| {
                let mut select = select.borrow_mut();
                let n = host.len();
                let buf = upload_at(&host, offset);
                let slice = DeviceView::from(&buf).slice(offset..offset + n);
                let sentinel = -12345.0f32;
                let mut out = DeviceBuffer::from_slice(&vec![sentinel; n + 1]).unwrap();
                let flags: Vec<u8> = host.iter().map(|x| u8::from(*x > threshold)).collect();
                let d_flags = DeviceBuffer::from_slice(&flags).unwrap();
                let (count, want): (u64, Vec<f32>) = match which {
                    0 => (
                        select
                            .select_if_stable(slice, GreaterThan(threshold), &mut out)
                            .unwrap(),
                        host.iter().copied().filter(|x| *x > threshold).collect(),
                    ),
                    1 => (
                        select.select_flagged(slice, &d_flags, &mut out).unwrap(),
                        host.iter().copied().filter(|x| *x > threshold).collect(),
                    ),
                    _ => (
                        select
                            .select_if(slice, LessThan(threshold), &mut out)
                            .unwrap(),
                        host.iter().copied().filter(|x| *x < threshold).collect(),
                    ),
                };
                let mut got = vec![0.0f32; n + 1];
                out.copy_to(&mut got[..]).unwrap();
                prop_assert_eq!(count as usize, want.len());
                let (mut kept, rest) = (got[..want.len()].to_vec(), &got[want.len()..]);
                prop_assert!(rest.iter().all(|x| x.to_bits() == sentinel.to_bits()));
                let mut want = want;
                if which == 2 {
                    kept.sort_by(f32::total_cmp);
                    want.sort_by(f32::total_cmp);
                }
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(&kept), bits(&want));
                let nonzero = select.select_if(slice, NonZero, &mut out).unwrap();
                prop_assert_eq!(nonzero as usize, host.iter().filter(|x| **x != 0.0).count());
                Ok(())
            },
        )
        .unwrap();
}

/// Even-bin histograms of f32 samples against the reference, which computes CUB's bin formula itself.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn histograms_f32() {
    // A `RefCell`: proptest runs the property through a `Fn`.
    let hist = std::cell::RefCell::new(DeviceHistogram::new().expect("a GPU"));
    runner("histograms_f32")
        .run(
            &(
                input::<f32>(),
                0usize..16,
                1usize..5000,
                -2.0f32..1.0,
                0.001f32..4.0,
            ),
            |(host, offset, bins, lower, width)| {
                let mut hist = hist.borrow_mut();
                let upper = lower + width;
                let buf = upload_at(&host, offset);
                let slice = DeviceView::from(&buf).slice(offset..offset + host.len());
                let got: Vec<u64> = hist.even(slice, bins, lower, upper).unwrap();
                let want = cpu::histogram_even(&host, bins, lower, upper).unwrap();
                prop_assert_eq!(got, want);
                Ok(())
            },
        )
        .unwrap();
}
