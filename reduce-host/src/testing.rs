//! A launch path for kernels-gpu's one-block test kernels (`test_*`), so the GPU tests can check device
//! primitives lane by lane. Not part of the supported API.
use std::ffi::{CString, c_void};

use cust::memory::{CopyDestination, DeviceBuffer, DeviceCopy};

use crate::driver::{self, Launch};
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::reduce::SMEM_BYTES;

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
    /// Runs the test kernel `name` (`test_…`, parameters `(input: *const X, out: *mut X, arg: u32)`) as one
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
        if !name.starts_with("test_")
            || !threads.is_multiple_of(32)
            || !(32..=1024).contains(&threads)
        {
            return Err(Error::InvalidArgument(format!(
                "{name} on {threads} lanes: only `test_` kernels, on 32..=1024 lanes in whole warps"
            )));
        }
        let name = CString::new(name)
            .map_err(|_| Error::InvalidArgument("a kernel name holds no NUL".into()))?;
        let stream = self.stream()?;
        let f = self.function(&name)?;
        let d_in = DeviceBuffer::from_slice(input)?;
        let d_out = DeviceBuffer::from_slice(&vec![X::default(); threads])?;
        let (mut p_in, mut p_out) = (
            d_in.as_device_ptr().as_raw(),
            d_out.as_device_ptr().as_raw(),
        );
        let mut arg = arg;
        let shape = Launch {
            grid: 1,
            block: threads as u32,
            shared_bytes: SMEM_BYTES.max(4 * threads as u32),
        };
        // SAFETY: every `test_` kernel takes (input, out, arg: u32), reads input[t] and writes out[t] for
        // t < blockDim.x = the length of both buffers, and uses at most 4 bytes of shared memory per thread.
        unsafe {
            driver::launch(
                f,
                shape,
                &stream,
                &mut [
                    &mut p_in as *mut u64 as *mut c_void,
                    &mut p_out as *mut u64 as *mut c_void,
                    &mut arg as *mut u32 as *mut c_void,
                ],
            )?
        };
        stream.synchronize()?;
        let mut out = vec![X::default(); threads];
        d_out.copy_to(&mut out[..])?;
        Ok(out)
    }
}
