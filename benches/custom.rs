//! `cargo bench --bench custom`: users' own operators, the `custom-op` example's `AbsMax`, `SumSquares` (the
//! L2 norm) and `Welford` (mean and variance, f64 state), built by `reduce-builder` and run through
//! `reduce_with_async` into an `OpAcc` buffer, at 2^28 f32, beside the built-in sum and max (the same shape:
//! one read, one f32 accumulator), the read ceiling (the bare float4 read kernel of `benches/reduce.rs`, timed
//! the same way), CUB (`absmax_f32`, `sum_squares_f32`, `welford_f32` of `benches/cub/cub_bench.cu`:
//! `TransformReduce` of the same map and combine, compiled with `nvcc` at run time) and torch
//! (`x.abs().max()`, `(x * x).sum()`, `torch.var_mean(x)`). Then `Welford` per row of a 4096 × 65536 bf16
//! matrix and of an f32 one (`DeviceSegmentedReduce::reduce_with_async`, rows layout), beside the built-in
//! per-row sum of the same matrix, the read ceiling of the same bytes and torch `var_mean(dim=1)`.
//!
//! Reports median device µs (events around each call, a spin kernel ahead, rotating input copies: the
//! harness of the other benches), CUB time / ours, torch time / ours, the share of the read ceiling
//! (ceiling time / ours) and "vs built-in" (the built-in reduction's time / ours). Every result of ours is
//! checked against an f64 CPU reference, the comparator's against its own; a wrong one fails the bench.
//! Writes `custom.md` to `$OUT` (if set) or `target/bench`. Without a GPU it says so on one line and exits 0.
//!
//! Flags: `--sizes a,b,…` replaces the device-wide size (2^28); `--rows RxC` the segmented shape
//! (4096x65536). Without `nvcc` the CUB and read-ceiling columns are missing, without a CUDA build of torch
//! the torch column; each says why.
#[allow(dead_code)] // each bench uses part of the harness
mod support;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;

use cust::memory::DeviceCopy;
use cust::memory::{CopyDestination, DeviceBuffer};
use cust::stream::Stream;
use custom_op::{AbsMaxF32, KERNELS, NormF32, WelfordF32, mean_var_close};
use custom_ops::{MeanVar, Moments, Welford};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use reduce_host::custom::{Float, OpElement, Pod};
use reduce_host::custom::{Kernels, OpAcc, ReduceOp};
use reduce_host::{
    BF16, DeviceReduce, DeviceSegmentedReduce, DeviceView, Gpu, Segments, SumElement, cpu,
};
use support::BoxError;
use support::cub::{Cub, CubResult};
use support::pool::Pool;
use support::timing;

/// The device-wide size unless `--sizes` says otherwise.
const SIZE: usize = 1 << 28;
/// The segmented shape unless `--rows` says otherwise.
const ROWS: (usize, usize) = (4096, 65536);

/// One measured row of a table.
struct Row {
    label: &'static str,
    what: &'static str,
    us: f64,
    bytes: f64,
    cub: Option<CubResult>,
    torch_us: Option<f64>,
    /// The built-in reduction of the same shape this row is compared with.
    builtin_us: Option<f64>,
}

/// Fields drop in order: device memory and streams before the handles and the device.
struct Bench {
    pool: Pool,
    stream: Stream,
    kernels: Kernels,
    reduce: DeviceReduce,
    gpu: Gpu,
    min_rotation_bytes: usize,
    failures: Vec<String>,
}

impl Bench {
    /// Median µs of `O` over `n` elements by `reduce_with_async` into an `OpAcc` buffer, and the accumulator
    /// it gave on copy 0 (run once before the timing).
    fn user<O: ReduceOp<In = f32, Acc: Pod>>(
        &mut self,
        n: usize,
    ) -> Result<(f64, O::Acc), BoxError> {
        let copies = self.pool.copies(n, self.min_rotation_bytes);
        let windows: Vec<DeviceView<'_, f32>> =
            (0..copies).map(|k| self.pool.window(n, k)).collect();
        let mut out = DeviceBuffer::from_slice(&[OpAcc(O::identity())])?;
        let (reduce, kernels, stream) = (&mut self.reduce, &self.kernels, &self.stream);
        // SAFETY: the window and `out` live past the synchronize.
        unsafe { reduce.reduce_with_async::<O>(kernels, windows[0], &mut out, stream)? };
        stream.synchronize()?;
        let mut acc = [OpAcc(O::identity())];
        out.copy_to(&mut acc[..])?;
        let acc = acc[0].0;
        let us = timing::time_us(&self.gpu, stream, n as u64, copies, &mut |k, s| {
            // SAFETY: windows and `out` live until the timing function has synchronized.
            unsafe { reduce.reduce_with_async::<O>(kernels, windows[k], &mut out, s)? };
            Ok(())
        })?;
        Ok((us, acc))
    }

    /// Median µs of the built-in sum (`max == false`) or max over `n` elements, after checking its answer on
    /// copy 0 as `benches/reduce.rs` does.
    fn builtin(&mut self, max: bool, n: usize) -> Result<f64, BoxError> {
        let (w, host) = (self.pool.window(n, 0), self.pool.host_window(n, 0));
        let ok = if max {
            self.reduce.max(w)? == cpu::max(host)
        } else {
            SumRef::of(host.iter().map(|&x| x as f64)).ok(self.reduce.sum(w)? as f64)
        };
        if !ok {
            let which = if max { "max" } else { "sum" };
            self.failures
                .push(format!("built-in {which} at n={n}: wrong result"));
        }
        let copies = self.pool.copies(n, self.min_rotation_bytes);
        let windows: Vec<DeviceView<'_, f32>> =
            (0..copies).map(|k| self.pool.window(n, k)).collect();
        let mut out = DeviceBuffer::<f32>::zeroed(1)?;
        let reduce = &mut self.reduce;
        timing::time_us(&self.gpu, &self.stream, n as u64, copies, &mut |k, s| {
            // SAFETY: windows and `out` live until the timing function has synchronized.
            unsafe {
                if max {
                    reduce.max_async(windows[k], &mut out, s)?
                } else {
                    reduce.sum_async(windows[k], &mut out, s)?
                }
            }
            Ok(())
        })
    }
}

/// What an f32 tree sum of `terms` must be: their sum in f64, within the tolerance of `benches/reduce.rs`,
/// `(log2 n + 16) · ε · Σ|x|`.
#[derive(Clone, Copy)]
struct SumRef {
    want: f64,
    tol: f64,
}

impl SumRef {
    fn of(terms: impl Iterator<Item = f64> + Clone) -> SumRef {
        let n = terms.clone().count();
        let (want, abs) = (terms.clone().sum::<f64>(), terms.map(f64::abs).sum::<f64>());
        let tol = ((n.max(2) as f64).log2() + 16.0) * f32::EPSILON as f64 * abs;
        SumRef { want, tol }
    }

    fn ok(self, got: f64) -> bool {
        (got - self.want).abs() <= self.tol
    }
}

/// Mean and population variance by two passes in f64: the reference of `Welford`.
fn mean_var(xs: impl Iterator<Item = f64> + Clone) -> MeanVar {
    let n = xs.clone().count() as f64;
    let mean = xs.clone().sum::<f64>() / n;
    let m2: f64 = xs.map(|x| (x - mean) * (x - mean)).sum();
    MeanVar {
        count: n as u64,
        mean,
        variance: m2 / n,
    }
}

fn main() -> ExitCode {
    support::main("custom bench", run)
}

fn run() -> Result<bool, BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| -> Result<Option<&str>, BoxError> {
        match args.iter().position(|a| a == name) {
            Some(i) => Ok(Some(
                args.get(i + 1)
                    .ok_or_else(|| format!("{name} needs a value"))?
                    .as_str(),
            )),
            None => Ok(None),
        }
    };
    let sizes: Vec<usize> = match flag("--sizes")? {
        Some(list) => list
            .split(',')
            .map(|s| s.parse())
            .collect::<Result<_, _>>()?,
        None => vec![SIZE],
    };
    let (rows, cols) = match flag("--rows")? {
        Some(shape) => {
            let (r, c) = shape.split_once('x').ok_or("--rows takes RxC")?;
            (r.parse()?, c.parse()?)
        }
        None => ROWS,
    };

    let gpu = support::open_gpu()?;
    let info = gpu.info().clone();
    let l2 = cust::device::Device::get_device(info.ordinal)?
        .get_attribute(cust::device::DeviceAttribute::L2CacheSize)? as usize;
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let mut bench = Bench {
        pool: Pool::new(largest + (1 << 22), 2024)?,
        stream: gpu.stream()?,
        kernels: Kernels::load(&gpu, &KERNELS)?,
        reduce: DeviceReduce::with_gpu(&gpu)?,
        gpu,
        min_rotation_bytes: 3 * l2,
        failures: Vec::new(),
    };

    let mut md = String::new();
    writeln!(
        md,
        "### User operators (the custom-op example) against the built-ins, CUB and torch\n\nGPU: {} (sm_{}, {} \
         SMs, L2 {} MB); the operators' kernels loaded from {:?}\n",
        info.name,
        info.cc(),
        info.sm_count,
        l2 >> 20,
        bench.kernels.code()
    )?;
    writeln!(
        md,
        "Median device µs; CUB / ours and torch / ours: their time over ours (> 1: we are faster); % of read \
         ceiling: the bare float4 read kernel's time on the same bytes over ours; vs built-in: the built-in \
         reduction's time on the same input over ours (AbsMax against max; SumSquares and Welford against sum).\n"
    )?;
    print!("{md}");

    // The comparators first, each at every size at once.
    let mut notes = Vec::new();
    let cub = Cub::build(info.cc());
    if let Cub::Missing(why) = &cub {
        notes.push(format!("CUB and read-ceiling columns missing: {why}"));
    }
    let sizes_u64: Vec<u64> = sizes.iter().map(|&n| n as u64).collect();
    let seg_n = rows * cols;
    // The ceiling of the segmented rows: the read kernel over the same bytes (bf16 → half as many f32).
    let seg_ceiling_n = (seg_n / 2) as u64;
    let mut ceiling_sizes = sizes_u64.clone();
    ceiling_sizes.extend([seg_ceiling_n, seg_n as u64]);
    let ceiling = cub.run("read_f32", &ceiling_sizes);
    let cub_of: HashMap<&str, HashMap<u64, CubResult>> = [
        "sum_f32",
        "max_f32",
        "absmax_f32",
        "sum_squares_f32",
        "welford_f32",
    ]
    .into_iter()
    .map(|op| (op, cub.run(op, &sizes_u64)))
    .collect();
    let mut torch = |op: &str| match support::torch::run(op, &sizes_u64) {
        Ok(m) => m,
        Err(why) => {
            notes.push(format!("torch column missing for {op}: {why}"));
            HashMap::new()
        }
    };
    let torch_absmax = torch("abs_max");
    let torch_norm = torch("sum_squares");
    let torch_var = torch("var_mean");
    let seg_shape = format!("{rows}x{cols}");
    let mut torch_rows =
        |op: &str| match support::torch::run_shapes(op, std::slice::from_ref(&seg_shape)) {
            Ok(m) => m,
            Err(why) => {
                notes.push(format!("torch column missing for {op}: {why}"));
                HashMap::new()
            }
        };
    let torch_rows_f32 = torch_rows("rows_var_mean_f32");
    let torch_rows = torch_rows("rows_var_mean_bf16");
    for (op, results) in &cub_of {
        for (n, c) in results {
            if !c.pass {
                bench
                    .failures
                    .push(format!("CUB {op} at n={n} failed its own check"));
            }
        }
    }

    for &n in &sizes {
        let bytes = n as f64 * 4.0;
        // The references, on copy 0 (the one each row of ours is checked on).
        let host = bench.pool.host_window(n, 0);
        let xs = host.iter().map(|&x| x as f64);
        let want_mv = mean_var(xs.clone());
        let want_absmax = AbsMaxF32::finalize(custom_op::cpu::<AbsMaxF32>(host));
        let squares = SumRef::of(xs.map(|x| x * x));
        let cub_at = |op: &str| cub_of.get(op).and_then(|m| m.get(&(n as u64)).copied());
        let key = n as u64;

        let sum_us = bench.builtin(false, n)?;
        let max_us = bench.builtin(true, n)?;
        let (absmax_us, absmax) = bench.user::<AbsMaxF32>(n)?;
        let absmax = AbsMaxF32::finalize(absmax);
        let (norm_us, norm) = bench.user::<NormF32>(n)?;
        let (welford_us, moments) = bench.user::<WelfordF32>(n)?;

        if absmax != want_absmax {
            bench.failures.push(format!(
                "AbsMax<f32> at n={n}: {absmax} vs the CPU's {want_absmax}"
            ));
        }
        if !squares.ok(norm as f64) {
            bench
                .failures
                .push(format!("SumSquares<f32> at n={n}: Σx² = {norm} is off"));
        }
        let mv = WelfordF32::finalize(moments);
        if !mean_var_close(&mv, &want_mv) {
            bench.failures.push(format!(
                "Welford<f32> at n={n}: {mv:?} vs the CPU's {want_mv:?}"
            ));
        }

        let rows_here = [
            Row {
                label: "built-in sum",
                what: "`reduce.sum_async`, f32",
                us: sum_us,
                bytes,
                cub: cub_at("sum_f32"),
                torch_us: None,
                builtin_us: None,
            },
            Row {
                label: "built-in max",
                what: "`reduce.max_async`, f32",
                us: max_us,
                bytes,
                cub: cub_at("max_f32"),
                torch_us: None,
                builtin_us: None,
            },
            Row {
                label: "AbsMax<f32>",
                what: "max |x| as the magnitude's bits (u32 max); CUB: TransformReduce(abs, max); torch: x.abs().max()",
                us: absmax_us,
                bytes,
                cub: cub_at("absmax_f32"),
                torch_us: torch_absmax.get(&key).copied(),
                builtin_us: Some(max_us),
            },
            Row {
                label: "SumSquares<f32>",
                what: "Σ x², f32 accumulator; CUB: TransformReduce(square, plus); torch: (x * x).sum()",
                us: norm_us,
                bytes,
                cub: cub_at("sum_squares_f32"),
                torch_us: torch_norm.get(&key).copied(),
                builtin_us: Some(sum_us),
            },
            Row {
                label: "Welford<f32>",
                what: "(n, mean, M2) in f64, Chan's merge; CUB: the same per element; torch: var_mean(x)",
                us: welford_us,
                bytes,
                cub: cub_at("welford_f32"),
                torch_us: torch_var.get(&key).copied(),
                builtin_us: Some(sum_us),
            },
        ];
        let table = table(
            &format!("n = {n} f32 ({:.0} MB)", bytes / 1e6),
            ceiling.get(&key).map(|c| c.us),
            bytes,
            &rows_here,
        );
        print!("{table}");
        md.push_str(&table);
    }

    let table = segmented::<BF16>(
        &mut bench,
        rows,
        cols,
        ceiling.get(&seg_ceiling_n).map(|c| c.us),
        torch_rows.get(&seg_shape).copied(),
    )?;
    print!("{table}");
    md.push_str(&table);
    let table = segmented::<f32>(
        &mut bench,
        rows,
        cols,
        ceiling.get(&(seg_n as u64)).map(|c| c.us),
        torch_rows_f32.get(&seg_shape).copied(),
    )?;
    print!("{table}");
    md.push_str(&table);

    let mut tail = String::new();
    for n in &notes {
        writeln!(tail, "\n- {n}")?;
    }
    for f in &bench.failures {
        writeln!(tail, "\n- **WRONG RESULT:** {f}")?;
    }
    print!("{tail}");
    md.push_str(&tail);
    let dir = std::env::var_os("OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target/bench".into());
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("custom.md"), &md)?;
    println!("\nwrote {}", dir.join("custom.md").display());
    for f in &bench.failures {
        println!("FAILED: {f}");
    }
    Ok(bench.failures.is_empty())
}

/// An element type of the per-row matrices: its labels, and a value from f32.
trait Matrix: SumElement<Acc = f32> + Float + DeviceCopy {
    /// The built-in per-row sum's description.
    const SUM: &'static str;
    /// The Welford row's label.
    const WELFORD: &'static str;
    fn from_f32(x: f32) -> Self;
}

impl Matrix for BF16 {
    const SUM: &'static str = "`DeviceSegmentedReduce::sum_async`, bf16 in, f32 out";
    const WELFORD: &'static str = "Welford<bf16> per row";
    fn from_f32(x: f32) -> Self {
        BF16(half::bf16::from_f32(x))
    }
}

impl Matrix for f32 {
    const SUM: &'static str = "`DeviceSegmentedReduce::sum_async`, f32";
    const WELFORD: &'static str = "Welford<f32> per row";
    fn from_f32(x: f32) -> Self {
        x
    }
}

/// `Welford<T>` per row of a `rows × cols` matrix of `T` (rows layout) and the built-in per-row sum of the
/// same matrix, checked on a few rows against the CPU; their table.
fn segmented<T: Matrix>(
    bench: &mut Bench,
    rows: usize,
    cols: usize,
    ceiling_us: Option<f64>,
    torch_us: Option<f64>,
) -> Result<String, BoxError>
where
    Welford<T>: ReduceOp<In = T, Acc = Moments, Out = MeanVar>,
{
    let n = rows * cols;
    let elem = size_of::<T>();
    let bytes = (n * elem) as f64;
    let copies = bench.min_rotation_bytes.div_ceil(n * elem).clamp(1, 64);
    let mut rng = SmallRng::seed_from_u64(11);
    let host: Vec<T> = (0..n * copies)
        .map(|_| T::from_f32(rng.random_range(-1.0f32..1.0)))
        .collect();
    let input = DeviceBuffer::from_slice(&host)?;
    let window = |k: usize| DeviceView::from(&input).slice(k * n..(k + 1) * n);
    let segments = Segments::rows(rows, cols, cols);
    let mut seg = DeviceSegmentedReduce::with_gpu(&bench.gpu)?;
    let mut accs = DeviceBuffer::from_slice(&vec![OpAcc(Moments::default()); rows])?;
    let mut sums = DeviceBuffer::from_slice(&vec![0.0f32; rows])?;
    let kernels = &bench.kernels;

    // SAFETY (both enqueues): the input and the outputs outlive the timing, which synchronizes before it
    // returns.
    let welford_us = timing::time_us(&bench.gpu, &bench.stream, n as u64, copies, &mut |k, s| {
        unsafe { seg.reduce_with_async::<Welford<T>>(kernels, window(k), segments, &mut accs, s)? };
        Ok(())
    })?;
    let sum_us = timing::time_us(&bench.gpu, &bench.stream, n as u64, copies, &mut |k, s| {
        unsafe { seg.sum_async(window(k), segments, &mut sums, s)? };
        Ok(())
    })?;

    // Check copy 0 on a few rows.
    seg.reduce_with::<Welford<T>>(kernels, window(0), segments, &mut accs)?;
    seg.sum(window(0), segments, &mut sums)?;
    let mut h_accs = vec![OpAcc(Moments::default()); rows];
    let mut h_sums = vec![0.0f32; rows];
    accs.copy_to(&mut h_accs[..])?;
    sums.copy_to(&mut h_sums[..])?;
    for r in [0, rows / 3, rows / 2, rows - 1] {
        let x = &host[r * cols..(r + 1) * cols];
        let xs = x.iter().map(|v| v.to_f64());
        let want_mv = mean_var(xs.clone());
        let g = Welford::<T>::finalize(h_accs[r].0);
        if !mean_var_close(&g, &want_mv) {
            bench.failures.push(format!(
                "{} row {r} of {rows} × {cols}: {g:?} vs the CPU's {want_mv:?}",
                T::WELFORD
            ));
        }
        let (want, abs) = (xs.clone().sum::<f64>(), xs.map(f64::abs).sum::<f64>());
        if (h_sums[r] as f64 - want).abs() > 1e-5 * abs + 1e-6 {
            bench.failures.push(format!(
                "built-in sum row {r} of {rows} × {cols}: {} vs {want}",
                h_sums[r]
            ));
        }
    }

    let rows_here = [
        Row {
            label: "built-in sum per row",
            what: T::SUM,
            us: sum_us,
            bytes,
            cub: None,
            torch_us: None,
            builtin_us: None,
        },
        Row {
            label: T::WELFORD,
            what: "`reduce_with_async`, (n, mean, M2) in f64 per row; torch: var_mean(x, dim=1)",
            us: welford_us,
            bytes,
            cub: None,
            torch_us,
            builtin_us: Some(sum_us),
        },
    ];
    Ok(table(
        &format!(
            "{rows} × {cols} {}, one result per row ({:.0} MB)",
            <T as OpElement>::NAME,
            bytes / 1e6
        ),
        ceiling_us,
        bytes,
        &rows_here,
    ))
}

/// One markdown table: the read ceiling's row, then `rows`.
fn table(title: &str, ceiling_us: Option<f64>, bytes: f64, rows: &[Row]) -> String {
    let mut t = format!("\n#### {title}\n\n");
    t.push_str(
        "| row | what | ours µs | GB/s | CUB µs | CUB / ours | torch µs | torch / ours | % of read ceiling | vs \
         built-in |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    let dash = || "—".to_owned();
    let opt = |v: Option<f64>| v.map_or_else(dash, |v| format!("{v:.1}"));
    let ratio =
        |theirs: Option<f64>, ours: f64| theirs.map_or_else(dash, |t| format!("{:.3}", t / ours));
    let gbps = |us: f64| bytes / us / 1e3;
    match ceiling_us {
        Some(c) => {
            let _ = writeln!(
                t,
                "| read ceiling | bare float4 read kernel, same bytes, same timing | {c:.1} | {:.0} | — | — | — \
                 | — | 100.0 | — |",
                gbps(c)
            );
        }
        None => t.push_str(
            "| read ceiling | needs nvcc (see below) | — | — | — | — | — | — | — | — |\n",
        ),
    }
    for r in rows {
        let cub_us = r.cub.map(|c| c.us);
        let _ = writeln!(
            t,
            "| {} | {} | {:.1} | {:.0} | {} | {} | {} | {} | {} | {} |",
            r.label,
            r.what,
            r.us,
            r.bytes / r.us / 1e3,
            opt(cub_us),
            ratio(cub_us, r.us),
            opt(r.torch_us),
            ratio(r.torch_us, r.us),
            ceiling_us.map_or_else(dash, |c| format!("{:.1}", 100.0 * c / r.us)),
            ratio(r.builtin_us, r.us),
        );
    }
    t
}
