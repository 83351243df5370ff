//! [`Gpu`]: one device with the kernels loaded, shared by every handle ([`DeviceReduce`](crate::DeviceReduce)
//! and the others) so the PTX is loaded and JIT-compiled once per device.
use std::ffi::CStr;
use std::sync::Arc;

use cust::context::{Context, CurrentContext};
use cust::device::{Device, DeviceAttribute};
use cust::stream::{Stream, StreamFlags};
use cust::sys::CUfunction;

use crate::driver::Module;
use crate::error::{DriverError, Error, Result};
use crate::ptx;

/// The members every handle (`DeviceReduce`, `DeviceHistogram`, `DeviceSelect`) has in the same form: `new`
/// on device 0, its device, and the stream its blocking calls run on. The type needs `with_gpu`, and fields
/// `gpu: Gpu` and `stream: Stream`.
macro_rules! handle_basics {
    ($t:ty) => {
        impl $t {
            /// A handle on device 0 (opens it with [`Gpu::new`](crate::Gpu::new)).
            pub fn new() -> crate::Result<Self> {
                Self::with_gpu(&crate::Gpu::new()?)
            }

            /// What the handle knows about its device.
            pub fn device_info(&self) -> &crate::DeviceInfo {
                self.gpu.info()
            }

            /// The device this handle runs on.
            pub fn gpu(&self) -> &crate::Gpu {
                &self.gpu
            }

            /// The stream blocking calls run on.
            pub fn stream(&self) -> &cust::stream::Stream {
                &self.stream
            }
        }
    };
}

/// What was learned about the device when it was opened.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// Name reported by the driver.
    pub name: String,
    /// Compute capability as (major, minor).
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// The arch of the PTX module that was loaded (e.g. 90).
    pub ptx_arch: u32,
}

impl DeviceInfo {
    /// Compute capability as `major * 10 + minor`.
    pub fn cc(&self) -> u32 {
        self.compute_capability.0 * 10 + self.compute_capability.1
    }
}

/// A CUDA device (its primary context) with this crate's kernels loaded. Cloning is cheap and shares the
/// module; memory allocated by `cust` on the same device works with every handle made from it.
#[derive(Clone)]
pub struct Gpu(Arc<Inner>);

struct Inner {
    module: Module,
    info: DeviceInfo,
    /// Retained for the rest of the process, never released: buffers and streams the user made on this device
    /// may be dropped after the last handle, and they need the primary context alive (the CUDA runtime keeps
    /// it until exit the same way).
    ctx: std::mem::ManuallyDrop<Context>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The module is unloaded next: its context must be current. Nothing to report a failure to.
        let _ = CurrentContext::set_current(&*self.ctx);
    }
}

impl Gpu {
    /// Device 0.
    pub fn new() -> Result<Self> {
        Self::with_device(0)
    }

    /// The device with this ordinal: retains its primary context, picks the newest PTX module the device
    /// can run and loads it.
    pub fn with_device(ordinal: u32) -> Result<Self> {
        let no_device = |e: cust::error::CudaError| Error::NoDevice(DriverError::from(e));
        cust::init(cust::CudaFlags::empty()).map_err(no_device)?;
        let device = Device::get_device(ordinal).map_err(no_device)?;
        let ctx = Context::new(device)?;
        let attr = |a| device.get_attribute(a).map(|v| v as u32);
        let major = attr(DeviceAttribute::ComputeCapabilityMajor)?;
        let minor = attr(DeviceAttribute::ComputeCapabilityMinor)?;
        let name = device.name()?;
        let module = match ptx::best_for(major * 10 + minor) {
            Some(m) => Module::load(m)?,
            None => return Err(Error::UnsupportedDevice { name, major, minor }),
        };
        let sm_count = attr(DeviceAttribute::MultiprocessorCount)?;
        let info = DeviceInfo {
            name,
            compute_capability: (major, minor),
            sm_count,
            ptx_arch: module.arch,
        };
        Ok(Gpu(Arc::new(Inner {
            module,
            info,
            ctx: std::mem::ManuallyDrop::new(ctx),
        })))
    }

    /// What is known about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.0.info
    }

    /// Makes the device's context current on this thread (every handle method does this first).
    pub(crate) fn make_current(&self) -> Result<()> {
        Ok(CurrentContext::set_current(&*self.0.ctx)?)
    }

    /// A kernel of the loaded module.
    pub(crate) fn function(&self, name: &CStr) -> Result<CUfunction> {
        self.0.module.function(name)
    }

    /// Enqueues a one-thread kernel that busy-waits `ns` nanoseconds on `stream`. Benchmarks put it ahead of
    /// timed work so the host can queue that work before the GPU reaches it.
    pub fn spin_async(&self, ns: u64, stream: &Stream) -> Result<()> {
        self.make_current()?;
        let mut ns = ns;
        let shape = crate::driver::Launch {
            grid: 1,
            block: 32,
            shared_bytes: 0,
        };
        // SAFETY: `util_spin(ns: u64)` takes one u64 and touches no memory.
        unsafe {
            crate::driver::launch(
                self.function(c"util_spin")?,
                shape,
                stream,
                &mut [&mut ns as *mut u64 as *mut std::ffi::c_void],
            )
        }
    }

    /// A new non-blocking stream on this device.
    pub fn stream(&self) -> Result<Stream> {
        self.make_current()?;
        Ok(Stream::new(StreamFlags::NON_BLOCKING, None)?)
    }
}
