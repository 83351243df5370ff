//! Warp-level primitives: the four shuffles, votes, and the warp reduction built on them.
//!
//! Shuffles move 32-bit words; [`Shuffle`] lets any accumulator (a float, a 64-bit integer, a value–index
//! pair) travel as a sequence of words, so one reduction body serves every operator and element type.
use core::arch::asm;

use crate::op::ReduceOp;

/// Mask of all 32 lanes.
pub const FULL_MASK: u32 = 0xffff_ffff;

macro_rules! shfl_u32 {
    ($(#[$doc:meta])* $name:ident, $mode:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Every lane named in `mask` must execute this same call (converged), and `mask` must include the
        /// calling lane. `c` is PTX's clamp/segment operand: `((32 - width) << 8) | clamp`.
        #[inline(always)]
        pub unsafe fn $name(v: u32, b: u32, c: u32, mask: u32) -> u32 {
            let r: u32;
            // SAFETY: the caller upholds the convergence and mask requirements.
            unsafe {
                asm!(concat!("shfl.sync.", $mode, ".b32 {0}, {1}, {2}, {3}, {4};"),
                     out(reg32) r, in(reg32) v, in(reg32) b, in(reg32) c, in(reg32) mask,
                     options(nostack, nomem))
            };
            r
        }
    };
}
shfl_u32!(
    /// `__shfl_down_sync` on one word: lane `i` reads lane `i + b` of its segment (its own past the end).
    shfl_down_u32,
    "down"
);
shfl_u32!(
    /// `__shfl_up_sync` on one word: lane `i` reads lane `i - b` of its segment (its own below 0).
    shfl_up_u32,
    "up"
);
shfl_u32!(
    /// `__shfl_xor_sync` on one word: lane `i` reads lane `i ^ b`.
    shfl_xor_u32,
    "bfly"
);
shfl_u32!(
    /// `__shfl_sync` on one word: every lane reads lane `b` of its segment.
    shfl_idx_u32,
    "idx"
);

/// The `c` operand of a down/xor/idx shuffle over segments of `width` lanes.
#[inline(always)]
pub const fn clamp_for(width: u32) -> u32 {
    ((32 - width) << 8) | 0x1f
}

/// The `c` operand of an up shuffle over segments of `width` lanes.
#[inline(always)]
pub const fn clamp_up_for(width: u32) -> u32 {
    (32 - width) << 8
}

/// A value that can cross lanes word by word.
///
/// # Safety
/// `map_words` must rebuild `Self` from the images of exactly the words it is made of, so that the identity
/// map gives back the same value.
pub unsafe trait Shuffle: Copy {
    /// Applies `f` to each 32-bit word of `self` and reassembles the result.
    fn map_words(self, f: impl FnMut(u32) -> u32) -> Self;
}

macro_rules! shuffle_32 {
    ($($t:ty),*) => {$(
        // SAFETY: a 32-bit value is one word.
        unsafe impl Shuffle for $t {
            #[inline(always)]
            fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
                <$t>::from_ne_bytes(f(u32::from_ne_bytes(self.to_ne_bytes())).to_ne_bytes())
            }
        }
    )*};
}
macro_rules! shuffle_64 {
    ($($t:ty),*) => {$(
        // SAFETY: a 64-bit value is two words, low then high.
        unsafe impl Shuffle for $t {
            #[inline(always)]
            fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
                let bits = u64::from_ne_bytes(self.to_ne_bytes());
                let lo = f(bits as u32) as u64;
                let hi = f((bits >> 32) as u32) as u64;
                <$t>::from_ne_bytes((lo | (hi << 32)).to_ne_bytes())
            }
        }
    )*};
}
shuffle_32!(u32, i32, f32);
shuffle_64!(u64, i64, f64);

// SAFETY: a byte travels in the low bits of one word.
unsafe impl Shuffle for u8 {
    #[inline(always)]
    fn map_words(self, mut f: impl FnMut(u32) -> u32) -> Self {
        f(self as u32) as u8
    }
}

/// `__shfl_down_sync` for any [`Shuffle`] value, over segments of `width` lanes.
///
/// # Safety
/// As [`shfl_down_u32`].
#[inline(always)]
pub unsafe fn shfl_down<T: Shuffle>(v: T, delta: u32, width: u32, mask: u32) -> T {
    // SAFETY: forwarded to the caller.
    v.map_words(|w| unsafe { shfl_down_u32(w, delta, clamp_for(width), mask) })
}

/// `__shfl_up_sync` for any [`Shuffle`] value, over segments of `width` lanes.
///
/// # Safety
/// As [`shfl_up_u32`].
#[inline(always)]
pub unsafe fn shfl_up<T: Shuffle>(v: T, delta: u32, width: u32, mask: u32) -> T {
    // SAFETY: forwarded to the caller.
    v.map_words(|w| unsafe { shfl_up_u32(w, delta, clamp_up_for(width), mask) })
}

/// `__shfl_xor_sync` for any [`Shuffle`] value, over segments of `width` lanes.
///
/// # Safety
/// As [`shfl_xor_u32`].
#[inline(always)]
pub unsafe fn shfl_xor<T: Shuffle>(v: T, lane_mask: u32, width: u32, mask: u32) -> T {
    // SAFETY: forwarded to the caller.
    v.map_words(|w| unsafe { shfl_xor_u32(w, lane_mask, clamp_for(width), mask) })
}

/// `__shfl_sync` for any [`Shuffle`] value: read lane `src` of this segment of `width` lanes.
///
/// # Safety
/// As [`shfl_idx_u32`].
#[inline(always)]
pub unsafe fn shfl_idx<T: Shuffle>(v: T, src: u32, width: u32, mask: u32) -> T {
    // SAFETY: forwarded to the caller.
    v.map_words(|w| unsafe { shfl_idx_u32(w, src, clamp_for(width), mask) })
}

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
/// **Result:** valid in the first lane of each segment only (lane 0 for a whole warp); other lanes hold partial
/// values. The tree is fixed, so the same inputs give the same bits.
/// Example: lanes holding `0, 1, …, 31` with `Sum` give `496` in lane 0.
///
/// # Safety
/// Every lane in `mask` must call this converged with the same `width`; `mask` must cover whole segments.
#[inline(always)]
pub unsafe fn reduce<Op: ReduceOp>(mut v: Op::Acc, width: u32, mask: u32) -> Op::Acc {
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
pub unsafe fn all_reduce<Op: ReduceOp>(mut v: Op::Acc, width: u32, mask: u32) -> Op::Acc {
    let mut offset = width >> 1;
    while offset > 0 {
        // SAFETY: forwarded to the caller.
        let other = unsafe { shfl_xor(v, offset, width, mask) };
        v = Op::combine(v, other);
        offset >>= 1;
    }
    v
}
