//! The user-operator path on the GPU, against the same operators folded on the CPU: every offset 0–15,
//! lengths 0 … 2^21 + 15, NaN, ±∞ and ties, the three segment layouts, the async call, the combine
//! strategies, repeatable bits, and the errors. The kernels are the example's, built by `reduce-builder`
//! from `kernels/` (the test fixture of the builder). Ignored without a GPU.
use custom_op::{KERNELS, close, cpu, mean_var_close};
use custom_ops::{AbsMax, MeanVar, Moments, Outside, SumSquares, Welford};
use reduce_host::DeviceSelect;
use reduce_host::cust::memory::DeviceBuffer;
use reduce_host::cust::stream::{Stream, StreamFlags};
use reduce_host::custom::{Float, Kernels, OpAcc, Pod, ReduceOp, SelectOp};
use reduce_host::{BF16, Combine, DeviceReduce, DeviceSegmentedReduce, DeviceView, Error, F16};
use reduce_host::{Segments, StreamRef};

const GPU: &str = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine";

/// Lengths that cross every boundary of the kernels: a vector, a warp, a block's run, one block (64 KiB),
/// a resident wave, and past 2^21.
const LENGTHS: [usize; 22] = [
    0,
    1,
    2,
    3,
    4,
    5,
    15,
    16,
    17,
    31,
    32,
    33,
    255,
    1000,
    4097,
    16383,
    16385,
    65537,
    (1 << 20) + 7,
    (1 << 21) - 1,
    1 << 21,
    (1 << 21) + 15,
];

/// Values with repeats (ties) and a spread of magnitudes, deterministic.
fn values(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let h = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
            let v = (h % 2001) as f32 / 100.0 - 10.0;
            if i % 13 == 0 { v * 1000.0 } else { v }
        })
        .collect()
}

fn open() -> (DeviceReduce, Kernels) {
    let reduce = DeviceReduce::new().expect("a GPU");
    let kernels = Kernels::load(reduce.gpu(), &KERNELS).expect("the example's kernels load");
    (reduce, kernels)
}

/// Checks `O` on every offset 0–15 and every length of [`LENGTHS`] against the CPU fold, with `same` comparing
/// the finalized results.
fn sweep<O: ReduceOp<Acc: Pod>>(xs: &[O::In], same: impl Fn(&O::Out, &O::Out) -> bool)
where
    O::In: reduce_host::Element,
    O::Out: std::fmt::Debug,
{
    let (mut reduce, kernels) = open();
    let d = DeviceBuffer::from_slice(xs).unwrap();
    // The sanitizer runs cap the lengths (scripts/device-sanitize.sh): the kernels are the same.
    let max_n = std::env::var("REDUCE_TEST_MAX_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX);
    for offset in 0..16 {
        for len in LENGTHS {
            if offset + len > xs.len() || len > max_n {
                continue;
            }
            let view = DeviceView::from(&d).slice(offset..offset + len);
            let got = reduce.reduce_with::<O>(&kernels, view).unwrap();
            let want = O::finalize(cpu::<O>(&xs[offset..offset + len]));
            assert!(
                same(&got, &want),
                "{} at offset {offset}, length {len}: GPU {got:?}, CPU {want:?}",
                std::any::type_name::<O>()
            );
        }
    }
}

fn same_f32(rel: f64) -> impl Fn(&f32, &f32) -> bool {
    move |a, b| close(*a as f64, *b as f64, rel)
}

fn same_mean_var(a: &MeanVar, b: &MeanVar) -> bool {
    mean_var_close(a, b)
}

fn bf16s(xs: &[f32]) -> Vec<BF16> {
    xs.iter().map(|&x| BF16(half::bf16::from_f32(x))).collect()
}

fn f16s(xs: &[f32]) -> Vec<F16> {
    xs.iter()
        .map(|&x| F16(half::f16::from_f32(x / 8.0)))
        .collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn absmax_matches_the_cpu_at_every_offset_and_length() {
    let xs = values((1 << 21) + 31);
    sweep::<AbsMax<f32>>(&xs, same_f32(0.0));
    sweep::<AbsMax<BF16>>(&bf16s(&xs), same_f32(0.0));
    sweep::<AbsMax<F16>>(&f16s(&xs), same_f32(0.0));
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn the_l2_norm_matches_the_cpu_at_every_offset_and_length() {
    let xs = values((1 << 21) + 31);
    // f32 accumulation in a tree against the CPU's sequential f32: both within ~log2(n)·2^-24 of exact.
    sweep::<SumSquares<f32>>(&xs, same_f32(2e-5));
    sweep::<SumSquares<F16>>(&f16s(&xs), same_f32(2e-5));
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn welford_matches_the_cpu_at_every_offset_and_length() {
    // Around 1e6, where the naive Σx² − n·mean² formula loses every digit of the variance.
    let xs: Vec<f32> = values((1 << 21) + 31)
        .iter()
        .map(|v| 1e6 + v / 64.0)
        .collect();
    sweep::<Welford<f32>>(&xs, same_mean_var);
    sweep::<Welford<BF16>>(&bf16s(&values((1 << 21) + 31)), same_mean_var);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn nan_infinities_and_empty_inputs() {
    let (mut reduce, kernels) = open();
    let mut xs = values(100_000);
    xs[77_777] = f32::NAN;
    let d = DeviceBuffer::from_slice(&xs).unwrap();
    assert!(
        reduce
            .reduce_with::<AbsMax<f32>>(&kernels, &d)
            .unwrap()
            .is_nan()
    );
    assert!(
        reduce
            .reduce_with::<Welford<f32>>(&kernels, &d)
            .unwrap()
            .mean
            .is_nan()
    );
    xs[77_777] = f32::NEG_INFINITY;
    let d = DeviceBuffer::from_slice(&xs).unwrap();
    assert_eq!(
        reduce.reduce_with::<AbsMax<f32>>(&kernels, &d).unwrap(),
        f32::INFINITY
    );
    assert_eq!(
        reduce.reduce_with::<SumSquares<f32>>(&kernels, &d).unwrap(),
        f32::INFINITY
    );
    let empty = DeviceView::from(&d).slice(0..0);
    assert_eq!(
        reduce.reduce_with::<AbsMax<f32>>(&kernels, empty).unwrap(),
        0.0
    );
    let mv = reduce.reduce_with::<Welford<f32>>(&kernels, empty).unwrap();
    assert_eq!(mv.count, 0);
    assert!(mv.mean.is_nan());
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn bits_repeat_and_every_deterministic_strategy_agrees() {
    let (mut reduce, kernels) = open();
    let xs: Vec<f32> = values(3_000_001).iter().map(|v| 1e6 + v).collect();
    let d = DeviceBuffer::from_slice(&xs).unwrap();
    let first = reduce.reduce_with::<Welford<f32>>(&kernels, &d).unwrap();
    let norm = reduce.reduce_with::<SumSquares<f32>>(&kernels, &d).unwrap();
    for _ in 0..3 {
        let again = reduce.reduce_with::<Welford<f32>>(&kernels, &d).unwrap();
        assert_eq!(again.variance.to_bits(), first.variance.to_bits());
        let n = reduce.reduce_with::<SumSquares<f32>>(&kernels, &d).unwrap();
        assert_eq!(n.to_bits(), norm.to_bits());
    }
    for combine in [Combine::TwoPass, Combine::LastBlock] {
        reduce.set_combine(combine);
        // The 24-byte Welford accumulator takes two passes under LastBlock (the same bits).
        let mv = reduce.reduce_with::<Welford<f32>>(&kernels, &d).unwrap();
        assert!(same_mean_var(&mv, &first), "{combine:?}");
        let scale = reduce.reduce_with::<AbsMax<f32>>(&kernels, &d).unwrap();
        assert_eq!(
            scale,
            AbsMax::<f32>::finalize(cpu::<AbsMax<f32>>(&xs)),
            "{combine:?}"
        );
    }
    reduce.set_combine(Combine::Atomic);
    match reduce.reduce_with::<AbsMax<f32>>(&kernels, &d) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("Atomic"), "{m}"),
        other => panic!("Combine::Atomic with a user's operator: {other:?}"),
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn the_async_call_writes_the_accumulator_on_the_callers_stream() {
    let (mut reduce, kernels) = open();
    let xs = values(1 << 20);
    let d = DeviceBuffer::from_slice(&xs).unwrap();
    let stream = reduce.gpu().stream().unwrap();
    let mut out = DeviceBuffer::from_slice(&[OpAcc(Moments::default())]).unwrap();
    // SAFETY: `d` and `out` outlive the stream's work, which is waited for below.
    unsafe {
        reduce
            .reduce_with_async::<Welford<f32>>(&kernels, &d, &mut out, StreamRef::from(&stream))
            .unwrap()
    };
    stream.synchronize().unwrap();
    let got = Welford::<f32>::finalize(out.as_host_vec().unwrap()[0].0);
    assert!(same_mean_var(
        &got,
        &Welford::<f32>::finalize(cpu::<Welford<f32>>(&xs))
    ));
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn every_segment_layout_matches_the_cpu() {
    let (reduce, kernels) = open();
    let mut segmented = DeviceSegmentedReduce::with_gpu(reduce.gpu()).unwrap();
    let xs = bf16s(&values((1 << 21) + 64));
    let d = DeviceBuffer::from_slice(&xs).unwrap();
    let check = |acc: &[OpAcc<Moments>], rows: &[std::ops::Range<usize>]| {
        for (s, r) in rows.iter().enumerate() {
            let got = Welford::<BF16>::finalize(acc[s].0);
            let want = Welford::<BF16>::finalize(cpu::<Welford<BF16>>(&xs[r.clone()]));
            assert!(
                same_mean_var(&got, &want) || (got.count == 0 && want.count == 0),
                "segment {s} {r:?}: {got:?} {want:?}"
            );
        }
    };
    // Rows with a stride, from short (a thread per row) to long (blocks per row, split and combined).
    for (rows, cols, stride) in [
        (4096, 5, 7),
        (1000, 100, 100),
        (64, 4096, 4100),
        (3, 600_000, 600_001),
    ] {
        let mut out = DeviceBuffer::from_slice(&vec![OpAcc::default(); rows]).unwrap();
        segmented
            .reduce_with::<Welford<BF16>>(
                &kernels,
                &d,
                Segments::rows(rows, cols, stride),
                &mut out,
            )
            .unwrap();
        let ranges: Vec<_> = (0..rows).map(|r| r * stride..r * stride + cols).collect();
        check(&out.as_host_vec().unwrap(), &ranges);
    }
    // Ragged offsets, empty segments included.
    let mut begin = Vec::new();
    let mut end = Vec::new();
    let mut at = 0usize;
    for s in 0..2000usize {
        let len = (s * 7919) % 1500;
        begin.push(at as u64);
        end.push((at + len) as u64);
        at += len + s % 3;
    }
    let (db, de) = (
        DeviceBuffer::from_slice(&begin).unwrap(),
        DeviceBuffer::from_slice(&end).unwrap(),
    );
    let mut out = DeviceBuffer::from_slice(&vec![OpAcc::default(); begin.len()]).unwrap();
    segmented
        .reduce_with::<Welford<BF16>>(&kernels, &d, Segments::offsets(&db, &de), &mut out)
        .unwrap();
    let ranges: Vec<_> = begin
        .iter()
        .zip(&end)
        .map(|(&b, &e)| b as usize..e as usize)
        .collect();
    check(&out.as_host_vec().unwrap(), &ranges);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn an_operator_the_kernel_crate_did_not_export_is_a_missing_kernel() {
    let (mut reduce, kernels) = open();
    let d = DeviceBuffer::from_slice(&[1.0f64, -2.0]).unwrap();
    match reduce.reduce_with::<AbsMax<f64>>(&kernels, &d) {
        Err(Error::MissingKernel { kernel, .. }) => {
            assert_eq!(kernel, "reduce_partials_absmax_f64")
        }
        other => panic!("expected MissingKernel, got {other:?}"),
    }
    let _ = GPU;
}

/// An operator of the same name and element as the example's `AbsMax<f32>`, with another accumulator: as if
/// the kernel crate had been built from an older version of it.
struct StaleAbsMax;

impl ReduceOp for StaleAbsMax {
    type In = f32;
    type Acc = [u32; 2];
    type Out = u32;
    const NAME: &'static str = "absmax";
    fn identity() -> [u32; 2] {
        [0; 2]
    }
    fn lift(x: f32, _: u64) -> [u32; 2] {
        [x.to_bits() & 0x7fff_ffff, 0]
    }
    fn combine(a: [u32; 2], b: [u32; 2]) -> [u32; 2] {
        [a[0].max(b[0]), 0]
    }
    fn finalize(acc: [u32; 2]) -> u32 {
        acc[0]
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn kernels_of_another_accumulator_are_refused_before_any_launch() {
    let (mut reduce, kernels) = open();
    let d = DeviceBuffer::from_slice(&[1.0f32, -2.0]).unwrap();
    match reduce.reduce_with::<StaleAbsMax>(&kernels, &d) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("4-byte accumulator"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // The real operator still runs.
    assert_eq!(
        reduce.reduce_with::<AbsMax<f32>>(&kernels, &d).unwrap(),
        2.0
    );
}

/// Checks the user's predicate `Outside` over `T` on offsets 0–15 and every length of [`LENGTHS`]:
/// stable gives exactly the CPU's filtered sequence, unordered the same multiset, and the async calls the
/// same count on the caller's stream.
fn outside_sweep<T>(xs: &[T], threshold: T, bits: impl Fn(&T) -> u32)
where
    T: reduce_host::SelectElement + Float,
    Outside<T>: SelectOp<In = T>,
{
    let gpu = reduce_host::Gpu::new().expect("a GPU");
    let kernels = Kernels::load(&gpu, &KERNELS).unwrap();
    let mut select = DeviceSelect::with_gpu(&gpu).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    let d = DeviceBuffer::from_slice(xs).unwrap();
    let mut out = DeviceBuffer::from_slice(&vec![T::default(); xs.len()]).unwrap();
    let mut count = DeviceBuffer::from_slice(&[0u64]).unwrap();
    for offset in 0..16 {
        for &n in LENGTHS.iter().filter(|&&n| offset + n <= xs.len()) {
            let view = DeviceView::from(&d).slice(offset..offset + n);
            let want: Vec<u32> = xs[offset..offset + n]
                .iter()
                .filter(|&&x| Outside::<T>::keep(threshold, x))
                .map(&bits)
                .collect();
            let got = |out: &DeviceBuffer<T>, k: usize| -> Vec<u32> {
                out.as_host_vec().unwrap()[..k].iter().map(&bits).collect()
            };
            let k = select
                .select_if_stable_with::<Outside<T>>(&kernels, view, threshold, &mut out)
                .unwrap() as usize;
            assert_eq!(got(&out, k), want, "stable, offset {offset}, n {n}");
            let k = select
                .select_if_with::<Outside<T>>(&kernels, view, threshold, &mut out)
                .unwrap() as usize;
            let (mut a, mut b) = (got(&out, k), want.clone());
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "unordered, offset {offset}, n {n}");
            // SAFETY: every buffer outlives the synchronize below.
            unsafe {
                select
                    .select_if_stable_with_async::<Outside<T>>(
                        &kernels, view, threshold, &mut out, &mut count, &stream,
                    )
                    .unwrap()
            };
            stream.synchronize().unwrap();
            assert_eq!(count.as_host_vec().unwrap()[0] as usize, want.len());
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn a_users_predicate_selects_as_the_cpu_at_every_offset_and_length() {
    let max_n = std::env::var("REDUCE_TEST_MAX_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let n = (LENGTHS[LENGTHS.len() - 1] + 16).min(max_n);
    let mut xs = values(n);
    for (i, special) in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0]
        .iter()
        .enumerate()
    {
        if n > 40 {
            xs[7 + 9 * i] = *special;
        }
    }
    outside_sweep::<f32>(&xs, 9.5, |x| x.to_bits());
    let hs: Vec<BF16> = xs.iter().map(|&x| BF16(half::bf16::from_f32(x))).collect();
    outside_sweep::<BF16>(&hs, BF16(half::bf16::from_f32(9.5)), |x| {
        x.0.to_bits() as u32
    });
}
