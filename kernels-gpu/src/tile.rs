//! Thread-block tiles in the manner of CUDA's cooperative groups: `Tile<W>` is this thread's group of `W`
//! consecutive lanes (`W` = 32, 16, 8, 4, 2 or 1) when the block is cut into tiles as `tiled_partition<W>`
//! does.
//!
//! The tile owns its member mask, so call sites never write `0xffffffff` or forget `activemask`: shuffles,
//! votes and `sync` name exactly the tile's own lanes (the whole warp when `W` = 32). Lanes are addressed by
//! their rank in the tile, and a shuffle never reads outside the tile. Every kernel of the crate runs whole
//! warps (see the crate docs), so every tile is full.
//!
//! **Safety of every collective:** all `W` lanes of the tile must call it converged (the same call, reached
//! together); lanes of other tiles need not take part. What "converged" rules out is a branch that only
//! some lanes of the tile take around the call.
use crate::arch;
use crate::op::DeviceOp;
use crate::shuffle::{self, Shuffle};
use crate::warp;

/// This thread's tile of `W` lanes (see the module docs).
#[derive(Clone, Copy)]
pub struct Tile<const W: u32> {
    /// The tile's lanes within the warp.
    mask: u32,
}

impl<const W: u32> Tile<W> {
    /// Lanes per tile.
    pub const SIZE: u32 = W;

    /// Bits 0..W set: the tile's lanes as seen from its own lane 0.
    const LOW_BITS: u32 = if W == 32 { u32::MAX } else { (1 << W) - 1 };

    /// The tile of `tiled_partition::<W>(this_thread_block())` that holds this thread.
    #[inline(always)]
    pub fn new() -> Self {
        const {
            assert!(
                W.is_power_of_two() && W <= 32,
                "a tile is 1, 2, 4, 8, 16 or 32 lanes"
            )
        };
        Tile {
            mask: Self::LOW_BITS << Self::first_lane(),
        }
    }

    /// Lane of the warp where this tile starts.
    #[inline(always)]
    fn first_lane() -> u32 {
        arch::lane_id() & !(W - 1)
    }

    /// The tile's lanes within the warp: the member mask of its shuffles and votes.
    #[inline(always)]
    pub fn mask(self) -> u32 {
        self.mask
    }

    /// This thread's rank in the tile, `0..W`.
    #[inline(always)]
    pub fn thread_rank(self) -> u32 {
        arch::thread_idx() & (W - 1)
    }

    /// This tile's index among the block's tiles, `0..meta_group_size()`.
    #[inline(always)]
    pub fn meta_group_rank(self) -> u32 {
        arch::thread_idx() / W
    }

    /// How many tiles the block is cut into.
    #[inline(always)]
    pub fn meta_group_size(self) -> u32 {
        arch::block_dim() / W
    }

    /// `__syncwarp` over the tile's lanes: orders their shared-memory accesses before and after it.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn sync(self) {
        // SAFETY: the caller guarantees the tile's lanes are converged here.
        unsafe { warp::sync_warp(self.mask) }
    }

    /// Every lane gets `v` of the lane of rank `src % W` (a broadcast when `src` is the same in every lane).
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn shfl<T: Shuffle>(self, v: T, src: u32) -> T {
        // SAFETY: converged per the caller; the hardware keeps `src` within the tile's segment.
        unsafe { shuffle::shfl_idx(v, src, W, self.mask) }
    }

    /// The lane of rank `r` gets `v` of rank `r - delta`; ranks below `delta` keep their own `v`.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn shfl_up<T: Shuffle>(self, v: T, delta: u32) -> T {
        // SAFETY: converged per the caller; the segment width keeps reads inside the tile.
        unsafe { shuffle::shfl_up(v, delta, W, self.mask) }
    }

    /// The lane of rank `r` gets `v` of rank `r + delta`; ranks at or past `W - delta` keep their own `v`.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn shfl_down<T: Shuffle>(self, v: T, delta: u32) -> T {
        // SAFETY: converged per the caller; the segment width keeps reads inside the tile.
        unsafe { shuffle::shfl_down(v, delta, W, self.mask) }
    }

    /// The lane of rank `r` gets `v` of rank `r ^ (lane_mask % W)`.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn shfl_xor<T: Shuffle>(self, v: T, lane_mask: u32) -> T {
        // Masking keeps the partner inside the tile (PTX would let a lane read an earlier tile).
        // SAFETY: converged per the caller.
        unsafe { shuffle::shfl_xor(v, lane_mask & (W - 1), W, self.mask) }
    }

    /// Bit `r` (for `r < W`) is set when the lane of rank `r` passes a true `pred`; higher bits are 0. The
    /// same value in every lane.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn ballot(self, pred: bool) -> u32 {
        // SAFETY: converged per the caller; the member mask is the tile.
        let bits = unsafe { warp::ballot(self.mask, pred) };
        (bits >> Self::first_lane()) & Self::LOW_BITS
    }

    /// True in every lane when `pred` is true in at least one lane of the tile.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn any(self, pred: bool) -> bool {
        // SAFETY: converged per the caller; the vote covers the tile's lanes only.
        unsafe { warp::any(self.mask, pred) }
    }

    /// True in every lane when `pred` is true in all lanes of the tile.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn all(self, pred: bool) -> bool {
        // SAFETY: converged per the caller; the vote covers the tile's lanes only.
        unsafe { warp::all(self.mask, pred) }
    }

    /// Reduces one value per lane with `Op` ([`crate::warp::reduce`]: a `shfl_down` tree, or the operator's
    /// own warp reduction).
    ///
    /// **Result:** in the lane of rank 0; other lanes may hold partial values. The order is fixed, so the
    /// same inputs give the same bits.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn reduce<Op: DeviceOp>(self, v: Op::Acc) -> Op::Acc {
        // SAFETY: converged per the caller; the mask covers exactly this tile's segment.
        unsafe { warp::reduce::<Op>(v, W, self.mask) }
    }

    /// Reduces one value per lane with `Op` by a `shfl_xor` butterfly.
    ///
    /// **Result:** in every lane. For floating-point sums the lanes combine in different orders and may
    /// differ in the last bit; use [`reduce`](Self::reduce) and a [`shfl`](Self::shfl) from rank 0 where
    /// they must agree bitwise.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn all_reduce<Op: DeviceOp>(self, v: Op::Acc) -> Op::Acc {
        // SAFETY: converged per the caller; the mask covers exactly this tile's segment.
        unsafe { warp::all_reduce::<Op>(v, W, self.mask) }
    }

    /// Inclusive prefix over the tile's ranks (Hillis–Steele on `shfl_up`, `log2 W` steps).
    ///
    /// **Result:** in every lane; rank `r` gets `v₀ ⊕ v₁ ⊕ … ⊕ v_r`, combined in rank order (earlier operand
    /// on the left), so the lane of rank `W - 1` holds the tile's total.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn inclusive_scan<Op: DeviceOp>(self, mut v: Op::Acc) -> Op::Acc {
        let rank = self.thread_rank();
        let mut delta = 1;
        while delta < W {
            // SAFETY: converged per the caller; every lane shuffles, only the combine is conditional.
            let earlier = unsafe { self.shfl_up(v, delta) };
            if rank >= delta {
                v = Op::combine(earlier, v);
            }
            delta <<= 1;
        }
        v
    }

    /// Exclusive prefix over the tile's ranks: the [`inclusive_scan`](Self::inclusive_scan) shifted up one
    /// rank, with `Op::identity()` at rank 0.
    ///
    /// **Result:** in every lane; rank `r` gets `v₀ ⊕ … ⊕ v_{r-1}`.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn exclusive_scan<Op: DeviceOp>(self, v: Op::Acc) -> Op::Acc {
        // SAFETY: converged per the caller.
        let (exclusive, _) = unsafe { self.scan::<Op>(v) };
        exclusive
    }

    /// The exclusive prefix and the tile's total in one pass.
    ///
    /// **Result:** in every lane: `(v₀ ⊕ … ⊕ v_{r-1}, v₀ ⊕ … ⊕ v_{W-1})`.
    ///
    /// # Safety
    /// Every lane of the tile must call this converged (see the module docs).
    #[inline(always)]
    pub unsafe fn scan<Op: DeviceOp>(self, v: Op::Acc) -> (Op::Acc, Op::Acc) {
        // SAFETY: converged per the caller (all three calls are made by every lane).
        unsafe {
            let inclusive = self.inclusive_scan::<Op>(v);
            let shifted = self.shfl_up(inclusive, 1);
            let total = self.shfl(inclusive, W - 1);
            (
                if self.thread_rank() == 0 {
                    Op::identity()
                } else {
                    shifted
                },
                total,
            )
        }
    }
}

impl<const W: u32> Default for Tile<W> {
    fn default() -> Self {
        Self::new()
    }
}
