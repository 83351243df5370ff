//! GPU tests of `DeviceSelect` against a CPU filter: the stable variants must give exactly the filtered
//! sequence, the unordered one the same multiset (compared sorted). Every run also checks that nothing past
//! the count was written. Ignored without a GPU.
mod common;

use common::{max_n, random, rng, upload_at};
use cust::memory::{CopyDestination, DeviceBuffer, DeviceSlice};
use cust::stream::{Stream, StreamFlags};
use rand::Rng;
use reduce_host::Policy;
use reduce_host::{
    DeviceSelect, DeviceView, DeviceViewMut, Error, GreaterThan, IsFinite, LessThan, NonZero,
    Predicate, SelectElement,
};

const SIZES: [usize; 12] = [
    1,
    2,
    31,
    32,
    33,
    1023,
    1025,
    4097,
    65_537,
    (1 << 20) + 3,
    (1 << 22) + 7,
    (1 << 24) + 1,
];

/// Written to the output before each run: a value no test input holds.
const UNTOUCHED: f32 = 12345.0;

fn handle() -> DeviceSelect {
    DeviceSelect::new()
        .expect("GPU tests need a CUDA device (run them with --include-ignored only on a GPU)")
}

fn download<T: cust::memory::DeviceCopy + Default + Clone>(s: &DeviceSlice<T>) -> Vec<T> {
    let mut v = vec![T::default(); s.len()];
    s.copy_to(&mut v[..]).expect("download");
    v
}

/// Bits of floats in ascending order: an exact multiset key (NaN payloads and -0.0 included).
fn sorted_bits(v: &[f32]) -> Vec<u32> {
    let mut b: Vec<u32> = v.iter().map(|x| x.to_bits()).collect();
    b.sort_unstable();
    b
}

fn same_bits(got: &[f32], want: &[f32]) -> bool {
    got.len() == want.len()
        && got
            .iter()
            .zip(want)
            .all(|(a, b)| a.to_bits() == b.to_bits())
}

/// Which entry point a check runs, with its selection.
#[derive(Clone, Copy)]
enum Run<'a, P> {
    Unordered(P),
    Stable(P),
    Flagged(DeviceView<'a, u8>),
}

/// What a run must produce: the CPU filter's sequence, and its sorted bits for the unordered variant.
struct Expected {
    seq: Vec<f32>,
    sorted: Vec<u32>,
}

impl Expected {
    fn new(seq: Vec<f32>) -> Self {
        let sorted = sorted_bits(&seq);
        Expected { seq, sorted }
    }
}

/// Runs `run` on `input` (a device sub-slice), and checks the count, the output against `want` and that
/// `out[count..]` was not written.
fn check<P: Predicate<f32>>(
    select: &mut DeviceSelect,
    run: Run<'_, P>,
    input: DeviceView<'_, f32>,
    want: &Expected,
    what: &str,
) {
    let n = input.len();
    let mut out = DeviceBuffer::from_slice(&vec![UNTOUCHED; n + 1]).expect("output");
    let mut out_view = DeviceViewMut::from(&mut out);
    let out_n = out_view.slice_mut(..n);
    let (count, variant) = match run {
        Run::Unordered(p) => (select.select_if(input, p, out_n), "unordered"),
        Run::Stable(p) => (select.select_if_stable(input, p, out_n), "stable"),
        Run::Flagged(f) => (select.select_flagged(input, f, out_n), "flagged"),
    };
    let count = count.unwrap_or_else(|e| panic!("{what} {variant}: {e}"));
    assert_eq!(count, want.seq.len() as u64, "{what} {variant}: count");
    let got = download(&out);
    let (kept, rest) = got.split_at(count as usize);
    assert!(
        rest.iter().all(|x| x.to_bits() == UNTOUCHED.to_bits()),
        "{what} {variant}: wrote past the count"
    );
    if matches!(run, Run::Unordered(_)) {
        assert!(
            sorted_bits(kept) == want.sorted,
            "{what} {variant}: not the same multiset"
        );
    } else if !same_bits(kept, &want.seq) {
        let first = kept
            .iter()
            .zip(&want.seq)
            .position(|(a, b)| a.to_bits() != b.to_bits());
        panic!("{what} {variant}: sequences differ first at {first:?}");
    }
}

/// Random flags, about 30% nonzero, the nonzero ones of any value 1..=255.
fn random_flags(n: usize, seed: u64) -> Vec<u8> {
    let mut r = rng(seed);
    (0..n)
        .map(|_| {
            if r.random_bool(0.3) {
                r.random_range(1..=255)
            } else {
                0
            }
        })
        .collect()
}

/// Checks every variant at every sub-slice offset 0..8 on `host` with `pred` and random flags.
fn check_offsets<P: Predicate<f32>>(
    select: &mut DeviceSelect,
    host: &[f32],
    pred: P,
    keep: impl Fn(f32) -> bool,
    what: &str,
) {
    let want = Expected::new(host.iter().copied().filter(|&x| keep(x)).collect());
    let flags_host = random_flags(host.len(), host.len() as u64);
    let flagged_want = Expected::new(
        host.iter()
            .zip(&flags_host)
            .filter(|(_, f)| **f != 0)
            .map(|(x, _)| *x)
            .collect(),
    );
    for offset in 0..8 {
        let buf = upload_at(host, offset);
        let input = DeviceView::from(&buf).slice(offset..offset + host.len());
        // Flags at their own offset too, so both arrays are misaligned in different ways.
        let mut padded = vec![1u8; offset];
        padded.extend_from_slice(&flags_host);
        let flags_buf = DeviceBuffer::from_slice(&padded).expect("flags");
        let flags = DeviceView::from(&flags_buf).slice(offset..);
        let what = format!("{what}, n = {}, offset {offset}", host.len());
        check(select, Run::Unordered(pred), input, &want, &what);
        check(select, Run::Stable(pred), input, &want, &what);
        check(
            select,
            Run::<P>::Flagged(flags),
            input,
            &flagged_want,
            &what,
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn empty_input_selects_nothing() {
    let mut select = handle();
    let input = DeviceBuffer::from_slice(&[1.0f32]).unwrap();
    let empty = DeviceView::from(&input).slice(..0);
    let flags = DeviceBuffer::from_slice(&[1u8]).unwrap();
    let mut out = DeviceBuffer::from_slice(&[UNTOUCHED]).unwrap();
    assert_eq!(
        select.select_if(empty, GreaterThan(0.0), &mut out).unwrap(),
        0
    );
    assert_eq!(
        select
            .select_if_stable(empty, GreaterThan(0.0), &mut out)
            .unwrap(),
        0
    );
    assert_eq!(
        select
            .select_flagged(empty, DeviceView::from(&flags).slice(..0), &mut out)
            .unwrap(),
        0
    );
    assert_eq!(download(&out), [UNTOUCHED]);
    // The async variants write the 0 to device memory.
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    for stable in [true, false] {
        let mut count = DeviceBuffer::from_slice(&[77u64]).unwrap();
        // SAFETY: every buffer outlives the synchronize below.
        unsafe {
            if stable {
                select.select_if_stable_async(
                    empty,
                    GreaterThan(0.0),
                    &mut out,
                    &mut count,
                    &stream,
                )
            } else {
                select.select_if_async(empty, GreaterThan(0.0), &mut out, &mut count, &stream)
            }
            .unwrap();
        }
        stream.synchronize().unwrap();
        assert_eq!(download(&count), [0], "stable: {stable}");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn none_and_all_selected() {
    let mut select = handle();
    for &n in &[1usize, 33, 1025, (1 << 20) + 3] {
        let host = random(n, n as u64);
        let (none, all) = (Expected::new(Vec::new()), Expected::new(host.clone()));
        let buf = upload_at(&host, 1);
        let input = DeviceView::from(&buf).slice(1..1 + n);
        let zeros = DeviceBuffer::from_slice(&vec![0u8; n]).unwrap();
        let ones = DeviceBuffer::from_slice(&vec![1u8; n]).unwrap();
        let what = format!("n = {n}");
        let (low, high) = (GreaterThan(-2.0), GreaterThan(2.0));
        check(&mut select, Run::Unordered(high), input, &none, &what);
        check(&mut select, Run::Stable(high), input, &none, &what);
        check(&mut select, Run::Unordered(low), input, &all, &what);
        check(&mut select, Run::Stable(low), input, &all, &what);
        check(
            &mut select,
            Run::<NonZero>::Flagged(DeviceView::from(&zeros)),
            input,
            &none,
            &what,
        );
        check(
            &mut select,
            Run::<NonZero>::Flagged(DeviceView::from(&ones)),
            input,
            &all,
            &what,
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn random_data_every_size_and_offset() {
    let mut select = handle();
    for &n in SIZES.iter().filter(|&&n| n <= max_n()) {
        let host = random(n, 500 + n as u64);
        check_offsets(&mut select, &host, GreaterThan(0.0), |x| x > 0.0, "x > 0");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn every_predicate_with_special_values() {
    let mut select = handle();
    for &n in &[1usize, 31, 1025, 70_001] {
        let mut host = random(n, 900 + n as u64);
        let mut r = rng(n as u64);
        let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 0.25];
        for _ in 0..n.div_ceil(5) {
            let at = r.random_range(0..n);
            host[at] = specials[r.random_range(0..specials.len())];
        }
        check_offsets(
            &mut select,
            &host,
            GreaterThan(0.25),
            |x| x > 0.25,
            "x > 0.25",
        );
        check_offsets(&mut select, &host, LessThan(-0.5), |x| x < -0.5, "x < -0.5");
        check_offsets(&mut select, &host, NonZero, |x| x != 0.0, "x != 0");
        check_offsets(&mut select, &host, IsFinite, f32::is_finite, "finite");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn odd_block_sizes() {
    let mut select = handle();
    for threads in [32, 96, 1024] {
        select
            .set_policy(Policy {
                threads,
                blocks_per_sm: 2,
                finalize_threads: 256,
            })
            .unwrap();
        for &n in &[33usize, 4097, (1 << 20) + 3] {
            let host = random(n, threads as u64 + n as u64);
            check_offsets(
                &mut select,
                &host,
                LessThan(0.5),
                |x| x < 0.5,
                &format!("{threads} threads"),
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn async_variants_write_the_count_to_device_memory() {
    let mut select = handle();
    let n = (1 << 20) + 3;
    let host = random(n, 4242);
    let want: Vec<f32> = host.iter().copied().filter(|&x| x > 0.5).collect();
    let flags_host = random_flags(n, 17);
    let flagged_want: Vec<f32> = host
        .iter()
        .zip(&flags_host)
        .filter(|(_, f)| **f != 0)
        .map(|(x, _)| *x)
        .collect();
    let input = DeviceBuffer::from_slice(&host).unwrap();
    let flags = DeviceBuffer::from_slice(&flags_host).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    let mut outs: Vec<DeviceBuffer<f32>> = (0..3)
        .map(|_| DeviceBuffer::from_slice(&vec![UNTOUCHED; n]).unwrap())
        .collect();
    let mut counts = DeviceBuffer::from_slice(&[u64::MAX; 3]).unwrap();
    // SAFETY: inputs, outputs and counts outlive the synchronize below and nothing else touches them; each
    // call writes its own element of `counts`.
    unsafe {
        let [a, b, c] = &mut outs[..] else {
            unreachable!()
        };
        let mut counts = DeviceViewMut::from(&mut counts);
        select
            .select_if_async(&input, GreaterThan(0.5), a, counts.slice_mut(0..1), &stream)
            .unwrap();
        select
            .select_if_stable_async(&input, GreaterThan(0.5), b, counts.slice_mut(1..2), &stream)
            .unwrap();
        select
            .select_flagged_async(&input, &flags, c, counts.slice_mut(2..3), &stream)
            .unwrap();
    }
    stream.synchronize().unwrap();
    let counts = download(&counts);
    assert_eq!(
        counts,
        [
            want.len() as u64,
            want.len() as u64,
            flagged_want.len() as u64
        ]
    );
    let unordered = download(&outs[0]);
    assert_eq!(
        sorted_bits(&unordered[..want.len()]),
        sorted_bits(&want),
        "unordered async"
    );
    assert!(
        same_bits(&download(&outs[1])[..want.len()], &want),
        "stable async"
    );
    assert!(
        same_bits(&download(&outs[2])[..flagged_want.len()], &flagged_want),
        "flagged async"
    );
    // The blocking calls on the handle's own stream still agree afterwards.
    let mut out = DeviceBuffer::from_slice(&vec![UNTOUCHED; n]).unwrap();
    assert_eq!(
        select
            .select_if_stable(&input, GreaterThan(0.5), &mut out)
            .unwrap(),
        want.len() as u64
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn bad_arguments_are_invalid_argument_errors() {
    let mut select = handle();
    let input = DeviceBuffer::from_slice(&[1.0f32; 64]).unwrap();
    let flags = DeviceBuffer::from_slice(&[1u8; 64]).unwrap();
    let mut out = DeviceBuffer::from_slice(&[0.0f32; 64]).unwrap();
    let invalid = |r: Result<u64, Error>, what: &str| {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}")
    };
    invalid(
        select.select_if(
            &input,
            GreaterThan(0.0),
            DeviceViewMut::from(&mut out).slice_mut(..63),
        ),
        "short output, unordered",
    );
    invalid(
        select.select_if_stable(
            &input,
            GreaterThan(0.0),
            DeviceViewMut::from(&mut out).slice_mut(..63),
        ),
        "short output, stable",
    );
    invalid(
        select.select_flagged(&input, DeviceView::from(&flags).slice(..63), &mut out),
        "short flags",
    );
    invalid(
        select.select_flagged(DeviceView::from(&input).slice(..63), &flags, &mut out),
        "long flags",
    );
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    let mut count = DeviceBuffer::from_slice(&[0u64]).unwrap();
    // SAFETY: nothing is enqueued: the call fails its checks first.
    let r = unsafe {
        select.select_if_async(
            &input,
            GreaterThan(0.0),
            &mut out,
            DeviceViewMut::from(&mut count).slice_mut(..0),
            &stream,
        )
    };
    assert!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "empty count: {r:?}"
    );
    // The handle still works after the errors.
    assert_eq!(
        select
            .select_if_stable(&input, GreaterThan(0.0), &mut out)
            .unwrap(),
        64
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn overlapping_input_and_output_are_refused() -> Result<(), Error> {
    let mut select = handle();
    let mut b = DeviceBuffer::from_slice(&[1.0f32; 64])?;
    let addr = DeviceViewMut::from(&mut b).as_raw();
    // SAFETY: `b` is live; the input and the output are the same 64 elements, which safe code cannot
    // express, and the calls refuse them before any access to either.
    let (input, out) = unsafe {
        (
            DeviceView::<f32>::from_raw_parts(addr, 64),
            DeviceViewMut::<f32>::from_raw_parts(addr, 64),
        )
    };
    let r = select.select_if(input, GreaterThan(0.0), out);
    assert!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "unordered: {r:?}"
    );
    // SAFETY: as above, a fresh exclusive view of the same memory for the stable variant.
    let out = unsafe { DeviceViewMut::<f32>::from_raw_parts(addr, 64) };
    let r = select.select_if_stable(input, GreaterThan(0.0), out);
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "stable: {r:?}");
    // Nothing was written, and the handle still works.
    let mut host = [0.0f32; 64];
    b.copy_to(&mut host[..])?;
    assert_eq!(host, [1.0; 64]);
    let mut out = DeviceBuffer::from_slice(&[0.0f32; 64])?;
    assert_eq!(select.select_if_stable(&b, GreaterThan(0.0), &mut out)?, 64);
    Ok(())
}

/// Element types with compaction kernels (compile-time check of the public bound).
#[allow(dead_code)]
fn is_select_element<T: SelectElement>() {}
const _: fn() = is_select_element::<f32>;
