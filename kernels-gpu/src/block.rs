//! Block reduction: each warp reduces by shuffle, lane 0 of each warp parks its value in shared memory, one
//! barrier, then warp 0 reduces the parked values by shuffle again.
use crate::arch::{self, lane_id, warp_id};
use crate::op::DeviceOp;
use crate::warp::{self, FULL_MASK};

/// Reduces one value per thread of the block with `Op`.
///
/// **Result:** valid in thread 0 only. The tree is fixed by the block size, so the same inputs give the same
/// bits. Example: 256 threads holding `1.0` with `Sum` give `256.0` in thread 0.
///
/// Uses the first `32 * size_of::<Op::Acc>()` bytes of dynamic shared memory. A caller that touches that
/// memory afterwards (or calls this again) must pass a barrier first, so that warp 0 has finished reading.
///
/// # Safety
/// Every thread of the block must call this (it holds a barrier); `blockDim.x` must be a multiple of 32 and
/// at most 1024, and the launch must provide the shared memory above.
#[inline(always)]
pub unsafe fn reduce<Op: DeviceOp>(v: Op::Acc) -> Op::Acc {
    // SAFETY: all 32 lanes of every warp are here (whole warps, converged).
    let v = unsafe { warp::reduce::<Op>(v, 32, FULL_MASK) };
    // SAFETY: the caller provides 32 slots of `Op::Acc`.
    let slots = unsafe { arch::shared::<Op::Acc>() };
    if lane_id() == 0 {
        // SAFETY: warp_id() < 32 slots; each slot has one writer.
        unsafe { slots.add(warp_id() as usize).write(v) };
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { arch::sync_threads() };
    let mut r = v;
    if warp_id() == 0 {
        let warps = arch::block_dim() >> 5;
        r = if lane_id() < warps {
            // SAFETY: slot `lane` was written before the barrier.
            unsafe { slots.add(lane_id() as usize).read() }
        } else {
            Op::identity()
        };
        // SAFETY: warp 0 is whole and converged here.
        r = unsafe { warp::reduce::<Op>(r, 32, FULL_MASK) };
    }
    r
}
