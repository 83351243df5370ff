//! Soak and concurrency: many random calls on one set of handles with every result checked and memory use
//! flat, and several threads with several streams each at once. Ignored without a GPU.
mod common;

use common::*;
use cust::memory::{CopyDestination, DeviceBuffer};
use cust::stream::{Stream, StreamFlags};
use rand::Rng;
use reduce_host::{
    DeviceHistogram, DeviceReduce, DeviceSelect, DeviceView, DeviceViewMut, Gpu, GreaterThan, cpu,
};

/// Resident memory of this process, in bytes (Linux).
fn host_rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Free device memory.
fn device_free() -> usize {
    cust::memory::mem_get_info().expect("cuMemGetInfo").0
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn a_hundred_thousand_random_calls_keep_memory_flat() {
    let calls = std::env::var("REDUCE_SOAK_CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000usize);
    let gpu = Gpu::new().unwrap();
    let mut reduce = DeviceReduce::with_gpu(&gpu).unwrap();
    let mut hist = DeviceHistogram::with_gpu(&gpu).unwrap();
    let mut select = DeviceSelect::with_gpu(&gpu).unwrap();
    let n = (1usize << 16).min(max_n().max(4096));
    let floats = random(n, 7);
    let ints: Vec<i32> = (0..n as i32)
        .map(|i| i.wrapping_mul(2_654_435_761u32 as i32))
        .collect();
    let bytes: Vec<u8> = (0..n).map(|i| (i * 131 % 251) as u8).collect();
    let d_floats = DeviceBuffer::from_slice(&floats).unwrap();
    let d_ints = DeviceBuffer::from_slice(&ints).unwrap();
    let d_bytes = DeviceBuffer::from_slice(&bytes).unwrap();
    let mut d_out = DeviceBuffer::from_slice(&vec![0.0f32; n]).unwrap();
    let mut r = rng(99);
    let mut baseline = None;
    for call in 0..calls {
        if call == calls / 10 {
            // After warm-up: every module loaded, every scratch at its largest.
            baseline = Some((device_free(), host_rss()));
        }
        let a = r.random_range(0..n);
        let b = r.random_range(a..=n);
        let what = format!("call {call}: {a}..{b}");
        match r.random_range(0..5) {
            0 => {
                let got = reduce.sum(DeviceView::from(&d_floats).slice(a..b)).unwrap();
                check_sum(got, &floats[a..b], &what);
            }
            1 => {
                let got = reduce
                    .argmax(DeviceView::from(&d_ints).slice(a..b))
                    .unwrap();
                let want = cpu::argmax(&ints[a..b]);
                assert_eq!(got.map(|g| (g.index as usize, g.value)), want, "{what}");
            }
            2 => {
                let got = reduce.min(DeviceView::from(&d_bytes).slice(a..b)).unwrap();
                assert_eq!(got, cpu::min(&bytes[a..b]), "{what}");
            }
            3 => {
                let got: Vec<u32> = hist
                    .even(DeviceView::from(&d_floats).slice(a..b), 37, -1.0, 1.0)
                    .unwrap();
                let want = cpu::histogram_even(&floats[a..b], 37, -1.0, 1.0).unwrap();
                assert!(got.iter().map(|&c| c as u64).eq(want), "{what}");
            }
            _ => {
                let input = DeviceView::from(&d_floats).slice(a..b);
                let kept = select
                    .select_if_stable(
                        input,
                        GreaterThan(0.5),
                        DeviceViewMut::from(&mut d_out).slice_mut(..b - a),
                    )
                    .unwrap();
                let want = floats[a..b].iter().filter(|&&x| x > 0.5).count() as u64;
                assert_eq!(kept, want, "{what}");
            }
        }
    }
    let (free_before, rss_before) = baseline.expect("at least ten calls");
    let (free_after, rss_after) = (device_free(), host_rss());
    println!(
        "soak: {calls} calls; device free {free_before} -> {free_after}; host rss {rss_before} -> {rss_after}"
    );
    if std::env::var_os("REDUCE_SOAK_UNDER_SANITIZER").is_some() {
        // compute-sanitizer allocates device and host memory of its own as kernels run: the memory
        // figures are the plain run's to check; here every call's result still is.
        return;
    }
    assert_eq!(
        free_after, free_before,
        "device memory in use changed over {calls} calls"
    );
    assert!(
        rss_after <= rss_before + (16 << 20),
        "host memory grew from {rss_before} to {rss_after} bytes over {calls} calls"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn four_threads_with_two_streams_each_all_checked() {
    let gpu = Gpu::new().unwrap();
    // Small integers whose every partial sum stays below 2^24: the f32 sum is exact in any order. (A first
    // version summed 2^22 values of i % 13, about 2.5e7: past 2^24, so its exact expectation was wrong.)
    let n = ((1usize << 21) + 9).min(max_n().max(4096));
    let host: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let want: f64 = host.iter().map(|&x| f64::from(x)).sum();
    std::thread::scope(|s| {
        for t in 0..4 {
            let (gpu, host) = (gpu.clone(), &host);
            s.spawn(move || {
                let mut reduce = DeviceReduce::with_gpu(&gpu).unwrap();
                let buf = DeviceBuffer::from_slice(host).unwrap();
                let streams: Vec<Stream> = (0..2)
                    .map(|_| Stream::new(StreamFlags::NON_BLOCKING, None).unwrap())
                    .collect();
                let rounds = 200;
                let mut outs = DeviceBuffer::<f32>::zeroed(rounds).unwrap();
                let mut view = DeviceViewMut::from(&mut outs);
                for i in 0..rounds {
                    // SAFETY: `buf` and `outs` outlive the synchronize below; each call writes its own slot.
                    unsafe {
                        reduce
                            .sum_async(&buf, view.slice_mut(i..i + 1), &streams[i % 2])
                            .unwrap()
                    };
                }
                for s in &streams {
                    s.synchronize().unwrap();
                }
                let mut got = vec![0.0f32; rounds];
                outs.copy_to(&mut got[..]).unwrap();
                for (i, g) in got.iter().enumerate() {
                    assert_eq!(f64::from(*g), want, "thread {t} call {i}");
                }
            });
        }
    });
}
