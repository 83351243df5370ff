//! GPU tests of `DeviceHistogram` against the CPU reference (`cpu::histogram_even`, `cpu::histogram_bytes`):
//! counts must be exactly equal. Ignored without a GPU.
mod common;

use common::{max_n, rng};
use cust::memory::{CopyDestination, DeviceBuffer, DeviceCopy};
use cust::stream::{Stream, StreamFlags};
use rand::Rng;
use reduce_host::{BF16, Counter, DeviceHistogram, DeviceView, Error, F16, HistogramSample, cpu};

const SIZES: [usize; 5] = [0, 1, 33, 1025, (1 << 20) + 3];
// Bin counts that take 32, 8, 2 and 1 private copies per block (12288 is the most in shared memory), and
// the global-memory fallback.
const BINS: [usize; 8] = [1, 7, 256, 1000, 6000, 12288, 20000, 100000];

/// A handle on device 0; a GPU test without one is a failure, not a pass.
fn gpu() -> DeviceHistogram {
    DeviceHistogram::new()
        .expect("GPU tests need a CUDA device (run them with --include-ignored only on a GPU)")
}

/// Uploads `data` after `offset` copies of `pad` and followed by a few more, so
/// `DeviceView::from(&buf).slice(offset..)` starts at every misalignment; the pads fall in a counted bin, so
/// reading one would change the counts.
fn upload_at<T: DeviceCopy>(data: &[T], offset: usize, pad: T) -> DeviceBuffer<T> {
    let mut padded = vec![pad; offset];
    padded.extend_from_slice(data);
    padded.extend(std::iter::repeat_n(pad, 17));
    DeviceBuffer::from_slice(&padded).expect("upload")
}

/// Samples over `[lower, upper)` widened by 10% each side (so some fall outside), with about 1% NaN and ±∞
/// and a few exact `lower`/`upper` values.
fn samples(n: usize, seed: u64, lower: f32, upper: f32) -> Vec<f32> {
    let mut r = rng(seed);
    let margin = (upper - lower) * 0.1;
    (0..n)
        .map(|_| match r.random_range(0..400) {
            0 => f32::NAN,
            1 => f32::INFINITY,
            2 => f32::NEG_INFINITY,
            3 => lower,
            4 => upper,
            _ => r.random_range(lower - margin..upper + margin),
        })
        .collect()
}

/// Exact comparison; on a mismatch names the first differing bin instead of printing every count.
fn check_counts<C: Counter>(got: &[C], want: &[u64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of bins");
    if let Some(b) = (0..want.len()).find(|&b| got[b].into() != want[b]) {
        panic!("{what}: bin {b} counts {:?}, the CPU {}", got[b], want[b]);
    }
}

/// Histograms `host` (as `T`) at sub-slice offsets 0..8 with `C` counters and compares with the CPU.
fn check_even<T: HistogramSample, C: Counter>(
    hist: &mut DeviceHistogram,
    host: &[T],
    bins: usize,
    (lower, upper): (f32, f32),
    pad: T,
    what: &str,
) {
    let want = cpu::histogram_even(host, bins, lower, upper).expect("valid range");
    for offset in 0..8 {
        let buf = upload_at(host, offset, pad);
        let slice = DeviceView::from(&buf).slice(offset..offset + host.len());
        let got: Vec<C> = hist.even(slice, bins, lower, upper).expect("histogram");
        check_counts(&got, &want, &format!("{what}, offset {offset}"));
    }
}

fn to_f16(xs: &[f32]) -> Vec<F16> {
    xs.iter().map(|&x| F16(half::f16::from_f32(x))).collect()
}

fn to_bf16(xs: &[f32]) -> Vec<BF16> {
    xs.iter().map(|&x| BF16(half::bf16::from_f32(x))).collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn f32_uniform_every_bin_count_size_and_offset() {
    let mut hist = gpu();
    let range = (-2.0f32, 3.0f32);
    for (k, &n) in SIZES.iter().enumerate().filter(|(_, n)| **n <= max_n()) {
        let host = samples(n, k as u64, range.0, range.1);
        for &bins in &BINS {
            let what = format!("f32 n={n} bins={bins}");
            check_even::<f32, u32>(&mut hist, &host, bins, range, 0.0, &what);
        }
        check_even::<f32, u64>(&mut hist, &host, 256, range, 0.0, &format!("f32 u64 n={n}"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn f16_and_bf16_uniform_every_size_and_offset() {
    let mut hist = gpu();
    let range = (-1.0f32, 1.0f32);
    for (k, &n) in SIZES.iter().enumerate().filter(|(_, n)| **n <= max_n()) {
        let host = samples(n, 100 + k as u64, range.0, range.1);
        for &bins in &BINS {
            let (h, b) = (to_f16(&host), to_bf16(&host));
            let zero = (F16::default(), BF16::default());
            check_even::<F16, u32>(
                &mut hist,
                &h,
                bins,
                range,
                zero.0,
                &format!("f16 n={n} bins={bins}"),
            );
            check_even::<BF16, u64>(
                &mut hist,
                &b,
                bins,
                range,
                zero.1,
                &format!("bf16 n={n} bins={bins}"),
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn skewed_data_ninety_percent_in_one_bin() {
    let mut hist = gpu();
    let n = ((1 << 20) + 3).min(max_n());
    let mut r = rng(7);
    let host: Vec<f32> = (0..n)
        .map(|_| {
            if r.random_range(0..10) < 9 {
                0.4321
            } else {
                r.random_range(0.0..1.0)
            }
        })
        .collect();
    for bins in [7, 256, 1000, 12288, 20000] {
        check_even::<f32, u32>(
            &mut hist,
            &host,
            bins,
            (0.0, 1.0),
            0.0,
            &format!("skewed bins={bins}"),
        );
    }
    check_even::<F16, u32>(
        &mut hist,
        &to_f16(&host),
        256,
        (0.0, 1.0),
        F16::default(),
        "skewed f16",
    );
    // Every sample in one bin: the worst case for the atomics.
    let same = vec![0.5f32; n];
    for bins in [1, 256, 20000] {
        check_even::<f32, u64>(
            &mut hist,
            &same,
            bins,
            (0.0, 1.0),
            0.0,
            &format!("all equal bins={bins}"),
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn edge_and_special_values_at_every_position() {
    let mut hist = gpu();
    let (lower, upper) = (-0.7f32, 0.2f32);
    let below_upper = f32::from_bits(upper.to_bits() - 1); // rounds to bin 10 of 10: must be clamped to 9
    let specials = [
        lower,
        upper,
        below_upper,
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        -1.0e30,
        1.0e30,
        f32::from_bits(lower.to_bits() + 1),
        f32::from_bits(lower.to_bits() - 1),
        0.0,
        -0.0,
    ];
    for n in [1usize, 2, 33, 1025, 4099] {
        let mut r = rng(n as u64);
        let host: Vec<f32> = (0..n)
            .map(|_| specials[r.random_range(0..specials.len())])
            .collect();
        for bins in [1, 7, 10, 256, 20000] {
            check_even::<f32, u32>(
                &mut hist,
                &host,
                bins,
                (lower, upper),
                0.0,
                &format!("specials n={n} bins={bins}"),
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn large_inputs() {
    let mut hist = gpu();
    let n = ((1 << 24) + 1).min(max_n());
    let host = samples(n, 5, 0.0, 1.0);
    for bins in [256, 1000, 100000] {
        let want = cpu::histogram_even(&host, bins, 0.0, 1.0).unwrap();
        let buf = upload_at(&host, 3, 0.5);
        let slice = DeviceView::from(&buf).slice(3..3 + n);
        let got: Vec<u32> = hist.even(slice, bins, 0.0, 1.0).unwrap();
        check_counts(&got, &want, &format!("large f32 bins={bins}"));
        let got: Vec<u64> = hist.even(slice, bins, 0.0, 1.0).unwrap();
        check_counts(&got, &want, &format!("large f32 u64 bins={bins}"));
    }
    let h = to_bf16(&host);
    let want = cpu::histogram_even(&h, 1000, 0.0, 1.0).unwrap();
    let got: Vec<u32> = hist
        .even(&DeviceBuffer::from_slice(&h).unwrap(), 1000, 0.0, 1.0)
        .unwrap();
    check_counts(&got, &want, "large bf16");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn bytes_fast_path_every_size_and_offset() {
    let mut hist = gpu();
    let sizes = [
        0usize,
        1,
        15,
        16,
        17,
        33,
        1025,
        (1 << 20) + 3,
        (1 << 24) + 1,
    ];
    for (k, &n) in sizes.iter().enumerate().filter(|(_, n)| **n <= max_n()) {
        let mut r = rng(200 + k as u64);
        let uniform: Vec<u8> = (0..n).map(|_| r.random()).collect();
        let skewed: Vec<u8> = (0..n)
            .map(|_| {
                if r.random_range(0..10) < 9 {
                    42
                } else {
                    r.random()
                }
            })
            .collect();
        let same = vec![255u8; n];
        for (name, host) in [
            ("uniform", &uniform),
            ("skewed", &skewed),
            ("all 255", &same),
        ] {
            let want = cpu::histogram_bytes(host);
            // 16 offsets: every misalignment of a 16-byte vector.
            for offset in 0..16 {
                let buf = upload_at(host, offset, 0u8);
                let slice = DeviceView::from(&buf).slice(offset..offset + n);
                let what = format!("bytes {name} n={n} offset {offset}");
                let got: Vec<u32> = hist.even_u8(slice).expect("byte histogram");
                check_counts(&got, &want, &what);
                if offset % 5 == 0 {
                    let got: Vec<u64> = hist.even_u8(slice).expect("byte histogram");
                    check_counts(&got, &want, &format!("{what}, u64"));
                }
            }
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn async_variants_write_the_bins_and_nothing_else() {
    let mut hist = gpu();
    let host = samples(100_003.min(max_n()), 11, 0.0, 10.0);
    let data = DeviceBuffer::from_slice(&host).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    for bins in [10usize, 20000] {
        let mut out = DeviceBuffer::from_slice(&vec![u64::MAX; bins + 5]).unwrap();
        // SAFETY: `data` and `out` outlive the stream's work (synchronised below).
        unsafe { hist.even_async(&data, bins, 0.0, 10.0, &mut out, &stream) }.unwrap();
        stream.synchronize().unwrap();
        let mut got = vec![0u64; bins + 5];
        out.copy_to(&mut got[..]).unwrap();
        check_counts(
            &got[..bins],
            &cpu::histogram_even(&host, bins, 0.0, 10.0).unwrap(),
            "async",
        );
        assert!(
            got[bins..].iter().all(|&c| c == u64::MAX),
            "async wrote past the bins"
        );
    }
    let bytes: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 256) as u8).collect();
    let data = DeviceBuffer::from_slice(&bytes).unwrap();
    let mut out = DeviceBuffer::from_slice(&[7u32; 256]).unwrap();
    // SAFETY: as above.
    unsafe { hist.even_u8_async(&data, &mut out, &stream) }.unwrap();
    stream.synchronize().unwrap();
    let mut got = vec![0u32; 256];
    out.copy_to(&mut got[..]).unwrap();
    check_counts(&got, &cpu::histogram_bytes(&bytes), "async bytes");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn bad_arguments_are_errors() {
    let mut hist = gpu();
    let data = DeviceBuffer::from_slice(&[0.5f32; 10]).unwrap();
    let invalid = |r: Result<Vec<u32>, Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(hist.even(&data, 0, 0.0, 1.0)));
    assert!(invalid(hist.even(&data, 4, 1.0, 0.0)));
    assert!(invalid(hist.even(&data, 4, 0.0, 0.0)));
    assert!(invalid(hist.even(&data, 4, f32::NAN, 1.0)));
    assert!(invalid(hist.even(&data, 4, 0.0, f32::INFINITY)));
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    let mut short = DeviceBuffer::from_slice(&[0u32; 3]).unwrap();
    // SAFETY: the call is refused before anything is enqueued.
    let r = unsafe { hist.even_async(&data, 4, 0.0, 1.0, &mut short, &stream) };
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let bytes = DeviceBuffer::from_slice(&[1u8; 10]).unwrap();
    // SAFETY: as above.
    let r = unsafe { hist.even_u8_async(&bytes, &mut short, &stream) };
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    // The handle still works after refusals.
    let ok: Vec<u32> = hist.even(&data, 4, 0.0, 1.0).unwrap();
    assert_eq!(ok, [0, 0, 10, 0]);
}
