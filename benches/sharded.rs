//! `cargo bench --bench sharded --features nccl`: sharded reductions over every GPU of the machine (G of
//! them, one rank and one thread each, `NcclCommunicator::group`), against one GPU on the whole input:
//!
//! - **sum and argmax of G × 2^28 f32**: one GPU's blocking call on all G · 2^28 elements, and the sharded
//!   call on 2^28 per GPU (host wall clock of rank 0, the ranks released together by a barrier); the
//!   speed-up is their ratio (the goal: ≥ 1.9 on two GPUs);
//! - **the combine of a scalar result**: the sharded argmax of one element per GPU less the local argmax
//!   of one element, beside NCCL's own all-reduce of 8 bytes on the same GPUs (cudarc's bindings, a group
//!   call and a synchronize of every stream) — the goal: within 2×;
//! - **the reproducible sum**: the same bits from one GPU and from G (checked, and timed);
//! - **top-k over G vocabulary shards** (4096 rows, 151936 columns split evenly, k = 50, bf16): identical
//!   to one GPU's `segmented_max_k` (checked), and its time.
//!
//! On a machine with one GPU every row still runs, with G = 1 (the combine is NCCL's one-rank path).
//! Needs `libnccl.so` on the library path. Writes `sharded.md` to `$OUT` (if set) or `target/bench`.
#[allow(dead_code)] // each bench uses part of the harness
mod support;

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Barrier;
use std::time::Instant;

use cust::memory::{CopyDestination, DeviceBuffer};
use reduce_host::sharded::{NcclCommunicator, ShardedReduce};
use reduce_host::{BF16, Determinism, DeviceReduce, DeviceTopK, Gpu, Indexed, Segments};
use support::BoxError;
use support::timing::median;

const PER_GPU: usize = 1 << 28;
const REPS: usize = 21;

fn main() -> ExitCode {
    support::main("sharded bench", run)
}

/// `len` values of a cheap hash of the global index `at + i`, so every rank can make its own shard.
fn values(at: usize, len: usize) -> Vec<f32> {
    (at..at + len)
        .map(|i| {
            let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            ((h >> 40) as f32 / (1u64 << 24) as f32) - 0.5
        })
        .collect()
}

/// Median host wall time in µs of `f` (after two warm-up calls).
fn wall_us(mut f: impl FnMut()) -> f64 {
    f();
    f();
    let mut t: Vec<f64> = (0..REPS)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    median(&mut t)
}

/// Runs `work(rank, sharded, barrier)` on one thread per GPU and returns rank 0's value.
fn on_ranks<R: Send>(
    gpus: &[Gpu],
    work: impl Fn(usize, &mut ShardedReduce<NcclCommunicator>, &Barrier) -> R + Sync,
) -> Result<R, BoxError> {
    let comms = NcclCommunicator::group(gpus)?;
    let barrier = Barrier::new(gpus.len());
    let mut results: Vec<R> = std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .enumerate()
            .map(|(rank, comm)| {
                let (work, barrier, gpu) = (&work, &barrier, &gpus[rank]);
                s.spawn(move || {
                    let mut sharded = ShardedReduce::new(gpu, comm).expect("handle");
                    work(rank, &mut sharded, barrier)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("rank"))
            .collect()
    });
    Ok(results.swap_remove(0))
}

/// Times `call` on every rank together: a barrier before each call, rank 0's wall clock.
fn timed(barrier: &Barrier, mut call: impl FnMut()) -> f64 {
    wall_us(|| {
        barrier.wait();
        call();
    })
}

/// NCCL's own all-reduce of one f64 on every GPU: one thread, a group call, every stream synchronised.
fn nccl_allreduce_8_bytes_us(g: usize) -> Result<f64, BoxError> {
    use cudarc::driver::CudaContext;
    use cudarc::nccl::{Comm, ReduceOp, group_end, group_start};
    let streams: Vec<_> = (0..g)
        .map(|i| CudaContext::new(i).map(|c| c.default_stream()))
        .collect::<Result<_, _>>()?;
    let comms = Comm::from_devices(streams.clone()).map_err(|e| format!("{e:?}"))?;
    let sends: Vec<_> = streams
        .iter()
        .map(|s| s.alloc_zeros::<f64>(1))
        .collect::<Result<_, _>>()?;
    let mut recvs: Vec<_> = streams
        .iter()
        .map(|s| s.alloc_zeros::<f64>(1))
        .collect::<Result<_, _>>()?;
    Ok(wall_us(|| {
        group_start().expect("group");
        for ((c, s), r) in comms.iter().zip(&sends).zip(recvs.iter_mut()) {
            c.all_reduce(s, r, &ReduceOp::Sum).expect("all-reduce");
        }
        group_end().expect("group");
        for s in &streams {
            s.synchronize().expect("sync");
        }
    }))
}

fn run() -> Result<bool, BoxError> {
    let gpu0 = support::open_gpu()?;
    let g = (cust::device::Device::num_devices()? as usize).min(8);
    let gpus: Vec<Gpu> = std::iter::once(Ok(gpu0))
        .chain((1..g).map(|i| Gpu::with_device(i as u32)))
        .collect::<Result<_, _>>()?;
    let mut ok = true;
    let mut report = format!(
        "## Sharded reductions over {g} × {} ({})\n\n| row | one GPU | {g} GPUs | ratio |\n|---|---:|---:|---:|\n",
        gpus[0].info().name,
        if g == 1 {
            "one GPU: G = 1"
        } else {
            "NCCL group, a thread per GPU"
        }
    );

    // One GPU on the whole input.
    let n = PER_GPU * g;
    let whole = DeviceBuffer::from_slice(&values(0, n))?;
    let mut reduce = DeviceReduce::with_gpu(&gpus[0])?;
    let one_sum = wall_us(|| {
        reduce.sum(&whole).expect("sum");
    });
    let one_argmax = wall_us(|| {
        reduce.argmax(&whole).expect("argmax");
    });
    let want_argmax = reduce.argmax(&whole)?;
    reduce.set_determinism(Determinism::GpuToGpu);
    let one_repro = wall_us(|| {
        reduce.sum(&whole).expect("sum");
    });
    let want_repro = reduce.sum(&whole)?;
    let tiny = DeviceBuffer::from_slice(&[1.0f32])?;
    let local_tiny = wall_us(|| {
        reduce.argmax(&tiny).expect("argmax");
    });
    drop(whole);

    let (sum_us, argmax_us, repro_us, tiny_us, got_argmax, got_repro) =
        on_ranks(&gpus, |rank, sharded, barrier| {
            let shard = DeviceBuffer::from_slice(&values(rank * PER_GPU, PER_GPU)).expect("shard");
            let tiny = DeviceBuffer::from_slice(&[1.0f32]).expect("tiny");
            let sum = timed(barrier, || {
                sharded.sum(&shard).expect("sum");
            });
            let argmax = timed(barrier, || {
                sharded.argmax(&shard).expect("argmax");
            });
            let got_argmax = sharded.argmax(&shard).expect("argmax");
            let tiny_us = timed(barrier, || {
                sharded.argmax(&tiny).expect("argmax");
            });
            sharded.set_determinism(Determinism::GpuToGpu);
            let repro = timed(barrier, || {
                sharded.sum(&shard).expect("sum");
            });
            let got_repro = sharded.sum(&shard).expect("sum");
            (sum, argmax, repro, tiny_us, got_argmax, got_repro)
        })?;
    let same = |a: Option<Indexed<f32>>, b: Option<Indexed<f32>>| {
        a.map(|a| (a.index, a.value.to_bits())) == b.map(|b| (b.index, b.value.to_bits()))
    };
    if !same(got_argmax, want_argmax) || got_repro.to_bits() != want_repro.to_bits() {
        eprintln!(
            "MISMATCH: argmax {got_argmax:?} vs {want_argmax:?}, reproducible sum {got_repro} vs {want_repro}"
        );
        ok = false;
    }
    for (row, one, sharded) in [
        (format!("sum, {g} × 2^28 f32"), one_sum, sum_us),
        (format!("argmax, {g} × 2^28 f32"), one_argmax, argmax_us),
        (
            format!(
                "reproducible sum, {g} × 2^28 f32 (same bits: {})",
                got_repro.to_bits() == want_repro.to_bits()
            ),
            one_repro,
            repro_us,
        ),
    ] {
        writeln!(
            report,
            "| {row} | {one:.1} µs | {sharded:.1} µs | {:.2}× |",
            one / sharded
        )?;
    }
    let nccl = nccl_allreduce_8_bytes_us(g)?;
    writeln!(
        report,
        "| combine of a scalar: sharded argmax of 1 element per GPU − local argmax of 1 | {local_tiny:.1} µs (local) | {tiny_us:.1} µs ({:.1} µs combine) | {:.2}× NCCL's 8-byte all-reduce ({nccl:.1} µs) |",
        tiny_us - local_tiny,
        (tiny_us - local_tiny) / nccl
    )?;

    // Top-k over vocabulary shards.
    let (rows, cols, k) = (4096usize, 151_936usize, 50u64);
    let logits: Vec<BF16> = values(0, rows * cols)
        .into_iter()
        .map(|x| BF16(half::bf16::from_f32(x)))
        .collect();
    let mut topk = DeviceTopK::with_gpu(&gpus[0])?;
    let x = DeviceBuffer::from_slice(&logits)?;
    let mut v = DeviceBuffer::from_slice(&vec![BF16(half::bf16::ZERO); rows * k as usize])?;
    let mut ix = DeviceBuffer::from_slice(&vec![0u64; rows * k as usize])?;
    let one_topk = wall_us(|| {
        topk.segmented_max_k(&x, Segments::fixed(rows, cols), k, &mut v, &mut ix)
            .expect("topk");
    });
    let mut want = vec![0u64; rows * k as usize];
    ix.copy_to(&mut want[..])?;
    drop((x, v, ix));
    let width = cols.div_ceil(g);
    let (topk_us, got) = on_ranks(&gpus, |rank, sharded, barrier| {
        let (at, w) = (rank * width, width.min(cols - rank * width));
        let mine: Vec<BF16> = (0..rows)
            .flat_map(|r| logits[r * cols + at..r * cols + at + w].to_vec())
            .collect();
        let shard = DeviceBuffer::from_slice(&mine).expect("shard");
        let t = timed(barrier, || {
            sharded
                .row_max_k(&shard, Segments::fixed(rows, w), k)
                .expect("row_max_k");
        });
        (
            t,
            sharded
                .row_max_k(&shard, Segments::fixed(rows, w), k)
                .expect("row_max_k"),
        )
    })?;
    let identical = got.iter().map(|e| e.index).eq(want.iter().copied());
    ok &= identical;
    writeln!(
        report,
        "| top-50 per row of 4096 × 151936 bf16 over {g} column shards (identical: {identical}) | {one_topk:.1} µs | {topk_us:.1} µs | {:.2}× |",
        one_topk / topk_us
    )?;
    support::write_report("sharded.md", &report)?;
    Ok(ok)
}
