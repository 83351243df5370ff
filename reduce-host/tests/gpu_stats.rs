//! GPU tests of the statistics (`reduce_host::stats`): `stats`, `var_mean`, `aminmax`, the norms, the
//! mean square and `logsumexp`, device-wide at element offsets 0–3 and lengths around the warp, block and
//! vector sizes, and per segment on rows and offsets, each against an f64 CPU reference, on f32, f64, f16
//! and bf16, with NaN, ±0, ±∞, ties, values far from zero (the variance of `1e6 + U(0, 1)`) and values
//! whose squares leave f64's range. Ignored without a GPU.
mod common;

use common::{EDGE_SIZES, max_n, rng};
use cust::memory::{CopyDestination, DeviceBuffer, DeviceCopy};
use rand::Rng;
use reduce_host::custom::OpAcc;
use reduce_host::stats::{ExpSum, Extremum, Moments, Squares, StatElement, Stats};
use reduce_host::{BF16, DeviceReduce, DeviceSegmentedReduce, DeviceView, F16, Segments};

/// An element made from an f64 (rounded), and widened back exactly.
trait Case: StatElement + DeviceCopy {
    fn from_f64(x: f64) -> Self;
    fn wide(self) -> f64;
    /// Relative error of one rounding of the arithmetic its runs are folded in.
    const EPS: f64;
}

impl Case for f32 {
    fn from_f64(x: f64) -> Self {
        x as f32
    }
    fn wide(self) -> f64 {
        self as f64
    }
    const EPS: f64 = f32::EPSILON as f64;
}
impl Case for f64 {
    fn from_f64(x: f64) -> Self {
        x
    }
    fn wide(self) -> f64 {
        self
    }
    const EPS: f64 = f64::EPSILON;
}
impl Case for F16 {
    fn from_f64(x: f64) -> Self {
        F16(half::f16::from_f64(x))
    }
    fn wide(self) -> f64 {
        self.to_f32() as f64
    }
    const EPS: f64 = f32::EPSILON as f64;
}
impl Case for BF16 {
    fn from_f64(x: f64) -> Self {
        BF16(half::bf16::from_f64(x))
    }
    fn wide(self) -> f64 {
        self.to_f32() as f64
    }
    const EPS: f64 = f32::EPSILON as f64;
}

/// The f64 reference of everything, by two passes.
#[derive(Debug)]
struct Reference {
    mean: f64,
    m2: f64,
    min: Option<(f64, u64)>,
    max: Option<(f64, u64)>,
    l1: f64,
    l2: f64,
    inf: f64,
    lse: f64,
    abs_sum: f64,
}

fn reference(x: &[f64]) -> Reference {
    let n = x.len();
    let mean = x.iter().sum::<f64>() / n as f64;
    let m2 = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>();
    let pick = |better: fn(f64, f64) -> bool| {
        let mut best: Option<(f64, u64)> = None;
        for (i, &v) in x.iter().enumerate() {
            best = match best {
                None => Some((v, i as u64)),
                Some((b, _)) if b.is_nan() => best,
                Some(_) if v.is_nan() => Some((v, i as u64)),
                Some((b, _)) if better(v, b) => Some((v, i as u64)),
                _ => best,
            };
        }
        best
    };
    let scale = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let l2 = if scale > 0.0 && scale.is_finite() {
        scale
            * x.iter()
                .map(|v| (v / scale) * (v / scale))
                .sum::<f64>()
                .sqrt()
    } else {
        x.iter().map(|v| v * v).sum::<f64>().sqrt()
    };
    let big = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
    let lse = if x.iter().any(|v| v.is_nan()) {
        f64::NAN
    } else if big.is_infinite() {
        big
    } else {
        big + x.iter().map(|v| (v - big).exp()).sum::<f64>().ln()
    };
    Reference {
        mean,
        m2,
        min: pick(|a, b| a < b),
        max: pick(|a, b| a > b),
        l1: x.iter().map(|v| v.abs()).sum(),
        l2,
        inf: if x.iter().any(|v| v.is_nan()) {
            f64::NAN
        } else {
            scale
        },
        lse,
        abs_sum: x.iter().map(|v| v.abs()).sum(),
    }
}

/// `a` and `b` agree within `tol` (relative to `scale`), or are both NaN, or equal (infinities).
fn close(a: f64, b: f64, tol: f64, scale: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * scale.max(f64::MIN_POSITIVE)
}

fn extremum(e: Option<Extremum>) -> Option<(f64, u64)> {
    e.map(|e| (e.value, e.index))
}

fn same_extremum(a: Option<(f64, u64)>, b: Option<(f64, u64)>) -> bool {
    match (a, b) {
        (Some((x, i)), Some((y, j))) => i == j && (x == y || (x.is_nan() && y.is_nan())),
        (None, None) => true,
        _ => false,
    }
}

/// Checks every device-wide statistic of `host` (uploaded at `offset`) against the reference.
fn check_all<T: Case>(reduce: &mut DeviceReduce, host: &[T], offset: usize, what: &str) {
    let mut padded = vec![T::from_f64(0.0); offset];
    padded.extend_from_slice(host);
    let buf = DeviceBuffer::from_slice(&padded).unwrap();
    let view = DeviceView::from(&buf).slice(offset..);
    let x: Vec<f64> = host.iter().map(|v| v.wide()).collect();
    let r = reference(&x);
    let n = host.len();
    let what = format!("{what} n={n} offset={offset}");
    // Sums of up to 64 elements in f32, the rest in f64: a few roundings of the larger magnitude per element.
    let tol = 4.0 * T::EPS * (n as f64).sqrt().max(64.0);

    let s: Stats = reduce.stats(view).unwrap();
    assert_eq!(s.count, n as u64, "{what}: count");
    assert!(
        same_extremum(extremum(s.min), r.min),
        "{what}: min {:?} vs {:?}",
        s.min,
        r.min
    );
    assert!(
        same_extremum(extremum(s.max), r.max),
        "{what}: max {:?} vs {:?}",
        s.max,
        r.max
    );
    if n == 0 {
        assert!(s.mean.is_nan() && s.variance.is_nan(), "{what}: empty");
    } else {
        assert!(
            close(s.mean, r.mean, tol, r.abs_sum / n as f64),
            "{what}: mean {} vs {}",
            s.mean,
            r.mean
        );
        let var = r.m2 / n as f64;
        assert!(
            close(s.variance, var, tol, var.max(r.mean * r.mean * T::EPS)),
            "{what}: var {} vs {var}",
            s.variance
        );
    }
    let (var, mean) = reduce.var_mean(view, 1.0).unwrap();
    assert!(
        (n < 2 && var.is_nan()) || close(var, r.m2 / (n as f64 - 1.0), tol, var.abs()),
        "{what}: var_mean {var}"
    );
    assert!(
        close(mean, s.mean, tol, r.abs_sum / n.max(1) as f64) || (mean.is_nan() && s.mean.is_nan()),
        "{what}: var_mean's mean {mean} vs stats' {}",
        s.mean
    );
    let mm = reduce.aminmax(view).unwrap();
    assert!(
        same_extremum(extremum(mm.map(|m| m.0)), r.min),
        "{what}: aminmax min"
    );
    assert!(
        same_extremum(extremum(mm.map(|m| m.1)), r.max),
        "{what}: aminmax max"
    );

    let l1 = reduce.norm_l1(view).unwrap();
    assert!(close(l1, r.l1, tol, r.l1), "{what}: l1 {l1} vs {}", r.l1);
    let l2 = reduce.norm_l2(view).unwrap();
    assert!(close(l2, r.l2, tol, r.l2), "{what}: l2 {l2} vs {}", r.l2);
    let inf = reduce.norm_inf(view).unwrap();
    assert!(
        close(inf, r.inf, 0.0, 0.0),
        "{what}: inf {inf} vs {}",
        r.inf
    );
    let ms = reduce.mean_square(view).unwrap();
    let want_ms = r.l2 * r.l2 / n as f64;
    assert!(
        (n == 0 && ms.is_nan()) || close(ms, want_ms, 2.0 * tol, want_ms),
        "{what}: mean square {ms} vs {want_ms}"
    );
    let lse = reduce.logsumexp(view).unwrap();
    // f32 exponentials (ex2.approx, about 2 ulp) for the small types.
    let lse_tol = if size_of::<T>() == 8 { 1e-13 } else { 2e-6 };
    assert!(
        (n == 0 && lse == f64::NEG_INFINITY) || close(lse, r.lse, lse_tol, r.lse.abs().max(1.0)),
        "{what}: logsumexp {lse} vs {}",
        r.lse
    );
}

/// Random values in `[-4, 4)` with one in `special` a special value (NaN, ±∞, ±0, a repeated extreme).
fn random_case<T: Case>(n: usize, seed: u64, special: u32) -> Vec<T> {
    let mut r = rng(seed);
    (0..n)
        .map(|_| {
            let x = if special > 0 && r.random_range(0..special) == 0 {
                match r.random_range(0..6) {
                    0 => f64::NAN,
                    1 => f64::INFINITY,
                    2 => f64::NEG_INFINITY,
                    3 => 0.0,
                    4 => -0.0,
                    _ => 4.0,
                }
            } else {
                r.random_range(-4.0..4.0)
            };
            T::from_f64(x)
        })
        .collect()
}

fn every_size<T: Case>(name: &str) {
    let mut reduce = common::gpu();
    for (k, &n) in EDGE_SIZES.iter().chain(&[4096 + 5, 1 << 22]).enumerate() {
        if n > max_n() {
            continue;
        }
        let host = random_case::<T>(n, 40 + k as u64, 0);
        for offset in 0..4 {
            check_all(&mut reduce, &host, offset, name);
        }
    }
}

fn special_values<T: Case>(name: &str) {
    let mut reduce = common::gpu();
    let sizes = [1usize, 7, 100, 1000, 100_003]
        .into_iter()
        .filter(|&n| n <= max_n().max(1000));
    for (k, n) in sizes.enumerate() {
        for special in [2, 50, 5000] {
            let host = random_case::<T>(n, 100 + k as u64 + special as u64, special);
            check_all(
                &mut reduce,
                &host,
                k % 4,
                &format!("{name} special 1/{special}"),
            );
        }
    }
    // Ties: the first of equal extremes, and -0.0 against +0.0.
    let host: Vec<T> = [1.0, -0.0, 3.0, 0.0, 3.0, -0.0, 1.0]
        .map(T::from_f64)
        .to_vec();
    let mm = reduce
        .aminmax(&DeviceBuffer::from_slice(&host).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!((mm.0.index, mm.1.index), (1, 2), "{name}: ties");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn every_statistic_at_every_size_and_offset() {
    every_size::<f32>("f32");
    every_size::<f64>("f64");
    every_size::<F16>("f16");
    every_size::<BF16>("bf16");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn special_values_and_ties() {
    special_values::<f32>("f32");
    special_values::<f64>("f64");
    special_values::<F16>("f16");
    special_values::<BF16>("bf16");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn the_variance_of_values_far_from_zero_keeps_its_digits() {
    let mut reduce = common::gpu();
    let n = (1usize << 22).min(max_n());
    let mut r = rng(7);
    let host: Vec<f32> = (0..n).map(|_| 1e6 + r.random_range(0.0f32..1.0)).collect();
    let x: Vec<f64> = host.iter().map(|&v| v as f64).collect();
    let rf = reference(&x);
    let (var, mean) = reduce
        .var_mean(&DeviceBuffer::from_slice(&host).unwrap(), 0.0)
        .unwrap();
    let want = rf.m2 / n as f64;
    assert!((var - want).abs() <= 1e-6 * want, "var {var} vs {want}");
    assert!(
        (mean - rf.mean).abs() <= 1e-10 * rf.mean,
        "mean {mean} vs {}",
        rf.mean
    );
    // The one-pass formula in f64 would not do: the test would be empty if it did.
    let naive = x.iter().map(|v| v * v).sum::<f64>() / n as f64 - rf.mean * rf.mean;
    assert!((naive - want).abs() > 1e-6 * want);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn norms_of_huge_and_tiny_values_do_not_overflow() {
    let mut reduce = common::gpu();
    for &(v, n) in &[
        (1e300f64, 1000usize),
        (1e-300, 1000),
        (1e200, 77),
        (3e-320, 64),
    ] {
        let host: Vec<f64> = (0..n).map(|i| if i % 2 == 0 { v } else { -v }).collect();
        let want = v * (n as f64).sqrt();
        let got = reduce
            .norm_l2(&DeviceBuffer::from_slice(&host).unwrap())
            .unwrap();
        assert!(
            (got - want).abs() <= 1e-12 * want,
            "{v} × {n}: {got} vs {want}"
        );
        assert_eq!(
            reduce
                .norm_inf(&DeviceBuffer::from_slice(&host).unwrap())
                .unwrap(),
            v
        );
    }
    // f32 and bf16 values whose f32 squares would overflow.
    let host = vec![3e30f32; 1000];
    let got = reduce
        .norm_l2(&DeviceBuffer::from_slice(&host).unwrap())
        .unwrap();
    let want = 3e30f32 as f64 * 1000f64.sqrt();
    assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
    let host = vec![BF16(half::bf16::from_f32(1e38)); 300];
    let got = reduce
        .norm_l2(&DeviceBuffer::from_slice(&host).unwrap())
        .unwrap();
    let want = half::bf16::from_f32(1e38).to_f64() * 300f64.sqrt();
    assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
}

fn download<A: DeviceCopy + Default + Clone>(buf: &DeviceBuffer<A>) -> Vec<A> {
    let mut v = vec![A::default(); buf.len()];
    buf.copy_to(&mut v[..]).unwrap();
    v
}

fn per_row<T: Case>(name: &str) {
    let mut seg = DeviceSegmentedReduce::new().unwrap();
    for &(rows, cols, stride) in &[
        (3usize, 0usize, 0usize),
        (5, 1, 3),
        (64, 37, 40),
        (7, 5000, 5003),
        // 8 lanes a row for the statistics (65 … 256 chunks of f32 and 16-bit rows).
        (33, 300, 300),
        (17, 1000, 1003),
        (2, 300_001, 300_001),
    ] {
        let len = if rows == 0 {
            0
        } else {
            (rows - 1) * stride + cols
        };
        let host = random_case::<T>(len.max(1), rows as u64 * 31 + cols as u64, 0);
        let buf = DeviceBuffer::from_slice(&host).unwrap();
        let segments = Segments::rows(rows, cols, stride.max(cols));
        let mut moments = DeviceBuffer::from_slice(&vec![OpAcc(Moments::default()); rows]).unwrap();
        let mut squares = DeviceBuffer::from_slice(&vec![OpAcc(Squares::default()); rows]).unwrap();
        let mut lse = DeviceBuffer::from_slice(&vec![OpAcc(ExpSum::default()); rows]).unwrap();
        seg.row_var_mean(&buf, segments, &mut moments).unwrap();
        seg.row_squares(&buf, segments, &mut squares).unwrap();
        seg.row_logsumexp(&buf, segments, &mut lse).unwrap();
        let (moments, squares, lse) = (download(&moments), download(&squares), download(&lse));
        let tol = 4.0 * T::EPS * (cols as f64).sqrt().max(64.0);
        for row in 0..rows {
            let start = row * stride.max(cols);
            let x: Vec<f64> = host[start..start + cols].iter().map(|v| v.wide()).collect();
            let r = reference(&x);
            let what = format!("{name} {rows}×{cols} (stride {stride}) row {row}");
            let m = moments[row].0;
            assert_eq!(m.count(), cols as u64, "{what}");
            if cols > 0 {
                assert!(
                    close(m.mean(), r.mean, tol, r.abs_sum / cols as f64),
                    "{what}: mean"
                );
                assert!(
                    close(m.variance(0.0), r.m2 / cols as f64, tol, r.m2 / cols as f64),
                    "{what}: var"
                );
            }
            assert!(close(squares[row].0.norm(), r.l2, tol, r.l2), "{what}: l2");
            let got = lse[row].0.logsumexp();
            let lse_tol = if size_of::<T>() == 8 { 1e-13 } else { 2e-6 };
            assert!(
                (cols == 0 && got == f64::NEG_INFINITY)
                    || close(got, r.lse, lse_tol, r.lse.abs().max(1.0)),
                "{what}: lse {got} vs {}",
                r.lse
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn per_row_statistics_on_rows_with_a_stride() {
    per_row::<f32>("f32");
    per_row::<f64>("f64");
    per_row::<F16>("f16");
    per_row::<BF16>("bf16");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn per_segment_statistics_on_offsets_with_empty_segments() {
    let mut seg = DeviceSegmentedReduce::new().unwrap();
    let host = random_case::<f32>(100_000.min(max_n().max(5001)), 9, 0);
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let len = host.len() as u64;
    let bounds: Vec<u64> = vec![0, 0, 10, 10, len / 2, len / 2 + 1, len * 7 / 10, len];
    let offsets = DeviceBuffer::from_slice(&bounds).unwrap();
    let count = bounds.len() - 1;
    let mut out = DeviceBuffer::from_slice(&vec![OpAcc(Moments::default()); count]).unwrap();
    let all = DeviceView::from(&offsets);
    seg.row_var_mean(
        &buf,
        Segments::offsets(all.slice(..count), all.slice(1..)),
        &mut out,
    )
    .unwrap();
    for (s, m) in download(&out).iter().enumerate() {
        let x: Vec<f64> = host[bounds[s] as usize..bounds[s + 1] as usize]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let r = reference(&x);
        assert_eq!(m.0.count(), x.len() as u64, "segment {s}");
        if !x.is_empty() {
            assert!(close(m.0.mean(), r.mean, 1e-5, 1.0), "segment {s}: mean");
            assert!(close(m.0.m2, r.m2, 1e-5, r.m2), "segment {s}: m2");
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn the_async_call_writes_the_accumulator_and_repeats_its_bits() {
    let mut reduce = common::gpu();
    let host = random_case::<f32>(3_000_017.min(max_n()), 11, 0);
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let mut out =
        DeviceBuffer::from_slice(&[OpAcc(reduce_host::stats::SummaryAcc::default())]).unwrap();
    let stream = reduce.gpu().stream().unwrap();
    let mut bits = Vec::new();
    for _ in 0..3 {
        // SAFETY: `buf` and `out` outlive the call, which is waited for below.
        unsafe {
            reduce
                .statistic_async::<reduce_host::stats::Summary<f32>>(&buf, &mut out, &stream)
                .unwrap()
        };
        stream.synchronize().unwrap();
        let acc = download(&out)[0].0;
        bits.push(format!("{acc:?}"));
        let s = Stats::from(acc);
        assert_eq!(s, reduce.stats(&buf).unwrap());
    }
    assert!(bits.windows(2).all(|w| w[0] == w[1]), "{bits:?}");
}
