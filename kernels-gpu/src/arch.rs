//! The thin layer over PTX: indices, barriers, shared memory, fences, atomics and cache-hinted loads.
//!
//! Everything else in the crate reaches the hardware through this module, [`crate::shuffle`] and
//! [`crate::warp`], but for single instructions kept beside their one user: `half`'s conversions and
//! paired min/max, `softmax`'s `ex2`, the benchmarks' timer in `util`.
use core::arch::{asm, nvptx};

/// `threadIdx.x`.
#[inline(always)]
pub fn thread_idx() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_thread_idx_x() }
}

/// `blockIdx.x`.
#[inline(always)]
pub fn block_idx() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_idx_x() }
}

/// `blockDim.x`.
#[inline(always)]
pub fn block_dim() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_block_dim_x() }
}

/// `gridDim.x`.
#[inline(always)]
pub fn grid_dim() -> u32 {
    // SAFETY: reading a special register has no preconditions.
    unsafe { nvptx::_grid_dim_x() }
}

/// `%nsmid`: an upper bound on the SM ids of the device (the SM count where they are contiguous), for
/// sizing how far ahead of the running blocks a kernel reaches.
#[inline(always)]
pub fn sm_count() -> u32 {
    let n: u32;
    // SAFETY: reading a special register has no preconditions.
    unsafe { asm!("mov.u32 {0}, %nsmid;", out(reg32) n, options(pure, nomem, nostack)) };
    n
}

/// This thread's index in the whole grid, 64-bit so that grids over 2^32 elements index correctly.
#[inline(always)]
pub fn global_thread_idx() -> u64 {
    block_idx() as u64 * block_dim() as u64 + thread_idx() as u64
}

/// Number of threads in the grid.
#[inline(always)]
pub fn grid_threads() -> u64 {
    grid_dim() as u64 * block_dim() as u64
}

/// Lane of this thread in its warp, 0..32.
#[inline(always)]
pub fn lane_id() -> u32 {
    thread_idx() & 31
}

/// Warp of this thread in its block.
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_idx() >> 5
}

/// `__syncthreads()`.
///
/// # Safety
/// Every thread of the block must reach the same barrier (no divergent barrier).
#[inline(always)]
pub unsafe fn sync_threads() {
    // SAFETY: the caller upholds the convergence requirement.
    unsafe { nvptx::_syncthreads() }
}

/// The block's dynamic shared memory as a `T` array. Every call returns the same address.
///
/// # Safety
/// The launch must have given at least `len * size_of::<T>()` bytes, and accesses from different threads
/// must be ordered by barriers.
#[inline(always)]
pub unsafe fn shared<T>() -> *mut T {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
}

/// `__threadfence()`: orders this thread's earlier writes before its later ones for every thread of the GPU.
#[inline(always)]
pub fn fence_gpu() {
    // SAFETY: a fence has no memory-safety preconditions.
    unsafe { asm!("fence.acq_rel.gpu;", options(nostack)) }
}

/// Programmatic dependent launch, primary side (`griddepcontrol.launch_dependents`, sm_90 and later): the
/// kernel the host enqueued after this one with programmatic stream serialization may start its blocks once
/// every block of this grid has executed this (or exited), instead of after this grid has finished, so its
/// launch overlaps this grid's tail. It gives no memory ordering: the dependent still waits in
/// [`wait_for_primary`] before it reads what this grid writes. A no-op in the PTX of older archs, whose
/// launches the host never marks so.
#[inline(always)]
pub fn launch_dependents() {
    #[cfg(target_feature = "sm_90")]
    // SAFETY: a scheduling hint with no memory effects or preconditions.
    unsafe {
        asm!("griddepcontrol.launch_dependents;", options(nostack, nomem))
    }
}

/// Programmatic dependent launch, dependent side (`griddepcontrol.wait`): blocks until the grids this one
/// depends on have completed and their memory operations are visible. Returns at once for a launch the host
/// did not mark as programmatic, and is absent from the PTX of archs before sm_90, whose launches the host
/// never marks. Not `nomem`: the compiler must not move memory accesses above it.
#[inline(always)]
pub fn wait_for_primary() {
    #[cfg(target_feature = "sm_90")]
    // SAFETY: a wait with no preconditions; it orders memory, so it is not marked `nomem`.
    unsafe {
        asm!("griddepcontrol.wait;", options(nostack))
    }
}

/// Atomically adds `v` to `*p` at GPU scope and returns the old value (`atomicAdd` on `unsigned`).
///
/// # Safety
/// `p` must point to a valid, 4-byte aligned `u32` in global memory.
#[inline(always)]
pub unsafe fn atomic_add_u32(p: *mut u32, v: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees `p` is a valid global u32.
    unsafe {
        asm!("atom.add.relaxed.gpu.global.u32 {0}, [{1}], {2};", out(reg32) old, in(reg64) p, in(reg32) v,
             options(nostack))
    };
    old
}

/// Atomically `*p = if *p >= limit { 0 } else { *p + 1 }` (PTX `atom.inc`), returning the old value, with
/// relaxed ordering at GPU scope: a counter that wraps to zero by itself after `limit + 1` increments.
///
/// # Safety
/// `p` must be a valid, aligned global `u32`.
#[inline(always)]
pub unsafe fn atomic_inc_u32(p: *mut u32, limit: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees `p` is a valid global u32.
    unsafe {
        asm!("atom.relaxed.gpu.global.inc.u32 {0}, [{1}], {2};", out(reg32) old, in(reg64) p, in(reg32) limit,
             options(nostack))
    };
    old
}

/// `x` rounded toward zero to `u32`, saturating (NaN gives 0): Rust's `x as u32`, in one `cvt.rzi.u32.f32`.
/// LLVM brackets `as` with compares and selects that the instruction already does in hardware.
#[inline(always)]
pub fn f32_to_u32_sat(x: f32) -> u32 {
    let r: u32;
    // SAFETY: a conversion between registers; PTX defines it for every input.
    unsafe {
        asm!("cvt.rzi.u32.f32 {0}, {1};", out(reg32) r, in(reg32) x, options(pure, nomem, nostack))
    };
    r
}

/// The shared-window address of a generic pointer into shared memory: 32 bits, so per-access address
/// arithmetic stays in 32-bit registers (what `nvcc` emits for `__shared__` arrays).
///
/// # Safety
/// `p` must point into this block's shared memory.
#[inline(always)]
pub unsafe fn shared_window<T>(p: *mut T) -> u32 {
    let a: u32;
    // SAFETY: the caller guarantees `p` is a shared-memory address; the conversion reads nothing.
    unsafe {
        asm!("{{ .reg .u64 s; cvta.to.shared.u64 s, {1}; cvt.u32.u64 {0}, s; }}", out(reg32) a,
             in(reg64) p as u64, options(pure, nomem, nostack))
    };
    a
}

/// Atomically adds `v` to the `u32` at shared-window address `a` (`red.shared`: no value comes back). Shared
/// atomics are resolved in the SM, an order of magnitude cheaper than global ones; the histogram counts in them.
///
/// # Safety
/// `a` must be a [`shared_window`] address of a 4-byte aligned `u32` in this block's shared memory.
#[inline(always)]
pub unsafe fn shared_add_u32(a: u32, v: u32) {
    // SAFETY: the caller guarantees `a` addresses a shared-memory u32.
    unsafe { asm!("red.shared.add.u32 [{0}], {1};", in(reg32) a, in(reg32) v, options(nostack)) }
}

/// Atomically adds `v` to the `u32` at shared-window address `a` and returns the old value (`atom.shared`):
/// a slot in a shared buffer for each appending thread.
///
/// # Safety
/// `a` must be a [`shared_window`] address of a 4-byte aligned `u32` in this block's shared memory.
#[inline(always)]
pub unsafe fn shared_fetch_add_u32(a: u32, v: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees `a` addresses a shared-memory u32.
    unsafe {
        asm!("atom.shared.add.u32 {0}, [{1}], {2};", out(reg32) old, in(reg32) a, in(reg32) v,
             options(nostack))
    };
    old
}

/// `__syncthreads_or(p)`: a barrier that also tells every thread whether `p` held in any thread of the
/// block (`bar.red.or.pred`), so a block-wide decision costs no shared word and no second barrier.
///
/// # Safety
/// As [`sync_threads`]: every thread of the block must reach it.
#[inline(always)]
pub unsafe fn sync_threads_or(p: bool) -> bool {
    let any: u32;
    // SAFETY: the caller upholds the convergence requirement; barrier 0 is the one `sync_threads` uses.
    unsafe {
        asm!("{{ .reg .pred p, q; setp.ne.u32 p, {1}, 0; bar.red.or.pred q, 0, p; selp.u32 {0}, 1, 0, q; }}",
             out(reg32) any, in(reg32) p as u32, options(nostack))
    };
    any != 0
}

/// Suspends the calling thread for about `ns` nanoseconds (`nanosleep`, sm_70+; the hardware may wake it
/// sooner or later, up to 1 ms): a spin-wait's pause, so that its polls leave L2 to the other blocks.
#[inline(always)]
pub fn nanosleep(ns: u32) {
    // SAFETY: `nanosleep` has no architectural effect besides the delay.
    unsafe { asm!("nanosleep.u32 {0};", in(reg32) ns, options(nostack)) };
}

/// Atomically adds `v` to `*p` at GPU scope and returns the old value (`atomicAdd` on `unsigned long long`).
///
/// # Safety
/// `p` must point to a valid, 8-byte aligned `u64` in global memory.
#[inline(always)]
pub unsafe fn atomic_add_u64(p: *mut u64, v: u64) -> u64 {
    let old: u64;
    // SAFETY: the caller guarantees `p` is a valid global u64.
    unsafe {
        asm!("atom.add.relaxed.gpu.global.u64 {0}, [{1}], {2};", out(reg64) old, in(reg64) p, in(reg64) v,
             options(nostack))
    };
    old
}

/// Atomically `*p = max(*p, v)` at GPU scope (`red`: no value comes back).
///
/// # Safety
/// `p` must point to a valid, 8-byte aligned `u64` in global memory.
#[inline(always)]
pub unsafe fn atomic_max_u64(p: *mut u64, v: u64) {
    // SAFETY: the caller guarantees `p` is a valid global u64.
    unsafe {
        asm!("red.relaxed.gpu.global.max.u64 [{0}], {1};", in(reg64) p, in(reg64) v, options(nostack))
    };
}

/// Global-memory atomic add used by the `Atomic` combine strategy (`red`: no value comes back).
pub trait AtomicAdd: Copy {
    /// Adds `v` to `*p` at GPU scope.
    ///
    /// # Safety
    /// `p` must point to a valid, aligned `Self` in global memory.
    unsafe fn atomic_add(p: *mut Self, v: Self);
}

macro_rules! impl_atomic_add {
    ($($t:ty => $ptx:literal, $class:ident;)*) => {$(
        impl AtomicAdd for $t {
            #[inline(always)]
            unsafe fn atomic_add(p: *mut Self, v: Self) {
                // SAFETY: the caller guarantees `p` is a valid global `Self`.
                unsafe { asm!(concat!("red.relaxed.gpu.global.add.", $ptx, " [{0}], {1};"), in(reg64) p,
                              in($class) v, options(nostack)) }
            }
        }
    )*};
}
impl_atomic_add! {
    u32 => "u32", reg32;
    f64 => "f64", reg64;
    u64 => "u64", reg64;
    i64 => "u64", reg64;
}

/// Compare-and-swap on a global `u32` at GPU scope; returns the value found.
///
/// # Safety
/// `p` must point to a valid, 4-byte aligned `u32` in global memory.
#[inline(always)]
pub unsafe fn atomic_cas_u32(p: *mut u32, expected: u32, new: u32) -> u32 {
    let old: u32;
    // SAFETY: the caller guarantees `p` is a valid global u32.
    unsafe {
        asm!("atom.relaxed.gpu.global.cas.b32 {0}, [{1}], {2}, {3};", out(reg32) old, in(reg64) p,
             in(reg32) expected, in(reg32) new, options(nostack))
    };
    old
}

impl AtomicAdd for f32 {
    /// `red.add.f32` flushes subnormal operands and results to zero. A subnormal `v` is therefore added by a
    /// compare-and-swap loop with IEEE semantics; any other goes through `red.add` (a CAS loop for every
    /// block serialises them on retries). What remains: a subnormal running total meeting a normal `v` is
    /// flushed, an error below 2^-126 per block, inside the Atomic strategy's documented bound.
    #[inline(always)]
    unsafe fn atomic_add(p: *mut f32, v: f32) {
        if v == 0.0 || v.abs() >= f32::MIN_POSITIVE || v.is_nan() {
            // SAFETY: the caller guarantees `p` is a valid global f32.
            unsafe {
                asm!("red.relaxed.gpu.global.add.f32 [{0}], {1};", in(reg64) p, in(reg32) v, options(nostack))
            };
            return;
        }
        // SAFETY: the caller guarantees `p` is a valid global f32; a volatile read is a relaxed load.
        let mut seen = unsafe { (p as *const u32).read_volatile() };
        loop {
            let sum = (f32::from_bits(seen) + v).to_bits();
            // SAFETY: as above.
            let found = unsafe { atomic_cas_u32(p as *mut u32, seen, sum) };
            if found == seen {
                break;
            }
            seen = found;
        }
    }
}

/// A 16-byte aligned group of elements: one `ld.global.v4` brings a whole one in.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct Vec16<A>(pub A);

/// Loads 16 bytes through the read-only (non-coherent) cache path, without allocating in L1: the input of a
/// reduction is read once and never written during the kernel.
///
/// # Safety
/// `p` must be 16-byte aligned, point into global memory and stay unmodified while the kernel runs.
#[inline(always)]
pub unsafe fn load_vec16<A: Copy>(p: *const Vec16<A>) -> Vec16<A> {
    const { assert!(size_of::<Vec16<A>>() == 16) };
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: the caller guarantees alignment, validity and read-only-ness.
    unsafe {
        asm!("ld.global.nc.L1::no_allocate.v4.u32 {{{0}, {1}, {2}, {3}}}, [{4}];",
             out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg64) p,
             options(pure, readonly, nostack));
        core::mem::transmute_copy(&[a, b, c, d])
    }
}

/// Reads a value written by another block of the same grid (after that block's fence), bypassing L1.
///
/// # Safety
/// `p` must be valid and aligned for reads.
#[inline(always)]
pub unsafe fn load_coherent<T: Copy>(p: *const T) -> T {
    // SAFETY: the caller guarantees validity; volatile keeps the load from being cached or hoisted.
    unsafe { core::ptr::read_volatile(p) }
}

/// Words that load one at a time through the read-only path ([`load_nc`]).
pub trait ScalarLoad: Copy {
    /// `ld.global.nc.L1::no_allocate` of one `Self`.
    ///
    /// # Safety
    /// As [`load_nc`].
    unsafe fn load_nc(p: *const Self) -> Self;
}

macro_rules! scalar_load {
    ($($t:ty: $ptx:literal, $reg:ident;)*) => {$(
        impl ScalarLoad for $t {
            #[inline(always)]
            unsafe fn load_nc(p: *const Self) -> Self {
                let r: $t;
                // SAFETY: the caller guarantees alignment, validity and read-only-ness.
                unsafe {
                    asm!(concat!("ld.global.nc.L1::no_allocate.", $ptx, " {0}, [{1}];"), out($reg) r, in(reg64) p,
                         options(pure, readonly, nostack))
                };
                r
            }
        }
    )*};
}
scalar_load! {
    u16: "b16", reg16;
    u32: "b32", reg32;
    u64: "b64", reg64;
}

/// Loads one element through the read-only (non-coherent) cache path without allocating in L1, like
/// [`load_vec16`] but for a single word: for kernels whose arithmetic must not depend on the address's
/// alignment, so they read element by element.
///
/// # Safety
/// `p` must be aligned, point into global memory and stay unmodified while the kernel runs.
#[inline(always)]
pub unsafe fn load_nc<T: ScalarLoad>(p: *const T) -> T {
    // SAFETY: forwarded to the caller.
    unsafe { T::load_nc(p) }
}

/// `prefetch.global.L2`: starts bringing the 128-byte line at `p` into L2, with no register to wait on.
///
/// # Safety
/// `p` must point into a global allocation.
#[inline(always)]
pub unsafe fn prefetch_l2(p: *const u8) {
    // SAFETY: the caller guarantees `p` is a global address; a prefetch has no architectural effect.
    unsafe { asm!("prefetch.global.L2 [{0}];", in(reg64) p, options(nostack, readonly)) };
}

/// [`prefetch_l2`] of the 128-byte lines holding bytes `from..to` of `base`: lines `rank`, `rank + ranks`,
/// … of them, each named by an address inside the range, so no line outside the allocation is touched.
///
/// # Safety
/// `base[from..to]` must lie inside one global allocation (an empty range, `from >= to`, asks nothing);
/// `ranks > 0`.
#[inline(always)]
pub unsafe fn prefetch_l2_range(base: *const u8, from: u64, to: u64, rank: u64, ranks: u64) {
    let start = base as u64 + from;
    let end = base as u64 + to;
    if start >= end {
        return;
    }
    let mut line = (start & !127) + rank * 128;
    while line < end {
        let at = if line < start { start } else { line };
        // SAFETY: start <= at < end, inside the allocation (the caller).
        unsafe { prefetch_l2(at as *const u8) };
        line += ranks * 128;
    }
}
