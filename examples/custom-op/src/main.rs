//! Runs the example's operators on the GPU and checks each against the CPU: the FP8 scale (`AbsMax`), the
//! L2 norm (`SumSquares`) and the mean and variance (`Welford`), over f32 and bf16, device-wide and per row.
//! Prints "correct" when every check passes; without a GPU it says so and exits 0.
use custom_op::{
    AbsMaxBf16, AbsMaxF32, KERNELS, NormF32, WelfordBf16, WelfordF32, close, cpu, mean_var_close,
};
use custom_ops::{Outside, Welford};
use reduce_host::cust::memory::DeviceBuffer;
use reduce_host::custom::SelectOp;
use reduce_host::custom::{Kernels, OpAcc, ReduceOp};
use reduce_host::{BF16, DeviceReduce, DeviceSegmentedReduce, Error, Segments};

fn main() -> Result<(), Error> {
    let mut reduce = match DeviceReduce::new() {
        Ok(r) => r,
        Err(Error::NoDevice(e)) => {
            println!("custom-op: built, kernels embedded; no CUDA GPU to run on ({e})");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let kernels = Kernels::load(reduce.gpu(), &KERNELS)?;

    // 2^20 + 3 values around 1e6 (where Σx² − n·mean² would lose every digit of the variance).
    let n = (1 << 20) + 3;
    let xs: Vec<f32> = (0..n)
        .map(|i| {
            1e6 + ((i as u64).wrapping_mul(2654435761) % 1000) as f32 / 1000.0
                - 0.5 * (i % 7) as f32
        })
        .collect();
    let d = DeviceBuffer::from_slice(&xs)?;
    let mut ok = true;
    let mut check =
        |what: &str, good: bool, gpu: &dyn std::fmt::Debug, cpu: &dyn std::fmt::Debug| {
            if !good {
                eprintln!("custom-op: {what}: GPU {gpu:?}, CPU {cpu:?}");
            }
            ok &= good;
        };
    let num = |gpu: f64, cpu: f64, rel: f64| close(gpu, cpu, rel);

    let scale = reduce.reduce_with::<AbsMaxF32>(&kernels, &d)?;
    let want = AbsMaxF32::finalize(cpu::<AbsMaxF32>(&xs));
    check("absmax f32", scale == want, &scale, &want);
    let norm = reduce.reduce_with::<NormF32>(&kernels, &d)?;
    // Against Σx² in f64: a sequential f32 sum of 2^20 squares near 1e12 is itself off by a part in 10^3,
    // where the GPU's tree is within a part in 10^6.
    let exact = xs.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    check("norm f32", num(norm as f64, exact, 1e-5), &norm, &exact);
    let mv = reduce.reduce_with::<WelfordF32>(&kernels, &d)?;
    let want = WelfordF32::finalize(cpu::<WelfordF32>(&xs));
    check("welford f32", mean_var_close(&mv, &want), &mv, &want);

    let hs: Vec<BF16> = xs
        .iter()
        .map(|&x| BF16(half::bf16::from_f32(x - 1e6)))
        .collect();
    let dh = DeviceBuffer::from_slice(&hs)?;
    let scale = reduce.reduce_with::<AbsMaxBf16>(&kernels, &dh)?;
    let want = AbsMaxBf16::finalize(cpu::<AbsMaxBf16>(&hs));
    check("absmax bf16", scale == want, &scale, &want);
    let mv = reduce.reduce_with::<WelfordBf16>(&kernels, &dh)?;
    let want = WelfordBf16::finalize(cpu::<WelfordBf16>(&hs));
    check("welford bf16", mean_var_close(&mv, &want), &mv, &want);

    // LayerNorm statistics of bf16 rows: 64 rows of 4096, one accumulator each.
    let (rows, cols) = (64usize, 4096usize);
    let mut segmented = DeviceSegmentedReduce::with_gpu(reduce.gpu())?;
    let mut out = DeviceBuffer::from_slice(&vec![OpAcc::default(); rows])?;
    segmented.reduce_with::<WelfordBf16>(
        &kernels,
        &dh,
        Segments::rows(rows, cols, cols),
        &mut out,
    )?;
    let got = out.as_host_vec()?;
    for (r, acc) in got.iter().enumerate() {
        let row = &hs[r * cols..(r + 1) * cols];
        let (g, w) = (
            Welford::<BF16>::finalize(acc.0),
            Welford::<BF16>::finalize(cpu::<WelfordBf16>(row)),
        );
        check(&format!("row {r}"), mean_var_close(&g, &w), &g, &w);
    }
    // The outliers of the bf16 input, in order, by the user's predicate.
    let mut select = reduce_host::DeviceSelect::with_gpu(reduce.gpu())?;
    let mut kept = DeviceBuffer::from_slice(&vec![BF16::default(); hs.len()])?;
    let threshold = BF16(half::bf16::from_f32(0.49));
    let count = select
        .select_if_stable_with::<Outside<BF16>>(&kernels, &dh, threshold, &mut kept)?
        as usize;
    let want: Vec<u16> = hs
        .iter()
        .filter(|&&x| Outside::<BF16>::keep(threshold, x))
        .map(|x| x.0.to_bits())
        .collect();
    let got: Vec<u16> = kept.as_host_vec()?[..count]
        .iter()
        .map(|x| x.0.to_bits())
        .collect();
    check("outside bf16", got == want, &got.len(), &want.len());

    if ok {
        println!("custom-op: correct ({:?})", kernels.code());
        Ok(())
    } else {
        Err(Error::InvalidArgument(
            "custom-op: a result differs from the CPU's".into(),
        ))
    }
}
