//! The hooks of the `testing` feature on [`Gpu`]: the spin kernel the benchmarks queue work behind, and a
//! launch path for kernels-gpu's one-block test kernels (`test_*`), so the GPU tests can check device
//! primitives lane by lane. Not part of the supported API.
use cust::memory::{CopyDestination, DeviceBuffer, DeviceCopy};
use reduce_contract::kernels::TestKernel;
use reduce_contract::layout::SMEM_BYTES;
use reduce_contract::params::{LaneParams, SpinParams};

use crate::dispatch;
use crate::driver::Launch;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::stream::StreamRef;

mod sealed {
    pub trait Sealed {}
}

/// A 4-byte word a test kernel reads and writes: `u32` or `f32`.
pub trait LaneWord: DeviceCopy + Copy + Default + sealed::Sealed {}
impl sealed::Sealed for u32 {}
impl sealed::Sealed for f32 {}
impl LaneWord for u32 {}
impl LaneWord for f32 {}

impl Gpu {
    /// Enqueues a one-thread kernel that busy-waits `ns` nanoseconds on `stream`. Benchmarks put it ahead of
    /// timed work so the host can queue that work before the GPU reaches it. At most one second, so a
    /// mistaken value cannot hang the GPU.
    #[doc(hidden)]
    pub fn spin_async<'s>(&self, ns: u64, stream: impl Into<StreamRef<'s>>) -> Result<()> {
        if ns > 1_000_000_000 {
            return Err(Error::InvalidArgument(format!(
                "spin of {ns} ns: at most one second"
            )));
        }
        let _current = self.make_current()?;
        let shape = crate::driver::Launch {
            grid: 1,
            block: 32,
            shared_bytes: 0,
        };
        // SAFETY: `util_spin` touches no memory.
        unsafe {
            crate::dispatch::launch(
                self,
                reduce_contract::kernels::Spin,
                shape,
                stream.into(),
                SpinParams { ns },
            )
        }
    }

    /// Runs the test kernel `name` (`test_…`, taking `LaneParams<X>`) as one
    /// block with a thread per element of `input`, and returns what each thread wrote. `input.len()` must
    /// be a multiple of 32 in 32..=1024. Shared memory: 4 bytes per thread, at least the usual amount.
    #[doc(hidden)]
    pub fn run_lane_kernel<X: LaneWord>(
        &self,
        name: &str,
        input: &[X],
        arg: u32,
    ) -> Result<Vec<X>> {
        let threads = input.len();
        let kernel = TestKernel::named(name).filter(|_| name.starts_with("test_"));
        let Some(kernel) =
            kernel.filter(|_| threads.is_multiple_of(32) && (32..=1024).contains(&threads))
        else {
            return Err(Error::InvalidArgument(format!(
                "{name} on {threads} lanes: only `test_` kernels, on 32..=1024 lanes in whole warps"
            )));
        };
        let _current = self.make_current()?;
        // Blocking, so it waits for the copies below, which cust makes on the legacy default stream.
        let stream = self.handle_stream()?;
        let d_in = DeviceBuffer::from_slice(input)?;
        let d_out = DeviceBuffer::from_slice(&vec![X::default(); threads])?;
        let params = LaneParams {
            input: d_in.as_device_ptr().as_raw() as *const X,
            out: d_out.as_device_ptr().as_raw() as *mut X,
            arg,
        };
        let shape = Launch {
            grid: 1,
            block: threads as u32,
            shared_bytes: SMEM_BYTES.max(4 * threads as u32),
        };
        // SAFETY: every `test_` kernel reads input[t] and writes out[t] for t < blockDim.x = the length of
        // both buffers, and uses at most 4 bytes of shared memory per thread.
        unsafe { dispatch::launch(self, kernel, shape, StreamRef::from(&*stream), params)? };
        stream.synchronize()?;
        let mut out = vec![X::default(); threads];
        d_out.copy_to(&mut out[..])?;
        Ok(out)
    }
}
