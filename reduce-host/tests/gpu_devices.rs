//! The handles and the caller's CUDA state: a call (and making a handle) leaves the caller's current
//! context as it was, memory the driver does not know or that another context owns is refused before any
//! kernel runs, a handle works on a thread with no context, and (on two GPUs) another device's memory is
//! refused too, without ending GPU work in the process. Ignored without a GPU; with one GPU, the two-GPU
//! test passes and says on stderr that it skipped.
use cust::memory::DeviceBuffer;
use cust::sys;
use reduce_host::{DeviceReduce, DeviceSelect, DeviceView, Error, Gpu};

fn current() -> sys::CUcontext {
    let mut ctx = std::ptr::null_mut();
    // SAFETY: writes the thread's current context into `ctx`.
    assert_eq!(
        unsafe { sys::cuCtxGetCurrent(&mut ctx) },
        sys::cudaError_enum::CUDA_SUCCESS
    );
    ctx
}

fn invalid_argument<T: std::fmt::Debug>(r: reduce_host::Result<T>, needle: &str) {
    match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(needle), "{m}"),
        other => panic!("expected InvalidArgument mentioning {needle:?}, got {other:?}"),
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn a_call_leaves_the_callers_context_current() {
    let mut reduce = DeviceReduce::new().unwrap();
    let x = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0]).unwrap();
    // The caller's own context (not the primary one the handle uses), current on this thread.
    let mut mine = std::ptr::null_mut();
    let device = 0;
    // SAFETY: creates a context and makes it current; destroyed below.
    let r = unsafe { sys::cuCtxCreate_v2(&mut mine, 0, device) };
    assert_eq!(r, sys::cudaError_enum::CUDA_SUCCESS);
    assert_eq!(current(), mine);
    assert_eq!(reduce.sum(&x).unwrap(), 6.0);
    assert_eq!(current(), mine, "the call replaced the caller's context");
    let other = DeviceReduce::new().unwrap();
    assert_eq!(
        current(),
        mine,
        "making a handle replaced the caller's context"
    );
    drop(other);
    // Memory of the caller's context, which the primary context cannot address: refused before any
    // kernel could fault on it.
    let theirs = DeviceBuffer::from_slice(&[1.0f32; 4096]).unwrap();
    invalid_argument(reduce.sum(&theirs), "other than its primary context");
    assert_eq!(reduce.sum(&x).unwrap(), 6.0);
    drop(theirs);
    drop(reduce);
    assert_eq!(
        current(),
        mine,
        "dropping the handle replaced the caller's context"
    );
    // SAFETY: created above, destroyed once; nothing uses it afterwards.
    assert_eq!(
        unsafe { sys::cuCtxDestroy_v2(mine) },
        sys::cudaError_enum::CUDA_SUCCESS
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn an_address_the_driver_does_not_know_is_refused() {
    let mut reduce = DeviceReduce::new().unwrap();
    // SAFETY (a lie the check must catch): an address nothing maps.
    let bogus = unsafe { DeviceView::<f32>::from_raw_parts(0x1000, 4) };
    invalid_argument(reduce.sum(bogus), "not memory the CUDA driver knows");
    // The context is intact: a later call works.
    let x = DeviceBuffer::from_slice(&[1.0f32, 2.0]).unwrap();
    assert_eq!(reduce.sum(&x).unwrap(), 3.0);
}

/// Whether the machine has at least two GPUs. With fewer, says on stderr that `test` is skipped, so a test
/// that needs two passes on a machine with one (the suite's `--include-ignored` run) and says why.
fn two_gpus(test: &str) -> bool {
    let count = cust::device::Device::num_devices().unwrap_or(0);
    if count < 2 {
        eprintln!("{test}: skipped, it needs two GPUs and this machine has {count}");
    }
    count >= 2
}

/// Before the check, this call raised "an illegal memory access" (700), and every later call failed with
/// 700 on both devices. On a machine with one GPU it passes without checking anything, and says so.
#[test]
#[ignore = "needs an NVIDIA GPU, and two to check anything: run with --include-ignored on a GPU machine"]
fn two_devices_another_devices_memory_is_refused() {
    let gpu0 = Gpu::with_device(0).unwrap(); // initialises the driver, which counting needs
    if !two_gpus("two_devices_another_devices_memory_is_refused") {
        return;
    }
    let x0 = DeviceBuffer::from_slice(&[1.0f32; 4096]).unwrap(); // device 0's context is current
    let gpu1 = Gpu::with_device(1).unwrap(); // leaves device 0's current
    let device1 = cust::device::Device::get_device(1).unwrap();
    let _primary1 = cust::context::Context::new(device1).unwrap(); // makes device 1's current
    let x1 = DeviceBuffer::from_slice(&[2.0f32; 4096]).unwrap(); // device 1's
    let mut r0 = DeviceReduce::with_gpu(&gpu0).unwrap();
    let mut r1 = DeviceReduce::with_gpu(&gpu1).unwrap();
    invalid_argument(
        r1.sum(&x0),
        "memory of device 0, but this handle runs on device 1",
    );
    invalid_argument(
        r0.sum(&x1),
        "memory of device 1, but this handle runs on device 0",
    );
    // Both devices still work.
    assert_eq!(r0.sum(&x0).unwrap(), 4096.0);
    assert_eq!(r1.sum(&x1).unwrap(), 8192.0);
}

/// A handle used from a thread with no current context: its address checks need the device's context, so
/// they make it current first (they used to report the caller's memory as unknown there).
#[test]
#[ignore = "needs an NVIDIA GPU: run with --include-ignored on a GPU machine"]
fn a_handle_works_on_a_thread_with_no_context() {
    let mut select = DeviceSelect::new().unwrap();
    let x = DeviceBuffer::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let flags = DeviceBuffer::from_slice(&[1u8, 0, 1, 0]).unwrap();
    let mut out = DeviceBuffer::from_slice(&[0.0f32; 4]).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            assert!(current().is_null(), "a new thread starts with no context");
            assert_eq!(select.select_flagged(&x, &flags, &mut out).unwrap(), 2);
        });
    });
    assert_eq!(out.as_host_vec().unwrap()[..2], [1.0, 3.0]);
}
