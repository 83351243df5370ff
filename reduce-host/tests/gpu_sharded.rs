//! Sharded reductions on real kernels: 1–5 ranks simulated on one GPU (`LocalCommunicator::
//! group_on_one_gpu`, one thread per rank) give what one GPU gives for the concatenated shards, for every
//! call, uneven and empty shards included; ranks that disagree, or share a GPU in a real group, or whose
//! own part fails, get errors on every rank, never a hang. With `--features nccl`, the same calls through
//! NCCL: one rank on one GPU, and two ranks when the machine has two GPUs (with one, that test passes and
//! says on stderr that it skipped). Ignored without a GPU.
use cust::memory::{CopyDestination, DeviceBuffer};
use reduce_host::sharded::{Communicator, LocalCommunicator, ShardedReduce};
use reduce_host::stats::Stats;
use reduce_host::{
    BF16, Determinism, DeviceHistogram, DeviceReduce, DeviceTopK, DeviceView, Error, Gpu, Indexed,
    Segments,
};

/// What every rank computes over its shard, for one comparison with one GPU.
#[derive(Debug)]
struct Results {
    sum: f32,
    reproducible: f32,
    int_sum: i64,
    argmax: Option<Indexed<f32>>,
    argmin: Option<Indexed<f32>>,
    max_k: Vec<Indexed<f32>>,
    min_k: Vec<Indexed<f32>>,
    histogram: Vec<u64>,
    stats: Stats,
}

const K: u64 = 37;
const BINS: usize = 64;

fn on_rank<C: Communicator>(
    sharded: &mut ShardedReduce<C>,
    x: &DeviceBuffer<f32>,
    ints: &DeviceBuffer<i32>,
) -> reduce_host::Result<Results> {
    sharded.set_determinism(Determinism::RunToRun);
    let sum = sharded.sum(x)?;
    sharded.set_determinism(Determinism::GpuToGpu);
    let reproducible = sharded.sum(x)?;
    Ok(Results {
        sum,
        reproducible,
        int_sum: sharded.sum(ints)?,
        argmax: sharded.argmax(x)?,
        argmin: sharded.argmin(x)?,
        max_k: sharded.max_k(x, K)?,
        min_k: sharded.min_k(x, K)?,
        histogram: sharded.histogram_even(x, BINS, -2.0, 2.0)?,
        stats: sharded.stats(x)?,
    })
}

/// One GPU's results for the whole input.
fn one_gpu(host: &[f32], ints: &[i32]) -> Results {
    let mut reduce = DeviceReduce::new().unwrap();
    let x = DeviceBuffer::from_slice(host).unwrap();
    let i = DeviceBuffer::from_slice(ints).unwrap();
    let sum = reduce.sum(&x).unwrap();
    reduce.set_determinism(Determinism::GpuToGpu);
    let reproducible = reduce.sum(&x).unwrap();
    let mut topk = DeviceTopK::new().unwrap();
    let mut top = |largest: bool| {
        let mut values = DeviceBuffer::from_slice(&[0.0f32; K as usize]).unwrap();
        let mut indices = DeviceBuffer::from_slice(&[0u64; K as usize]).unwrap();
        if largest {
            topk.max_k(&x, K, &mut values, &mut indices).unwrap();
        } else {
            topk.min_k(&x, K, &mut values, &mut indices).unwrap();
        }
        let (mut v, mut ix) = (vec![0.0f32; K as usize], vec![0u64; K as usize]);
        values.copy_to(&mut v[..]).unwrap();
        indices.copy_to(&mut ix[..]).unwrap();
        v.into_iter()
            .zip(ix)
            .map(|(value, index)| Indexed { value, index })
            .collect::<Vec<_>>()
    };
    Results {
        sum,
        reproducible,
        int_sum: reduce.sum(&i).unwrap(),
        argmax: reduce.argmax(&x).unwrap(),
        argmin: reduce.argmin(&x).unwrap(),
        max_k: top(true),
        min_k: top(false),
        histogram: DeviceHistogram::new()
            .unwrap()
            .even::<f32, u64>(&x, BINS, -2.0, 2.0)
            .unwrap(),
        stats: reduce.stats(&x).unwrap(),
    }
}

fn bits(v: &[Indexed<f32>]) -> Vec<(u64, u32)> {
    v.iter().map(|e| (e.index, e.value.to_bits())).collect()
}

fn compare(got: &Results, want: &Results, what: &str) {
    let tol = 1e-5 * want.stats.count as f32 + 1e-3;
    assert!(
        (got.sum - want.sum).abs() <= tol,
        "{what}: sum {} vs {}",
        got.sum,
        want.sum
    );
    assert_eq!(
        got.reproducible.to_bits(),
        want.reproducible.to_bits(),
        "{what}: reproducible sum"
    );
    assert_eq!(got.int_sum, want.int_sum, "{what}: integer sum");
    let pair = |i: Option<Indexed<f32>>| i.map(|i| (i.index, i.value.to_bits()));
    assert_eq!(pair(got.argmax), pair(want.argmax), "{what}: argmax");
    assert_eq!(pair(got.argmin), pair(want.argmin), "{what}: argmin");
    assert_eq!(bits(&got.max_k), bits(&want.max_k), "{what}: max_k");
    assert_eq!(bits(&got.min_k), bits(&want.min_k), "{what}: min_k");
    assert_eq!(got.histogram, want.histogram, "{what}: histogram");
    let (g, w) = (&got.stats, &want.stats);
    assert_eq!(
        (g.count, g.min, g.max),
        (w.count, w.min, w.max),
        "{what}: count and extrema"
    );
    assert!(
        (g.mean - w.mean).abs() <= 1e-12 * w.mean.abs().max(1.0),
        "{what}: mean"
    );
    assert!(
        (g.variance - w.variance).abs() <= 1e-10 * w.variance.abs().max(1.0),
        "{what}: variance"
    );
}

/// Values with ties (quarters), both signs, and no NaN (a NaN would make the sums NaN and hide them).
fn input(n: usize, seed: u64) -> (Vec<f32>, Vec<i32>) {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let x: Vec<f32> = (0..n).map(|_| ((next() % 16) as f32 - 8.0) / 4.0).collect();
    let i: Vec<i32> = (0..n).map(|_| next() as i32).collect();
    (x, i)
}

/// Runs `rank` on one thread per communicator, each with its own shard of `host` (`lens` in rank order).
fn run_ranks<C: Communicator + Send, R: Send>(
    comms: Vec<C>,
    lens: &[usize],
    rank: impl Fn(C, &[usize], usize) -> R + Sync,
) -> Vec<R> {
    std::thread::scope(|s| {
        let handles: Vec<_> = comms
            .into_iter()
            .enumerate()
            .map(|(r, c)| {
                let rank = &rank;
                s.spawn(move || rank(c, lens, r))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn shard_of<T: Copy>(host: &[T], lens: &[usize], r: usize) -> Vec<T> {
    let at: usize = lens[..r].iter().sum();
    host[at..at + lens[r]].to_vec()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn simulated_ranks_give_one_gpus_results() {
    let layouts: [&[usize]; 6] = [
        &[100_000],
        &[50_000, 50_000],
        &[8192, 0, 1, 100_000 - 8193],
        &[3, 70_000, 29_997],
        &[0, 0, 100_000, 0, 0],
        &[12_345, 23_456, 34_567, 29_632],
    ];
    let (host, ints) = input(100_000, 7);
    let want = one_gpu(&host, &ints);
    let gpu = Gpu::new().unwrap();
    for lens in layouts {
        let got = run_ranks(
            LocalCommunicator::group_on_one_gpu(lens.len()),
            lens,
            |c, lens, r| {
                let mut sharded = ShardedReduce::new(&gpu, c).unwrap();
                let x = DeviceBuffer::from_slice(&shard_of(&host, lens, r)).unwrap();
                let i = DeviceBuffer::from_slice(&shard_of(&ints, lens, r)).unwrap();
                on_rank(&mut sharded, &x, &i).unwrap()
            },
        );
        for (r, g) in got.iter().enumerate() {
            compare(g, &want, &format!("shards {lens:?}, rank {r}"));
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn per_row_top_k_over_column_shards_gives_one_gpus_rows() {
    // 64 rows of 3000 bf16 logits, split by columns over three ranks; k = 50, and k = 1024 (more than a
    // row holds: padded rows).
    let (rows, cols) = (64usize, 3000usize);
    let (x, _) = input(rows * cols, 11);
    let host: Vec<BF16> = x
        .iter()
        .map(|&v| BF16(half::bf16::from_f32(v * 3.0)))
        .collect();
    let splits = [0usize, 1200, 1201, 3000];
    let gpu = Gpu::new().unwrap();
    for k in [1u64, 50, 1024] {
        let mut topk = DeviceTopK::new().unwrap();
        let whole = DeviceBuffer::from_slice(&host).unwrap();
        let n = rows * k as usize;
        let mut values = DeviceBuffer::from_slice(&vec![BF16(half::bf16::ZERO); n]).unwrap();
        let mut indices = DeviceBuffer::from_slice(&vec![0u64; n]).unwrap();
        topk.segmented_max_k(
            &whole,
            Segments::fixed(rows, cols),
            k,
            &mut values,
            &mut indices,
        )
        .unwrap();
        let (mut v, mut ix) = (vec![BF16(half::bf16::ZERO); n], vec![0u64; n]);
        values.copy_to(&mut v[..]).unwrap();
        indices.copy_to(&mut ix[..]).unwrap();
        let want: Vec<(u64, u16)> = ix
            .into_iter()
            .zip(v.iter().map(|v| v.0.to_bits()))
            .collect();

        let lens: Vec<usize> = splits.windows(2).map(|w| w[1] - w[0]).collect();
        let got = run_ranks(
            LocalCommunicator::group_on_one_gpu(3),
            &lens,
            |c, lens, r| {
                let mut sharded = ShardedReduce::new(&gpu, c).unwrap();
                let width = lens[r];
                let at: usize = lens[..r].iter().sum();
                let mine: Vec<BF16> = (0..rows)
                    .flat_map(|row| host[row * cols + at..row * cols + at + width].to_vec())
                    .collect();
                let shard = DeviceBuffer::from_slice(&mine).unwrap();
                sharded
                    .row_max_k(&shard, Segments::fixed(rows, width), k)
                    .unwrap()
            },
        );
        for (r, g) in got.into_iter().enumerate() {
            let g: Vec<(u64, u16)> = g.iter().map(|e| (e.index, e.value.0.to_bits())).collect();
            assert_eq!(g, want, "k = {k}, rank {r}");
        }
    }
}

/// That every rank's result is an `InvalidArgument` mentioning `needle`.
fn every_rank_invalid<T: std::fmt::Debug>(got: Vec<reduce_host::Result<T>>, needle: &str) {
    for g in got {
        assert!(
            matches!(&g, Err(Error::InvalidArgument(m)) if m.contains(needle)),
            "{g:?}"
        );
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn disagreeing_ranks_shared_gpus_and_failed_parts_are_errors_on_every_rank() {
    let gpu = Gpu::new().unwrap();
    // A real group's ranks must be on distinct GPUs.
    let got = run_ranks(LocalCommunicator::group(2), &[4, 4], |c, _, _| {
        let mut sharded = ShardedReduce::new(&gpu, c).unwrap();
        sharded.sum(&DeviceBuffer::from_slice(&[1.0f32; 4]).unwrap())
    });
    every_rank_invalid(got, "same GPU");
    // Different element types.
    let got = run_ranks(
        LocalCommunicator::group_on_one_gpu(2),
        &[4, 4],
        |c, _, r| {
            let mut sharded = ShardedReduce::new(&gpu, c).unwrap();
            if r == 0 {
                sharded
                    .argmax(&DeviceBuffer::from_slice(&[1.0f32; 4]).unwrap())
                    .map(|_| ())
            } else {
                sharded
                    .argmax(&DeviceBuffer::from_slice(&[1.0f64; 4]).unwrap())
                    .map(|_| ())
            }
        },
    );
    every_rank_invalid(got, "f64");
    // k beyond all shards together, and k unequal between ranks.
    let got = run_ranks(
        LocalCommunicator::group_on_one_gpu(2),
        &[4, 4],
        |c, _, r| {
            let mut sharded = ShardedReduce::new(&gpu, c).unwrap();
            let x = DeviceBuffer::from_slice(&[1.0f32; 4]).unwrap();
            let too_many = sharded.max_k(&x, 9).map(|_| ());
            let unequal = sharded.max_k(&x, 2 + r as u64).map(|_| ());
            (too_many, unequal)
        },
    );
    for (too_many, unequal) in got {
        assert!(matches!(&too_many, Err(Error::InvalidArgument(m)) if m.contains("k = 9")));
        assert!(matches!(&unequal, Err(Error::InvalidArgument(m)) if m.contains("parameters")));
    }
    // A rank whose view is bad: its own error, the others a collective error, and no hang; the handles
    // work afterwards.
    let got = run_ranks(
        LocalCommunicator::group_on_one_gpu(3),
        &[4, 4, 4],
        |c, _, r| {
            let mut sharded = ShardedReduce::new(&gpu, c).unwrap();
            let x = DeviceBuffer::from_slice(&[r as f32; 4]).unwrap();
            // SAFETY (a lie the check must catch): an address nothing maps.
            let bogus = unsafe { DeviceView::<f32>::from_raw_parts(0x1000, 4) };
            let view = if r == 1 { bogus } else { DeviceView::from(&x) };
            let mut failed = Vec::new();
            sharded.set_determinism(Determinism::GpuToGpu);
            failed.push(sharded.sum(view).map(|_| ()));
            failed.push(sharded.stats(view).map(|_| ()));
            failed.push(sharded.max_k(view, 3).map(|_| ()));
            let after = sharded.argmax(&x).unwrap().unwrap();
            (failed, after.index)
        },
    );
    for (r, (failed, after)) in got.into_iter().enumerate() {
        for f in failed {
            match r {
                1 => assert!(matches!(&f, Err(Error::InvalidArgument(_))), "{f:?}"),
                _ => assert!(
                    matches!(&f, Err(Error::Collective(m)) if m.contains("rank 1")),
                    "{f:?}"
                ),
            }
        }
        assert_eq!(after, 8, "the last rank's first element is the greatest");
    }
}

#[cfg(feature = "nccl")]
mod nccl {
    use super::*;
    use reduce_host::sharded::NcclCommunicator;

    #[test]
    #[ignore = "needs an NVIDIA GPU and libnccl.so: run with --include-ignored --features nccl on a GPU machine"]
    fn one_nccl_rank_gives_one_gpus_results() {
        let gpu = Gpu::new().unwrap();
        let (host, ints) = input(100_000, 5);
        let want = one_gpu(&host, &ints);
        let comm = NcclCommunicator::group(std::slice::from_ref(&gpu))
            .unwrap()
            .pop()
            .unwrap();
        let mut sharded = ShardedReduce::new(&gpu, comm).unwrap();
        let x = DeviceBuffer::from_slice(&host).unwrap();
        let i = DeviceBuffer::from_slice(&ints).unwrap();
        for round in 0..3 {
            compare(
                &on_rank(&mut sharded, &x, &i).unwrap(),
                &want,
                &format!("round {round}"),
            );
        }
        // Two ranks on one GPU are refused before NCCL sees them.
        let twice = NcclCommunicator::group(&[gpu.clone(), gpu.clone()]);
        assert!(matches!(twice, Err(Error::InvalidArgument(m)) if m.contains("same device")));
    }

    #[test]
    #[ignore = "needs two NVIDIA GPUs and libnccl.so to check anything: run with --include-ignored --features nccl"]
    fn two_nccl_ranks_give_one_gpus_results() {
        let gpu0 = Gpu::with_device(0).unwrap();
        let count = cust::device::Device::num_devices().unwrap_or(0);
        if count < 2 {
            eprintln!(
                "two_nccl_ranks_give_one_gpus_results: skipped, it needs two GPUs and this machine has {count}"
            );
            return;
        }
        let gpus = [gpu0, Gpu::with_device(1).unwrap()];
        let (host, ints) = input(1 << 22, 9);
        let want = one_gpu(&host, &ints);
        for lens in [
            [1usize << 21, 1 << 21],
            [12_345, (1 << 22) - 12_345],
            [0, 1 << 22],
        ] {
            let comms = NcclCommunicator::group(&gpus).unwrap();
            let got = run_ranks(comms, &lens, |c, lens, r| {
                let gpu = &gpus[r];
                let mut sharded = ShardedReduce::new(gpu, c).unwrap();
                // The handle left this thread (which had no context) in `gpu`'s context: the buffers
                // below are on that device.
                let x = DeviceBuffer::from_slice(&shard_of(&host, lens, r)).unwrap();
                let i = DeviceBuffer::from_slice(&shard_of(&ints, lens, r)).unwrap();
                on_rank(&mut sharded, &x, &i).unwrap()
            });
            for (r, g) in got.iter().enumerate() {
                compare(g, &want, &format!("NCCL shards {lens:?}, rank {r}"));
            }
        }
    }
}
