//! Top-k sampling candidates and the reproducible sum over a vocabulary sharded across GPUs, checked
//! against one GPU on the whole input.
//!
//! `cargo run --release --example sharded` — 256 rows of 151936 bf16 logits, their columns split over two
//! ranks (one thread each, `LocalCommunicator`): on two GPUs when the machine has them, else both ranks
//! simulated on GPU 0. Each rank holds its columns of every row; `ShardedReduce::row_max_k` gives each
//! row's top 50 with global column indices, and `sum` under `Determinism::GpuToGpu` the reproducible sum
//! of all logits: both must equal one GPU's answer bit for bit. Prints "correct"; exits non-zero on a wrong
//! answer, and with one clear line when there is no GPU. With `--features nccl` on `reduce-host`,
//! `NcclCommunicator::group` takes `LocalCommunicator`'s place on real GPUs (see docs/SCALING.md).
mod support;

use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer};
use half::bf16;
use rand::Rng;
use reduce_host::sharded::{LocalCommunicator, ShardedReduce};
use reduce_host::{BF16, Determinism, DeviceReduce, DeviceTopK, Gpu, Segments};

const ROWS: usize = 256;
const COLS: usize = 151_936;
const K: u64 = 50;

fn main() -> ExitCode {
    support::main("sharded", run)
}

fn run() -> Result<bool, support::BoxError> {
    let gpu0 = support::open(Gpu::new())?;
    let two = cust::device::Device::num_devices()? >= 2;
    let gpus = [
        gpu0.clone(),
        if two {
            Gpu::with_device(1)?
        } else {
            gpu0.clone()
        },
    ];
    let comms = if two {
        LocalCommunicator::group(2)
    } else {
        LocalCommunicator::group_on_one_gpu(2)
    };

    let mut rng = support::rng();
    let logits: Vec<BF16> = (0..ROWS * COLS)
        .map(|_| BF16(bf16::from_f32(rng.random_range(-8.0f32..8.0))))
        .collect();

    // One GPU, the whole matrix.
    let whole = DeviceBuffer::from_slice(&logits)?;
    let mut topk = DeviceTopK::with_gpu(&gpu0)?;
    let mut values = DeviceBuffer::from_slice(&vec![BF16(bf16::ZERO); ROWS * K as usize])?;
    let mut indices = DeviceBuffer::from_slice(&vec![0u64; ROWS * K as usize])?;
    topk.segmented_max_k(
        &whole,
        Segments::fixed(ROWS, COLS),
        K,
        &mut values,
        &mut indices,
    )?;
    let mut want = vec![0u64; ROWS * K as usize];
    indices.copy_to(&mut want[..])?;
    let mut reduce = DeviceReduce::with_gpu(&gpu0)?;
    reduce.set_determinism(Determinism::GpuToGpu);
    let want_sum = reduce.sum(&whole)?;
    drop(whole);

    // Two ranks, each with its columns of every row (row-major shards, the way vocabulary-parallel
    // layers hold their logits).
    let split = COLS / 2 + 7; // uneven on purpose
    let results = std::thread::scope(|s| {
        let ranks: Vec<_> = comms
            .into_iter()
            .zip(&gpus)
            .enumerate()
            .map(|(rank, (comm, gpu))| {
                let logits = &logits;
                s.spawn(move || -> reduce_host::Result<_> {
                    let mut sharded = ShardedReduce::new(gpu, comm)?;
                    let (at, width) = if rank == 0 {
                        (0, split)
                    } else {
                        (split, COLS - split)
                    };
                    let mine: Vec<BF16> = (0..ROWS)
                        .flat_map(|r| logits[r * COLS + at..r * COLS + at + width].to_vec())
                        .collect();
                    let shard = DeviceBuffer::from_slice(&mine)?;
                    let best = sharded.row_max_k(&shard, Segments::fixed(ROWS, width), K)?;
                    sharded.set_determinism(Determinism::GpuToGpu);
                    // The reproducible sum over the ranks' shards in rank order: rank 0's columns of
                    // every row, then rank 1's; one GPU sums the same concatenation below.
                    let sum = sharded.sum(&shard)?;
                    Ok((best, sum, mine))
                })
            })
            .collect();
        ranks
            .into_iter()
            .map(|r| r.join().expect("rank panicked"))
            .collect::<reduce_host::Result<Vec<_>>>()
    })?;
    let concatenated: Vec<BF16> = results.iter().flat_map(|r| r.2.iter().copied()).collect();
    let want_concat_sum = reduce.sum(&DeviceBuffer::from_slice(&concatenated)?)?;

    println!(
        "{} rows × {COLS} bf16 logits over 2 ranks ({}), top {K} per row",
        ROWS,
        if two {
            "two GPUs"
        } else {
            "simulated on one GPU"
        }
    );
    let mut ok = true;
    for (rank, (best, sum, _)) in results.iter().enumerate() {
        let same_topk = best.iter().map(|e| e.index).eq(want.iter().copied());
        let same_sum = sum.to_bits() == want_concat_sum.to_bits();
        println!(
            "rank {rank}: top-k {} one GPU's; reproducible sum {sum} ({} one GPU's {want_concat_sum})",
            if same_topk { "equals" } else { "DIFFERS from" },
            if same_sum {
                "the bits of"
            } else {
                "NOT the bits of"
            },
        );
        ok &= same_topk && same_sum;
    }
    // The row-major whole matrix is another order of the same elements: its reproducible sum may differ
    // in the last bits, so it is only shown.
    println!("(one GPU's reproducible sum of the row-major matrix: {want_sum})");
    println!("{}", if ok { "correct" } else { "WRONG ANSWER" });
    Ok(ok)
}
