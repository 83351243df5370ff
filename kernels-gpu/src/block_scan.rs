//! Block-wide exclusive scan: each warp scans by shuffle, the warp totals go through shared memory, warp 0
//! scans them, and every thread adds its warp's offset. Two barriers.
use crate::arch::{self, lane_id, warp_id};
use crate::op::DeviceOp;
use crate::tile::Tile;

/// Shared-memory slots the scan uses: one per warp, plus the block total.
pub const SLOTS: usize = 33;

/// Exclusive scan of one value per thread of the block, in thread order.
///
/// **Result:** in every thread: `(v₀ ⊕ … ⊕ v_{t-1}, v₀ ⊕ … ⊕ v_{blockDim-1})`, the identity being thread 0's
/// prefix. Example: 256 threads holding `1u32` with `Sum` give `(t, 256)` in thread `t`.
///
/// Uses the first `SLOTS * size_of::<Op::Acc>()` bytes of dynamic shared memory. A caller that touches that
/// memory afterwards (or scans again) must pass a barrier first, so that every thread has read its offset.
///
/// # Safety
/// Every thread of the block must call this (it holds barriers); `blockDim.x` must be a multiple of 32 and
/// at most 1024, and the launch must provide the shared memory above.
#[inline(always)]
pub unsafe fn exclusive_scan<Op: DeviceOp>(v: Op::Acc) -> (Op::Acc, Op::Acc) {
    let warp = Tile::<32>::new();
    // SAFETY: whole warps, converged: every lane of every warp is here.
    let (in_warp, warp_total) = unsafe { warp.scan::<Op>(v) };
    // SAFETY: the caller provides SLOTS accumulators of shared memory.
    let slots = unsafe { arch::shared::<Op::Acc>() };
    if lane_id() == 0 {
        // SAFETY: warp_id() < 32 slots; each slot has one writer.
        unsafe { slots.add(warp_id() as usize).write(warp_total) };
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { arch::sync_threads() };
    if warp_id() == 0 {
        let warps = arch::block_dim() >> 5;
        // SAFETY: slot `lane` was written before the barrier when lane < warps.
        let total_of_warp = if lane_id() < warps {
            unsafe { slots.add(lane_id() as usize).read() }
        } else {
            Op::identity()
        };
        // SAFETY: warp 0 is whole and converged here.
        let (offset, block_total) = unsafe { warp.scan::<Op>(total_of_warp) };
        // SAFETY: lane < 32 < SLOTS; each slot has one writer, and its reader (this lane) read it above.
        unsafe { slots.add(lane_id() as usize).write(offset) };
        if lane_id() == 0 {
            // SAFETY: slot 32 < SLOTS.
            unsafe { slots.add(32).write(block_total) };
        }
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { arch::sync_threads() };
    // SAFETY: both slots were written by warp 0 before the barrier.
    let (offset, block_total) =
        unsafe { (slots.add(warp_id() as usize).read(), slots.add(32).read()) };
    (Op::combine(offset, in_warp), block_total)
}
