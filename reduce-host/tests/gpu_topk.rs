//! GPU tests of `DeviceTopK` against a CPU reference that sorts the indices by value (NaN beyond every
//! number, −0.0 equal to +0.0, the smaller index first among equals): the indices must be exactly the
//! reference's first k, and each value the input's element at its index. Ignored without a GPU.
//!
//! The select samples inputs of `topk::SAMPLE_FROM` (2^24) elements or more by default. Most inputs here
//! are shorter, so run this binary twice on a GPU: as it is, and with `REDUCE_HOST_TOPK_SAMPLE=1`, which
//! samples from `topk::SAMPLE_MIN` (2^20) on, so that the sampled path meets every key width and layout.
mod common;

use common::topk::{by_value, tied_input};
use common::{NEEDS_GPU, TestElement, download, max_n, rng, upload_at};
use cust::memory::DeviceBuffer;
use cust::stream::{Stream, StreamFlags};
use rand::Rng;
use reduce_host::{BF16, DeviceTopK, DeviceView, Error, TopKElement};

fn handle() -> DeviceTopK {
    DeviceTopK::new()
        .expect("GPU tests need a CUDA device (run them with --include-ignored only on a GPU)")
}

/// Every index of `host`, best first (ties by index).
fn reference<T: TestElement>(host: &[T], largest: bool) -> Vec<u64> {
    let mut order: Vec<u64> = (0..host.len() as u64).collect();
    order.sort_by(|&i, &j| by_value(host[i as usize], host[j as usize], largest).then(i.cmp(&j)));
    order
}

/// Runs `max_k`/`min_k` for each k on `host` placed at `offset`, checking indices and values.
fn check<T: TestElement + TopKElement>(
    topk: &mut DeviceTopK,
    host: &[T],
    offset: usize,
    ks: &[u64],
    what: &str,
) {
    let buf = upload_at(host, offset);
    let input = DeviceView::from(&buf).slice(offset..offset + host.len());
    let n = host.len() as u64;
    for largest in [true, false] {
        let want = reference(host, largest);
        for &k in ks.iter().filter(|&&k| k <= n) {
            let mut values = DeviceBuffer::from_slice(&vec![T::default(); k as usize + 1]).unwrap();
            let mut indices =
                DeviceBuffer::from_slice(&vec![u64::MAX - 1; k as usize + 1]).unwrap();
            if largest {
                topk.max_k(input, k, &mut values, &mut indices).unwrap();
            } else {
                topk.min_k(input, k, &mut values, &mut indices).unwrap();
            }
            let (got, vals) = (download(&indices), download(&values));
            let ctx = format!("{what}: n {n}, offset {offset}, k {k}, largest {largest}");
            assert_eq!(&got[..k as usize], &want[..k as usize], "{ctx}");
            assert_eq!(got[k as usize], u64::MAX - 1, "{ctx}: wrote past k");
            for (j, &i) in got[..k as usize].iter().enumerate() {
                assert!(
                    common::same_value(vals[j], host[i as usize]),
                    "{ctx}: value {j}"
                );
            }
        }
    }
}

fn every_size<T: TestElement + TopKElement>(what: &str) {
    let mut topk = handle();
    let sizes = [
        1usize,
        2,
        3,
        31,
        33,
        257,
        1000,
        2049,
        4097,
        65_537,
        (1 << 20) + 3,
    ];
    for (s, &n) in sizes.iter().enumerate().filter(|(_, n)| **n <= max_n()) {
        let host = tied_input::<T>(n, 7 + s as u64);
        let n64 = n as u64;
        let ks = [1, 2, 7, 64, 1024, 2048, 2049, 5000, n64 / 2, n64 - 1, n64];
        for offset in [0, 1, 3] {
            check(&mut topk, &host, offset, &ks, what);
        }
    }
}

/// A test per element type that runs `$check::<T>`: thousands of calls each, so that the sanitizer's
/// shards share them out.
macro_rules! per_type {
    ($check:ident: $($name:ident: $t:ty),*) => {$(
        #[test]
        #[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
        fn $name() {
            $check::<$t>(stringify!($t));
        }
    )*};
}

per_type!(
    every_size:
    every_size_f32: f32, every_size_f64: f64, every_size_f16: reduce_host::F16,
    every_size_bf16: reduce_host::BF16, every_size_i32: i32, every_size_u32: u32,
    every_size_i64: i64, every_size_u64: u64, every_size_u8: u8
);

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn ties_nan_and_zeros_follow_the_rule() {
    let _ = NEEDS_GPU;
    let mut topk = handle();
    // All equal: the first k indices, in order.
    let same = vec![1.5f32; 10_000];
    check(&mut topk, &same, 0, &[1, 100, 9_999, 10_000], "all equal");
    // NaN above +∞ for max_k and below −∞ for min_k; −0.0 and +0.0 tie.
    let x = [
        0.0f32,
        f32::INFINITY,
        -0.0,
        f32::NAN,
        f32::NEG_INFINITY,
        -f32::NAN,
        0.0,
    ];
    let buf = DeviceBuffer::from_slice(&x).unwrap();
    let mut idx = DeviceBuffer::from_slice(&[0u64; 7]).unwrap();
    topk.max_k_indices(&buf, 7, &mut idx).unwrap();
    assert_eq!(download(&idx), [3, 5, 1, 0, 2, 6, 4]);
    topk.min_k_indices(&buf, 7, &mut idx).unwrap();
    assert_eq!(download(&idx), [3, 5, 4, 0, 2, 6, 1]);
    // The values are the input's bits: −0.0 stays −0.0, the NaN's payload stays.
    let mut vals = DeviceBuffer::from_slice(&[0f32; 7]).unwrap();
    topk.min_k(&buf, 7, &mut vals, &mut idx).unwrap();
    let got: Vec<u32> = download(&vals).iter().map(|v| v.to_bits()).collect();
    let want: Vec<u32> = [3usize, 5, 4, 0, 2, 6, 1]
        .iter()
        .map(|&i| x[i].to_bits())
        .collect();
    assert_eq!(got, want);
    // 16 distinct values in 1M: ties at the boundary go through the index bytes.
    let mut r = rng(99);
    let few: Vec<f32> = (0..(1 << 20))
        .map(|_| r.random_range(0..16) as f32)
        .collect();
    check(
        &mut topk,
        &few,
        0,
        &[1, 65_536, 65_537, 100_000, 600_000],
        "16 values",
    );
    // Sorted both ways.
    let up: Vec<i32> = (0..300_000).collect();
    let down: Vec<i32> = (0..300_000).rev().collect();
    check(&mut topk, &up, 0, &[1, 3000, 300_000], "ascending");
    check(&mut topk, &down, 0, &[1, 3000, 300_000], "descending");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn bad_arguments_write_nothing() {
    let mut topk = handle();
    let x = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0]).unwrap();
    let mut vals = DeviceBuffer::from_slice(&[9.0f32; 4]).unwrap();
    let mut idx = DeviceBuffer::from_slice(&[9u64; 4]).unwrap();
    let err = topk.max_k(&x, 4, &mut vals, &mut idx).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let short = DeviceView::from(&idx).len();
    assert_eq!(short, 4);
    let mut two = DeviceBuffer::from_slice(&[9u64; 2]).unwrap();
    let err = topk.max_k(&x, 3, &mut vals, &mut two).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    topk.max_k(&x, 0, &mut vals, &mut idx).unwrap();
    assert_eq!(download(&idx), [9; 4]);
    assert_eq!(download(&vals), [9.0; 4]);
    assert_eq!(download(&two), [9; 2]);
    let empty = DeviceBuffer::from_slice(&[0f32; 0]).unwrap();
    topk.min_k(&empty, 0, &mut vals, &mut idx).unwrap();
}

/// Every sub-slice offset of a 16-byte vector (0–15 elements) and lengths around the vector and block
/// edges up to 2^21 + 15, k at the edges (1, n − 1, n): the passes' unaligned heads and ragged tails.
fn offsets_and_edges<T: TestElement + TopKElement>(what: &str) {
    let mut topk = handle();
    let lengths = [1usize, 2, 15, 16, 17, 255, 4111, (1 << 21) + 15];
    for (s, &n) in lengths.iter().enumerate().filter(|(_, n)| **n <= max_n()) {
        let host = tied_input::<T>(n, 100 + s as u64);
        let n64 = n as u64;
        // The longest input at three offsets only: its CPU reference sorts dominate the test's time.
        let offsets: Vec<usize> = if n > 1 << 16 {
            vec![0, 7, 15]
        } else {
            (0..16).collect()
        };
        for offset in offsets {
            check(&mut topk, &host, offset, &[1, n64 - 1, n64], what);
        }
    }
}

per_type!(
    offsets_and_edges:
    every_offset_and_edge_f32: f32, every_offset_and_edge_bf16: reduce_host::BF16,
    every_offset_and_edge_u8: u8, every_offset_and_edge_f64: f64
);

/// The benchmark's distributions (and two that force the select back onto the input), as f32: each
/// takes a different path through the passes (a narrow first bucket, a bucket of one value, every key
/// equal, a chosen bucket too large for the candidate buffer).
fn distribution(name: &str, n: usize, r: &mut rand::rngs::SmallRng) -> Vec<f32> {
    let uniform = |r: &mut rand::rngs::SmallRng| r.random_range(0.0f32..1.0);
    (0..n)
        .map(|i| match name {
            "uniform" => uniform(r),
            // Irwin–Hall: near enough N(0, 1) for a key distribution.
            "normal" => (0..12).map(|_| uniform(r)).sum::<f32>() - 6.0,
            "bits" => f32::from_bits(r.random()),
            "equal" => 0.75,
            "sixteen" => (r.random_range(0..16) as f32) * 0.37 - 2.0,
            "ascending" => i as f32 / n as f32,
            "descending" => (n - i) as f32 / n as f32,
            "nan" if r.random_range(0..100) == 0 => f32::NAN,
            "nan" => uniform(r),
            // Half of it one value, the rest beside it in the same first-digit bucket: the chosen bucket
            // is too large to buffer and holds two values.
            "crowded" if i % 2 == 0 => 1.0,
            "crowded" => 1.0 + f32::EPSILON * r.random_range(1..4) as f32,
            _ => unreachable!("{name}"),
        })
        .collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn every_distribution_takes_its_path() {
    let mut topk = handle();
    let n = ((1usize << 20) + 5).min(max_n());
    let mut r = rng(11);
    for name in [
        "uniform",
        "normal",
        "bits",
        "equal",
        "sixteen",
        "ascending",
        "descending",
        "nan",
        "crowded",
    ] {
        let host = distribution(name, n, &mut r);
        let n64 = n as u64;
        check(
            &mut topk,
            &host,
            1,
            &[1, 2, 64, 1024, 65_536, n64 - 1],
            name,
        );
    }
}

/// Inputs on which the sample misjudges the rest (the sampled positions are the contract's, so the data
/// can be built around them): the sieve buffers too few elements, or more than its buffer holds, and the
/// select must step aside to the histogram and still give the reference's answer.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn a_misjudging_sample_steps_aside() {
    use reduce_contract::topk::{SAMPLE_FROM, SAMPLE_MIN};
    let mut topk = handle();
    // Long enough to be sampled by default (with `REDUCE_HOST_TOPK_SAMPLE=0`, the histogram path's answer
    // on the same data), and the shortest that can be sampled, with `REDUCE_HOST_TOPK_SAMPLE=1`, which
    // the sanitizer's capped inputs reach.
    for n in [SAMPLE_MIN as usize + 7, SAMPLE_FROM as usize + 7] {
        if n <= max_n() {
            misjudged(&mut topk, n);
        }
    }
}

/// `a_misjudging_sample_steps_aside` at `n`.
fn misjudged(topk: &mut DeviceTopK, n: usize) {
    use reduce_contract::topk::{SAMPLE, sample_position, samples};
    let sampled: Vec<usize> = (0..SAMPLE)
        .map(|s| sample_position(s, n as u64) as usize)
        .collect();
    // Too few: only the sampled elements are large, so the sample's bound has about 32 elements above it
    // where k = 1024 asks for more.
    let mut few = vec![0.5f32; n];
    for (s, &i) in sampled.iter().enumerate() {
        few[i] = 1.0 + s as f32 / SAMPLE as f32;
    }
    // Too many: every element but the sampled ones is above the sample's key.
    let mut many = vec![2.0f32; n];
    for (s, &i) in sampled.iter().enumerate() {
        many[i] = s as f32 / SAMPLE as f32;
    }
    // k = 2, the select's least k: k = 1 runs as argmax.
    assert!(samples(n as u64, 2) && samples(n as u64, 1024));
    check(topk, &few, 0, &[2, 64, 1024], "few above the sample's key");
    check(
        topk,
        &many,
        0,
        &[2, 64, 1024],
        "many above the sample's key",
    );
}

/// Many keys far above the sample's key, which it did not see (NaN, ±∞ among them, as where 1% NaN are
/// undersampled): the sieve counts their first digits outside its shared counters, a warp's equal digits
/// with one atomic, and the select must still count every one of them. The sampled elements lie in
/// [0.5, 0.75); one element in 16 of the rest cycles through NaN, +∞, 1e30, f32::MAX and 4.0 (the last
/// beside the sample's key), the others are 0.25.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn keys_far_above_the_sample_are_counted() {
    use reduce_contract::topk::{SAMPLE, SAMPLE_FROM, SAMPLE_MIN, sample_position, samples};
    let mut topk = handle();
    let far = [f32::NAN, f32::INFINITY, 1e30, f32::MAX, 4.0];
    for n in [SAMPLE_MIN as usize + 7, SAMPLE_FROM as usize + 7] {
        if n > max_n() {
            continue;
        }
        let mut host: Vec<f32> = (0..n)
            .map(|i| {
                if i % 16 == 3 {
                    far[i / 16 % far.len()]
                } else {
                    0.25
                }
            })
            .collect();
        for s in 0..SAMPLE {
            host[sample_position(s, n as u64) as usize] = 0.5 + 0.25 * s as f32 / SAMPLE as f32;
        }
        // k = 2, the select's least k: k = 1 runs as argmax.
        let ks = [2, 1024, 20_000];
        assert!(ks.iter().all(|&k| samples(n as u64, k)));
        check(&mut topk, &host, 0, &ks, "far above the sample's key");
    }
}

/// Inputs long enough to be sampled (with `REDUCE_HOST_TOPK_SAMPLE=1`), for each key width (1, 2, 4 and
/// 8 bytes): distinct values (the sample's key), 16 values repeated (its bound among ties; 8-byte keys
/// step aside to the histogram) and one value everywhere.
fn sampled_inputs<T: TestElement + TopKElement>(what: &str) {
    let mut topk = handle();
    let n = (1usize << 20) + 9;
    if n > max_n() {
        return;
    }
    let mut r = rng(29);
    let pool: Vec<T> = (0..16).map(|_| T::random(&mut r)).collect();
    let inputs = [
        (
            "distinct",
            (0..n).map(|_| T::random(&mut r)).collect::<Vec<T>>(),
        ),
        (
            "16 values",
            (0..n).map(|_| pool[r.random_range(0..16)]).collect(),
        ),
        ("one value", vec![T::some_value(); n]),
    ];
    for (name, host) in &inputs {
        check(
            &mut topk,
            host,
            2,
            &[1, 2, 64, 1024, 5000],
            &format!("{what}, {name}"),
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn sampled_inputs_of_every_key_width() {
    sampled_inputs::<u8>("u8");
    sampled_inputs::<reduce_host::F16>("f16");
    sampled_inputs::<reduce_host::BF16>("bf16");
    sampled_inputs::<i32>("i32");
    sampled_inputs::<f64>("f64");
    sampled_inputs::<i64>("i64");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn large_k_merges_and_async_calls_agree() {
    let mut topk = handle();
    let n = (1usize << 21) + 15;
    if n > max_n() {
        return;
    }
    let host = tied_input::<f32>(n, 5);
    check(
        &mut topk,
        &host,
        0,
        &[(1 << 18) + 1, 1 << 20, n as u64],
        "large k",
    );
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let k = 100_000u64;
    let mut a = DeviceBuffer::from_slice(&vec![0u64; k as usize]).unwrap();
    let mut b = DeviceBuffer::from_slice(&vec![0u64; k as usize]).unwrap();
    let mut v = DeviceBuffer::from_slice(&vec![0f32; k as usize]).unwrap();
    topk.max_k(&buf, k, &mut v, &mut a).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    // SAFETY: the buffers outlive the synchronize below and nothing else touches them.
    unsafe { topk.max_k_indices_async(&buf, k, &mut b, &stream).unwrap() };
    stream.synchronize().unwrap();
    assert_eq!(download(&a), download(&b));
}

/// k = 1 runs argmax (argmin), not the select: the same rules, the input's own bits, and async calls on
/// another stream that agree.
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn k_one_keeps_the_rules() {
    let mut topk = handle();
    let mut top_one = |x: &[f32], largest: bool| -> (u64, u32) {
        let buf = DeviceBuffer::from_slice(x).unwrap();
        let mut v = DeviceBuffer::from_slice(&[7f32; 2]).unwrap();
        let mut i = DeviceBuffer::from_slice(&[7u64; 2]).unwrap();
        if largest {
            topk.max_k(&buf, 1, &mut v, &mut i).unwrap();
        } else {
            topk.min_k(&buf, 1, &mut v, &mut i).unwrap();
        }
        let (v, i) = (download(&v), download(&i));
        assert_eq!((v[1], i[1]), (7.0, 7), "wrote past k = 1");
        (i[0], v[0].to_bits())
    };
    // The first NaN wins both ways, with its payload.
    let payload = f32::from_bits(0x7fc0_1234);
    let x = [1.0f32, -f32::NAN, f32::INFINITY, payload, f32::NEG_INFINITY];
    for largest in [true, false] {
        assert_eq!(top_one(&x, largest), (1, (-f32::NAN).to_bits()));
        assert_eq!(top_one(&x[2..], largest), (1, payload.to_bits()));
    }
    // −0.0 and +0.0 tie: the smaller index, with its sign.
    assert_eq!(top_one(&[-1.0, -0.0, 0.0], true), (1, (-0.0f32).to_bits()));
    assert_eq!(top_one(&[1.0, 0.0, -0.0], false), (1, 0));
    // bf16, whose argmax finds the value first and its index after: the NaN's own bits.
    let h = [0x3f80u16, 0x4040, 0x7fa1, 0x4040].map(|b| BF16(half::bf16::from_bits(b)));
    let buf = DeviceBuffer::from_slice(&h).unwrap();
    let mut v = DeviceBuffer::from_slice(&[BF16::default()]).unwrap();
    let mut i = DeviceBuffer::from_slice(&[0u64]).unwrap();
    for largest in [true, false] {
        if largest {
            topk.max_k(&buf, 1, &mut v, &mut i).unwrap();
        } else {
            topk.min_k(&buf, 1, &mut v, &mut i).unwrap();
        }
        assert_eq!(download(&i), [2]);
        assert_eq!(download(&v)[0].0.to_bits(), 0x7fa1);
    }
    // Async on another stream, values and indices-only, against blocking calls, on a long input.
    let n = (1usize << 22) + 3;
    if n > max_n() {
        return;
    }
    let host = tied_input::<f32>(n, 31);
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    for largest in [true, false] {
        let want = reference(&host, largest)[0];
        let mut v = DeviceBuffer::from_slice(&[0f32]).unwrap();
        let mut i = DeviceBuffer::from_slice(&[0u64]).unwrap();
        let mut j = DeviceBuffer::from_slice(&[0u64]).unwrap();
        // SAFETY: the buffers outlive the synchronize below and nothing else touches them.
        unsafe {
            if largest {
                topk.max_k_async(&buf, 1, &mut v, &mut i, &stream).unwrap();
                topk.max_k_indices_async(&buf, 1, &mut j, &stream).unwrap();
            } else {
                topk.min_k_async(&buf, 1, &mut v, &mut i, &stream).unwrap();
                topk.min_k_indices_async(&buf, 1, &mut j, &stream).unwrap();
            }
        }
        stream.synchronize().unwrap();
        assert_eq!((download(&i), download(&j)), (vec![want], vec![want]));
        assert_eq!(download(&v)[0].to_bits(), host[want as usize].to_bits());
    }
}
