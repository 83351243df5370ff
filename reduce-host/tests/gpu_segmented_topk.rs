//! GPU tests of `DeviceTopK::segmented_max_k`/`segmented_min_k` against a CPU reference that sorts each
//! segment's indices by value (NaN beyond every number, −0.0 equal to +0.0, the smaller index first among
//! equals): each segment's indices must be exactly the reference's first k (then `u64::MAX` past its
//! length), each value the segment's element at its index (then the worst value). Ignored without a GPU.
mod common;

use std::cmp::Ordering;

use common::topk::{by_value, tied_input};
use common::{FloatTest, NEEDS_GPU, TestElement, download, max_n, rng, upload_at};
use cust::memory::DeviceBuffer;
use cust::stream::{Stream, StreamFlags};
use rand::Rng;
use reduce_host::{BF16, DeviceTopK, DeviceView, Error, SEGMENT_K_MAX, Segments, TopKElement};

fn handle() -> DeviceTopK {
    DeviceTopK::new()
        .expect("GPU tests need a CUDA device (run them with --include-ignored only on a GPU)")
}

/// The padding's value: the least non-NaN special for `max_k` (−∞, or the least integer), the greatest
/// for `min_k`.
fn worst<T: TestElement>(largest: bool) -> T {
    let specials = T::specials().into_iter().filter(|x| !x.is_nan());
    let pick = |a: T, b: T| {
        let b_worse = by_value(b, a, largest) == Ordering::Greater;
        if b_worse { b } else { a }
    };
    specials.reduce(pick).expect("every type has specials")
}

/// The segments as `(start, len)` in the input.
fn ranges(layout: &Layout) -> Vec<(usize, usize)> {
    match layout {
        Layout::Rows { rows, cols, stride } => (0..*rows).map(|r| (r * stride, *cols)).collect(),
        Layout::Offsets(v) => v.iter().map(|&(b, e)| (b, e.saturating_sub(b))).collect(),
    }
}

/// A layout on the host side, to build both the call's `Segments` and the reference.
enum Layout {
    Rows {
        rows: usize,
        cols: usize,
        stride: usize,
    },
    Offsets(Vec<(usize, usize)>),
}

/// Runs the per-segment `max_k`/`min_k` for each k on `host` (placed at `offset`) cut by `layout`, and
/// checks every segment's results.
fn check<T: TestElement + TopKElement>(
    topk: &mut DeviceTopK,
    host: &[T],
    offset: usize,
    layout: &Layout,
    ks: &[u64],
    what: &str,
) {
    let buf = upload_at(host, offset);
    let input = DeviceView::from(&buf).slice(offset..offset + host.len());
    let segs = ranges(layout);
    let (begin, end): (Vec<u64>, Vec<u64>) = match layout {
        Layout::Offsets(v) => v.iter().map(|&(b, e)| (b as u64, e as u64)).unzip(),
        Layout::Rows { .. } => (vec![0], vec![0]),
    };
    let (begin, end) = (
        DeviceBuffer::from_slice(&begin).unwrap(),
        DeviceBuffer::from_slice(&end).unwrap(),
    );
    let segments = match layout {
        Layout::Rows { rows, cols, stride } => Segments::rows(*rows, *cols, *stride),
        Layout::Offsets(_) => Segments::offsets(&begin, &end),
    };
    for largest in [true, false] {
        let want: Vec<Vec<u64>> = segs
            .iter()
            .map(|&(s, len)| {
                let row = &host[s..s + len];
                let mut order: Vec<u64> = (0..len as u64).collect();
                order.sort_by(|&i, &j| {
                    by_value(row[i as usize], row[j as usize], largest).then(i.cmp(&j))
                });
                order
            })
            .collect();
        for &k in ks {
            let total = segs.len() * k as usize;
            let mut values = DeviceBuffer::from_slice(&vec![T::default(); total + 1]).unwrap();
            let mut indices = DeviceBuffer::from_slice(&vec![u64::MAX - 1; total + 1]).unwrap();
            if largest {
                topk.segmented_max_k(input, segments, k, &mut values, &mut indices)
                    .unwrap();
            } else {
                topk.segmented_min_k(input, segments, k, &mut values, &mut indices)
                    .unwrap();
            }
            let (got, vals) = (download(&indices), download(&values));
            assert_eq!(
                got[total],
                u64::MAX - 1,
                "{what}: k {k}: wrote past count · k"
            );
            let pad = worst::<T>(largest);
            for (s, (&(start, len), order)) in segs.iter().zip(&want).enumerate() {
                let ctx = format!(
                    "{what}: segment {s} of {} (len {len}), offset {offset}, k {k}, largest {largest}",
                    segs.len()
                );
                let (got, vals) = (
                    &got[s * k as usize..][..k as usize],
                    &vals[s * k as usize..][..k as usize],
                );
                let m = len.min(k as usize);
                assert_eq!(&got[..m], &order[..m], "{ctx}");
                assert!(got[m..].iter().all(|&i| i == u64::MAX), "{ctx}: padding");
                for j in 0..m {
                    let x = host[start + got[j] as usize];
                    assert!(common::same_value(vals[j], x), "{ctx}: value {j}");
                }
                for v in &vals[m..] {
                    assert!(common::same_value(*v, pad), "{ctx}: padding value");
                }
            }
        }
    }
}

/// Rows (with and without a stride), few long rows (split into pieces and merged), offsets with empty
/// and ragged segments, at input offsets 0 and 3, k from 1 to [`SEGMENT_K_MAX`] and beyond some rows'
/// length.
fn every_layout<T: TestElement + TopKElement>(what: &str) {
    let mut topk = handle();
    let ks = [1, 2, 7, 64, 1000, SEGMENT_K_MAX];
    let shapes = [
        (1, 1, 1),
        (3, 5, 8),
        (7, 1000, 1003),
        (33, 4097, 4099),
        (2, 70_000, 70_001),
        (64, 40_000, 40_000),
    ];
    for (i, &(rows, cols, stride)) in shapes.iter().enumerate() {
        let n = (rows - 1) * stride + cols;
        if n > max_n() {
            continue;
        }
        let host = tied_input::<T>(n, 11 + i as u64);
        let layout = Layout::Rows { rows, cols, stride };
        for offset in [0, 3] {
            check(&mut topk, &host, offset, &layout, &ks, what);
        }
    }
    let n = 300_000.min(max_n());
    let host = tied_input::<T>(n, 5);
    let mut r = rng(6);
    let mut cuts: Vec<usize> = (0..40).map(|_| r.random_range(0..n)).collect();
    cuts.extend([0, 0, n, n, n / 2, n / 2]);
    cuts.sort();
    let mut segs: Vec<(usize, usize)> = cuts.windows(2).map(|w| (w[0], w[1])).collect();
    segs.push((0, n)); // overlapping segments are fine: they only read
    check(&mut topk, &host, 1, &Layout::Offsets(segs), &ks, what);
    // Two long segments by offsets: split by their mean length.
    let halves = Layout::Offsets(vec![(0, n / 2), (n / 2, n)]);
    check(&mut topk, &host, 0, &halves, &[1, 64, SEGMENT_K_MAX], what);
}

macro_rules! every_type {
    ($($name:ident: $t:ty),*) => {$(
        #[test]
        #[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
        fn $name() {
            every_layout::<$t>(stringify!($t));
        }
    )*};
}

every_type!(
    every_layout_f32: f32, every_layout_f64: f64, every_layout_f16: reduce_host::F16,
    every_layout_bf16: reduce_host::BF16, every_layout_i32: i32, every_layout_u32: u32,
    every_layout_i64: i64, every_layout_u64: u64, every_layout_u8: u8
);

/// The data that keeps the threshold low: sorted ascending (every element a new best, a compaction every
/// few trips), descending, all equal, 16 values, and NaN, ±0 and ±∞ mixed in; rows long enough to be
/// split and short enough not to be.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn adversarial_orders_ties_and_nan() {
    let _ = NEEDS_GPU;
    let mut topk = handle();
    let cols = 50_000;
    let ks = [1, 50, 1000, SEGMENT_K_MAX];
    let mut r = rng(3);
    type Row = Box<dyn Fn(usize) -> f32>;
    let rows: [(&str, Row); 5] = [
        ("ascending", Box::new(|i| i as f32)),
        ("descending", Box::new(|i| -(i as f32))),
        ("equal", Box::new(|_| 1.5)),
        ("16 values", Box::new(|i| ((i * 7919) % 16) as f32)),
        (
            "specials",
            Box::new(|i| [0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.0][i % 6]),
        ),
    ];
    for (what, f) in &rows {
        let host: Vec<f32> = (0..3 * cols).map(|i| f(i % cols)).collect();
        let layout = Layout::Rows {
            rows: 3,
            cols,
            stride: cols,
        };
        check(&mut topk, &host, 0, &layout, &ks, what);
        let one = Layout::Rows {
            rows: 1,
            cols: 3 * cols,
            stride: 3 * cols,
        };
        check(&mut topk, &host, 0, &one, &ks, what);
    }
    // Logits-like rows, bf16, with the example's k.
    let host: Vec<reduce_host::BF16> = (0..8 * 30_000)
        .map(|_| FloatTest::from_f32(r.random_range(-8.0f32..8.0)))
        .collect();
    let layout = Layout::Rows {
        rows: 8,
        cols: 30_000,
        stride: 30_000,
    };
    check(&mut topk, &host, 0, &layout, &[1, 50, 1024], "bf16 logits");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn bad_arguments_and_offsets() {
    let mut topk = handle();
    let x = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let mut vals = DeviceBuffer::from_slice(&[9.0f32; 4]).unwrap();
    let mut idx = DeviceBuffer::from_slice(&[9u64; 4]).unwrap();
    let two = Segments::fixed(2, 2);
    // k past the limit, outputs short, rows past the input: refused, nothing written.
    let err = topk
        .segmented_max_k(&x, two, SEGMENT_K_MAX + 1, &mut vals, &mut idx)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let err = topk
        .segmented_max_k(&x, two, 3, &mut vals, &mut idx)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let err = topk
        .segmented_max_k(&x, Segments::fixed(3, 2), 1, &mut vals, &mut idx)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    topk.segmented_max_k(&x, two, 0, &mut vals, &mut idx)
        .unwrap();
    topk.segmented_max_k(&x, Segments::fixed(0, 2), 2, &mut vals, &mut idx)
        .unwrap();
    assert_eq!(download(&idx), [9; 4]);
    assert_eq!(download(&vals), [9.0; 4]);
    // A bad segment is padding and an error; the good ones are still right.
    let begin = DeviceBuffer::from_slice(&[0u64, 3, 1]).unwrap();
    let end = DeviceBuffer::from_slice(&[2u64, 1, 9]).unwrap();
    let mut idx6 = DeviceBuffer::from_slice(&[9u64; 6]).unwrap();
    let err = topk
        .segmented_max_k_indices(&x, Segments::offsets(&begin, &end), 2, &mut idx6)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(
        download(&idx6),
        [1, 0, u64::MAX, u64::MAX, u64::MAX, u64::MAX]
    );
    // The handle works on after the error, and the word is cleared.
    let end = DeviceBuffer::from_slice(&[2u64, 4, 4]).unwrap();
    topk.segmented_max_k_indices(&x, Segments::offsets(&begin, &end), 2, &mut idx6)
        .unwrap();
    // Indices are in the segment: [3, 4) holds one element, [1, 4) is 2.0, 3.0, 4.0.
    assert_eq!(download(&idx6), [1, 0, 0, u64::MAX, 2, 1]);
    // k = 1 on few offset segments (the select; many run as argmax: `k_one_on_many_segments_…`) pads and
    // reports the same way.
    let end = DeviceBuffer::from_slice(&[2u64, 1, 9]).unwrap();
    let mut vals3 = DeviceBuffer::from_slice(&[9.0f32; 3]).unwrap();
    let mut idx3 = DeviceBuffer::from_slice(&[9u64; 3]).unwrap();
    let err = topk
        .segmented_max_k(
            &x,
            Segments::offsets(&begin, &end),
            1,
            &mut vals3,
            &mut idx3,
        )
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(download(&idx3), [1, u64::MAX, u64::MAX]);
    assert_eq!(
        download(&vals3),
        [2.0, f32::NEG_INFINITY, f32::NEG_INFINITY]
    );
    let end = DeviceBuffer::from_slice(&[2u64, 3, 4]).unwrap();
    topk.segmented_min_k(
        &x,
        Segments::offsets(&begin, &end),
        1,
        &mut vals3,
        &mut idx3,
    )
    .unwrap();
    // [3, 3) is empty: padding, the greatest value for min_k.
    assert_eq!(download(&idx3), [0, u64::MAX, 0]);
    assert_eq!(download(&vals3), [1.0, f32::INFINITY, 2.0]);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn async_calls_agree_with_blocking_ones() {
    let mut topk = handle();
    let (rows, cols) = (16, 100_000);
    let host = tied_input::<f32>(rows * cols, 21);
    let x = DeviceBuffer::from_slice(&host).unwrap();
    let segments = Segments::fixed(rows, cols);
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    let bits = |v: &DeviceBuffer<f32>| download(v).iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    // k = 1 on rows is the per-segment argmin, the rest the select.
    for k in [256, 1] {
        let mut v1 = DeviceBuffer::from_slice(&vec![0f32; rows * k]).unwrap();
        let mut i1 = DeviceBuffer::from_slice(&vec![0u64; rows * k]).unwrap();
        topk.segmented_min_k(&x, segments, k as u64, &mut v1, &mut i1)
            .unwrap();
        let mut v2 = DeviceBuffer::from_slice(&vec![1f32; rows * k]).unwrap();
        let mut i2 = DeviceBuffer::from_slice(&vec![1u64; rows * k]).unwrap();
        // SAFETY: the buffers live until the stream is synchronised below.
        unsafe {
            topk.segmented_min_k_async(&x, segments, k as u64, &mut v2, &mut i2, &stream)
                .unwrap();
        }
        stream.synchronize().unwrap();
        assert_eq!(download(&i1), download(&i2));
        assert_eq!(bits(&v1), bits(&v2)); // NaN is planted: compare bits
    }
}

/// The best index of `x` by the top-k rules (`None` when empty).
fn best<T: TestElement>(x: &[T], largest: bool) -> Option<usize> {
    (0..x.len()).min_by(|&i, &j| by_value(x[i], x[j], largest).then(i.cmp(&j)))
}

/// Runs k = 1 on `host` cut into `segs` (`(begin, end)`, bad ones allowed) both ways, values and
/// indices-only, and checks every segment: its best index and the value's own bits, or the padding.
fn check_k_one<T: TestElement + TopKElement>(
    topk: &mut DeviceTopK,
    host: &[T],
    segs: &[(u64, u64)],
    bits: impl Fn(T) -> u64,
    what: &str,
) {
    let x = DeviceBuffer::from_slice(host).unwrap();
    let begin = DeviceBuffer::from_slice(&segs.iter().map(|s| s.0).collect::<Vec<_>>()).unwrap();
    let end = DeviceBuffer::from_slice(&segs.iter().map(|s| s.1).collect::<Vec<_>>()).unwrap();
    let bad = segs.iter().any(|&(b, e)| b > e || e > host.len() as u64);
    let count = segs.len();
    for largest in [true, false] {
        let mut vals = DeviceBuffer::from_slice(&vec![T::default(); count]).unwrap();
        let mut idx = DeviceBuffer::from_slice(&vec![7u64; count]).unwrap();
        let mut only = DeviceBuffer::from_slice(&vec![7u64; count]).unwrap();
        let segments = Segments::offsets(&begin, &end);
        let (r1, r2) = if largest {
            (
                topk.segmented_max_k(&x, segments, 1, &mut vals, &mut idx),
                topk.segmented_max_k_indices(&x, segments, 1, &mut only),
            )
        } else {
            (
                topk.segmented_min_k(&x, segments, 1, &mut vals, &mut idx),
                topk.segmented_min_k_indices(&x, segments, 1, &mut only),
            )
        };
        for r in [r1, r2] {
            assert_eq!(r.is_err(), bad, "{what}: bad offsets reported");
        }
        let (vals, idx, only) = (download(&vals), download(&idx), download(&only));
        assert_eq!(idx, only, "{what}: indices-only");
        for (s, &(b, e)) in segs.iter().enumerate() {
            let ctx = format!("{what}: segment {s} [{b}, {e}), largest {largest}");
            let x = (b <= e && e <= host.len() as u64).then(|| &host[b as usize..e as usize]);
            match x.and_then(|x| best(x, largest)) {
                Some(i) => {
                    assert_eq!(idx[s], i as u64, "{ctx}");
                    assert_eq!(bits(vals[s]), bits(x.unwrap()[i]), "{ctx}: value bits");
                }
                None => {
                    assert_eq!(idx[s], u64::MAX, "{ctx}: padding");
                    assert_eq!(bits(vals[s]), bits(worst::<T>(largest)), "{ctx}: padding");
                }
            }
        }
    }
}

/// k = 1 on many segments runs as the per-segment argmax (argmin): the best index, the value's own bits
/// (NaN payloads, the sign of zero), indices-only calls, empty and bad offsets, and one-byte values.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn k_one_on_many_segments_keeps_the_rules() {
    let mut topk = handle();
    let mut r = rng(77);
    // f32: few values, so ties everywhere, both zeros, and NaNs of two payloads.
    let n = 40_000;
    let host: Vec<f32> = (0..n)
        .map(|_| match r.random_range(0..40) {
            0..10 => -1.0,
            10..20 => -0.0,
            20..30 => 0.0,
            30..38 => 1.0,
            38 => f32::from_bits(0x7fc0_0001),
            _ => f32::from_bits(0xffc0_0002),
        })
        .collect();
    // 4096 segments (more than four an SM): mostly short, some empty, some out of range.
    let mut segs: Vec<(u64, u64)> = (0..4096)
        .map(|s| {
            let b = r.random_range(0..n as u64 - 40);
            match s % 13 {
                3 => (b, b),
                _ => (b, b + r.random_range(1..40)),
            }
        })
        .collect();
    let f32_bits = |v: f32| v.to_bits() as u64;
    check_k_one(&mut topk, &host, &segs, f32_bits, "f32");
    segs[100] = (5, 4);
    segs[2000] = (n as u64 - 2, n as u64 + 1);
    check_k_one(&mut topk, &host, &segs, f32_bits, "f32, bad offsets");
    // bf16 with a NaN payload, and u8 (one-byte values: the narrowest split).
    let bf: Vec<BF16> = host
        .iter()
        .map(|&v| match v.to_bits() {
            0x7fc0_0001 => BF16(half::bf16::from_bits(0x7fa1)),
            _ => BF16(half::bf16::from_f32(v)),
        })
        .collect();
    segs[100] = (5, 9);
    segs[2000] = (7, 7);
    check_k_one(
        &mut topk,
        &bf,
        &segs,
        |v: BF16| v.0.to_bits() as u64,
        "bf16",
    );
    let bytes: Vec<u8> = (0..n).map(|_| r.random_range(0..4u8)).collect();
    check_k_one(&mut topk, &bytes, &segs, |v: u8| v as u64, "u8");
}
