//! The raw-driver layer: loading a module with its JIT log, resolving kernels once with what launches need
//! of them, and the crate's single kernel launch site. Everything above this module works with safe types.
use std::ffi::{CStr, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use cust::sys::{self, CUfunction, CUjit_option, CUmodule};

use crate::error::{DriverError, Error, Result, check};
use crate::images::Code;
use crate::pinned::Pinned;
use crate::stream::StreamRef;

mod dependent;
pub(crate) use dependent::{Order, dependent_launch_supported};

/// A loaded module and its kernels, resolved at load. Unloaded on drop (a failure there has no caller to
/// report to and is ignored: the context it belonged to is being torn down anyway).
pub(crate) struct Module {
    raw: CUmodule,
    functions: Box<[Function]>,
}

impl Module {
    /// Loads `image` (a cubin, or NUL-terminated PTX that the driver JIT-compiles) of the contract's module
    /// `module` into the current context and resolves its kernels, in slot order. A failure carries the
    /// JIT's error log.
    pub fn load(image: &[u8], module: reduce_contract::Module, code: Code) -> Result<Self> {
        let kernels: Vec<_> = module.kernels().collect();
        let kernels: Vec<&CStr> = kernels.iter().map(|k| k.as_cstr()).collect();
        Module::load_named(image, module.name().as_str(), &kernels, code)
    }

    /// As [`load`](Self::load), for a module that is not one of the contract's: `name` in messages, and
    /// `kernels` resolved in order (a user's module resolves its kernels later, with [`resolve`](Self::resolve)).
    pub fn load_named(image: &[u8], name: &str, kernels: &[&CStr], code: Code) -> Result<Self> {
        let mut log = vec![0u8; 1 << 14];
        let mut options = [
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        let mut values = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
        let mut raw = std::ptr::null_mut();
        // SAFETY: `image` is a whole cubin or NUL-terminated PTX, and outlives the call; the option arrays
        // have equal length and the log buffer outlives the call; the driver writes at most `log.len()` bytes.
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut raw,
                image.as_ptr() as *const c_void,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        check(r).map_err(|e| {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Error::ModuleLoad {
                module: name.to_string(),
                code,
                message: format!("{e}\n{}", String::from_utf8_lossy(&log[..end])),
            }
        })?;
        let mut module = Module {
            raw,
            functions: Box::new([]),
        };
        module.functions = kernels
            .iter()
            .map(|kernel| module.resolve(kernel, name))
            .collect::<Result<_>>()?;
        Ok(module)
    }

    /// The size in bytes of the global variable `name` of this module, `None` if it has none.
    pub fn global_size(&self, name: &CStr) -> Result<Option<usize>> {
        let (mut ptr, mut bytes) = (0, 0usize);
        // SAFETY: `raw` is a loaded module and `name` is NUL-terminated; the driver writes the two outputs.
        let r = unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.raw, name.as_ptr()) };
        if r == sys::cudaError_enum::CUDA_ERROR_NOT_FOUND {
            return Ok(None);
        }
        check(r)?;
        Ok(Some(bytes))
    }

    /// The kernel called `kernel` in this module (named `module` in the error if it has none).
    pub fn resolve(&self, kernel: &CStr, module: &str) -> Result<Function> {
        Function::resolve(self, kernel).map_err(|source| Error::MissingKernel {
            kernel: kernel.to_string_lossy().into_owned(),
            module: module.to_string(),
            source,
        })
    }

    /// The kernel in slot `slot` of the contract's list.
    pub fn function(&self, slot: usize) -> &Function {
        &self.functions[slot]
    }
}

// SAFETY: driver API module and function handles may be used from any thread once their context is current
// there, which every user of `Module` (through `Gpu`) ensures; the occupancy memo is behind a mutex.
unsafe impl Send for Module {}
// SAFETY: as above; nothing mutates a module after `load`.
unsafe impl Sync for Module {}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: `raw` was loaded by `load` and is unloaded once.
        let _ = unsafe { sys::cuModuleUnload(self.raw) };
    }
}

/// Which of several block sizes that keep as many threads resident [`Function::fill_block`] takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prefer {
    /// The largest: a grid-stride pass over one input. Heavy kernels ran faster in one large block an SM
    /// than in several small ones holding as many threads (`stats` f16 at 2^28: 196.4 µs in one block of
    /// 384, 214.2 in three of 128; `aminmax` f16 169.8 in one of 640, 179.0 in two of 320, 185.8 in five of
    /// 128, H200).
    Largest,
    /// The nearest to the size asked: per-segment tiles, where a block retires with its slowest segment.
    Nearest,
}

/// [`Function::fill_block`]'s choice for a kernel asked for `asked` threads a block (already fitted), that
/// can launch at most `max_threads`, and keeps `resident(t)` threads on an SM in blocks of `t`.
fn filled_block(
    asked: u32,
    max_threads: u32,
    prefer: Prefer,
    resident: impl Fn(u32) -> Result<u32>,
) -> Result<u32> {
    let base = resident(asked)?;
    let mut best = (base, asked);
    for t in (64..=max_threads).step_by(64) {
        let r = resident(t)?;
        let better_tie = match prefer {
            Prefer::Largest => t > best.1,
            Prefer::Nearest => t.abs_diff(asked) < best.1.abs_diff(asked),
        };
        if r > best.0 || (r == best.0 && better_tie) {
            best = (r, t);
        }
    }
    Ok(if best.0 * 4 >= base * 5 {
        best.1
    } else {
        asked
    })
}

/// A kernel and what launching it needs to know, asked of the driver once.
pub(crate) struct Function {
    raw: CUfunction,
    /// The most threads a block can have, given the kernel's registers.
    max_threads: u32,
    /// Resident blocks per SM, memoised by `(threads, shared bytes)`: a handful of shapes per kernel.
    occupancy: Mutex<Vec<(u32, u32, u32)>>,
    /// [`Function::fill_block`]'s answers, memoised by its arguments.
    filled: Mutex<Vec<(u32, u32, Prefer, u32)>>,
    /// The dynamic shared memory this kernel has been allowed past the default 48 KiB (0: none yet).
    shared_allowed: AtomicU32,
}

/// Dynamic shared memory every kernel may take without opting in.
const DEFAULT_SHARED: u32 = 48 * 1024;

// SAFETY: a driver function handle may be used from any thread once its context is current there, which
// every launch ensures; the occupancy and block-size memos are behind mutexes.
unsafe impl Send for Function {}
// SAFETY: as above; `&Function` only reads the handle and locks the memos.
unsafe impl Sync for Function {}

impl Function {
    fn resolve(module: &Module, name: &CStr) -> Result<Function, DriverError> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: `module.raw` is a loaded module and `name` is NUL-terminated.
        check(unsafe { sys::cuModuleGetFunction(&mut raw, module.raw, name.as_ptr()) })?;
        let mut max = 0i32;
        // SAFETY: `raw` is a kernel of a loaded module; the attribute is written to `max`.
        check(unsafe {
            sys::cuFuncGetAttribute(
                &mut max,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                raw,
            )
        })?;
        Ok(Function {
            raw,
            max_threads: max.clamp(32, 1024) as u32 / 32 * 32,
            occupancy: Mutex::new(Vec::new()),
            filled: Mutex::new(Vec::new()),
            shared_allowed: AtomicU32::new(0),
        })
    }

    /// Opts this kernel in to `shared_bytes` of dynamic shared memory when that is past the default, once
    /// per size (the driver refuses larger launches, and counts no occupancy for them, until then).
    fn allow_shared(&self, shared_bytes: u32) -> Result<()> {
        if shared_bytes <= DEFAULT_SHARED
            || shared_bytes <= self.shared_allowed.load(Ordering::Relaxed)
        {
            return Ok(());
        }
        // SAFETY: `raw` is a kernel of a loaded module; the attribute takes a byte count.
        check(unsafe {
            sys::cuFuncSetAttribute(
                self.raw,
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared_bytes as i32,
            )
        })?;
        self.shared_allowed
            .fetch_max(shared_bytes, Ordering::Relaxed);
        Ok(())
    }

    /// `threads` lowered, if needed, to the most (a multiple of 32) this kernel can launch with: a kernel
    /// that uses many registers cannot run 1024 threads in a block. Only for kernels correct at any block size.
    pub fn fit_block(&self, threads: u32) -> u32 {
        threads.min(self.max_threads)
    }

    /// The block size for a kernel that is correct at any size (grid-stride loops, a segment per group of
    /// lanes) and was asked for `threads`: `threads`, unless this kernel's registers leave much of an SM
    /// idle there and another multiple of 64 keeps at least a quarter more threads resident. Of the sizes
    /// that keep the most, `prefer` picks one.
    ///
    /// Why: the policy's 256 threads suit the light kernels, but `reduce_partials_stats_bf16` takes 166
    /// registers a thread, so an SM holds one block of 256 (8 warps), where one of 384 holds 12. Measured on
    /// the H200 (docs/PERFORMANCE.md, 2^28): `stats` bf16 205.8 µs in blocks of 256, 197.5 in two of 192,
    /// 197.3 in three of 128 and 182.5 in one of 384; bf16 argmax (137 registers) 231.5 at 256, 178.0 in
    /// one block of 448. A quarter, so that kernels measured at their size (the sums, at 48 of 51 possible
    /// warps) keep it. Depends only on the kernel and the arguments, so a launch shape, and with it a tree
    /// of combines, repeats on the same device.
    pub fn fill_block(&self, threads: u32, shared_bytes: u32, prefer: Prefer) -> Result<u32> {
        let key = (threads, shared_bytes, prefer);
        let memo = self.filled.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&(.., block)) = memo.iter().find(|&&(t, s, p, _)| (t, s, p) == key) {
            return Ok(block);
        }
        drop(memo);
        let block = filled_block(self.fit_block(threads), self.max_threads, prefer, |t| {
            Ok(self.blocks_per_sm(t, shared_bytes)? * t)
        })?;
        self.filled.lock().unwrap_or_else(|p| p.into_inner()).push((
            threads,
            shared_bytes,
            prefer,
            block,
        ));
        Ok(block)
    }

    /// How many blocks of `threads` with `shared_bytes` of dynamic shared memory fit on one SM (at least 1).
    pub fn blocks_per_sm(&self, threads: u32, shared_bytes: u32) -> Result<u32> {
        let mut memo = self.occupancy.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&(_, _, blocks)) = memo
            .iter()
            .find(|&&(t, s, _)| (t, s) == (threads, shared_bytes))
        {
            return Ok(blocks);
        }
        self.allow_shared(shared_bytes)?;
        let mut blocks = 0;
        // SAFETY: `raw` is a kernel of a loaded module; the driver writes one int.
        check(unsafe {
            sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut blocks,
                self.raw,
                threads as i32,
                shared_bytes as usize,
            )
        })?;
        let blocks = (blocks.max(1)) as u32;
        memo.push((threads, shared_bytes, blocks));
        Ok(blocks)
    }
}

/// Launch shape of one kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Launch {
    pub grid: u32,
    pub block: u32,
    pub shared_bytes: u32,
}

/// Enqueues `f` on `stream` with its one parameter, the struct `params`, ordered by `order` (which falls
/// back to [`Order::Stream`] on the legacy default stream and on drivers before CUDA 12.3).
///
/// # Safety
/// - `P` must be the `reduce_contract::params` struct the kernel takes;
/// - every device pointer in it must be valid for the accesses the kernel's body documents, and stay
///   valid until the launch completes on `stream`;
/// - `shared_bytes` must be at least what the kernel documents, and `block` a multiple of 32, ≤ 1024;
/// - with [`Order::Programmatic`], the kernel waits for its predecessor as that variant says.
pub(crate) unsafe fn launch<P>(
    f: &Function,
    shape: Launch,
    stream: StreamRef<'_>,
    params: &P,
    order: Order,
) -> Result<()> {
    f.allow_shared(shape.shared_bytes)?;
    let mut args = [params as *const P as *mut c_void];
    if order == Order::Programmatic && !stream.is_legacy() {
        // SAFETY: forwarded to the caller, whose kernel waits for its predecessor.
        if let Some(r) = unsafe { dependent::launch(f.raw, shape, stream, &mut args) } {
            return r;
        }
    }
    // SAFETY: forwarded to the caller; the driver copies the struct before returning.
    let r = unsafe {
        sys::cuLaunchKernel(
            f.raw,
            shape.grid,
            1,
            1,
            shape.block,
            1,
            1,
            shape.shared_bytes,
            stream.as_raw(),
            args.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    };
    Ok(check(r)?)
}

/// A new device allocation of `len` zeroed `T` in the current context, zero by the time this returns.
///
/// Not `cust`'s `DeviceBuffer::zeroed`: it sets the bytes on the legacy default stream, asynchronously to
/// the host, and async calls on a caller's non-blocking stream do not wait for that stream, so a kernel
/// could run before the memset, or under it (a LastBlock ticket left non-zero would spoil every later
/// call). Here the memset runs on a stream of its own, which waits for nothing else, and the host waits for
/// it. Handles allocate at creation and when they grow, never per call.
pub(crate) fn zeroed<T: cust::memory::DeviceCopy + cust::memory::bytemuck::Zeroable>(
    len: usize,
) -> Result<cust::memory::DeviceBuffer<T>> {
    // SAFETY: every byte is set to zero below, an all-zero `T` is valid (`Zeroable`), and the buffer is
    // handed out only after the memset has completed.
    let buffer = unsafe { cust::memory::DeviceBuffer::<T>::uninitialized(len)? };
    let bytes = len * size_of::<T>();
    if bytes > 0 {
        let stream = cust::stream::Stream::new(cust::stream::StreamFlags::NON_BLOCKING, None)?;
        let stream = StreamRef::from(&stream);
        // SAFETY: the buffer holds `bytes` bytes and outlives the synchronize below.
        unsafe { memset_zero(buffer.as_device_ptr().as_raw(), bytes, stream)? };
        synchronize(stream)?;
    }
    Ok(buffer)
}

/// Sets `bytes` bytes at `ptr` to zero on `stream`.
///
/// # Safety
/// `ptr` must be valid for `bytes` bytes of writes until the memset completes.
pub(crate) unsafe fn memset_zero(ptr: u64, bytes: usize, stream: StreamRef<'_>) -> Result<()> {
    // SAFETY: forwarded to the caller.
    Ok(check(unsafe {
        sys::cuMemsetD8Async(ptr, 0, bytes, stream.as_raw())
    })?)
}

/// Copies one `T` from device address `src` to the host through `staging` (page-locked, so the copy is
/// one DMA on the stream), ordered on `stream`, and waits for it.
///
/// # Safety
/// `src` must hold a valid `T` once the work before it on `stream` is done; nothing else may use `staging`
/// meanwhile.
pub(crate) unsafe fn read_back<T: Copy>(
    src: u64,
    staging: &Pinned,
    stream: StreamRef<'_>,
) -> Result<T> {
    assert!(size_of::<T>() <= staging.len(), "staging too small");
    // SAFETY: `staging` holds at least a `T` and is the caller's alone; the copy completes before
    // `synchronize` returns, and then holds the `T` read below.
    unsafe {
        check(sys::cuMemcpyDtoHAsync_v2(
            staging.as_mut_ptr(),
            src,
            size_of::<T>(),
            stream.as_raw(),
        ))?;
        synchronize(stream)?;
        Ok(staging.read::<T>())
    }
}

/// Copies `dst.len()` values of `T` from device address `src` into `dst`, ordered on `stream`, and waits.
///
/// # Safety
/// `src` must hold `dst.len()` valid `T`s once the work before it on `stream` is done.
pub(crate) unsafe fn read_back_slice<T: cust::memory::DeviceCopy>(
    src: u64,
    dst: &mut [T],
    stream: StreamRef<'_>,
) -> Result<()> {
    // SAFETY: `dst` is a live host buffer of `size_of_val(dst)` bytes; the copy completes before
    // `synchronize` returns.
    unsafe {
        check(sys::cuMemcpyDtoHAsync_v2(
            dst.as_mut_ptr() as *mut c_void,
            src,
            std::mem::size_of_val(dst),
            stream.as_raw(),
        ))?;
    }
    synchronize(stream)?;
    Ok(())
}

/// Who owns the memory an address points into.
pub(crate) struct Owner {
    /// The device's ordinal.
    pub device: u32,
    /// The context the memory was allocated in, or null where it belongs to none (the driver answers so for
    /// memory that every context of the device may use).
    pub context: sys::CUcontext,
    /// Managed (unified) memory, which every context may use whichever allocated it.
    pub managed: bool,
    /// Page-locked host memory, which every context of every device may use (unified addressing).
    pub host: bool,
}

/// The owner of the memory at `ptr`, or `None` when the driver does not know the address.
/// (`cuPointerGetAttributes`, unlike the singular call, answers an unknown address with a null memory type
/// rather than an error, so compute-sanitizer sees no failed API call.) A context must be current: the call
/// fails without one.
pub(crate) fn owner_of(ptr: u64) -> Result<Option<Owner>> {
    let mut memory_type: std::ffi::c_uint = 0;
    let mut ordinal: std::ffi::c_int = -1;
    let mut context: sys::CUcontext = std::ptr::null_mut();
    let mut managed: std::ffi::c_uint = 0;
    let mut attributes = [
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_CONTEXT,
        sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_IS_MANAGED,
    ];
    let mut data = [
        &mut memory_type as *mut std::ffi::c_uint as *mut c_void,
        &mut ordinal as *mut std::ffi::c_int as *mut c_void,
        &mut context as *mut sys::CUcontext as *mut c_void,
        &mut managed as *mut std::ffi::c_uint as *mut c_void,
    ];
    // SAFETY: as many attributes as data pointers, each written to its own live variable of the type the
    // driver documents for it (an unsigned int, an int, a CUcontext and a bool as an unsigned int).
    check(unsafe {
        sys::cuPointerGetAttributes(
            attributes.len() as u32,
            attributes.as_mut_ptr(),
            data.as_mut_ptr(),
            ptr,
        )
    })?;
    Ok((memory_type != 0 && ordinal >= 0).then_some(Owner {
        device: ordinal as u32,
        context,
        managed: managed != 0,
        host: memory_type == sys::CUmemorytype::CU_MEMORYTYPE_HOST as u32,
    }))
}

/// Copies `host.len()` values from device address `src` into `host`, ordered on `stream`, and waits for
/// the copy.
///
/// # Safety
/// `src` must hold `host.len()` valid `T` once the work before it on `stream` is done.
pub(crate) unsafe fn copy_to_host<T: Copy>(
    src: u64,
    host: &mut [T],
    stream: StreamRef<'_>,
) -> Result<()> {
    if host.is_empty() {
        return Ok(());
    }
    // SAFETY: `host` is valid for its own bytes, `src` for as many (the caller); pageable memory makes the
    // copy wait for the stream's earlier work and return when done, and the synchronize below covers the
    // rest.
    check(unsafe {
        sys::cuMemcpyDtoHAsync_v2(
            host.as_mut_ptr().cast::<c_void>(),
            src,
            size_of_val(host),
            stream.as_raw(),
        )
    })?;
    synchronize(stream)
}

/// Blocks the host until the work queued on `stream` so far is done.
pub(crate) fn synchronize(stream: StreamRef<'_>) -> Result<()> {
    // SAFETY: the stream is live for the borrow.
    Ok(check(unsafe { sys::cuStreamSynchronize(stream.as_raw()) })?)
}

/// Whether `stream` is capturing into a CUDA graph: work enqueued now runs later, when the graph is
/// launched, so events recorded now say nothing about when it is done.
pub(crate) fn capturing(stream: StreamRef<'_>) -> Result<bool> {
    let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    // SAFETY: the stream is live; the driver writes one status.
    check(unsafe { sys::cuStreamIsCapturing(stream.as_raw(), &mut status) })?;
    Ok(status != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// A timing-free event (cust keeps the raw handle of its `Event` private, and its `Stream::wait_event`
/// consumes the event).
pub(crate) struct RawEvent(sys::CUevent);

impl RawEvent {
    pub fn new() -> Result<Self> {
        let mut e = std::ptr::null_mut();
        // SAFETY: writes a new event handle into `e`.
        check(unsafe {
            sys::cuEventCreate(
                &mut e,
                sys::CUevent_flags_enum::CU_EVENT_DISABLE_TIMING as u32,
            )
        })?;
        Ok(RawEvent(e))
    }

    /// Captures the work enqueued on `stream` so far.
    pub fn record(&self, stream: StreamRef<'_>) -> Result<()> {
        // SAFETY: both handles are live.
        Ok(check(unsafe {
            sys::cuEventRecord(self.0, stream.as_raw())
        })?)
    }

    /// Blocks the host until the captured work is done (at once if nothing was recorded).
    pub fn synchronize(&self) -> Result<()> {
        // SAFETY: the handle is live.
        Ok(check(unsafe { sys::cuEventSynchronize(self.0) })?)
    }

    /// Makes later work on `stream` wait for the captured work.
    pub fn wait_on(&self, stream: StreamRef<'_>) -> Result<()> {
        // SAFETY: both handles are live.
        Ok(check(unsafe {
            sys::cuStreamWaitEvent(stream.as_raw(), self.0, 0)
        })?)
    }
}

// SAFETY: a driver API event handle may be recorded, waited on and destroyed from any thread; the driver
// serialises its own use of it. `RawEvent` has no `&self` method that mutates host state, so it is `Sync` too.
unsafe impl Send for RawEvent {}
// SAFETY: as above.
unsafe impl Sync for RawEvent {}

impl Drop for RawEvent {
    fn drop(&mut self) {
        // SAFETY: created by `new`, destroyed once; nothing to report to.
        let _ = unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads an H200 SM keeps resident in blocks of `t` for a kernel of `regs` registers a thread
    /// (registers allocated per warp in units of 256, 64 warps and 32 blocks at most).
    fn sm90(regs: u32) -> impl Fn(u32) -> Result<u32> {
        move |t| {
            let per_warp = (regs.div_ceil(8) * 8 * 32).div_ceil(256) * 256;
            let warps = (65536 / per_warp).min(64);
            Ok((warps / (t / 32)).min(32) * t)
        }
    }

    /// The most threads a block of a `regs`-register kernel can have, in whole warps.
    fn max_threads(regs: u32) -> u32 {
        (65536 / (regs.div_ceil(8) * 8) / 32 * 32).min(1024)
    }

    #[test]
    fn heavy_kernels_take_the_size_that_fills_the_sm() {
        let fill = |regs, prefer| filled_block(256, max_threads(regs), prefer, sm90(regs)).unwrap();
        // `stats` bf16 (166 registers): 8 warps in blocks of 256, 12 in one of 384.
        assert_eq!(fill(166, Prefer::Largest), 384);
        // bf16 argmax (137): 14 warps in one block of 448.
        assert_eq!(fill(137, Prefer::Largest), 448);
        // 92 registers: 20 warps in one block of 640, or (nearest 256) two of 320.
        assert_eq!(fill(92, Prefer::Largest), 640);
        assert_eq!(fill(92, Prefer::Nearest), 320);
        // A row tile of 87 registers: 22 warps in blocks of 64 where 256 holds 16.
        assert_eq!(fill(87, Prefer::Nearest), 64);
    }

    #[test]
    fn kernels_near_full_keep_the_size_asked() {
        let fill =
            |regs| filled_block(256, max_threads(regs), Prefer::Largest, sm90(regs)).unwrap();
        // The sums (40 registers: 48 warps of 51) and a kernel filling the SM keep 256.
        assert_eq!(fill(40), 256);
        assert_eq!(fill(32), 256);
        // `stats` f32 (124): 16 warps at 256 and at best; 72 registers: 24 against 28, under a quarter.
        assert_eq!(fill(124), 256);
        assert_eq!(fill(72), 256);
    }
}
