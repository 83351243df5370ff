//! Bitwise stability of the deterministic combine strategies, LastBlock's ticket reuse across calls and
//! streams, and the Atomic strategy's error bound. Ignored without a GPU.
mod common;

use common::*;
use cust::memory::{CopyDestination, DeviceBuffer};
use cust::stream::{Stream, StreamFlags};
use reduce_host::{Combine, DeviceViewMut};

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn two_pass_and_last_block_are_bitwise_stable() {
    let mut reduce = gpu();
    let host = random(((1 << 24) + 3).min(max_n()), 42);
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    for combine in [Combine::Auto, Combine::TwoPass, Combine::LastBlock] {
        reduce.set_combine(combine);
        let first = reduce.sum(&buf).unwrap();
        check_sum(first, &host, &format!("{combine:?}"));
        for run in 0..100 {
            let again = reduce.sum(&buf).unwrap();
            assert_eq!(
                again.to_bits(),
                first.to_bits(),
                "{combine:?} run {run}: {again} vs {first}"
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn last_block_survives_many_calls_and_two_streams() {
    let mut reduce = gpu();
    reduce.set_combine(Combine::LastBlock);
    let inputs: Vec<Vec<f32>> = (0..4)
        .map(|k| random((3_000_000 + k * 17).min(max_n() + k), 200 + k as u64))
        .collect();
    let bufs: Vec<DeviceBuffer<f32>> = inputs
        .iter()
        .map(|h| DeviceBuffer::from_slice(h).unwrap())
        .collect();
    let expect: Vec<f32> = bufs.iter().map(|b| reduce.sum(b).unwrap()).collect();
    // Many calls in a row on one handle: the ticket must be back at 0 after each.
    for round in 0..200 {
        let k = round % bufs.len();
        assert_eq!(
            reduce.sum(&bufs[k]).unwrap().to_bits(),
            expect[k].to_bits(),
            "round {round}"
        );
    }
    // Two streams at once: async calls alternate between them with their own outputs.
    let streams = [
        Stream::new(StreamFlags::NON_BLOCKING, None).unwrap(),
        Stream::new(StreamFlags::NON_BLOCKING, None).unwrap(),
    ];
    let mut outs: Vec<DeviceBuffer<f32>> = (0..64)
        .map(|_| DeviceBuffer::from_slice(&[f32::NAN]).unwrap())
        .collect();
    for (i, out) in outs.iter_mut().enumerate() {
        // SAFETY: buffers and outputs outlive the synchronizes below.
        unsafe {
            reduce
                .sum_async(&bufs[i % bufs.len()], out, &streams[i % 2])
                .unwrap()
        };
    }
    for s in &streams {
        s.synchronize().unwrap();
    }
    for (i, out) in outs.iter().enumerate() {
        let mut v = [0.0f32];
        out.copy_to(&mut v[..]).unwrap();
        assert_eq!(
            v[0].to_bits(),
            expect[i % bufs.len()].to_bits(),
            "async call {i}"
        );
    }
    for (h, e) in inputs.iter().zip(&expect) {
        check_sum(*e, h, "LastBlock");
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn atomic_is_within_the_error_bound() {
    let mut reduce = gpu();
    reduce.set_combine(Combine::Atomic);
    for (k, n) in [1usize, 1000, 1 << 20, (1 << 26) + 3]
        .into_iter()
        .filter(|n| *n <= max_n())
        .enumerate()
    {
        let host = random(n, 300 + k as u64);
        let buf = DeviceBuffer::from_slice(&host).unwrap();
        for _ in 0..5 {
            check_sum(reduce.sum(&buf).unwrap(), &host, &format!("Atomic n={n}"));
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn calls_captured_into_a_graph_replay_and_leave_the_handle_usable() {
    // Auto (TwoPass at this size) and LastBlock, whose captured launches keep a ticket word of their own
    // (both wrap back to zero in the kernel): replays interleaved with direct calls must leave both right.
    for combine in [Combine::Auto, Combine::LastBlock] {
        graph_replays_interleaved_with_direct_calls(combine);
    }
}

fn graph_replays_interleaved_with_direct_calls(combine: Combine) {
    use cust::sys;
    let mut reduce = gpu();
    reduce.set_combine(combine);
    let host = random(((1 << 20) + 3).min(max_n()), 9);
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    let want = reduce.sum(&buf).unwrap();
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
    let mut out = DeviceBuffer::from_slice(&[0.0f32; 3]).unwrap();
    let raw = stream.as_inner();
    let ok = sys::CUresult::CUDA_SUCCESS;
    // SAFETY (the raw graph calls): live handles; the graph and its executable are destroyed below.
    unsafe {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        assert_eq!(sys::cuStreamBeginCapture_v2(raw, mode), ok);
        let mut outs = DeviceViewMut::from(&mut out);
        for k in 0..3 {
            reduce
                .sum_async(&buf, outs.slice_mut(k..k + 1), &stream)
                .unwrap();
        }
        let mut graph = std::ptr::null_mut();
        assert_eq!(sys::cuStreamEndCapture(raw, &mut graph), ok);
        let mut exec = std::ptr::null_mut();
        assert_eq!(sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0), ok);
        for round in 0..3 {
            for _ in 0..2 {
                assert_eq!(sys::cuGraphLaunch(exec, raw), ok);
            }
            stream.synchronize().unwrap();
            // Direct calls between replays (their ticket is word 0).
            let direct = reduce.sum(&buf).unwrap();
            assert_eq!(
                direct.to_bits(),
                want.to_bits(),
                "{combine:?} round {round}: direct"
            );
        }
        sys::cuGraphExecDestroy(exec);
        sys::cuGraphDestroy(graph);
    }
    let mut got = [0.0f32; 3];
    out.copy_to(&mut got[..]).unwrap();
    for g in got {
        assert_eq!(
            g.to_bits(),
            want.to_bits(),
            "{combine:?}: replayed {g}, direct {want}"
        );
    }
    // Blocking calls on the handle's own stream after the capture: no wait on a captured event.
    assert_eq!(reduce.sum(&buf).unwrap().to_bits(), want.to_bits());
    // SAFETY: `buf` and `out` outlive the call, which the next blocking call orders after.
    unsafe { reduce.sum_async(&buf, DeviceViewMut::from(&mut out).slice_mut(0..1), &stream) }
        .unwrap();
    assert_eq!(reduce.sum(&buf).unwrap().to_bits(), want.to_bits());
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn streams_dropped_and_recreated_between_async_calls() {
    // A dropped stream's handle can be reused by the next one: scratch ordering must not rest on comparing
    // handles. Each call gets a fresh stream, dropped with its work still queued, and every result is checked.
    let mut reduce = gpu();
    reduce.set_combine(Combine::LastBlock);
    let n = ((1usize << 21) + 5).min(max_n().max(1 << 16));
    let host: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
    let want: f64 = host.iter().map(|&x| f64::from(x)).sum();
    let buf = DeviceBuffer::from_slice(&host).unwrap();
    // `REDUCE_SOAK_CALLS` caps it under compute-sanitizer, as for the soak.
    let calls = std::env::var("REDUCE_SOAK_CALLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map_or(10_000usize, |c: usize| c.min(10_000));
    let mut outs = DeviceBuffer::<f32>::zeroed(calls).unwrap();
    let mut views = DeviceViewMut::from(&mut outs);
    for i in 0..calls {
        let stream = Stream::new(StreamFlags::NON_BLOCKING, None).unwrap();
        let out = views.slice_mut(i..i + 1);
        // SAFETY: `buf` and `outs` outlive the synchronize below; `out` is written by this call only.
        unsafe { reduce.sum_async(&buf, out, &stream).unwrap() };
    }
    cust::context::CurrentContext::synchronize().unwrap();
    let mut got = vec![0.0f32; calls];
    outs.copy_to(&mut got[..]).unwrap();
    for (i, g) in got.iter().enumerate() {
        assert_eq!(f64::from(*g), want, "call {i}");
    }
}
