//! [`Gpu`]: one device and its kernels, shared by every handle ([`DeviceReduce`](crate::DeviceReduce) and
//! the others) so each kernel module is loaded once per device, when first needed.
use std::sync::{Arc, Mutex, OnceLock};

use cust::context::Context;
use cust::device::{Device, DeviceAttribute};
use cust::stream::{Stream, StreamFlags};
use cust::sys;
use reduce_contract::Kernel;

use crate::driver::{Function, Module};
use crate::error::{DriverError, Error, Result, check};
use crate::images::{self, Code, Image};

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
#[non_exhaustive]
pub struct DeviceInfo {
    /// The device's ordinal, as `Gpu::with_device` takes it.
    pub ordinal: u32,
    /// Name reported by the driver.
    pub name: String,
    /// Compute capability as (major, minor).
    pub compute_capability: (u32, u32),
    /// Number of streaming multiprocessors.
    pub sm_count: u32,
    /// The device's UUID (as `nvidia-smi -L` shows it): the same GPU under every ordinal and in every
    /// process, so sharded calls can tell whether two ranks share one.
    pub uuid: [u8; 16],
    /// The kernel code this device runs: a cubin built ahead of time, or PTX the driver JIT-compiles on
    /// first use of each module (see [`Code`]).
    pub code: Code,
}

impl DeviceInfo {
    /// Compute capability as `major * 10 + minor`.
    pub fn cc(&self) -> u32 {
        self.compute_capability.0 * 10 + self.compute_capability.1
    }
}

/// A CUDA device (its primary context) and the kernels it runs. Cloning is cheap and shares everything;
/// memory allocated by `cust` on the same device works with every handle made from it.
///
/// Opening a `Gpu` loads no kernels: each module (say, the f32 sum's four kernels) is loaded the first
/// time a call needs it, and resolved once. A program that only sums never loads the histogram or
/// compaction kernels.
#[derive(Clone)]
pub struct Gpu(Arc<Inner>);

struct Inner {
    image: &'static Image,
    /// One slot per `reduce_contract::Module`, filled on first use.
    modules: Box<[OnceLock<Module>]>,
    /// Serialises loads, so two threads never load the same module twice.
    loading: Mutex<()>,
    info: DeviceInfo,
    /// The most shared memory one block may have, opted in (`cuFuncSetAttribute`) by kernels that need
    /// more than the default 48 KiB.
    shared_optin: u32,
    /// Retained for the rest of the process, never released: buffers and streams the user made on this device
    /// may be dropped after the last handle, and they need the primary context alive (the CUDA runtime keeps
    /// it until exit the same way).
    ctx: std::mem::ManuallyDrop<Context>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The modules are unloaded here, in their context; then the caller's context is current again.
        // Nothing to report a failure to.
        let _current = Current::enter(self.ctx.as_raw());
        self.modules = Box::new([]);
    }
}

/// The device's context made current for the guard's life; the thread's previous context is restored
/// when it drops.
#[must_use = "the context stays current only while the guard lives"]
pub(crate) struct Current {
    previous: sys::CUcontext,
    ours: sys::CUcontext,
}

impl Current {
    fn enter(ours: sys::CUcontext) -> Result<Self> {
        let mut previous = std::ptr::null_mut();
        // SAFETY: writes the thread's current context (or null) into `previous`.
        check(unsafe { sys::cuCtxGetCurrent(&mut previous) })?;
        if previous != ours {
            // SAFETY: `ours` is a primary context retained for the life of the process.
            check(unsafe { sys::cuCtxSetCurrent(ours) })?;
        }
        Ok(Current { previous, ours })
    }
}

impl Drop for Current {
    fn drop(&mut self) {
        // A thread with no context before keeps ours (see `Gpu::make_current`).
        if !self.previous.is_null() && self.previous != self.ours {
            // SAFETY: `previous` was current on this thread when the guard was made; the caller owns it and
            // it outlives the guard (a guard lives within one call). Nothing to report a failure to.
            let _ = unsafe { sys::cuCtxSetCurrent(self.previous) };
        }
    }
}

impl Gpu {
    /// Device 0.
    pub fn new() -> Result<Self> {
        Self::with_device(0)
    }

    /// The device with this ordinal: retains its primary context and picks the kernel image it runs (the
    /// newest matching cubin, else PTX; `REDUCE_HOST_FORCE_PTX=1` forces PTX). Loads no kernels yet. A
    /// thread with no current context is left with the device's, so buffers can be made right after; a
    /// context the caller made current stays current.
    pub fn with_device(ordinal: u32) -> Result<Self> {
        let no_device = |e: cust::error::CudaError| Error::NoDevice(DriverError::from(e));
        cust::init(cust::CudaFlags::empty()).map_err(no_device)?;
        let device = Device::get_device(ordinal).map_err(no_device)?;
        // `Context::new` makes the primary context current; a caller's own context goes back, as after
        // every call (a thread that had none keeps the new one; see `make_current`).
        let mut previous = std::ptr::null_mut();
        // SAFETY: writes the thread's current context (or null) into `previous`.
        check(unsafe { sys::cuCtxGetCurrent(&mut previous) })?;
        let ctx = Context::new(device)?;
        if !previous.is_null() && previous != ctx.as_raw() {
            // SAFETY: `previous` was current on this thread just above; the caller owns it.
            check(unsafe { sys::cuCtxSetCurrent(previous) })?;
        }
        let attr = |a| device.get_attribute(a).map(|v| v as u32);
        let major = attr(DeviceAttribute::ComputeCapabilityMajor)?;
        let minor = attr(DeviceAttribute::ComputeCapabilityMinor)?;
        let name = device.name()?;
        let Some(image) = images::choose(major, minor, images::force_ptx()) else {
            return Err(Error::UnsupportedDevice { name, major, minor });
        };
        let sm_count = attr(DeviceAttribute::MultiprocessorCount)?;
        let mut shared_optin = 0i32;
        // SAFETY: `device` is a valid device; the driver writes one int.
        check(unsafe {
            sys::cuDeviceGetAttribute(
                &mut shared_optin,
                sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                device.as_raw(),
            )
        })?;
        let mut uuid = sys::CUuuid { bytes: [0; 16] };
        // SAFETY: `device` is a valid device; the driver writes 16 bytes.
        check(unsafe { sys::cuDeviceGetUuid(&mut uuid, device.as_raw()) })?;
        let info = DeviceInfo {
            ordinal,
            name,
            compute_capability: (major, minor),
            sm_count,
            uuid: uuid.bytes.map(|b| b as u8),
            code: image.code(),
        };
        Ok(Gpu(Arc::new(Inner {
            image,
            modules: (0..reduce_contract::Module::COUNT)
                .map(|_| OnceLock::new())
                .collect(),
            loading: Mutex::new(()),
            info,
            shared_optin: shared_optin.max(48 * 1024) as u32,
            ctx: std::mem::ManuallyDrop::new(ctx),
        })))
    }

    /// What is known about the device.
    pub fn info(&self) -> &DeviceInfo {
        &self.0.info
    }

    /// The most dynamic shared memory one block may be launched with (the opt-in limit: 227 KiB on
    /// sm_90, 64 KiB on sm_75).
    pub(crate) fn shared_optin(&self) -> u32 {
        self.0.shared_optin
    }

    /// Whether kernels that wait for their predecessor go as programmatic dependent launches: only code
    /// built from the sm_90 PTX has the wait (a cubin's arch says so: build.rs builds every cubin of sm_90
    /// and later from that PTX, and checks it), only sm_90 and later run it, and only drivers of CUDA 12.3
    /// or newer take the launch.
    pub(crate) fn dependent_launch(&self) -> bool {
        dependent_launch_of(self.0.info.code)
    }

    /// Makes the device's context current on this thread until the returned guard drops, which puts the
    /// caller's context back: every handle method does this first, so a program that keeps its own context
    /// current finds it unchanged after the call. A thread that had no current context keeps this one, as
    /// the CUDA runtime does, so buffers can be made on it right after a call.
    pub(crate) fn make_current(&self) -> Result<Current> {
        Current::enter(self.0.ctx.as_raw())
    }

    /// The device's primary context, which every handle on this `Gpu` runs in.
    pub(crate) fn raw_context(&self) -> sys::CUcontext {
        self.0.ctx.as_raw()
    }

    /// A kernel, its module loaded (and resolved) the first time. The context must be current.
    pub(crate) fn function(&self, kernel: impl Kernel) -> Result<&Function> {
        let module = kernel.module();
        let loaded = &self.0.modules[module.index()];
        if let Some(m) = loaded.get() {
            return Ok(m.function(kernel.slot()));
        }
        let _guard = self.0.loading.lock().unwrap_or_else(|p| p.into_inner());
        if loaded.get().is_none() {
            let image = self.0.image.module(module)?;
            let _ = loaded.set(Module::load(&image, module, self.0.image.code())?);
        }
        Ok(loaded.get().expect("set above").function(kernel.slot()))
    }

    /// A new non-blocking stream on this device.
    pub fn stream(&self) -> Result<Stream> {
        let _current = self.make_current()?;
        Ok(Stream::new(StreamFlags::NON_BLOCKING, None)?)
    }

    /// The stream a handle's blocking calls run on: a blocking stream, so it waits for work the caller
    /// queued on the legacy default stream (cust's `DeviceBuffer::from_slice` copies there) before it runs.
    pub(crate) fn handle_stream(&self) -> Result<InContext<Stream>> {
        let _current = self.make_current()?;
        Ok(InContext::new(
            self,
            Stream::new(StreamFlags::DEFAULT, None)?,
        ))
    }
}

/// Whether kernels loaded from `code` (the built-in image, or a user's kernel crate, which `reduce-builder`
/// assembles by the same rule) go as programmatic dependent launches: see [`Gpu::dependent_launch`].
pub(crate) fn dependent_launch_of(code: Code) -> bool {
    code.arch() >= 90 && crate::driver::dependent_launch_supported()
}

/// Device resources (buffers, streams, events) that are freed in their own context: `T` drops with the
/// device's context current, and the caller's context is current again afterwards. Handles hold their
/// resources this way, so dropping a handle leaves the thread's context as it was.
pub(crate) struct InContext<T> {
    value: std::mem::ManuallyDrop<T>,
    gpu: Gpu,
}

impl<T> InContext<T> {
    pub fn new(gpu: &Gpu, value: T) -> Self {
        InContext {
            value: std::mem::ManuallyDrop::new(value),
            gpu: gpu.clone(),
        }
    }
}

impl<T> std::ops::Deref for InContext<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> std::ops::DerefMut for InContext<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T> Drop for InContext<T> {
    fn drop(&mut self) {
        let _current = self.gpu.make_current();
        // SAFETY: dropped once, here; the field is never used again.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.value) }
    }
}
