//! GPU tests of every element type (f32, f64, f16, bf16, i32, u32, i64, u64, u8) against the CPU references:
//! each check is one generic function, instantiated per type as `<check>::<type>`, e.g. `specials::bf16`.
//! Ignored without a GPU. (f32 at 2^26 elements, launch shapes and errors are in `gpu_reduce.rs`.)
#[macro_use]
mod common;

use common::*;
use cust::memory::{CopyDestination, DeviceBuffer};
use cust::stream::{Stream, StreamFlags};
use reduce_host::Policy;
use reduce_host::{BF16, Combine, DeviceView, F16, Indexed};

macro_rules! int_types {
    ($($check:ident),*) => {$(
        instantiate!($check: i32 = i32, u32 = u32, i64 = i64, u64 = u64, u8 = u8);
    )*};
}

every_type!(
    random_data,
    all_equal,
    specials,
    empty_input,
    launch_shapes,
    async_variants
);
float_types!(nans_and_infinities, signed_zeros, subnormals);
int_types!(integer_extremes);

fn sizes() -> impl Iterator<Item = usize> {
    EDGE_SIZES
        .into_iter()
        .chain([(1 << 22) + 3])
        .filter(|&n| n <= max_n())
}

/// Random data (see [`TestElement::random`]) at every size and sub-slice offset.
fn random_data<T: TestElement>() {
    let mut reduce = gpu();
    for (k, n) in sizes().enumerate() {
        check_offsets(
            &mut reduce,
            &random_of::<T>(n, k as u64),
            &format!("random n={n}"),
        );
    }
}

/// All elements equal: every argmax/argmin tie goes to index 0.
fn all_equal<T: TestElement>() {
    let mut reduce = gpu();
    for n in sizes().filter(|&n| n > 0) {
        let host = vec![T::some_value(); n];
        check_offsets(&mut reduce, &host, &format!("all equal n={n}"));
        let buf = upload_at(&host, 0);
        let slice = DeviceView::from(&buf).slice(..n);
        assert_eq!(reduce.argmax(slice).unwrap().unwrap().index, 0);
        assert_eq!(reduce.argmin(slice).unwrap().unwrap().index, 0);
    }
}

/// Each special value (NaN, ±∞, ± max finite, subnormals; integer MIN, MAX, 0) first, in the middle and
/// last of random data.
fn specials<T: TestElement>() {
    let mut reduce = gpu();
    for n in [1usize, 2, 33, 1025, (1 << 20) + 3]
        .into_iter()
        .filter(|&n| n <= max_n())
    {
        for special in T::specials() {
            for at in [0, n / 2, n - 1] {
                let mut host = random_of::<T>(n, n as u64);
                host[at] = special;
                check_offsets(&mut reduce, &host, &format!("{special:?} at {at} of {n}"));
            }
        }
    }
}

/// Sum 0 (every strategy), `None` for the rest.
fn empty_input<T: TestElement>() {
    let mut reduce = gpu();
    let buf = DeviceBuffer::from_slice(&[T::some_value()]).unwrap();
    let empty = DeviceView::from(&buf).slice(..0);
    for combine in [Combine::TwoPass, Combine::LastBlock, Combine::Atomic] {
        reduce.set_combine(combine);
        let sum = reduce.sum(empty).unwrap();
        assert!(
            T::sum_matches(sum, T::sum_want(&[])),
            "{combine:?}: {sum:?}"
        );
    }
    reduce.set_combine(Combine::TwoPass);
    assert_eq!(reduce.max(empty).unwrap(), None);
    assert_eq!(reduce.min(empty).unwrap(), None);
    assert_eq!(reduce.argmax(empty).unwrap(), None);
    assert_eq!(reduce.argmin(empty).unwrap(), None);
}

/// Odd block sizes and grids: the shared-memory slots of every accumulator size (2 to 16 bytes).
fn launch_shapes<T: TestElement>() {
    let mut reduce = gpu();
    let host = random_of::<T>(((1 << 18) + 5).min(max_n()), 5);
    for threads in [32, 96, 1024] {
        for blocks_per_sm in [1, 16] {
            let policy = Policy {
                threads,
                blocks_per_sm,
                finalize_threads: threads.min(512),
            };
            reduce.set_policy(policy).unwrap();
            let short = &host[..(threads as usize * 37 + 3).min(host.len())];
            check_offsets(&mut reduce, short, &format!("{policy:?}"));
            check_offsets(&mut reduce, &host, &format!("{policy:?} large"));
        }
    }
}

/// The `*_async` variants write `T::Acc`, `T` and `Indexed<T>` into device memory.
fn async_variants<T: TestElement>() {
    let mut reduce = gpu();
    let host = random_of::<T>(1_000_003.min(max_n()), 11);
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    // Start values the results cannot have, so a missing write shows.
    let (high, low) = T::pads();
    let mut sum = DeviceBuffer::from_slice(&[T::Acc::default()]).unwrap();
    let mut max = DeviceBuffer::from_slice(&[low]).unwrap();
    let mut min = DeviceBuffer::from_slice(&[high]).unwrap();
    let mut arg = DeviceBuffer::from_slice(&[Indexed {
        value: high,
        index: 7,
    }])
    .unwrap();
    // SAFETY: every buffer outlives the synchronize below.
    unsafe {
        reduce.sum_async(&buf, &mut sum, &stream).unwrap();
        reduce.max_async(&buf, &mut max, &stream).unwrap();
        reduce.min_async(&buf, &mut min, &stream).unwrap();
        reduce.argmin_async(&buf, &mut arg, &stream).unwrap();
    }
    stream.synchronize().unwrap();
    let (mut s, mut m, mut mn, mut a) = (
        [T::Acc::default()],
        [T::default()],
        [T::default()],
        [Indexed::default()],
    );
    sum.copy_to(&mut s[..]).unwrap();
    max.copy_to(&mut m[..]).unwrap();
    min.copy_to(&mut mn[..]).unwrap();
    arg.copy_to(&mut a[..]).unwrap();
    check_sum(s[0], &host, "sum_async");
    let want = reduce_host::cpu::argmin(&host).unwrap();
    assert!(same_value(m[0], reduce_host::cpu::max(&host).unwrap()));
    assert!(same_value(mn[0], want.1));
    assert_eq!(a[0].index, want.0 as u64);
    assert!(same_value(a[0].value, want.1));
}

/// Two NaNs (the first is reported), +∞ and -∞ together (the sum is NaN), and NaN next to ∞.
fn nans_and_infinities<T: FloatTest>() {
    let mut reduce = gpu();
    let (nan, inf) = (T::from_f32(f32::NAN), T::from_f32(f32::INFINITY));
    let neg_inf = T::from_f32(f32::NEG_INFINITY);
    for n in [2usize, 33, 1025, (1 << 20) + 3]
        .into_iter()
        .filter(|&n| n <= max_n())
    {
        let mut host = random_of::<T>(n, 7);
        host[n - 1] = nan;
        host[n / 2] = nan;
        check_offsets(&mut reduce, &host, &format!("two NaNs in {n}"));
        let mut host = random_of::<T>(n, 8);
        host[0] = inf;
        host[n - 1] = neg_inf;
        check_offsets(&mut reduce, &host, &format!("+inf and -inf in {n}"));
        let mut host = random_of::<T>(n, 9);
        host[0] = neg_inf;
        host[n - 1] = inf;
        host[n / 2] = nan;
        check_offsets(
            &mut reduce,
            &host,
            &format!("NaN between infinities in {n}"),
        );
    }
}

/// -0.0 and +0.0 are equal: the first of them wins argmax and argmin.
fn signed_zeros<T: FloatTest>() {
    let mut reduce = gpu();
    for n in [2usize, 32, 1025, 100_003] {
        let host: Vec<T> = (0..n)
            .map(|i| T::from_f32(if i % 3 == 0 { -0.0 } else { 0.0 }))
            .collect();
        check_offsets(&mut reduce, &host, &format!("signed zeros n={n}"));
        let buf = upload_at(&host, 0);
        let slice = DeviceView::from(&buf).slice(..n);
        assert_eq!(reduce.argmax(slice).unwrap().unwrap().index, 0);
        assert_eq!(reduce.argmin(slice).unwrap().unwrap().index, 0);
        assert!(same_value(
            reduce.max(slice).unwrap().unwrap(),
            T::from_f32(0.0)
        ));
    }
}

/// Only subnormals of both signs: compares and sums must not flush them to zero.
fn subnormals<T: FloatTest>() {
    let mut reduce = gpu();
    for n in [3usize, 33, 1025, 100_003] {
        let mut r = rng(n as u64);
        let host: Vec<T> = (0..n).map(|_| T::subnormal(&mut r)).collect();
        check_offsets(&mut reduce, &host, &format!("subnormals n={n}"));
        let buf = upload_at(&host, 0);
        let max = reduce
            .max(DeviceView::from(&buf).slice(..n))
            .unwrap()
            .unwrap();
        assert!(max != T::from_f32(0.0), "max {max:?} was flushed to zero");
    }
}

/// MIN and MAX: many ties and sums that overflow 64 bits (wrapping).
fn integer_extremes<T: IntTest>() {
    let mut reduce = gpu();
    for n in [1usize, 2, 33, 1025, (1 << 20) + 3]
        .into_iter()
        .filter(|&n| n <= max_n())
    {
        for v in [T::GREATEST, T::LEAST] {
            check_offsets(&mut reduce, &vec![v; n], &format!("all {v:?}, n={n}"));
        }
        let mut r = rng(n as u64);
        let host: Vec<T> = (0..n).map(|_| T::random_extreme(&mut r)).collect();
        check_offsets(&mut reduce, &host, &format!("random extremes n={n}"));
        if n > 1 {
            let mut host = vec![T::GREATEST; n];
            host[0] = T::LEAST;
            host[n - 1] = T::LEAST;
            check_offsets(&mut reduce, &host, &format!("MIN first and last of {n}"));
        }
    }
}

/// The accumulator types, spelled out: integers wrap modulo 2^64 only past 64 bits, halves sum in f32 past
/// their own range, u8 sums past 255.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn accumulators_widen_and_wrap() {
    let mut reduce = gpu();
    let f16 = |x: f32| F16(half::f16::from_f32(x));
    let bf16 = |x: f32| BF16(half::bf16::from_f32(x));
    for combine in [Combine::TwoPass, Combine::LastBlock, Combine::Atomic] {
        reduce.set_combine(combine);
        let buf = DeviceBuffer::from_slice(&[i64::MAX, 1, 5]).unwrap();
        assert_eq!(reduce.sum(&buf).unwrap(), i64::MIN + 5, "{combine:?}");
        let buf = DeviceBuffer::from_slice(&[u64::MAX, 2]).unwrap();
        assert_eq!(reduce.sum(&buf).unwrap(), 1, "{combine:?}");
        let buf = DeviceBuffer::from_slice(&[i32::MAX, i32::MAX, i32::MIN]).unwrap();
        assert_eq!(
            reduce.sum(&buf).unwrap(),
            2 * i32::MAX as i64 + i32::MIN as i64,
            "{combine:?}"
        );
        let buf = DeviceBuffer::from_slice(&[u32::MAX; 3]).unwrap();
        assert_eq!(
            reduce.sum(&buf).unwrap(),
            3 * u32::MAX as u64,
            "{combine:?}"
        );
        let buf = DeviceBuffer::from_slice(&[255u8; 1000]).unwrap();
        assert_eq!(reduce.sum(&buf).unwrap(), 255_000u64, "{combine:?}");
        let buf = DeviceBuffer::from_slice(&[f16(65504.0); 2]).unwrap();
        assert_eq!(reduce.sum(&buf).unwrap(), 131_008.0f32, "{combine:?}");
        let buf = DeviceBuffer::from_slice(&[bf16(1.0), bf16(1.0 / 256.0)]).unwrap();
        assert_eq!(reduce.sum(&buf).unwrap(), 1.0 + 1.0 / 256.0, "{combine:?}");
    }
    reduce.set_combine(Combine::TwoPass);
    let buf = DeviceBuffer::from_slice(&[f16(-1.0), f16(65504.0), f16(f32::INFINITY)]).unwrap();
    let got = reduce.argmax(&buf).unwrap().unwrap();
    assert_eq!((got.index, got.value), (2, f16(f32::INFINITY)));
    let buf = DeviceBuffer::from_slice(&[3u8, 0, 255, 0]).unwrap();
    assert_eq!(reduce.min(&buf).unwrap(), Some(0));
    assert_eq!(reduce.argmin(&buf).unwrap().unwrap().index, 1);
}
