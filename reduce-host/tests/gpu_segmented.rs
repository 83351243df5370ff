//! GPU tests of `DeviceSegmentedReduce` against the CPU references (`cpu::segmented`): every operation ×
//! every element type × each layout (rows with a stride and an unaligned start, fixed-size, ragged offsets),
//! at lengths that reach every kernel (narrow tiles, warp, block, split), with NaN, ties, empty and bad
//! segments, repeated runs, and the softmax statistics. Ignored without a GPU.
#[macro_use]
mod common;

use std::ops::Range;

use common::*;
use cust::memory::{CopyDestination, DeviceBuffer, DeviceCopy};
use cust::stream::{Stream, StreamFlags};
use reduce_host::cpu;
use reduce_host::{
    BF16, DeviceSegmentedReduce, DeviceView, Error, F16, Indexed, Segments, SoftmaxElement,
    SoftmaxStats,
};

every_type!(
    rows_every_length,
    fixed_every_length,
    short_rows_match_offsets,
    ragged_offsets,
    split_rows,
    many_block_rows,
    all_equal_ties,
    async_variants
);
float_types!(nans_and_signed_zeros);
instantiate!(softmax_rows: f32 = f32, f16 = super::F16, bf16 = super::BF16);

fn seg() -> DeviceSegmentedReduce {
    DeviceSegmentedReduce::new().expect("GPU tests need a CUDA device")
}

/// Segment lengths that reach every kernel: narrow tiles (0 … 128 f32), a warp (… 8192), a block.
const LENGTHS: [usize; 10] = [0, 1, 3, 31, 32, 33, 127, 1000, 5000, 70_000];

/// Rows for a length: enough segments to fill several blocks of every tile width, at most ~4M elements
/// (fewer under `REDUCE_TEST_MAX_N`).
fn rows_for(len: usize) -> usize {
    ((1usize << 22).min(max_n()) / len.max(1)).clamp(3, 600)
}

/// Whether `rows` segments of `len` fit the `REDUCE_TEST_MAX_N` budget (for slow sanitizer runs).
fn fits(rows: usize, len: usize) -> bool {
    rows.saturating_mul(len) <= max_n().max(64)
}

/// The identities an empty segment gets from max and min (the device writes them).
trait Extremes: TestElement {
    fn lowest() -> Self;
    fn highest() -> Self;
}
macro_rules! extremes {
    ($($t:ty: $lo:expr, $hi:expr;)*) => {$(
        impl Extremes for $t {
            fn lowest() -> Self { $lo }
            fn highest() -> Self { $hi }
        }
    )*};
}
extremes! {
    f32: f32::NEG_INFINITY, f32::INFINITY;
    f64: f64::NEG_INFINITY, f64::INFINITY;
    F16: F16(half::f16::NEG_INFINITY), F16(half::f16::INFINITY);
    BF16: BF16(half::bf16::NEG_INFINITY), BF16(half::bf16::INFINITY);
    i32: i32::MIN, i32::MAX;
    u32: u32::MIN, u32::MAX;
    i64: i64::MIN, i64::MAX;
    u64: u64::MIN, u64::MAX;
    u8: u8::MIN, u8::MAX;
}

/// Device output of `count` values, filled with `fill` so a missing write shows.
fn out<A: DeviceCopy + Clone>(count: usize, fill: A) -> DeviceBuffer<A> {
    DeviceBuffer::from_slice(&vec![fill; count.max(1)]).unwrap()
}

fn download<A: DeviceCopy + Default + Clone>(buf: &DeviceBuffer<A>, count: usize) -> Vec<A> {
    let mut v = vec![A::default(); buf.len()];
    buf.copy_to(&mut v[..]).unwrap();
    v.truncate(count);
    v
}

/// Every result of one call of each operation.
struct Results<T: TestElement> {
    sum: Vec<T::Acc>,
    max: Vec<T>,
    min: Vec<T>,
    argmax: Vec<Indexed<T>>,
    argmin: Vec<Indexed<T>>,
}

impl<T: TestElement> Results<T> {
    /// The results' bits, to compare runs.
    fn bits(&self) -> String {
        format!(
            "{:?}{:?}{:?}{:?}{:?}",
            self.sum, self.max, self.min, self.argmax, self.argmin
        )
    }
}

/// Runs all five operations over `segments` of `input`.
fn run_all<T: Extremes>(
    seg: &mut DeviceSegmentedReduce,
    input: DeviceView<'_, T>,
    segments: Segments<'_>,
) -> Results<T> {
    let count = segments.count();
    let (hi, lo) = T::pads();
    let mut sum = out(count, T::Acc::default());
    let mut max = out(count, hi);
    let mut min = out(count, lo);
    let junk = Indexed {
        value: lo,
        index: 12345,
    };
    let mut argmax = out(count, junk);
    let mut argmin = out(count, junk);
    seg.sum(input, segments, &mut sum).expect("sum");
    seg.max(input, segments, &mut max).expect("max");
    seg.min(input, segments, &mut min).expect("min");
    seg.argmax(input, segments, &mut argmax).expect("argmax");
    seg.argmin(input, segments, &mut argmin).expect("argmin");
    Results {
        sum: download(&sum, count),
        max: download(&max, count),
        min: download(&min, count),
        argmax: download(&argmax, count),
        argmin: download(&argmin, count),
    }
}

/// Compares `got` with the CPU references of each range of `host`.
fn check<T: Extremes>(got: &Results<T>, host: &[T], ranges: &[Range<usize>], what: &str) {
    let name = std::any::type_name::<T>().rsplit("::").next().unwrap();
    for (s, r) in ranges.iter().enumerate() {
        let part: &[T] = if r.start <= r.end && r.end <= host.len() {
            &host[r.clone()]
        } else {
            &[]
        };
        let what = format!("{what} [{name}] segment {s} ({r:?})");
        check_sum(got.sum[s], part, &what);
        let max = cpu::max(part).unwrap_or(T::lowest());
        let min = cpu::min(part).unwrap_or(T::highest());
        assert!(
            same_value(got.max[s], max),
            "{what}: max {:?} vs {max:?}",
            got.max[s]
        );
        assert!(
            same_value(got.min[s], min),
            "{what}: min {:?} vs {min:?}",
            got.min[s]
        );
        for (op, g, want, empty) in [
            ("argmax", got.argmax[s], cpu::argmax(part), T::lowest()),
            ("argmin", got.argmin[s], cpu::argmin(part), T::highest()),
        ] {
            let (i, v) = want.map_or((u64::MAX, empty), |(i, v)| (i as u64, v));
            assert_eq!(
                g.index, i,
                "{what}: {op} index (value {:?} vs {v:?})",
                g.value
            );
            assert!(
                same_value(g.value, v),
                "{what}: {op} value {:?} vs {v:?}",
                g.value
            );
        }
    }
}

/// Rows of every length with a stride past the columns, at every start offset 0..3 of the buffer (so
/// unaligned rows read with scalar loads): results against the CPU, and the same bits at every offset.
fn rows_every_length<T: Extremes>() {
    let mut seg = seg();
    for (k, &cols) in LENGTHS.iter().enumerate().filter(|(_, c)| fits(3, **c)) {
        let rows = rows_for(cols);
        let stride = cols + 3;
        let host = random_of::<T>(rows * stride, k as u64);
        let ranges = cpu::row_ranges(rows, cols, stride);
        let mut first_bits = None;
        for offset in 0..4 {
            let buf = upload_at(&host, offset);
            let input = DeviceView::from(&buf).slice(offset..offset + host.len());
            let got = run_all(&mut seg, input, Segments::rows(rows, cols, stride));
            check(
                &got,
                &host,
                &ranges,
                &format!("rows {rows}×{cols}/{stride} @{offset}"),
            );
            let bits = got.bits();
            assert_eq!(
                first_bits.get_or_insert_with(|| bits.clone()),
                &bits,
                "rows {rows}×{cols}: bits differ between start offsets 0 and {offset}"
            );
        }
    }
}

/// Back-to-back segments: aligned rows (16-byte loads) whenever `size · size_of::<T>()` is a multiple of 16,
/// and repeated runs give the same bits.
fn fixed_every_length<T: Extremes>() {
    let mut seg = seg();
    for (k, &size) in LENGTHS
        .iter()
        .chain(&[4, 8, 64, 1024])
        .enumerate()
        .filter(|(_, c)| fits(3, **c))
    {
        let count = rows_for(size);
        let host = random_of::<T>(count * size, 100 + k as u64);
        let buf = upload_at(&host, 0);
        let input = DeviceView::from(&buf).slice(..host.len());
        let got = run_all(&mut seg, input, Segments::fixed(count, size));
        check(
            &got,
            &host,
            &cpu::row_ranges(count, size, size),
            &format!("fixed {count}×{size}"),
        );
        for _ in 0..3 {
            let again = run_all(&mut seg, input, Segments::fixed(count, size));
            assert_eq!(
                got.bits(),
                again.bits(),
                "fixed {count}×{size}: runs differ"
            );
        }
    }
}

/// Short rows (1 … 33 elements: rows of one whole chunk and a partial one, for every type, take the rows
/// kernel) give the same bits as the same segments given as offsets (which take the tile kernel of their
/// length), aligned and not, and the CPU's results.
fn short_rows_match_offsets<T: Extremes>() {
    let mut seg = seg();
    for len in 1..=33usize {
        // Enough rows for several trips of every thread of a small grid, and a partial last trip.
        let count = 3001;
        let host = random_of::<T>(count * len, 500 + len as u64);
        let begin: Vec<u64> = (0..count as u64).map(|s| s * len as u64).collect();
        let end: Vec<u64> = begin.iter().map(|b| b + len as u64).collect();
        let (begin, end) = (
            DeviceBuffer::from_slice(&begin).unwrap(),
            DeviceBuffer::from_slice(&end).unwrap(),
        );
        for offset in 0..2 {
            let buf = upload_at(&host, offset);
            let input = DeviceView::from(&buf).slice(offset..offset + host.len());
            let rows = run_all(&mut seg, input, Segments::fixed(count, len));
            let what = format!("rows {count}×{len} @{offset}");
            check(&rows, &host, &cpu::row_ranges(count, len, len), &what);
            let offsets = run_all(&mut seg, input, Segments::offsets(&begin, &end));
            assert_eq!(
                rows.bits(),
                offsets.bits(),
                "{what}: rows and offsets differ"
            );
        }
    }
}

/// Ragged offsets with empty segments, mean lengths that pick each kernel, unaligned begins.
fn ragged_offsets<T: Extremes>() {
    let mut seg = seg();
    let mut r = rng(77);
    for max_len in [4usize, 40, 400, 10_000, 200_000]
        .into_iter()
        .filter(|&m| fits(5, m))
    {
        let count = ((1usize << 21).min(max_n()) / max_len.max(1)).clamp(5, 3000);
        let mut offsets = vec![0u64];
        for i in 0..count {
            let len = if i % 7 == 3 {
                0
            } else {
                rand::Rng::random_range(&mut r, 0..=max_len)
            };
            offsets.push(offsets[i] + len as u64);
        }
        let n = *offsets.last().unwrap() as usize;
        let host = random_of::<T>(n, max_len as u64);
        let buf = upload_at(&host, 1);
        let input = DeviceView::from(&buf).slice(1..1 + n);
        let off = DeviceBuffer::from_slice(&offsets).unwrap();
        let o = DeviceView::from(&off);
        let segments = Segments::offsets(o.slice(..count), o.slice(1..));
        let got = run_all(&mut seg, input, segments);
        check(
            &got,
            &host,
            &cpu::offset_ranges(&offsets),
            &format!("ragged ≤{max_len}"),
        );
        let again = run_all(&mut seg, input, segments);
        assert_eq!(got.bits(), again.bits(), "ragged ≤{max_len}: runs differ");
    }
}

/// A few segments of 2^22 + 5 elements: the split kernel and its combine, aligned and not. Four rows are
/// over 1024 pieces, more than one wave of 256-thread blocks on an H200, so the exact operators take
/// another block size there.
fn split_rows<T: Extremes>() {
    let mut seg = seg();
    let cols = (1usize << 22) + 5;
    let rows = 4;
    if !fits(rows, cols) {
        return;
    }
    let stride = cols + 1;
    let mut host = random_of::<T>(rows * stride, 9);
    // A maximum planted late in row 1 and a tie of it later still: argmax must find the first.
    let top = T::pads().0;
    host[stride + cols - 1000] = top;
    host[stride + cols - 10] = top;
    let ranges = cpu::row_ranges(rows, cols, stride);
    let mut first_bits = None;
    for offset in [0, 1] {
        let buf = upload_at(&host, offset);
        let input = DeviceView::from(&buf).slice(offset..offset + host.len());
        let got = run_all(&mut seg, input, Segments::rows(rows, cols, stride));
        check(&got, &host, &ranges, &format!("split @{offset}"));
        let bits = got.bits();
        assert_eq!(
            first_bits.get_or_insert_with(|| bits.clone()),
            &bits,
            "split: offsets differ"
        );
        let again = run_all(&mut seg, input, Segments::rows(rows, cols, stride));
        assert_eq!(bits, again.bits(), "split: runs differ");
    }
}

/// More rows of a block each (just over a warp's 2048 chunks) than one wave of 256-thread blocks holds, so
/// max, min, argmax and argmin may take another block size (fitted to the waves); a planted maximum and
/// its later tie in every row.
fn many_block_rows<T: Extremes>() {
    let mut seg = seg();
    let cols = 2049 * (16 / size_of::<T>()) + 3;
    let rows = 1100;
    if !fits(rows, cols) {
        return;
    }
    let mut host = random_of::<T>(rows * cols, 17);
    let top = T::pads().0;
    for r in 0..rows {
        host[r * cols + (r * 7919) % (cols - 1)] = top;
        host[r * cols + cols - 1] = top;
    }
    let ranges = cpu::row_ranges(rows, cols, cols);
    let buf = upload_at(&host, 0);
    let input = DeviceView::from(&buf).slice(..host.len());
    let got = run_all(&mut seg, input, Segments::fixed(rows, cols));
    check(&got, &host, &ranges, "many block rows");
}

/// Every element equal: argmax and argmin give index 0 of every segment, at every length.
fn all_equal_ties<T: Extremes>() {
    let mut seg = seg();
    for &cols in LENGTHS.iter().filter(|&&c| c > 0 && fits(3, c)) {
        let rows = rows_for(cols).min(50);
        let host = vec![T::some_value(); rows * cols];
        let buf = upload_at(&host, 0);
        let input = DeviceView::from(&buf).slice(..host.len());
        let got = run_all(&mut seg, input, Segments::fixed(rows, cols));
        check(
            &got,
            &host,
            &cpu::row_ranges(rows, cols, cols),
            &format!("equal ×{cols}"),
        );
        assert!(got.argmax.iter().chain(&got.argmin).all(|a| a.index == 0));
    }
}

/// NaN first, middle, last and twice (the first wins), -0 next to +0, infinities, in rows of each kernel.
fn nans_and_signed_zeros<T: Extremes + FloatTest>() {
    let mut seg = seg();
    let (nan, zero, neg_zero) = (T::from_f32(f32::NAN), T::from_f32(0.0), T::from_f32(-0.0));
    let (inf, neg_inf) = (T::from_f32(f32::INFINITY), T::from_f32(f32::NEG_INFINITY));
    for &cols in [3usize, 33, 1000, 70_000].iter().filter(|&&c| fits(8, c)) {
        let rows = 8;
        let mut host = random_of::<T>(rows * cols, cols as u64);
        host[0] = nan; // row 0: NaN first
        host[cols + cols / 2] = nan; // row 1: NaN in the middle, and another later
        host[2 * cols - 1] = nan;
        host[3 * cols - 1] = nan; // row 2: NaN last
        for x in &mut host[3 * cols..4 * cols] {
            *x = zero; // row 3: zeros, -0 first
        }
        host[3 * cols] = neg_zero;
        host[4 * cols + cols / 3] = inf; // row 4: +∞ and -∞ (sum NaN)
        host[4 * cols + cols / 2] = neg_inf;
        for x in &mut host[5 * cols..6 * cols] {
            *x = neg_inf; // row 5: all -∞
        }
        let buf = upload_at(&host, 1);
        let input = DeviceView::from(&buf).slice(1..1 + host.len());
        let got = run_all(&mut seg, input, Segments::fixed(rows, cols));
        check(
            &got,
            &host,
            &cpu::row_ranges(rows, cols, cols),
            &format!("specials ×{cols}"),
        );
    }
}

/// The `_async` variants on a stream of the caller's, and the argument checks.
fn async_variants<T: Extremes>() {
    let mut seg = seg();
    let (rows, cols) = (100, 77);
    let host = random_of::<T>(rows * cols, 5);
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    let segments = Segments::fixed(rows, cols);
    let (hi, lo) = T::pads();
    let mut sum = out(rows, T::Acc::default());
    let mut max = out(rows, hi);
    let mut min = out(rows, lo);
    let junk = Indexed {
        value: lo,
        index: 1,
    };
    let mut argmax = out(rows, junk);
    let mut argmin = out(rows, junk);
    // SAFETY: every buffer outlives the synchronize below.
    unsafe {
        seg.sum_async(&buf, segments, &mut sum, &stream).unwrap();
        seg.max_async(&buf, segments, &mut max, &stream).unwrap();
        seg.min_async(&buf, segments, &mut min, &stream).unwrap();
        seg.argmax_async(&buf, segments, &mut argmax, &stream)
            .unwrap();
        seg.argmin_async(&buf, segments, &mut argmin, &stream)
            .unwrap();
    }
    stream.synchronize().unwrap();
    let got = Results {
        sum: download(&sum, rows),
        max: download(&max, rows),
        min: download(&min, rows),
        argmax: download(&argmax, rows),
        argmin: download(&argmin, rows),
    };
    check(&got, &host, &cpu::row_ranges(rows, cols, cols), "async");

    // Argument checks: rows past the input, a short output.
    let err = seg.max(&buf, Segments::fixed(rows + 1, cols), &mut max);
    assert!(matches!(err, Err(Error::InvalidArgument(_))), "{err:?}");
    let mut short = out(rows - 1, hi);
    let err = seg.max(&buf, segments, &mut short);
    assert!(matches!(err, Err(Error::InvalidArgument(_))), "{err:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn bad_offsets_are_reported_and_never_read() {
    let mut seg = seg();
    let host: Vec<f32> = (0..100).map(|i| i as f32).collect();
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    // Segments: 0..10 fine, 20..15 (end < begin), 90..101 (end past n), 50..50 empty, u64::MAX..u64::MAX.
    let begin = DeviceBuffer::from_slice(&[0u64, 20, 90, 50, u64::MAX]).unwrap();
    let end = DeviceBuffer::from_slice(&[10u64, 15, 101, 50, u64::MAX]).unwrap();
    let segments = Segments::offsets(&begin, &end);
    let mut sums = out(5, -1.0f32);
    let err = seg.sum(&buf, segments, &mut sums);
    assert!(matches!(err, Err(Error::InvalidArgument(_))), "{err:?}");
    assert_eq!(download(&sums, 5), [45.0, 0.0, 0.0, 0.0, 0.0]);
    let mut arg = out(5, Indexed::<f32>::default());
    assert!(seg.argmax(&buf, segments, &mut arg).is_err());
    let got = download(&arg, 5);
    assert_eq!(got[0].index, 9);
    assert!(got[1..].iter().all(|a| a.index == u64::MAX));
    // Good offsets after bad ones: the error word is cleared per call.
    let good = Segments::offsets(
        DeviceView::from(&begin).slice(..1),
        DeviceView::from(&end).slice(..1),
    );
    seg.sum(&buf, good, &mut sums).unwrap();
    // Async: no error, the bad segments are empty.
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    // SAFETY: the buffers outlive the synchronize below.
    unsafe { seg.sum_async(&buf, segments, &mut sums, &stream).unwrap() };
    stream.synchronize().unwrap();
    assert_eq!(download(&sums, 5), [45.0, 0.0, 0.0, 0.0, 0.0]);
    // Host-side checks: unequal offset arrays, an output overlapping the offsets or the input.
    let uneven = Segments::offsets(DeviceView::from(&begin).slice(..2), &end);
    assert!(matches!(
        seg.sum(&buf, uneven, &mut sums),
        Err(Error::InvalidArgument(_))
    ));
    let mut bytes = DeviceBuffer::from_slice(&[0.0f32; 10]).unwrap();
    let mut view = reduce_host::DeviceViewMut::from(&mut bytes);
    // SAFETY: a read-only view of memory the mutable one covers, to provoke the overlap check.
    let alias = unsafe { DeviceView::<f32>::from_raw_parts(view.as_raw(), 10) };
    let err = seg.sum(alias, Segments::fixed(2, 5), view.slice_mut(..2));
    assert!(matches!(err, Err(Error::InvalidArgument(_))), "{err:?}");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn empty_segments_and_no_segments() {
    let mut seg = seg();
    let buf = DeviceBuffer::from_slice(&[1.0f32; 8]).unwrap();
    let mut sums = out(4, -1.0f32);
    seg.sum(&buf, Segments::rows(4, 0, 0), &mut sums).unwrap();
    assert_eq!(download(&sums, 4), [0.0; 4]);
    let mut arg = out(
        4,
        Indexed {
            value: 1.0f32,
            index: 3,
        },
    );
    seg.argmin(&buf, Segments::rows(4, 0, 2), &mut arg).unwrap();
    assert!(
        download(&arg, 4)
            .iter()
            .all(|a| a.index == u64::MAX && a.value == f32::INFINITY)
    );
    // No segments: nothing written, no error, even into an empty output.
    let empty = DeviceView::from(&buf).slice(..0);
    let mut sums = reduce_host::DeviceViewMut::from(&mut sums);
    seg.sum(empty, Segments::fixed(0, 5), sums.slice_mut(..0))
        .unwrap();
}

/// The softmax statistics of rows of every kernel against the f64 reference, special rows included, the
/// same bits on every run and at every start offset; then the finished softmax.
fn softmax_rows<T: Extremes + FloatTest + SoftmaxElement>() {
    let mut seg = seg();
    let to_f32 = |x: T| cpu::RefElement::to_f64(x) as f32;
    for (k, &cols) in LENGTHS
        .iter()
        .chain(&[(1usize << 22) + 5])
        .enumerate()
        .filter(|(_, c)| fits(6, **c))
    {
        let rows = rows_for(cols).clamp(6, 64);
        let stride = cols + 1;
        // Logits in [-8, 8).
        let mut host: Vec<T> = random_of::<f32>(rows * stride, 40 + k as u64)
            .into_iter()
            .map(|x| T::from_f32(8.0 * x))
            .collect();
        if cols > 0 {
            host[0] = T::from_f32(f32::NAN); // row 0: NaN
            for x in &mut host[stride..stride + cols] {
                *x = T::from_f32(f32::NEG_INFINITY); // row 1: all -∞
            }
            host[2 * stride + cols / 2] = T::from_f32(f32::INFINITY); // row 2: one +∞
            host[3 * stride] = T::from_f32(f32::NEG_INFINITY); // row 3: one -∞
        }
        let ranges = cpu::row_ranges(rows, cols, stride);
        let mut first_bits = None;
        for offset in [0, 1] {
            let buf = upload_at(&host, offset);
            let input = DeviceView::from(&buf).slice(offset..offset + host.len());
            let mut stats = out(
                rows,
                SoftmaxStats {
                    max: 7.0,
                    sum_exp: 7.0,
                },
            );
            seg.softmax_stats(input, Segments::rows(rows, cols, stride), &mut stats)
                .unwrap();
            let got = download(&stats, rows);
            for (s, r) in ranges.iter().enumerate() {
                let (m, e) = cpu::softmax_stats(&host[r.clone()]);
                let g = got[s];
                let what = format!("softmax {rows}×{cols} @{offset} row {s}: {g:?} vs ({m}, {e})");
                if m.is_nan() {
                    assert!(g.max.is_nan() && g.sum_exp.is_nan(), "{what}");
                    continue;
                }
                assert_eq!(g.max, m as f32, "{what}");
                // ex2.approx: a few ulp per term, plus the f32 sum's rounding.
                let tol = 1e-5 * e + sum_tolerance(cols, e);
                assert!(((g.sum_exp as f64) - e).abs() <= tol, "{what}");
            }
            let bits = format!("{got:?}");
            assert_eq!(
                first_bits.get_or_insert_with(|| bits.clone()),
                &bits,
                "softmax ×{cols}"
            );
            // Finish one ordinary row on the host and compare with the CPU softmax.
            if cols > 0 && rows > 4 {
                let row = &host[ranges[4].clone()];
                let g = got[4];
                let (m, e) = cpu::softmax_stats(row);
                for &x in row.iter().take(50) {
                    let p = (to_f32(x) - g.max).exp() / g.sum_exp;
                    let want = ((to_f32(x) as f64) - m).exp() / e;
                    assert!(
                        (p as f64 - want).abs() <= 1e-5 * want + 1e-12,
                        "softmax p {p} vs {want}"
                    );
                }
            }
        }
    }
}
