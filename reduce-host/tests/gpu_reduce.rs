//! GPU tests of sum/max/min/argmax/argmin on f32 against the CPU f64 reference. Ignored without a GPU.
mod common;

use common::*;
use cust::memory::{CopyDestination, DeviceBuffer};
use cust::stream::{Stream, StreamFlags};
use rand::Rng;
use reduce_host::Policy;
use reduce_host::{Combine, DeviceView, DeviceViewMut, Error, Indexed, cpu};

/// Every edge size, and the seed's 2^26 + 3 (within `max_n`).
fn sizes() -> impl Iterator<Item = usize> {
    EDGE_SIZES
        .into_iter()
        .chain([(1 << 26) + 3])
        .filter(|&n| n <= max_n())
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn random_data_every_size_and_offset() {
    let mut reduce = gpu();
    for (k, n) in sizes().enumerate() {
        check_offsets(&mut reduce, &random(n, k as u64), &format!("random n={n}"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn random_sizes() {
    let mut reduce = gpu();
    let mut r = rng(99);
    for k in 0..12 {
        let n = if k % 2 == 0 {
            r.random_range(0..5000)
        } else {
            r.random_range(5000..3_000_000)
        }
        .min(max_n());
        check_offsets(
            &mut reduce,
            &random(n, 1000 + k),
            &format!("random size n={n}"),
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn all_equal_data_ties_go_to_index_zero() {
    let mut reduce = gpu();
    for n in sizes().filter(|&n| n > 0) {
        let host = vec![0.75f32; n];
        check_offsets(&mut reduce, &host, &format!("all equal n={n}"));
        let buf = upload_at(&host, 0);
        let slice = DeviceView::from(&buf).slice(..n);
        assert_eq!(reduce.argmax(slice).unwrap().unwrap().index, 0);
        assert_eq!(reduce.argmin(slice).unwrap().unwrap().index, 0);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn nan_and_infinities_first_middle_last() {
    let mut reduce = gpu();
    for &n in [1usize, 2, 33, 1025, (1 << 20) + 3]
        .iter()
        .filter(|n| **n <= max_n())
    {
        for special in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for at in [0, n / 2, n - 1] {
                let mut host = random(n, n as u64);
                host[at] = special;
                check_offsets(&mut reduce, &host, &format!("{special} at {at} of {n}"));
            }
        }
        // Two NaNs: argmax and argmin report the first; +inf and -inf together sum to NaN.
        let mut host = random(n, 7);
        host[n - 1] = f32::NAN;
        host[n / 2] = f32::NAN;
        check_offsets(&mut reduce, &host, &format!("two NaNs in {n}"));
        if n > 1 {
            let mut host = random(n, 8);
            host[0] = f32::INFINITY;
            host[n - 1] = f32::NEG_INFINITY;
            check_offsets(&mut reduce, &host, &format!("+inf and -inf in {n}"));
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn signed_zeros_compare_equal() {
    let mut reduce = gpu();
    for &n in &[2usize, 32, 1025, 100_003] {
        let host: Vec<f32> = (0..n)
            .map(|i| if i % 3 == 0 { -0.0 } else { 0.0 })
            .collect();
        check_offsets(&mut reduce, &host, &format!("signed zeros n={n}"));
        let buf = upload_at(&host, 0);
        let slice = DeviceView::from(&buf).slice(..n);
        assert_eq!(
            reduce.argmax(slice).unwrap().unwrap().index,
            0,
            "-0.0 at 0 ties +0.0"
        );
        assert_eq!(reduce.max(slice).unwrap(), Some(0.0));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn empty_input_semantics() {
    let mut reduce = gpu();
    let buf = DeviceBuffer::from_slice(&[1.0f32]).unwrap();
    let empty = DeviceView::from(&buf).slice(..0);
    for combine in [Combine::TwoPass, Combine::LastBlock, Combine::Atomic] {
        reduce.set_combine(combine);
        assert_eq!(reduce.sum(empty).unwrap(), 0.0);
    }
    reduce.set_combine(Combine::TwoPass);
    assert_eq!(reduce.max(empty).unwrap(), None);
    assert_eq!(reduce.min(empty).unwrap(), None);
    assert_eq!(reduce.argmax(empty).unwrap(), None);
    assert_eq!(reduce.argmin(empty).unwrap(), None);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn atomic_combine_refuses_non_sums_at_every_size() {
    let mut reduce = gpu();
    reduce.set_combine(Combine::Atomic);
    for n in [0usize, 1, 1000, 1 << 20] {
        let buf = DeviceBuffer::from_slice(&vec![1.0f32; n.max(1)]).unwrap();
        let slice = DeviceView::from(&buf).slice(..n);
        assert!(
            matches!(
                reduce.max(slice),
                Err(reduce_host::Error::InvalidArgument(_))
            ),
            "n = {n}"
        );
        assert!(matches!(
            reduce.argmin(slice),
            Err(reduce_host::Error::InvalidArgument(_))
        ));
        assert_eq!(reduce.sum(slice).unwrap(), n as f32);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn forced_launch_shapes() {
    let mut reduce = gpu();
    let host = random(((1 << 18) + 5).min(max_n()), 5);
    for threads in [32, 64, 96, 256, 1024] {
        for blocks_per_sm in [1, 3, 16] {
            let policy = Policy {
                threads,
                blocks_per_sm,
                finalize_threads: threads.min(512),
            };
            reduce.set_policy(policy).unwrap();
            check_offsets(
                &mut reduce,
                &host[..(threads as usize * 37 + 3).min(host.len())],
                &format!("{policy:?}"),
            );
            check_offsets(&mut reduce, &host, &format!("{policy:?} large"));
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn async_variants_write_device_memory() {
    let mut reduce = gpu();
    let host = random(1_000_003, 11);
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    let mut sum = DeviceBuffer::from_slice(&[f32::NAN]).unwrap();
    let mut max = DeviceBuffer::from_slice(&[f32::NAN]).unwrap();
    let mut arg = DeviceBuffer::from_slice(&[Indexed {
        value: f32::NAN,
        index: 7,
    }])
    .unwrap();
    // SAFETY: every buffer outlives the synchronize below.
    unsafe {
        reduce.sum_async(&buf, &mut sum, &stream).unwrap();
        reduce.max_async(&buf, &mut max, &stream).unwrap();
        reduce.argmin_async(&buf, &mut arg, &stream).unwrap();
    }
    stream.synchronize().unwrap();
    let (mut s, mut m, mut a) = ([0.0f32], [0.0f32], [Indexed::default()]);
    sum.copy_to(&mut s[..]).unwrap();
    max.copy_to(&mut m[..]).unwrap();
    arg.copy_to(&mut a[..]).unwrap();
    check_sum(s[0], &host, "sum_async");
    assert_eq!(Some(m[0]), cpu::max(&host));
    assert_eq!(Some((a[0].index as usize, a[0].value)), cpu::argmin(&host));
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn invalid_arguments_are_errors() {
    let mut reduce = gpu();
    let buf = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0]).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    let mut none: DeviceBuffer<f32> = DeviceBuffer::from_slice(&[]).unwrap();
    // SAFETY: fails before enqueueing anything.
    let r = unsafe { reduce.sum_async(&buf, &mut none, &stream) };
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");

    reduce.set_combine(Combine::Atomic);
    assert!(matches!(reduce.max(&buf), Err(Error::InvalidArgument(_))));
    reduce.set_combine(Combine::TwoPass);

    let bad = Policy {
        threads: 48,
        blocks_per_sm: 1,
        finalize_threads: 32,
    };
    assert!(matches!(
        reduce.set_policy(bad),
        Err(Error::InvalidArgument(_))
    ));

    // A slice whose address is not a multiple of 4 (only possible through raw parts) is refused.
    let raw = buf.as_device_ptr().as_raw() + 2;
    // SAFETY: never dereferenced: the call validates the address and refuses it before any access.
    let misaligned = unsafe { DeviceView::<f32>::from_raw_parts(raw, 2) };
    assert!(matches!(
        reduce.sum(misaligned),
        Err(Error::InvalidArgument(_))
    ));
    // The handle still works afterwards.
    assert_eq!(reduce.sum(&buf).unwrap(), 6.0);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn overlapping_input_and_output_are_refused() -> Result<(), Error> {
    let mut reduce = gpu();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None)?;
    let mut b = DeviceBuffer::from_slice(&[1.0f32; 64])?;
    let addr = DeviceViewMut::from(&mut b).as_raw();
    // SAFETY: `b` is live; `out` (element 8) lies inside `input`, which safe code cannot express, and the
    // call refuses the pair before any access to either.
    let (input, out) = unsafe {
        (
            DeviceView::<f32>::from_raw_parts(addr, 64),
            DeviceViewMut::<f32>::from_raw_parts(addr + 8 * size_of::<f32>() as u64, 1),
        )
    };
    // SAFETY: refused before anything is enqueued.
    let r = unsafe { reduce.sum_async(input, out, &stream) };
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    stream.synchronize()?;
    // Nothing was written, and the handle still works.
    let mut host = [0.0f32; 64];
    b.copy_to(&mut host[..])?;
    assert_eq!(host, [1.0; 64]);
    assert_eq!(reduce.sum(&b)?, 64.0);
    Ok(())
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn more_than_2_pow_32_elements() {
    let mut reduce = gpu();
    let n: usize = (1 << 32) + 5;
    if max_n() < n {
        eprintln!("skipped: REDUCE_TEST_MAX_N={} is below 2^32+5", max_n());
        return;
    }
    let mut buf = DeviceBuffer::<f32>::zeroed(n).expect("16 GiB of device memory");
    buf.set_32(0.5f32.to_bits()).unwrap();
    let plant = |buf: &mut DeviceBuffer<f32>, at: usize, v: f32| {
        buf.index(at..at + 1).copy_from(&[v][..]).unwrap();
    };
    let (hi, lo) = ((1usize << 32) + 3, (1usize << 32) + 1);
    plant(&mut buf, hi, 9.0);
    plant(&mut buf, lo, -4.0);
    // A tie with an element below 2^32: the smaller index wins.
    plant(&mut buf, 7, 9.0);
    let max = reduce.argmax(&buf).unwrap().unwrap();
    assert_eq!((max.index, max.value), (7, 9.0));
    plant(&mut buf, 7, 0.5);
    for combine in [Combine::TwoPass, Combine::LastBlock] {
        reduce.set_combine(combine);
        let max = reduce.argmax(&buf).unwrap().unwrap();
        assert_eq!((max.index, max.value), (hi as u64, 9.0), "{combine:?}");
        let min = reduce.argmin(&buf).unwrap().unwrap();
        assert_eq!((min.index, min.value), (lo as u64, -4.0), "{combine:?}");
        assert_eq!(reduce.max(&buf).unwrap(), Some(9.0));
        let want = 0.5 * (n as f64 - 2.0) + 9.0 - 4.0;
        let got = reduce.sum(&buf).unwrap() as f64;
        assert!(
            (got - want).abs() <= sum_tolerance(n, want),
            "{combine:?}: sum {got} vs {want}"
        );
    }
    // The tail past 2^32 is read: a NaN in the last element propagates.
    plant(&mut buf, n - 1, f32::NAN);
    assert_eq!(reduce.argmax(&buf).unwrap().unwrap().index, (n - 1) as u64);
}
