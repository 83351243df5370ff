//! [`Pinned`]: page-locked host memory for the results of blocking calls. A copy from the device into
//! page-locked memory is one DMA the stream runs; into pageable memory the driver stages it through a
//! buffer of its own first, which costs microseconds per blocking call.
use std::ffi::c_void;

use cust::sys;

use crate::error::{Result, check};

/// `bytes` of page-locked host memory, portable across contexts.
pub(crate) struct Pinned {
    host: *mut c_void,
    bytes: usize,
}

impl Pinned {
    pub fn new(bytes: usize) -> Result<Self> {
        let mut host = std::ptr::null_mut();
        // SAFETY: writes the new allocation's address into `host`; freed in `drop`.
        check(unsafe {
            sys::cuMemHostAlloc(&mut host, bytes.max(1), sys::CU_MEMHOSTALLOC_PORTABLE)
        })?;
        Ok(Pinned { host, bytes })
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
    /// A `T` must have been written there (by a copy the caller has waited for).
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
