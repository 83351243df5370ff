//! `Determinism::GpuToGpu`: the GPU's bits equal the CPU algorithm's (`cpu::sum_reproducible`) for every size
//! and value pattern, and do not move with the block size, the grid, the slice offset or the stream.
//! Ignored without a GPU.
#[macro_use]
mod common;

use common::*;
use cust::memory::{CopyDestination, DeviceBuffer};
use cust::stream::{Stream, StreamFlags};
use rand::Rng;
use rand::rngs::SmallRng;
use reduce_contract::reproducible::CHUNK;
use reduce_host::cpu::{self, ReproSum};
use std::ops::Range;

use reduce_host::{
    BF16, Determinism, DeviceReduce, DeviceSegmentedReduce, DeviceView, F16, Policy, Segments,
    SumElement,
};

const C: usize = CHUNK as usize;

/// A float element of the reproducible sum, with its result's bits and values made from f64.
trait Repro: TestElement + ReproSum<Out = <Self as SumElement>::Acc> {
    /// Largest binary exponent the wide-range pattern uses.
    const SPAN: i32;
    fn from_f64(x: f64) -> Self;
    fn bits(out: Self::Out) -> u64;
}

macro_rules! repro {
    ($($t:ty: $span:expr, |$x:ident| $from:expr, |$o:ident| $bits:expr;)*) => {$(
        impl Repro for $t {
            const SPAN: i32 = $span;
            fn from_f64($x: f64) -> Self {
                $from
            }
            fn bits($o: Self::Out) -> u64 {
                $bits
            }
        }
    )*};
}
repro! {
    f32: 100, |x| x as f32, |o| o.to_bits() as u64;
    f64: 900, |x| x, |o| o.to_bits();
    F16: 14, |x| F16(half::f16::from_f64(x)), |o| o.to_bits() as u64;
    BF16: 100, |x| BF16(half::bf16::from_f64(x)), |o| o.to_bits() as u64;
}

/// `n` values of one pattern: 0 random in [-1, 1), 1 random over a huge dynamic range, 2 heavy
/// cancellation (large values and their negatives, plus small noise), 3 a NaN, 4 a +∞, 5 +∞ and −∞.
fn pattern<T: Repro>(n: usize, which: u32, seed: u64) -> Vec<T> {
    let mut r = rng(seed);
    let wide = |r: &mut SmallRng| {
        let e = r.random_range(-T::SPAN..=T::SPAN);
        let m: f64 = r.random_range(1.0..2.0);
        (if r.random() { -m } else { m }) * 2f64.powi(e)
    };
    let mut v: Vec<T> = match which {
        1 => (0..n).map(|_| T::from_f64(wide(&mut r))).collect(),
        2 => {
            let big = 2f64.powi(T::SPAN.min(40) / 2);
            let half: Vec<f64> = (0..n / 2)
                .map(|_| big * r.random_range(-1.0..1.0))
                .collect();
            let mut v: Vec<T> = half.iter().map(|&x| T::from_f64(x)).collect();
            v.extend(half.iter().rev().map(|&x| T::from_f64(-x)));
            v.extend((v.len()..n).map(|_| T::from_f64(r.random_range(-1.0..1.0))));
            v
        }
        _ => random_of(n, seed),
    };
    if n > 0 {
        match which {
            3 => v[n / 2] = T::from_f64(f64::NAN),
            // Signed zeros among the values, and one row-sized run of −0 alone (a sum of −0s is +0).
            6 => {
                for (i, x) in v.iter_mut().enumerate() {
                    if i % 3 == 0 || i < 40 {
                        *x = T::from_f64(-0.0);
                    }
                }
            }
            4 => v[0] = T::from_f64(f64::INFINITY),
            5 => {
                v[n - 1] = T::from_f64(f64::INFINITY);
                v[0] = T::from_f64(f64::NEG_INFINITY);
            }
            _ => {}
        }
    }
    v
}

fn reproducible() -> DeviceReduce {
    let mut reduce = gpu();
    reduce.set_determinism(Determinism::GpuToGpu);
    reduce
}

fn sizes() -> Vec<usize> {
    [0, 1, 31, 32, 33, 255, 256, 257, C - 1, C, C + 1, 3 * C + 5]
        .into_iter()
        .chain([1_000_007, (1 << 24) + 3])
        .filter(|&n| n <= max_n())
        .collect()
}

/// Every size and value pattern: the device-wide sum has the CPU algorithm's bits.
fn bits_equal_the_cpu_algorithm<T: Repro>() {
    let mut reduce = reproducible();
    for n in sizes() {
        for which in 0..7 {
            let host = pattern::<T>(n, which, n as u64 * 7 + which as u64);
            let want = cpu::sum_reproducible(&host);
            let buf = DeviceBuffer::from_slice(&host).unwrap();
            let got = reduce.sum(&buf).unwrap();
            assert_eq!(
                T::bits(got),
                T::bits(want),
                "{} n={n} pattern {which}: gpu {got:?} cpu {want:?}",
                std::any::type_name::<T>()
            );
        }
    }
}

float_types!(
    bits_equal_the_cpu_algorithm,
    segmented_bits_equal_the_cpu_algorithm
);

/// Every launch shape, offset and stream gives the CPU's bits.
fn shapes_offsets_streams<T: Repro>(n: usize) {
    let n = n.min(max_n());
    let host = pattern::<T>(n, 1, 99);
    let want = T::bits(cpu::sum_reproducible(&host));
    let what = std::any::type_name::<T>();
    let mut reduce = reproducible();
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let default = reduce.policy();
    for threads in [32, 64, 96, 256, 1024] {
        for (combine_threads, blocks_per_sm) in [(32, 1), (96, 3), (256, 8), (1024, 32)] {
            for grid in [Some(1), Some(7), None] {
                reduce
                    .set_policy(Policy {
                        threads,
                        blocks_per_sm,
                        ..default
                    })
                    .unwrap();
                reduce
                    .set_reproducible_shape(grid, Some(combine_threads))
                    .unwrap();
                let got = T::bits(reduce.sum(&buf).unwrap());
                assert_eq!(
                    got, want,
                    "{what} n={n} threads {threads}, combine {combine_threads}, {blocks_per_sm}/SM, grid {grid:?}"
                );
            }
        }
    }
    reduce.reset_policy();
    reduce.set_reproducible_shape(None, None).unwrap();
    for prefetch in [false, true] {
        reduce.set_reproducible_prefetch(Some(prefetch));
        assert_eq!(
            T::bits(reduce.sum(&buf).unwrap()),
            want,
            "{what} n={n} L2 prefetch {prefetch}"
        );
    }
    reduce.set_reproducible_prefetch(None);
    for offset in 0..16 {
        let padded = upload_at(&host, offset);
        let slice = DeviceView::from(&padded).slice(offset..offset + n);
        assert_eq!(
            T::bits(reduce.sum(slice).unwrap()),
            want,
            "{what} n={n} offset {offset}"
        );
    }
    // Async calls on two streams at once, each into its own output.
    let streams = [
        Stream::new(StreamFlags::NON_BLOCKING, None).unwrap(),
        Stream::new(StreamFlags::NON_BLOCKING, None).unwrap(),
    ];
    let mut outs: Vec<DeviceBuffer<T::Out>> = (0..16)
        .map(|_| DeviceBuffer::from_slice(&[T::Out::default()]).unwrap())
        .collect();
    for (i, out) in outs.iter_mut().enumerate() {
        // SAFETY: the input and the outputs outlive the synchronizes below.
        unsafe { reduce.sum_async(&buf, out, &streams[i % 2]).unwrap() };
    }
    for s in &streams {
        s.synchronize().unwrap();
    }
    for (i, out) in outs.iter().enumerate() {
        let mut v = [T::Out::default()];
        out.copy_to(&mut v[..]).unwrap();
        assert_eq!(T::bits(v[0]), want, "{what} n={n} async call {i}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn bits_do_not_depend_on_block_grid_offset_or_stream() {
    for n in [C + 1, 1_000_007] {
        shapes_offsets_streams::<f32>(n);
        shapes_offsets_streams::<f64>(n);
        shapes_offsets_streams::<F16>(n);
        shapes_offsets_streams::<BF16>(n);
    }
}

/// 2^28 f32 (1 GiB): the CPU's bits, and an error against the exact sum no larger than the default tree's.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn large_f32_matches_the_cpu_and_beats_the_default_error() {
    let n = (1usize << 28).min(max_n());
    for (which, seed) in [(0, 5), (1, 6)] {
        let host = pattern::<f32>(n, which, seed);
        let want = cpu::sum_reproducible(&host);
        let exact = cpu::sum_f64(&host);
        let mut reduce = gpu(); // first: it makes the device's context current for the upload
        let buf = DeviceBuffer::from_slice(&host).unwrap();
        let default = reduce.sum(&buf).unwrap();
        reduce.set_determinism(Determinism::GpuToGpu);
        let got = reduce.sum(&buf).unwrap();
        assert_eq!(got.to_bits(), want.to_bits(), "n={n} pattern {which}");
        let (e_repro, e_default) = ((got as f64 - exact).abs(), (default as f64 - exact).abs());
        println!(
            "n={n} pattern {which}: exact {exact:e}, reproducible {got:e} (error {e_repro:e}), default {default:e} (error {e_default:e})"
        );
        assert!(e_repro <= e_default, "{e_repro:e} > {e_default:e}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn integers_and_other_ops_are_unchanged() {
    let mut reduce = reproducible();
    let host: Vec<i32> = (0..100_000).map(|i| i * 37 - 1_000_000).collect();
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    assert_eq!(
        reduce.sum(&buf).unwrap(),
        host.iter().map(|&x| x as i64).sum::<i64>()
    );
    let floats = DeviceBuffer::from_slice(&[1.0f32, 5.0, -2.0]).unwrap();
    assert_eq!(reduce.max(&floats).unwrap(), Some(5.0));
    assert_eq!(reduce.sum(&floats).unwrap(), 4.0);
}

/// Any input (ordinary values, the type's specials, values over its whole exponent range; up to two full
/// chunks and a short one), at any offset, under any chunk block size, grid cap and combine block: the
/// CPU algorithm's bits.
fn property<T: Repro + 'static>() {
    use proptest::prelude::*;
    let element = prop_oneof![
        3 => any::<u64>().prop_map(|s| T::random(&mut rng(s))),
        1 => proptest::sample::select(T::specials()),
        2 => (1.0f64..2.0, -T::SPAN..=T::SPAN, any::<bool>())
            .prop_map(|(m, e, neg)| T::from_f64(if neg { -m } else { m } * 2f64.powi(e))),
    ];
    let len = prop_oneof![0usize..300, 0..3 * C];
    let input = len.prop_flat_map(move |n| prop::collection::vec(element.clone(), n));
    let shape = (
        0usize..16,
        proptest::sample::select(vec![32u32, 64, 96, 128, 256, 512, 1024]),
        proptest::sample::select(vec![Some(1u32), Some(3), None]),
        proptest::sample::select(vec![32u32, 96, 1024]),
    );
    // The runner takes a `Fn`: the handle is borrowed mutably inside each case.
    let reduce = std::cell::RefCell::new(reproducible());
    let default = reduce.borrow().policy();
    let what = std::any::type_name::<T>();
    runner(&format!("reproducible {what}"))
        .run(
            &(input, shape),
            |(host, (offset, threads, grid, combine))| {
                let mut reduce = reduce.borrow_mut();
                reduce.set_policy(Policy { threads, ..default }).unwrap();
                reduce.set_reproducible_shape(grid, Some(combine)).unwrap();
                let buf = upload_at(&host, offset);
                let slice = DeviceView::from(&buf).slice(offset..offset + host.len());
                let got = T::bits(reduce.sum(slice).unwrap());
                let want = T::bits(cpu::sum_reproducible(&host));
                prop_assert_eq!(got, want, "n={} offset {}", host.len(), offset);
                Ok(())
            },
        )
        .unwrap();
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn property_any_input_shape_and_offset_gives_the_cpu_bits() {
    property::<f32>();
    property::<f64>();
    property::<F16>();
    property::<BF16>();
}

/// Per-segment reproducible sums give every segment the CPU algorithm's bits for its elements, with both
/// kernels: rows of at most one chunk (a warp each) and everything else (a block each) — rows with a
/// stride, fixed-size segments, and offsets with empty, overlapping and unaligned segments; the longest row
/// has more than 1024 chunks, so combine lanes merge a second partial.
/// Every layout and way of running segments: each segment's sum has the CPU algorithm's bits.
fn segmented_bits_equal_the_cpu_algorithm<T: Repro>() {
    let mut seg = DeviceSegmentedReduce::new().unwrap();
    seg.set_determinism(Determinism::GpuToGpu);
    let what = std::any::type_name::<T>();
    let check = |host: &[T], ranges: &[Range<usize>], got: &DeviceBuffer<T::Out>, case: &str| {
        let mut v = vec![T::Out::default(); ranges.len()];
        got.copy_to(&mut v[..]).unwrap();
        for (s, r) in ranges.iter().enumerate() {
            let want = cpu::sum_reproducible(&host[r.clone()]);
            assert_eq!(
                T::bits(v[s]),
                T::bits(want),
                "{what} {case} segment {s} ({r:?}): gpu {:?} cpu {want:?}",
                v[s]
            );
        }
    };
    let rows_cases = [
        // A thread per row (rows of at most 8): empty rows, rows of 16-byte vectors where every row
        // starts aligned (4 and 8 f32, 8 f16/bf16, 2, 4, 6 and 8 f64), element by element elsewhere.
        (4, 0, 2),
        (7, 1, 3),
        (9, 2, 3),
        (10, 4, 4),
        (6, 7, 9),
        (517, 2, 2),
        (999, 6, 6),
        (1025, 8, 8),
        // Tiles of 16 and 32 lanes per row.
        (5, 16, 16),
        (4, 17, 21),
        (3, 32, 32),
        // Many short rows: threads and tiles over many warps, the last trip partly past the end.
        (3001, 4, 4),
        (1003, 3, 5),
        (777, 8, 9),
        (333, 12, 12),
        (3, 33, 35),
        (33, 100, 101),
        (9, C, C),
        (5, C + 1, C + 3),
        (3, 3 * C + 5, 3 * C + 5),
        (1, 1024 * C + 77, 1024 * C + 77),
    ];
    for (i, &(rows, cols, stride)) in rows_cases.iter().enumerate() {
        let n = (rows - 1) * stride + cols;
        if n > max_n() {
            continue;
        }
        for which in [0, 1, 3, 4, 5, 6] {
            let host = pattern::<T>(n, which, (i * 10 + which as usize) as u64);
            let buf = DeviceBuffer::from_slice(&host).unwrap();
            let out = DeviceBuffer::from_slice(&vec![T::Out::default(); rows]).unwrap();
            let ranges: Vec<Range<usize>> =
                (0..rows).map(|r| r * stride..r * stride + cols).collect();
            let mut out = out;
            // Long rows: split into chunks or a block each, and the automatic choice; the same bits.
            for split in [None, Some(true), Some(false)] {
                seg.set_reproducible_split(split);
                seg.sum(&buf, Segments::rows(rows, cols, stride), &mut out)
                    .unwrap();
                check(
                    &host,
                    &ranges,
                    &out,
                    &format!("rows {rows}x{cols}/{stride} pattern {which} split {split:?}"),
                );
            }
            seg.set_reproducible_split(None);
            if cols <= 8 && rows > 100 && which == 0 {
                // Rows that start off 16-byte alignment: a thread loads them element by element.
                for offset in [1, 2] {
                    let padded = upload_at(&host, offset);
                    let view = DeviceView::from(&padded).slice(offset..offset + n);
                    seg.sum(view, Segments::rows(rows, cols, stride), &mut out)
                        .unwrap();
                    check(
                        &host,
                        &ranges,
                        &out,
                        &format!("rows {rows}x{cols}/{stride} at element offset {offset}"),
                    );
                }
            }
            if stride == cols {
                seg.sum(&buf, Segments::fixed(rows, cols), &mut out)
                    .unwrap();
                check(
                    &host,
                    &ranges,
                    &out,
                    &format!("fixed {rows}x{cols} pattern {which}"),
                );
            }
        }
    }
    // Offsets: empty, one element, unaligned starts, overlapping, a short and several full chunks; up to
    // four chunks a warp sums alone, past them the block.
    let n = (6 * C + 40).min(max_n());
    let host = pattern::<T>(n, 2, 5);
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let ranges: Vec<Range<usize>> = [
        (0, 0),
        (1, 2),
        (3, 3 + 2 * C + 17),
        (5, 5 + C - 1),
        (7, 7 + 3 * C),
        (2, 2 + C),
        (11, 11 + 4 * C),
        (9, 9 + 4 * C + 1),
        (13, 13 + 5 * C + 3),
    ]
    .into_iter()
    .map(|(b, e)| b.min(n)..e.min(n))
    .collect();
    // The segments `ranges` as offsets, summed `calls` times on the same handle, each checked.
    let mut offsets = |ranges: &[Range<usize>], calls: usize, case: &str| {
        let begin: Vec<u64> = ranges.iter().map(|r| r.start as u64).collect();
        let end: Vec<u64> = ranges.iter().map(|r| r.end as u64).collect();
        let (begin, end) = (
            DeviceBuffer::from_slice(&begin).unwrap(),
            DeviceBuffer::from_slice(&end).unwrap(),
        );
        let mut out = DeviceBuffer::from_slice(&vec![T::Out::default(); ranges.len()]).unwrap();
        for call in 0..calls {
            seg.sum(&buf, Segments::offsets(&begin, &end), &mut out)
                .unwrap();
            check(&host, ranges, &out, &format!("{case}, call {call}"));
        }
    };
    offsets(&ranges, 1, "offsets");
    // Many offsets, more groups of segments than the grid's blocks take at once, a few past four chunks
    // (the block's) that overlap the same elements; twice on the same handle.
    let many: Vec<Range<usize>> = (0..20_000usize)
        .map(|s| {
            let b = s % 13;
            let e = if s % 1999 == 7 {
                b + 4 * C + 1 + s % 5
            } else {
                b + s % 37
            };
            b.min(n)..e.min(n)
        })
        .collect();
    offsets(&many, 2, "many offsets");
}
