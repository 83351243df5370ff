//! The bitonic sort network of one block over slots in shared memory: which pairs each stage compares and
//! the barriers between the stages. The slots, their layout and their order are the caller's, so the
//! device-wide top-k's tile sort and the per-segment top-k's result sort share the network.

use crate::arch;

/// Runs the stages of a bitonic sort of `size` slots (a power of two, at least 2) with the whole block: a
/// barrier before each stage, then `exchange(a, b, best_first)` for each of the stage's pairs `a < b` that
/// falls to this thread (pairs `t, t + threads, …` of the `size / 2`), where `best_first` says that the
/// pair's run is sorted best first (slot `a` should end with the better of the two), and a barrier after
/// the last stage, so that every thread sees the sorted slots.
///
/// # Safety
/// The whole block calls it, converged, with the same `size`, `t` its thread index and `threads` the
/// block's size; `exchange` touches slots `a` and `b` only (a stage's pairs are disjoint), and the slots
/// were written before the call.
#[inline(always)]
pub unsafe fn sort(
    size: usize,
    t: usize,
    threads: usize,
    mut exchange: impl FnMut(usize, usize, bool),
) {
    let mut width = 2;
    while width <= size {
        let mut stride = width / 2;
        while stride > 0 {
            // SAFETY: the whole block is here (caller).
            unsafe { arch::sync_threads() };
            let mut j = t;
            while j < size / 2 {
                let a = (j / stride) * 2 * stride + j % stride;
                exchange(a, a + stride, a & width == 0);
                j += threads;
            }
            stride /= 2;
        }
        width *= 2;
    }
    // SAFETY: as above.
    unsafe { arch::sync_threads() };
}
