//! Programmatic dependent launch (sm_90 and later, CUDA 12.3+ drivers): `cuLaunchKernelEx` with
//! `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`, resolved from the driver at run time because the
//! `cust` bindings (CUDA 11) predate it.
use std::ffi::c_void;

use cust::sys::{self, CUfunction};

use super::Launch;
use crate::error::{Result, check, check_code};
use crate::stream::StreamRef;

/// How a launch is ordered after the work before it on its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    /// Starts once everything before it has completed: the stream's ordinary rule.
    Stream,
    /// Programmatic dependent launch (sm_90 and later): the kernel's blocks may start as soon as the kernel
    /// before it calls `griddepcontrol.launch_dependents`, and must themselves wait (`griddepcontrol.wait`,
    /// `kernels_gpu::arch::wait_for_primary`) before touching memory that kernel writes. Only for kernels
    /// that do, built from sm_90 PTX.
    Programmatic,
}

/// `CUlaunchAttribute`: an id, padding to 8 bytes, and a 64-byte value union.
#[repr(C)]
struct LaunchAttribute {
    id: u32,
    _pad: u32,
    value: AttributeValue,
}

#[repr(C, align(8))]
struct AttributeValue([u32; 16]);

/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`; its value is the int at the union's start.
const PROGRAMMATIC_STREAM_SERIALIZATION: u32 = 6;

/// `CUlaunchConfig`.
#[repr(C)]
struct LaunchConfig {
    grid: [u32; 3],
    block: [u32; 3],
    shared_bytes: u32,
    stream: sys::CUstream,
    attrs: *mut LaunchAttribute,
    num_attrs: u32,
}

// The layouts of CUDA 12's `cuda.h` (64-bit): a field out of place would hand the driver garbage, which no
// test without a GPU would see.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<LaunchAttribute>() == 72 && offset_of!(LaunchAttribute, value) == 8);
    assert!(offset_of!(LaunchConfig, shared_bytes) == 24);
    assert!(offset_of!(LaunchConfig, stream) == 32);
    assert!(offset_of!(LaunchConfig, attrs) == 40);
    assert!(offset_of!(LaunchConfig, num_attrs) == 48);
    assert!(size_of::<LaunchConfig>() == 56);
};

/// `cuLaunchKernelEx`. It returns a plain `int`: a newer driver may answer with a `CUresult` that the
/// `cust` enum (CUDA 11) lacks, and an enum holding it would be undefined behaviour.
type LaunchKernelEx = unsafe extern "C" fn(
    *const LaunchConfig,
    CUfunction,
    *mut *mut c_void,
    *mut *mut c_void,
) -> i32;

/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM`: the entry point with the default stream meaning the legacy one, as
/// for every other call the crate makes.
const GET_PROC_ADDRESS_LEGACY_STREAM: u64 = 1;

/// `cuLaunchKernelEx`, asked of the driver once: the `cust` bindings predate it, and linking it by name
/// would stop the whole binary from loading on an older driver. `None` below CUDA 12.3, the first driver
/// to keep programmatic edges when a stream is captured into a graph (and where the call is missing).
fn launch_kernel_ex() -> Option<LaunchKernelEx> {
    static PFN: std::sync::OnceLock<Option<LaunchKernelEx>> = std::sync::OnceLock::new();
    *PFN.get_or_init(|| {
        let mut version = 0;
        // SAFETY: the driver writes one int.
        let known = check(unsafe { sys::cuDriverGetVersion(&mut version) }).is_ok();
        if !known || version < 12030 {
            return None;
        }
        let mut pfn = std::ptr::null_mut();
        // SAFETY: a NUL-terminated name and one pointer written; the driver is initialised (a context
        // exists before any launch).
        let r = unsafe {
            sys::cuGetProcAddress(
                c"cuLaunchKernelEx".as_ptr(),
                &mut pfn,
                12000,
                GET_PROC_ADDRESS_LEGACY_STREAM,
            )
        };
        (check(r).is_ok() && !pfn.is_null()).then(|| {
            // SAFETY: the driver returned its `cuLaunchKernelEx`, whose C signature `LaunchKernelEx` is.
            unsafe { std::mem::transmute::<*mut c_void, LaunchKernelEx>(pfn) }
        })
    })
}

/// Whether this process's driver takes programmatic dependent launches (CUDA 12.3 or newer).
pub(crate) fn dependent_launch_supported() -> bool {
    launch_kernel_ex().is_some()
}

/// Launches `f` with `args` on `stream` as a programmatic dependent of the kernel before it, or returns
/// `None` where the driver cannot (the caller then launches it in plain stream order).
///
/// # Safety
/// As `super::launch` with [`Order::Programmatic`]: `args` holds the kernel's one parameter, valid as that
/// function requires, and the kernel waits for its predecessor before it touches memory.
pub(super) unsafe fn launch(
    f: CUfunction,
    shape: Launch,
    stream: StreamRef<'_>,
    args: &mut [*mut c_void; 1],
) -> Option<Result<()>> {
    let launch_ex = launch_kernel_ex()?;
    let mut value = AttributeValue([0; 16]);
    value.0[0] = 1; // programmaticStreamSerializationAllowed
    let mut attr = LaunchAttribute {
        id: PROGRAMMATIC_STREAM_SERIALIZATION,
        _pad: 0,
        value,
    };
    let config = LaunchConfig {
        grid: [shape.grid, 1, 1],
        block: [shape.block, 1, 1],
        shared_bytes: shape.shared_bytes,
        stream: stream.as_raw(),
        attrs: &mut attr,
        num_attrs: 1,
    };
    // SAFETY: as `cuLaunchKernel` in `super::launch`, plus the config and its one attribute, which outlive
    // the call; the kernel waits for its predecessor (the caller).
    let r = unsafe { launch_ex(&config, f, args.as_mut_ptr(), std::ptr::null_mut()) };
    Some(check_code(r, "cuLaunchKernelEx").map_err(Into::into))
}
