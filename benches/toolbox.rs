//! `cargo bench --bench toolbox`: the element-type and warp-toolbox numbers at n = 2^28 against CUB and
//! PyTorch in the same run: f16/bf16 sums against the f32 sum, the 256-bin histogram on uniform and skewed
//! f32, the u8 fast path, and stream compaction. Every result is checked against the CPU; a wrong one fails
//! the bench. Writes `toolbox.md` to `$OUT` (if set) or `target/bench`. `TOOLBOX_SELECT_THREADS=256,384`
//! adds compaction rows at those block sizes, `TOOLBOX_SELECT_CUTS=0.01,0.9` stable and unordered rows
//! keeping `x > 0.01`, `x > 0.9`, `TOOLBOX_SELECT_TYPES=1` rows for u8, bf16 and f64 elements.
#[allow(dead_code)] // each bench uses part of the harness
mod support;

use std::fmt::Write as _;
use std::process::ExitCode;

use cust::memory::{DeviceBuffer, DeviceSlice};
use cust::stream::Stream;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use reduce_host::{
    BF16, DeviceHistogram, DeviceReduce, DeviceSelect, F16, Gpu, GreaterThan, Policy,
    SelectElement, cpu,
};
use support::cub::Cub;
use support::timing;

use support::BoxError;

const N: usize = 1 << 28;

struct Row {
    what: String,
    us: f64,
    bytes: f64,
    cub_us: Option<f64>,
    torch_us: Option<f64>,
}

fn main() -> ExitCode {
    support::main("toolbox bench", run)
}

fn time(
    gpu: &Gpu,
    stream: &Stream,
    mut f: impl FnMut(&Stream) -> Result<(), BoxError>,
) -> Result<f64, BoxError> {
    timing::time_us(gpu, stream, N as u64, 1, &mut |_, s| f(s))
}

fn run() -> Result<bool, BoxError> {
    let gpu = support::open_gpu()?;
    let stream = gpu.stream()?;
    let mut failures = Vec::new();
    let mut rng = SmallRng::seed_from_u64(77);
    let uniform: Vec<f32> = (0..N).map(|_| rng.random_range(0.0f32..1.0)).collect();
    let skewed: Vec<f32> = uniform
        .iter()
        .map(|&x| {
            if rng.random_range(0.0..1.0) < 0.9 {
                77.5 / 256.0
            } else {
                x
            }
        })
        .collect();
    let d_uniform = DeviceBuffer::from_slice(&uniform)?;
    let d_skewed = DeviceBuffer::from_slice(&skewed)?;
    let cub = Cub::build(gpu.info().cc());
    let mut notes = Vec::new();
    if let Cub::Missing(why) = &cub {
        notes.push(format!("CUB column missing: {why}"));
    }
    let cub_us = |op: &str| {
        cub.run(op, &[N as u64])
            .get(&(N as u64))
            .filter(|c| c.pass)
            .map(|c| c.us)
    };
    let mut torch_us = |op: &str| match support::torch::run(op, &[N as u64]) {
        Ok(m) => m.get(&(N as u64)).copied(),
        Err(why) => {
            notes.push(format!("torch column missing for {op}: {why}"));
            None
        }
    };
    let mut rows = Vec::new();

    // Sums: f32 against f16/bf16 (same values rounded), bytes per second compared.
    let mut reduce = DeviceReduce::with_gpu(&gpu)?;
    let mut out = DeviceBuffer::from_slice(&[0.0f32])?;
    let f32_us = time(&gpu, &stream, |s| {
        let _: () = unsafe { reduce.sum_async(&d_uniform, &mut out, s)? };
        Ok(())
    })?;
    rows.push(Row {
        what: "sum f32".into(),
        us: f32_us,
        bytes: N as f64 * 4.0,
        cub_us: cub_us("sum_f32"),
        torch_us: None,
    });
    let halves: Vec<half::f16> = uniform.iter().map(|&x| half::f16::from_f32(x)).collect();
    let d_f16 = DeviceBuffer::from_slice(F16::from_halves(&halves))?;
    let got = reduce.sum(&d_f16)?;
    let want = cpu::sum_f64(F16::from_halves(&halves));
    if (got as f64 - want).abs() > 1e-5 * want {
        failures.push(format!("sum f16: {got} vs {want}"));
    }
    let f16_us = time(&gpu, &stream, |s| {
        let _: () = unsafe { reduce.sum_async(&d_f16, &mut out, s)? };
        Ok(())
    })?;
    rows.push(Row {
        what: "sum f16 (f32 accumulator)".into(),
        us: f16_us,
        bytes: N as f64 * 2.0,
        cub_us: cub_us("sum_f16"),
        torch_us: None,
    });
    drop(d_f16);
    let bhalves: Vec<half::bf16> = uniform.iter().map(|&x| half::bf16::from_f32(x)).collect();
    let d_bf16 = DeviceBuffer::from_slice(BF16::from_halves(&bhalves))?;
    let got = reduce.sum(&d_bf16)?;
    let want = cpu::sum_f64(BF16::from_halves(&bhalves));
    if (got as f64 - want).abs() > 1e-5 * want {
        failures.push(format!("sum bf16: {got} vs {want}"));
    }
    let bf16_us = time(&gpu, &stream, |s| {
        let _: () = unsafe { reduce.sum_async(&d_bf16, &mut out, s)? };
        Ok(())
    })?;
    rows.push(Row {
        what: "sum bf16 (f32 accumulator)".into(),
        us: bf16_us,
        bytes: N as f64 * 2.0,
        cub_us: cub_us("sum_bf16"),
        torch_us: None,
    });
    drop(d_bf16);

    // Histograms: 256 bins over [0, 1).
    let mut hist = DeviceHistogram::with_gpu(&gpu)?;
    let mut counts = DeviceBuffer::<u32>::zeroed(256)?;
    for (name, host, dev, cub_op, torch_op) in [
        (
            "histogram f32 uniform, 256 bins",
            &uniform,
            &d_uniform,
            "histogram_f32_uniform",
            "histc_uniform",
        ),
        (
            "histogram f32 skewed (90% one bin)",
            &skewed,
            &d_skewed,
            "histogram_f32_skewed",
            "histc_skewed",
        ),
    ] {
        let got: Vec<u32> = hist.even(dev, 256, 0.0, 1.0)?;
        let want = cpu::histogram_even(host, 256, 0.0, 1.0)?;
        if got.iter().map(|&c| c as u64).collect::<Vec<u64>>() != want {
            failures.push(format!("{name}: counts differ from the CPU"));
        }
        let us = time(&gpu, &stream, |s| {
            let _: () = unsafe { hist.even_async(dev, 256, 0.0, 1.0, &mut counts, s)? };
            Ok(())
        })?;
        rows.push(Row {
            what: name.into(),
            us,
            bytes: N as f64 * 4.0,
            cub_us: cub_us(cub_op),
            torch_us: torch_us(torch_op),
        });
    }
    let uniform_bytes: Vec<u8> = (0..N).map(|_| rng.random()).collect();
    let skewed_bytes: Vec<u8> = uniform_bytes
        .iter()
        .map(|&b| if rng.random_range(0..10) < 9 { 77 } else { b })
        .collect();
    for (name, bytes) in [
        ("histogram u8 uniform, 256 bins (fast path)", uniform_bytes),
        ("histogram u8 skewed (90% one bin)", skewed_bytes),
    ] {
        let d_bytes = DeviceBuffer::from_slice(&bytes)?;
        let got: Vec<u32> = hist.even_u8(&d_bytes)?;
        let want: Vec<u32> = cpu::histogram_bytes(&bytes)
            .iter()
            .map(|&c| c as u32)
            .collect();
        if got != want {
            failures.push(format!("{name}: counts differ from the CPU"));
        }
        let us = time(&gpu, &stream, |s| {
            let _: () = unsafe { hist.even_u8_async(&d_bytes, &mut counts, s)? };
            Ok(())
        })?;
        rows.push(Row {
            what: name.into(),
            us,
            bytes: N as f64,
            cub_us: None,
            torch_us: None,
        });
    }

    // Compaction: keep x > 0.5 (about half); flagged: flags set where x > 0.5, so the same elements, in
    // input order, as CUB's `DeviceSelect::Flagged` gives them (its rate counts the flag bytes too).
    let mut select = DeviceSelect::with_gpu(&gpu)?;
    let mut out_f = DeviceBuffer::<f32>::zeroed(N)?;
    let mut count = DeviceBuffer::from_slice(&[0u64])?;
    let want = uniform.iter().filter(|&&x| x > 0.5).count() as u64;
    let flags: Vec<u8> = uniform.iter().map(|&x| u8::from(x > 0.5)).collect();
    let d_flags = DeviceBuffer::from_slice(&flags)?;
    // One compaction at the handle's policy: checked (the number kept), then timed.
    let mut compact = |select: &mut DeviceSelect, what: Compaction, failures: &mut Vec<String>| {
        let label = format!("{what:?} compaction at {} threads", select.policy().threads);
        if !matches!(what, Compaction::Flagged) {
            let io = (&d_uniform, &mut out_f, &mut count);
            let stable = matches!(what, Compaction::Stable);
            return time_select_if(
                &gpu, &stream, select, io, 0.5f32, stable, want, &label, failures,
            );
        }
        let got = select.select_flagged(&d_uniform, &d_flags, &mut out_f)?;
        if got != want {
            failures.push(format!("{label}: {got} selected, want {want}"));
        }
        time(&gpu, &stream, |s| {
            // SAFETY: buffers live until the timing synchronizes.
            let _: () = unsafe {
                select.select_flagged_async(&d_uniform, &d_flags, &mut out_f, &mut count, s)?
            };
            Ok(())
        })
    };
    for (what, name, cub_op) in [
        (
            Compaction::Unordered,
            "select_if x > 0.5, unordered",
            "select_if_f32",
        ),
        (
            Compaction::Stable,
            "select_if x > 0.5, stable",
            "select_if_f32",
        ),
        (
            Compaction::Flagged,
            "select_flagged (flags: x > 0.5)",
            "select_flagged_f32",
        ),
    ] {
        let us = compact(&mut select, what, &mut failures)?;
        rows.push(Row {
            what: name.into(),
            us,
            bytes: N as f64 * what.bytes_per_element(),
            cub_us: cub_us(cub_op),
            torch_us: match what {
                Compaction::Flagged => None,
                _ => torch_us("masked_select"),
            },
        });
    }
    let _: Option<&DeviceSlice<f32>> = None;

    // Compaction at other block sizes (`TOOLBOX_SELECT_THREADS=256,384,…`, through the public
    // `set_policy`), to choose the default: the stable kernels take one tile of `threads × 4` vectors a
    // block, the unordered ones too. Same checks; CUB's times are the rows above.
    if let Ok(list) = std::env::var("TOOLBOX_SELECT_THREADS") {
        let default = select.policy();
        for threads in list.split(',').filter_map(|t| t.trim().parse::<u32>().ok()) {
            select.set_policy(Policy { threads, ..default })?;
            for what in [
                Compaction::Stable,
                Compaction::Unordered,
                Compaction::Flagged,
            ] {
                let us = compact(&mut select, what, &mut failures)?;
                rows.push(Row {
                    what: format!("select {what:?}, {threads} threads a block").to_lowercase(),
                    us,
                    bytes: N as f64 * what.bytes_per_element(),
                    cub_us: None,
                    torch_us: None,
                });
            }
        }
        select.set_policy(default)?;
    }

    // Stable and unordered compaction at other fractions kept (`TOOLBOX_SELECT_CUTS=0.01,0.99`: keep
    // x > cut): the unordered kernel's tiles need no look-back, so it gains most where few are kept.
    // Checked as above; no CUB rows.
    if let Ok(list) = std::env::var("TOOLBOX_SELECT_CUTS") {
        for cut in list.split(',').filter_map(|c| c.trim().parse::<f32>().ok()) {
            let want = uniform.iter().filter(|&&x| x > cut).count() as u64;
            let io = (&d_uniform, &mut out_f, &mut count);
            let label = format!("x > {cut}");
            select_rows(
                &gpu,
                &stream,
                &mut select,
                io,
                cut,
                want,
                &label,
                &mut rows,
                &mut failures,
            )?;
        }
    }

    // Compaction of other element types (`TOOLBOX_SELECT_TYPES=1`): u8 keeping x > 127, bf16 and f64
    // keeping x > 0.5, about half each, unordered and stable; checked counts, no CUB rows.
    if std::env::var_os("TOOLBOX_SELECT_TYPES").is_some() {
        let bytes: Vec<u8> = uniform.iter().map(|&x| (x * 256.0) as u8).collect();
        let want = bytes.iter().filter(|&&b| b > 127).count() as u64;
        type_rows(
            &gpu,
            &stream,
            &mut select,
            &bytes,
            127u8,
            want,
            "u8",
            &mut rows,
            &mut failures,
        )?;
        drop(bytes);
        let halves: Vec<half::bf16> = uniform.iter().map(|&x| half::bf16::from_f32(x)).collect();
        let want = halves.iter().filter(|&&h| h.to_f32() > 0.5).count() as u64;
        let cut = BF16::from(half::bf16::from_f32(0.5));
        let data = BF16::from_halves(&halves);
        type_rows(
            &gpu,
            &stream,
            &mut select,
            data,
            cut,
            want,
            "bf16",
            &mut rows,
            &mut failures,
        )?;
        drop(halves);
        let wide: Vec<f64> = uniform.iter().map(|&x| f64::from(x)).collect();
        let want = wide.iter().filter(|&&x| x > 0.5).count() as u64;
        type_rows(
            &gpu,
            &stream,
            &mut select,
            &wide,
            0.5,
            want,
            "f64",
            &mut rows,
            &mut failures,
        )?;
    }

    let mut md = format!(
        "GPU: {}, n = 2^28 per row; GB/s counts the input bytes read once\n\n",
        gpu.info().name
    );
    md.push_str("| operation | median µs | GB/s | CUB µs | CUB time / ours | torch µs | torch time / ours |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for r in &rows {
        let ratio = |o: Option<f64>| {
            o.map_or(("n/a".to_string(), "n/a".to_string()), |t| {
                (format!("{t:.1}"), format!("{:.2}", t / r.us))
            })
        };
        let (cu, cr) = ratio(r.cub_us);
        let (tu, tr) = ratio(r.torch_us);
        writeln!(
            md,
            "| {} | {:.1} | {:.0} | {cu} | {cr} | {tu} | {tr} |",
            r.what,
            r.us,
            r.bytes / r.us / 1e3
        )?;
    }
    let f32_rate = N as f64 * 4.0 / f32_us;
    writeln!(
        md,
        "\nf16 sum bytes/s = {:.1}% of the f32 sum's; bf16 {:.1}%",
        100.0 * (N as f64 * 2.0 / f16_us) / f32_rate,
        100.0 * (N as f64 * 2.0 / bf16_us) / f32_rate
    )?;
    for n in &notes {
        writeln!(md, "\n{n}")?;
    }
    print!("{md}");
    let dir = std::env::var_os("OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "target/bench".into());
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("toolbox.md"), &md)?;
    for f in &failures {
        println!("FAILED: {f}");
    }
    Ok(failures.is_empty())
}

/// The compactions the bench times.
#[derive(Clone, Copy, Debug)]
enum Compaction {
    Stable,
    Unordered,
    Flagged,
}

impl Compaction {
    /// Bytes read per input element: the f32, and the flag byte for `Flagged`.
    fn bytes_per_element(self) -> f64 {
        match self {
            Compaction::Flagged => 5.0,
            _ => 4.0,
        }
    }
}

/// Unordered and stable `select_if` of `data` keeping `x > cut` (`want` of them), on device copies:
/// [`select_rows`].
#[allow(clippy::too_many_arguments)]
fn type_rows<T: SelectElement>(
    gpu: &Gpu,
    stream: &Stream,
    select: &mut DeviceSelect,
    data: &[T],
    cut: T,
    want: u64,
    name: &str,
    rows: &mut Vec<Row>,
    failures: &mut Vec<String>,
) -> Result<(), BoxError> {
    let input = DeviceBuffer::from_slice(data)?;
    let mut out = DeviceBuffer::from_slice(data)?;
    let mut count = DeviceBuffer::from_slice(&[0u64])?;
    let io = (&input, &mut out, &mut count);
    select_rows(gpu, stream, select, io, cut, want, name, rows, failures)
}

/// The input, output and device count of a timed compaction.
type SelectIo<'a, T> = (
    &'a DeviceBuffer<T>,
    &'a mut DeviceBuffer<T>,
    &'a mut DeviceBuffer<u64>,
);

/// Unordered and stable `select_if` keeping `x > cut` (`want` of them) through `io`: checked, timed, one
/// row each, named `select_if {label}, unordered|stable`.
#[allow(clippy::too_many_arguments)]
fn select_rows<T: SelectElement>(
    gpu: &Gpu,
    stream: &Stream,
    select: &mut DeviceSelect,
    (input, out, count): SelectIo<'_, T>,
    cut: T,
    want: u64,
    label: &str,
    rows: &mut Vec<Row>,
    failures: &mut Vec<String>,
) -> Result<(), BoxError> {
    for stable in [false, true] {
        let kind = if stable { "stable" } else { "unordered" };
        let what = format!("select_if {label}, {kind}");
        let io = (input, &mut *out, &mut *count);
        let us = time_select_if(gpu, stream, select, io, cut, stable, want, &what, failures)?;
        rows.push(Row {
            what,
            us,
            bytes: (input.len() * size_of::<T>()) as f64,
            cub_us: None,
            torch_us: None,
        });
    }
    Ok(())
}

/// One `select_if` (`select_if_stable` with `stable`) keeping `x > cut` through `io` at the handle's
/// policy: checked against `want` (a mismatch is a failure named `what`), then timed; the median µs.
#[allow(clippy::too_many_arguments)]
fn time_select_if<T: SelectElement>(
    gpu: &Gpu,
    stream: &Stream,
    select: &mut DeviceSelect,
    (input, out, count): SelectIo<'_, T>,
    cut: T,
    stable: bool,
    want: u64,
    what: &str,
    failures: &mut Vec<String>,
) -> Result<f64, BoxError> {
    let got = if stable {
        select.select_if_stable(input, GreaterThan(cut), &mut *out)?
    } else {
        select.select_if(input, GreaterThan(cut), &mut *out)?
    };
    if got != want {
        failures.push(format!("{what}: {got} selected, want {want}"));
    }
    time(gpu, stream, |s| {
        // SAFETY: the buffers live until the timing synchronizes.
        unsafe {
            if stable {
                select.select_if_stable_async(input, GreaterThan(cut), &mut *out, &mut *count, s)?
            } else {
                select.select_if_async(input, GreaterThan(cut), &mut *out, &mut *count, s)?
            }
        }
        Ok(())
    })
}
