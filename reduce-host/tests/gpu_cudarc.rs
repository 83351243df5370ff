//! cudarc memory and streams with the handles (`--features cudarc`), on the GPU: a `CudaSlice` reduced on a
//! cudarc stream, views of cudarc views, cudarc outputs, and the ordering with cudarc's own work. Ignored
//! without a GPU; compiled only with the feature.
#![cfg(feature = "cudarc")]

use cudarc::driver::CudaContext;
use reduce_host::{DeviceHistogram, DeviceReduce, DeviceSelect, GreaterThan, Indexed};

fn values(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919) % 1000) as f32 - 500.0).collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn a_cudarc_buffer_reduced_on_a_cudarc_stream() {
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    let host = values(1 << 20);
    let x = stream.clone_htod(&host).unwrap();
    let want: f64 = host.iter().map(|&v| f64::from(v)).sum();

    let mut reduce = DeviceReduce::new().unwrap();
    // Blocking, on the handle's stream: ordered after the copy still queued on cudarc's stream.
    assert_eq!(f64::from(reduce.sum(&x).unwrap()), want);

    // Async, on the cudarc stream, into cudarc memory.
    let mut out = stream.alloc_zeros::<f32>(1).unwrap();
    // SAFETY: `x` and `out` live until the copy below, which is ordered after the sum on `stream`.
    unsafe { reduce.sum_async(&x, &mut out, &stream).unwrap() };
    assert_eq!(f64::from(stream.clone_dtoh(&out).unwrap()[0]), want);

    // A cudarc view of a sub-range; argmax indices are within it.
    let tail = x.slice(3..);
    let best = reduce.argmax(&tail).unwrap().unwrap();
    let (i, v) = host[3..]
        .iter()
        .enumerate()
        .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b });
    assert_eq!((best.index, best.value), (i as u64, v));

    // argmax into a cudarc `Indexed` output is not possible (cudarc has no DeviceRepr for it); a cust
    // output works beside a cudarc input.
    let mut cust_out =
        cust::memory::DeviceBuffer::from_slice(&[Indexed::<f32>::default()]).unwrap();
    // SAFETY: both outlive the synchronize below.
    unsafe { reduce.argmax_async(&x, &mut cust_out, &stream).unwrap() };
    stream.synchronize().unwrap();
    let mut got = [Indexed::default()];
    cust::memory::CopyDestination::copy_to(&*cust_out, &mut got[..]).unwrap();
    assert_eq!(got[0].value, 499.0);
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn cudarc_work_before_and_after_a_call_is_ordered() {
    let ctx = CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    let mut reduce = DeviceReduce::new().unwrap();
    let mut select = DeviceSelect::new().unwrap();
    let mut hist = DeviceHistogram::new().unwrap();
    for round in 0..50 {
        let host: Vec<f32> = values((1 << 18) + round);
        // Queued on cudarc's stream and not waited for: every call must see the finished copy.
        let x = stream.clone_htod(&host).unwrap();
        let want: f64 = host.iter().map(|&v| f64::from(v)).sum();
        assert_eq!(f64::from(reduce.sum(&x).unwrap()), want, "round {round}");

        let mut out = stream.alloc_zeros::<f32>(host.len()).unwrap();
        let kept = select
            .select_if_stable(&x, GreaterThan(0.0f32), &mut out)
            .unwrap();
        let want_kept: Vec<f32> = host.iter().copied().filter(|&v| v > 0.0).collect();
        assert_eq!(kept as usize, want_kept.len());
        assert_eq!(
            &stream.clone_dtoh(&out).unwrap()[..want_kept.len()],
            &want_kept[..]
        );

        let counts: Vec<u32> = hist.even(&x, 10, -500.0, 500.0).unwrap();
        assert_eq!(
            counts.iter().map(|&c| c as usize).sum::<usize>(),
            host.len()
        );
        // `x` and `out` are freed here, on cudarc's stream: after the calls' kernels.
    }
}
