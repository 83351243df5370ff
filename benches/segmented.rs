//! `cargo bench --bench segmented`: `DeviceSegmentedReduce` sum, argmax and softmax statistics over f32 at
//! the shapes of issue 11 (2^22 × 4, 2^20 × 8, 2^16 × 1024, 4096 × 65536, 16 × 2^24, 1 × 2^28) and ragged
//! offsets (16384 segments, lengths uniform in 0 … 10,000), against CUB's `DeviceSegmentedReduce`
//! (`benches/cub/cub_segmented.cu`, compiled with `nvcc`; set `CCCL_INCLUDE` to CCCL ≥ 3.2 headers, e.g. the
//! `cuda-cccl` wheel's `cuda/cccl/headers/include`, for the fixed-size-segment API) and torch
//! `sum/argmax(dim=1)` in the same run, and the per-segment reproducible sum (`Determinism::GpuToGpu`) beside
//! the default sum. Reports median device µs, the speed-up over the faster comparator,
//! and the share of the 4.47 TB/s read ceiling. Every result is checked on a few segments against the CPU;
//! a wrong one fails the bench. Writes `segmented.md` to `$OUT` (if set) or `target/bench`.
#[allow(dead_code)] // each bench uses part of the harness
mod support;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use reduce_host::{
    Determinism, DeviceSegmentedReduce, DeviceView, Gpu, Indexed, PlanOverrides, Segments,
    SoftmaxStats, cpu,
};
use support::cub::Cub;
use support::timing;

use support::BoxError;

/// The read ceiling the issue measures against, bytes per µs (4.47 TB/s).
const CEILING_BYTES_PER_US: f64 = 4.47e6;

/// Rotated copies of an input total at least this much, so the timed reads come from HBM (3 × the H200's
/// 60 MB L2).
const ROTATION_BYTES: usize = 180 << 20;

/// Segments of the ragged case.
const RAGGED_COUNT: usize = 16384;

const CUB_SOURCE: &str = include_str!("cub/cub_segmented.cu");

/// One input shape.
#[derive(Clone)]
enum Shape {
    Rows { rows: usize, cols: usize },
    Ragged { offsets: Vec<u64> },
}

impl Shape {
    /// The comparators' spelling: `<rows>x<cols>` or `ragged<count>`.
    fn arg(&self) -> String {
        match self {
            Shape::Rows { rows, cols } => format!("{rows}x{cols}"),
            Shape::Ragged { offsets } => format!("ragged{}", offsets.len() - 1),
        }
    }

    fn label(&self) -> String {
        let pow = |v: usize| {
            if v.is_power_of_two() && v >= 1 << 14 {
                format!("2^{}", v.trailing_zeros())
            } else {
                v.to_string()
            }
        };
        match self {
            Shape::Rows { rows, cols } => format!("{} × {}", pow(*rows), pow(*cols)),
            Shape::Ragged { offsets } => format!("ragged {} × U(0, 10^4)", offsets.len() - 1),
        }
    }

    fn n(&self) -> usize {
        match self {
            Shape::Rows { rows, cols } => rows * cols,
            Shape::Ragged { offsets } => *offsets.last().unwrap() as usize,
        }
    }

    fn count(&self) -> usize {
        match self {
            Shape::Rows { rows, .. } => *rows,
            Shape::Ragged { offsets } => offsets.len() - 1,
        }
    }

    fn ranges(&self) -> Vec<std::ops::Range<usize>> {
        match self {
            Shape::Rows { rows, cols } => cpu::row_ranges(*rows, *cols, *cols),
            Shape::Ragged { offsets } => cpu::offset_ranges(offsets),
        }
    }
}

/// The ragged lengths the CUB and torch comparators build too: `splitmix64(i) % 10001`.
fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn shapes() -> Vec<Shape> {
    let mut v: Vec<Shape> = [
        (1 << 22, 4),
        (1 << 20, 8),
        (1 << 16, 1024),
        (4096, 65536),
        (16, 1 << 24),
        (1, 1 << 28),
    ]
    .into_iter()
    .map(|(rows, cols)| Shape::Rows { rows, cols })
    .collect();
    let mut offsets = vec![0u64];
    for i in 0..RAGGED_COUNT as u64 {
        offsets.push(offsets.last().unwrap() + splitmix64(i) % 10001);
    }
    v.push(Shape::Ragged { offsets });
    v
}

struct Row {
    shape: String,
    op: &'static str,
    us: f64,
    bytes: f64,
    cub_us: Option<f64>,
    torch_us: Option<f64>,
    /// This library's sum on the same shape (argmax and softmax rows): the "within 10%" goals.
    sum_us: Option<f64>,
}

fn main() -> ExitCode {
    support::main("segmented bench", run)
}

fn run() -> Result<bool, BoxError> {
    let gpu = support::open_gpu()?;
    let stream = gpu.stream()?;
    let mut seg = DeviceSegmentedReduce::with_gpu(&gpu)?;
    let shapes = shapes();
    let args: Vec<String> = shapes.iter().map(Shape::arg).collect();

    // The comparators, all shapes at once.
    let mut notes = Vec::new();
    let cub = Cub::compile(gpu.info().cc(), "cub_segmented", CUB_SOURCE);
    if let Cub::Missing(why) = &cub {
        notes.push(format!("CUB column missing: {why}"));
    }
    let cub_results = |op: &str| -> HashMap<String, f64> {
        let mut a = vec![op.to_owned()];
        a.extend(args.iter().cloned());
        cub.lines(&a)
            .into_iter()
            .filter(|f| f.len() >= 6 && f[5] == "PASS")
            .filter_map(|f| Some((f[2].clone(), f[3].parse().ok()?)))
            .collect()
    };
    let cub_api: Vec<String> = cub
        .lines(&["sum".to_owned(), args[0].clone()])
        .into_iter()
        .filter_map(|f| f.get(6).cloned())
        .collect();
    if let Some(api) = cub_api.first() {
        notes.push(format!(
            "CUB matrix shapes use the {api} API ({})",
            if api == "fixed" {
                "CCCL ≥ 3.2 fixed-size segments"
            } else {
                "offsets: set CCCL_INCLUDE to CCCL ≥ 3.2 headers for the fixed-size API"
            }
        ));
    }
    let cub_sum = cub_results("sum");
    let cub_argmax = cub_results("argmax");
    let mut torch = |op: &str, which: &[String]| match support::torch::run_shapes(op, which) {
        Ok(m) => m,
        Err(why) => {
            notes.push(format!("torch column missing for {op}: {why}"));
            HashMap::new()
        }
    };
    let matrix: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with("ragged"))
        .cloned()
        .collect();
    let ragged: Vec<String> = args
        .iter()
        .filter(|a| a.starts_with("ragged"))
        .cloned()
        .collect();
    let torch_sum: HashMap<String, f64> = torch("rows_sum", &matrix)
        .into_iter()
        .chain(torch("ragged_sum", &ragged))
        .collect();
    let torch_argmax = torch("rows_argmax", &matrix);

    let mut rows = Vec::new();
    let mut failures = Vec::new();
    let mut rng = SmallRng::seed_from_u64(11);
    for shape in &shapes {
        let (n, count) = (shape.n(), shape.count());
        let bytes = n as f64 * 4.0;
        let copies = ROTATION_BYTES.div_ceil(n * 4).clamp(1, 64);
        let host: Vec<f32> = (0..n * copies)
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect();
        let input = DeviceBuffer::from_slice(&host)?;
        let window = |k: usize| DeviceView::from(&input).slice(k * n..(k + 1) * n);
        let offsets = match shape {
            Shape::Ragged { offsets } => Some(DeviceBuffer::from_slice(offsets)?),
            Shape::Rows { .. } => None,
        };
        let segments = match (shape, &offsets) {
            (Shape::Rows { rows, cols }, _) => Segments::fixed(*rows, *cols),
            (Shape::Ragged { .. }, Some(o)) => {
                let o = DeviceView::from(o);
                Segments::offsets(o.slice(..count), o.slice(1..))
            }
            _ => unreachable!("ragged shapes have offsets"),
        };
        let mut sums = DeviceBuffer::from_slice(&vec![0.0f32; count])?;
        let mut args = DeviceBuffer::from_slice(&vec![Indexed::<f32>::default(); count])?;
        let mut stats = DeviceBuffer::from_slice(&vec![SoftmaxStats::default(); count])?;

        // The three operations' median times under the handle's current plan.
        let mut time_ops = |seg: &mut DeviceSegmentedReduce| -> Result<[f64; 3], BoxError> {
            // SAFETY (every enqueue): the buffers outlive the timing, which synchronizes before it returns.
            Ok([
                timing::time_us(&gpu, &stream, n as u64, copies, &mut |k, s| {
                    unsafe { seg.sum_async(window(k), segments, &mut sums, s)? };
                    Ok(())
                })?,
                timing::time_us(&gpu, &stream, n as u64, copies, &mut |k, s| {
                    unsafe { seg.argmax_async(window(k), segments, &mut args, s)? };
                    Ok(())
                })?,
                timing::time_us(&gpu, &stream, n as u64, copies, &mut |k, s| {
                    unsafe { seg.softmax_stats_async(window(k), segments, &mut stats, s)? };
                    Ok(())
                })?,
            ])
        };
        let [sum_us, argmax_us, softmax_us] = time_ops(&mut seg)?;

        // Exploration, printed only: every shape timed under each plan override listed in
        // SEGMENTED_EXPLORE, `;`-separated lists of `len=…` (offsets planned as this length), `threads=…`
        // (tile and rows block size), `rows=0|1` (the rows kernel), `bps=…` (tile blocks per SM), `block=…`
        // (block kernel size of argmax).
        for config in std::env::var("SEGMENTED_EXPLORE")
            .unwrap_or_default()
            .split(';')
        {
            let mut o = PlanOverrides::default();
            for kv in config.split(',').filter(|kv| !kv.trim().is_empty()) {
                let (k, v) = kv.split_once('=').ok_or("SEGMENTED_EXPLORE: key=value")?;
                let v: u64 = v.trim().parse()?;
                match k.trim() {
                    "len" => o.offsets_len = Some(v),
                    "threads" => o.tile_threads = Some(v as u32),
                    "rows" => o.rows_kernel = Some(v != 0),
                    "bps" => o.tile_blocks_per_sm = Some(v as u32),
                    "block" => o.block_threads = Some(v as u32),
                    other => return Err(format!("SEGMENTED_EXPLORE: unknown key {other}").into()),
                }
            }
            if config.trim().is_empty() {
                continue;
            }
            seg.set_plan_overrides(o)?;
            let [s_us, a_us, x_us] = time_ops(&mut seg)?;
            eprintln!(
                "explore {} [{config}]: sum {s_us:.1} µs, argmax {a_us:.1} µs, softmax_stats {x_us:.1} µs",
                shape.label()
            );
            seg.set_plan_overrides(PlanOverrides::default())?;
        }

        // The reproducible sum (Determinism::GpuToGpu): a warp per row of at most 8192 elements, a block per
        // segment otherwise.
        seg.set_determinism(Determinism::GpuToGpu);
        // SAFETY (the enqueue): as in `time_ops`.
        let repro_us = timing::time_us(&gpu, &stream, n as u64, copies, &mut |k, s| {
            unsafe { seg.sum_async(window(k), segments, &mut sums, s)? };
            Ok(())
        })?;
        seg.sum(window(0), segments, &mut sums)?;
        let mut h_repro = vec![0.0f32; count];
        sums.copy_to(&mut h_repro[..])?;
        seg.set_determinism(Determinism::RunToRun);

        // Check copy 0 on a few segments.
        seg.sum(window(0), segments, &mut sums)?;
        seg.argmax(window(0), segments, &mut args)?;
        seg.softmax_stats(window(0), segments, &mut stats)?;
        let (mut h_sums, mut h_args, mut h_stats) = (
            vec![0.0f32; count],
            vec![Indexed::<f32>::default(); count],
            vec![SoftmaxStats::default(); count],
        );
        sums.copy_to(&mut h_sums[..])?;
        args.copy_to(&mut h_args[..])?;
        stats.copy_to(&mut h_stats[..])?;
        let ranges = shape.ranges();
        for s in [0, count / 3, count / 2, count - 1] {
            let x = &host[ranges[s].clone()];
            let (want, abs) = (cpu::sum_f64(x), cpu::abs_sum_f64(x));
            if (h_sums[s] as f64 - want).abs() > 1e-5 * abs + 1e-6 {
                failures.push(format!(
                    "{} sum segment {s}: {} vs {want}",
                    shape.label(),
                    h_sums[s]
                ));
            }
            let want = cpu::sum_reproducible(x);
            if h_repro[s].to_bits() != want.to_bits() {
                failures.push(format!(
                    "{} reproducible sum segment {s}: {} vs the CPU's {want}",
                    shape.label(),
                    h_repro[s]
                ));
            }
            let want = cpu::argmax(x).map_or(u64::MAX, |(i, _)| i as u64);
            if h_args[s].index != want {
                failures.push(format!(
                    "{} argmax segment {s}: {} vs {want}",
                    shape.label(),
                    h_args[s].index
                ));
            }
            let (m, e) = cpu::softmax_stats(x);
            let g = h_stats[s];
            if g.max as f64 != m || (g.sum_exp as f64 - e).abs() > 1e-5 * e {
                failures.push(format!(
                    "{} softmax segment {s}: {g:?} vs ({m}, {e})",
                    shape.label()
                ));
            }
        }

        let key = shape.arg();
        rows.push(Row {
            shape: shape.label(),
            op: "sum",
            us: sum_us,
            bytes,
            cub_us: cub_sum.get(&key).copied(),
            torch_us: torch_sum.get(&key).copied(),
            sum_us: None,
        });
        rows.push(Row {
            shape: shape.label(),
            op: "argmax",
            us: argmax_us,
            bytes,
            cub_us: cub_argmax.get(&key).copied(),
            torch_us: torch_argmax.get(&key).copied(),
            sum_us: Some(sum_us),
        });
        rows.push(Row {
            shape: shape.label(),
            op: "sum, GpuToGpu",
            us: repro_us,
            bytes,
            cub_us: None,
            torch_us: None,
            sum_us: Some(sum_us),
        });
        rows.push(Row {
            shape: shape.label(),
            op: "softmax_stats",
            us: softmax_us,
            bytes,
            cub_us: None,
            torch_us: None,
            sum_us: Some(sum_us),
        });
        eprintln!(
            "{}: sum {sum_us:.1} µs, argmax {argmax_us:.1} µs, softmax_stats {softmax_us:.1} µs, reproducible \
             sum {repro_us:.1} µs",
            shape.label()
        );
    }

    let md = table(&gpu, &rows, &notes, &failures);
    print!("{md}");
    let dir = std::env::var_os("OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target/bench".into());
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("segmented.md"), &md)?;
    Ok(failures.is_empty())
}

/// The markdown report.
fn table(gpu: &Gpu, rows: &[Row], notes: &[String], failures: &[String]) -> String {
    let mut md = String::new();
    let info = gpu.info();
    let _ = writeln!(
        md,
        "### Segmented reductions, f32 ({}, sm_{}{})\n",
        info.name, info.compute_capability.0, info.compute_capability.1
    );
    let _ = writeln!(
        md,
        "Median device µs; × best = the faster of CUB and torch divided by ours (> 1: we are faster); \
         ceiling = input bytes at 4.47 TB/s; vs sum = this op's time over our sum's on the same shape.\n"
    );
    let _ = writeln!(
        md,
        "| shape | op | ours µs | CUB µs | torch µs | × best | % of read ceiling | vs own sum |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    let opt = |v: Option<f64>| v.map_or("—".to_owned(), |v| format!("{v:.1}"));
    for r in rows {
        let best = match (r.cub_us, r.torch_us) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {:.1} | {} | {} | {} | {:.0}% | {} |",
            r.shape,
            r.op,
            r.us,
            opt(r.cub_us),
            opt(r.torch_us),
            best.map_or("—".to_owned(), |b| format!("{:.2}×", b / r.us)),
            100.0 * r.bytes / CEILING_BYTES_PER_US / r.us,
            r.sum_us.map_or("—".to_owned(), |s| format!(
                "{:+.0}%",
                100.0 * (r.us / s - 1.0)
            )),
        );
    }
    for n in notes {
        let _ = writeln!(md, "\n- {n}");
    }
    for f in failures {
        let _ = writeln!(md, "\n- **WRONG RESULT:** {f}");
    }
    md
}
