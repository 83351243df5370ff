//! `cargo bench --bench stats`: the statistics of `reduce_host::stats` in one read, at 2^28 f32 (and bf16,
//! f16), beside the read ceiling (the bare float4 read kernel of `benches/reduce.rs` on the same bytes,
//! timed the same way), the built-in sum, torch in the same run (`var_mean`, `aminmax`, `logsumexp`,
//! `linalg.vector_norm` of order 1, 2 and ∞, and the five separate reductions sum, min, max, argmin, argmax
//! that `stats` replaces) and CUB's functor reductions where CUB can express them (`TransformReduce` of a
//! Welford struct, of a square, of an absolute value). Then per row of 4096 × 65536, 4096 × 4096,
//! 16384 × 8192 and 65536 × 1024 matrices, bf16 and f32: `row_var_mean` (LayerNorm), `row_squares`
//! (RMSNorm), `row_stats` (the whole summary) and `row_logsumexp`, beside the built-in per-row sum, the
//! read ceiling and torch's `var_mean(dim=1)`, `mean(x * x, dim=1)` and `logsumexp(dim=1)`.
//!
//! Calls are the `*_async` forms (`statistic_async`) into device memory; median device µs with events around
//! each call and a spin kernel ahead (the harness of the other benches). Every result of ours is checked on
//! the timed input against an f64 CPU reference; a wrong one fails the bench. Writes `stats.md` to `$OUT` (if
//! set) or `target/bench`. Without a GPU it says so on one line and exits 0.
//!
//! Flags: `--sizes a,b,…` replaces the device-wide size (2^28), `--rows RxC,…` the per-row shapes (`none`
//! for either: no such tables); `--user-width W` gives the statistics W lanes per row where the plan gives
//! a warp (8, 16 or 32); `--threads T` forces the device-wide kernels' block size
//! (`DeviceReduce::set_policy`) and `--tile-threads T` the per-row tile kernels', where the defaults may be
//! fitted to each kernel's registers.
#[allow(dead_code)] // each bench uses part of the harness
mod support;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;

use cust::memory::{CopyDestination, DeviceBuffer, DeviceCopy};
use cust::stream::Stream;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use reduce_host::custom::{OpAcc, ReduceOp};
use reduce_host::stats::{
    AbsMax, AbsSum, LogSumExp, MinMax, SquareSum, StatElement, Statistic, Summary, Welford,
};
use reduce_host::{
    BF16, DeviceReduce, DeviceSegmentedReduce, DeviceView, F16, Gpu, Segments, SumElement,
};
use support::BoxError;
use support::cub::Cub;
use support::timing;

const SIZE: usize = 1 << 28;
/// The per-row shapes: LayerNorm and RMSNorm rows of a few hidden sizes and batch shapes.
const ROWS: [(usize, usize); 4] = [(4096, 65536), (4096, 4096), (16384, 8192), (65536, 1024)];

/// One measured row of a table.
struct Row {
    label: String,
    us: f64,
    theirs: Option<(&'static str, f64)>,
    cub_us: Option<f64>,
}

struct Bench {
    stream: Stream,
    reduce: DeviceReduce,
    seg: DeviceSegmentedReduce,
    gpu: Gpu,
    failures: Vec<String>,
}

impl Bench {
    /// Median µs of the statistic `O` over `input` by `statistic_async`, and the accumulator it gave.
    fn stat<O: Statistic>(
        &mut self,
        input: DeviceView<'_, O::In>,
    ) -> Result<(f64, O::Acc), BoxError>
    where
        O::In: StatElement,
        O::Acc: DeviceCopy,
    {
        let mut out = DeviceBuffer::from_slice(&[OpAcc(O::identity())])?;
        let (reduce, stream) = (&mut self.reduce, &self.stream);
        let n = input.len() as u64;
        let us = timing::time_us(&self.gpu, stream, n, 1, &mut |_, s| {
            // SAFETY: `input` and `out` live until the timing function has synchronized.
            unsafe { reduce.statistic_async::<O>(input, &mut out, s)? };
            Ok(())
        })?;
        let mut acc = [OpAcc(O::identity())];
        out.copy_to(&mut acc[..])?;
        Ok((us, acc[0].0))
    }

    /// Median µs of the statistic `O` per row, and the first row's accumulator.
    fn per_row<O: Statistic>(
        &mut self,
        input: DeviceView<'_, O::In>,
        rows: usize,
        cols: usize,
    ) -> Result<(f64, Vec<O::Acc>), BoxError>
    where
        O::In: StatElement,
        O::Acc: DeviceCopy,
    {
        let mut out = DeviceBuffer::from_slice(&vec![OpAcc(O::identity()); rows])?;
        let (seg, stream) = (&mut self.seg, &self.stream);
        let segments = Segments::rows(rows, cols, cols);
        let us = timing::time_us(&self.gpu, stream, (rows * cols) as u64, 1, &mut |_, s| {
            // SAFETY: `input` and `out` live until the timing function has synchronized.
            unsafe { seg.statistic_async::<O>(input, segments, &mut out, s)? };
            Ok(())
        })?;
        let mut accs = vec![OpAcc(O::identity()); rows];
        out.copy_to(&mut accs[..])?;
        Ok((us, accs.into_iter().map(|a| a.0).collect()))
    }

    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.failures.push(what());
        }
    }
}

/// The built-in argmax of 16-bit input, checked against the first index of the greatest element: a heavy
/// kernel in registers (so its block size is fitted to them), timed beside the statistics.
fn builtin_argmax<T>(
    bench: &mut Bench,
    input: DeviceView<'_, T>,
    wide: &[f64],
    (name, to_f64): (&str, fn(T) -> f64),
) -> Result<Row, BoxError>
where
    T: reduce_host::OrdElement + Default + DeviceCopy,
{
    let mut out = DeviceBuffer::from_slice(&[reduce_host::Indexed::<T>::default()])?;
    let (reduce, stream) = (&mut bench.reduce, &bench.stream);
    let us = timing::time_us(&bench.gpu, stream, input.len() as u64, 1, &mut |_, s| {
        // SAFETY: `input` and `out` live until the timing function has synchronized.
        unsafe { reduce.argmax_async(input, &mut out, s)? };
        Ok(())
    })?;
    let mut got = [reduce_host::Indexed::<T>::default()];
    out.copy_to(&mut got[..])?;
    let want = wide
        .iter()
        .enumerate()
        .fold((f64::NEG_INFINITY, u64::MAX), |(m, i), (j, &x)| {
            if x > m { (x, j as u64) } else { (m, i) }
        });
    let got = (to_f64(got[0].value), got[0].index);
    bench.check(got == want, || format!("argmax: {got:?} vs {want:?}"));
    Ok(Row {
        label: format!("built-in argmax {name}"),
        us,
        theirs: None,
        cub_us: None,
    })
}

/// The f64 references of one input.
struct Reference {
    mean: f64,
    var: f64,
    min: (f64, u64),
    max: (f64, u64),
    l1: f64,
    l2: f64,
    inf: f64,
    lse: f64,
}

fn reference(x: impl Iterator<Item = f64> + Clone) -> Reference {
    let n = x.clone().count() as f64;
    let mean = x.clone().sum::<f64>() / n;
    let var = x.clone().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let (mut min, mut max) = ((f64::INFINITY, 0), (f64::NEG_INFINITY, 0));
    for (i, v) in x.clone().enumerate() {
        if v < min.0 {
            min = (v, i as u64);
        }
        if v > max.0 {
            max = (v, i as u64);
        }
    }
    let lse = max.0 + x.clone().map(|v| (v - max.0).exp()).sum::<f64>().ln();
    Reference {
        mean,
        var,
        min,
        max,
        l1: x.clone().map(f64::abs).sum(),
        l2: x.clone().map(|v| v * v).sum::<f64>().sqrt(),
        inf: x.map(f64::abs).fold(0.0, f64::max),
        lse,
    }
}

fn near(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-300)
}

/// Times and checks every statistic of `input` (`host` its values widened), as rows of a table.
fn device_wide<T: StatElement + DeviceCopy>(
    bench: &mut Bench,
    input: DeviceView<'_, T>,
    host: &[f64],
    torch: &HashMap<&str, HashMap<u64, f64>>,
    cub: &HashMap<&str, f64>,
) -> Result<Vec<Row>, BoxError> {
    let r = reference(host.iter().copied());
    let n = host.len() as u64;
    let name = std::any::type_name::<T>()
        .rsplit("::")
        .next()
        .unwrap_or("?")
        .to_lowercase();
    let torch_at = |op: &'static str| {
        torch
            .get(op)
            .and_then(|m| m.get(&n))
            .map(|&us| (op, us))
            .filter(|_| name == "f32")
    };
    let cub_at = |op: &str| cub.get(op).copied().filter(|_| name == "f32");
    let mut rows = Vec::new();

    let (us, s) = bench.stat::<Summary<T>>(input)?;
    bench.check(
        s.moments.n == n as f64
            && near(s.moments.mean, r.mean, 1e-6)
            && near(s.moments.variance(0.0), r.var, 1e-5)
            && (s.extrema.min, s.extrema.argmin) == r.min
            && (s.extrema.max, s.extrema.argmax) == r.max,
        || format!("stats {name} n={n}: {s:?}"),
    );
    rows.push(Row {
        label: format!("stats {name}"),
        us,
        theirs: torch_at("five_calls"),
        cub_us: None,
    });

    let (us, m) = bench.stat::<Welford<T>>(input)?;
    bench.check(
        near(m.mean, r.mean, 1e-6) && near(m.variance(0.0), r.var, 1e-5),
        || format!("var_mean {name} n={n}: {m:?}"),
    );
    rows.push(Row {
        label: format!("var_mean {name}"),
        us,
        theirs: torch_at("var_mean"),
        cub_us: cub_at("welford_f32"),
    });

    let (us, e) = bench.stat::<MinMax<T>>(input)?;
    bench.check(
        (e.min, e.argmin) == r.min && (e.max, e.argmax) == r.max,
        || format!("aminmax {name} n={n}: {e:?}"),
    );
    rows.push(Row {
        label: format!("aminmax {name}"),
        us,
        theirs: torch_at("aminmax"),
        cub_us: None,
    });

    let (us, l1) = bench.stat::<AbsSum<T>>(input)?;
    bench.check(near(l1, r.l1, 1e-6), || {
        format!("norm_l1 {name} n={n}: {l1}")
    });
    rows.push(Row {
        label: format!("norm_l1 {name}"),
        us,
        theirs: torch_at("norm_l1"),
        cub_us: None,
    });

    let (us, sq) = bench.stat::<SquareSum<T>>(input)?;
    bench.check(near(sq.norm(), r.l2, 1e-6), || {
        format!("norm_l2 {name} n={n}: {sq:?}")
    });
    rows.push(Row {
        label: format!("norm_l2 {name}"),
        us,
        theirs: torch_at("norm_l2"),
        cub_us: cub_at("sum_squares_f32"),
    });

    let (us, bits) = bench.stat::<AbsMax<T>>(input)?;
    let inf = <AbsMax<T> as ReduceOp>::finalize(bits);
    bench.check(inf == r.inf, || format!("norm_inf {name} n={n}: {inf}"));
    rows.push(Row {
        label: format!("norm_inf {name}"),
        us,
        theirs: torch_at("norm_inf"),
        cub_us: cub_at("absmax_f32"),
    });

    let (us, lse) = bench.stat::<LogSumExp<T>>(input)?;
    bench.check(near(lse.logsumexp(), r.lse, 1e-5), || {
        format!("logsumexp {name} n={n}: {} vs {}", lse.logsumexp(), r.lse)
    });
    rows.push(Row {
        label: format!("logsumexp {name}"),
        us,
        theirs: torch_at("logsumexp"),
        cub_us: None,
    });
    Ok(rows)
}

fn table(
    title: &str,
    ceiling_us: Option<f64>,
    bytes: f64,
    sum_us: Option<f64>,
    rows: &[Row],
) -> String {
    let mut t = format!("\n#### {title}\n\n");
    t.push_str(
        "| row | ours µs | GB/s | % of read ceiling | torch | torch µs | torch / ours | CUB µs | CUB / ours |\n\
         |---|---:|---:|---:|---|---:|---:|---:|---:|\n",
    );
    let dash = || "—".to_owned();
    if let Some(c) = ceiling_us {
        let _ = writeln!(
            t,
            "| read ceiling (bare float4 read) | {c:.1} | {:.0} | 100.0 | | | | | |",
            bytes / c / 1e3
        );
    }
    if let Some(s) = sum_us {
        let pct = ceiling_us.map_or_else(dash, |c| format!("{:.1}", 100.0 * c / s));
        let _ = writeln!(
            t,
            "| built-in sum | {s:.1} | {:.0} | {pct} | | | | | |",
            bytes / s / 1e3
        );
    }
    for r in rows {
        let pct = ceiling_us.map_or_else(dash, |c| format!("{:.1}", 100.0 * c / r.us));
        let (op, tus, tr) = match r.theirs {
            Some((op, us)) => (
                op.to_owned(),
                format!("{us:.1}"),
                format!("{:.2}", us / r.us),
            ),
            None => (dash(), dash(), dash()),
        };
        let (cus, cr) = match r.cub_us {
            Some(us) => (format!("{us:.1}"), format!("{:.2}", us / r.us)),
            None => (dash(), dash()),
        };
        let _ = writeln!(
            t,
            "| {} | {:.1} | {:.0} | {pct} | {op} | {tus} | {tr} | {cus} | {cr} |",
            r.label,
            r.us,
            bytes / r.us / 1e3
        );
    }
    t
}

fn main() -> ExitCode {
    support::main("stats bench", run)
}

fn run() -> Result<bool, BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let sizes: Vec<usize> = match flag("--sizes") {
        Some(none) if none == "none" => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|s| s.parse())
            .collect::<Result<_, _>>()?,
        None => vec![SIZE],
    };
    let shapes: Vec<(usize, usize)> = match flag("--rows") {
        Some(none) if none == "none" => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|shape| -> Result<(usize, usize), BoxError> {
                let (r, c) = shape.split_once('x').ok_or("--rows takes RxC,…")?;
                Ok((r.parse()?, c.parse()?))
            })
            .collect::<Result<_, _>>()?,
        None => ROWS.to_vec(),
    };
    let gpu = support::open_gpu()?;
    let info = gpu.info().clone();
    let mut bench = Bench {
        stream: gpu.stream()?,
        reduce: DeviceReduce::with_gpu(&gpu)?,
        seg: DeviceSegmentedReduce::with_gpu(&gpu)?,
        gpu,
        failures: Vec::new(),
    };
    if let Some(t) = flag("--threads") {
        // A forced block size for the device-wide kernels (not fitted to their registers).
        let policy = reduce_host::Policy {
            threads: t.parse()?,
            ..bench.reduce.policy()
        };
        bench.reduce.set_policy(policy)?;
    }
    let mut plan = reduce_host::PlanOverrides::default();
    if let Some(w) = flag("--user-width") {
        // Lanes per row for the statistics where the plan gives a warp per row: to compare tile widths.
        plan.user_width = Some(w.parse()?);
    }
    if let Some(t) = flag("--tile-threads") {
        // Threads per block of the per-row tile kernels, instead of the size fitted to their registers.
        plan.tile_threads = Some(t.parse()?);
    }
    bench.seg.set_plan_overrides(plan)?;
    let mut md = format!(
        "### Statistics in one read against the read ceiling, torch and CUB\n\nGPU: {} (sm_{}, {} SMs). Median \
         device µs of one `*_async` call; % of read ceiling: the bare float4 read kernel's time on the same bytes \
         over ours; torch / ours and CUB / ours: their time over ours (> 1: we are faster). `stats` is compared \
         with torch's five calls (sum, min, max, argmin, argmax) that it replaces.\n",
        info.name,
        info.cc(),
        info.sm_count
    );
    print!("{md}");

    let mut notes = Vec::new();
    let cub = Cub::build(info.cc());
    if let Cub::Missing(why) = &cub {
        notes.push(format!("CUB and read-ceiling columns missing: {why}"));
    }
    let sizes_u64: Vec<u64> = sizes.iter().map(|&n| n as u64).collect();
    let mut ceiling_sizes = sizes_u64.clone();
    ceiling_sizes.extend(sizes_u64.iter().map(|n| n / 2));
    for &(rows, cols) in &shapes {
        ceiling_sizes.push((rows * cols / 2) as u64);
        ceiling_sizes.push((rows * cols) as u64);
    }
    let ceiling = cub.run("read_f32", &ceiling_sizes);
    let cub_sum = cub.run("sum_f32", &sizes_u64);
    let cub_ops: Vec<(&str, HashMap<u64, support::cub::CubResult>)> =
        ["welford_f32", "sum_squares_f32", "absmax_f32"]
            .into_iter()
            .map(|op| (op, cub.run(op, &sizes_u64)))
            .collect();
    let mut torch: HashMap<&str, HashMap<u64, f64>> = HashMap::new();
    for op in [
        "five_calls",
        "var_mean",
        "aminmax",
        "logsumexp",
        "norm_l1",
        "norm_l2",
        "norm_inf",
    ] {
        match support::torch::run(op, &sizes_u64) {
            Ok(m) => {
                torch.insert(op, m);
            }
            Err(why) => notes.push(format!("torch column missing for {op}: {why}")),
        }
    }
    let shape_names: Vec<String> = shapes.iter().map(|(r, c)| format!("{r}x{c}")).collect();
    let mut torch_rows: HashMap<&'static str, HashMap<String, f64>> = HashMap::new();
    for op in [
        "rows_var_mean_bf16",
        "rows_mean_square_bf16",
        "rows_logsumexp_bf16",
        "rows_var_mean_f32",
        "rows_mean_square_f32",
        "rows_logsumexp_f32",
    ] {
        match support::torch::run_shapes(op, &shape_names) {
            Ok(m) => {
                torch_rows.insert(op, m);
            }
            Err(why) => notes.push(format!("torch column missing for {op}: {why}")),
        }
    }

    let mut rng = SmallRng::seed_from_u64(2024);
    for &n in &sizes {
        let host: Vec<f32> = (0..n).map(|_| rng.random_range(0.0f32..1.0)).collect();
        let input = DeviceBuffer::from_slice(&host)?;
        let wide: Vec<f64> = host.iter().map(|&x| x as f64).collect();
        let cub_us: HashMap<&str, f64> = cub_ops
            .iter()
            .filter_map(|(op, m)| m.get(&(n as u64)).map(|c| (*op, c.us)))
            .collect();
        let sum_us = {
            let mut out = DeviceBuffer::<f32>::zeroed(1)?;
            let (reduce, view) = (&mut bench.reduce, DeviceView::from(&input));
            timing::time_us(&bench.gpu, &bench.stream, n as u64, 1, &mut |_, s| {
                // SAFETY: `input` and `out` live until the timing function has synchronized.
                unsafe { reduce.sum_async(view, &mut out, s)? };
                Ok(())
            })?
        };
        let mut rows_f32 =
            device_wide(&mut bench, DeviceView::from(&input), &wide, &torch, &cub_us)?;
        if let Some(c) = cub_sum.get(&(n as u64)) {
            rows_f32.insert(
                0,
                Row {
                    label: "CUB Sum (for scale)".into(),
                    us: c.us,
                    theirs: None,
                    cub_us: None,
                },
            );
        }
        let t = table(
            &format!("n = {n} f32 ({:.0} MB)", n as f64 * 4e-6),
            ceiling.get(&(n as u64)).map(|c| c.us),
            n as f64 * 4.0,
            Some(sum_us),
            &rows_f32,
        );
        print!("{t}");
        md.push_str(&t);
        drop(input);

        // The 16-bit floats: the same values rounded, half the bytes.
        let bf: Vec<BF16> = host
            .iter()
            .map(|&x| BF16(half::bf16::from_f32(x)))
            .collect();
        let hf: Vec<F16> = host.iter().map(|&x| F16(half::f16::from_f32(x))).collect();
        drop(host);
        let mut rows16 = Vec::new();
        {
            let input = DeviceBuffer::from_slice(&bf)?;
            let wide: Vec<f64> = bf.iter().map(|x| x.to_f32() as f64).collect();
            let bf16 = |x: BF16| x.to_f32() as f64;
            rows16.push(builtin_argmax(
                &mut bench,
                DeviceView::from(&input),
                &wide,
                ("bf16", bf16),
            )?);
            rows16.extend(device_wide(
                &mut bench,
                DeviceView::from(&input),
                &wide,
                &torch,
                &cub_us,
            )?);
        }
        drop(bf);
        {
            let input = DeviceBuffer::from_slice(&hf)?;
            let wide: Vec<f64> = hf.iter().map(|x| x.to_f32() as f64).collect();
            rows16.extend(device_wide(
                &mut bench,
                DeviceView::from(&input),
                &wide,
                &torch,
                &cub_us,
            )?);
        }
        let t = table(
            &format!("n = {n} bf16 and f16 ({:.0} MB)", n as f64 * 2e-6),
            ceiling.get(&(n as u64 / 2)).map(|c| c.us),
            n as f64 * 2.0,
            None,
            &rows16,
        );
        print!("{t}");
        md.push_str(&t);
    }

    // Per row: each rows × cols matrix, bf16 (activations) and f32.
    for &(rows, cols) in &shapes {
        let torch: HashMap<&'static str, Option<f64>> = torch_rows
            .iter()
            .map(|(op, m)| (*op, m.get(&format!("{rows}x{cols}")).copied()))
            .collect();
        let n = rows * cols;
        let bf: Vec<BF16> = (0..n)
            .map(|_| BF16(half::bf16::from_f32(rng.random_range(-1.0f32..1.0))))
            .collect();
        let t = per_row_table(&mut bench, &bf, rows, cols, "bf16", &ceiling, &torch)?;
        drop(bf);
        print!("{t}");
        md.push_str(&t);
        let xs: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let t = per_row_table(&mut bench, &xs, rows, cols, "f32", &ceiling, &torch)?;
        print!("{t}");
        md.push_str(&t);
    }

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
    std::fs::write(dir.join("stats.md"), &md)?;
    println!("\nwrote {}", dir.join("stats.md").display());
    Ok(bench.failures.is_empty())
}

/// Times and checks `row_var_mean`, `row_squares` and `row_logsumexp` of the `rows × cols` matrix `host`
/// (`dtype` its element's name), beside the built-in per-row sum and torch's rows; their table.
fn per_row_table<T: StatElement + SumElement<Acc = f32> + DeviceCopy>(
    bench: &mut Bench,
    host: &[T],
    rows: usize,
    cols: usize,
    dtype: &str,
    ceiling: &HashMap<u64, support::cub::CubResult>,
    torch_rows: &HashMap<&'static str, Option<f64>>,
) -> Result<String, BoxError> {
    let n = rows * cols;
    let bytes = n * size_of::<T>();
    let input = DeviceBuffer::from_slice(host)?;
    let view = DeviceView::from(&input);
    let sum_us = {
        let mut out = DeviceBuffer::from_slice(&vec![0.0f32; rows])?;
        let seg = &mut bench.seg;
        let segments = Segments::rows(rows, cols, cols);
        timing::time_us(&bench.gpu, &bench.stream, n as u64, 1, &mut |_, s| {
            // SAFETY: `input` and `out` live until the timing function has synchronized.
            unsafe { seg.sum_async(view, segments, &mut out, s)? };
            Ok(())
        })?
    };
    let check_rows = [0, rows / 2, rows - 1];
    let refs: Vec<Reference> = check_rows
        .iter()
        .map(|&r| reference(host[r * cols..(r + 1) * cols].iter().map(|x| x.to_f64())))
        .collect();
    // torch's row for `stat` on this element type, if it ran.
    let torch_row = |stat: &str| {
        torch_rows
            .iter()
            .find(|(op, _)| **op == format!("{stat}_{dtype}"))
            .and_then(|(op, us)| us.map(|us| (*op, us)))
    };
    let mut per_row = Vec::new();
    let (us, m) = bench.per_row::<Welford<T>>(view, rows, cols)?;
    for (i, &r) in check_rows.iter().enumerate() {
        let (got, want) = (m[r], &refs[i]);
        bench.check(
            near(got.mean, want.mean, 1e-5) || (got.mean - want.mean).abs() < 1e-7,
            || format!("row_var_mean {dtype} row {r}: {got:?}"),
        );
        bench.check(near(got.variance(0.0), want.var, 1e-5), || {
            format!("row_var_mean {dtype} row {r}: {got:?}")
        });
    }
    per_row.push(Row {
        label: format!("row_var_mean {dtype} (LayerNorm)"),
        us,
        theirs: torch_row("rows_var_mean"),
        cub_us: None,
    });
    let (us, sq) = bench.per_row::<SquareSum<T>>(view, rows, cols)?;
    for (i, &r) in check_rows.iter().enumerate() {
        let want = refs[i].l2 * refs[i].l2 / cols as f64;
        bench.check(near(sq[r].mean_square(), want, 1e-5), || {
            format!("row_squares {dtype} row {r}: {:?}", sq[r])
        });
    }
    per_row.push(Row {
        label: format!("row_squares {dtype} (RMSNorm)"),
        us,
        theirs: torch_row("rows_mean_square"),
        cub_us: None,
    });
    let (us, st) = bench.per_row::<Summary<T>>(view, rows, cols)?;
    for (i, &r) in check_rows.iter().enumerate() {
        let (got, want) = (st[r], &refs[i]);
        bench.check(
            near(got.moments.variance(0.0), want.var, 1e-5)
                && (got.extrema.min, got.extrema.argmin) == want.min
                && (got.extrema.max, got.extrema.argmax) == want.max,
            || format!("row_stats {dtype} row {r}: {got:?}"),
        );
    }
    per_row.push(Row {
        label: format!("row_stats {dtype}"),
        us,
        theirs: None,
        cub_us: None,
    });
    let (us, lse) = bench.per_row::<LogSumExp<T>>(view, rows, cols)?;
    for (i, &r) in check_rows.iter().enumerate() {
        bench.check(near(lse[r].logsumexp(), refs[i].lse, 1e-5), || {
            format!("row_logsumexp {dtype} row {r}: {:?}", lse[r])
        });
    }
    per_row.push(Row {
        label: format!("row_logsumexp {dtype}"),
        us,
        theirs: torch_row("rows_logsumexp"),
        cub_us: None,
    });
    Ok(table(
        &format!(
            "{rows} × {cols} {dtype}, one result per row ({:.0} MB)",
            bytes as f64 * 1e-6
        ),
        ceiling.get(&((bytes / 4) as u64)).map(|c| c.us),
        bytes as f64,
        Some(sum_us),
        &per_row,
    ))
}
