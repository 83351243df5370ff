//! The seed's teaching kernels v0–v5 against the f64 reference (so the sanitizer runs cover them too).
//! Ignored without a GPU.
mod common;

use common::*;
use cust::memory::DeviceBuffer;
use reduce_host::seed::{SeedReduce, SeedVersion};
use reduce_host::{DeviceView, Error};

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn every_version_sums_correctly() {
    let gpu = reduce_host::Gpu::new().expect("GPU tests need a CUDA device");
    let mut seed = SeedReduce::with_gpu(&gpu).unwrap();
    for &n in [
        1usize,
        2,
        255,
        256,
        257,
        511,
        512,
        513,
        1000,
        100_003,
        (1 << 22) + 3,
    ]
    .iter()
    .filter(|n| **n <= max_n())
    {
        let host = random(n, n as u64);
        let buf = DeviceBuffer::from_slice(&host).unwrap();
        for v in SeedVersion::ALL {
            check_sum(seed.sum(v, &buf).unwrap(), &host, &format!("{v:?} n={n}"));
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn v5_refuses_a_misaligned_input() {
    let gpu = reduce_host::Gpu::new().expect("GPU tests need a CUDA device");
    let mut seed = SeedReduce::with_gpu(&gpu).unwrap();
    let buf = DeviceBuffer::from_slice(&random(100, 1)).unwrap();
    assert!(matches!(
        seed.sum(SeedVersion::V5, DeviceView::from(&buf).slice(1..)),
        Err(Error::InvalidArgument(_))
    ));
    // The scalar versions take any offset.
    let host = random(100, 1);
    check_sum(
        seed.sum(SeedVersion::V3, DeviceView::from(&buf).slice(1..))
            .unwrap(),
        &host[1..],
        "v3 offset 1",
    );
}
