//! [`Pinned`]: page-locked host memory for the results of blocking calls. It is mapped into the device's
//! address space, so a kernel can write a result straight into it and the host read it after a stream
//! synchronize: no copy on the stream at all. Where a kernel cannot write it (an atomic result), a copy
//! into page-locked memory is still one DMA the stream runs; into pageable memory the driver would stage it
//! through a buffer of its own first, which costs microseconds per blocking call.
use std::ffi::c_void;

use cust::sys;

use crate::error::{Result, check};

/// `bytes` of page-locked host memory, portable across contexts and mapped into the current context's
/// device where it can map host memory.
pub(crate) struct Pinned {
    host: *mut c_void,
    bytes: usize,
    /// The device address of the mapping, if any.
    device: Option<u64>,
}

impl Pinned {
    /// Allocates in the current context (which must exist).
    pub fn new(bytes: usize) -> Result<Self> {
        let alloc = |flags| {
            let mut host = std::ptr::null_mut();
            // SAFETY: writes the new allocation's address into `host`; freed in `drop`.
            check(unsafe { sys::cuMemHostAlloc(&mut host, bytes.max(1), flags) }).map(|()| host)
        };
        let portable = sys::CU_MEMHOSTALLOC_PORTABLE;
        // A driver that refuses the mapping still gives plain page-locked memory, which the copy serves.
        let Ok(host) = alloc(portable | sys::CU_MEMHOSTALLOC_DEVICEMAP) else {
            return Ok(Pinned {
                host: alloc(portable)?,
                bytes,
                device: None,
            });
        };
        let mut device = 0;
        // SAFETY: `host` was allocated above with DEVICEMAP; the driver writes one address.
        let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) };
        let device = match check(mapped) {
            Ok(()) => (device != 0).then_some(device),
            // A device that cannot map host memory: the copy path serves it.
            Err(e)
                if [
                    sys::CUresult::CUDA_ERROR_INVALID_VALUE as u32,
                    sys::CUresult::CUDA_ERROR_NOT_SUPPORTED as u32,
                ]
                .contains(&e.code) =>
            {
                None
            }
            Err(e) => {
                // SAFETY: allocated above and not handed out.
                let _ = unsafe { sys::cuMemFreeHost(host) };
                return Err(e.into());
            }
        };
        Ok(Pinned {
            host,
            bytes,
            device,
        })
    }

    /// The device address a kernel can write the memory at, where the device maps it.
    pub fn device_ptr(&self) -> Option<u64> {
        self.device
    }

    /// The host address, for a copy into it.
    pub fn as_mut_ptr(&self) -> *mut c_void {
        self.host
    }

    /// Its size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// The first `T` of the memory.
    ///
    /// # Safety
    /// A `T` must have been written there (by a copy or a kernel the caller has waited for).
    pub unsafe fn read<T: Copy>(&self) -> T {
        debug_assert!(size_of::<T>() <= self.bytes);
        // SAFETY: forwarded to the caller; the allocation is page-aligned and at least `size_of::<T>()` long.
        unsafe { (self.host as *const T).read_volatile() }
    }
}

// SAFETY: the allocation is plain host memory owned by this value; it is freed once, in `drop`, and the
// driver call that frees it may come from any thread.
unsafe impl Send for Pinned {}
// SAFETY: `&Pinned` only reads the address; reads of the memory are `unsafe` and the caller's to order.
unsafe impl Sync for Pinned {}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: allocated by `cuMemHostAlloc` in `new`, freed once; nothing to report a failure to.
        let _ = unsafe { sys::cuMemFreeHost(self.host) };
    }
}
