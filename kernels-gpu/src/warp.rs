//! Warp-level primitives: votes, lane masks and the warp reduction, built on [`crate::shuffle`], so one
//! reduction body serves every operator and element type.
use core::arch::asm;

use crate::op::DeviceOp;
use crate::shuffle::{shfl_down, shfl_xor};

/// Mask of all 32 lanes.
pub const FULL_MASK: u32 = 0xffff_ffff;

/// `__ballot_sync`: bit `i` is set when lane `i` of `mask` passes a true `pred`.
///
/// # Safety
/// Every lane in `mask` must execute this call, and `mask` must include the calling lane.
#[inline(always)]
pub unsafe fn ballot(mask: u32, pred: bool) -> u32 {
    let r: u32;
    // SAFETY: the caller upholds the convergence requirement.
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {1}, 0; vote.sync.ballot.b32 {0}, p, {2}; }}",
             out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nostack, nomem))
    };
    r
}

/// `__match_any_sync`: the lanes of `mask` whose `value` equals this lane's (this lane included).
///
/// **Result:** valid in every calling lane. Example: lanes holding `7, 3, 7, …` get masks with bits 0 and 2 set
/// in lanes 0 and 2. Needs sm_70 or newer (every arch the crate is built for).
///
/// # Safety
/// Every lane in `mask` must execute this call, and `mask` must include the calling lane.
#[inline(always)]
pub unsafe fn match_any(mask: u32, value: u32) -> u32 {
    let r: u32;
    // SAFETY: the caller upholds the convergence requirement.
    unsafe {
        asm!("match.any.sync.b32 {0}, {1}, {2};", out(reg32) r, in(reg32) value, in(reg32) mask,
             options(nostack, nomem))
    };
    r
}

/// The minimum of `v` over each segment of `width` lanes, in every lane of it.
///
/// Whole warps on sm_80 and later take two `redux.sync.min.u32` (the high words, then the low words of the
/// lanes holding the least high word): two instructions where a butterfly takes five steps of two shuffles
/// and a 64-bit compare. Narrower segments, and sm_75, take the butterfly.
///
/// # Safety
/// Every lane of `mask` must execute this call with the same `width` (a power of two, at most 32), and
/// `mask` must cover whole segments, including the calling lane's.
#[inline(always)]
pub unsafe fn min_u64(v: u64, width: u32, mask: u32) -> u64 {
    #[cfg(target_feature = "sm_80")]
    if width == 32 {
        // SAFETY: every lane of `mask` is here (the caller).
        let hi = unsafe { redux_min_u32((v >> 32) as u32, mask) };
        let lo = if (v >> 32) as u32 == hi {
            v as u32
        } else {
            u32::MAX
        };
        // SAFETY: as above.
        let lo = unsafe { redux_min_u32(lo, mask) };
        return (hi as u64) << 32 | lo as u64;
    }
    let (mut v, mut offset) = (v, width >> 1);
    while offset > 0 {
        // SAFETY: forwarded to the caller.
        v = v.min(unsafe { shfl_xor(v, offset, width, mask) });
        offset >>= 1;
    }
    v
}

/// `__reduce_min_sync` / `__reduce_max_sync` on `u32` (`redux.sync.{min,max}.u32`, sm_80 and later): the
/// least or greatest `v` of the lanes of `mask`, in each of them. One instruction where a butterfly takes
/// five shuffles and five compares.
macro_rules! redux_u32 {
    ($($(#[$doc:meta])* $name:ident: $op:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// Every lane in `mask` must execute this call, and `mask` must include the calling lane.
        #[cfg(target_feature = "sm_80")]
        #[inline(always)]
        unsafe fn $name(v: u32, mask: u32) -> u32 {
            let r: u32;
            // SAFETY: the caller upholds the convergence requirement.
            unsafe {
                asm!(concat!("redux.sync.", $op, ".u32 {0}, {1}, {2};"), out(reg32) r, in(reg32) v,
                     in(reg32) mask, options(nostack, nomem))
            };
            r
        }
    )*};
}
redux_u32! {
    /// The least `v` of the lanes of `mask`.
    redux_min_u32: "min";
    /// The greatest `v` of the lanes of `mask`.
    redux_max_u32: "max";
}

/// The greatest `v` of a whole warp, in every lane: one `redux.sync.max.u32` on sm_80 and later, a
/// butterfly of five shuffles before.
///
/// # Safety
/// Every lane of `mask` must execute this call, and `mask` must be the whole warp.
#[inline(always)]
pub unsafe fn max_u32(v: u32, mask: u32) -> u32 {
    #[cfg(target_feature = "sm_80")]
    // SAFETY: every lane of `mask` is here (the caller).
    return unsafe { redux_max_u32(v, mask) };
    #[cfg(not(target_feature = "sm_80"))]
    {
        let (mut v, mut offset) = (v, 16);
        while offset > 0 {
            // SAFETY: forwarded to the caller.
            v = v.max(unsafe { shfl_xor(v, offset, 32, mask) });
            offset >>= 1;
        }
        v
    }
}

/// `__any_sync`: true in every lane of `mask` when `pred` is true in at least one of them.
///
/// # Safety
/// Every lane in `mask` must execute this call, and `mask` must include the calling lane.
#[inline(always)]
pub unsafe fn any(mask: u32, pred: bool) -> bool {
    let r: u32;
    // SAFETY: the caller upholds the convergence requirement.
    unsafe {
        asm!("{{ .reg .pred p, q; setp.ne.u32 p, {1}, 0; vote.sync.any.pred q, p, {2}; selp.u32 {0}, 1, 0, q; }}",
             out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nostack, nomem))
    };
    r != 0
}

/// `__all_sync`: true in every lane of `mask` when `pred` is true in all of them.
///
/// # Safety
/// Every lane in `mask` must execute this call, and `mask` must include the calling lane.
#[inline(always)]
pub unsafe fn all(mask: u32, pred: bool) -> bool {
    let r: u32;
    // SAFETY: the caller upholds the convergence requirement.
    unsafe {
        asm!("{{ .reg .pred p, q; setp.ne.u32 p, {1}, 0; vote.sync.all.pred q, p, {2}; selp.u32 {0}, 1, 0, q; }}",
             out(reg32) r, in(reg32) pred as u32, in(reg32) mask, options(nostack, nomem))
    };
    r != 0
}

/// `%lanemask_lt`: the bits of the lanes below this one, so `(ballot & lanemask_lt()).count_ones()` is how
/// many lower lanes voted true (the rank of this lane among the voters).
#[inline(always)]
pub fn lanemask_lt() -> u32 {
    let r: u32;
    // SAFETY: reading a special register has no preconditions.
    unsafe { asm!("mov.u32 {0}, %lanemask_lt;", out(reg32) r, options(nostack, nomem, pure)) };
    r
}

/// `__activemask()`: the lanes executing this instruction together.
#[inline(always)]
pub fn active_mask() -> u32 {
    let r: u32;
    // SAFETY: `activemask` has no preconditions.
    unsafe { asm!("activemask.b32 {0};", out(reg32) r, options(nostack, nomem)) };
    r
}

/// `__syncwarp(mask)`.
///
/// # Safety
/// Every lane in `mask` must execute this call.
#[inline(always)]
pub unsafe fn sync_warp(mask: u32) {
    // SAFETY: the caller upholds the convergence requirement.
    unsafe { asm!("bar.warp.sync {0};", in(reg32) mask, options(nostack)) }
}

/// Reduces one value per lane over segments of `width` lanes (a power of two ≤ 32) with `Op`.
///
/// **Result:** valid in the first lane of each segment (lane 0 for a whole warp); other lanes may hold partial
/// values (an operator's own [`DeviceOp::warp_reduce`] may give it in every lane). The order is fixed, so the
/// same inputs give the same bits.
/// Example: lanes holding `0, 1, …, 31` with `Sum` give `496` in lane 0.
///
/// # Safety
/// Every lane in `mask` must call this converged with the same `width`; `mask` must cover whole segments.
#[inline(always)]
pub unsafe fn reduce<Op: DeviceOp>(v: Op::Acc, width: u32, mask: u32) -> Op::Acc {
    // SAFETY: forwarded to the caller.
    unsafe { Op::warp_reduce(v, width, mask) }
}

/// [`reduce`]'s default: a fixed `shfl_down` tree of whole accumulators, the result in the first lane of
/// each segment.
///
/// # Safety
/// As [`reduce`].
#[inline(always)]
pub unsafe fn tree_reduce<Op: DeviceOp>(mut v: Op::Acc, width: u32, mask: u32) -> Op::Acc {
    let mut offset = width >> 1;
    while offset > 0 {
        // SAFETY: forwarded to the caller.
        let other = unsafe { shfl_down(v, offset, width, mask) };
        v = Op::combine(v, other);
        offset >>= 1;
    }
    v
}

/// Like [`reduce`] but with a butterfly, so every lane of each segment ends with the result.
///
/// Combination order differs between lanes, so for floating-point sums lanes may differ in the last bit;
/// use [`reduce`] plus a broadcast where all lanes must agree bitwise.
///
/// # Safety
/// As [`reduce`].
#[inline(always)]
pub unsafe fn all_reduce<Op: DeviceOp>(mut v: Op::Acc, width: u32, mask: u32) -> Op::Acc {
    let mut offset = width >> 1;
    while offset > 0 {
        // SAFETY: forwarded to the caller.
        let other = unsafe { shfl_xor(v, offset, width, mask) };
        v = Op::combine(v, other);
        offset >>= 1;
    }
    v
}
