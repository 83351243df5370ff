//! `cargo bench --bench row_topk`: per-row top-k (`DeviceTopK::segmented_max_k`, values and indices,
//! sorted) of N(0, 1) logits in f32 and bf16, on the top-k issue's LLM shapes (64 × 131072, 1024 × 32768,
//! 4096 × 151936) at k = 1, 64 (50 for the 152k vocabulary) and 1024, beside the read ceiling (the bare
//! float4 read kernel of `benches/cub/cub_bench.cu` on the same bytes), CUB's `DeviceBatchedTopK` for f32
//! (`cub_bench batched_topk_c<cols>_k<k>`, CCCL ≥ 3.6 headers through `CCCL_INCLUDE`) and `torch.topk(x, k, dim=1)`
//! (`torch_bench.py rowtopk_<dtype>`, shapes `<rows>x<cols>:<k>`). Inputs are cycled over copies that
//! together exceed three L2 caches, as torch's are. Rows 0, 1 and the last are checked on the host
//! against a CPU reference. Writes `row_topk.md` to `$OUT` (if set) or `target/bench`.
#[allow(dead_code)] // each bench uses part of the harness
mod support;

use std::fmt::Write as _;
use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer};
use half::bf16;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use reduce_host::{BF16, DeviceTopK, Segments, TopKElement};
use support::BoxError;
use support::cub::Cub;
use support::timing;

/// (rows, cols, the middle k).
const SHAPES: [(usize, usize, u64); 3] =
    [(64, 131_072, 64), (1024, 32_768, 64), (4096, 151_936, 50)];

fn main() -> ExitCode {
    support::main("row_topk bench", run)
}

/// `n` N(0, 1) values.
fn normal(n: usize, seed: u64) -> Vec<f32> {
    let mut r = SmallRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let (u, v): (f32, f32) = (r.random_range(f32::EPSILON..1.0), r.random());
            (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
        })
        .collect()
}

/// An element type of the bench: its name and its conversion from f32.
trait Logit: TopKElement + cust::memory::DeviceCopy + Default {
    const DTYPE: &'static str;
    fn from_f32(x: f32) -> Self;
    fn to_f32(self) -> f32;
}

impl Logit for f32 {
    const DTYPE: &'static str = "f32";
    fn from_f32(x: f32) -> Self {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl Logit for BF16 {
    const DTYPE: &'static str = "bf16";
    fn from_f32(x: f32) -> Self {
        BF16::from(bf16::from_f32(x))
    }
    fn to_f32(self) -> f32 {
        BF16::to_f32(self)
    }
}

/// Whether `indices` are the `k` best of `row` (greater first, the smaller index among equals).
fn row_correct<T: Logit>(row: &[T], indices: &[u64]) -> bool {
    let mut order: Vec<u64> = (0..row.len() as u64).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (row[a as usize].to_f32(), row[b as usize].to_f32());
        y.total_cmp(&x).then(a.cmp(&b))
    });
    order[..indices.len()] == *indices
}

/// Times and checks one element type over every shape and k; appends rows to `table`.
fn bench_type<T: Logit>(
    gpu: &reduce_host::Gpu,
    topk: &mut DeviceTopK,
    cub: &Cub,
    table: &mut String,
    failures: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Result<(), BoxError> {
    let stream = gpu.stream()?;
    let shapes: Vec<String> = SHAPES
        .iter()
        .flat_map(|&(r, c, mid)| [1, mid, 1024].map(|k| format!("{r}x{c}:{k}")))
        .collect();
    let torch = support::torch::run_shapes(&format!("rowtopk_{}", T::DTYPE), &shapes)
        .unwrap_or_else(|why| {
            notes.push(format!("torch {}: {why}", T::DTYPE));
            Default::default()
        });
    let bytes = |r: usize, c: usize| (r * c * size_of::<T>()) as u64;
    // The read ceiling on the same bytes, as f32 elements.
    let sizes: Vec<u64> = SHAPES.iter().map(|&(r, c, _)| bytes(r, c) / 4).collect();
    let ceiling = cub.run("read_f32", &sizes);
    for (s, &(rows, cols, mid)) in SHAPES.iter().enumerate() {
        let n = rows * cols;
        let host: Vec<T> = normal(n, 40 + s as u64)
            .into_iter()
            .map(T::from_f32)
            .collect();
        let copies = (150usize << 20).div_ceil(n * size_of::<T>()).clamp(1, 8);
        let xs: Vec<DeviceBuffer<T>> = (0..copies)
            .map(|_| DeviceBuffer::from_slice(&host))
            .collect::<Result<_, _>>()?;
        let read = ceiling
            .get(&(bytes(rows, cols) / 4))
            .filter(|c| c.pass)
            .map(|c| c.us);
        for k in [1, mid, 1024] {
            let mut vals = DeviceBuffer::from_slice(&vec![T::default(); rows * k as usize])?;
            let mut idx = DeviceBuffer::from_slice(&vec![0u64; rows * k as usize])?;
            let segments = Segments::rows(rows, cols, cols);
            let us = timing::time_us(gpu, &stream, n as u64, copies, &mut |c, st| {
                // SAFETY: the buffers live until the timing function has synchronized.
                unsafe {
                    topk.segmented_max_k_async(&xs[c], segments, k, &mut vals, &mut idx, st)?
                };
                Ok(())
            })?;
            let mut got = vec![0u64; rows * k as usize];
            idx.copy_to(&mut got[..])?;
            for r in [0, 1, rows - 1] {
                let row = &host[r * cols..(r + 1) * cols];
                if !row_correct(row, &got[r * k as usize..(r + 1) * k as usize]) {
                    failures.push(format!("{} {rows}x{cols} k {k}: row {r} wrong", T::DTYPE));
                }
            }
            let t = torch.get(&format!("{rows}x{cols}:{k}")).copied();
            // CUB's DeviceBatchedTopK on its own N(0, 1) draw of the shape (f32 only).
            let cub_us = (T::DTYPE == "f32")
                .then(|| cub.run(&format!("batched_topk_c{cols}_k{k}"), &[n as u64]))
                .and_then(|r| r.get(&(n as u64)).filter(|c| c.pass).map(|c| c.us));
            let reads = read.map_or("—".into(), |c| format!("{:.2}", us / c));
            let ((cc, c_ratio), (tt, ratio)) =
                (support::versus(cub_us, us, 1), support::versus(t, us, 1));
            let gbs = bytes(rows, cols) as f64 / us / 1e3;
            writeln!(
                table,
                "| {} | {rows} × {cols} | {k} | {us:.1} | {gbs:.0} | {reads} | {cc} | {c_ratio} | {tt} | \
                 {ratio} |",
                T::DTYPE
            )?;
            println!(
                "{} {rows}x{cols} k {k}: {us:.1} µs (CUB {cc}, torch {tt})",
                T::DTYPE
            );
        }
        if let Some(c) = read {
            writeln!(
                table,
                "| {} | {rows} × {cols} | read ceiling | {c:.1} | {:.0} | 1.00 | | | | |",
                T::DTYPE,
                bytes(rows, cols) as f64 / c / 1e3
            )?;
        }
    }
    Ok(())
}

fn run() -> Result<bool, BoxError> {
    let gpu = support::open_gpu()?;
    let mut topk = DeviceTopK::with_gpu(&gpu)?;
    let cub = Cub::build(gpu.info().cc());
    let (mut failures, mut notes) = (Vec::new(), Vec::new());
    let mut table = String::from(
        "| type | rows × cols | k | ours µs | GB/s | reads (ours / ceiling) | CUB DeviceBatchedTopK µs | \
         CUB / ours | torch.topk µs | torch / ours |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    bench_type::<f32>(&gpu, &mut topk, &cub, &mut table, &mut failures, &mut notes)?;
    bench_type::<BF16>(&gpu, &mut topk, &cub, &mut table, &mut failures, &mut notes)?;
    let mut report = format!(
        "### Per-row top-k against the read ceiling and torch.topk\n\nGPU: {} (sm_{}). N(0, 1) logits; median \
         device µs of one `segmented_max_k_async` (values and indices, sorted); reads: our time over the bare \
         read kernel's on the same bytes; CUB `DeviceBatchedTopK::MaxPairs` (f32; gpu_to_gpu, smaller index \
         first, sorted: its closest mode to ours) on its own draw.\n\n{table}",
        gpu.info().name,
        gpu.info().cc()
    );
    for n in notes.iter().chain(&failures) {
        writeln!(report, "\n- {n}")?;
    }
    support::write_report("row_topk.md", &report)?;
    Ok(failures.is_empty())
}
