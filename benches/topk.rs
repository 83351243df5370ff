//! `cargo bench --bench topk`: device-wide top-k (`DeviceTopK::max_k`, values and indices, sorted) of f32 at
//! n = 2^24 and 2^28, k ∈ {1, 64, 1024, 65536}, on the distributions of the top-k issue, beside the read
//! ceiling (the bare float4 read kernel of `benches/cub/cub_bench.cu` on the same bytes), CUB's
//! `DeviceTopK::MaxPairs` (`cub_bench topk_<distribution>_k<k>`, CCCL ≥ 3.6 headers through `CCCL_INCLUDE`,
//! e.g. the `cuda-cccl` 1.2.1 wheel's `cuda/cccl/headers/include`) and `torch.topk`
//! (`torch_bench.py topk_<distribution>`, one process per distribution for every size and k, same
//! distributions drawn by torch, before our rows). Each result is checked on
//! the host: sorted by the rule, each value the input's at its index, and exactly k − 1 elements before the
//! last one. Writes `topk.md` to `$OUT` (if set) or `target/bench`. `--sizes a,b,…` replaces the sizes;
//! the select samples from `topk::SAMPLE_FROM` (2^24) on; `REDUCE_HOST_TOPK_SAMPLE=1` samples wherever
//! `topk::samples` holds, `REDUCE_HOST_TOPK_SAMPLE=0` never (the histogram path).
#[allow(dead_code)] // each bench uses part of the harness
mod support;

use std::cmp::Ordering;
use std::fmt::Write as _;
use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use reduce_host::DeviceTopK;
use support::BoxError;
use support::cub::Cub;
use support::timing;

const KS: [u64; 4] = [1, 64, 1024, 65_536];
const SIZES: [usize; 2] = [1 << 24, 1 << 28];
const DISTRIBUTIONS: [&str; 8] = [
    "uniform",
    "normal",
    "bits",
    "equal",
    "distinct16",
    "ascending",
    "descending",
    "nan1",
];

fn main() -> ExitCode {
    support::main("topk bench", run)
}

/// `n` values of `dist`.
fn values(dist: &str, n: usize, seed: u64) -> Vec<f32> {
    let mut r = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|i| match dist {
            "uniform" => r.random_range(0.0f32..1.0),
            "normal" => {
                let (u, v): (f64, f64) =
                    (r.random_range(f64::EPSILON..1.0), r.random_range(0.0..1.0));
                ((-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()) as f32
            }
            "bits" => f32::from_bits(r.random()),
            "equal" => 0.5,
            "distinct16" => r.random_range(0..16) as f32,
            "ascending" => i as f32,
            "descending" => (n - i) as f32,
            "nan1" if r.random_range(0..100) == 0 => f32::NAN,
            _ => r.random_range(0.0f32..1.0),
        })
        .collect()
}

/// `a` before `b` in `max_k`'s order: NaN first, greater first, then the smaller index.
fn order(x: &[f32], a: u64, b: u64) -> Ordering {
    let (u, v) = (x[a as usize], x[b as usize]);
    let by_value = match (u.is_nan(), v.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        _ => v.partial_cmp(&u).expect("numbers compare"),
    };
    by_value.then(a.cmp(&b))
}

/// Whether `indices`/`vals` are the k best of `x`.
fn correct(x: &[f32], indices: &[u64], vals: &[f32]) -> bool {
    let k = indices.len();
    let sorted = indices
        .windows(2)
        .all(|w| order(x, w[0], w[1]) == Ordering::Less);
    let values = indices
        .iter()
        .zip(vals)
        .all(|(&i, v)| (i as usize) < x.len() && x[i as usize].to_bits() == v.to_bits());
    let last = indices[k - 1];
    let before = (0..x.len() as u64)
        .filter(|&i| order(x, i, last) == Ordering::Less)
        .count();
    sorted && values && before == k - 1
}

fn run() -> Result<bool, BoxError> {
    let gpu = support::open_gpu()?;
    let stream = gpu.stream()?;
    let mut topk = DeviceTopK::with_gpu(&gpu)?;
    let cub = Cub::build(gpu.info().cc());
    let args: Vec<String> = std::env::args().collect();
    let sizes = support::sizes_arg(&args, &SIZES)?;
    let sizes_u64: Vec<u64> = sizes.iter().map(|&n| n as u64).collect();
    let ceiling = cub.run("read_f32", &sizes_u64);
    let mut notes = Vec::new();
    // torch.topk, one process per distribution (every size and k): starting torch per row would take
    // most of the bench's time.
    let shapes: Vec<String> = sizes
        .iter()
        .flat_map(|&n| KS.iter().map(move |&k| format!("{n}:{k}")))
        .collect();
    let torch_by_distribution: Vec<_> = DISTRIBUTIONS
        .iter()
        .map(|dist| {
            support::torch::run_shapes(&format!("topk_{dist}"), &shapes).unwrap_or_else(|why| {
                notes.push(format!("torch {dist}: {why}"));
                Default::default()
            })
        })
        .collect();
    // CUB `DeviceTopK::MaxPairs` (unordered and non-deterministic, its one mode in CCCL 3.6; needs
    // `CCCL_INCLUDE`), one process per distribution and k for both sizes.
    let cub_topk: Vec<Vec<_>> = DISTRIBUTIONS
        .iter()
        .map(|dist| {
            KS.iter()
                .map(|k| cub.run(&format!("topk_{dist}_k{k}"), &sizes_u64))
                .collect()
        })
        .collect();
    let mut failures = Vec::new();
    let mut table = String::from(
        "| n | distribution | k | ours µs | reads (ours / ceiling) | CUB DeviceTopK µs | CUB / ours | \
         torch.topk µs | torch / ours |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for &n in &sizes {
        let read = ceiling.get(&(n as u64)).filter(|c| c.pass).map(|c| c.us);
        if let Some(c) = read {
            writeln!(
                table,
                "| 2^{} | read ceiling | | {c:.1} | 1.00 | | |",
                n.trailing_zeros()
            )?;
        }
        for (d, dist) in DISTRIBUTIONS.iter().enumerate() {
            let host = values(dist, n, 11 + d as u64);
            let x = DeviceBuffer::from_slice(&host)?;
            let mut vals = DeviceBuffer::from_slice(&vec![0f32; KS[3] as usize])?;
            let mut idx = DeviceBuffer::from_slice(&vec![0u64; KS[3] as usize])?;
            for (j, &k) in KS.iter().enumerate() {
                let us = timing::time_us(&gpu, &stream, n as u64, 1, &mut |_, s| {
                    // SAFETY: the buffers live until the timing function has synchronized.
                    unsafe { topk.max_k_async(&x, k, &mut vals, &mut idx, s)? };
                    Ok(())
                })?;
                let mut got_i = vec![0u64; KS[3] as usize];
                let mut got_v = vec![0f32; KS[3] as usize];
                idx.copy_to(&mut got_i[..])?;
                vals.copy_to(&mut got_v[..])?;
                let (got_i, got_v) = (&got_i[..k as usize], &got_v[..k as usize]);
                if !correct(&host, got_i, got_v) {
                    failures.push(format!("n {n} {dist} k {k}: wrong result"));
                }
                let torch = torch_by_distribution[d].get(&format!("{n}:{k}")).copied();
                let reads = read.map_or("—".into(), |c| format!("{:.2}", us / c));
                let cub_us = cub_topk[d][j]
                    .get(&(n as u64))
                    .filter(|c| c.pass)
                    .map(|c| c.us);
                let ((c, c_ratio), (t, ratio)) = (
                    support::versus(cub_us, us, 2),
                    support::versus(torch, us, 2),
                );
                writeln!(
                    table,
                    "| 2^{} | {dist} | {k} | {us:.1} | {reads} | {c} | {c_ratio} | {t} | {ratio} |",
                    n.trailing_zeros()
                )?;
                println!(
                    "n 2^{} {dist} k {k}: {us:.1} µs (CUB {c}, torch {t})",
                    n.trailing_zeros()
                );
            }
        }
    }
    let path = match std::env::var("REDUCE_HOST_TOPK_SAMPLE").as_deref() {
        Ok("0") => "Without the sample (`REDUCE_HOST_TOPK_SAMPLE=0`): the histogram path.",
        Ok(v) if !v.is_empty() => {
            "With the sample wherever `topk::samples` holds (`REDUCE_HOST_TOPK_SAMPLE` set)."
        }
        _ => {
            "The default path: with the sample from `topk::SAMPLE_FROM` (2^24) on, where `topk::samples` holds."
        }
    };
    let mut report = format!(
        "### Device-wide top-k against the read ceiling and torch.topk\n\nGPU: {} (sm_{}). Median device µs of \
         one `max_k_async` (values and indices, sorted); reads: our time over the bare read kernel's on the \
         same bytes; CUB `DeviceTopK::MaxPairs` (unordered, non-deterministic: its one mode) on its own \
         draw of the same distribution. {path}\n\n{table}",
        gpu.info().name,
        gpu.info().cc()
    );
    for n in notes.iter().chain(&failures) {
        writeln!(report, "\n- {n}")?;
    }
    support::write_report("topk.md", &report)?;
    Ok(failures.is_empty())
}
