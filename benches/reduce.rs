//! `cargo bench`: the reduction chapter's bandwidth table (v0–v5, the production reduction under each
//! combine strategy, the reproducible `Determinism::GpuToGpu` sum, CUB including its `gpu_to_gpu` sum) at
//! n = 2^26+3 and 2^28 f32 (every row beside CUB and the read ceiling: a bare float4 read kernel timed the
//! same way), and a sweep of GB/s against n (2^10 … 2^30; the seeds to 2^28) drawn as
//! an SVG. Every row is checked against an f64 CPU reference; a wrong result fails the bench.
//!
//! Output: the tables on stdout, and `bench.md`, `sweep.csv`, `sweep.svg` in `$OUT` (if set) or
//! `target/bench`. Flags: `--quick` skips the sweep; `--sizes a,b,…` replaces the table sizes; `--loops`
//! runs only the tables of the loops users write (blocking calls, and `*_async` back to back); `--sweep` only
//! the sweep, without the seeds (the production rows, CUB's and the ceiling: a run of its spread). Set
//! `CCCL_INCLUDE` to a CCCL ≥ 3.6 include folder (the `cuda-cccl` 1.2.1 wheel's
//! `cuda/cccl/headers/include`) for CUB's `gpu_to_gpu` row; without it that row is missing.
#[allow(dead_code)] // each bench uses part of the harness
mod support;

use std::fmt::Write as _;
use std::process::ExitCode;

use cust::memory::DeviceBuffer;
use cust::stream::Stream;
use reduce_host::seed::{SeedReduce, SeedVersion};
use reduce_host::{Combine, Determinism, DeviceReduce, DeviceView, Gpu, Indexed, cpu};
use support::cub::{Cub, CubResult};
use support::plot::{self, Series};
use support::pool::Pool;
use support::timing;

use support::BoxError;

/// The H200's datasheet bandwidth.
const DATASHEET_GBPS: f64 = 4800.0;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Sum,
    /// The sum with `Determinism::GpuToGpu`.
    ReproSum,
    /// The same with the chunk kernel's L2 prefetch switched on.
    ReproSumPrefetch,
    Max,
    ArgMax,
    ArgMin,
}

impl Op {
    /// The operation whose CUB row a row of this op is compared with.
    fn cub_peer(self) -> Op {
        match self {
            Op::ReproSumPrefetch => Op::ReproSum,
            op => op,
        }
    }

    fn cub_name(self) -> &'static str {
        match self {
            Op::Sum => "sum_f32",
            Op::ReproSum | Op::ReproSumPrefetch => "sum_f32_gpu_to_gpu",
            Op::Max => "max_f32",
            Op::ArgMax => "argmax_f32",
            Op::ArgMin => "argmin_f32",
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Seed(SeedVersion),
    Production(Op, Combine),
}

impl Kind {
    fn label(self) -> String {
        match self {
            Kind::Seed(v) => format!("{v:?}").to_lowercase(),
            Kind::Production(op, c) => format!("production {op:?} ({c:?})").to_lowercase(),
        }
    }

    fn op(self) -> Op {
        match self {
            Kind::Seed(_) => Op::Sum,
            Kind::Production(op, _) => op,
        }
    }

    /// Why the number moves, one line per row.
    fn why(self) -> &'static str {
        match self {
            Kind::Seed(SeedVersion::V0) => {
                "baseline: `tid % (2s)` leaves most lanes of every warp idle, one element per thread"
            }
            Kind::Seed(SeedVersion::V1) => {
                "no divergence, but `2*s*tid` strides shared memory into bank conflicts"
            }
            Kind::Seed(SeedVersion::V2) => {
                "sequential addressing: conflict-free, yet half the threads idle after the load"
            }
            Kind::Seed(SeedVersion::V3) => {
                "two loads per thread: half the blocks, twice the bytes in flight per thread"
            }
            Kind::Seed(SeedVersion::V4) => {
                "last 6 steps in registers by shuffle: 5 fewer barriers per block"
            }
            Kind::Seed(SeedVersion::V5) => {
                "grid-stride + float4: few blocks, 16-byte loads, one barrier; near the memory limit"
            }
            Kind::Production(Op::Sum, Combine::TwoPass) => {
                "v5 + 4 independent 16-byte loads per trip, unaligned head/tail, ld.global.nc; 2 launches"
            }
            Kind::Production(Op::Sum, Combine::LastBlock) => {
                "one launch: fence + ticket, the last block combines in a fixed order"
            }
            Kind::Production(Op::Sum, Combine::Auto) => {
                "the default: TwoPass (LastBlock above 4 MiB on GPUs before sm_90)"
            }
            Kind::Production(Op::Sum, Combine::Atomic) => {
                "one launch: red.add per block (not reproducible)"
            }
            Kind::Production(Op::ReproSum, _) => {
                "Determinism::GpuToGpu, L2 prefetch off: a warp per 8192-element chunk, f64 lanes, fixed trees; 2 launches"
            }
            Kind::Production(Op::ReproSumPrefetch, _) => {
                "GpuToGpu, prefetch on (the default up to 384 MiB): each warp asks L2 for 4 KiB of its next batch"
            }
            Kind::Production(Op::Max, _) => "same body, Max operator (NaN-propagating compare)",
            Kind::Production(Op::ArgMax, _) => {
                "same body, (value, u64 index) pairs: one redux.sync on order keys, two on indices"
            }
            Kind::Production(Op::ArgMin, _) => "the same for the least value (argmin)",
        }
    }
}

/// Device outputs for the async calls.
struct Outputs {
    f: DeviceBuffer<f32>,
    arg: DeviceBuffer<Indexed<f32>>,
}

/// Fields drop in order: device memory and streams before the handles and the device.
struct Bench {
    pool: Pool,
    out: Outputs,
    stream: Stream,
    seed: SeedReduce,
    reduce: DeviceReduce,
    gpu: Gpu,
    min_rotation_bytes: usize,
    failures: Vec<String>,
    /// Lines of the accuracy table: the default and the reproducible sum against the exact sum.
    accuracy: Vec<String>,
}

impl Bench {
    /// Median µs of `kind` on `n` elements, after checking its answer.
    fn measure(&mut self, kind: Kind, n: usize) -> Result<f64, BoxError> {
        self.check(kind, n)?;
        let copies = self.pool.copies(n, self.min_rotation_bytes);
        let windows: Vec<DeviceView<'_, f32>> =
            (0..copies).map(|k| self.pool.window(n, k)).collect();
        if let Kind::Seed(v) = kind {
            self.seed.reserve(v, n as u64)?;
        }
        if let Kind::Production(op, c) = kind {
            self.reduce.set_combine(c);
            self.reduce.set_determinism(determinism(op));
            self.reduce
                .set_reproducible_prefetch(Some(op == Op::ReproSumPrefetch));
        }
        let (reduce, seed, out) = (&mut self.reduce, &mut self.seed, &mut self.out);
        let mut enqueue = |k: usize, s: &Stream| -> Result<(), BoxError> {
            let w = windows[k];
            // SAFETY: windows and outputs live until the timing function has synchronized.
            unsafe {
                match kind {
                    Kind::Seed(v) => seed.sum_async(v, w, &mut out.f, s)?,
                    Kind::Production(Op::Sum | Op::ReproSum | Op::ReproSumPrefetch, _) => {
                        reduce.sum_async(w, &mut out.f, s)?
                    }
                    Kind::Production(Op::Max, _) => reduce.max_async(w, &mut out.f, s)?,
                    Kind::Production(Op::ArgMax, _) => reduce.argmax_async(w, &mut out.arg, s)?,
                    Kind::Production(Op::ArgMin, _) => reduce.argmin_async(w, &mut out.arg, s)?,
                }
            }
            Ok(())
        };
        let us = timing::time_us(&self.gpu, &self.stream, n as u64, copies, &mut enqueue)?;
        self.reduce.set_combine(Combine::default());
        self.reduce.set_determinism(Determinism::default());
        self.reduce.set_reproducible_prefetch(None);
        Ok(us)
    }

    /// Runs `kind` once on copy 0 and compares with the CPU reference; a mismatch is recorded as a failure.
    fn check(&mut self, kind: Kind, n: usize) -> Result<(), BoxError> {
        let (w, host) = (self.pool.window(n, 0), self.pool.host_window(n, 0));
        let ok = match kind {
            Kind::Seed(v) => sum_ok(self.seed.sum(v, w)?, host),
            Kind::Production(op, c) => {
                self.reduce.set_combine(c);
                let ok = match op {
                    Op::Sum => sum_ok(self.reduce.sum(w)?, host),
                    Op::ReproSum => {
                        let (ok, line, worse) = check_reproducible(&mut self.reduce, w, host, n)?;
                        self.accuracy.push(line);
                        self.failures.extend(worse);
                        ok
                    }
                    Op::ReproSumPrefetch => {
                        self.reduce.set_determinism(Determinism::GpuToGpu);
                        self.reduce.set_reproducible_prefetch(Some(true));
                        let got = self.reduce.sum(w)?;
                        self.reduce.set_reproducible_prefetch(None);
                        self.reduce.set_determinism(Determinism::default());
                        got.to_bits() == cpu::sum_reproducible(host).to_bits()
                    }
                    Op::Max => self.reduce.max(w)? == cpu::max(host),
                    Op::ArgMax => {
                        self.reduce.argmax(w)?.map(|a| (a.index as usize, a.value))
                            == cpu::argmax(host)
                    }
                    Op::ArgMin => {
                        self.reduce.argmin(w)?.map(|a| (a.index as usize, a.value))
                            == cpu::argmin(host)
                    }
                };
                self.reduce.set_combine(Combine::default());
                ok
            }
        };
        if !ok {
            self.failures
                .push(format!("{} at n={n}: wrong result", kind.label()));
        }
        Ok(())
    }
}

/// The reproducible sum must have the CPU algorithm's bits; returns that, and a line of the accuracy table
/// (its error and the default sum's against the exact sum), and a failure if its error is the larger.
fn check_reproducible(
    reduce: &mut DeviceReduce,
    w: DeviceView<'_, f32>,
    host: &[f32],
    n: usize,
) -> Result<(bool, String, Option<String>), BoxError> {
    reduce.set_determinism(Determinism::GpuToGpu);
    let repro = reduce.sum(w)?;
    reduce.set_determinism(Determinism::default());
    let default = reduce.sum(w)?;
    let exact = cpu::sum_f64(host);
    let (e_repro, e_default) = ((repro as f64 - exact).abs(), (default as f64 - exact).abs());
    let line = format!(
        "| {n} | {exact:.9e} | {default:.9e} | {e_default:.3e} | {repro:.9e} | {e_repro:.3e} |"
    );
    let worse = (e_repro > e_default).then(|| {
        format!("reproducible sum at n={n}: error {e_repro:e} above the default's {e_default:e}")
    });
    Ok((
        repro.to_bits() == cpu::sum_reproducible(host).to_bits(),
        line,
        worse,
    ))
}

fn determinism(op: Op) -> Determinism {
    match op {
        Op::ReproSum | Op::ReproSumPrefetch => Determinism::GpuToGpu,
        _ => Determinism::RunToRun,
    }
}

fn sum_ok(got: f32, host: &[f32]) -> bool {
    let want = cpu::sum_f64(host);
    let tol =
        ((host.len().max(2) as f64).log2() + 16.0) * f32::EPSILON as f64 * cpu::abs_sum_f64(host);
    (got as f64 - want).abs() <= tol
}

fn main() -> ExitCode {
    support::main("reduce bench", run)
}

fn run() -> Result<bool, BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let sizes = support::sizes_arg(&args, &[(1 << 26) + 3, 1 << 28])?;
    let gpu = support::open_gpu()?;
    let info = gpu.info().clone();
    let l2 = cust::device::Device::get_device(0)?
        .get_attribute(cust::device::DeviceAttribute::L2CacheSize)? as usize;
    let stream = gpu.stream()?;
    let copy = timing::copy_gbps(&stream)?;
    // The sweep reaches 2^30 (4 GiB of f32); the tables alone need 2^28; the loops' tables (2^24 at most)
    // 2^26, so that the rotation passes three L2 sizes.
    let loops_only = args.iter().any(|a| a == "--loops");
    let sweep_only = args.iter().any(|a| a == "--sweep");
    let largest = if loops_only {
        1 << 26
    } else {
        sizes
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
            .max(if quick { 1 << 28 } else { SWEEP_MAX })
    };
    let pool_len = largest + (1 << 22);
    let mut bench = Bench {
        reduce: DeviceReduce::with_gpu(&gpu)?,
        seed: SeedReduce::with_gpu(&gpu)?,
        out: Outputs {
            f: DeviceBuffer::zeroed(1)?,
            arg: DeviceBuffer::from_slice(&[Indexed::default()])?,
        },
        pool: Pool::new(pool_len, 2024)?,
        stream,
        gpu,
        min_rotation_bytes: 3 * l2,
        failures: Vec::new(),
        accuracy: Vec::new(),
    };
    let driver = cust::CudaApiVersion::get()
        .map(|v| format!("{}.{}", v.major(), v.minor()))
        .unwrap_or_default();
    let mut md = String::new();
    writeln!(
        md,
        "GPU: {} (sm_{}, {} SMs, L2 {} MB), CUDA driver API {driver}",
        info.name,
        info.cc(),
        info.sm_count,
        l2 >> 20
    )?;
    writeln!(
        md,
        "Peak: datasheet {DATASHEET_GBPS:.0} GB/s; measured 1 GiB device-to-device copy {copy:.0} GB/s (read + write)\n"
    )?;
    print!("{md}");

    let cub = Cub::build(info.cc());
    if let Cub::Missing(why) = &cub {
        println!("CUB column missing: {why}\n");
        writeln!(md, "CUB column missing: {why}\n")?;
    }
    if sweep_only {
        sweep(&mut bench, &cub, copy, &mut md, false)?;
        return finish(&bench, &md);
    }
    if loops_only {
        // Only the tables of the loops users write (a minute, where the whole bench takes several).
        blocking_calls(&mut bench, &cub, &mut md)?;
        plain_loops(&mut bench, &cub, &mut md)?;
        return finish(&bench, &md);
    }
    let sizes_u64: Vec<u64> = sizes.iter().map(|&n| n as u64).collect();
    let cub_results: Vec<(Op, std::collections::HashMap<u64, CubResult>)> =
        [Op::Sum, Op::ReproSum, Op::Max, Op::ArgMax, Op::ArgMin]
            .into_iter()
            .map(|op| (op, cub.run(op.cub_name(), &sizes_u64)))
            .collect();
    // The read ceiling: a bare float4 grid-stride read (one word per block written), timed as the rows
    // beside it (graphs of 100 up to 2^20, events above).
    let ceiling = cub.run("read_f32", &sizes_u64);
    let cub_of = |op: Op, n: usize| {
        cub_results
            .iter()
            .find(|(o, _)| *o == op)
            .and_then(|(_, m)| m.get(&(n as u64)).copied())
    };

    let mut kinds: Vec<Kind> = SeedVersion::ALL.into_iter().map(Kind::Seed).collect();
    kinds.extend(
        [
            Combine::Auto,
            Combine::TwoPass,
            Combine::LastBlock,
            Combine::Atomic,
        ]
        .map(|c| Kind::Production(Op::Sum, c)),
    );
    kinds.extend([
        Kind::Production(Op::ReproSum, Combine::default()),
        Kind::Production(Op::ReproSumPrefetch, Combine::default()),
        Kind::Production(Op::Max, Combine::default()),
        Kind::Production(Op::ArgMax, Combine::default()),
        Kind::Production(Op::ArgMin, Combine::default()),
    ]);

    for &n in &sizes {
        let bytes = n as f64 * 4.0;
        let mut table = format!("\n### n = {n} f32 ({:.0} MB)\n\n", bytes / 1e6);
        let ceiling_us = ceiling.get(&(n as u64)).map(|c| c.us);
        let of_ceiling =
            |us: f64| ceiling_us.map_or("n/a".into(), |c| format!("{:.1}", 100.0 * c / us));
        if let Some(c) = ceiling_us {
            writeln!(
                table,
                "Read ceiling (bare float4 read kernel, same timing): {c:.1} µs\n"
            )?;
        }
        table.push_str("| version | change | median µs | GB/s | % of 4.8 TB/s | % of copy | CUB time / ours | % of read ceiling |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
        for &kind in &kinds {
            let us = bench
                .measure(kind, n)
                .map_err(|e| format!("{} at n={n}: {e}", kind.label()))?;
            let gbps = bytes / us / 1e3;
            let ratio = cub_of(kind.op().cub_peer(), n)
                .map_or("n/a".into(), |c| format!("{:.3}", c.us / us));
            writeln!(
                table,
                "| {} | {} | {us:.1} | {gbps:.0} | {:.1} | {:.1} | {ratio} | {} |",
                kind.label(),
                kind.why(),
                100.0 * gbps / DATASHEET_GBPS,
                100.0 * gbps / copy,
                of_ceiling(us)
            )?;
        }
        for op in [Op::Sum, Op::ReproSum, Op::Max, Op::ArgMax, Op::ArgMin] {
            if let Some(c) = cub_of(op, n) {
                if !c.pass {
                    bench
                        .failures
                        .push(format!("CUB {op:?} at n={n} failed its own check"));
                }
                writeln!(
                    table,
                    "| CUB {op:?} | cub::DeviceReduce | {:.1} | {:.0} | {:.1} | {:.1} | 1.000 | {} |",
                    c.us,
                    c.gbps,
                    100.0 * c.gbps / DATASHEET_GBPS,
                    100.0 * c.gbps / copy,
                    of_ceiling(c.us)
                )?;
            }
        }
        print!("{table}");
        md.push_str(&table);
    }
    explore(&mut bench, &sizes)?;
    blocking_calls(&mut bench, &cub, &mut md)?;
    plain_loops(&mut bench, &cub, &mut md)?;

    let mut accuracy = String::from(
        "\n### Accuracy of the f32 sums (exact: compensated f64)\n\n| n | exact | default | its error | reproducible | its error |\n|---:|---:|---:|---:|---:|---:|\n",
    );
    for line in &bench.accuracy {
        writeln!(accuracy, "{line}")?;
    }
    print!("{accuracy}");
    md.push_str(&accuracy);

    if !quick {
        sweep(&mut bench, &cub, copy, &mut md, true)?;
    }
    finish(&bench, &md)
}

/// Writes `bench.md` and reports the failures; whether there were none.
fn finish(bench: &Bench, md: &str) -> Result<bool, BoxError> {
    let dir = std::env::var_os("OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target/bench".into());
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("bench.md"), md)?;
    println!("\nwrote {}", dir.join("bench.md").display());
    for f in &bench.failures {
        println!("FAILED: {f}");
    }
    Ok(bench.failures.is_empty())
}

/// `REDUCE_EXPLORE="threads=64,bps=32,fin=256;…"`: for each launch policy listed (keys `threads`,
/// `bps` (blocks per SM) and `fin` (finalize threads), the rest from the default), the default-combine sum
/// and argmax at every table size, printed as `explore` lines. The measurements behind `tuning.rs`.
fn explore(bench: &mut Bench, sizes: &[usize]) -> Result<(), BoxError> {
    let Ok(spec) = std::env::var("REDUCE_EXPLORE") else {
        return Ok(());
    };
    let default = bench.reduce.policy();
    for variant in spec.split(';').filter(|v| !v.is_empty()) {
        let mut p = default;
        for kv in variant.split(',') {
            let (k, v) = kv.split_once('=').ok_or("REDUCE_EXPLORE: key=value")?;
            let v: u32 = v.parse()?;
            match k {
                "threads" => p.threads = v,
                "bps" => p.blocks_per_sm = v,
                "fin" => p.finalize_threads = v,
                _ => return Err(format!("REDUCE_EXPLORE: unknown key {k}").into()),
            }
        }
        bench.reduce.set_policy(p)?;
        for &n in sizes {
            let sum = bench.measure(Kind::Production(Op::Sum, Combine::Auto), n)?;
            let arg = bench.measure(Kind::Production(Op::ArgMax, Combine::Auto), n)?;
            println!("explore {variant} n={n}: sum {sum:.2} µs, argmax {arg:.2} µs");
        }
    }
    bench.reduce.reset_policy();
    Ok(())
}

/// A blocking `sum` as its user sees it: host wall clock per call in a loop (the median of 11 batches of
/// 1000 calls, rotating over the input copies), beside CUB's `Sum` followed by a copy of the result to the
/// host on the same stream and a synchronize, timed the same way.
fn blocking_calls(bench: &mut Bench, cub: &Cub, md: &mut String) -> Result<(), BoxError> {
    let ns: [usize; 4] = [1 << 10, 1 << 16, 1 << 20, 1 << 24];
    let cub_results = cub.run(
        "blocking_sum_f32",
        &ns.iter().map(|&n| n as u64).collect::<Vec<_>>(),
    );
    let mut table = String::from(
        "\n### Blocking sum, host wall clock per call\n\n| n | ours µs | CUB + copy to host µs | (CUB + copy) / ours |\n|---:|---:|---:|---:|\n",
    );
    for n in ns {
        let copies = bench.pool.copies(n, bench.min_rotation_bytes);
        let windows: Vec<DeviceView<'_, f32>> =
            (0..copies).map(|k| bench.pool.window(n, k)).collect();
        let mut k = 0;
        let mut call = |reduce: &mut DeviceReduce| -> Result<f32, BoxError> {
            let got = reduce.sum(windows[k % copies])?;
            k += 1;
            Ok(got)
        };
        for _ in 0..500 {
            call(&mut bench.reduce)?;
        }
        let mut us = Vec::new();
        for _ in 0..11 {
            let t0 = std::time::Instant::now();
            for _ in 0..1000 {
                std::hint::black_box(call(&mut bench.reduce)?);
            }
            us.push(t0.elapsed().as_secs_f64() * 1e6 / 1000.0);
        }
        let ours = timing::median(&mut us);
        let (theirs, ratio) = match cub_results.get(&(n as u64)) {
            Some(c) => (format!("{:.2}", c.us), format!("{:.3}", c.us / ours)),
            None => ("n/a".into(), "n/a".into()),
        };
        writeln!(table, "| {n} | {ours:.2} | {theirs} | {ratio} |")?;
    }
    print!("{table}");
    md.push_str(&table);
    Ok(())
}

/// The loop a plain user writes: `sum_async` / `argmax_async` back to back on one stream, no graph, events
/// around [`timing::LOOP_CALLS`] calls (rotating over the input copies), beside CUB's `Sum` / `ArgMax` in the
/// same loop (`loop_*` in the comparator). The tables above time graphs of 100 calls, in which our calls
/// also overlap each other (programmatic dependent launch); here the host's launch rate counts too.
fn plain_loops(bench: &mut Bench, cub: &Cub, md: &mut String) -> Result<(), BoxError> {
    let ns: [usize; 4] = [1 << 10, 1 << 16, 1 << 20, 1 << 24];
    let ns_u64: Vec<u64> = ns.iter().map(|&n| n as u64).collect();
    let (cub_sum, cub_argmax) = (
        cub.run("loop_sum_f32", &ns_u64),
        cub.run("loop_argmax_f32", &ns_u64),
    );
    let mut table = format!(
        "\n### The loop users write: `*_async` back to back, µs per call\n\nOne stream, no graph, events around {} \
         calls, median of 11 loops; CUB in the same loop.\n\n| n | our sum | CUB sum | CUB / ours | our argmax | CUB \
         argmax | CUB / ours |\n|---:|---:|---:|---:|---:|---:|---:|\n",
        timing::LOOP_CALLS
    );
    for n in ns {
        let copies = bench.pool.copies(n, bench.min_rotation_bytes);
        let windows: Vec<DeviceView<'_, f32>> =
            (0..copies).map(|k| bench.pool.window(n, k)).collect();
        let (reduce, out) = (&mut bench.reduce, &mut bench.out);
        let sum = timing::time_loop(&bench.stream, copies, &mut |k, s| {
            // SAFETY: the windows and the output live until the timing function has synchronized.
            unsafe { reduce.sum_async(windows[k], &mut out.f, s)? };
            Ok(())
        })?;
        let argmax = timing::time_loop(&bench.stream, copies, &mut |k, s| {
            // SAFETY: as above.
            unsafe { reduce.argmax_async(windows[k], &mut out.arg, s)? };
            Ok(())
        })?;
        let cell = |m: &std::collections::HashMap<u64, CubResult>, ours: f64| {
            m.get(&(n as u64))
                .map_or(("n/a".into(), "n/a".into()), |c| {
                    (format!("{:.2}", c.us), format!("{:.3}", c.us / ours))
                })
        };
        let ((cs, rs), (ca, ra)) = (cell(&cub_sum, sum), cell(&cub_argmax, argmax));
        writeln!(
            table,
            "| {n} | {sum:.2} | {cs} | {rs} | {argmax:.2} | {ca} | {ra} |"
        )?;
    }
    for (name, m) in [("loop_sum_f32", &cub_sum), ("loop_argmax_f32", &cub_argmax)] {
        if m.values().any(|c| !c.pass) {
            bench
                .failures
                .push(format!("CUB {name} failed its own check"));
        }
    }
    print!("{table}");
    md.push_str(&table);
    Ok(())
}

/// The sweep's largest n: 2^30 f32, 4 GiB.
const SWEEP_MAX: usize = 1 << 30;

/// GB/s against n for v0–v5 (to 2^28), the production sum and argmax, CUB's, and the read ceiling (to
/// 2^30): `sweep.csv` and `sweep.svg`, and a table with each production row's share of the ceiling and its
/// ratio to CUB. `seeds`: v0–v5 too.
fn sweep(
    bench: &mut Bench,
    cub: &Cub,
    copy: f64,
    md: &mut String,
    seeds: bool,
) -> Result<(), BoxError> {
    let log2s: Vec<u32> = (10..=SWEEP_MAX.ilog2()).collect();
    let ns: Vec<usize> = log2s.iter().map(|&l| 1usize << l).collect();
    let mut kinds: Vec<(Kind, usize)> = SeedVersion::ALL
        .into_iter()
        .filter(|_| seeds)
        .map(|v| (Kind::Seed(v), 1 << 28))
        .collect();
    kinds.push((Kind::Production(Op::Sum, Combine::default()), SWEEP_MAX));
    kinds.push((Kind::Production(Op::ArgMax, Combine::default()), SWEEP_MAX));
    kinds.push((Kind::Production(Op::ArgMin, Combine::default()), SWEEP_MAX));
    let mut series = Vec::new();
    let mut csv = String::from("series,n,median_us,gbps\n");
    for &(kind, largest) in &kinds {
        let mut points = Vec::new();
        for (&l, &n) in log2s.iter().zip(&ns).filter(|(_, n)| **n <= largest) {
            let us = bench
                .measure(kind, n)
                .map_err(|e| format!("{} at n={n}: {e}", kind.label()))?;
            let gbps = n as f64 * 4.0 / us / 1e3;
            writeln!(csv, "{},{n},{us:.3},{gbps:.1}", kind.label())?;
            points.push((l as f64, gbps));
        }
        series.push(Series {
            name: kind.label(),
            points,
        });
    }
    let ns_u64: Vec<u64> = ns.iter().map(|&n| n as u64).collect();
    for (name, op) in [
        ("CUB Sum", "sum_f32"),
        ("CUB ArgMax", "argmax_f32"),
        ("CUB ArgMin", "argmin_f32"),
        ("read ceiling", "read_f32"),
    ] {
        let results = cub.run(op, &ns_u64);
        if results.is_empty() {
            continue;
        }
        let mut points = Vec::new();
        for (&l, &n) in log2s.iter().zip(&ns) {
            if let Some(c) = results.get(&(n as u64)) {
                writeln!(csv, "{},{n},{:.3},{:.1}", name.to_lowercase(), c.us, c.gbps)?;
                points.push((l as f64, c.gbps));
            }
        }
        series.push(Series {
            name: name.into(),
            points,
        });
    }
    let dir = std::env::var_os("OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target/bench".into());
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("sweep.csv"), &csv)?;
    let title = format!("f32 sum, GB/s against n ({})", bench.gpu.info().name);
    std::fs::write(
        dir.join("sweep.svg"),
        plot::svg(
            &title,
            &series,
            (10.0, log2s[log2s.len() - 1] as f64),
            5000.0,
            copy,
        ),
    )?;
    md.push_str("\n### Sweep (GB/s)\n\n| n |");
    for s in &series {
        write!(md, " {} |", s.name)?;
    }
    md.push_str("\n|---:|");
    md.push_str(&"---:|".repeat(series.len()));
    md.push('\n');
    for (i, &l) in log2s.iter().enumerate() {
        write!(md, "| 2^{l} |")?;
        for s in &series {
            match s.points.iter().find(|p| p.0 == l as f64) {
                Some(p) => write!(md, " {:.0} |", p.1)?,
                None => md.push_str(" |"),
            }
        }
        md.push('\n');
        let _ = i;
    }
    // Each production row against the ceiling and CUB at every n: a ratio of GB/s is a ratio of times.
    let gbps_of = |name: &str, l: u32| {
        series
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.points.iter().find(|p| p.0 == l as f64).map(|p| p.1))
    };
    md.push_str("\n### Against the read ceiling and CUB\n\nA share of the ceiling over 100 % (marked †) is bounded by the launch rate, not by memory: our \
        calls overlap inside the graph of 100 (programmatic dependent launch), while the ceiling kernel pays every launch \
        in full. The loop users write is timed in its own table.\n\n| n | sum % of ceiling | sum CUB time / ours | argmax % of ceiling | argmax CUB time / ours | argmin % of ceiling | argmin CUB time / ours |\n|---:|---:|---:|---:|---:|---:|---:|\n");
    let sum = Kind::Production(Op::Sum, Combine::default()).label();
    let argmax = Kind::Production(Op::ArgMax, Combine::default()).label();
    let argmin = Kind::Production(Op::ArgMin, Combine::default()).label();
    let pct = |a: Option<f64>, b: Option<f64>, scale: f64| match (a, b) {
        (Some(a), Some(b)) if scale > 1.0 && a > b => format!("{:.3} †", scale * a / b),
        (Some(a), Some(b)) => format!("{:.3}", scale * a / b),
        _ => "n/a".into(),
    };
    for &l in &log2s {
        let ceiling = gbps_of("read ceiling", l);
        writeln!(
            md,
            "| 2^{l} | {} | {} | {} | {} | {} | {} |",
            pct(gbps_of(&sum, l), ceiling, 100.0),
            pct(gbps_of(&sum, l), gbps_of("CUB Sum", l), 1.0),
            pct(gbps_of(&argmax, l), ceiling, 100.0),
            pct(gbps_of(&argmax, l), gbps_of("CUB ArgMax", l), 1.0),
            pct(gbps_of(&argmin, l), ceiling, 100.0),
            pct(gbps_of(&argmin, l), gbps_of("CUB ArgMin", l), 1.0),
        )?;
    }
    println!("\nsweep written to {}", dir.join("sweep.svg").display());
    Ok(())
}
