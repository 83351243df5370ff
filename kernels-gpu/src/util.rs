//! Small utility kernels for the host's benchmarks.
use core::arch::asm;

/// Nanoseconds of the GPU's global timer.
#[inline(always)]
fn global_timer_ns() -> u64 {
    let t: u64;
    // SAFETY: reading a special register has no preconditions.
    unsafe { asm!("mov.u64 {0}, %globaltimer;", out(reg64) t, options(nostack, nomem)) };
    t
}

/// Busy-waits `ns` nanoseconds. A benchmark enqueues it ahead of timed work so the host can queue that work
/// before the GPU reaches it: the events then time the GPU, not the host's launch rate.
///
/// # Safety
/// None beyond launching it (one thread is enough).
#[unsafe(export_name = reduce_contract::kernel_name!(util spin))]
pub unsafe extern "ptx-kernel" fn util_spin(p: reduce_contract::params::SpinParams) {
    let start = global_timer_ns();
    while global_timer_ns().wrapping_sub(start) < p.ns {}
}
