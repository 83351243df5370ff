//! Device timing with the method of `../shared/reference` and of the CUB comparator: for n ≤ 2^20 a sample
//! is the replay of a CUDA graph of 100 calls (captured from the stream, as the comparator does), between one
//! event pair; above that one event pair per call; medians; a spin kernel ahead of timed work so the events
//! measure the GPU and not the host's launch rate.
use cust::event::{Event, EventFlags};
use cust::stream::Stream;
use cust::sys;
use reduce_host::Gpu;

/// Below or at this size a sample is a batch of [`BATCH`] launches.
pub const BATCH_MAX_N: u64 = 1 << 20;
/// Launches per batch.
pub const BATCH: usize = 100;
const SAMPLES: usize = 21;

type Enqueue<'a> = dyn FnMut(usize, &Stream) -> Result<(), Box<dyn std::error::Error>> + 'a;

fn check(r: sys::CUresult, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {r:?}").into())
    }
}

/// Median of `xs` (sorted in place).
pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Median device time in µs of one `enqueue(copy, stream)`, cycling `copies` input copies.
pub fn time_us(
    gpu: &Gpu,
    stream: &Stream,
    n: u64,
    copies: usize,
    enqueue: &mut Enqueue,
) -> Result<f64, Box<dyn std::error::Error>> {
    // Warm-up, which also settles every lazy allocation and the handle's stream bookkeeping.
    for k in 0..5.max(copies.min(64)) {
        enqueue(k % copies, stream)?;
    }
    stream.synchronize()?;
    if n <= BATCH_MAX_N {
        time_batches(gpu, stream, copies, enqueue)
    } else {
        time_events(gpu, stream, copies, enqueue)
    }
}

/// Calls in one timed loop of [`time_loop`].
pub const LOOP_CALLS: usize = 2000;

/// The loop a plain user writes: `enqueue` back to back on one stream, no graph and no spin kernel ahead,
/// one event pair around [`LOOP_CALLS`] calls (cycling `copies` inputs), so the host's launch rate counts
/// wherever it is slower than the GPU. Median µs per call over 11 loops, after 500 calls of warm-up.
pub fn time_loop(
    stream: &Stream,
    copies: usize,
    enqueue: &mut Enqueue,
) -> Result<f64, Box<dyn std::error::Error>> {
    let mut k = 0;
    for _ in 0..500 {
        enqueue(k % copies, stream)?;
        k += 1;
    }
    stream.synchronize()?;
    let (e0, e1) = (
        Event::new(EventFlags::DEFAULT)?,
        Event::new(EventFlags::DEFAULT)?,
    );
    let mut times = Vec::with_capacity(11);
    for _ in 0..11 {
        e0.record(stream)?;
        for _ in 0..LOOP_CALLS {
            enqueue(k % copies, stream)?;
            k += 1;
        }
        e1.record(stream)?;
        e1.synchronize()?;
        times.push(e1.elapsed_time_f32(&e0)? as f64 * 1000.0 / LOOP_CALLS as f64);
    }
    Ok(median(&mut times))
}

fn time_events(
    gpu: &Gpu,
    stream: &Stream,
    copies: usize,
    enqueue: &mut Enqueue,
) -> Result<f64, Box<dyn std::error::Error>> {
    // Estimate one launch, then take enough samples for ~0.3 s (at least 21, at most 2000).
    let (e0, e1) = (
        Event::new(EventFlags::DEFAULT)?,
        Event::new(EventFlags::DEFAULT)?,
    );
    e0.record(stream)?;
    for k in 0..8 {
        enqueue(k % copies, stream)?;
    }
    e1.record(stream)?;
    e1.synchronize()?;
    let est_us = e1.elapsed_time_f32(&e0)? as f64 * 1000.0 / 8.0;
    let samples = ((300_000.0 / est_us.max(1.0)) as usize).clamp(SAMPLES, 2000);
    let chunk = 32;
    let events: Vec<Event> = (0..=chunk)
        .map(|_| Event::new(EventFlags::DEFAULT))
        .collect::<Result<_, _>>()?;
    let mut times = Vec::with_capacity(samples);
    let mut k = 0;
    while times.len() < samples {
        let m = chunk.min(samples - times.len());
        gpu.spin_async(
            ((est_us * m as f64) as u64 * 1000).clamp(20_000, 2_000_000),
            stream,
        )?;
        events[0].record(stream)?;
        for i in 0..m {
            enqueue(k % copies, stream)?;
            k += 1;
            events[i + 1].record(stream)?;
        }
        events[m].synchronize()?;
        for i in 0..m {
            times.push(events[i + 1].elapsed_time_f32(&events[i])? as f64 * 1000.0);
        }
    }
    Ok(median(&mut times))
}

fn time_batches(
    gpu: &Gpu,
    stream: &Stream,
    copies: usize,
    enqueue: &mut Enqueue,
) -> Result<f64, Box<dyn std::error::Error>> {
    // Graphs of BATCH calls each, graph g taking copies g·BATCH, g·BATCH + 1, …: a replay runs its calls back
    // to back with a graph's launch cost, and consecutive replays take the next graph, so the rotation covers
    // all copies (up to MAX_GRAPHS · BATCH) and small inputs are read from HBM, not from L2 — as the CUB
    // comparator does.
    let graphs = copies.div_ceil(BATCH).clamp(1, MAX_GRAPHS);
    let mut execs = Vec::with_capacity(graphs);
    let built = (0..graphs).try_for_each(|g| {
        capture(stream, |s| {
            (0..BATCH).try_for_each(|k| enqueue((g * BATCH + k) % copies, s))
        })
        .map(|exec| execs.push(exec))
    });
    let (e0, e1) = (
        Event::new(EventFlags::DEFAULT)?,
        Event::new(EventFlags::DEFAULT)?,
    );
    let raw = stream.as_inner();
    let run = || -> Result<Vec<f64>, Box<dyn std::error::Error>> {
        built?;
        // One untimed replay of each graph first: the first launch of an executable graph uploads it.
        for &exec in &execs {
            // SAFETY: `exec` is a live executable graph and `raw` a live stream.
            check(unsafe { sys::cuGraphLaunch(exec, raw) }, "cuGraphLaunch")?;
        }
        let mut times = Vec::new();
        for i in 0..SAMPLES {
            gpu.spin_async(200_000, stream)?;
            e0.record(stream)?;
            // SAFETY: as above.
            check(
                unsafe { sys::cuGraphLaunch(execs[i % graphs], raw) },
                "cuGraphLaunch",
            )?;
            e1.record(stream)?;
            e1.synchronize()?;
            times.push(e1.elapsed_time_f32(&e0)? as f64 * 1000.0 / BATCH as f64);
        }
        Ok(times)
    };
    let times = run();
    stream.synchronize()?;
    for exec in execs {
        // SAFETY: every replay has finished (the stream was synchronized).
        unsafe { sys::cuGraphExecDestroy(exec) };
    }
    Ok(median(&mut times?))
}

/// Most graphs a batch timing rotates over (as the CUB comparator).
const MAX_GRAPHS: usize = 64;

/// Captures what `enqueue` puts on `stream` into an executable graph.
fn capture(
    stream: &Stream,
    enqueue: impl FnOnce(&Stream) -> Result<(), Box<dyn std::error::Error>>,
) -> Result<sys::CUgraphExec, Box<dyn std::error::Error>> {
    let raw = stream.as_inner();
    // SAFETY: `raw` is a live stream; the capture ends below whatever `enqueue` returns.
    check(
        unsafe {
            sys::cuStreamBeginCapture_v2(
                raw,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
            )
        },
        "cuStreamBeginCapture",
    )?;
    let captured = enqueue(stream);
    let mut graph = std::ptr::null_mut();
    // SAFETY: the stream is capturing; the driver writes the graph handle.
    let ended = check(
        unsafe { sys::cuStreamEndCapture(raw, &mut graph) },
        "cuStreamEndCapture",
    );
    captured?;
    ended?;
    let mut exec = std::ptr::null_mut();
    // SAFETY: `graph` is the captured graph; the driver writes the executable's handle.
    let made = check(
        unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) },
        "cuGraphInstantiate",
    );
    // SAFETY: an instantiated graph no longer needs its template.
    unsafe { sys::cuGraphDestroy(graph) };
    made?;
    Ok(exec)
}

/// Bandwidth of a 1 GiB device-to-device copy (bytes read + written), GB/s: the measured ceiling.
pub fn copy_gbps(stream: &Stream) -> Result<f64, Box<dyn std::error::Error>> {
    let bytes = 1usize << 30;
    let src = cust::memory::DeviceBuffer::<u8>::zeroed(bytes)?;
    let dst = cust::memory::DeviceBuffer::<u8>::zeroed(bytes)?;
    let (e0, e1) = (
        Event::new(EventFlags::DEFAULT)?,
        Event::new(EventFlags::DEFAULT)?,
    );
    let mut times = Vec::new();
    for i in 0..25 {
        e0.record(stream)?;
        // SAFETY: both buffers are live and `bytes` long.
        unsafe {
            check(
                sys::cuMemcpyDtoDAsync_v2(
                    dst.as_device_ptr().as_raw(),
                    src.as_device_ptr().as_raw(),
                    bytes,
                    stream.as_inner(),
                ),
                "copy",
            )?
        };
        e1.record(stream)?;
        e1.synchronize()?;
        if i >= 4 {
            times.push(e1.elapsed_time_f32(&e0)? as f64 * 1e-3);
        }
    }
    Ok(2.0 * bytes as f64 / median(&mut times) / 1e9)
}
